"""Replay and compare (``ag2net.debug.replay``/``compare``) on a fork of the demo's conversation: with no
overrides and replay models the original transcript comes back exactly (determinism); a different model
for one agent diverges at its first reply; a narrower view changes that agent's projected history while the
transcript stays the same; the source hub is never written."""

from __future__ import annotations

from typing import Any

import pytest
from support import quiet, run_demo

from ag2net import Hub, HubClient, ScriptedModel
from ag2net.debug import fork
from ag2net.debug.replay import Override, ReplayModel, compare, replay


@pytest.fixture
async def demo_hub() -> Any:
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    demo = await run_demo(hc)
    cid = next(c for c, step in demo.steps.items() if step == "pairing")
    yield hub, cid, demo
    await hc.close()
    await hub.close()


async def test_forking_the_demo_conversation_at_seq_1_replays_it_exactly(demo_hub):
    hub, cid, demo = demo_hub
    before = (await hub.store.read_wal(cid), len(await hub.list_turns(limit=1000)))
    async with await fork(hub, cid, 1) as box:
        result = await replay(hub, box, timeout=30)
        diff = compare(result)
    assert (result.stopped, result.first_divergence) == ("original replayed", None)
    assert diff.identical and diff.why == "" and len(diff.rows) == 20
    assert [(e.sender_id, e.event_type, e.event_data) for e in result.replayed] == [
        (e.sender_id, e.event_type, e.event_data) for e in result.original
    ]
    # every turn saw the same history, input and tools and gave the same reply
    assert len(diff.turns) == len(result.original_turns) == 15
    assert diff.first_turn is None and all(t["history_same"] and t["reply_same"] for t in diff.turns)
    assert all(isinstance(m, ReplayModel) and m.diverged is None for m in result.models.values())
    assert (await hub.store.read_wal(cid), len(await hub.list_turns(limit=1000))) == before


async def test_another_model_for_the_critic_diverges_at_its_first_reply(demo_hub):
    hub, cid, demo = demo_hub
    critic = demo["critic"].agent_id
    async with await fork(hub, cid, 1) as box:
        result = await replay(
            hub,
            box,
            overrides={"critic": Override(model=ScriptedModel("I disagree.", loop=True))},
            timeout=30,
        )
        diff = compare(result)
    assert result.first_divergence == 4 and result.stopped == "diverged"
    row = diff.rows[4]
    assert row["original"]["sender_id"] == row["replayed"]["sender_id"] == critic
    assert row["replayed"]["event_data"] == {"text": "I disagree."}
    assert (diff.first_divergence, diff.why) == (4, "different reply")
    assert diff.first_turn is not None and diff.first_turn["agent_id"] == critic
    assert diff.turn_why == "different reply"


async def test_a_narrower_view_gets_no_recorded_reply_and_the_replay_says_so(demo_hub):
    # The replay model answers only a request equal to a recorded one: with a window of two the critic's
    # third turn asks something else, so the replay stops there in words instead of claiming "no divergence".
    hub, cid, demo = demo_hub
    critic = demo["critic"].agent_id
    view = {"name": "windowed_summary", "recent_n": 2}
    async with await fork(hub, cid, 1) as box:
        result = await replay(hub, box, overrides={critic: Override(view=view)}, timeout=30, step_timeout=2)
        diff = compare(result)
        assert box.hub.lookup_channel(cid).knobs["view_policies"] == {critic: view}
    assert not diff.identical and diff.first_divergence == 8  # seq 9: the critic's third reply
    assert diff.verdict == (
        "stopped at seq 9: critic's model is `replay` and has no recorded reply for a changed request; "
        "give critic `scripted` or `openai` to go on"
    )
    model = result.models[critic]
    assert isinstance(model, ReplayModel) and model.diverged is not None and "history" in model.diverged
    first = diff.first_turn
    assert first is not None and first["agent_id"] == critic and first["turn"] == 3
    assert first["inputs_same"] and not first["history_same"] and not first["reply_same"]
    assert first["answered_by"].startswith("no answer")
    assert first["history_delta"]["added"][0]["type"] == "compaction_summary"
    # the two turns before fit a window of two: answered from the recording
    critics = [t["answered_by"] for t in diff.turns if t["agent_id"] == critic]
    assert critics[:3] == ["the recording"] * 2 + [first["answered_by"]]


async def test_an_override_for_a_stranger_is_refused(demo_hub):
    hub, cid, _ = demo_hub
    async with await fork(hub, cid, 1) as box:
        with pytest.raises(ValueError, match=r"^override names 'zed', which is not an agent of the sandbox$"):
            await replay(hub, box, overrides={"zed": Override(system_prompt="hi")})


async def test_forking_at_seq_7_starts_each_agent_at_its_turn_after_the_fork(demo_hub):
    # the case: at seq 7 the critic has answered twice and the coder once; the 12 turns after the
    # fork are the original's, numbered from each agent's own count, and every one is reproduced
    hub, cid, demo = demo_hub
    async with await fork(hub, cid, 7) as box:
        result = await replay(hub, box, timeout=30)
        diff = compare(result)
    assert diff.verdict == "completed: 20 of 20 envelopes reproduced" and diff.first_turn is None
    coder, critic = demo["coder"].agent_id, demo["critic"].agent_id
    assert result.turns_before == {critic: 2, coder: 1}
    assert len(diff.turns) == 12
    assert [(r["agent_id"], r["turn"]) for r in diff.turns[:3]] == [(coder, 2), (critic, 3), (coder, 3)]
    assert all(r["answered_by"] == "the recording" for r in diff.turns)

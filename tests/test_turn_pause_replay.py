"""Replays of channels where a person stepped into a turn (``ag2net.debug.replay`` reads ``TurnRecord.operator``):
a turn answered in the agent's place is replayed with the person's answer (its record keeps the request that
would have gone out) and the turn row says "answered by NAME"; a turn whose messages were edited diverges in
the replay (no one edits there) and the verdict says the original was edited by NAME — not a bare
"different reply"."""

from __future__ import annotations

from typing import Any

from support import until
from test_turn_pause_support import next_waiting, open_stepping_hub

from ag2net import EV_TEXT, Agent, HubClient, Passport, ScriptedModel
from ag2net.debug import fork
from ag2net.debug.replay import compare, replay
from ag2net.events import ModelMessage


async def _critic_turn(tmp_path: Any, action: str, **answer: Any) -> tuple[Any, Any, str, Any]:
    hub = await open_stepping_hub(tmp_path)
    hc = HubClient.local(hub)
    critic = await hc.register(
        Agent("critic", ScriptedModel("the model's verdict"), system_prompt="Critique.")
    )
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    await hub.break_on("agent:critic", on="turn", by="alice")
    channel = await alice.open(type="consulting", target="critic")
    await alice.send(channel.channel_id, "draft")
    item = await next_waiting(hub, "turn")
    await hub.answer_waiting(item.item_id, action, by="alice", **answer)
    await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
    await until(lambda: hc.list_turns(agent_id=critic.agent_id), message="no turn record")
    return hub, hc, channel.channel_id, critic


async def test_an_answered_turn_replays_with_the_persons_answer(tmp_path):
    hub, hc, cid, critic = await _critic_turn(tmp_path, "answer", text="alice, in the critic's seat")
    try:
        async with await fork(hub, cid, 1) as box:
            result = await replay(hub, box, timeout=30)
            diff = compare(result)
        assert diff.identical, diff.verdict
        replies = [e for e in result.replayed if e.sender_id == critic.agent_id and e.event_type == EV_TEXT]
        assert [e.event_data["text"] for e in replies] == ["alice, in the critic's seat"]
        [row] = [r for r in diff.turns if r["agent_id"] == critic.agent_id]
        assert row["operator"] == "answered by alice" and row["reply_same"]
    finally:
        await hc.close()
        await hub.close()


async def test_an_edited_turn_diverges_and_the_verdict_names_the_editor(tmp_path):
    hub, hc, cid, critic = await _critic_turn(
        tmp_path, "edit", messages=[ModelMessage("only this").to_dict()], system_prompt="Be kind."
    )
    try:
        async with await fork(hub, cid, 1) as box:
            result = await replay(hub, box, timeout=30)
            diff = compare(result)
        assert not diff.identical
        assert (
            diff.operator
            == "critic's turn there was edited by alice (messages, system_prompt) in the original"
        )
        assert diff.verdict.endswith("; " + diff.operator)
        [row] = [r for r in diff.turns if r["agent_id"] == critic.agent_id]
        assert row["operator"] == "edited by alice (messages, system_prompt)"
    finally:
        await hc.close()
        await hub.close()

"""Tool policies in a replay (``Override.tools``), the turn record's keeping of what a replay needs (a custom
view's parameters, each model call's request), and the sentences a replay gives when it cannot answer.

On the demo's review workflow: ``recorded`` (the default) reproduces it, the drafter's own tool included;
``live`` calls the real ``submit_for_review`` of this process and reproduces it too; ``static:JSON`` changes
what the drafter's model sees, so the replay model has no recorded reply and says so; ``live`` for a tool
this process does not have names the fix."""

from __future__ import annotations

from typing import Any

import pytest
from support import quiet, run_demo, until

from ag2net import Agent, Hub, HubClient, Passport, ScriptedModel
from ag2net.debug import compare, fork
from ag2net.debug.replay import Override, ToolPolicy, replay
from ag2net.demo import REVIEW_REQUEST
from ag2net.envelope import EV_TEXT
from ag2net.views import ViewPolicy
from ag2net.views.registry import register_view, unregister_view


@pytest.fixture
async def workflow() -> Any:
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    demo = await run_demo(hc)
    cid = next(c for c, step in demo.steps.items() if step == "workflow")
    yield hub, cid
    await hc.close()
    await hub.close()


async def _replay(hub: Hub, cid: str, at: int, **kwargs: Any) -> Any:
    async with await fork(hub, cid, at) as box:
        result = await replay(hub, box, timeout=20, step_timeout=2, **kwargs)
        return result, compare(result)


async def test_recorded_and_live_tools_reproduce_the_workflow(workflow):
    hub, cid = workflow
    n = hub.wal_count(cid)
    result, diff = await _replay(hub, cid, 6)
    assert diff.verdict == f"completed: {n} of {n} envelopes reproduced" and diff.first_turn is None
    assert [e.event_type for e in result.replayed].count(REVIEW_REQUEST) == 2  # done again, from the record
    live = {
        "drafter": Override(tools={"submit_for_review": "live"}),
        "reviewer": Override(tools={"*": "live"}),
    }
    result, diff = await _replay(hub, cid, 6, overrides=live)
    assert diff.verdict == f"completed: {n} of {n} envelopes reproduced" and diff.first_turn is None
    assert [e.event_type for e in result.replayed].count(REVIEW_REQUEST) == 2  # posted by the real tool


async def test_a_static_result_changes_the_request_and_the_replay_says_who_needs_a_model(workflow):
    hub, cid = workflow
    static = {"drafter": Override(tools={"submit_for_review": ToolPolicy.parse('static:"sent"')})}
    result, diff = await _replay(hub, cid, 6, overrides=static)
    assert diff.verdict == (
        "stopped at seq 7: drafter's model is `replay` and has no recorded reply for a changed request; "
        "give drafter `scripted` or `openai` to go on"
    )
    [turn] = [t for t in result.replayed_turns if t["agent_id"] == hub.find_agent_id("drafter")]
    assert turn["tool_calls"][0]["result"] == "sent" and turn["error"].startswith("ReplayDiverged")


async def test_live_for_a_tool_this_process_lacks_names_the_fix(workflow):
    hub, cid = workflow
    live = {"drafter": Override(tools={"submit_for_review": "live"})}
    result, diff = await _replay(hub, cid, 6, overrides=live, functions={})
    assert diff.verdict == (
        "stopped early at seq 7 because drafter's tool 'submit_for_review' is not in this process and its "
        "policy is live; load the network that has it (--network module:function, or replay(functions=...)) "
        "or give it static:JSON"
    )


def test_a_tool_policy_is_recorded_live_or_static_json():
    assert (ToolPolicy.parse("recorded"), ToolPolicy.parse("live")) == (ToolPolicy(), ToolPolicy("live"))
    assert ToolPolicy.parse('static:{"a": [1]}') == ToolPolicy("static", {"a": [1]})
    assert str(ToolPolicy.parse('static:{"a": [1]}')) == 'static:{"a": [1]}'
    with pytest.raises(
        ValueError, match=r"^tool policy 'later' is not one of recorded, live or static:JSON$"
    ):
        ToolPolicy.parse("later")
    with pytest.raises(ValueError, match=r"^static:nope is not JSON"):
        ToolPolicy.parse("static:nope")


class FromOneOnly(ViewPolicy):
    """The seed's custom view: only one sender's texts (no ``params()`` of its own)."""

    name = "from_one_only"

    def __init__(self, sender_id: str) -> None:
        self.sender_id = sender_id

    async def project(self, wal, *, participant_id, channel, render_envelope, name_for=lambda a: a):
        from ag2net.events import ModelRequest, TextInput

        return [
            ModelRequest([TextInput(render_envelope(e) or "")])
            for e in wal
            if e.event_type == EV_TEXT and e.sender_id == self.sender_id
        ]


async def test_the_turn_record_keeps_a_custom_views_parameters_and_every_model_request():
    register_view("from_one_only", FromOneOnly, replace=True)
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        bob = await hc.register(Agent("bob", ScriptedModel("noted")), Passport(name="bob"))
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        knobs = {"view_policy": {"name": "from_one_only", "sender_id": alice.agent_id}}
        ch = await alice.open(type="conversation", target="bob", knobs=knobs)
        await alice.send(ch.channel_id, "hello")
        await until(lambda: hc.list_turns(agent_id=bob.agent_id))
        await bob.idle()
        [record] = await hc.list_turns(agent_id=bob.agent_id)
        assert record.view == {"name": "from_one_only", "sender_id": alice.agent_id}
        assert len(record.rounds) == record.model_calls == 1
        assert record.rounds[0]["content"] == "noted" and len(record.rounds[0]["request"]) == 64
        async with await fork(hub, ch.channel_id, 4) as box:  # invite, ack, opened, hello
            faithful = compare(await replay(hub, box, timeout=10, step_timeout=2))
        assert faithful.verdict == "completed: 5 of 5 envelopes reproduced"
        # a process without the view: the replay says which and how to get it, in one sentence
        unregister_view("from_one_only")
        async with await fork(hub, ch.channel_id, 4) as box:
            diff = compare(await replay(hub, box, timeout=10, step_timeout=2))
        assert diff.verdict == (
            "stopped early at seq 5 because bob's view 'from_one_only' is not registered in this process; load "
            "the network that registers it (--network module:function) or give bob another view (--view bob=NAME)"
        )
    finally:
        unregister_view("from_one_only")
        await hc.close()
        await hub.close()

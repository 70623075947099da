"""Why a turn's prompt-cache read fell (``ag2net.cache_diff``): each explanation, from turn records — a window
that slid (from a real hub's conversation, seq numbers from its WAL), tools that changed order or set or
schema, a changed system prompt, a re-rendered peer card, a changed model, a changed message, and none."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import until

from ag2net import Agent, Passport, ScriptedModel
from ag2net.agent.models import ModelResponse
from ag2net.cache_diff import cache_drops, cache_read, cards_in, request_change, seq_finder, view_label
from ag2net.client.turns import TurnRecord
from ag2net.events import CompactionSummary, ModelMessage, ModelRequest, TextInput

pytestmark = pytest.mark.hub(store="memory", invite_ack_timeout=3)


def tool_schema(name: str, description: str = "") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description or name, "parameters": {"type": "object"}},
    }


CARD = "---\nname: researcher\ndescription: {what}\n---\n\n## Capabilities\n- search\n"


def base(**kw: Any) -> TurnRecord:
    record = TurnRecord(
        channel_id="c",
        agent_id="a",
        trigger_envelope_id="e",
        system_prompt="You are planner.\n\nBe brief.",
        history=[ModelRequest([TextInput("hello")]), ModelMessage("hi")],
        inputs=[TextInput("next?")],
        tools=[tool_schema("say"), tool_schema("peers"), tool_schema("tasks")],
        view={"name": "full_transcript"},
        model_params={"model": "gpt-4o"},
        rounds=[{"request": "x", "usage": {"prompt_tokens": 2000, "cached_tokens": 1536}}],
    )
    for key, value in kw.items():
        setattr(record, key, value)
    return record


def changed(**kw: Any) -> TurnRecord:
    record = copy.deepcopy(base())
    for key, value in kw.items():
        setattr(record, key, value)
    return record


def test_tools_offered_changed_order():
    tools = [tool_schema("peers"), tool_schema("say"), tool_schema("tasks")]
    change = request_change(base(), changed(tools=tools))
    assert (change.kind, change.position) == ("tools_order", "tools")
    assert change.reason == "tools offered changed order: `peers` is now where `say` was"


def test_tools_offered_changed_set_and_schema():
    more = request_change(
        base(), changed(tools=[tool_schema("say"), tool_schema("tasks"), tool_schema("delegate")])
    )
    assert more.reason == "tools offered changed: `delegate` added, `peers` removed"
    schema = request_change(
        base(),
        changed(tools=[tool_schema("say"), tool_schema("peers", "Find peers (v2)"), tool_schema("tasks")]),
    )
    assert (schema.kind, schema.reason) == ("tool_schema", "the schema of tool `peers` changed")


def test_system_prompt_changed():
    change = request_change(base(), changed(system_prompt="You are planner.\n\nBe very brief."))
    assert (change.kind, change.position) == ("system", 0)
    assert change.reason == "system prompt changed (from line 3)"


def test_a_peer_card_was_re_rendered_in_the_system_prompt():
    before = base(system_prompt="You are planner.\n\n" + CARD.format(what="Finds sources"))
    after = changed(system_prompt="You are planner.\n\n" + CARD.format(what="Finds and ranks sources"))
    change = request_change(before, after)
    assert change.kind == "peer_card"
    assert (
        change.reason == "a peer card was re-rendered: `researcher`'s skill card in the system prompt differs"
    )
    assert list(cards_in(after.system_prompt)) == ["researcher"]


def test_a_peer_card_was_re_rendered_in_a_message():
    card = CARD.format(what="v1")
    before = base(history=[ModelRequest([TextInput("[researcher]: " + card)]), ModelMessage("thanks")])
    after = changed(
        history=[ModelRequest([TextInput("[researcher]: " + CARD.format(what="v2"))]), ModelMessage("thanks")]
    )
    change = request_change(before, after)
    assert (change.kind, change.position) == ("peer_card", 1)
    assert change.reason == "a peer card was re-rendered: `researcher`'s card in message 1"


def test_model_changed_and_a_plain_message_changed():
    assert request_change(base(), changed(model_params={"model": "gpt-4o-mini"})).reason == (
        "model changed from `gpt-4o` to `gpt-4o-mini`"
    )
    edited = request_change(
        base(), changed(history=[ModelRequest([TextInput("hello!")]), ModelMessage("hi")])
    )
    assert (edited.kind, edited.position) == ("message", 1)
    assert edited.reason == "message 1 (user) changed: “hello” is now “hello!”"


def test_a_request_that_extends_the_previous_one_blames_the_provider():
    longer = changed(
        history=[*base().history, ModelRequest([TextInput("next?")]), ModelMessage("sure")],
        inputs=[TextInput("and then?")],
    )
    change = request_change(base(), longer)
    assert change.kind == "none"
    assert change.reason.endswith("the provider's cache expired or was evicted")


def test_window_slide_without_seqs_names_the_message():
    before = base(view={"name": "windowed_summary", "recent_n": 2})
    after = changed(
        view={"name": "windowed_summary", "recent_n": 2},
        history=[
            CompactionSummary("Earlier in this channel: 2 messages from alice, planner.", 2),
            ModelRequest([TextInput("next?")]),
            ModelMessage("ok"),
        ],
    )
    change = request_change(before, after)
    assert change.kind == "window"
    assert (
        change.reason
        == "window slid: `windowed_summary(recent_n=2)` dropped message 1–2 (“hello”) from the front"
    )
    assert view_label(after) == "windowed_summary(recent_n=2)"


def test_cache_read_and_drops_pick_the_falls_only():
    a = base(turn_id="t1")
    b = changed(
        turn_id="t2", rounds=[{"request": "y", "usage": {"prompt_tokens": 2100, "cached_tokens": 1900}}]
    )
    c = changed(
        turn_id="t3",
        tools=[tool_schema("tasks"), tool_schema("say"), tool_schema("peers")],
        rounds=[{"request": "z", "usage": {"prompt_tokens": 2200}}],
    )
    estimate = changed(turn_id="t4", rounds=[{"request": "w"}], token_method="heuristic")
    assert [cache_read(r) for r in (a, b, c, estimate)] == [1536, 1900, 0, None]
    (drop,) = cache_drops([a, b, c, estimate])
    assert (drop.turn_id, drop.previous_turn_id, drop.before, drop.after) == ("t3", "t2", 1900, 0)
    assert (
        drop.sentence
        == "cache read fell from 1900 to 0 tokens: tools offered changed order: `tasks` is now where `say` was"
    )
    assert (
        cache_drops([a.to_dict(), b.to_dict(), c.to_dict()])[0].change.kind == "tools_order"
    )  # stored dicts too


async def test_a_windowed_view_sliding_on_a_real_hub_names_the_seqs_it_dropped(hub, hc):
    def answer(text: str, cached: int) -> ModelResponse:
        return ModelResponse(
            content=text, usage={"prompt_tokens": 800, "completion_tokens": 5, "cached_tokens": cached}
        )

    model = ScriptedModel(answer("b1", 0), answer("b2", 640), answer("b3", 0))
    bob = await hc.register(Agent("bob", model, "You are terse."))
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(
        type="conversation", target="bob", knobs={"view_policy": {"name": "windowed_summary", "recent_n": 2}}
    )
    for n, text in enumerate(["a1", "a2", "a3"], start=1):
        await ch.send(text)

        async def answered(n=n) -> bool:
            return len(await hc.list_turns(agent_id=bob.agent_id, limit=10)) >= n

        await until(answered)
        await bob.idle()
    records = sorted(await hc.list_turns(agent_id=bob.agent_id, limit=10), key=lambda r: r.started_at)
    assert [cache_read(r) for r in records] == [0, 640, 0]
    md = await hc.get_channel(ch.channel_id)
    render = hc.adapter_for_metadata(md).render_envelope
    rows = await hub.read_wal_seq(ch.channel_id, 1, hub.wal_count(ch.channel_id))
    seq_of = seq_finder((seq, render(env) or "") for seq, env in rows if render(env))
    by_text = {render(env): seq for seq, env in rows if render(env)}
    (drop,) = cache_drops(records, seq_of=seq_of)
    assert drop.change.kind == "window"
    assert drop.change.reason == (
        f"window slid: `windowed_summary(recent_n=2)` dropped seq {by_text['a1']}, {by_text['b1']} from the front"
    )

"""Turn breakpoints on the agent's side (issue 24 §3): before the model call the handler asks the hub's turn
gate; a paused turn shows the exact request about to go out and a person continues it, edits its messages or
system prompt (the model receives the edit), answers in the agent's place (the round envelope is the agent's,
with the person's text, and no model call) or skips it (no post). The turn record says who did what.

Each case runs with the agent in-process (``HubClient.local``) and on a ``HubClient`` over a real WebSocket
(``serve_ws`` on 127.0.0.1). The hub is the real one (issue 24's hub side), on SQLite."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support import until
from test_turn_pause_support import next_waiting, open_stepping_hub

from ag2net import EV_TEXT, Agent, HubClient, Passport, ScriptedModel, tool
from ag2net.client.turns import TurnRecord, operator_label
from ag2net.errors import ProtocolError
from ag2net.events import ModelMessage, ModelRequest, TextInput, event_from_dict

PROMPT = "You are a harsh critic."


@tool(requires_approval=True)
def publish(title: str) -> str:
    """Publish a draft."""
    return f"published {title}"


@pytest.fixture(params=["local", "ws"])
async def net(request, tmp_path) -> AsyncIterator[dict[str, Any]]:
    """A stepping hub; ``agents``: the client the critic registers on (in-process, or over a WebSocket);
    ``alice``: a human in-process who talks to it."""
    hub = await open_stepping_hub(tmp_path)
    local = HubClient.local(hub)
    async with contextlib.AsyncExitStack() as stack:
        if request.param == "ws":
            from ag2net.server import serve_ws

            server = await stack.enter_async_context(serve_ws(hub, "127.0.0.1", 0))
            agents = HubClient.connect(server.url(), rpc_timeout=10)
            stack.push_async_callback(agents.close)
        else:
            agents = local
        alice = await local.register_human(Passport(name="alice", kind="human"))
        yield {"hub": hub, "local": local, "agents": agents, "alice": alice, "mode": request.param}
    await local.close()
    await hub.close()


async def critic_on(net: dict[str, Any], *turns: Any) -> tuple[Any, ScriptedModel]:
    model = ScriptedModel(*turns, name="critic-model")
    client = await net["agents"].register(Agent("critic", model, system_prompt=PROMPT, tools=[publish]))
    return client, model


async def ask_critic(net: dict[str, Any], text: str) -> str:
    channel = await net["alice"].open(type="consulting", target="critic")
    await net["alice"].send(channel.channel_id, text)
    return channel.channel_id


async def the_turn(net: dict[str, Any], critic: Any) -> TurnRecord:
    found: list[TurnRecord] = []

    async def recorded() -> bool:
        found[:] = await net["local"].list_turns(agent_id=critic.agent_id)
        return bool(found)

    await until(recorded, message="the critic's turn was never recorded")
    return found[0]


async def reply_of(net: dict[str, Any]) -> Any:
    return await net["alice"].next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)


async def test_no_breakpoint_no_pause_and_no_operator(net):
    critic, model = await critic_on(net, "fine")
    await ask_critic(net, "draft one")
    assert (await reply_of(net)).event_data["text"] == "fine"
    record = await the_turn(net, critic)
    assert record.operator == {} and operator_label(record) == ""
    assert await net["hub"].list_waiting() == []
    assert len(model.calls) == 1


async def test_paused_turn_shows_the_request_and_continue_runs_it(net):
    critic, model = await critic_on(net, "it is weak")
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    cid = await ask_critic(net, "draft one")
    item = await next_waiting(net["hub"], "turn")
    assert model.calls == []  # paused before the model call
    assert item.agent_id == critic.agent_id and item.channel_id == cid
    request = item.detail["request"]
    assert request["system_prompt"].endswith(PROMPT)
    assert f"agent_id: {critic.agent_id}" in request["system_prompt"]  # the identity prefix, as sent
    assert request["inputs"] == [TextInput("draft one").to_dict()]
    assert request["model"] == "critic-model"
    by_name = {t["name"]: t for t in request["tools"]}
    assert by_name["publish"]["requires_approval"] is True
    assert by_name["publish"]["parameters"]["required"] == ["title"]
    assert set(request["token_budget"]) >= {"system", "history", "tools", "input"}
    await net["hub"].answer_waiting(item.item_id, "continue", by="alice")
    assert (await reply_of(net)).event_data["text"] == "it is weak"
    record = await the_turn(net, critic)
    assert record.operator == {"action": "continue", "by": "alice"}
    # what was shown is what went out
    assert record.system_prompt == request["system_prompt"]
    assert request["messages"] == [e.to_dict() for e in model.calls[0].history[: model.calls[0].prior]]
    assert len(model.calls) == 1


async def test_edit_replaces_the_history_and_system_prompt_the_model_sees(net):
    critic, model = await critic_on(net, "edited verdict")
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    await ask_critic(net, "draft two")
    item = await next_waiting(net["hub"], "turn")
    edited = [
        ModelRequest([TextInput("earlier: the author wants it brutal")]).to_dict(),
        ModelMessage("noted").to_dict(),
    ]
    await net["hub"].answer_waiting(
        item.item_id, "edit", messages=edited, system_prompt="You are a kind critic.", by="alice"
    )
    assert (await reply_of(net)).event_data["text"] == "edited verdict"
    [call] = model.calls
    assert call.system == "You are a kind critic."  # the whole system text, as edited
    assert call.history[: call.prior] == [event_from_dict(e) for e in edited]
    assert call.inputs == [TextInput("draft two")]  # the current input stays
    record = await the_turn(net, critic)
    assert record.operator == {"action": "edit", "by": "alice", "changed": ["messages", "system_prompt"]}
    assert operator_label(record) == "edited by alice (messages, system_prompt)"
    assert record.history == [event_from_dict(e) for e in edited]  # the record keeps what the model got
    assert record.system_prompt == "You are a kind critic."


async def test_edit_of_messages_only_keeps_the_system_prompt(net):
    critic, model = await critic_on(net, "ok")
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    await ask_critic(net, "draft")
    item = await next_waiting(net["hub"], "turn")
    await net["hub"].answer_waiting(item.item_id, "edit", messages=[ModelMessage("x").to_dict()], by="bob")
    await reply_of(net)
    [call] = model.calls
    assert call.system == item.detail["request"]["system_prompt"]
    assert call.history[: call.prior] == [ModelMessage("x")]
    assert (await the_turn(net, critic)).operator == {"action": "edit", "by": "bob", "changed": ["messages"]}


async def test_answer_in_the_agents_place_posts_its_round_envelope_without_a_model_call(net):
    critic, model = await critic_on(net)  # an empty script: a model call would fail the turn
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    cid = await ask_critic(net, "draft three")
    item = await next_waiting(net["hub"], "turn")
    await net["hub"].answer_waiting(
        item.item_id, "answer", text="Taking the seat: cut the intro.", by="alice"
    )
    reply = await reply_of(net)
    assert reply.sender_id == critic.agent_id
    assert reply.event_data["text"] == "Taking the seat: cut the intro."
    assert model.calls == []
    record = await the_turn(net, critic)
    assert record.operator == {"action": "answer", "by": "alice"}
    assert operator_label(record) == "answered by alice"
    assert record.reply == "Taking the seat: cut the intro." and record.model_calls == 0
    assert record.reply_envelope_id == reply.envelope_id and record.error is None
    # the consulting round is done as if the critic had answered
    assert (await net["local"].get_channel(cid)).close_reason == "consulting_complete"


async def test_skip_posts_nothing(net):
    critic, model = await critic_on(net)
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    cid = await ask_critic(net, "draft four")
    item = await next_waiting(net["hub"], "turn")
    await net["hub"].answer_waiting(item.item_id, "skip", by="alice")
    record = await the_turn(net, critic)
    assert record.operator == {"action": "skip", "by": "alice"}
    assert operator_label(record) == "skipped by alice"
    assert record.reply_envelope_id is None and record.error is None and model.calls == []
    wal = await net["local"].read_wal(cid)
    assert not [e for e in wal if e.sender_id == critic.agent_id and e.event_type == EV_TEXT]


async def test_only_the_matching_agent_pauses(net):
    critic, _ = await critic_on(net, "critic ran")
    other = await net["agents"].register(Agent("writer", ScriptedModel("writer ran")))
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    channel = await net["alice"].open(type="consulting", target="writer")
    await net["alice"].send(channel.channel_id, "hello writer")
    assert (await reply_of(net)).event_data["text"] == "writer ran"
    record = await the_turn(net, other)
    assert record.operator == {}
    assert critic.agent_id  # registered, never asked


def test_operator_round_trips_and_old_records_read_empty():
    record = TurnRecord("c", "a", "e", operator={"action": "answer", "by": "alice"})
    again = TurnRecord.from_dict(record.to_dict())
    assert again.operator == {"action": "answer", "by": "alice"}
    old = record.to_dict()
    del old["operator"]
    assert TurnRecord.from_dict(old).operator == {}
    assert operator_label(old) == ""
    assert operator_label({"operator": {"action": "skip", "by": ""}}) == "skipped by an operator"


async def test_over_websocket_a_paused_turn_outlives_the_rpc_timeout_and_an_operator_answers_remotely(
    tmp_path,
):
    """The agent's client has a short ``rpc_timeout``; the turn stays paused past it (pause_turn has no RPC
    timeout) and an operator attached over the WebSocket takes the seat (``by``: the connection's name)."""
    from ag2net.server import serve_ws

    hub = await open_stepping_hub(tmp_path)
    local = HubClient.local(hub)
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            agents = HubClient.connect(server.url(), rpc_timeout=0.2)
            operator = HubClient.connect(server.url(), rpc_timeout=10)
            try:
                critic = await agents.register(Agent("critic", ScriptedModel()))
                alice = await local.register_human(Passport(name="alice", kind="human"))
                await operator.break_on("agent:critic", on="turn")
                channel = await alice.open(type="consulting", target="critic")
                await alice.send(channel.channel_id, "still there?")
                item = await next_waiting(operator, "turn")
                # more than the agent client's rpc_timeout passes while the person reads the request
                await asyncio.sleep(0.5)
                assert [i.item_id for i in await operator.list_waiting()] == [item.item_id]
                await operator.answer_waiting(item.item_id, "answer", text="yes, here")
                reply = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
                assert (reply.sender_id, reply.event_data["text"]) == (critic.agent_id, "yes, here")
                net = {"local": local}
                record = await the_turn(net, critic)
                assert record.operator["action"] == "answer" and record.operator["by"]
                assert operator_label(record) == f"answered by {record.operator['by']}"
            finally:
                await agents.close()
                await operator.close()
    finally:
        await local.close()
        await hub.close()


async def test_an_answer_without_text_is_refused_and_the_turn_stays_paused(net):
    critic, model = await critic_on(net)
    await net["hub"].break_on("agent:critic", on="turn", by="alice")
    cid = await ask_critic(net, "draft five")
    item = await next_waiting(net["hub"], "turn")
    with pytest.raises(ProtocolError, match=r"params\.text: an answer in the agent's place needs the text"):
        await net["hub"].answer_waiting(item.item_id, "answer", text="  ", by="alice")
    assert [w.item_id for w in await net["hub"].list_waiting()] == [item.item_id]  # still waiting
    await net["hub"].answer_waiting(item.item_id, "skip", by="alice")
    record = await the_turn(net, critic)
    assert record.operator == {"action": "skip", "by": "alice"}
    assert model.calls == [] and record.reply_envelope_id is None
    wal = await net["local"].read_wal(cid)
    assert not [e for e in wal if e.sender_id == critic.agent_id and e.event_type == EV_TEXT]

"""Approvals on the agent's side (issue 24 §4): a tool declared ``requires_approval=True`` (``@tool``, ``Tool``,
``plugin.tool``), or picked by an agent's approval policy (by tool name, by an argument predicate), waits for a
person before it runs. On a hub the runtime asks ``request_approval`` (tool, arguments, the model's text beside
the call as the reason, the call id): approve runs it, deny returns ``denied by NAME: REASON`` to the model as
an error result, edit runs it with the person's arguments. Alone, the agent's human-input hook gets a
``ToolApprovalRequest`` (ag2 1.2.1's shape); with no hook the call is refused with a sentence naming the fix.

Hub cases run in-process and over a real WebSocket; the hub is the real one, on SQLite."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support import until
from test_turn_pause_support import next_waiting, open_stepping_hub

from ag2net import (
    EV_TEXT,
    Agent,
    ApprovalPolicy,
    HubClient,
    ModelResponse,
    Passport,
    ScriptedModel,
    Tool,
    ToolApprovalRequest,
    ToolResultEvent,
    tool,
    tool_call,
)
from ag2net.breakpoints import Decision
from ag2net.client.turns import TurnRecord

RAN: list[dict[str, Any]] = []


@tool(requires_approval=True)
def transfer(account: str, amount: int) -> str:
    """Move money to an account."""
    RAN.append({"account": account, "amount": amount})
    return f"sent {amount} to {account}"


def lookup(account: str) -> str:
    """Look an account up."""
    RAN.append({"lookup": account})
    return f"{account}: open"


def last_result(call: Any) -> ToolResultEvent:
    return [e for e in call.history if isinstance(e, ToolResultEvent)][-1]


def echo_result(call: Any) -> str:
    result = last_result(call)
    return ("ERROR " if result.is_error else "OK ") + result.result


def asks_transfer(**arguments: Any) -> ModelResponse:
    return ModelResponse("The invoice is due today.", [tool_call("transfer", **arguments)])


@pytest.fixture(autouse=True)
def _fresh_runs():
    RAN.clear()


# --- declaring -------------------------------------------------------------------------------------------


def test_declarations():
    assert transfer.requires_approval is True
    assert tool(lookup).requires_approval is False
    assert Tool("t", "", {}, lambda: None, requires_approval=True).requires_approval
    agent = Agent("a", tools=[lookup])
    policy = agent.require_approval("lookup", when=lambda name, args: args.get("account") == "vault")
    assert isinstance(policy, ApprovalPolicy)
    assert agent.hooks.needs_approval(agent.tools[0], {"account": "vault"})
    assert not agent.hooks.needs_approval(agent.tools[0], {"account": "petty"})
    assert ApprovalPolicy(("*",)).applies("anything", {})
    assert ApprovalPolicy(when=lambda name, args: name.startswith("rm")).applies("rm_file", {})
    with pytest.raises(ValueError, match=r"needs tools=.* or when=predicate"):
        ApprovalPolicy()
    with pytest.raises(TypeError, match="must be tool names"):
        ApprovalPolicy("lookup")  # type: ignore[arg-type]


# --- alone: the human-input hook -------------------------------------------------------------------------


async def test_alone_without_a_hook_the_call_is_refused_naming_the_fix():
    model = ScriptedModel(asks_transfer(account="acme", amount=5), echo_result)
    reply = await Agent("payer", model, tools=[transfer]).ask("pay acme")
    assert RAN == []
    assert reply.body is not None and reply.body.startswith(
        "ERROR Error: tool 'transfer' needs a person's approval"
    )
    assert "run the agent on a hub" in reply.body and "hitl_hook" in reply.body


async def test_alone_the_hitl_hook_gets_a_tool_approval_request():
    seen: list[ToolApprovalRequest] = []

    def hook(request):
        seen.append(request)
        return "y" if request.arguments["amount"] < 10 else "too much for a Friday"

    model = ScriptedModel(
        asks_transfer(account="acme", amount=5),
        echo_result,
        asks_transfer(account="acme", amount=500),
        echo_result,
    )
    agent = Agent("payer", model, tools=[transfer])
    agent.hooks.hitl_hook = hook
    first_reply = await agent.ask("pay acme")
    assert first_reply.body == "OK sent 5 to acme"
    assert (await agent.ask("pay acme more")).body == "ERROR Error: denied by human: too much for a Friday"
    assert RAN == [{"account": "acme", "amount": 5}]
    first = seen[0]
    assert isinstance(first, ToolApprovalRequest)
    assert (first.tool, first.arguments, first.reason) == (
        "transfer",
        {"account": "acme", "amount": 5},
        "The invoice is due today.",
    )
    assert first.tool_call_id == first_reply.tool_calls[0].id
    assert "`transfer`" in first.content and "Y/N" in first.content


async def test_alone_a_hook_may_answer_with_a_decision_that_edits():
    agent = Agent(
        "payer", ScriptedModel(asks_transfer(account="acme", amount=5), echo_result), tools=[transfer]
    )
    agent.hooks.hitl_hook = lambda request: Decision(
        "edit", by="carol", arguments={"account": "acme", "amount": 4}
    )
    assert (await agent.ask("pay")).body == "OK sent 4 to acme"
    assert RAN == [{"account": "acme", "amount": 4}]


async def test_a_policy_by_argument_only_asks_for_the_calls_it_picks():
    model = ScriptedModel(
        tool_call("lookup", account="petty"), echo_result, tool_call("lookup", account="vault"), echo_result
    )
    agent = Agent("clerk", model, tools=[lookup])
    agent.require_approval(when=lambda name, args: args.get("account") == "vault")
    assert (await agent.ask("petty?")).body == "OK petty: open"
    assert str((await agent.ask("vault?")).body).startswith(
        "ERROR Error: tool 'lookup' needs a person's approval"
    )
    assert RAN == [{"lookup": "petty"}]


# --- on a hub: request_approval --------------------------------------------------------------------------


@pytest.fixture(params=["local", "ws"])
async def net(request, tmp_path) -> AsyncIterator[dict[str, Any]]:
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
        yield {"hub": hub, "local": local, "agents": agents, "alice": alice}
    await local.close()
    await hub.close()


async def run_payer(
    net: dict[str, Any], model: ScriptedModel, *, plugin_policy: bool = False
) -> tuple[Any, str]:
    agent = Agent("payer", model, tools=[transfer, lookup])
    if plugin_policy:
        agent.require_approval("lookup")
    payer = await net["agents"].register(agent)
    channel = await net["alice"].open(type="consulting", target="payer")
    await net["alice"].send(channel.channel_id, "settle the acme invoice")
    return payer, channel.channel_id


async def reply_and_record(net: dict[str, Any], payer: Any) -> tuple[str, TurnRecord]:
    reply = await net["alice"].next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=10)
    found: list[TurnRecord] = []

    async def recorded() -> bool:
        found[:] = await net["local"].list_turns(agent_id=payer.agent_id)
        return bool(found)

    await until(recorded, message="the payer's turn was never recorded")
    return reply.event_data["text"], found[0]


async def test_approved_call_runs(net):
    model = ScriptedModel(asks_transfer(account="acme", amount=120), echo_result)
    payer, cid = await run_payer(net, model)
    item = await next_waiting(net["hub"], "approval")
    assert RAN == []  # not before the person says so
    assert item.agent_id == payer.agent_id and item.channel_id == cid
    detail = item.detail
    assert (detail["tool"], detail["arguments"]) == ("transfer", {"account": "acme", "amount": 120})
    assert detail["reason"] == "The invoice is due today." and detail["call_id"]
    await net["hub"].answer_waiting(item.item_id, "approve", by="alice")
    text, record = await reply_and_record(net, payer)
    assert text == "OK sent 120 to acme"
    assert RAN == [{"account": "acme", "amount": 120}]
    [call] = record.tool_calls
    assert call["id"] == detail["call_id"]
    assert call["approval"] == {"action": "approve", "by": "alice", "reason": ""}


async def test_denied_call_returns_the_reason_to_the_model(net):
    model = ScriptedModel(asks_transfer(account="acme", amount=9000), echo_result)
    payer, _ = await run_payer(net, model)
    item = await next_waiting(net["hub"], "approval")
    await net["hub"].answer_waiting(item.item_id, "deny", reason="over the limit", by="alice")
    text, record = await reply_and_record(net, payer)
    assert RAN == []
    assert text == "ERROR Error: denied by alice: over the limit"
    result = last_result(model.calls[1])
    assert result.is_error and result.result == "Error: denied by alice: over the limit"
    assert record.tool_calls[0]["is_error"] is True
    assert record.tool_calls[0]["approval"] == {"action": "deny", "by": "alice", "reason": "over the limit"}


async def test_edited_call_runs_with_the_new_arguments(net):
    model = ScriptedModel(asks_transfer(account="acme", amount=9000), echo_result)
    payer, _ = await run_payer(net, model)
    item = await next_waiting(net["hub"], "approval")
    await net["hub"].answer_waiting(
        item.item_id, "edit", arguments={"account": "acme", "amount": 900}, by="alice"
    )
    text, record = await reply_and_record(net, payer)
    assert text == "OK sent 900 to acme"
    assert RAN == [{"account": "acme", "amount": 900}]
    approval = record.tool_calls[0]["approval"]
    assert approval["action"] == "edit" and approval["arguments"] == {"account": "acme", "amount": 900}


async def test_a_policy_by_name_asks_and_other_tools_run_unasked(net):
    model = ScriptedModel([tool_call("lookup", account="acme")], echo_result)
    payer, _ = await run_payer(net, model, plugin_policy=True)
    item = await next_waiting(net["hub"], "approval")
    assert item.detail["tool"] == "lookup" and item.detail["reason"] == ""  # no text beside the call
    await net["hub"].answer_waiting(item.item_id, "approve", by="bob")
    text, _ = await reply_and_record(net, payer)
    assert text == "OK acme: open"


async def test_a_turn_without_approval_tools_never_asks(net):
    model = ScriptedModel("no tools today")
    payer, _ = await run_payer(net, model)
    text, record = await reply_and_record(net, payer)
    assert text == "no tools today" and await net["hub"].list_waiting() == []
    assert record.tool_calls == []


async def test_over_websocket_an_approval_outlives_the_rpc_timeout_and_a_remote_operator_denies(tmp_path):
    """The agent's client has a short ``rpc_timeout``; its approval waits past it (request_approval has no RPC
    timeout) and an operator attached over the WebSocket denies it; the model reads who and why."""
    from ag2net.server import serve_ws

    hub = await open_stepping_hub(tmp_path)
    local = HubClient.local(hub)
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            agents = HubClient.connect(server.url(), rpc_timeout=0.2)
            operator = HubClient.connect(server.url(), rpc_timeout=10)
            try:
                net = {"hub": hub, "local": local, "agents": agents}
                net["alice"] = await local.register_human(Passport(name="alice", kind="human"))
                model = ScriptedModel(asks_transfer(account="acme", amount=7), echo_result)
                payer, _ = await run_payer(net, model)
                item = await next_waiting(operator, "approval")
                await asyncio.sleep(0.5)  # longer than the agent client's rpc_timeout
                await operator.answer_waiting(item.item_id, "deny", reason="not this week")
                text, record = await reply_and_record(net, payer)
                by = record.tool_calls[0]["approval"]["by"]
                assert by and text == f"ERROR Error: denied by {by}: not this week"
                assert RAN == []
            finally:
                await agents.close()
                await operator.close()
    finally:
        await local.close()
        await hub.close()

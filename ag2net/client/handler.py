"""The default envelope handler and its public hooks.

``default_handler(envelope, client)``: ack invites; for ``EV_TEXT``/``EV_PACKET`` (SPEC §3.10) run one
LLM turn over the channel's projected view with the adapter's per-turn tools, post the adapter's
round envelope, and store a turn record of exactly what the model received.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import Any

from ag2net.adapters.base import ensure_parts
from ag2net.agent.agent import APPROVALS_DEP
from ag2net.agent.tool import AGENT_CLIENT_DEP, CHANNEL_DEP, CHANNEL_STATE_DEP, HUB_DEP
from ag2net.breakpoints import ACTIONS, TURN, Decision
from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.client.channel import Channel
from ag2net.client.turns import (
    TurnRecord,
    learn_participant_names,
    recorded_view_spec,
    turn_rounds,
    turn_usage,
)
from ag2net.envelope import (
    EV_CHANNEL_INVITE,
    EV_PACKET,
    EV_TEXT,
    Envelope,
    invite_ack,
    is_protocol_event,
    visible_to,
)
from ag2net.errors import NetworkError, ProtocolError
from ag2net.events import (
    BaseEvent,
    Input,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
    event_from_dict,
)
from ag2net.ids import utc_now
from ag2net.views.base import ViewPolicy
from ag2net.views.registry import resolve_view

log = logging.getLogger(__name__)

SUBSTANTIVE = (EV_TEXT, EV_PACKET)


async def read_wal_until(client: Any, envelope: Envelope) -> Any:
    """The channel's WAL strictly before ``envelope`` (the whole WAL when it is not found)."""
    return await client.hub_client.read_wal_until(envelope.channel_id, envelope.envelope_id)


def resolve_view_policy(client: Any, metadata: ChannelMetadata) -> ViewPolicy:
    """The view this participant uses: per-participant override, channel override, adapter default."""
    adapter = client.hub_client.adapter_for_metadata(metadata)
    return resolve_view(metadata, client.agent_id, adapter)


def stamp_dependencies(client: Any, channel: Channel, state: Any) -> dict[str, Any]:
    """The turn's injectable dependencies (``CHANNEL_DEP``, ``AGENT_CLIENT_DEP``, ``HUB_DEP``, ``CHANNEL_STATE_DEP``)."""
    return {
        CHANNEL_DEP: channel,
        AGENT_CLIENT_DEP: client,
        HUB_DEP: client.hub_client,
        CHANNEL_STATE_DEP: state,
    }


def _current_input(projected: list[BaseEvent], adapter: Any, envelope: Envelope) -> list[Input]:
    if projected:
        first = projected[0]
        if isinstance(first, ModelRequest):
            return [p for p in first.parts if not (isinstance(p, TextInput) and not p.content)]
        if isinstance(first, ModelMessage) and first.content:
            return [TextInput(first.content)]
    # ag2's adapters may return input parts here, ours a string: both become parts, empty text dropped
    parts = ensure_parts(adapter.extract_turn_input(envelope))
    return [p for p in parts if not (isinstance(p, TextInput) and not p.content)]


async def ack_invite(client: Any, envelope: Envelope) -> None:
    """Accept a channel invite (what the default handler does with ``EV_CHANNEL_INVITE``)."""
    with contextlib.suppress(NetworkError):
        await client.send_envelope(invite_ack(envelope, client.agent_id))


async def default_handler(envelope: Envelope, client: Any) -> None:
    """Auto-ack invites; run an LLM turn on ``EV_TEXT``/``EV_PACKET``; pass over everything else."""
    event_type = envelope.event_type
    if event_type == EV_CHANNEL_INVITE:
        if envelope.sender_id != client.agent_id:
            await ack_invite(client, envelope)
        return
    if is_protocol_event(event_type) or event_type not in SUBSTANTIVE:
        return
    if envelope.sender_id == client.agent_id:
        return
    await run_turn(client, envelope)


async def run_turn(client: Any, envelope: Envelope, *, offer_adapter_tools: bool = True) -> Envelope | None:
    """The default handler's substantive path; returns the posted round envelope, if any."""
    hub_client = client.hub_client
    me = client.agent_id
    cid = envelope.channel_id
    timer = getattr(hub_client, "timer", time.perf_counter)
    started = timer()
    started_at = getattr(hub_client, "clock", utc_now)()
    record: TurnRecord | None = None
    try:
        md = await hub_client.get_channel(cid)
        if not await _may_answer(hub_client, md, envelope, me):
            return None
        adapter = hub_client.adapter_for_metadata(md)
        state = await hub_client.adapter_state(cid, md)
        if await _superseded(hub_client, adapter, md, state, envelope, me):
            return None
        channel = Channel(metadata=md, client=client)
        view = resolve_view_policy(client, md)
        t0 = timer()
        projection, inputs = await _project_turn(client, view, md, adapter, envelope)
        t_project = timer() - t0
        if not inputs:
            return None
        deps = stamp_dependencies(client, channel, state)
        if envelope.trace_id:
            deps["ag2.otel.traceparent"] = envelope.trace_id
        t0 = timer()
        adapter_tools = _adapter_tools(client, adapter, md, state) if offer_adapter_tools else []
        t_tools = timer() - t0
        record = TurnRecord(
            channel_id=cid,
            agent_id=me,
            trigger_envelope_id=envelope.envelope_id,
            started_at=started_at,
            history=list(projection),
            inputs=list(inputs),
            view=recorded_view_spec(view, md, me),
            timings={"projection_ms": t_project * 1000, "tool_schema_ms": t_tools * 1000},
        )
        decision = await _turn_breakpoint(client, envelope, record, adapter_tools)
        if decision is not None and decision.action == "skip":
            return None
        if decision is not None and decision.action == "answer":
            reply = _answered(record, inputs, decision)
        else:
            edit = _edits(decision, projection)
            projection = edit.get("history", projection)
            reply = await _ask(
                client, record, inputs, projection, adapter_tools, deps, timer, edit.get("system")
            )
        state = await hub_client.adapter_state(cid)
        out = adapter.build_round_envelope(
            metadata=md, sender_id=me, reply=reply, events=reply.events, state=state, hub=hub_client
        )
        if out is not None:
            out.causation_id = envelope.envelope_id
            out.depth = envelope.depth  # a reply carries its prompt's depth (SPEC §3.15)
            t0 = timer()
            record.reply_envelope_id = await client.send_envelope(out)
            record.timings["post_ms"] = (timer() - t0) * 1000
        return out
    except Exception as exc:
        log.info("turn of %s on %s failed: %s", me, envelope.envelope_id, exc)
        if record is not None:
            record.error = f"{type(exc).__name__}: {exc}"
        await _report_failure(hub_client, envelope, me, exc)
        return None
    finally:
        if record is not None and getattr(hub_client, "record_turns", True):
            record.duration_ms = (timer() - started) * 1000
            t0 = timer()
            with contextlib.suppress(Exception):
                await hub_client.record_turn(record)
            record.timings["record_ms"] = (timer() - t0) * 1000


async def _may_answer(hub_client: Any, md: ChannelMetadata, envelope: Envelope, me: str) -> bool:
    """The channel is active, ``me`` has not answered ``envelope`` yet (a redelivery after a reconnect)
    and may send there."""
    cid = envelope.channel_id
    if md.state != ChannelState.ACTIVE:
        return False
    if await hub_client.find_envelope_by_causation(cid, sender_id=me, causation_id=envelope.envelope_id):
        return False
    return bool(await hub_client.can_send(cid, me))


async def _project_turn(
    client: Any, view: ViewPolicy, md: ChannelMetadata, adapter: Any, envelope: Envelope
) -> tuple[list[BaseEvent], list[Input]]:
    """The turn's history (the WAL before ``envelope`` through the view) and its current input."""
    hub_client = client.hub_client
    history = await read_wal_until(client, envelope)
    await learn_participant_names(hub_client, md)
    projection = await view.project(
        history,
        participant_id=client.agent_id,
        channel=md,
        render_envelope=adapter.render_envelope,
        name_for=hub_client.name_for,
    )
    current = await view.project(
        [envelope],
        participant_id=client.agent_id,
        channel=md,
        render_envelope=adapter.render_envelope,
        name_for=hub_client.name_for,
    )
    return projection, _current_input(current, adapter, envelope)


def _adapter_tools(client: Any, adapter: Any, md: ChannelMetadata, state: Any) -> list[Any]:
    """The adapter's per-turn tools (none, logged, when building them fails)."""
    try:
        return list(adapter.tools_for(client, md, state, client.agent_id))
    except Exception:
        log.exception("tools_for failed on channel %s", md.channel_id)
        return []


async def _ask(
    client: Any,
    record: TurnRecord,
    inputs: list[Input],
    projection: list[BaseEvent],
    adapter_tools: list[Any],
    deps: dict[str, Any],
    timer: Any,
    system_text: str | None = None,
) -> Any:
    """The agent's turn; the record gets its model calls, reply and output tokens (the calls also when
    the turn raises). ``system_text``: the whole system prompt, as a person edited it at a turn breakpoint."""
    t0 = timer()
    approvals: list[dict[str, Any]] = []
    deps[APPROVALS_DEP] = approvals
    extra = {} if system_text is None else {"system_text": system_text}
    try:
        reply = await client.agent.ask(
            *inputs, history=projection, tools=adapter_tools, dependencies=deps, **extra
        )
    except Exception as exc:
        _fill_from_calls(record, getattr(exc, "calls", []), getattr(exc, "events", []), approvals)
        raise
    record.timings["model_ms"] = (timer() - t0) * 1000
    _fill_from_calls(record, reply.calls, reply.events, approvals)
    record.reply = reply.body
    record.tokens["output"] = _count_output(reply)
    return reply


async def _report_failure(hub_client: Any, envelope: Envelope, me: str, exc: Exception) -> None:
    with contextlib.suppress(Exception):
        # in-process, listeners get the exception itself (as in ag2); a remote hub gets its text
        local_hub = getattr(hub_client, "hub", None)
        reporter = local_hub if local_hub is not None else hub_client
        await reporter.report_turn_failure(
            channel_id=envelope.channel_id, agent_id=me, envelope_id=envelope.envelope_id, exc=exc
        )


async def _superseded(
    hub_client: Any, adapter: Any, md: ChannelMetadata, state: Any, envelope: Envelope, me: str
) -> bool:
    """True when the adapter expects ``me`` to answer a *later* envelope that ``me`` will also receive.

    Without this, an agent whose turn came up while an older envelope sat in its queue would answer that
    older one, blind to the newer messages (reference §6.4, "subtle"); the newer one is the real trigger and
    is queued behind this one on the same channel.
    """
    expected = adapter.expected_next(md, state)
    if expected is None:
        return False
    trigger = expected.triggering_envelope_id
    if not trigger or trigger == envelope.envelope_id or expected.agent_id != me:
        return False
    for env in reversed(await hub_client.read_wal(md.channel_id)):
        if env.envelope_id == trigger:
            return env.sender_id != me and visible_to(env, me)
        if env.envelope_id == envelope.envelope_id:
            return False  # the trigger is older than this envelope
    return False


def _fill_from_calls(
    record: TurnRecord,
    calls: list[Any],
    events: list[BaseEvent],
    approvals: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> None:
    """Copy what the model actually received (its first call) and the tool traffic into the record (a call a
    person approved, denied or edited carries ``approval``: ``{"action", "by", "reason"[, "arguments"]}``), each
    call's answer into ``rounds`` (its usage as the server reported it, response id, finish reason, retries)
    and the turn's token totals into ``tokens`` (``token_method``: ``"provider"`` or the estimate's method)."""
    from ag2net.agent.tokens import default_counter

    counter = default_counter()
    record.model_calls = len(calls)
    if calls:
        first = calls[0]
        record.system_prompt = first.system
        record.tools = list(first.tools)
        record.history = list(first.history[: first.prior])
        record.inputs = list(first.inputs)
        record.model_params = dict(first.params)
    record.rounds = turn_rounds(calls, events)
    record.parts_method = counter.method
    totals, record.token_method = turn_usage(calls, counter)
    record.tokens.update(totals)
    record.tokens.update(
        {
            "system": counter.count_system(record.system_prompt),
            "history": counter.count_events(record.history),
            "tools": counter.count_tools(record.tools),
            "input": counter.count_events([ModelRequest(list(record.inputs))]) if record.inputs else 0,
        }
    )
    results = {e.parent_id: e for e in events if isinstance(e, ToolResultEvent)}
    record.tool_calls = [
        {
            "id": e.id,
            "name": e.name,
            "arguments": e.arguments,
            "result": results[e.id].result if e.id in results else None,
            "is_error": results[e.id].is_error if e.id in results else False,
        }
        for e in events
        if isinstance(e, ToolCallEvent)
    ]
    decided = {a["call_id"]: a for a in approvals}
    for call in record.tool_calls:
        if call["id"] in decided:
            call["approval"] = {k: v for k, v in decided[call["id"]].items() if k not in ("call_id", "tool")}


# ------------------------------------------------------------------ turn breakpoints (docs/breakpoints.md)


async def _turn_breakpoint(
    client: Any, envelope: Envelope, record: TurnRecord, adapter_tools: list[Any]
) -> Decision | None:
    """Ask the hub whether a turn breakpoint pauses this turn; when one does, send it the request about to go
    out and wait for a person's ``Decision`` (``None``: no breakpoint, the turn runs as it is)."""
    hub_client = client.hub_client
    gate = getattr(hub_client, "turn_gate", None)
    if gate is None:
        return None
    me, cid, trigger = client.agent_id, envelope.channel_id, envelope.envelope_id
    try:
        paused = await gate(me, cid, trigger_envelope_id=trigger)
    except (AttributeError, NotImplementedError, NetworkError) as exc:
        # a hub from before turn breakpoints (or one that cannot say): the turn runs as it is
        log.debug("no turn gate on this hub (%s); the turn runs", exc)
        return None
    if not paused:
        return None
    request = turn_request(client.agent, record.history, record.inputs, adapter_tools)
    answer = await hub_client.pause_turn(me, cid, request, trigger_envelope_id=trigger)
    decision = answer if isinstance(answer, Decision) else Decision.from_dict(answer)
    if decision.action not in ACTIONS[TURN]:
        raise ProtocolError(
            f"the paused turn was answered {decision.action!r}; a turn takes one of {', '.join(ACTIONS[TURN])}"
        )
    if decision.action == "answer" and not (decision.text or "").strip():
        raise ProtocolError(
            f"the paused turn was answered in the agent's place by {decision.by or 'an operator'} with no text; "
            "answer with text='…' (or skip the turn)"
        )
    record.operator = {"action": decision.action, "by": decision.by}
    if decision.action == "answer":
        # the request that would have gone out, as a model call's record keeps it: a replay of the channel
        # (ag2net.debug.replay) then finds this turn and gives the person's answer again
        from ag2net.agent.models import model_params

        record.system_prompt = request["system_prompt"]
        record.tools = [t.schema() for t in client.agent.tools_for_turn(adapter_tools)]
        model = getattr(client.agent, "model", None)
        record.model_params = model_params(model) if model is not None else {}
    if decision.action == "edit":
        record.operator["changed"] = [
            name
            for name, value in (("messages", decision.messages), ("system_prompt", decision.system_prompt))
            if value is not None
        ]
    return decision


def turn_request(
    agent: Any, history: list[BaseEvent], inputs: list[Input], adapter_tools: list[Any]
) -> dict[str, Any]:
    """The model request a paused turn shows a person: ``system_prompt``, ``messages`` (the projected history
    as event dicts), ``inputs``, ``tools`` offered (``name``, ``description``, ``parameters``,
    ``requires_approval``), ``model`` and ``token_budget`` (the model's ``max_tokens`` when it sets one, and
    the counted tokens of what goes in)."""
    from ag2net.agent.models import model_params
    from ag2net.agent.tokens import default_counter

    model = getattr(agent, "model", None)
    params = model_params(model) if model is not None else {}
    tools = agent.tools_for_turn(adapter_tools)
    schemas = [t.schema() for t in tools]
    system = agent.system_text()
    counter = default_counter()
    budget: dict[str, Any] = {
        "system": counter.count_system(system),
        "history": counter.count_events(history),
        "tools": counter.count_tools(schemas),
        "input": counter.count_events([ModelRequest(list(inputs))]) if inputs else 0,
        "method": counter.method,
    }
    if isinstance(params.get("max_tokens"), int):
        budget["max_tokens"] = params["max_tokens"]
    return {
        "system_prompt": system,
        "messages": [e.to_dict() for e in history],
        "inputs": [p.to_dict() for p in inputs],
        "tools": [
            {
                "name": t.name,
                "description": t.description,
                "parameters": t.parameters,
                "requires_approval": bool(getattr(t, "requires_approval", False)),
            }
            for t in tools
        ],
        "model": str(params.get("model") or getattr(model, "name", None) or type(model).__name__),
        "token_budget": budget,
    }


def _edits(decision: Decision | None, projection: list[BaseEvent]) -> dict[str, Any]:
    """What an ``edit`` decision replaces for this turn: ``history`` (events) and/or ``system`` (the text)."""
    if decision is None or decision.action != "edit":
        return {}
    out: dict[str, Any] = {}
    if decision.messages is not None:
        history: list[BaseEvent] = []
        for n, item in enumerate(decision.messages):
            try:
                history.append(event_from_dict(item))
            except Exception as exc:
                raise ProtocolError(
                    f"the edited turn's messages[{n}] is not an event dict like the request's ({exc}); "
                    "keep each message's 'type' and fields"
                ) from None
        out["history"] = history
    if decision.system_prompt is not None:
        out["system"] = decision.system_prompt
    return out


def _answered(record: TurnRecord, inputs: list[Input], decision: Decision) -> Any:
    """The reply of a turn a person answered in the agent's place (no model call)."""
    from ag2net.agent.agent import AgentReply

    text = decision.text or ""
    events: list[BaseEvent] = [ModelRequest(list(inputs))] if inputs else []
    events.append(ModelMessage(text))
    record.reply = text
    record.model_calls = 0
    return AgentReply(body=text or None, events=events)


def _count_output(reply: Any) -> int:
    from ag2net.agent.tokens import default_counter

    counter = default_counter()
    total = counter.count(reply.body or "")
    for e in reply.events:
        if isinstance(e, ToolCallEvent):
            total += counter.count(e.name + e.arguments)
    return total


__all__ = [
    "SUBSTANTIVE",
    "ack_invite",
    "default_handler",
    "read_wal_until",
    "resolve_view_policy",
    "run_turn",
    "stamp_dependencies",
    "turn_request",
]

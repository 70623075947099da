"""Turn records (what an LLM actually received in a turn, and what it did) and re-projection previews."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.client.port import HubClientPort
from ag2net.errors import AccessDeniedError
from ag2net.events import BaseEvent, Input, event_from_dict, part_from_dict
from ag2net.record import Record

log = logging.getLogger(__name__)


@dataclass(slots=True)
class TurnRecord(Record):
    """Everything one default-handler LLM turn sent and got back (a ``Record``: ``to_dict`` writes the fields in
    this order, ``turn_id`` first, so it is keyword-only)."""

    turn_id: str = field(default_factory=lambda: uuid.uuid4().hex, kw_only=True)
    channel_id: str
    agent_id: str
    trigger_envelope_id: str
    started_at: str = ""
    duration_ms: float = 0.0
    system_prompt: str = ""
    history: list[BaseEvent] = field(default_factory=list)
    inputs: list[Input] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    view: dict[str, Any] = field(default_factory=dict)
    reply: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    #: The parts of what the first call was sent (``system``, ``history``, ``tools``, ``input``) and the reply
    #: (``output``), counted by ag2net (``parts_method``); and the turn's totals over all its model calls
    #: (``prompt``, ``completion``, ``cached``, ``reasoning``, ``total``; ``cache_creation`` when reported).
    tokens: dict[str, int] = field(default_factory=dict)
    #: How the totals were counted: ``"provider"`` (every call's usage as the server reported it), a counter's
    #: method (``"heuristic"``, ``"tiktoken:…"``: estimated) or ``"provider+heuristic"`` (some of each).
    token_method: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    reply_envelope_id: str | None = None
    model_calls: int = 0
    error: str | None = None
    #: One entry per model call of the turn, in order (``turn_rounds``): ``request`` is the call's digest
    #: (``ModelCall.digest``: system prompt, messages, tools, model parameters), ``tool_calls`` the ids of the
    #: tool calls the model answered with, ``content`` the text it sent with them (the last call's is the reply).
    rounds: list[dict[str, Any]] = field(default_factory=list)
    #: The answering model's parameters (``ag2net.agent.models.model_params``).
    model_params: dict[str, Any] = field(default_factory=dict)
    #: What a person did to this turn at a turn breakpoint (empty when nobody did): ``action`` (``edit``,
    #: ``answer``, ``skip``; a ``continue`` is kept too), ``by`` (their name), an edit's ``changed``
    #: (``["messages", "system_prompt"]``). ``operator_label`` words it ("answered by alice").
    operator: dict[str, Any] = field(default_factory=dict)
    #: How the parts in ``tokens`` were counted (``"heuristic"`` or ``"tiktoken:…"``); records from before
    #: provider usage have it empty, and their ``token_method`` is that count's.
    parts_method: str = ""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TurnRecord:
        # lenient, as stored turn records from older versions are read: numbers may be text, lists may be absent
        return cls(
            channel_id=data["channel_id"],
            agent_id=data["agent_id"],
            trigger_envelope_id=data.get("trigger_envelope_id", ""),
            turn_id=data.get("turn_id") or uuid.uuid4().hex,
            started_at=data.get("started_at", ""),
            duration_ms=float(data.get("duration_ms", 0.0)),
            system_prompt=data.get("system_prompt", ""),
            history=[event_from_dict(e) for e in data.get("history", [])],
            inputs=[part_from_dict(p) for p in data.get("inputs", [])],
            tools=list(data.get("tools", [])),
            view=dict(data.get("view", {})),
            reply=data.get("reply"),
            tool_calls=list(data.get("tool_calls", [])),
            tokens=dict(data.get("tokens", {})),
            token_method=data.get("token_method", ""),
            timings=dict(data.get("timings", {})),
            reply_envelope_id=data.get("reply_envelope_id"),
            model_calls=int(data.get("model_calls", 0)),
            error=data.get("error"),
            rounds=[dict(r) for r in data.get("rounds") or []],
            model_params=dict(data.get("model_params") or {}),
            operator=dict(data.get("operator") or {}),
            parts_method=data.get("parts_method") or "",
        )


_OPERATOR_WORDS = {"edit": "edited", "answer": "answered", "skip": "skipped", "continue": "continued"}


def operator_label(record: TurnRecord | dict[str, Any]) -> str:
    """How a person stepped into a turn, in words: ``"answered by alice"``, ``"edited by bob (messages)"``,
    ``"skipped by alice"``, ``"continued by alice"``; ``""`` when nobody did."""
    operator = record.get("operator") if isinstance(record, dict) else record.operator
    if not operator or not operator.get("action"):
        return ""
    action = str(operator["action"])
    label = f"{_OPERATOR_WORDS.get(action, action)} by {operator.get('by') or 'an operator'}"
    changed = operator.get("changed")
    return f"{label} ({', '.join(changed)})" if changed else label


def turn_rounds(calls: list[Any], events: list[BaseEvent]) -> list[dict[str, Any]]:
    """``TurnRecord.rounds`` from a turn's model calls and its events (``AgentReply.calls``/``events``).

    A round's response is read off the events: the text sent alongside tool calls (a ``ModelMessage``
    before them), the tool calls, then their results; the final reply closes the last round."""
    from ag2net.events import ModelMessage, ToolCallEvent, ToolResultEvent

    answers: list[dict[str, Any]] = []
    current: dict[str, Any] = {"tool_calls": [], "content": None}
    after_results = False
    for event in events:
        if isinstance(event, ModelMessage | ToolCallEvent) and after_results:
            answers.append(current)
            current, after_results = {"tool_calls": [], "content": None}, False
        if isinstance(event, ModelMessage):
            current["content"] = event.content
        elif isinstance(event, ToolCallEvent):
            current["tool_calls"].append(event.id)
        elif isinstance(event, ToolResultEvent):
            after_results = True
    if current["tool_calls"] or current["content"] is not None:
        answers.append(current)
    rounds = []
    for n, call in enumerate(calls):
        answer = answers[n] if n < len(answers) else {"tool_calls": [], "content": None}
        rounds.append({"request": call.digest(), **answer, **_answered_with(call)})
    return rounds


def _answered_with(call: Any) -> dict[str, Any]:
    """What a round keeps of a call's answer (``ModelCall.response``): ``usage`` when the server reported it
    (never an estimate), ``response_id``, ``finish_reason`` and the retried failures' sentences."""
    from ag2net.agent.models import PROVIDER

    response = getattr(call, "response", None)
    if response is None:
        return {}
    out: dict[str, Any] = {}
    if response.usage and response.usage_method == PROVIDER:
        out["usage"] = dict(response.usage)
    if response.response_id:
        out["response_id"] = str(response.response_id)
    if response.finish_reason:
        out["finish_reason"] = str(response.finish_reason)
    if response.retries:
        out["retries"] = list(response.retries)
    return out


_TOTALS = {
    "prompt_tokens": "prompt",
    "completion_tokens": "completion",
    "cached_tokens": "cached",
    "reasoning_tokens": "reasoning",
    "cache_creation_tokens": "cache_creation",
}


def turn_usage(calls: list[Any], counter: Any) -> tuple[dict[str, int], str]:
    """The turn's token totals over its model calls and how they were counted (``TurnRecord.token_method``).

    A call whose answer carries the server's usage counts as reported (``"provider"``); any other call is
    estimated with ``counter`` (what it was sent, and the text and tool calls it answered), or with the
    estimate its model made. The totals have ``prompt``, ``completion``, ``cached``, ``reasoning``, ``total``
    (and ``cache_creation`` when a server reported it)."""
    from ag2net.agent.models import PROVIDER

    totals = {"prompt": 0, "completion": 0, "cached": 0, "reasoning": 0}
    methods: list[str] = []
    for call in calls:
        response = getattr(call, "response", None)
        if response is not None and response.usage:
            usage, method = response.usage, response.usage_method or PROVIDER
        else:
            usage, method = _estimate(call, response, counter), counter.method
        methods.append(PROVIDER if method == PROVIDER else method)
        for key, name in _TOTALS.items():
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                totals[name] = totals.get(name, 0) + value
    totals["total"] = totals["prompt"] + totals["completion"]
    estimated = sorted({m for m in methods if m != PROVIDER})
    if not methods:
        return totals, counter.method
    if not estimated:
        return totals, PROVIDER
    if len(estimated) == len(set(methods)):
        return totals, estimated[0]
    return totals, f"{PROVIDER}+{estimated[0]}"


def _estimate(call: Any, response: Any, counter: Any) -> dict[str, int]:
    prompt = int(counter.count_call(call)["total"])
    completion = 0
    if response is not None:
        completion = counter.count(response.content or "") + sum(
            counter.count(c.name + c.arguments) for c in response.tool_calls
        )
    return {"prompt_tokens": prompt, "completion_tokens": completion}


def recorded_view_spec(view: Any, metadata: Any = None, participant_id: str = "") -> dict[str, Any]:
    """The spec a turn record keeps for the view in force: ``view_spec`` when the view states its own
    parameters (``params()``); else the channel's knob spec it was built from (a custom view's
    ``{"name": "from_one_only", "sender_id": …}``); else the constructor parameters it keeps as attributes."""
    import inspect

    from ag2net.views.base import view_params
    from ag2net.views.registry import VIEW_POLICIES_KNOB, VIEW_POLICY_KNOB, view_spec

    spec = view_spec(view)
    if view_params(view):
        return spec
    knobs = getattr(metadata, "knobs", None) or {}
    per = knobs.get(VIEW_POLICIES_KNOB)
    for candidate in (
        (per or {}).get(participant_id) if isinstance(per, dict) else None,
        knobs.get(VIEW_POLICY_KNOB),
    ):
        if isinstance(candidate, dict) and candidate.get("name") == spec["name"]:
            return {**spec, **{k: v for k, v in candidate.items() if k != "name"}}
    try:
        signature = inspect.signature(type(view))
    except (TypeError, ValueError):
        return spec
    for pname, param in signature.parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or not hasattr(view, pname):
            continue
        value = getattr(view, pname)
        if isinstance(value, str | int | float | bool | type(None) | list | dict):
            spec[pname] = value
    return spec


@dataclass(slots=True)
class TurnPreview:
    """What ``participant_id`` would receive if its turn ran now (re-projection over today's WAL)."""

    channel_id: str
    participant_id: str
    view: dict[str, Any]
    system_prompt: str
    history: list[BaseEvent]
    tools: list[dict[str, Any]]
    tokens: dict[str, int]
    token_method: str
    wal_length: int
    #: The participant's turn records are private to its own connection and operators, and this
    #: connection is neither: the system prompt and the agent's own tools are unknown here.
    turns_private: bool = False


class TurnSource(HubClientPort, Protocol):
    """What a turn preview reads of a ``HubClient``: the tools' ``HubClientPort`` and the view, adapter
    state and turn records in force."""

    def default_view_policy(self, channel_id: str | ChannelMetadata, participant_id: str) -> Any: ...

    async def adapter_state(self, channel_id: str, metadata: ChannelMetadata | None = None) -> Any: ...

    async def list_turns(self, *, agent_id: str | None = None, limit: int = 20) -> list[TurnRecord]: ...


class _ProbeClient:
    """Just enough of a client for ``adapter.tools_for`` to build tool schemas."""

    def __init__(self, hub_client: TurnSource, agent_id: str) -> None:
        self.hub_client = hub_client
        self.agent_id = agent_id

    async def send_envelope(self, envelope: Any) -> str:  # pragma: no cover - never called by a schema build
        raise RuntimeError("a preview cannot post")


async def learn_participant_names(hub_client: Any, metadata: ChannelMetadata) -> None:
    """Have ``hub_client`` know the names of the channel's participants before a projection labels their
    messages (``HubClient.learn_names``; a client without it names what it knows)."""
    learn = getattr(hub_client, "learn_names", None)
    if learn is None:
        return
    try:
        await learn(metadata.participant_ids())
    except Exception as exc:  # the names are labels: a turn goes on with the ids it has
        log.debug("names of channel %s's participants not learnt: %s", metadata.channel_id, exc)


async def project_for(
    hub_client: TurnSource, metadata: Any, participant_id: str, wal: Any, view: Any
) -> list[BaseEvent]:
    adapter = hub_client.adapter_for_metadata(metadata)
    await learn_participant_names(hub_client, metadata)
    return await view.project(
        wal,
        participant_id=participant_id,
        channel=metadata,
        render_envelope=adapter.render_envelope,
        name_for=hub_client.name_for,
    )


async def preview_turn(
    hub_client: TurnSource, channel_id: str, participant_id: str, view: Any = None
) -> TurnPreview:
    """Re-project the channel for ``participant_id`` now, with ``view`` (a spec or policy) or the one in force."""
    from ag2net.agent.tokens import default_counter
    from ag2net.views.registry import view_from_spec, view_spec

    md = await hub_client.get_channel(channel_id)
    adapter = hub_client.adapter_for_metadata(md)
    policy = view_from_spec(view) if view is not None else hub_client.default_view_policy(md, participant_id)
    wal = await hub_client.read_wal(channel_id)
    history = await project_for(hub_client, md, participant_id, wal, policy)
    state = await hub_client.adapter_state(channel_id, md)
    # The probe gets its own id: adapters cache ``say`` per client id, and a probe must never be reused.
    probe = _ProbeClient(hub_client, f"preview:{participant_id}")
    adapter_tools = [t.schema() for t in adapter.tools_for(probe, md, state, participant_id)]
    turns_private = False
    try:
        last = await hub_client.list_turns(agent_id=participant_id, limit=1)
    except AccessDeniedError:
        last, turns_private = [], True
    system = last[0].system_prompt if last else ""
    adapter_names = {t["function"]["name"] for t in adapter_tools}
    base_tools = [
        t
        for t in (last[0].tools if last else [])
        if t.get("function", {}).get("name") not in adapter_names
        and t.get("function", {}).get("name") != "say"
    ]
    tools = base_tools + adapter_tools
    counter = default_counter()
    tokens = {
        "system": counter.count_system(system),
        "history": counter.count_events(history),
        "tools": counter.count_tools(tools),
    }
    tokens["total"] = sum(tokens.values())
    return TurnPreview(
        channel_id=channel_id,
        participant_id=participant_id,
        view=view_spec(policy),
        system_prompt=system,
        history=history,
        tools=tools,
        tokens=tokens,
        token_method=counter.method,
        wal_length=len(wal),
        turns_private=turns_private,
    )


__all__ = [
    "TurnPreview",
    "TurnRecord",
    "TurnSource",
    "operator_label",
    "preview_turn",
    "project_for",
    "recorded_view_spec",
    "turn_rounds",
    "turn_usage",
]

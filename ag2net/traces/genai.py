"""Core: one stored turn record as GenAI spans (plain ``SpanSpec`` records; no OpenTelemetry imported).

A turn record (``TurnRecord.to_dict()``, as the hub stores it) holds what the model received on its first
call (system prompt, the projected history, the current input, the tools offered, the model parameters),
what each model call answered (``rounds``) and the tool calls with their results. From it come:

* ``network.turn {agent}`` (CONSUMER, ``ag2.span.type`` ``turn``): the hub's span of the stored turn;
* ``invoke_agent {agent}`` (INTERNAL, ``ag2.span.type`` ``agent``), its child: ``gen_ai.agent.id``/``name``,
  ``gen_ai.conversation.id`` (the channel id), the view the turn was projected with;
* ``chat {model}`` (CLIENT, ``ag2.span.type`` ``llm``), one per model call, children of ``invoke_agent``:
  ``gen_ai.input.messages`` is the projected view exactly as sent to the model (the chat-completions
  messages ``to_chat_messages`` builds, in the conventions' parts form), ``gen_ai.system_instructions``,
  ``gen_ai.tool.definitions``, ``gen_ai.output.messages``, the provider, request and response models,
  response id, finish reasons and token usage (``gen_ai.usage.*``, the cache counts in both the
  conventions' and AG2's spellings);
* ``execute_tool {tool}`` (INTERNAL, ``ag2.span.type`` ``tool``) per tool call: ``gen_ai.tool.name``,
  ``gen_ai.tool.call.id``; arguments and result only with content capture.

Content (messages, instructions, tool definitions, tool arguments and results) is written only when
``TraceOptions.capture_content`` is true; by default it is left out and only counts, names and ids remain.
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental`` leaves out the pre-1.37 names of renamed
attributes (``gen_ai.system``, ``gen_ai.workflow.name``) that are otherwise written beside the latest ones.

A turn record keeps no clock per model call: the ``chat`` and ``execute_tool`` spans are laid out, in
order, inside the turn's model time (``timings.model_ms``), and say so (``ag2net.span.timing``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from ag2net.ids import parse_time

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
STABILITY_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"

ATTR_SPAN_TYPE = "ag2.span.type"
ATTR_LINK_KIND = "ag2.link.kind"
ATTR_CHANNEL_ID = "ag2.network.channel_id"
ATTR_AGENT_ID = "ag2.network.agent_id"
ATTR_ENVELOPE_ID = "ag2.network.envelope_id"
ATTR_TURN_ID = "ag2.network.turn_id"

#: Values of ``gen_ai.output.messages[].finish_reason`` the conventions name.
FINISH_REASONS = ("stop", "length", "content_filter", "tool_call", "error")
_FINISH = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
}
"""A provider's ``finish_reason`` (``rounds[n].finish_reason``) in the conventions' words."""

_TRUE = {"1", "true", "yes", "on", "span_only", "span_and_event"}


@dataclass(frozen=True, slots=True)
class TraceOptions:
    """What the spans carry: message content (``capture_content``), and whether only the latest
    experimental GenAI names are written (``latest``; else the renamed attributes' old names too)."""

    capture_content: bool = False
    latest: bool = False

    @classmethod
    def from_env(cls, capture_content: bool | None = None, environ: Any = None) -> TraceOptions:
        """``capture_content`` when given, else ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
        (``true``/``span_only``/``span_and_event`` capture; anything else, or unset, does not);
        ``latest`` from ``OTEL_SEMCONV_STABILITY_OPT_IN`` naming ``gen_ai_latest_experimental``."""
        env = os.environ if environ is None else environ
        if capture_content is None:
            capture_content = str(env.get(CAPTURE_ENV, "")).strip().lower() in _TRUE
        opt_in = {part.strip().lower() for part in str(env.get(STABILITY_ENV, "")).split(",")}
        return cls(capture_content=bool(capture_content), latest=LATEST in opt_in)


@dataclass(slots=True)
class SpanSpec:
    """One span, before any tracer or file: ``key`` names it among its trace's specs (``parent`` and
    links refer to keys); times are Unix nanoseconds; ``kind`` is an OpenTelemetry ``SpanKind`` name."""

    key: str
    name: str
    parent: str | None
    start_ns: int
    end_ns: int
    kind: str = "INTERNAL"
    attributes: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    #: ``(name, time_ns, attributes)``
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    #: ``(key of the linked span, attributes)``
    links: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


def network_span(
    span_type: str,
    ident: object,
    subject: str,
    parent: str | None,
    start_ns: int,
    end_ns: int,
    *,
    kind: str = "INTERNAL",
    attributes: dict[str, Any],
    error: str | None = None,
) -> SpanSpec:
    """One of ag2net's own spans (channel, envelope, turn, task): named ``network.{span_type} {subject}``
    and keyed ``{span_type}:{ident}``."""
    return SpanSpec(
        key=f"{span_type}:{ident}",
        name=f"network.{span_type} {subject}",
        parent=parent,
        start_ns=start_ns,
        end_ns=end_ns,
        kind=kind,
        attributes=attributes,
        error=error,
    )


def iso_ns(iso: str | None) -> int | None:
    """Unix nanoseconds of an ISO-8601 time, or None when it is absent or malformed."""
    if not iso:
        return None
    try:
        return int(parse_time(iso).timestamp() * 1_000_000) * 1000
    except (TypeError, ValueError):
        return None


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


# ----------------------------------------------------------------------------------------- content


def _arguments(text: Any) -> Any:
    """A tool call's arguments as the object they encode, or the text when it is not JSON."""
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text or "{}")
    except ValueError:
        return text


def _parts_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if message.get("role") == "tool":
        return [{"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}]
    if isinstance(content, str) and (content or not message.get("tool_calls")):
        parts.append({"type": "text", "content": content})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name", ""),
                "arguments": _arguments(function.get("arguments")),
            }
        )
    return parts


def chat_messages(events: list[Any]) -> list[dict[str, Any]]:
    """The chat-completions messages a model is sent for ``events`` (``to_chat_messages``, no system)."""
    from ag2net.agent.openai_model import to_chat_messages

    return to_chat_messages("", events)


def input_messages(events: list[Any]) -> list[dict[str, Any]]:
    """``gen_ai.input.messages``: the messages sent for ``events``, in the conventions' parts form."""
    return [{"role": m["role"], "parts": _parts_of(m)} for m in chat_messages(events)]


def system_instructions(system: str) -> list[dict[str, Any]]:
    """``gen_ai.system_instructions``: the system prompt as one text part (none when it is empty)."""
    return [{"type": "text", "content": system}] if system else []


def tool_definitions(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``gen_ai.tool.definitions`` from the chat-completions tool schemas the model was offered."""
    out = []
    for tool in tools:
        nested = tool.get("function")
        function: dict[str, Any] = nested if isinstance(nested, dict) else tool
        out.append(
            {
                "type": tool.get("type") or "function",
                "name": str(function.get("name", "")),
                "description": str(function.get("description") or ""),
                "parameters": function.get("parameters"),
            }
        )
    return out


def output_message(content: str | None, calls: list[dict[str, Any]], finish_reason: str) -> dict[str, Any]:
    """One ``gen_ai.output.messages`` entry: the text and the tool calls one model call answered with.

    The text is also under ``content`` (the conventions allow more properties): AG2's reader
    (``ag2.eval``) takes the reply from ``messages[0]["content"]``."""
    parts: list[dict[str, Any]] = []
    if content:
        parts.append({"type": "text", "content": content})
    for call in calls:
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": call.get("name", ""),
                "arguments": _arguments(call.get("arguments")),
            }
        )
    message: dict[str, Any] = {"role": "assistant", "parts": parts, "finish_reason": finish_reason}
    if content:
        message["content"] = content
    return message


# ----------------------------------------------------------------------------------------- rounds


@dataclass(slots=True)
class Round:
    """One model call of a turn, rebuilt from the record: what it was sent and what it answered."""

    index: int
    events: list[Any]
    content: str | None
    calls: list[dict[str, Any]]
    finish_reason: str
    usage: dict[str, int]
    response_id: str


def _events(record: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    from ag2net.events import ModelRequest, event_from_dict, part_from_dict

    history = [event_from_dict(e) for e in record.get("history") or []]
    inputs = [part_from_dict(p) for p in record.get("inputs") or []]
    current = [ModelRequest(inputs)] if inputs else []
    return history, current


def rounds_of(record: dict[str, Any]) -> list[Round]:
    """The turn's model calls in order, each with the events it was sent: the first gets the projected
    history and the current input; each later one also the previous answer and its tool results."""
    from ag2net.events import ModelMessage, ToolCallEvent, ToolResultEvent

    history, current = _events(record)
    sent = history + current
    calls = {c.get("id"): c for c in record.get("tool_calls") or [] if isinstance(c, dict)}
    stored = [r for r in record.get("rounds") or [] if isinstance(r, dict)]
    count = max(len(stored), int(record.get("model_calls") or 0))
    if not stored and count:
        # an older record without rounds: one call answering with the reply and every tool call
        stored = [{"tool_calls": list(calls), "content": record.get("reply")}]
        count = 1
    turn_id = str(record.get("turn_id") or "")
    out: list[Round] = []
    used: set[str] = set()
    for n in range(count):
        entry = stored[n] if n < len(stored) else {"tool_calls": [], "content": None}
        answered = [calls[i] for i in entry.get("tool_calls") or [] if i in calls]
        used.update(str(c.get("id")) for c in answered)
        last = n == count - 1
        if last:  # tool calls no round names (a record cut short) belong to the last call
            answered += [c for i, c in calls.items() if str(i) not in used]
        content = entry.get("content")
        finish = _FINISH.get(str(entry.get("finish_reason") or ""), "tool_call" if answered else "stop")
        if last and record.get("error"):
            finish = "error"
        out.append(
            Round(
                index=n,
                events=list(sent),
                content=content if isinstance(content, str) else None,
                calls=answered,
                finish_reason=finish,
                usage=dict(entry.get("usage") or {}),
                response_id=str(entry.get("response_id") or f"{turn_id}.{n}"),
            )
        )
        if content:
            sent.append(ModelMessage(content))
        for call in answered:
            sent.append(
                ToolCallEvent(call.get("name", ""), call.get("arguments") or "{}", str(call.get("id")))
            )
        for call in answered:
            if call.get("result") is not None:
                result = str(call.get("result"))
                sent.append(ToolResultEvent(str(call.get("id")), call.get("name", ""), result))
    return out


_USAGE_KEYS = {
    "input": ("input_tokens", "prompt_tokens", "prompt", "input"),
    "output": ("output_tokens", "completion_tokens", "completion", "output"),
    "cache_read": ("cache_read_input_tokens", "cached_tokens", "cache_read", "cached"),
    "cache_creation": ("cache_creation_input_tokens", "cache_creation"),
    "reasoning": ("reasoning_tokens", "reasoning"),
}


def _pick(source: dict[str, Any], names: tuple[str, ...]) -> int | None:
    for name in names:
        value = source.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return int(value)
    return None


def usage_of(record: dict[str, Any], rnd: Round, rounds: int) -> tuple[dict[str, int], str]:
    """The tokens of one model call and how they were counted: the call's own usage when the record
    has it (``rounds[n].usage``), else the turn's (``usage``, or ``tokens`` when the turn had one call),
    else an estimate of what the call was sent and answered (the record's ``token_method``)."""
    method = str(record.get("token_method") or "heuristic")
    sources: list[tuple[dict[str, Any], str]] = []
    if rnd.usage:
        sources.append((rnd.usage, "provider"))
    if rounds == 1:
        if isinstance(record.get("usage"), dict) and record["usage"]:
            sources.append((record["usage"], "provider"))
        tokens = dict(record.get("tokens") or {})
        if tokens and "input" in tokens and not any(k in tokens for k in _USAGE_KEYS["input"][:3]):
            tokens["input"] = sum(int(tokens.get(k) or 0) for k in ("system", "history", "tools", "input"))
        if tokens:
            sources.append((tokens, method))
    for source, how in sources:
        found = {key: _pick(source, names) for key, names in _USAGE_KEYS.items()}
        if found["input"] is not None or found["output"] is not None:
            return {k: v for k, v in found.items() if v is not None}, how
    return _estimate(record, rnd), method


def _estimate(record: dict[str, Any], rnd: Round) -> dict[str, int]:
    from ag2net.agent.tokens import default_counter

    counter = default_counter()
    sent = counter.count_system(str(record.get("system_prompt") or ""))
    sent += counter.count_events(rnd.events) + counter.count_tools(list(record.get("tools") or []))
    answered = counter.count(rnd.content or "")
    for call in rnd.calls:
        answered += counter.count(str(call.get("name", "")) + str(call.get("arguments") or ""))
    return {"input": sent, "output": answered}


# ----------------------------------------------------------------------------------------- spans


def model_of(record: dict[str, Any]) -> tuple[str | None, str | None]:
    """``(provider, model)`` of a turn from its model parameters (None where the record does not say)."""
    params = record.get("model_params") or {}
    model = params.get("model") if isinstance(params.get("model"), str) else None
    provider = params.get("provider") or params.get("provider_name")
    if not isinstance(provider, str) or not provider:
        provider = "openai" if model else None  # ag2net's one shipped backend speaks OpenAI's API
    return provider, model


def _provider_attrs(provider: str | None, options: TraceOptions) -> dict[str, Any]:
    if not provider:
        return {}
    attrs: dict[str, Any] = {"gen_ai.provider.name": provider}
    if not options.latest:
        attrs["gen_ai.system"] = provider
    return attrs


def _usage_attrs(usage: dict[str, int]) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    if "input" in usage:
        attrs["gen_ai.usage.input_tokens"] = usage["input"]
    if "output" in usage:
        attrs["gen_ai.usage.output_tokens"] = usage["output"]
    if usage.get("cache_read") is not None:
        attrs["gen_ai.usage.cache_read.input_tokens"] = usage["cache_read"]
        attrs["gen_ai.usage.cache_read_input_tokens"] = usage["cache_read"]  # AG2's spelling
    if usage.get("cache_creation") is not None:
        attrs["gen_ai.usage.cache_creation.input_tokens"] = usage["cache_creation"]
        attrs["gen_ai.usage.cache_creation_input_tokens"] = usage["cache_creation"]  # AG2's spelling
    if usage.get("reasoning") is not None:
        attrs["gen_ai.usage.reasoning.output_tokens"] = usage["reasoning"]
        attrs["gen_ai.usage.thinking_tokens"] = usage["reasoning"]  # AG2's spelling
    return attrs


@dataclass(slots=True)
class _Clock:
    """The turn's model time cut into equal slots, one per model call and one per tool call."""

    start: int
    step: int
    at: int = 0

    def next(self) -> tuple[int, int]:
        begin = self.start + self.at * self.step
        self.at += 1
        return begin, begin + self.step


def _turn_window(record: dict[str, Any]) -> tuple[int, int, int]:
    """``(start, end, model start)`` of a turn in Unix ns, from ``started_at``/``duration_ms``/``timings``."""
    start = iso_ns(record.get("started_at")) or 0
    duration = record.get("duration_ms")
    span = int(float(duration) * 1_000_000) if isinstance(duration, int | float) and duration > 0 else 0
    timings = record.get("timings") or {}
    before = sum(float(timings.get(k) or 0) for k in ("projection_ms", "tool_schema_ms"))
    return start, start + span, start + min(int(before * 1_000_000), span)


def turn_spans(
    record: dict[str, Any],
    *,
    agent_name: str,
    options: TraceOptions,
    parent: str | None = None,
    stamp: dict[str, Any] | None = None,
) -> list[SpanSpec]:
    """The spans of one stored turn, parents before children: ``network.turn``, ``invoke_agent``, then
    each model call's ``chat`` followed by the ``execute_tool`` spans of the tool calls it asked for."""
    stamp = dict(stamp or {})
    turn_id = str(record.get("turn_id") or "")
    channel_id = str(record.get("channel_id") or "")
    agent_id = str(record.get("agent_id") or "")
    trigger = str(record.get("trigger_envelope_id") or "")
    start, end, model_start = _turn_window(record)
    error = record.get("error") or None
    base = {
        ATTR_CHANNEL_ID: channel_id,
        ATTR_AGENT_ID: agent_id,
        ATTR_ENVELOPE_ID: trigger,
        ATTR_TURN_ID: turn_id,
    }
    turn = network_span(
        "turn",
        turn_id,
        agent_name,
        parent,
        start,
        end,
        kind="CONSUMER",
        attributes={**stamp, ATTR_SPAN_TYPE: "turn", **base},
        error=str(error) if error else None,
    )
    provider, model = model_of(record)
    agent = SpanSpec(
        key=f"agent:{turn_id}",
        name=f"invoke_agent {agent_name}",
        parent=turn.key,
        start_ns=start,
        end_ns=end,
        attributes={
            **stamp,
            ATTR_SPAN_TYPE: "agent",
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.id": agent_id,
            "gen_ai.agent.name": agent_name,
            "gen_ai.conversation.id": channel_id,
            **_provider_attrs(provider, options),
            **({"gen_ai.request.model": model} if model else {}),
            **base,
            "ag2net.turn.view": to_json(record.get("view") or {}),
        },
        error=str(error) if error else None,
    )
    if error:
        agent.events.append(
            ("exception", end, {"exception.type": "TurnError", "exception.message": str(error)})
        )
    specs = [turn, agent]
    rounds = rounds_of(record)
    clock = _Clock(
        model_start, max(1, (end - model_start) // max(1, len(rounds) + sum(len(r.calls) for r in rounds)))
    )
    for rnd in rounds:
        specs.append(_chat_span(record, rnd, len(rounds), agent.key, clock.next(), options, stamp))
        for call in rnd.calls:
            specs.append(_tool_span(turn_id, call, agent.key, clock.next(), options, stamp, channel_id))
    return specs


def _chat_span(
    record: dict[str, Any],
    rnd: Round,
    rounds: int,
    parent: str,
    window: tuple[int, int],
    options: TraceOptions,
    stamp: dict[str, Any],
) -> SpanSpec:
    provider, model = model_of(record)
    params = record.get("model_params") or {}
    usage, method = usage_of(record, rnd, rounds)
    attrs: dict[str, Any] = {
        **stamp,
        ATTR_SPAN_TYPE: "llm",
        "gen_ai.operation.name": "chat",
        "gen_ai.conversation.id": str(record.get("channel_id") or ""),
        **_provider_attrs(provider, options),
        "gen_ai.output.type": "text",
        "gen_ai.response.id": rnd.response_id,
        "gen_ai.response.finish_reasons": [rnd.finish_reason],
        **_usage_attrs(usage),
        "ag2net.usage.method": method,
        "ag2net.span.timing": "laid out in the turn's model time",
        ATTR_TURN_ID: str(record.get("turn_id") or ""),
        "ag2net.chat.round": rnd.index,
        "ag2net.chat.tools_offered": [t["name"] for t in tool_definitions(list(record.get("tools") or []))],
    }
    if model:
        attrs["gen_ai.request.model"] = model
        attrs["gen_ai.response.model"] = model
    for key in ("temperature", "top_p", "max_tokens", "seed"):
        value = params.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            attrs[f"gen_ai.request.{key}"] = value
    if options.capture_content:
        system = str(record.get("system_prompt") or "")
        if system:
            attrs["gen_ai.system_instructions"] = to_json(system_instructions(system))
        attrs["gen_ai.input.messages"] = to_json(input_messages(rnd.events))
        attrs["gen_ai.output.messages"] = to_json([output_message(rnd.content, rnd.calls, rnd.finish_reason)])
        if record.get("tools"):
            attrs["gen_ai.tool.definitions"] = to_json(tool_definitions(list(record["tools"])))
    error = record.get("error") if rnd.finish_reason == "error" else None
    return SpanSpec(
        key=f"chat:{record.get('turn_id')}:{rnd.index}",
        name=f"chat {model}" if model else "chat",
        parent=parent,
        start_ns=window[0],
        end_ns=window[1],
        kind="CLIENT",
        attributes=attrs,
        error=str(error) if error else None,
    )


def _tool_span(
    turn_id: str,
    call: dict[str, Any],
    parent: str,
    window: tuple[int, int],
    options: TraceOptions,
    stamp: dict[str, Any],
    channel_id: str,
) -> SpanSpec:
    name = str(call.get("name", ""))
    attrs: dict[str, Any] = {
        **stamp,
        ATTR_SPAN_TYPE: "tool",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": str(call.get("id") or ""),
        "gen_ai.tool.type": "function",
        "gen_ai.conversation.id": channel_id,
        "ag2net.span.timing": "laid out in the turn's model time",
    }
    if options.capture_content:
        attrs["gen_ai.tool.call.arguments"] = str(call.get("arguments") or "{}")
        if call.get("result") is not None:
            attrs["gen_ai.tool.call.result"] = str(call["result"])
    spec = SpanSpec(
        key=f"tool:{turn_id}:{call.get('id')}",
        name=f"execute_tool {name}",
        parent=parent,
        start_ns=window[0],
        end_ns=window[1],
        attributes=attrs,
    )
    if call.get("is_error"):
        message = str(call.get("result") or "") if options.capture_content else "the tool reported an error"
        spec.error = message
        spec.events.append(
            ("exception", window[1], {"exception.type": "ToolError", "exception.message": message})
        )
    return spec


__all__ = [
    "CAPTURE_ENV",
    "LATEST",
    "STABILITY_ENV",
    "Round",
    "SpanSpec",
    "TraceOptions",
    "input_messages",
    "iso_ns",
    "model_of",
    "network_span",
    "output_message",
    "rounds_of",
    "system_instructions",
    "task_span",
    "tool_definitions",
    "turn_spans",
    "usage_of",
]


def task_span(
    task: dict[str, Any], *, reason: str = "", stamp: dict[str, Any] | None = None, parent: str | None = None
) -> SpanSpec:
    """``network.task {capability}`` for an ended task (``TaskMetadata.to_dict()``): from its start to its
    completion, OK when it completed, else ERROR with the reason."""
    spec = task.get("spec") or {}
    capability = str(spec.get("capability") or task.get("capability") or "task")
    state = str(task.get("state") or "")
    start = iso_ns(task.get("started_at")) or iso_ns(task.get("created_at")) or 0
    end = iso_ns(task.get("completed_at")) or start
    attrs: dict[str, Any] = {
        **(stamp or {}),
        ATTR_SPAN_TYPE: "task",
        "ag2.network.task_id": str(task.get("task_id") or ""),
        "ag2.network.capability": capability,
        "ag2.network.outcome": state,
    }
    if task.get("channel_id"):
        attrs[ATTR_CHANNEL_ID] = str(task["channel_id"])
    if task.get("owner_id"):
        attrs["ag2.network.owner_id"] = str(task["owner_id"])
    error = None if state == "completed" else (reason or str(task.get("error") or "") or state or "ended")
    return network_span(
        "task", task.get("task_id"), capability, parent, start, max(start, end), attributes=attrs, error=error
    )

"""Shell: OpenTelemetry spans for the hub: admission, dispatch failures and agent turns.

Only imported when a ``Hub`` is given a ``tracer_provider`` (``pip install ag2net[otel]``); a hub without
one never imports OpenTelemetry and pays nothing.

* ``network.envelope {event_type}`` (PRODUCER), one per substantive envelope (protocol events such as
  invites, acks and closes have none): started when the envelope is stamped, as the root of a new trace,
  linked to the poster's current span (in-process) or to the traceparent the poster put in
  ``trace_id``; its W3C traceparent is written into ``envelope.trace_id`` before the WAL append, so the
  stored envelope carries it and the receiving agent's handler forwards it (dependency
  ``"ag2.otel.traceparent"``). It ends once the envelope is handed to delivery; an admission that fails
  after stamping ends it with status ERROR.
* ``network.dispatch {event_type}`` (PRODUCER, status ERROR), a child of the envelope's span, for each
  delivery that failed (``on_dispatch_failed``).
* ``network.turn {agent name}`` (CONSUMER), a child of the triggering envelope's span: for each turn
  record an agent stores (start and duration from the record; ERROR when it carries an error) and for
  each failed turn reported to the hub (``report_turn_failure``; the exception is recorded on it).
* Under each stored turn's ``network.turn``, the GenAI spans of the turn (``ag2net.traces.genai``):
  ``invoke_agent {agent}``, a ``chat {model}`` per model call whose ``gen_ai.input.messages`` is the projected
  view as sent, and ``execute_tool {tool}`` per tool call. Message content only with ``capture_content=True``
  (the tracer's attribute, or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``), never by default.
* AG2's network spans (as ``ag2.network.hub.telemetry`` names them): ``network.channel {type}`` from a
  channel's creation to its close (with an ``invoke_workflow {type}`` child for a workflow channel),
  ``agent.lifetime {name}`` from registration to unregistration, ``network.task {capability}`` when a task
  ends, linked to its channel's span (``ag2.link.kind`` ``in_channel``).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Link, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ag2net.ids import parse_time
from ag2net.traces.genai import SpanSpec, TraceOptions, task_span, turn_spans

INSTRUMENTATION_NAME = "ag2net.hub"
TRACEPARENT_DEP_KEY = "ag2.otel.traceparent"

ATTR_SPAN_TYPE = "ag2.span.type"
ATTR_LINK_KIND = "ag2.link.kind"
ATTR_CHANNEL_ID = "ag2.network.channel_id"
ATTR_SENDER_ID = "ag2.network.sender_id"
ATTR_EVENT_TYPE = "ag2.network.event_type"
ATTR_ENVELOPE_ID = "ag2.network.envelope_id"
ATTR_CAUSATION_ID = "ag2.network.causation_id"
ATTR_AUDIENCE = "ag2.network.audience"
ATTR_RECIPIENT_ID = "ag2.network.recipient_id"
ATTR_AGENT_ID = "ag2.network.agent_id"
ATTR_TURN_ID = "ag2.network.turn_id"

# Spans started but not yet ended (admission between stamping and delivery); a bound so an admission
# that dies without reaching either end (a cancelled task) cannot grow this without limit.
_MAX_OPEN = 4096

_propagator = TraceContextTextMapPropagator()


def _ns(iso: str) -> int | None:
    try:
        return int(parse_time(iso).timestamp() * 1_000_000_000)
    except (TypeError, ValueError):
        return None


def traceparent_context(traceparent: str | None) -> Context | None:
    """The OpenTelemetry context a W3C ``traceparent`` names, or None when it is absent or malformed."""
    if not traceparent:
        return None
    ctx = _propagator.extract({"traceparent": traceparent})
    span_context = trace.get_current_span(ctx).get_span_context()
    return ctx if span_context.is_valid else None


class EnvelopeTracer:
    """The hub's span emitter; ``Hub`` calls ``start_envelope``/``end_envelope`` around an admission and
    hands it the ``on_dispatch_failed`` and ``on_turn_failed`` events (with the hub as first argument)."""

    def __init__(
        self,
        tracer_provider: Any,
        *,
        span_attributes: dict[str, Any] | None = None,
        capture_content: bool | None = None,
    ) -> None:
        get_tracer = getattr(tracer_provider, "get_tracer", None)
        if not callable(get_tracer):
            raise TypeError(
                "tracer_provider must be an OpenTelemetry TracerProvider (it has get_tracer); "
                f"got {type(tracer_provider).__name__}"
            )
        from ag2net.version import __version__

        self.tracer: Any = get_tracer(INSTRUMENTATION_NAME, __version__)
        self._stamp = dict(span_attributes or {})
        self._open: OrderedDict[str, Any] = OrderedDict()
        #: Whether turn spans carry message content; None: ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``.
        self.capture_content = capture_content
        self._channels: dict[str, Any] = {}  # channel id → its open network.channel span
        self._workflows: dict[str, Any] = {}  # channel id → its open invoke_workflow span
        self._agents: dict[str, Any] = {}  # agent id → its open agent.lifetime span

    @property
    def options(self) -> TraceOptions:
        """What the GenAI spans carry, read now (the environment may change between turns)."""
        return TraceOptions.from_env(self.capture_content)

    # ------------------------------------------------------------------ admission

    def start_envelope(self, envelope: Any) -> None:
        """Start the envelope's span (a new trace) and write its traceparent into ``envelope.trace_id``."""
        links = []
        caller = trace.get_current_span().get_span_context()
        if caller.is_valid:
            links.append(Link(caller, {ATTR_LINK_KIND: "triggered_by"}))
        else:
            given = traceparent_context(envelope.trace_id)
            if given is not None:
                links.append(
                    Link(trace.get_current_span(given).get_span_context(), {ATTR_LINK_KIND: "triggered_by"})
                )
        attributes = {
            **self._stamp,
            ATTR_SPAN_TYPE: "envelope",
            ATTR_CHANNEL_ID: envelope.channel_id,
            ATTR_SENDER_ID: envelope.sender_id,
            ATTR_EVENT_TYPE: envelope.event_type,
            ATTR_ENVELOPE_ID: envelope.envelope_id,
        }
        if envelope.causation_id:
            attributes[ATTR_CAUSATION_ID] = envelope.causation_id
        if envelope.audience is not None:
            attributes[ATTR_AUDIENCE] = list(envelope.audience)
        span = self.tracer.start_span(
            f"network.envelope {envelope.event_type}",
            context=Context(),  # a new trace: the envelope is the root of its own causal chain
            kind=SpanKind.PRODUCER,
            attributes=attributes,
            links=links,
        )
        carrier: dict[str, str] = {}
        _propagator.inject(carrier, context=trace.set_span_in_context(span))
        if "traceparent" in carrier:
            envelope.trace_id = carrier["traceparent"]
        self._open[envelope.envelope_id] = span
        while len(self._open) > _MAX_OPEN:
            _, stale = self._open.popitem(last=False)
            stale.set_status(Status(StatusCode.ERROR, "admission did not finish"))
            stale.end()

    def end_envelope(self, envelope: Any) -> None:
        """End the envelope's span: it is stored and handed to delivery."""
        span = self._open.pop(envelope.envelope_id, None)
        if span is not None:
            span.end()

    def fail_envelope(self, envelope: Any, exc: BaseException) -> None:
        """End the envelope's span (if its admission got as far as stamping) with status ERROR."""
        span = self._open.pop(getattr(envelope, "envelope_id", None) or "", None)
        if span is not None:
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
            span.end()

    # ------------------------------------------------------------------ listener events

    async def on_dispatch_failed(self, hub: Any, envelope: Any, recipient_id: str, reason: Any) -> None:
        parent = traceparent_context(getattr(envelope, "trace_id", None)) or Context()
        span = self.tracer.start_span(
            f"network.dispatch {envelope.event_type}",
            context=parent,
            kind=SpanKind.PRODUCER,
            attributes={
                **self._stamp,
                ATTR_SPAN_TYPE: "dispatch",
                ATTR_CHANNEL_ID: envelope.channel_id,
                ATTR_ENVELOPE_ID: envelope.envelope_id,
                ATTR_EVENT_TYPE: envelope.event_type,
                ATTR_RECIPIENT_ID: recipient_id,
            },
        )
        if isinstance(reason, BaseException):
            span.record_exception(reason)
        span.set_status(Status(StatusCode.ERROR, str(reason)))
        span.end()

    async def on_turn_failed(
        self, hub: Any, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException
    ) -> None:
        span = self.tracer.start_span(
            f"network.turn {hub.name_for(agent_id, default=agent_id)}",
            context=await self._trigger_context(hub, channel_id, envelope_id),
            kind=SpanKind.CONSUMER,
            attributes={
                **self._stamp,
                ATTR_SPAN_TYPE: "turn",
                ATTR_CHANNEL_ID: channel_id,
                ATTR_AGENT_ID: agent_id,
                ATTR_ENVELOPE_ID: envelope_id,
            },
        )
        span.record_exception(exc)
        span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        span.end()

    async def turn_recorded(self, hub: Any, record: dict[str, Any]) -> None:
        """The spans of one stored turn record (``network.turn`` and its GenAI children), timed by the
        record's ``started_at``, ``duration_ms`` and ``timings``."""
        channel_id = record.get("channel_id") or ""
        agent_id = record.get("agent_id") or ""
        specs = turn_spans(
            record,
            agent_name=hub.name_for(agent_id, default=agent_id),
            options=self.options,
            stamp=self._stamp,
        )
        root = await self._trigger_context(hub, channel_id, record.get("trigger_envelope_id") or "")
        self._emit(specs, root)

    def _emit(self, specs: list[SpanSpec], root: Context) -> None:
        """Start and end ``specs`` (parents first) as real spans; a spec without a parent among them is a
        child of ``root``."""
        made: dict[str, Any] = {}
        for spec in specs:
            parent = made.get(spec.parent or "")
            span = self.tracer.start_span(
                spec.name,
                context=trace.set_span_in_context(parent) if parent is not None else root,
                kind=getattr(SpanKind, spec.kind, SpanKind.INTERNAL),
                attributes=spec.attributes,
                start_time=spec.start_ns or None,
            )
            for name, at, attributes in spec.events:
                span.add_event(name, attributes, timestamp=at or None)
            if spec.error:
                span.set_status(Status(StatusCode.ERROR, spec.error))
            made[spec.key] = span
        for spec in reversed(specs):
            made[spec.key].end(end_time=spec.end_ns or None)

    # ------------------------------------------------------------------ AG2's network spans

    def _channel_link(self, channel_id: str) -> list[Any]:
        span = self._channels.get(channel_id)
        if span is None:
            return []
        return [Link(span.get_span_context(), {ATTR_LINK_KIND: "in_channel"})]

    async def on_channel_event(self, hub: Any, channel_id: str, kind: str, payload: dict[str, Any]) -> None:
        """``network.channel {type}`` from ``created`` to ``closed``/``expired`` (ERROR when it expired),
        and for a workflow channel its ``invoke_workflow {type}`` child over the same time."""
        md = payload.get("metadata")
        at = _ns(str(payload.get("at") or "")) if payload.get("at") else None
        if kind == "created":
            manifest_type = md.manifest.type if md is not None else "channel"
            attributes = {
                **self._stamp,
                ATTR_SPAN_TYPE: "channel",
                ATTR_CHANNEL_ID: channel_id,
                "ag2.network.manifest_type": manifest_type,
                "gen_ai.conversation.id": channel_id,
            }
            if md is not None:
                attributes["ag2.network.creator_id"] = md.creator_id
            span = self.tracer.start_span(
                f"network.channel {manifest_type}",
                context=Context(),
                kind=SpanKind.INTERNAL,
                attributes=attributes,
                start_time=at,
            )
            self._channels[channel_id] = span
            if manifest_type == "workflow":
                workflow = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": manifest_type}
                if not self.options.latest:
                    workflow["gen_ai.workflow.name"] = manifest_type
                self._workflows[channel_id] = self.tracer.start_span(
                    f"invoke_workflow {manifest_type}",
                    context=trace.set_span_in_context(span),
                    kind=SpanKind.INTERNAL,
                    attributes={
                        **self._stamp,
                        ATTR_CHANNEL_ID: channel_id,
                        **workflow,
                        "gen_ai.conversation.id": channel_id,
                    },
                    start_time=at,
                )
            return
        span = self._channels.get(channel_id)
        if span is None:
            return
        if kind == "opened":
            span.add_event("opened", timestamp=at)
        elif kind in ("closed", "expired"):
            span.add_event(kind, {"reason": str(payload.get("reason") or "")}, timestamp=at)
            if kind == "expired":
                span.set_status(Status(StatusCode.ERROR, "expired"))
            workflow = self._workflows.pop(channel_id, None)
            if workflow is not None:
                workflow.end(end_time=at)
            self._channels.pop(channel_id, None)
            span.end(end_time=at)

    async def on_agent_event(self, hub: Any, agent_id: str, kind: str, payload: dict[str, Any]) -> None:
        """``agent.lifetime {name}`` from ``registered`` to ``unregistered``."""
        at = _ns(str(payload.get("at") or "")) if payload.get("at") else None
        if kind == "registered":
            passport = payload.get("passport")
            name = getattr(passport, "name", None) or hub.name_for(agent_id, default=agent_id)
            self._agents[agent_id] = self.tracer.start_span(
                f"agent.lifetime {name}",
                context=Context(),
                kind=SpanKind.INTERNAL,
                attributes={
                    **self._stamp,
                    ATTR_SPAN_TYPE: "agent_lifetime",
                    "ag2.agent.id": agent_id,
                    "gen_ai.agent.name": name,
                },
                start_time=at,
            )
        elif kind == "unregistered":
            span = self._agents.pop(agent_id, None)
            if span is not None:
                span.add_event("unregistered", {"name": str(payload.get("name") or agent_id)}, timestamp=at)
                span.end(end_time=at)

    async def on_task_event(self, hub: Any, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        """``network.task {capability}`` when a task ends (OK when it completed), linked to its channel."""
        if kind not in ("completed", "failed", "expired", "cancelled", "mirror_failed"):
            return
        record: dict[str, Any] = {"task_id": task_id, "state": kind, **payload}
        lookup: Any = getattr(hub, "lookup_task", None)
        if lookup is not None:
            try:
                task: Any = lookup(task_id)
                record = {**task.to_dict(), "state": kind}
            except Exception:  # a task the hub no longer holds: the payload is all there is
                pass
        spec = task_span(record, reason=str(payload.get("reason") or ""), stamp=self._stamp)
        channel_id = payload.get("channel_id") or ""
        span = self.tracer.start_span(
            spec.name,
            context=Context(),
            kind=SpanKind.INTERNAL,
            attributes=spec.attributes,
            links=self._channel_link(channel_id) if channel_id else None,
            start_time=spec.start_ns or None,
        )
        span.set_status(Status(StatusCode.ERROR, spec.error) if spec.error else Status(StatusCode.OK))
        span.end(end_time=spec.end_ns or None)

    async def _trigger_context(self, hub: Any, channel_id: str, envelope_id: str) -> Context:
        """The context of the triggering envelope's span (a child of it), else a new trace."""
        if channel_id and envelope_id:
            found = await hub.find_envelope(channel_id, envelope_id)
            if found is not None:
                ctx = traceparent_context(found[1].trace_id)
                if ctx is not None:
                    return ctx
        return Context()


__all__ = ["TRACEPARENT_DEP_KEY", "EnvelopeTracer", "traceparent_context"]

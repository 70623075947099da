"""Core: a channel's WAL and turn records as one trace, and that trace as OTLP JSON or AG2 eval's files.

``channel_spans`` builds the trace of one channel from what the store holds, no tracer needed:

* ``network.channel {type}`` at the root (``ag2.span.type`` ``channel``), from the channel's creation to its
  close (or its last envelope or turn); its protocol envelopes (invite, ack, opened, closed …) are events on
  it; for a workflow channel an ``invoke_workflow {type}`` child holds everything else;
* ``network.envelope {event_type}`` (PRODUCER) per substantive envelope, linked to the envelope it answers
  (``causation_id``; ``ag2.link.kind`` ``triggered_by``);
* per turn record the spans of ``ag2net.traces.genai.turn_spans`` under its triggering envelope;
* ``network.task {capability}`` per ended task of the channel, linked ``in_channel`` to the root.

Span and trace ids are derived from the channel's and records' ids (sha256), so exporting the same
database twice gives the same file. ``otlp_document`` writes OTLP JSON (``resourceSpans``, one entry and
one trace per channel, the protobuf JSON mapping: hex ids, nanoseconds as strings, typed attribute
values); ``eval_document`` writes one file of AG2 eval's trace directory (``ag2.eval.sources.
DirectoryTraceSource``: ``{"trace_id", "task_id", "metadata", "spans": [...]}``).
"""

from __future__ import annotations

import hashlib
from typing import Any

from ag2net.traces.genai import (
    ATTR_CHANNEL_ID,
    ATTR_ENVELOPE_ID,
    ATTR_LINK_KIND,
    ATTR_SPAN_TYPE,
    SpanSpec,
    TraceOptions,
    iso_ns,
    network_span,
    task_span,
    turn_spans,
)

SERVICE_NAME = "ag2net"
SCOPE_NAME = "ag2net.hub"

#: OTLP's numeric ``Span.kind`` (``SPAN_KIND_INTERNAL`` = 1 …).
SPAN_KINDS = {"INTERNAL": 1, "SERVER": 2, "CLIENT": 3, "PRODUCER": 4, "CONSUMER": 5}


def _hex(text: str, width: int) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:width]


def trace_id_of(channel_id: str) -> str:
    """The 32-hex trace id of a channel's trace (stable across exports)."""
    return _hex(f"ag2net.channel:{channel_id}", 32)


def span_id_of(trace_id: str, key: str) -> str:
    return _hex(f"{trace_id}:{key}", 16)


def _is_protocol(event_type: str) -> bool:
    from ag2net.envelope import is_protocol_event

    return is_protocol_event(event_type)


def channel_spans(
    metadata: dict[str, Any],
    envelopes: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    *,
    name_for: Any,
    options: TraceOptions,
    tasks: list[dict[str, Any]] | None = None,
    label: str = "",
) -> list[SpanSpec]:
    """The spans of one channel's trace, parents before children (see the module's docstring)."""
    cid = str(metadata.get("channel_id") or "")
    manifest = metadata.get("manifest") or {}
    ctype = str(manifest.get("type") or "channel")
    times = [t for t in (iso_ns(e.get("created_at")) for e in envelopes) if t]
    starts = [iso_ns(metadata.get("created_at")), *times[:1]]
    start = min([t for t in starts if t] or [0])
    root = network_span(
        "channel",
        cid,
        ctype,
        None,
        start,
        start,
        attributes={
            ATTR_SPAN_TYPE: "channel",
            ATTR_CHANNEL_ID: cid,
            "ag2.network.manifest_type": ctype,
            "ag2.network.creator_id": str(metadata.get("creator_id") or ""),
            "gen_ai.conversation.id": cid,
            "ag2net.channel.state": str(metadata.get("state") or ""),
            **({"ag2net.channel.label": label} if label else {}),
        },
    )
    if metadata.get("state") == "expired":
        root.error = "expired"
    specs = [root]
    under = root.key
    if ctype == "workflow":
        workflow = {"gen_ai.operation.name": "invoke_workflow", "gen_ai.agent.name": label or ctype}
        if not options.latest:
            workflow["gen_ai.workflow.name"] = label or ctype
        specs.append(
            SpanSpec(
                key=f"workflow:{cid}",
                name=f"invoke_workflow {ctype}",
                parent=root.key,
                start_ns=start,
                end_ns=start,
                attributes={ATTR_CHANNEL_ID: cid, "gen_ai.conversation.id": cid, **workflow},
            )
        )
        under = specs[-1].key
    known = {str(e.get("envelope_id")) for e in envelopes if not _is_protocol(str(e.get("event_type") or ""))}
    for env in envelopes:
        specs.extend(_envelope_span(env, root, under, known))
    for record in turns:
        trigger = str(record.get("trigger_envelope_id") or "")
        agent_id = str(record.get("agent_id") or "")
        specs.extend(
            turn_spans(
                record,
                agent_name=name_for(agent_id),
                options=options,
                parent=f"envelope:{trigger}" if trigger in known else under,
            )
        )
    for task in tasks or []:
        if task.get("channel_id") == cid and str(task.get("state")) in (
            "completed",
            "failed",
            "expired",
            "cancelled",
        ):
            spec = task_span(task, parent=root.key)
            spec.links.append((root.key, {ATTR_LINK_KIND: "in_channel"}))
            specs.append(spec)
    end = max([s.end_ns for s in specs] + [iso_ns(metadata.get("closed_at")) or 0, start])
    for spec in specs[: 2 if ctype == "workflow" else 1]:
        spec.end_ns = end
    return specs


def _envelope_span(env: dict[str, Any], root: SpanSpec, parent: str, known: set[str]) -> list[SpanSpec]:
    """An envelope's span, or (a protocol envelope) an event on the channel's root span."""
    event_type = str(env.get("event_type") or "")
    at = iso_ns(env.get("created_at")) or root.start_ns
    envelope_id = str(env.get("envelope_id") or "")
    if _is_protocol(event_type):
        root.events.append(
            (
                event_type,
                at,
                {ATTR_ENVELOPE_ID: envelope_id, "ag2.network.sender_id": str(env.get("sender_id"))},
            )
        )
        return []
    attrs: dict[str, Any] = {
        ATTR_SPAN_TYPE: "envelope",
        ATTR_CHANNEL_ID: str(env.get("channel_id") or ""),
        "ag2.network.sender_id": str(env.get("sender_id") or ""),
        "ag2.network.event_type": event_type,
        ATTR_ENVELOPE_ID: envelope_id,
    }
    causation = env.get("causation_id")
    if causation:
        attrs["ag2.network.causation_id"] = str(causation)
    if env.get("audience") is not None:
        attrs["ag2.network.audience"] = [str(a) for a in env["audience"]]
    if env.get("trace_id"):
        attrs["ag2net.envelope.traceparent"] = str(env["trace_id"])  # the live span, when one was traced
    spec = network_span(
        "envelope", envelope_id, event_type, parent, at, at, kind="PRODUCER", attributes=attrs
    )
    if causation and str(causation) in known:
        spec.links.append((f"envelope:{causation}", {ATTR_LINK_KIND: "triggered_by"}))
    return [spec]


# ----------------------------------------------------------------------------------------- OTLP JSON


def otlp_value(value: Any) -> dict[str, Any]:
    """One attribute value in OTLP's JSON mapping (ints as strings, lists as ``arrayValue``)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, list | tuple):
        return {"arrayValue": {"values": [otlp_value(v) for v in value]}}
    return {"stringValue": str(value)}


def _attributes(attrs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"key": k, "value": otlp_value(v)} for k, v in attrs.items() if v is not None]


def otlp_span(spec: SpanSpec, trace_id: str) -> dict[str, Any]:
    span: dict[str, Any] = {
        "traceId": trace_id,
        "spanId": span_id_of(trace_id, spec.key),
        "name": spec.name,
        "kind": SPAN_KINDS.get(spec.kind, 1),
        "startTimeUnixNano": str(spec.start_ns),
        "endTimeUnixNano": str(max(spec.end_ns, spec.start_ns)),
        "attributes": _attributes(spec.attributes),
        "status": {"code": 2, "message": spec.error} if spec.error else {"code": 0},
    }
    if spec.parent:
        span["parentSpanId"] = span_id_of(trace_id, spec.parent)
    if spec.events:
        span["events"] = [
            {"timeUnixNano": str(at), "name": name, "attributes": _attributes(a)}
            for name, at, a in spec.events
        ]
    if spec.links:
        span["links"] = [
            {"traceId": trace_id, "spanId": span_id_of(trace_id, key), "attributes": _attributes(a)}
            for key, a in spec.links
        ]
    return span


def otlp_resource_spans(specs: list[SpanSpec], trace_id: str) -> dict[str, Any]:
    """One ``resourceSpans`` entry: the service ``ag2net`` and one scope holding ``specs``."""
    from ag2net.version import __version__

    return {
        "resource": {
            "attributes": _attributes({"service.name": SERVICE_NAME, "service.version": __version__})
        },
        "scopeSpans": [
            {
                "scope": {"name": SCOPE_NAME, "version": __version__},
                "spans": [otlp_span(s, trace_id) for s in specs],
            }
        ],
    }


def otlp_document(traces: list[tuple[str, list[SpanSpec]]]) -> dict[str, Any]:
    """OTLP JSON for ``[(trace id, specs), …]``: ``{"resourceSpans": [one entry per trace]}``."""
    return {"resourceSpans": [otlp_resource_spans(specs, tid) for tid, specs in traces]}


# ----------------------------------------------------------------------------------------- AG2 eval


def eval_span(spec: SpanSpec, trace_id: str) -> dict[str, Any]:
    """One span as ``ag2.eval.sources.span_data_to_dict`` writes it."""
    return {
        "name": spec.name,
        "span_id": span_id_of(trace_id, spec.key),
        "parent_id": span_id_of(trace_id, spec.parent) if spec.parent else None,
        "start_ns": spec.start_ns,
        "end_ns": max(spec.end_ns, spec.start_ns),
        "attributes": dict(spec.attributes),
        "status": "ERROR" if spec.error else "UNSET",
        "events": [{"name": name, "attributes": dict(a)} for name, _, a in spec.events],
    }


def eval_document(trace_id: str, specs: list[SpanSpec], metadata: dict[str, Any]) -> dict[str, Any]:
    """One file of AG2 eval's trace directory (``<trace_id>.json``, read by ``DirectoryTraceSource``)."""
    return {
        "trace_id": trace_id,
        "task_id": None,
        "metadata": dict(metadata),
        "spans": [eval_span(s, trace_id) for s in specs],
    }


__all__ = [
    "SPAN_KINDS",
    "channel_spans",
    "eval_document",
    "eval_span",
    "otlp_document",
    "otlp_resource_spans",
    "otlp_span",
    "otlp_value",
    "span_id_of",
    "trace_id_of",
]

"""The hub's live GenAI spans (``Hub(tracer_provider=…)``) with the real OpenTelemetry SDK and its in-memory
exporter, on a real hub with ScriptedModel agents: ``invoke_agent`` under each ``network.turn``, a ``chat``
per model call, ``execute_tool`` per tool call, AG2's ``network.channel`` / ``invoke_workflow`` /
``agent.lifetime``; no content by default, content when the tracer (or the environment) asks for it."""

from __future__ import annotations

import json

import pytest
from test_traces import CONTENT_KEYS, SECRET_WORD, build_network, check_attribute, records_of
from test_ws_interop import ag2_python  # noqa: F401  (a fixture: the ag2 1.2.1 virtualenv's python)

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is in the dev extra")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ag2net import Hub, MemoryStore


@pytest.fixture
def exporter():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider  # pyright: ignore[reportAttributeAccessIssue]
    return exporter


async def traced_network(exporter, *, capture: bool | None):
    hub = await Hub.open(
        MemoryStore(),
        tracer_provider=exporter.provider,
        ttl_sweep_interval=0,
        expectation_sweep_interval=0,
        invite_ack_timeout=5,
        trace_content=capture,  # the hub's option: the tracer's capture_content
    )
    assert hub.services.listeners.tracer.capture_content is capture
    net = await build_network(hub)
    net["hub"] = hub
    return net


def named(spans, prefix: str):
    return [s for s in spans if s.name.startswith(prefix)]


async def test_live_turns_become_genai_spans_without_content_by_default(exporter, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    net = await traced_network(exporter, capture=None)
    hub = net["hub"]
    try:
        spans = exporter.get_finished_spans()
        by_id = {s.context.span_id: s for s in spans}
        records = await records_of(hub, net["conversation"]) + await records_of(hub, net["workflow"])
        agents = named(spans, "invoke_agent")
        assert len(agents) == len(records) == len(named(spans, "network.turn"))
        assert len(named(spans, "chat")) == sum(r["model_calls"] for r in records)
        assert len(named(spans, "execute_tool")) == sum(len(r["tool_calls"]) for r in records)
        for agent in agents:
            turn = by_id[agent.parent.span_id]
            assert turn.name.startswith("network.turn") and turn.kind == SpanKind.CONSUMER
            envelope = by_id[turn.parent.span_id]  # the triggering envelope's span: same trace
            assert envelope.name.startswith("network.envelope")
            assert agent.context.trace_id == envelope.context.trace_id
            assert agent.attributes["gen_ai.operation.name"] == "invoke_agent"
            assert agent.attributes["gen_ai.conversation.id"] in (net["conversation"], net["workflow"])
            assert agent.attributes["gen_ai.agent.name"] == agent.name.removeprefix("invoke_agent ")
        for chat in named(spans, "chat"):
            parent = by_id[chat.parent.span_id]
            assert parent.name.startswith("invoke_agent") and chat.kind == SpanKind.CLIENT
            assert chat.attributes["gen_ai.usage.input_tokens"] > 0
            assert chat.attributes["ag2.span.type"] == "llm"
        for span in spans:
            assert not set(span.attributes) & set(CONTENT_KEYS), span.name
            assert "gen_ai.tool.call.arguments" not in span.attributes
            assert SECRET_WORD not in json.dumps(dict(span.attributes), default=str), span.name
            assert SECRET_WORD not in (span.status.description or "")
        (failed,) = [s for s in named(spans, "execute_tool") if s.status.status_code == StatusCode.ERROR]
        assert failed.name == "execute_tool broken"
        # AG2's network spans: the closed workflow's channel span, with its invoke_workflow child
        (flow,) = [
            s
            for s in named(spans, "network.channel")
            if s.attributes["ag2.network.channel_id"] == net["workflow"]
        ]
        assert flow.name == "network.channel workflow" and flow.attributes["ag2.span.type"] == "channel"
        (workflow,) = named(spans, "invoke_workflow")
        assert workflow.parent.span_id == flow.context.span_id
        assert workflow.attributes["gen_ai.operation.name"] == "invoke_workflow"
        assert [e.name for e in flow.events][-1] == "closed"
        await net["hc"].close()
    finally:
        await hub.close()


async def test_live_content_when_the_tracer_captures_it(exporter):
    net = await traced_network(exporter, capture=True)
    hub = net["hub"]
    try:
        spans = exporter.get_finished_spans()
        chats = named(spans, "chat")
        for chat in chats:
            check_attribute("gen_ai.input.messages", chat.attributes["gen_ai.input.messages"])
            check_attribute("gen_ai.output.messages", chat.attributes["gen_ai.output.messages"])
        bobs = [c for c in chats if c.attributes.get("gen_ai.conversation.id") == net["conversation"]]
        bobs.sort(key=lambda c: c.start_time)
        assert all(SECRET_WORD in c.attributes["gen_ai.system_instructions"] for c in bobs)
        first = json.loads(bobs[0].attributes["gen_ai.input.messages"])
        assert first[-1] == {
            "role": "user",
            "parts": [{"type": "text", "content": f"what is {SECRET_WORD}?"}],
        }
        (lookup,) = named(spans, "execute_tool lookup")
        assert SECRET_WORD in lookup.attributes["gen_ai.tool.call.result"]
        await net["hc"].close()
    finally:
        await hub.close()


async def test_the_environment_turns_content_on(exporter, monkeypatch):
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    net = await traced_network(exporter, capture=None)
    try:
        assert all(
            "gen_ai.input.messages" in c.attributes for c in named(exporter.get_finished_spans(), "chat")
        )
        await net["hc"].close()
    finally:
        await net["hub"].close()


async def test_agent_lifetime_spans_run_from_registration_to_unregistration(exporter):
    net = await traced_network(exporter, capture=None)
    hub = net["hub"]
    try:
        bob = net["agents"]["bob"]
        assert named(exporter.get_finished_spans(), "agent.lifetime") == () or not named(
            exporter.get_finished_spans(), "agent.lifetime"
        )  # every agent is still registered
        await bob.unregister()
        (span,) = named(exporter.get_finished_spans(), "agent.lifetime")
        assert span.name == "agent.lifetime bob"
        assert span.attributes["ag2.span.type"] == "agent_lifetime"
        assert span.attributes["ag2.agent.id"] == bob.agent_id
        assert [e.name for e in span.events] == ["unregistered"]
        await net["hc"].close()
    finally:
        await hub.close()


LIVE_READER = """
import json, sys
from ag2.eval.sources import spans_to_trace
from ag2.eval.sources._spans import span_data_from_dict
from ag2.events import ModelResponse, ToolCallEvent

out = {}
for trace_id, spans in json.load(open(sys.argv[1])).items():
    trace = spans_to_trace([span_data_from_dict(s) for s in spans])
    out[trace_id] = {
        "responses": len(trace.events_of(ModelResponse)),
        "tools": sorted(e.name for e in trace.events_of(ToolCallEvent)),
        "tokens": [trace.tokens.input, trace.tokens.output],
    }
print(json.dumps(out))
"""


def _as_span_data(span) -> dict:
    """A finished SDK span as ``ag2.eval``'s ``span_data_to_dict`` writes one."""
    return {
        "name": span.name,
        "span_id": f"{span.context.span_id:016x}",
        "parent_id": f"{span.parent.span_id:016x}" if span.parent else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "attributes": {k: list(v) if isinstance(v, tuple) else v for k, v in span.attributes.items()},
        "status": {StatusCode.ERROR: "ERROR", StatusCode.OK: "OK"}.get(span.status.status_code, "UNSET"),
        "events": [{"name": e.name, "attributes": dict(e.attributes)} for e in span.events],
    }


async def test_ag2_eval_builds_a_trace_from_the_live_spans(exporter, tmp_path, ag2_python):  # noqa: F811
    import subprocess

    net = await traced_network(exporter, capture=True)
    try:
        await net["hc"].close()
    finally:
        await net["hub"].close()
    traces: dict[str, list] = {}
    for span in exporter.get_finished_spans():
        traces.setdefault(f"{span.context.trace_id:032x}", []).append(span)
    file = tmp_path / "live.json"
    file.write_text(json.dumps({t: [_as_span_data(s) for s in spans] for t, spans in traces.items()}))
    script = tmp_path / "read_live.py"
    script.write_text(LIVE_READER, encoding="utf-8")
    done = subprocess.run(
        [str(ag2_python), str(script), str(file)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    with_turns = 0
    for trace_id, spans in traces.items():
        chats = named(spans, "chat")
        if not chats:
            continue
        with_turns += 1
        got = read[trace_id]
        assert got["responses"] == len(chats)
        assert got["tools"] == sorted(s.attributes["gen_ai.tool.name"] for s in named(spans, "execute_tool"))
        assert got["tokens"] == [
            sum(c.attributes["gen_ai.usage.input_tokens"] for c in chats),
            sum(c.attributes["gen_ai.usage.output_tokens"] for c in chats),
        ]
    assert with_turns == len(
        named(exporter.get_finished_spans(), "invoke_agent")
    )  # a trace per triggered turn

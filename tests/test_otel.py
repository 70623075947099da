"""OpenTelemetry spans (``Hub(tracer_provider=...)``, the ``otel`` extra) with the real SDK and an
in-memory exporter: admission, dispatch failures, turns; and no OpenTelemetry at all without a provider."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from support import until

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK is in the dev extra")

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from ag2net import EV_TEXT, Hub, HubClient, MemoryStore, Passport, StoreError, TurnRecord
from ag2net.ids import ManualClock


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    exporter.provider = provider
    return exporter


def traceparent(span) -> str:
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


class FlakyStore(MemoryStore):
    """A memory store whose WAL append can be made to fail (a full disk, say)."""

    fail = False

    async def append(self, channel_id: str, envelope_id: str, envelope_json: str) -> int:
        if self.fail:
            raise StoreError("disk full")
        return await super().append(channel_id, envelope_id, envelope_json)


async def conversation(hub: Hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    return hc, alice, bob, ch


async def test_one_producer_span_per_substantive_envelope_and_its_traceparent_is_stored(spans):
    hub = await Hub.open(
        MemoryStore(), tracer_provider=spans.provider, ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    assert hub.tracing
    try:
        hc, alice, bob, ch = await conversation(hub)
        assert spans.get_finished_spans() == ()  # invite, ack, opened: protocol events have no span
        envelope_id = await alice.send(ch.channel_id, "hello")
        (span,) = spans.get_finished_spans()
        assert span.name == f"network.envelope {EV_TEXT}"
        assert span.kind == SpanKind.PRODUCER
        assert span.parent is None  # the root of a new trace
        assert span.attributes["ag2.network.channel_id"] == ch.channel_id
        assert span.attributes["ag2.network.sender_id"] == alice.agent_id
        assert span.attributes["ag2.network.event_type"] == EV_TEXT
        assert span.attributes["ag2.network.envelope_id"] == envelope_id
        assert span.status.status_code == StatusCode.UNSET
        # the traceparent is on the stored envelope (written before the WAL append)
        stored = next(e for e in await hub.read_wal(ch.channel_id) if e.envelope_id == envelope_id)
        assert stored.trace_id == traceparent(span)
        assert traceparent(span) in (await hub.store.read_wal(ch.channel_id))[-1]  # the stored JSON too
        await hc.close()
    finally:
        await hub.close()


async def test_envelope_span_links_to_the_posters_current_span(spans):
    hub = Hub(
        MemoryStore(), tracer_provider=spans.provider, ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    async with hub:
        hc, alice, bob, ch = await conversation(hub)
        tracer = spans.provider.get_tracer("test")
        with tracer.start_as_current_span("agent work") as work:
            await alice.send(ch.channel_id, "from inside a span")
        envelope_span = next(s for s in spans.get_finished_spans() if s.name.startswith("network.envelope"))
        assert envelope_span.context.trace_id != work.get_span_context().trace_id  # a new trace...
        (link,) = envelope_span.links  # ...linked to the work that posted it
        assert link.context.span_id == work.get_span_context().span_id
        assert link.attributes["ag2.link.kind"] == "triggered_by"
        await hc.close()


async def test_a_failed_wal_append_ends_the_span_with_error(spans):
    store = FlakyStore()
    hub = await Hub.open(
        store, tracer_provider=spans.provider, ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    try:
        hc, alice, bob, ch = await conversation(hub)
        store.fail = True
        with pytest.raises(StoreError):
            await alice.send(ch.channel_id, "lost")
        (span,) = spans.get_finished_spans()
        assert span.status.status_code == StatusCode.ERROR and "disk full" in span.status.description
        assert [e.name for e in span.events] == ["exception"]
        assert hub.listeners.tracer._open == {}  # nothing left open
        store.fail = False
        await hc.close()
    finally:
        await hub.close()


async def test_failed_dispatch_and_failed_turn_spans_are_children_of_the_envelope_span(spans):
    hub = await Hub.open(
        MemoryStore(), tracer_provider=spans.provider, ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    try:
        hc, alice, bob, ch = await conversation(hub)

        class Broken:
            endpoint_id = "broken-endpoint"

            async def notify(self, recipient_id, envelope):
                raise ConnectionError("peer went away")

            async def close(self):
                return None

        hub.attach_endpoint(Broken())
        hub.bind_endpoint("broken-endpoint", bob.agent_id)
        envelope_id = await alice.send(ch.channel_id, "to a broken endpoint")
        await until(lambda: any(s.name.startswith("network.dispatch") for s in spans.get_finished_spans()))
        envelope_span = next(s for s in spans.get_finished_spans() if s.name.startswith("network.envelope"))
        dispatch = next(s for s in spans.get_finished_spans() if s.name.startswith("network.dispatch"))
        assert dispatch.name == f"network.dispatch {EV_TEXT}"
        assert dispatch.parent.span_id == envelope_span.context.span_id
        assert dispatch.context.trace_id == envelope_span.context.trace_id
        assert dispatch.status.status_code == StatusCode.ERROR
        assert dispatch.attributes["ag2.network.recipient_id"] == bob.agent_id

        await hub.report_turn_failure(
            channel_id=ch.channel_id,
            agent_id=bob.agent_id,
            envelope_id=envelope_id,
            exc=ValueError("bad tool"),
        )
        turn = next(s for s in spans.get_finished_spans() if s.name.startswith("network.turn"))
        assert turn.name == "network.turn bob"
        assert turn.kind == SpanKind.CONSUMER
        assert turn.parent.span_id == envelope_span.context.span_id
        assert turn.status.status_code == StatusCode.ERROR and "bad tool" in turn.status.description
        (event,) = turn.events
        assert event.name == "exception" and event.attributes["exception.type"] == "ValueError"
        await hc.close()
    finally:
        await hub.close()


async def test_a_recorded_turn_becomes_a_timed_span_under_its_trigger(spans):
    clock = ManualClock("2026-03-01T12:00:00.000000Z")
    hub = await Hub.open(
        MemoryStore(),
        clock=clock,
        tracer_provider=spans.provider,
        ttl_sweep_interval=0,
        expectation_sweep_interval=0,
    )
    try:
        hc, alice, bob, ch = await conversation(hub)
        envelope_id = await alice.send(ch.channel_id, "please answer")
        record = TurnRecord(
            channel_id=ch.channel_id,
            agent_id=bob.agent_id,
            trigger_envelope_id=envelope_id,
            started_at="2026-03-01T12:00:01.000000Z",
            duration_ms=1500.0,
            error="model timed out",
        )
        turn_id = await hub.record_turn(record.to_dict())
        envelope_span = next(s for s in spans.get_finished_spans() if s.name.startswith("network.envelope"))
        turn = next(s for s in spans.get_finished_spans() if s.name.startswith("network.turn"))
        assert turn.name == "network.turn bob" and turn.parent.span_id == envelope_span.context.span_id
        assert turn.end_time - turn.start_time == 1_500_000_000
        assert turn.attributes["ag2.network.turn_id"] == turn_id
        assert turn.status.status_code == StatusCode.ERROR
        await hc.close()
    finally:
        await hub.close()


def test_a_tracer_provider_must_be_one():
    with pytest.raises(TypeError, match="tracer_provider must be an OpenTelemetry TracerProvider"):
        Hub(MemoryStore(), tracer_provider="jaeger")


def test_the_global_no_op_provider_is_accepted(spans):
    hub = Hub(MemoryStore(), tracer_provider=trace.get_tracer_provider())
    assert hub.tracing


def test_without_a_tracer_provider_opentelemetry_is_never_imported(tmp_path):
    script = textwrap.dedent(
        """
        import asyncio, sys
        from ag2net import Hub, HubClient, Passport

        async def main():
            hub = await Hub.open(str(sys.argv[1]), ttl_sweep_interval=0, expectation_sweep_interval=0)
            hc = HubClient.local(hub)
            alice = await hc.register_human(Passport(name="alice", kind="human"))
            await hc.register_human(Passport(name="bob", kind="human"))
            ch = await alice.open(type="conversation", target="bob")
            await alice.send(ch.channel_id, "hi")
            wal = await hub.read_wal(ch.channel_id)
            await hc.close()
            await hub.close()
            print(wal[-1].trace_id, any(m.split(".")[0] == "opentelemetry" for m in sys.modules))

        asyncio.run(main())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "hub.db")], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["None", "False"]

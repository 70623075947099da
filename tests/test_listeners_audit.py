"""Listeners and the audit log (reference §3.12, §3.14): BaseHubListener, the Hub's own hooks, AuditLog."""

from __future__ import annotations

import asyncio
import json

import pytest
from support import quiet, until

from ag2net import (
    AUDIT_KIND_AGENT_REGISTERED,
    AUDIT_KIND_AGENT_UNREGISTERED,
    AUDIT_KIND_CHANNEL_CLOSED,
    AUDIT_KIND_CHANNEL_CREATED,
    AUDIT_KIND_RESUME_SET,
    AUDIT_KIND_RULE_SET,
    AUDIT_KIND_SKILL_SET,
    AUDIT_KIND_TURN_FAILED,
    EV_TEXT,
    RESUME_SOURCE_TENANT,
    AuditLog,
    BaseHubListener,
    Envelope,
    Hub,
    HubClient,
    HubListener,
    MemoryStore,
    Passport,
    ProtocolError,
    Resume,
    Rule,
    SqliteStore,
)
from ag2net.ids import ManualClock


class Events(BaseHubListener):
    """Overrides only the hooks the tests look at; the others stay BaseHubListener's no-ops."""

    def __init__(self, label: str = "", log: list | None = None) -> None:
        self.label = label
        self.log: list[tuple] = log if log is not None else []

    async def on_envelope_posted(self, envelope, metadata):
        self.log.append((self.label, "posted", envelope.event_type, metadata.channel_id))

    async def on_envelope_rejected(self, envelope, reason):
        self.log.append((self.label, "rejected", envelope.event_type, type(reason).__name__))

    async def on_channel_event(self, channel_id, kind, payload):
        self.log.append((self.label, "channel", kind, channel_id))

    async def on_agent_event(self, agent_id, kind, payload):
        self.log.append((self.label, "agent", kind, agent_id))


class Exploding(BaseHubListener):
    def __init__(self) -> None:
        self.calls = 0

    async def on_envelope_posted(self, envelope, metadata):
        self.calls += 1
        raise RuntimeError("listener bug")

    async def on_channel_event(self, channel_id, kind, payload):
        self.calls += 1
        raise RuntimeError("listener bug")

    async def on_agent_event(self, agent_id, kind, payload):
        self.calls += 1
        raise RuntimeError("listener bug")


async def open_hub(store=None, **kw) -> Hub:
    return await Hub.open(store or MemoryStore(), **quiet(**kw))


async def conversation(hub: Hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    return hc, alice, bob, ch


def test_base_listener_is_a_hub_listener_and_its_hooks_are_async_no_ops():
    listener = BaseHubListener()
    assert isinstance(listener, HubListener)
    assert asyncio.run(listener.on_envelope_posted(None, None)) is None
    assert asyncio.run(listener.on_inbox_pressure("a", 1, 2)) is None


async def test_listener_sees_agent_channel_posted_and_rejected_events_in_order():
    hub = await open_hub()
    events = Events()
    hub.register_listener(events)
    try:
        hc, alice, bob, ch = await conversation(hub)
        await alice.send(ch.channel_id, "hello")
        with pytest.raises(ProtocolError):
            # bob is a participant, carol is not registered: refused
            await hub.post_envelope(
                Envelope(ch.channel_id, alice.agent_id, ["nobody"], EV_TEXT, {"text": "x"})
            )
        await hc.close()
        kinds = [(e[1], e[2]) for e in events.log]
        assert kinds[:2] == [("agent", "registered"), ("agent", "registered")]
        created = kinds.index(("channel", "created"))
        opened = kinds.index(("channel", "opened"))
        text = kinds.index(("posted", EV_TEXT))
        assert 1 < created < opened < text < kinds.index(("rejected", EV_TEXT))
        # the invite and ack are posted envelopes too (protocol events), between created and opened
        assert ("posted", "ag2.channel.invite") in kinds[created:opened]
        assert {e[3] for e in events.log if e[1] == "channel"} == {ch.channel_id}
    finally:
        await hub.close()


async def test_a_failing_listener_breaks_neither_posting_nor_later_listeners(caplog):
    hub = await open_hub()
    shared: list[tuple] = []
    first, bad, last = Events("first", shared), Exploding(), Events("last", shared)
    for listener in (first, bad, last):
        hub.register_listener(listener)
    try:
        hc, alice, bob, ch = await conversation(hub)
        got: list[str] = []

        async def receive(env: Envelope) -> None:
            if env.event_type == EV_TEXT:
                got.append(env.event_data.get("text"))

        bob.on_envelope(receive)
        envelope_id = await alice.send(ch.channel_id, "still delivered")
        assert envelope_id
        await until(lambda: got)
        assert got == ["still delivered"]
        assert bad.calls >= 4  # two registrations, created/opened, posts
        posted = [e[0] for e in shared if e[1] == "posted" and e[2] == EV_TEXT]
        assert posted == ["first", "last"]  # registration order, the failing one in between skipped
        assert "listener bug" in caplog.text
        await hc.close()
    finally:
        await hub.close()


async def test_a_hub_subclass_hook_runs_before_the_listeners():
    order: list[str] = []

    class MyHub(Hub):
        async def on_envelope_posted(self, envelope, metadata):
            order.append(f"hub:{envelope.event_type}")

        async def on_agent_event(self, agent_id, kind, payload):
            order.append(f"hub:{kind}")

    class After(BaseHubListener):
        async def on_envelope_posted(self, envelope, metadata):
            order.append(f"listener:{envelope.event_type}")

        async def on_agent_event(self, agent_id, kind, payload):
            order.append(f"listener:{kind}")

    hub = await MyHub.open(MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hub.register_listener(After())
    try:
        hc, alice, bob, ch = await conversation(hub)
        await alice.send(ch.channel_id, "hi")
        await hc.close()
    finally:
        await hub.close()
    assert order[:4] == ["hub:registered", "listener:registered", "hub:registered", "listener:registered"]
    i = order.index(f"hub:{EV_TEXT}")
    assert order[i + 1] == f"listener:{EV_TEXT}"


async def test_a_hub_subclass_hook_is_called_without_any_registered_listener():
    seen: list[str] = []

    class MyHub(Hub):
        async def on_envelope_posted(self, envelope, metadata):
            seen.append(envelope.event_type)

        async def on_envelope_rejected(self, envelope, reason):
            seen.append(f"rejected:{type(reason).__name__}")

    hub = await MyHub.open(MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc, alice, bob, ch = await conversation(hub)
        await alice.send(ch.channel_id, "hi")
        with pytest.raises(ProtocolError):
            await hub.post_envelope(
                Envelope(ch.channel_id, alice.agent_id, ["nobody"], EV_TEXT, {"text": "x"})
            )
        await hc.close()
    finally:
        await hub.close()
    assert EV_TEXT in seen and "rejected:ProtocolError" in seen
    assert hub.listeners.registered == []


async def test_hub_hooks_exist_with_ag2_signatures_and_a_plain_hub_skips_the_fan_out():
    hub = Hub(MemoryStore())
    assert await hub.on_envelope_posted(None, None) is None
    assert await hub.on_turn_failed("c", "a", "e", RuntimeError("x")) is None
    assert hub.listeners.own_hooks == frozenset()

    class Partial(Hub):
        async def on_channel_event(self, channel_id, kind, payload):
            return None

    assert Partial(MemoryStore()).listeners.own_hooks == frozenset({"on_channel_event"})


@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_audit_log_records_register_create_close_with_ag2_kinds_and_fields(tmp_path, kind):
    store = SqliteStore(tmp_path / "hub.db") if kind == "sqlite" else MemoryStore()
    clock = ManualClock()
    hub = await open_hub(store, clock=clock)
    live: list[dict] = []

    async def tail(record: dict) -> None:
        live.append(record)

    hub.audit_log.subscribe(tail)
    try:
        hc, alice, bob, ch = await conversation(hub)
        await hub.set_resume(alice.agent_id, Resume(summary="reviews code"))
        await hub.set_rule(bob.agent_id, Rule())
        await hub.set_skill(bob.agent_id, "---\nname: bob\ndescription: reviews\n---\nbody")
        await hub.close_channel(ch.channel_id, reason="done")
        await hub.unregister(bob.agent_id)
        records = await hub.audit_log.read_all()
        await hc.close()
    finally:
        await hub.close()
    kinds = [r["kind"] for r in records]
    assert kinds == [
        AUDIT_KIND_AGENT_REGISTERED,
        AUDIT_KIND_AGENT_REGISTERED,
        AUDIT_KIND_CHANNEL_CREATED,
        AUDIT_KIND_RESUME_SET,
        AUDIT_KIND_RULE_SET,
        AUDIT_KIND_SKILL_SET,
        AUDIT_KIND_CHANNEL_CLOSED,
        AUDIT_KIND_AGENT_UNREGISTERED,
    ]
    assert all(r["at"] == clock() for r in records)
    assert records[0] == {
        "at": clock(),
        "kind": "agent_registered",
        "agent_id": alice.agent_id,
        "name": "alice",
    }
    created = records[2]
    assert {k: created[k] for k in ("channel_id", "manifest_type", "manifest_version", "creator_id")} == {
        "channel_id": ch.channel_id,
        "manifest_type": "conversation",
        "manifest_version": 1,
        "creator_id": alice.agent_id,
    }
    assert created["participants"] == [alice.agent_id, bob.agent_id]
    assert records[3]["source"] == RESUME_SOURCE_TENANT and records[3]["agent_id"] == alice.agent_id
    assert records[3]["version"] >= 1
    assert records[5]["removed"] is False
    assert records[6] == {
        "at": clock(),
        "kind": "channel_closed",
        "channel_id": ch.channel_id,
        "reason": "done",
    }
    assert records[7]["name"] == "bob"
    # the live subscriber got the same records, in the same order, as they were written
    assert live == records
    # the audit log's byte count is what health() reports, one JSON line per record
    assert hub.audit_log.bytes_written == sum(
        len(json.dumps(r, sort_keys=True).encode()) + 1 for r in records
    )


async def test_audit_records_survive_a_restart_on_sqlite(tmp_path):
    hub = await open_hub(SqliteStore(tmp_path / "hub.db"))
    hc, alice, bob, ch = await conversation(hub)
    await hc.close()
    await hub.close()
    hub = await open_hub(SqliteStore(tmp_path / "hub.db"))
    try:
        assert hub.audit_log.bytes_written == 0  # process-local, as in ag2
        kinds = [r["kind"] for r in await hub.audit_log.read_all()]
        assert kinds == ["agent_registered", "agent_registered", "channel_created"]
        assert hub.health()["audit_log_bytes"] == 0
    finally:
        await hub.close()


async def test_unsubscribe_and_a_failing_subscriber_do_not_stop_the_log(caplog):
    log = AuditLog(MemoryStore())
    got: list[str] = []

    async def bad(record: dict) -> None:
        raise ValueError("subscriber bug")

    async def good(record: dict) -> None:
        got.append(record["kind"])

    log.subscribe(bad)
    log.subscribe(good)
    await log.append({"kind": "custom", "at": "2026-01-01T00:00:00Z", "n": 1})
    log.unsubscribe(good)
    log.unsubscribe(good)  # absent: no-op
    await log.append({"kind": "custom2", "at": "2026-01-01T00:00:01Z"})
    assert got == ["custom"]
    assert [r["kind"] for r in await log.read_all()] == ["custom", "custom2"]
    assert "subscriber bug" in caplog.text
    with pytest.raises(TypeError, match="audit record must be a dict"):
        await log.append(["not", "a", "dict"])


async def test_standalone_audit_log_as_a_listener_writes_the_same_records_as_the_hub():
    """AuditLog's on_* methods turn hub events into the records the hub writes itself."""
    clock = ManualClock()
    hub = await open_hub(clock=clock)
    mirror = AuditLog(MemoryStore(), clock=clock)
    hub.register_listener(mirror)
    try:
        hc, alice, bob, ch = await conversation(hub)
        await hub.set_rule(bob.agent_id, Rule())
        await hub.close_channel(ch.channel_id, reason="bye")
        await hub.report_turn_failure(
            channel_id=ch.channel_id, agent_id=bob.agent_id, envelope_id="e1", exc=KeyError("k")
        )
        await hub.unregister(alice.agent_id)
        await hc.close()
        ours = await hub.audit_log.read_all()
        theirs = await mirror.read_all()
    finally:
        await hub.close()
    assert [r["kind"] for r in theirs] == [r["kind"] for r in ours]
    assert theirs == ours
    failed = [r for r in ours if r["kind"] == AUDIT_KIND_TURN_FAILED]
    assert failed[0]["exc_type"] == "KeyError" and failed[0]["envelope_id"] == "e1"


async def test_replace_audit_log_routes_the_hubs_records_to_the_new_log():
    hub = await open_hub()
    other_store = MemoryStore()
    replacement = AuditLog(other_store)
    original = hub.audit_log
    try:
        hc = HubClient.local(hub)
        await hc.register_human(Passport(name="alice", kind="human"))
        hub.replace_audit_log(replacement)
        assert hub.audit_log is replacement
        await hc.register_human(Passport(name="bob", kind="human"))
        await hc.close()
        assert [r["name"] for r in await original.read_all()] == ["alice"]
        assert [r["name"] for r in await replacement.read_all()] == ["bob"]
        assert hub.health()["audit_log_bytes"] == replacement.bytes_written > 0
        with pytest.raises(TypeError, match="append"):
            hub.replace_audit_log(object())
    finally:
        await hub.close()


async def test_health_counts_the_audit_log_as_a_listener():
    hub = await open_hub()
    try:
        assert hub.health()["registered_listeners"] == 1
        listener = BaseHubListener()
        hub.register_listener(listener)
        assert hub.health()["registered_listeners"] == 2
        hub.unregister_listener(listener)
        hub.unregister_listener(listener)  # absent: no-op
        assert hub.health()["registered_listeners"] == 1
    finally:
        await hub.close()

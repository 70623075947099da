"""Expectations on a live hub: sweeper tick with an injected clock, handlers, audit; tasks; unregister."""

from __future__ import annotations

from ag2net import EV_EXPECTATION_VIOLATED, HubClient, NotFoundError, Passport
from ag2net.channel import ChannelManifest, ChannelState, Expectation
from ag2net.hub import Hub
from ag2net.ids import ManualClock
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState


async def open_hub(store_factory, clock):
    return await Hub.open(store_factory(), clock=clock, ttl_sweep_interval=0, expectation_sweep_interval=0)


async def test_reply_within_auto_closes_consulting(store_factory):
    clock = ManualClock("2026-11-29T10:00:00.000000Z")
    hub = await open_hub(store_factory, clock)
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="consulting", target="ben")
        await ana.send(ch.channel_id, "still there?")
        clock.advance(599)
        assert await hub.tick_expectations() == 0
        clock.advance(2)
        assert await hub.tick_expectations() == 1
        md = hub.lookup_channel(ch.channel_id)
        assert md.state == ChannelState.CLOSED and md.close_reason == "expectation_violated:reply_within"
        audit = [rec for _, rec in await hub.store.read_audit()]
        (violation,) = [r for r in audit if r["kind"] == "expectation_violated"]
        assert violation["expectation"] == "reply_within" and violation["violators"] == [
            hub.find_agent_id("ben")
        ]
        assert await hub.tick_expectations() == 0  # terminal channels are not evaluated again
    finally:
        await hub.close()


async def test_notify_channel_posts_violation_not_to_creator(store_factory):
    clock = ManualClock("2026-11-29T10:00:00.000000Z")
    hub = await open_hub(store_factory, clock)
    try:
        base = hub.get_adapter("conversation")

        class Watched(type(base)):
            manifest = ChannelManifest(
                type="watched",
                participants=base.manifest.participants,
                default_view_policy="windowed_summary",
                expectations=[Expectation("max_silence", "notify_channel", {"seconds": 60})],
            )

        hub.register_adapter(Watched())
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ben = await hc.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="watched", target="ben")
        clock.advance(61)
        assert await hub.tick_expectations() == 1
        assert await hub.tick_expectations() == 0  # fired once per violator
        wal = await hub.read_wal(ch.channel_id)
        assert wal[-1].event_type == EV_EXPECTATION_VIOLATED
        assert wal[-1].event_data["expectation"] == "max_silence"
        got = await ben.next_envelope(predicate=lambda e: e.event_type == EV_EXPECTATION_VIOLATED, timeout=2)
        assert got.sender_id == ana.agent_id
        assert hub.lookup_channel(ch.channel_id).state == ChannelState.ACTIVE
    finally:
        await hub.close()


async def test_task_table_and_channel_close_expires_tasks(hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    md = TaskMetadata(
        "t-1",
        ana.agent_id,
        TaskSpec("index the docs", capability="search"),
        TaskState.RUNNING,
        channel_id=ch.channel_id,
    )
    await hc.observe_task(md)
    await hc.update_task("t-1", progress={"done": 3})
    task = await hc.get_task("t-1")
    assert task.progress == {"done": 3} and task.last_progress_at
    assert [t.task_id for t in await hc.list_tasks(agent_id=ana.agent_id)] == ["t-1"]
    await hub.close_channel(ch.channel_id)
    task = await hc.get_task("t-1")
    assert task.state == TaskState.EXPIRED and task.error == "channel_closed"
    audit = [rec for _, rec in await hub.store.read_audit()]
    assert any(r["kind"] == "task_terminated" and r["task_id"] == "t-1" for r in audit)


async def test_unregister_keeps_channels_and_frees_the_name(hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    await ana.send(ch.channel_id, "before")
    await ana.unregister()
    try:
        hub.lookup_agent("ana")
        raise AssertionError("ana should be gone")
    except NotFoundError:
        pass
    assert len(await hub.read_wal(ch.channel_id)) == 4
    again = await hc.register_human(Passport(name="ana", kind="human"))
    assert again.agent_id != ana.agent_id
    kinds = [rec["kind"] for _, rec in await hub.store.read_audit()]
    assert "agent_unregistered" in kinds


async def test_health_counts(hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    await ana.open(type="conversation", target="ben")
    health = await hc.health()
    assert (
        health["registered_agents"] == 2 and health["active_channels"] == 1 and health["adapters_loaded"] == 4
    )

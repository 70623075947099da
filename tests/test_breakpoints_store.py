"""Breakpoints are kept in the store: a restarted hub (SQLite, PostgreSQL) has the same breakpoints and step
mode, and a stop with posts held admitted none of them (nothing is admitted twice after the restart); the
expectation deadlines a held post affects, and pausing a channel's expectation clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from ag2net import Hub, HubClient, Passport
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import NetworkError
from ag2net.hub.waiting import STOPPED_HELD
from ag2net.ids import format_time, parse_time
from ag2net.store import PostgresStore, SqliteStore

NOTE = "demo.note"


async def waiting(hub: Hub, n: int = 1):
    for _ in range(2000):
        items = await hub.list_waiting()
        if len(items) >= n:
            return items
        await asyncio.sleep(0.005)
    raise AssertionError("nothing was held")


async def restart_keeps_breakpoints(make_store) -> None:
    hub = await Hub.open(make_store(), invite_ack_timeout=30, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    cid = (await ana.open(type="discussion", target=["ben"])).channel_id
    kept = await hub.break_on("sender:ana text:plan", by="ops")
    off = await hub.break_on("channel.type:workflow and node:critic", on="turn", enabled=False)
    await hub.step_mode(None, on=True)
    count = hub.wal_count(cid)
    post = asyncio.create_task(
        hub.post_envelope(Envelope(cid, ana.agent_id, None, EV_TEXT, {"text": "the plan"}))
    )
    await waiting(hub)
    await hub.close()
    with pytest.raises(NetworkError, match=STOPPED_HELD):
        await post
    again = await Hub.open(make_store(), invite_ack_timeout=30, expectation_sweep_interval=0)
    try:
        listed = await again.list_breakpoints()
        assert [(b.breakpoint_id, b.spec, b.on, b.enabled, b.created_by) for b in listed] == [
            (kept.breakpoint_id, "sender:ana text:plan", "envelope", True, "ops"),
            (off.breakpoint_id, "channel.type:workflow and node:critic", "turn", False, "operator"),
        ]
        assert again.breakpoints.step == {"*"} and again.breakpoints.armed
        assert again.wal_count(cid) == count  # the held post was never admitted
        assert [e for e in await again.read_wal(cid) if e.event_type == EV_TEXT] == []
        # still holding after the restart; releasing admits it once
        post = asyncio.create_task(
            again.post_envelope(Envelope(cid, ana.agent_id, None, EV_TEXT, {"text": "the plan"}))
        )
        (item,) = await waiting(again)
        await again.answer_waiting(item.item_id, "release")
        await post
        assert [e.event_data["text"] for e in await again.read_wal(cid) if e.event_type == EV_TEXT] == [
            "the plan"
        ]
    finally:
        await again.close()


async def test_sqlite_restart_keeps_breakpoints(tmp_path):
    await restart_keeps_breakpoints(lambda: SqliteStore(tmp_path / "hub.db"))


async def test_postgres_restart_keeps_breakpoints(pg_server):
    url = await pg_server.fresh_url()
    await restart_keeps_breakpoints(lambda: PostgresStore(url))


async def test_deadlines_of_a_held_post_and_the_paused_clock(tmp_path):
    now = [parse_time("2026-01-01T00:00:00Z").timestamp()]
    hub = await Hub.open(
        SqliteStore(tmp_path / "hub.db"),
        clock=lambda: format_time(datetime.fromtimestamp(now[0], tz=UTC)),
        invite_ack_timeout=30,
        expectation_sweep_interval=0,
        ttl_sweep_interval=0,
    )
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ben = await hc.register_human(Passport(name="ben", kind="human"))
        md = await hub.create_channel(
            creator_id=ana.agent_id,
            manifest_type="conversation",
            participants=[ana.agent_id, ben.agent_id],
        )
        cid = md.channel_id
        md.manifest.expectations.append(_reply_within(60))
        await hub.post_envelope(Envelope(cid, ana.agent_id, None, EV_TEXT, {"text": "your turn"}))
        now[0] += 18
        await hub.break_on("sender:ben")
        post = asyncio.create_task(hub.post_envelope(Envelope(cid, ben.agent_id, None, NOTE, {"text": "hm"})))
        (item,) = await waiting(hub)
        for _ in range(200):  # the deadlines are filled in right after the item appears
            if item.detail["deadlines"]:
                break
            await asyncio.sleep(0.005)
        (deadline,) = [d for d in item.detail["deadlines"] if d["kind"] == "reply_within"]
        assert deadline["seconds_left"] == 42.0
        now[0] += 10
        (item,) = await hub.list_waiting()
        assert [d["seconds_left"] for d in item.detail["deadlines"] if d["kind"] == "reply_within"] == [32.0]
        paused = await hub.pause_expectations(cid, True)
        assert paused["paused"] is True
        now[0] += 100  # the clock stands still while paused: nothing fires, nothing runs out
        assert await hub.tick_expectations() == 0
        (item,) = await hub.list_waiting()
        assert [d["seconds_left"] for d in item.detail["deadlines"] if d["kind"] == "reply_within"] == [32.0]
        resumed = await hub.pause_expectations(cid, False)
        assert resumed["shifted_seconds"] == 100.0
        assert await hub.tick_expectations() == 0  # 28 s of 60 have run on the channel's clock
        now[0] += 40
        assert await hub.tick_expectations() == 1  # now ben is late
        await hub.answer_waiting(item.item_id, "release")
        await post
    finally:
        await hub.close()


def _reply_within(seconds: int):
    from ag2net.channel import Expectation

    return Expectation("reply_within", "audit", {"seconds": seconds})

"""PostgresStore.refuse_writes: a store told to stop writing fails every later write with ``StoreFenced`` and
the sentence it was given, before anything reaches the database, while its reads keep working; a hub that
loses the leadership (``Leadership._lose``) does it at once, served or embedded in a workbench.

Runs on a throwaway server this session starts (tests/pg_server.py); skipped with the reason without it.
"""

from __future__ import annotations

import asyncio
from urllib.parse import parse_qs, urlsplit

import pytest
from pg_server import DATABASE

from ag2net.server.leadership import LOST_EXIT_CODE, Leadership, lock_key
from ag2net.store import PostgresStore, StoreError
from ag2net.store.postgres import StoreFenced

HUB_OPTIONS = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0}
REASON = "this hub is read-only now; attach to the hub that serves the database with --connect ws://HOST:PORT"


@pytest.fixture
async def url(pg_server) -> str:
    return await pg_server.fresh_url()


async def test_after_refuse_writes_every_write_fails_with_the_reason_and_reads_keep_working(url):
    async with PostgresStore(url) as store, PostgresStore(url) as other:
        assert await store.append("c1", "e1", '{"n": 1}') == 1
        await store.put_channel({"channel_id": "c1"})
        await store.set_meta("k", "v")
        # A write waiting for the writer's next batch when the store is told: refused too.
        waiting = asyncio.ensure_future(store.append("c1", "e-waiting", "{}"))
        await asyncio.sleep(0)  # it is submitted; the writer starts on the next loop iteration
        store.refuse_writes(REASON)
        assert store.fenced is not None and str(store.fenced) == REASON
        writes = [
            waiting,
            store.append("c1", "e2", "{}"),
            store.append_group("c1", [("e3", "{}"), ("e4", "{}")]),
            store.put_channel({"channel_id": "c2"}),
            store.put_agent({"agent_id": "a1", "name": "ana"}),
            store.set_cursor("a1", "c1", "e1"),
            store.append_audit({"kind": "x"}),
            store.add_knowledge("a1", "a fact"),
            store.put_task({"task_id": "t1"}),
            store.set_meta("k", "w"),
            store.flush(),
        ]
        outcomes = await asyncio.gather(*writes, return_exceptions=True)
        assert all(isinstance(o, StoreFenced) for o in outcomes), outcomes
        assert {str(o) for o in outcomes} == {REASON}
        with pytest.raises(StoreFenced, match="read-only now"):
            await store.append("c1", "e5", "{}")
        # Reads keep working: the pool, the synchronous block reader, every kind of record.
        assert await store.read_wal("c1") == ['{"n": 1}']
        assert await store.wal_count("c1") == 1 and await store.wal_counts() == {"c1": 1}
        assert store.read_wal_block("c1", 1, 1) == ['{"n": 1}']
        assert await store.find_seq("c1", "e1") == 1
        assert [c["channel_id"] for c in await store.load_channels()] == ["c1"]
        assert await store.get_meta("k") == "v"
        assert await store.load_agents() == [] and await store.load_cursors() == {}
        # Nothing of the refused writes reached the database (as another session reads it).
        assert await other.read_wal_seq("c1", 1, 100) == [(1, '{"n": 1}')]
        assert await other.read_audit() == [] and await other.load_tasks() == []
        assert await other.list_knowledge("a1") == []
        # Told again, the new sentence replaces the old one.
        store.refuse_writes("  read-only: quit  ")
        with pytest.raises(StoreFenced) as again:
            await store.set_meta("k", "x")
        assert str(again.value) == "read-only: quit"


async def test_refuse_writes_needs_a_sentence_and_taking_the_leadership_again_lifts_it(url):
    async with PostgresStore(url) as store:
        for bad in ("", "   ", None):
            with pytest.raises(StoreError, match="needs a reason"):
                store.refuse_writes(bad)  # type: ignore[arg-type]
        assert store.fenced is None
        store.refuse_writes(REASON)
        with pytest.raises(StoreFenced):
            await store.append("c1", "e1", "{}")
        await store.fence("again")
        assert store.fenced is None
        assert await store.append("c1", "e1", "{}") == 1


async def test_a_served_hub_that_loses_its_lock_session_refuses_writes_at_once_and_exits_as_before(
    pg_server, url
):
    import asyncpg

    leadership = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None, check_interval=0.2)
    hub = await leadership.take(**HUB_OPTIONS)
    store = leadership.store
    assert store is not None
    try:
        assert await store.append("c1", "e1", "{}") == 1
        serving = asyncio.Event()
        holding = asyncio.ensure_future(leadership.hold(serving.wait()))  # stands for serve_ws
        schema = parse_qs(urlsplit(url).query)["search_path"][0]
        key = lock_key(DATABASE, schema) & 0xFFFFFFFFFFFFFFFF
        conn = await asyncpg.connect(url)
        try:  # the lock session ends, as when the hub's network to the database fails
            ended = await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' "
                "AND granted AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                key >> 32,
                key & 0xFFFFFFFF,
            )
        finally:
            await conn.close()
        assert ended == 1
        assert await asyncio.wait_for(holding, 20) == LOST_EXIT_CODE  # it stops admitting, as before
        assert leadership.lost.is_set() and leadership.reason == "its lock session ended"
        with pytest.raises(StoreFenced) as refused:
            await store.append("c1", "e2", "{}")
        said = str(refused.value)
        assert said.startswith(f"this hub lost the leadership of {store.where} (its lock session ended)")
        assert "was not saved" in said and pg_server.password not in said
        assert await store.read_wal_seq("c1", 1, 10) == [(1, "{}")]  # reads still work until it closes
    finally:
        await leadership.close(hub)
    with pytest.raises(StoreError, match="not open"):
        await store.read_wal("c1")  # closed on the way out, as before

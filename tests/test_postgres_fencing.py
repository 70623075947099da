"""PostgresStore.fence: a store fenced out by a later holder's fence never writes again, whatever kind of
write it tries, and a write transaction that passed the check finishes before the next holder's epoch.

Runs on a throwaway server this session starts (tests/pg_server.py); skipped with the reason without it.
"""

from __future__ import annotations

import asyncio

import pytest

from ag2net.store import PostgresStore, StoreError
from ag2net.store.postgres import StoreFenced


@pytest.fixture
async def url(pg_server) -> str:
    return await pg_server.fresh_url()


async def test_a_store_fenced_out_by_a_later_holder_writes_nothing(url):
    told: list[StoreFenced] = []
    async with PostgresStore(url) as old, PostgresStore(url) as new:
        first = await old.fence("old", on_fenced=told.append)
        assert await old.append("c1", "e1", "{}") == 1
        await old.put_channel({"channel_id": "c1"})  # an explicit transaction (not one statement)
        second = await new.fence("new")
        assert second == first + 1 and new.fence_epoch == second
        # Every kind of write: a run of appends (one statement), an upsert, a mixed batch.
        outcomes = await asyncio.gather(
            old.append("c1", "e2", "{}"),
            old.append("c1", "e3", "{}"),
            old.set_cursor("a1", "c1", "e1"),
            old.append_audit({"kind": "x"}),
            old.set_meta("k", "v"),
            return_exceptions=True,
        )
        assert all(isinstance(o, StoreFenced) for o in outcomes), outcomes
        assert len(told) == 1 and "another hub took the leadership" in str(told[0])
        with pytest.raises(StoreFenced):
            await old.append("c1", "e4", "{}")
        assert await new.append("c1", "n1", "{}") == 2
        rows = await new.read_wal_seq("c1", 1, 100)
        assert [s for s, _ in rows] == [1, 2]
        assert await new.get_meta("k") is None
        assert await new.load_cursors() == {}
        assert await new.read_audit() == []


async def test_an_unfenced_store_writes_as_before_and_a_fence_error_is_a_store_error(url):
    async with PostgresStore(url) as plain:
        assert plain.fence_epoch is None
        assert await plain.append("c1", "e1", "{}") == 1
    assert issubclass(StoreFenced, StoreError)


async def test_the_next_holder_waits_for_an_open_write_transaction_of_the_previous_one(url):
    import asyncpg

    async with PostgresStore(url) as old, PostgresStore(url) as new:
        epoch = await old.fence("old")
        # A write transaction of the old holder that passed the fence check and has not committed yet.
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(f"BEGIN; SELECT ag2net_fence({epoch})")
            await conn.execute(
                "INSERT INTO wal (channel_id, seq, envelope_id, envelope) VALUES ('c1', 1, 'e1', '{}')"
            )
            taking = asyncio.ensure_future(new.fence("new"))
            done, _ = await asyncio.wait({taking}, timeout=0.5)
            assert not done, "the new holder's epoch did not wait for the old holder's open transaction"
            await conn.execute("COMMIT")
            assert await asyncio.wait_for(taking, 10) == epoch + 1
        finally:
            await conn.close()
        # The old holder's committed row is there before the new holder reads anything; it appends after it.
        assert await new.append("c1", "n1", "{}") == 2

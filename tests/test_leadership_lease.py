"""The leadership lease (issue 21, item 5): the database server, not only the holder, bounds how long a hub
that stopped running keeps the leadership of its PostgreSQL database.

A real PostgreSQL (tests/pg_server.py; skipped with the reason without it). The "frozen" holder is this
test's own event loop, blocked by a synchronous sleep: nothing of the process runs, its TCP connections stay
up, as with SIGSTOP (tests/test_failover.py does that to a real ``ag2net serve``).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from pg_server import DATABASE

from ag2net.server.leadership import DEFAULT_LEASE, EMBEDDED_LEASE, LOST_EXIT_CODE, Leadership, lock_key
from ag2net.store.postgres import StoreFenced

HUB_OPTIONS = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0}


@pytest.fixture
async def url(pg_server) -> str:
    return await pg_server.fresh_url()


async def lock_holders(url: str) -> int:
    import asyncpg

    schema = parse_qs(urlsplit(url).query)["search_path"][0]
    key = lock_key(DATABASE, schema) & 0xFFFFFFFFFFFFFFFF
    conn = await asyncpg.connect(url)
    try:
        return await conn.fetchval(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted "
            "AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
            key >> 32,
            key & 0xFFFFFFFF,
        )
    finally:
        await conn.close()


async def test_the_server_ends_the_lock_of_a_holder_that_stops_running_for_longer_than_its_lease(url):
    leadership = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None, lease=1.0)
    hub = await leadership.take(**HUB_OPTIONS)
    store = leadership.store
    assert store is not None
    try:
        assert await store.append("c1", "e1", "{}") == 1
        holding = asyncio.ensure_future(leadership.hold(asyncio.Event().wait()))  # stands for serve_ws
        await asyncio.sleep(0.3)
        assert await lock_holders(url) == 1
        time.sleep(1.8)  # the whole process stops running; its connections stay up
        # Asked before this loop runs anything else: the server already ended the lock session.
        assert await lock_holders(url) == 0, "the database kept the lock of a holder that stopped running"
        assert await asyncio.wait_for(holding, 10) == LOST_EXIT_CODE
        assert leadership.lost.is_set()
        with pytest.raises(StoreFenced, match="lost the leadership"):
            await store.append("c1", "e2", "{}")
    finally:
        await leadership.close(hub)


async def test_a_holder_that_keeps_running_keeps_its_lease(url):
    leadership = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None, lease=1.0)
    hub = await leadership.take(**HUB_OPTIONS)
    try:
        await asyncio.sleep(3.0)  # three leases, renewed every quarter of one
        assert not leadership.lost.is_set(), leadership.reason
        assert await lock_holders(url) == 1
    finally:
        await leadership.close(hub)


async def test_the_writer_and_the_lock_session_carry_the_lease_on_the_server(url):
    leadership = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None, lease=1.5)
    hub = await leadership.take(**HUB_OPTIONS)
    store = leadership.store
    assert store is not None
    try:
        await store.append("c1", "e1", "{}")
        writer = store._writer_conn
        assert writer is not None
        # a paused holder's open write transaction ends within the lease: it cannot hold the leader row
        assert await writer.fetchval("SHOW idle_in_transaction_session_timeout") == "1500ms"
        assert await leadership._conn.fetchval("SHOW idle_session_timeout") == "1500ms"
    finally:
        await leadership.close(hub)
    assert Leadership(url, "h", 0).lease == DEFAULT_LEASE == 2.0
    assert Leadership(url, "h", 0, standby=False).lease == EMBEDDED_LEASE


@pytest.mark.parametrize("lease", ["0.1", "0", "-2", "nan"])
def test_serve_refuses_a_lease_that_is_too_short_in_one_sentence(lease):
    args = ["serve", "--db", "postgresql://u@127.0.0.1:1/db", "--lease", lease]
    bad = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    out = bad.stdout + bad.stderr
    lines = [line for line in out.splitlines() if line.strip()]
    assert bad.returncode == 2 and "Traceback" not in out, out
    assert len(lines) == 1 and "--lease" in lines[0] and "at least 0.5 seconds" in lines[0], out

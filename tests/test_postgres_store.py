"""What only the PostgreSQL store has: its URL, its errors, schema versions, group commit in one transaction,
commit-before-return, a lost connection. The shared behaviour is in test_store_conformance.py.

Runs on a throwaway server this session starts (tests/pg_server.py); skipped with the reason without it.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from pg_server import USER

import ag2net.store.postgres as pg_store
from ag2net.store import PostgresStore, StoreError, open_store
from ag2net.store.postgres import redact_url


@pytest.fixture
async def url(pg_server) -> str:
    return await pg_server.fresh_url()


async def raw(url: str):
    import asyncpg

    return await asyncpg.connect(url)


def one_sentence(message: str, *, secret: str | None = None) -> None:
    assert "\n" not in message and "Traceback" not in message
    assert message.count("; ") >= 1  # what went wrong; the fix
    if secret is not None:
        assert secret not in message


# --- URLs (no server needed) ---


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://ana:s3cret@db.example:5433/hub", "postgresql://ana@db.example:5433/hub"),
        ("postgres://ana:p@ss@h/hub?password=s3cret&sslmode=require", "postgres://ana@h/hub?sslmode=require"),
        ("postgresql:///hub?host=/run/postgresql", "postgresql:///hub?host=/run/postgresql"),
        ("postgresql://ana:s3cret@h:notaport/hub", "postgresql://ana@h:notaport/hub"),
        ("postgresql://h1:5432,h2:5433/hub", "postgresql://h1:5432,h2:5433/hub"),
    ],
)
def test_urls_are_shown_without_their_password(url, shown):
    assert redact_url(url) == shown


def test_open_store_picks_the_store_by_url_and_refuses_other_schemes(tmp_path):
    assert isinstance(open_store("postgresql://ana@localhost/hub"), PostgresStore)
    assert isinstance(open_store("postgres://ana@localhost/hub"), PostgresStore)
    assert isinstance(open_store("POSTGRESQL://ana@localhost/hub"), PostgresStore)
    for bad in ("mysql://ana:s3cret@h/hub", "sqlite:///tmp/x.db", "http://h/x"):
        with pytest.raises(StoreError) as caught:
            open_store(bad)
        message = str(caught.value)
        one_sentence(message, secret="s3cret")
        assert "cannot use" in message and "postgresql://user" in message
    with pytest.raises(StoreError, match="not a PostgreSQL URL"):
        PostgresStore("mysql://h/x")


def test_without_asyncpg_a_postgres_url_says_what_to_install():
    code = (
        "import sys, asyncio; sys.modules['asyncpg'] = None\n"
        "from ag2net.store import open_store, StoreError\n"
        "try:\n"
        "    asyncio.run(open_store('postgresql://ana@127.0.0.1:1/hub').open())\n"
        "except StoreError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).parents[1],
    )
    assert "needs the asyncpg package" in out.stdout and "ag2net[postgres]" in out.stdout, out.stderr


# --- errors opening a database ---


async def test_an_unreachable_server_is_one_sentence_naming_the_url(pg_server):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once the socket is closed
    url = f"postgresql://{USER}:s3cret@127.0.0.1:{port}/hub"
    with pytest.raises(StoreError) as caught:
        await PostgresStore(url, connect_timeout=5).open()
    message = str(caught.value)
    one_sentence(message, secret="s3cret")
    assert f"cannot reach the PostgreSQL server at postgresql://{USER}@127.0.0.1:{port}/hub" in message
    assert "start the server or fix the host and port" in message


async def test_a_wrong_password_is_one_sentence(pg_server):
    url = pg_server.url(password="wrong-s3cret")
    with pytest.raises(StoreError) as caught:
        await PostgresStore(url).open()
    message = str(caught.value)
    one_sentence(message, secret="wrong-s3cret")
    assert "refused the login" in message and "password authentication failed" in message
    assert "fix the user name and password" in message


async def test_a_missing_database_is_one_sentence(pg_server):
    url = pg_server.url("no_such_db")
    with pytest.raises(StoreError) as caught:
        await PostgresStore(url).open()
    message = str(caught.value)
    one_sentence(message, secret=pg_server.password)
    assert "'no_such_db'" in message and "does not exist" in message and "createdb no_such_db" in message


async def test_a_user_without_create_rights_is_told_so(pg_server, url):
    conn = await raw(pg_server.url())
    try:
        await conn.execute("DROP ROLE IF EXISTS reader")
        await conn.execute("CREATE ROLE reader LOGIN PASSWORD 'r3ad'")
        await conn.execute("CREATE SCHEMA IF NOT EXISTS locked")
        await conn.execute("GRANT USAGE ON SCHEMA locked TO reader")  # it may look, not create
    finally:
        await conn.close()
    limited = pg_server.url(password="r3ad", schema="locked").replace(f"{USER}:", "reader:", 1)
    with pytest.raises(StoreError) as caught:
        await PostgresStore(limited).open()
    message = str(caught.value)
    one_sentence(message, secret="r3ad")
    assert "'reader' may not create the store's tables" in message


async def test_a_newer_schema_version_refuses_to_open(url):
    async with PostgresStore(url) as store:
        await store.append("c1", "e1", "{}")
    conn = await raw(url)
    try:
        await conn.execute("UPDATE ag2net_schema SET version = 7")
    finally:
        await conn.close()
    with pytest.raises(StoreError) as caught:
        await PostgresStore(url).open()
    message = str(caught.value)
    one_sentence(message, secret=url.split(":")[2].split("@")[0])
    assert "schema version 7, newer than the version 1" in message and "upgrade ag2net" in message


async def test_another_applications_tables_are_refused_and_left_alone(url):
    conn = await raw(url)
    try:
        await conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
        with pytest.raises(StoreError, match=r"another application \(invoices\)"):
            await PostgresStore(url).open()
        tables = {
            r[0]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        }
        assert tables == {"invoices"}  # nothing was created beside them
    finally:
        await conn.close()


# --- schema versions ---


async def test_a_new_database_gets_the_current_schema_version(url):
    async with PostgresStore(url):
        pass
    conn = await raw(url)
    try:
        assert await conn.fetchval("SELECT version FROM ag2net_schema") == pg_store.schema_version() == 1
        tables = {
            r[0]
            for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        }
        assert {
            "agents",
            "channels",
            "wal",
            "audit",
            "tasks",
            "cursors",
            "knowledge",
            "turns",
            "meta",
        } <= tables
    finally:
        await conn.close()


async def test_a_later_upgrade_step_runs_on_an_existing_database(url, monkeypatch):
    async with PostgresStore(url) as store:
        await store.append("c1", "e1", "{}")

    async def step_2(conn) -> None:
        await conn.execute("ALTER TABLE channels ADD COLUMN archived BOOLEAN NOT NULL DEFAULT false")

    monkeypatch.setattr(pg_store, "UPGRADES", (*pg_store.UPGRADES, step_2))
    async with PostgresStore(url) as store:
        assert await store.read_wal("c1") == ["{}"]
        await store.put_channel({"channel_id": "c1"})
    conn = await raw(url)
    try:
        assert await conn.fetchval("SELECT version FROM ag2net_schema") == 2
        assert await conn.fetchval("SELECT archived FROM channels") is False
    finally:
        await conn.close()


async def test_a_failing_upgrade_step_leaves_the_database_at_its_old_version(url, monkeypatch):
    async with PostgresStore(url):
        pass

    async def broken_step(conn) -> None:
        await conn.execute("CREATE TABLE half_done (x INTEGER)")
        await conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(pg_store, "UPGRADES", (*pg_store.UPGRADES, broken_step))
    with pytest.raises(StoreError) as caught:
        await PostgresStore(url).open()
    one_sentence(str(caught.value))
    conn = await raw(url)
    try:
        assert await conn.fetchval("SELECT version FROM ag2net_schema") == 1
        assert await conn.fetchval("SELECT to_regclass('half_done')") is None
    finally:
        await conn.close()


async def test_stores_opening_an_empty_database_together_upgrade_it_once(url):
    stores = [PostgresStore(url) for _ in range(4)]
    await asyncio.gather(*(s.open() for s in stores))
    try:
        # each writes its own channel: one channel has one writer (a second one is refused by design)
        seqs = await asyncio.gather(*(s.append(f"c{i}", f"e{i}", "{}") for i, s in enumerate(stores)))
        assert seqs == [1, 1, 1, 1]
    finally:
        await asyncio.gather(*(s.close() for s in stores))


# --- group commit and commit-before-return ---


async def test_concurrent_writes_share_one_transaction(url):
    async with PostgresStore(url) as store:
        await store.append("warm", "w0", "{}")  # the first batch runs alone: the rest queue behind it
        blocker = asyncio.ensure_future(store.append("warm", "w1", "{}"))
        await asyncio.sleep(0)
        writes = [store.append(f"c{i % 5}", f"e{i}", "{}") for i in range(300)]
        writes += [store.put_channel({"channel_id": "k"}), store.set_meta("m", "v"), store.append_audit({})]
        await asyncio.gather(blocker, *writes)
    conn = await raw(url)
    try:
        wal_xids = {
            r[0] for r in await conn.fetch("SELECT DISTINCT xmin::text FROM wal WHERE channel_id <> 'warm'")
        }
        assert len(wal_xids) <= 2, f"300 concurrent appends took {len(wal_xids)} transactions"
        others = {
            await conn.fetchval("SELECT xmin::text FROM channels"),
            await conn.fetchval("SELECT xmin::text FROM meta"),
            await conn.fetchval("SELECT xmin::text FROM audit"),
        }
        assert others <= wal_xids  # the other kinds of write went out in the same commit
    finally:
        await conn.close()


async def test_append_returns_only_after_its_commit(url):
    async with PostgresStore(url) as store:
        await store.append("c1", "e1", "{}")
        gate = await raw(url)
        try:
            # A deferred trigger runs at COMMIT, after the insert: it waits for the advisory lock the test
            # holds, so the append's commit (not its insert) is held back until the test lets it go.
            await gate.execute(
                "CREATE FUNCTION wait_at_commit() RETURNS trigger LANGUAGE plpgsql AS "
                "$$ BEGIN PERFORM pg_advisory_xact_lock_shared(4242); RETURN NULL; END $$"
            )
            await gate.execute(
                "CREATE CONSTRAINT TRIGGER held AFTER INSERT ON wal DEFERRABLE INITIALLY DEFERRED "
                "FOR EACH ROW EXECUTE FUNCTION wait_at_commit()"
            )
            await gate.execute("SELECT pg_advisory_lock(4242)")
            pending = asyncio.ensure_future(store.append("c1", "e2", "{}"))
            done, _ = await asyncio.wait({pending}, timeout=0.5)
            assert not done, "append returned before its transaction committed"
            assert await gate.fetchval("SELECT count(*) FROM wal") == 1  # not committed: not visible
            await gate.execute("SELECT pg_advisory_unlock(4242)")
            assert await asyncio.wait_for(pending, 10) == 2
            assert await gate.fetchval("SELECT count(*) FROM wal") == 2
        finally:
            await gate.close()


async def test_a_lost_writer_connection_fails_one_batch_in_one_sentence_then_reconnects(url, pg_server):
    async with PostgresStore(url) as store:
        assert await store.append("c1", "e1", "{}") == 1
        writer_pid = store._writer_conn.get_server_pid()  # type: ignore[union-attr]
        admin = await raw(pg_server.url())
        try:
            assert await admin.fetchval("SELECT pg_terminate_backend($1)", writer_pid)
        finally:
            await admin.close()
        await asyncio.sleep(0.2)
        outcomes = await asyncio.gather(
            *(store.append("c1", f"e{i}", "{}") for i in range(2, 6)), return_exceptions=True
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                assert isinstance(outcome, StoreError), outcome
                one_sentence(str(outcome), secret=pg_server.password)
                assert "127.0.0.1" in str(outcome)
        # The next write reconnects; seqs stay gapless whatever the lost batch did.
        seq = await store.append("c1", "after", "{}")
        rows = await store.read_wal_seq("c1", 1, 100)
        assert [s for s, _ in rows] == list(range(1, seq + 1))


# --- the hub, by URL ---


async def test_a_hub_opens_on_a_postgresql_url(url):
    from ag2net import HubClient, Passport
    from ag2net.hub import Hub

    hub = await Hub.open(url, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        assert isinstance(hub.store, PostgresStore)
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        conv = await ana.open(type="conversation", target="ben")
        sent = await ana.send(conv.channel_id, "hello over PostgreSQL")
    finally:
        await hub.close()
    async with PostgresStore(url) as store:
        assert await store.find_seq(conv.channel_id, sent) == await store.wal_count(conv.channel_id)


# --- read-only (for ``ag2net wal``) ---


async def test_a_read_only_store_reads_and_never_writes(url):
    with pytest.raises(StoreError, match="holds no ag2net store") as caught:
        await PostgresStore(url, read_only=True).open()
    one_sentence(str(caught.value))
    conn = await raw(url)
    try:
        assert await conn.fetchval("SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()") == 0
    finally:
        await conn.close()
    async with PostgresStore(url) as store:
        await store.put_channel({"channel_id": "c1"})
        await store.append_group("c1", [("e1", "{}"), ("e2", "[]")])
    async with PostgresStore(url, read_only=True) as store:
        assert await store.load_channels() == [{"channel_id": "c1"}]
        assert await store.read_wal("c1") == ["{}", "[]"]
        assert store.read_wal_block("c1", 2, 2) == ["[]"]
        for write in (store.append("c1", "e3", "{}"), store.set_meta("k", "v")):
            with pytest.raises(StoreError, match="open read-only"):
                await write
        # The server itself refuses a write on the store's sessions.
        with pytest.raises(StoreError, match="read-only transaction"):
            await store._fetch("INSERT INTO meta (key, value) VALUES ('k', 'v') RETURNING key")
    async with PostgresStore(url) as store:
        assert await store.get_meta("k") is None and await store.wal_count("c1") == 2

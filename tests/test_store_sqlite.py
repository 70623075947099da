"""What only the SQLite store has: its file (schema versions, bad files, the WAL file's size), its writer
option and its bulk-indexed envelope ids. The Store protocol itself, on every store and both SQLite
writers, is tests/test_store_conformance.py."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3

import pytest

import ag2net.store.sqlite as sqlite_store
from ag2net.store import SqliteStore, StoreError


def env(n: int, channel_id: str = "c1") -> str:
    return json.dumps({"n": n, "channel_id": channel_id})


# --- the file ---


async def test_a_new_file_gets_the_current_schema_version(tmp_path):
    path = tmp_path / "hub.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_store.schema_version() == 2
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_an_empty_version_0_database_is_upgraded(tmp_path):
    path = tmp_path / "empty.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 0")
    conn.commit()
    conn.close()
    async with SqliteStore(path) as store:
        assert await store.append("c1", "e1", "{}") == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_store.schema_version()
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"agents", "channels", "wal", "audit", "tasks", "cursors", "knowledge", "turns", "meta"} <= tables
    conn.close()


async def test_a_later_upgrade_step_runs_on_an_existing_file(tmp_path, monkeypatch):
    path = tmp_path / "hub.db"
    async with SqliteStore(path) as store:
        await store.append("c1", "e1", "{}")

    def step_2(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE channels ADD COLUMN archived INTEGER NOT NULL DEFAULT 0")

    monkeypatch.setattr(sqlite_store, "UPGRADES", (*sqlite_store.UPGRADES, step_2))
    async with SqliteStore(path) as store:
        assert await store.read_wal("c1") == ["{}"]
        await store.put_channel({"channel_id": "c1"})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(sqlite_store.UPGRADES)
    assert "archived" in {row[1] for row in conn.execute("PRAGMA table_info(channels)")}
    conn.close()


async def test_a_failing_upgrade_step_leaves_the_file_at_its_old_version(tmp_path, monkeypatch):
    path = tmp_path / "hub.db"
    async with SqliteStore(path):
        pass
    version = sqlite_store.schema_version()

    def broken_step(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(sqlite_store, "UPGRADES", (*sqlite_store.UPGRADES, broken_step))
    with pytest.raises(StoreError, match=re.escape(str(path))):
        await SqliteStore(path).open()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == version
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    conn.close()


async def test_a_newer_schema_version_refuses_to_open(tmp_path):
    path = tmp_path / "future.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert (
        str(path) in message
        and "version 7" in message
        and f"version {sqlite_store.schema_version()}" in message
    )
    assert "upgrade ag2net" in message


async def test_another_applications_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"another application.*invoices"):
        await SqliteStore(path).open()


async def test_a_file_that_is_not_a_database_gives_one_sentence_naming_it(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "not a database" in message and "\n" not in message
    assert path.read_bytes().startswith(b"these are my notes")  # untouched


async def test_a_directory_or_missing_directory_gives_one_sentence(tmp_path):
    with pytest.raises(StoreError, match="it is a directory"):
        await SqliteStore(tmp_path).open()
    missing = tmp_path / "no" / "such" / "dir" / "hub.db"
    with pytest.raises(StoreError, match="does not exist") as caught:
        await SqliteStore(missing).open()
    assert str(missing) in str(caught.value)


async def test_unknown_writer_is_refused():
    with pytest.raises(StoreError, match="writer must be one of"):
        SqliteStore("x.db", writer="fast")


async def test_background_checkpoints_keep_the_wal_file_small(tmp_path):
    path = tmp_path / "hub.db"
    wal_file = tmp_path / "hub.db-wal"
    async with SqliteStore(path, checkpoint_bytes=256 << 10) as store:
        largest = 0
        for round_ in range(20):
            await asyncio.gather(*(store.append("c1", f"e{round_}-{i}", env(i)) for i in range(50)))
            for i in range(50):
                await store.append("c2", f"s{round_}-{i}", env(i, "c2"))
            largest = max(largest, wal_file.stat().st_size)
        assert await store.wal_counts() == {"c1": 1000, "c2": 1000}
    # Without checkpoints 1000 single-row commits alone write about 12 MB of WAL frames.
    assert largest < 4 << 20
    async with SqliteStore(path) as store:
        rows = await store.read_wal_seq("c2", 1, 1000)
        assert [seq for seq, _ in rows] == list(range(1, 1001))


@pytest.mark.parametrize("ids_batch", [1, 3, 1000])
async def test_envelope_ids_stay_unique_and_findable_across_bulk_index_moves(tmp_path, ids_batch):
    path = tmp_path / "hub.db"
    ids = [f"{i + 100:032x}" for i in range(10)]
    out_of_order = f"{5:032x}"  # smaller than every id stored: must be looked up, not assumed new

    async def check_all(store) -> None:
        for i, envelope_id in enumerate(ids):
            assert await store.find_seq(f"c{i % 2}", envelope_id) == i // 2 + 1
            assert await store.find_seq(f"c{(i + 1) % 2}", envelope_id) is None
        assert await store.find_seq("c0", out_of_order) == 6
        for envelope_id in (ids[0], ids[-1], out_of_order):
            with pytest.raises(StoreError, match="already in the WAL"):
                await store.append("c9", envelope_id, "{}")

    async with SqliteStore(path, ids_batch=ids_batch) as store:
        for i, envelope_id in enumerate(ids):
            await store.append(f"c{i % 2}", envelope_id, json.dumps(i))
        assert await store.append("c0", out_of_order, "{}") == 6
        twice = await asyncio.gather(
            store.append("c1", "f" * 32, "{}"), store.append("c1", "f" * 32, "{}"), return_exceptions=True
        )
        assert twice[0] == 6 and isinstance(twice[1], StoreError)
        await check_all(store)

    conn = sqlite3.connect(path)
    upto = conn.execute("SELECT value FROM store_state WHERE key = 'wal_ids_upto'").fetchone()
    indexed = conn.execute("SELECT count(*) FROM wal_ids").fetchone()[0]
    assert indexed == (upto[0] if upto else 0)  # every row up to the mark, none after it
    joined = conn.execute("SELECT count(*) FROM wal_ids JOIN wal USING (envelope_id, channel_id, seq)")
    assert joined.fetchone()[0] == indexed
    conn.close()
    if ids_batch == 1000:
        assert indexed == 0  # all 12 still in memory at close: reopening must read them back

    async with SqliteStore(path, ids_batch=ids_batch) as store:
        await check_all(store)
        assert await store.find_seq("c1", "f" * 32) == 6
        assert await store.append("c1", f"{999:032x}", "{}") == 7
        assert await store.wal_counts() == {"c0": 6, "c1": 7}


@pytest.mark.parametrize(
    ("writer", "ids_batch"), [("inline", 1024), ("thread", 1024), ("thread", 300), ("inline", 7)]
)
async def test_groups_and_batches_of_every_size_are_written_in_order(tmp_path, writer, ids_batch):
    """A group's rows go in multi-row INSERTs of at most ``_ROWS_PER_INSERT``: sizes around each chunk edge,
    and a batch of lone appends from many channels at once (rows of several channels in one statement),
    read back in order at their seqs, also after a reopen; a group holding a stored id writes nothing; every
    id findable, across bulk moves into wal_ids (``MOVE_RECENT_ROWS``) of every size."""
    per = sqlite_store._ROWS_PER_INSERT
    sizes = [1, 2, per - 1, per, per + 1, 2 * per, 2 * per + 1, 3 * per + 5]
    path = tmp_path / "hub.db"
    expected: dict[str, list[str]] = {}
    stored: dict[str, tuple[str, int]] = {}  # envelope id -> (channel, seq)
    serial = iter(range(1, 10**6))

    def text(cid: str, n: int) -> str:
        return json.dumps({"channel": cid, "n": n, "pad": "x" * (n % 50)})

    async with SqliteStore(path, writer=writer, ids_batch=ids_batch) as store:
        for size in sizes:
            cid = f"g{size}"
            items = [(f"{next(serial):032x}", text(cid, n)) for n in range(size)]
            assert await store.append_group(cid, items) == list(range(1, size + 1))
            expected[cid] = [t for _, t in items]
            stored.update({eid: (cid, seq) for seq, (eid, _) in enumerate(items, 1)})
        # lone appends of 150 channels issued together share one batch (one transaction)
        lone = [f"l{i}" for i in range(150)]
        ids = {cid: f"{next(serial):032x}" for cid in lone}
        seqs = await asyncio.gather(*(store.append(cid, ids[cid], text(cid, 0)) for cid in lone))
        assert seqs == [1] * 150
        for cid in lone:
            expected[cid] = [text(cid, 0)]
            stored[ids[cid]] = (cid, 1)
        # all or nothing: a group whose last id is stored already writes none of its rows
        cid = f"g{per + 1}"
        bad = [(f"{next(serial):032x}", text(cid, 900 + n)) for n in range(per + 1)] + [(ids["l0"], "{}")]
        with pytest.raises(StoreError, match="already in the WAL"):
            await store.append_group(cid, bad)
        assert await store.wal_count(cid) == per + 1
        assert await store.append_group(cid, [(f"{next(serial):032x}", text(cid, 999))]) == [per + 2]
        expected[cid].append(text(cid, 999))

    for _ in range(2):  # as written, and after a reopen
        async with SqliteStore(path, writer=writer, ids_batch=ids_batch) as store:
            for eid, (cid, seq) in stored.items():
                assert await store.find_seq(cid, eid) == seq, eid
            for cid, texts in expected.items():
                rows = await store.read_wal_seq(cid, 1, len(texts) + 5)
                assert [seq for seq, _ in rows] == list(range(1, len(texts) + 1)), cid
                assert [t for _, t in rows] == texts, cid
            assert await store.wal_counts() == {cid: len(t) for cid, t in expected.items()}

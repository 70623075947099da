"""The SQLite store's seqs indexed in bulk (schema 2, ``store/sqlite_schema.py``): every read by seq answers
the same whether a row is in ``wal_seq`` already or still in the tail after ``wal_ids_upto``.

Checked against a model (the rows as appended) after every write, for every read by seq, over every range of
seqs (including the empty, the negative and the open ones), with bulk moves of 1, 3, 7 and 1,024 rows, both
writers, groups of every size, after a reopen, and after upgrading a schema-1 file written by the old
layout (its per-commit index dropped, its rows moved)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from ag2net.client import HubClient
from ag2net.hub import Hub
from ag2net.identity import Passport
from ag2net.store import SqliteStore, StoreError
from ag2net.store import sqlite as sqlite_store

CHANNELS = ("cA", "cB", "cC")
#: the ``ag2net`` command, as a subprocess
AG2NET = (sys.executable, "-c", "import sys; from ag2net.cli import app; sys.argv[0] = 'ag2net'; app()")


async def check_reads(store: SqliteStore, model: dict[str, list[str]], *, iter_batch: int) -> None:
    """Every read by seq of ``store`` against ``model`` (channel -> its envelope texts in seq order)."""
    assert await store.wal_counts() == {cid: len(rows) for cid, rows in model.items() if rows}
    for cid in (*CHANNELS, "never"):
        rows = model.get(cid, [])
        n = len(rows)
        assert await store.wal_count(cid) == n
        assert await store.read_wal(cid) == rows
        for since in range(-n - 2, n + 2):
            assert await store.read_wal(cid, since=since) == rows[since:]
            for until in (None, *range(-2, n + 2)):
                assert await store.read_wal(cid, since=since, until=until) == rows[since:until]
        for first in range(0, n + 2):
            for last in range(first - 1, n + 2):
                expected = [(seq, rows[seq - 1]) for seq in range(max(first, 1), min(last, n) + 1)]
                assert await store.read_wal_seq(cid, first, last) == expected
                assert store.read_wal_block(cid, first, last) == [text for _, text in expected]
        assert [(c, s, t) async for c, s, t in store.iter_wal([cid])] == [
            (cid, i + 1, text) for i, text in enumerate(rows)
        ]
    everything = [(cid, i + 1, text) for cid in sorted(model) for i, text in enumerate(model[cid])]
    assert [row async for row in store.iter_wal()] == everything, f"iter_batch={iter_batch}"


def as_schema_1(path: Path) -> None:
    """Turn a closed store file into the layout schema 1 wrote: the per-commit index, no wal_seq (its
    wal_ids, store_state['wal_ids_upto'] and rows are what schema 1 kept the same way)."""
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE wal_seq")
    conn.execute("CREATE UNIQUE INDEX wal_channel_seq ON wal (channel_id, seq)")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()


def moved_rows(path: Path) -> tuple[int, int, int]:
    """(wal_ids_upto, rows in wal_seq, rows of wal at or below the mark), read from the file itself."""
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT value FROM store_state WHERE key = 'wal_ids_upto'").fetchone()
        upto = row[0] if row else 0
        in_seq = conn.execute("SELECT count(*) FROM wal_seq").fetchone()[0]
        joined = conn.execute(
            "SELECT count(*) FROM wal_seq s JOIN wal w ON w.pos = s.pos "
            "AND w.channel_id = s.channel_id AND w.seq = s.seq"
        ).fetchone()[0]
        below = conn.execute("SELECT count(*) FROM wal WHERE pos <= ?", (upto,)).fetchone()[0]
    finally:
        conn.close()
    assert joined == in_seq, "a wal_seq row that points at no WAL row of its channel and seq"
    return upto, in_seq, below


@pytest.mark.parametrize(
    ("writer", "ids_batch", "iter_batch"),
    [("inline", 1, 1), ("inline", 3, 2), ("thread", 7, 5), ("inline", 1024, 4096), ("thread", 3, 3)],
)
async def test_every_read_by_seq_agrees_with_the_rows_appended(tmp_path, writer, ids_batch, iter_batch):
    path = tmp_path / "hub.db"
    model: dict[str, list[str]] = {}
    count = 0

    def text() -> str:
        nonlocal count
        count += 1
        return json.dumps({"n": count, "say": "héllo ✓" if count % 5 == 0 else "plain"})

    async with SqliteStore(path, writer=writer, ids_batch=ids_batch, iter_batch=iter_batch) as store:
        await check_reads(store, model, iter_batch=iter_batch)
        # lone appends, interleaved across channels, a read of everything after each
        for i in range(10):
            cid = CHANNELS[i % 3] if i % 4 else "cA"
            body = text()
            assert await store.append(cid, f"{count:032x}", body) == len(model.get(cid, [])) + 1
            model.setdefault(cid, []).append(body)
            await check_reads(store, model, iter_batch=iter_batch)
        # groups of several sizes (all-or-nothing appends into one channel)
        for size in (1, 2, 5):
            cid = CHANNELS[size % 3]
            items = []
            for _ in range(size):
                items.append((f"{count + 1:032x}", text()))
            seqs = await store.append_group(cid, items)
            start = len(model.get(cid, []))
            assert seqs == list(range(start + 1, start + size + 1))
            model.setdefault(cid, []).extend(body for _, body in items)
            await check_reads(store, model, iter_batch=iter_batch)
    upto, in_seq, below = moved_rows(path)
    assert in_seq == below == upto, "wal_seq must hold exactly the rows up to the mark"
    if ids_batch == 1024:
        assert in_seq == 0  # every row still in the tail: the reads above came from the scan alone
    else:
        assert in_seq > 0
    async with SqliteStore(path, writer=writer, ids_batch=ids_batch, iter_batch=iter_batch) as store:
        await check_reads(store, model, iter_batch=iter_batch)
        body = text()
        assert await store.append("cB", f"{count:032x}", body) == len(model["cB"]) + 1
        model["cB"].append(body)
        await check_reads(store, model, iter_batch=iter_batch)


async def test_a_schema_1_file_is_upgraded_with_its_rows_indexed(tmp_path):
    """A file of the old layout (the per-commit index, some ids moved in bulk and some not): opened by this
    code, its moved rows go into wal_seq, the index is dropped, and every read and append goes on."""
    path = tmp_path / "old.db"
    model: dict[str, list[str]] = {}
    async with SqliteStore(path, ids_batch=4) as store:
        for i in range(11):  # two bulk moves of 4 (8 rows moved), 3 rows in the tail
            cid = CHANNELS[i % 2]
            body = json.dumps({"old": i})
            await store.append(cid, f"{i + 1:032x}", body)
            model.setdefault(cid, []).append(body)
    as_schema_1(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert (
        conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'wal_channel_seq'").fetchone()[0] == 1
    )
    conn.close()

    async with SqliteStore(path, ids_batch=4, iter_batch=3) as store:
        await check_reads(store, model, iter_batch=3)
        for i in range(11, 16):
            cid = CHANNELS[i % 3]
            body = json.dumps({"new": i})
            assert await store.append(cid, f"{i + 1:032x}", body) == len(model.get(cid, [])) + 1
            model.setdefault(cid, []).append(body)
            await check_reads(store, model, iter_batch=3)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_store.schema_version()
    assert (
        conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'wal_channel_seq'").fetchone()[0] == 0
    )
    conn.close()
    upto, in_seq, below = moved_rows(path)
    assert in_seq == below == upto == 16  # the last move took the 8 tail rows (3 old, 5 new)


@pytest.mark.parametrize("version", [1, 2])
async def test_the_wal_command_reads_both_layouts(tmp_path, version):
    """``ag2net wal`` opens the file read-only (nothing upgrades it): it must read either schema."""
    path = tmp_path / "hub.db"

    hub = await Hub.open(SqliteStore(path, ids_batch=3), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    await hc.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    for i in range(8):
        await alice.send(ch.channel_id, f"line number {i}")
    count = hub.wal_count(ch.channel_id)
    await hub.close()
    if version == 1:
        as_schema_1(path)
    proc = subprocess.run(
        [*AG2NET, "wal", "--db", str(path), "conversation"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    for i in range(8):
        assert f"line number {i}" in proc.stdout
    listing = subprocess.run([*AG2NET, "wal", "--db", str(path)], capture_output=True, text=True, timeout=60)
    assert listing.returncode == 0, listing.stderr
    line = next(row for row in listing.stdout.splitlines() if "conversation" in row)
    assert f" {count} " in f" {line} ", line  # the channel's opening envelopes and the 8 texts


async def test_a_second_writer_on_the_file_is_caught_and_no_seq_is_written_twice(tmp_path):
    """Without a per-commit (channel_id, seq) index, what catches another store writing the same file is the
    WAL's pos key: the write that collides is refused with the one-hub sentence, the counters are reloaded,
    and the next write goes on after the other writer's rows, so no seq is stored twice."""
    path = tmp_path / "two.db"
    first = SqliteStore(path)
    await first.open()
    second = SqliteStore(path)
    try:
        assert await first.append("c1", "a" * 32, '"a"') == 1
        await second.open()
        assert await second.append("c1", "b" * 32, '"b"') == 2
        with pytest.raises(StoreError, match="only one hub may open a store file"):
            await first.append("c1", "c" * 32, '"c"')
        assert await first.append("c1", "d" * 32, '"d"') == 3
        assert await second.read_wal_seq("c1", 1, 9) == [(1, '"a"'), (2, '"b"'), (3, '"d"')]
    finally:
        await first.close()
        await second.close()
    conn = sqlite3.connect(path)
    seqs = [row[0] for row in conn.execute("SELECT seq FROM wal WHERE channel_id = 'c1' ORDER BY pos")]
    conn.close()
    assert seqs == [1, 2, 3]

"""Store throughput and read latency: appends/s (sequential and pipelined, fsync off and on) and WAL reads.

Run ``python bench/store.py`` (``--quick`` for smaller runs); every figure is printed as one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from ag2net.envelope import Envelope
from ag2net.ids import MonotonicIds, make_id, utc_now
from ag2net.store import MemoryStore, SqliteStore

_ids = MonotonicIds()


def emit(**figures: object) -> None:
    print(json.dumps({"bench": "store", **figures}), flush=True)


def envelope(channel_id: str, sender_id: str, n: int) -> tuple[str, str]:
    """A short text envelope as the hub would store it (about 430 bytes: the empty fields alone take 400)."""
    env = Envelope(
        channel_id=channel_id,
        sender_id=sender_id,
        audience=None,
        event_type="ag2.msg.text",
        event_data={"text": f"message {n}: hello there"},
        envelope_id=_ids(),
        created_at=utc_now(),
    )
    return env.envelope_id, env.to_json()


def make_envelopes(channel_ids: list[str], n: int) -> list[tuple[str, str, str]]:
    sender = make_id()
    out = []
    for i in range(n):
        channel_id = channel_ids[i % len(channel_ids)]
        envelope_id, text = envelope(channel_id, sender, i)
        out.append((channel_id, envelope_id, text))
    return out


async def append_sequential(store, items) -> tuple[float, float, float]:
    """Total seconds, and mean µs per append in the first and the last tenth."""
    tenth = max(1, len(items) // 10)
    marks = []
    start = time.perf_counter()
    for i, (channel_id, envelope_id, text) in enumerate(items):
        if i % tenth == 0:
            marks.append(time.perf_counter())
        await store.append(channel_id, envelope_id, text)
    end = time.perf_counter()
    marks.append(end)
    first = (marks[1] - marks[0]) / tenth * 1e6
    last = (marks[-1] - marks[-2]) / max(1, len(items) - tenth * (len(marks) - 2)) * 1e6
    return end - start, first, last


async def append_pipelined(store, items, writers: int = 64) -> float:
    async def writer(k: int) -> None:
        for channel_id, envelope_id, text in items[k::writers]:
            await store.append(channel_id, envelope_id, text)

    start = time.perf_counter()
    await asyncio.gather(*(writer(k) for k in range(writers)))
    return time.perf_counter() - start


def raw_sqlite_commit_rate(path: Path, items) -> float:
    """The floor under (a): plain sqlite3 on the same WAL table, one INSERT + COMMIT per row, no asyncio."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA wal_autocheckpoint = 0")
    conn.execute(
        "CREATE TABLE wal (pos INTEGER PRIMARY KEY, channel_id TEXT NOT NULL, seq INTEGER NOT NULL, "
        "envelope_id TEXT NOT NULL, envelope TEXT NOT NULL)"
    )
    conn.execute("CREATE UNIQUE INDEX wal_channel_seq ON wal (channel_id, seq)")
    start = time.perf_counter()
    for seq, (channel_id, envelope_id, text) in enumerate(items, 1):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO wal VALUES (NULL, ?, ?, ?, ?)", (channel_id, seq, envelope_id, text))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return len(items) / elapsed


async def bench_appends(root: Path, n: int, n_fsync: int) -> None:
    sizes = [len(text) for _, _, text in make_envelopes(["c"], 10)]
    emit(case="envelope_size", bytes=round(sum(sizes) / len(sizes)))

    items = make_envelopes([make_id()], n)
    emit(case="raw_sqlite3_commit_per_row", n=n, per_s=round(raw_sqlite_commit_rate(root / "raw.db", items)))

    memory = MemoryStore()
    elapsed, _, _ = await append_sequential(memory, make_envelopes([make_id()], n))
    emit(case="append_sequential", store="memory", n=n, per_s=round(n / elapsed))

    configs = [
        (False, "inline", n),
        (False, "thread", n),
        (True, "thread", n_fsync),
        (True, "inline", n_fsync),
    ]
    for fsync, writer, count in configs:
        for mode in ("sequential", "pipelined_64"):
            path = root / f"append-{fsync}-{writer}-{mode}.db"
            items = make_envelopes([make_id(), make_id()], count)
            async with SqliteStore(path, fsync=fsync, writer=writer) as store:
                if mode == "sequential":
                    elapsed, first, last = await append_sequential(store, items)
                    extra = {"first_tenth_us": round(first, 1), "last_tenth_us": round(last, 1)}
                else:
                    elapsed = await append_pipelined(store, items)
                    extra = {}
            emit(
                case=f"append_{mode}",
                store="sqlite",
                fsync=fsync,
                writer=writer,
                n=count,
                per_s=round(count / elapsed),
                **extra,
            )


async def timed(coro_factory, repeat: int = 3) -> tuple[float, float]:
    """(first, best) wall time in ms."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await coro_factory()
        times.append((time.perf_counter() - start) * 1000)
    return times[0], min(times)


async def bench_reads(root: Path, n_channel: int, n_big: int, n_channels: int) -> None:
    # read_wal of one channel of n_channel rows
    async with SqliteStore(root / "read.db") as store:
        channel = make_id()
        items = make_envelopes([channel], n_channel)
        await append_pipelined(store, items)
    async with SqliteStore(root / "read.db") as store:  # reopened: nothing cached in the process
        first, best = await timed(lambda: store.read_wal(channel))
        rows = await store.read_wal(channel)
        assert len(rows) == n_channel
        emit(case="read_wal", rows=n_channel, first_ms=round(first, 2), best_ms=round(best, 2))
        first, best = await timed(lambda: store.read_wal(channel, since=-10))
        emit(case="read_wal_last_10", rows=n_channel, first_ms=round(first, 3), best_ms=round(best, 3))

    # read_wal_seq of 100 rows in the middle of a big channel, against the same in a small one
    async with SqliteStore(root / "seq.db") as store:
        big, small = make_id(), make_id()
        await append_pipelined(store, make_envelopes([big], n_big))
        await append_pipelined(store, make_envelopes([small], 1000))
    async with SqliteStore(root / "seq.db") as store:
        for name, channel_id, size in (("big", big, n_big), ("small", small, 1000)):
            middle = size // 2
            first, best = await timed(
                lambda c=channel_id, m=middle: store.read_wal_seq(c, m, m + 99), repeat=5
            )
            assert len(await store.read_wal_seq(channel_id, middle, middle + 99)) == 100
            emit(
                case="read_wal_seq_100",
                wal_rows=size,
                which=name,
                first_ms=round(first, 3),
                best_ms=round(best, 3),
            )

    # iter_wal over n_big rows in n_channels channels (what hydrate reads)
    channels = [make_id() for _ in range(n_channels)]
    async with SqliteStore(root / "iter.db") as store:
        start = time.perf_counter()
        await append_pipelined(store, make_envelopes(channels, n_big))
        build = time.perf_counter() - start
        emit(
            case="append_pipelined_64",
            store="sqlite",
            fsync=False,
            writer="inline",
            n=n_big,
            channels=n_channels,
            per_s=round(n_big / build),
        )
    async with SqliteStore(root / "iter.db") as store:
        start = time.perf_counter()
        counts = await store.wal_counts()
        counts_ms = (time.perf_counter() - start) * 1000
        start = time.perf_counter()
        seen = 0
        async for _channel_id, _seq, _text in store.iter_wal():
            seen += 1
        iter_ms = (time.perf_counter() - start) * 1000
        assert seen == n_big and sum(counts.values()) == n_big
        emit(case="iter_wal", rows=n_big, channels=n_channels, ms=round(iter_ms, 1))
        emit(case="wal_counts", rows=n_big, channels=n_channels, ms=round(counts_ms, 2))
        start = time.perf_counter()
        seen = 0
        async for _ in store.iter_wal(channels):
            seen += 1
        emit(
            case="iter_wal_listed_channels",
            rows=seen,
            channels=n_channels,
            ms=round((time.perf_counter() - start) * 1000, 1),
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the script)")
    parser.add_argument("--dir", help="directory for the database files (default: a temporary directory)")
    args = parser.parse_args()
    n, n_fsync, n_big = (2000, 200, 10_000) if args.quick else (20_000, 20_000, 100_000)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        emit(
            case="machine",
            python=sys.version.split()[0],
            sqlite=sqlite3.sqlite_version,
            cpus=os.cpu_count(),
            dir=str(root),
        )
        await bench_appends(root, n, n_fsync)
        await bench_reads(root, n, n_big, 100)


if __name__ == "__main__":
    asyncio.run(main())

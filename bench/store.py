"""Store throughput and read latency: appends/s (sequential and pipelined, fsync off and on) and WAL reads.

Run ``python bench/store.py`` (``--quick`` for smaller runs); every figure is printed as one JSON line.
``--postgres URL`` or ``--postgres-local`` adds PostgreSQL figures beside SQLite's: store appends and hub
admission with 1 and 64 in flight, reads, and hub hydrate of 100k posts (``--skip-sqlite`` for those only).
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


# --- PostgreSQL, beside SQLite (``--postgres URL`` or ``--postgres-local``) ---


class PgTarget:
    """Fresh schemas on one PostgreSQL database for the bench cases; dropped again by ``cleanup()``."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.schemas: list[str] = []

    async def fresh(self, name: str) -> str:
        import asyncpg

        schema = f"ag2net_bench_{os.getpid()}_{name}"
        conn = await asyncpg.connect(self.url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            await conn.execute(f"CREATE SCHEMA {schema}")
        finally:
            await conn.close()
        self.schemas.append(schema)
        return f"{self.url}{'&' if '?' in self.url else '?'}search_path={schema}"

    async def settings(self) -> dict[str, str]:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            names = ("server_version", "fsync", "synchronous_commit", "shared_buffers", "wal_level")
            return {n: await conn.fetchval(f"SHOW {n}") for n in names}
        finally:
            await conn.close()

    async def cleanup(self) -> None:
        import asyncpg

        conn = await asyncpg.connect(self.url)
        try:
            for schema in self.schemas:
                await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        finally:
            await conn.close()


async def hub_admission(store, n: int, in_flight: int) -> tuple[float, int]:
    """Posts/s through a Hub on ``store`` (each acknowledged = committed), ``in_flight`` posts at a time."""
    from ag2net.client import HubClient
    from ag2net.hub import Hub
    from ag2net.identity import Passport

    hub = await Hub.open(store, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        cid = (await ana.open(type="conversation", target="ben")).channel_id

        async def poster(k: int) -> None:
            for i in range(k, n, in_flight):
                await ana.send(cid, f"message {i}: hello there")

        start = time.perf_counter()
        await asyncio.gather(*(poster(k) for k in range(in_flight)))
        elapsed = time.perf_counter() - start
        return elapsed, hub.wal_count(cid)
    finally:
        await hub.close()


async def hub_hydrate(make_store, channels: int, per_channel: int) -> dict[str, float]:
    """Seconds to reopen a Hub on a store of ``channels * per_channel`` posts: after a clean close and as
    after a crash (no shutdown snapshot: every live channel's WAL is read and folded)."""
    from ag2net.client import HubClient
    from ag2net.hub import Hub
    from ag2net.hub.hub import SNAPSHOT_KEY
    from ag2net.identity import Passport

    quiet = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0}
    hub = await Hub.open(make_store(), **quiet)
    hc = HubClient.local(hub)
    a = await hc.register_human(Passport(name="writer", kind="human"))
    await hc.register_human(Passport(name="reader", kind="human"))
    cids = [(await a.open(type="conversation", target="reader")).channel_id for _ in range(channels)]
    sem = asyncio.Semaphore(256)

    async def one(cid: str, i: int) -> None:
        async with sem:
            await a.send(cid, f"hydrate filler {i} " + "x" * 80)

    start = time.perf_counter()
    await asyncio.gather(*(one(cid, i) for i in range(per_channel) for cid in cids))
    fill_s = time.perf_counter() - start
    await hub.close()
    start = time.perf_counter()
    hub = await Hub.open(make_store(), **quiet)
    clean_s = time.perf_counter() - start
    total = sum(hub.wal_count(c) for c in cids)
    await hub.close()
    store = make_store()
    await store.open()
    await store.set_meta(SNAPSHOT_KEY, "")
    await store.close()
    start = time.perf_counter()
    hub = await Hub.open(make_store(), **quiet)
    crash_s = time.perf_counter() - start
    await hub.close()
    return {
        "envelopes": total,
        "fill_s": round(fill_s, 2),
        "clean_close_s": round(clean_s, 3),
        "crash_fold_all_s": round(crash_s, 3),
    }


async def bench_postgres(root: Path, target: PgTarget, n: int, n_big: int, hydrate: int) -> None:
    """Store appends (1 and 64 in flight), hub admission (1 and 64 in flight), reads, and hub hydrate, on
    PostgreSQL and, for the hub-level cases, on SQLite with the same workload."""
    from ag2net.store import PostgresStore

    emit(case="postgres_server", **await target.settings())
    for mode in ("sequential", "pipelined_64"):
        items = make_envelopes([make_id(), make_id()], n)
        async with PostgresStore(await target.fresh(f"append_{mode}")) as store:
            if mode == "sequential":
                elapsed, first, last = await append_sequential(store, items)
                extra = {"first_tenth_us": round(first, 1), "last_tenth_us": round(last, 1)}
            else:
                elapsed = await append_pipelined(store, items)
                extra = {}
        emit(case=f"append_{mode}", store="postgres", n=n, per_s=round(n / elapsed), **extra)

    for in_flight in (1, 64):
        for kind in ("sqlite", "postgres"):
            if kind == "sqlite":
                store = SqliteStore(root / f"admission-{in_flight}.db")
            else:
                store = PostgresStore(await target.fresh(f"admission_{in_flight}"))
            elapsed, count = await hub_admission(store, n, in_flight)
            emit(
                case="hub_admission",
                store=kind,
                in_flight=in_flight,
                n=n,
                posts_per_s=round(n / elapsed),
                wal=count,
            )

    # Reads: one channel of n rows, a big channel of n_big rows, n_big rows in 100 channels.
    url = await target.fresh("reads")
    channel, big = make_id(), make_id()
    channels = [make_id() for _ in range(100)]
    async with PostgresStore(url) as store:
        await append_pipelined(store, make_envelopes([channel], n))
        await append_pipelined(store, make_envelopes([big], n_big))
        start = time.perf_counter()
        await append_pipelined(store, make_envelopes(channels, n_big))
        emit(
            case="append_pipelined_64",
            store="postgres",
            n=n_big,
            channels=100,
            per_s=round(n_big / (time.perf_counter() - start)),
        )
    async with PostgresStore(url) as store:  # reopened: nothing cached in the process
        first, best = await timed(lambda: store.read_wal(channel))
        assert len(await store.read_wal(channel)) == n
        emit(case="read_wal", store="postgres", rows=n, first_ms=round(first, 2), best_ms=round(best, 2))
        first, best = await timed(lambda: store.read_wal(channel, since=-10))
        emit(
            case="read_wal_last_10",
            store="postgres",
            rows=n,
            first_ms=round(first, 3),
            best_ms=round(best, 3),
        )
        middle = n_big // 2
        first, best = await timed(lambda: store.read_wal_seq(big, middle, middle + 99), repeat=5)
        emit(
            case="read_wal_seq_100",
            store="postgres",
            wal_rows=n_big,
            first_ms=round(first, 3),
            best_ms=round(best, 3),
        )
        times = []
        for _ in range(5):
            start = time.perf_counter()
            assert len(store.read_wal_block(big, middle, middle + 99)) == 100
            times.append((time.perf_counter() - start) * 1000)
        emit(
            case="read_wal_block_100",
            store="postgres",
            wal_rows=n_big,
            first_ms=round(times[0], 3),
            best_ms=round(min(times), 3),
        )
        start = time.perf_counter()
        counts = await store.wal_counts()
        emit(
            case="wal_counts",
            store="postgres",
            channels=len(counts),
            ms=round((time.perf_counter() - start) * 1000, 2),
        )
        start = time.perf_counter()
        seen = 0
        async for _ in store.iter_wal(channels):
            seen += 1
        assert seen == n_big
        emit(
            case="iter_wal_listed_channels",
            store="postgres",
            rows=seen,
            channels=100,
            ms=round((time.perf_counter() - start) * 1000, 1),
        )

    if hydrate:
        per_channel = max(1, hydrate // 100)
        path = root / "hydrate.db"
        figures = await hub_hydrate(lambda: SqliteStore(path), 100, per_channel)
        emit(case="hub_hydrate", store="sqlite", channels=100, **figures)
        url = await target.fresh("hydrate")
        figures = await hub_hydrate(lambda: PostgresStore(url), 100, per_channel)
        emit(case="hub_hydrate", store="postgres", channels=100, **figures)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller runs (a smoke test of the script)")
    parser.add_argument("--dir", help="directory for the database files (default: a temporary directory)")
    parser.add_argument(
        "--postgres",
        metavar="URL",
        help="also bench PostgreSQL on this database (postgresql://user:password@host/dbname; in schemas "
        "ag2net_bench_*, dropped after)",
    )
    parser.add_argument(
        "--postgres-local",
        action="store_true",
        help="also bench PostgreSQL on a throwaway server started here (tests/pg_server.py, default settings)",
    )
    parser.add_argument("--skip-sqlite", action="store_true", help="skip the SQLite-only sections")
    parser.add_argument("--hydrate", type=int, default=None, help="posts for the hub hydrate case (0: skip)")
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
        if not args.skip_sqlite:
            await bench_appends(root, n, n_fsync)
            await bench_reads(root, n, n_big, 100)
        if args.postgres or args.postgres_local:
            await run_postgres(root, args, n, n_big)


async def run_postgres(root: Path, args: argparse.Namespace, n: int, n_big: int) -> None:
    hydrate = args.hydrate if args.hydrate is not None else (10_000 if args.quick else 100_000)
    server = None
    url = args.postgres
    if args.postgres_local:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
        from pg_server import PgServer, find_bindir, skip_reason

        reason = skip_reason()
        if reason is not None:
            emit(case="postgres_skipped", reason=reason)
            return
        bindir = find_bindir()
        assert bindir is not None
        server = PgServer(bindir)
        server.start()
        url = server.url()
    target = PgTarget(url)
    try:
        await bench_postgres(root, target, n, n_big, hydrate)
    finally:
        if server is not None:
            server.stop()
        else:
            await target.cleanup()


if __name__ == "__main__":
    asyncio.run(main())

"""Which bridge between asyncio and SQLite the store should use: its own (``SqliteStore``: commits inline on the
event loop, reads on a daemon reader thread) or ``aiosqlite`` (every call a round trip to the connection's
worker thread). The figures behind ``docs/sqlite-bridge.md``.

Both sides do the same SQL on the same schema, in WAL mode with ``synchronous=NORMAL`` (an acknowledged append
survives ``kill -9``), with the same group commit: an append returns once the batch holding it is committed.
Rounds alternate old and new in one run, so the shared machine's drift hits both alike. Per case: wall time
and CPU time (``time.process_time``: every thread of the process) per envelope, the median of the rounds.
Then the clean-exit rule: does a program that forgets ``close()`` still exit?

Run ``python bench/sqlite_bridge.py`` (``--quick`` for a smaller run); one JSON line per figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

import aiosqlite

from ag2net.envelope import Envelope
from ag2net.ids import MonotonicIds, make_id, utc_now
from ag2net.store import SqliteStore

_ids = MonotonicIds()

SCHEMA = (
    "CREATE TABLE wal (pos INTEGER PRIMARY KEY, channel_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "envelope_id TEXT NOT NULL, envelope TEXT NOT NULL)",
    "CREATE UNIQUE INDEX wal_channel_seq ON wal (channel_id, seq)",
)
INSERT = "INSERT INTO wal (channel_id, seq, envelope_id, envelope) VALUES (?, ?, ?, ?)"
READ = "SELECT envelope FROM wal WHERE channel_id = ? AND seq > ? ORDER BY seq"


def emit(**figures: object) -> None:
    print(json.dumps({"bench": "sqlite_bridge", **figures}), flush=True)


def envelopes(channel_id: str, n: int) -> list[tuple[str, str]]:
    sender = make_id()
    out = []
    for i in range(n):
        env = Envelope(
            channel_id=channel_id,
            sender_id=sender,
            audience=None,
            event_type="ag2.msg.text",
            event_data={"text": f"message {i}: hello there"},
            envelope_id=_ids(),
            created_at=utc_now(),
        )
        out.append((env.envelope_id, env.to_json()))
    return out


class AioWal:
    """The store's WAL writes and reads over aiosqlite, with the same group commit as ``SqliteStore``: the
    first append of a loop iteration leads, yields once so the others join, then commits them all."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.db: Any = None
        self.reader: Any = None  # reads on a connection of their own, as SqliteStore's reader thread has
        self.seq: dict[str, int] = {}
        self.pending: list[tuple[tuple[str, int, str, str], asyncio.Future[int]]] = []
        self.leading = False

    async def open(self) -> None:
        self.db = await aiosqlite.connect(self.path, isolation_level=None)
        await self.db.execute("PRAGMA journal_mode = WAL")
        await self.db.execute("PRAGMA synchronous = NORMAL")
        # as SqliteStore: no checkpoint inside a commit (the store runs them in the background)
        await self.db.execute("PRAGMA wal_autocheckpoint = 0")
        for statement in SCHEMA:
            await self.db.execute(statement)
        self.reader = await aiosqlite.connect(self.path, isolation_level=None)

    async def close(self) -> None:
        await self.reader.close()
        await self.db.close()

    async def append(self, channel_id: str, envelope_id: str, text: str) -> int:
        seq = self.seq.get(channel_id, 0) + 1
        self.seq[channel_id] = seq
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.pending.append(((channel_id, seq, envelope_id, text), future))
        if not self.leading:
            self.leading = True
            await asyncio.sleep(0)  # let every append of this iteration join the batch
            batch, self.pending = self.pending, []
            self.leading = False
            await self.db.execute("BEGIN IMMEDIATE")
            await self.db.executemany(INSERT, [row for row, _ in batch])
            await self.db.execute("COMMIT")
            for row, waiting in batch:
                waiting.set_result(row[1])
        return await future

    async def read_wal(self, channel_id: str) -> list[str]:
        return [row[0] for row in await self.reader.execute_fetchall(READ, (channel_id, 0))]


async def sequential(wal: Any, channel_id: str, items: list[tuple[str, str]]) -> None:
    for envelope_id, text in items:
        await wal.append(channel_id, envelope_id, text)


async def pipelined(wal: Any, channel_id: str, items: list[tuple[str, str]], writers: int = 64) -> None:
    async def writer(k: int) -> None:
        for envelope_id, text in items[k::writers]:
            await wal.append(channel_id, envelope_id, text)

    await asyncio.gather(*(writer(k) for k in range(writers)))


async def one_round(root: Path, side: str, mode: str, n: int, round_no: int) -> dict[str, float]:
    path = root / f"{side}-{mode}-{round_no}.db"
    wal: Any = SqliteStore(path) if side == "ag2net" else AioWal(path)
    await wal.open()
    channel_id = make_id()
    items = envelopes(channel_id, n)
    try:
        cpu, wall = time.process_time(), time.perf_counter()
        await (sequential if mode == "sequential" else pipelined)(wal, channel_id, items)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        reads = []
        for _ in range(5):
            started = time.perf_counter()
            rows = await wal.read_wal(channel_id)
            reads.append(time.perf_counter() - started)
        assert len(rows) == n
    finally:
        await wal.close()
    return {
        "wall_us": wall / n * 1e6,
        "cpu_us": cpu / n * 1e6,
        "read_ms": statistics.median(reads) * 1e3,
    }


CLEAN_EXIT = {
    "ag2net": """
        import asyncio, sys
        from ag2net.store import SqliteStore
        KEPT = []
        async def main():
            store = SqliteStore(sys.argv[1])
            await store.open()
            await store.append("c", "e1", '{"x": 1}')
            KEPT.append(store)  # a program that holds its store and forgets close()
        asyncio.run(main())
        """,
    "aiosqlite": """
        import asyncio, sys
        import aiosqlite
        KEPT = []
        async def main():
            db = await aiosqlite.connect(sys.argv[1])
            await db.execute("CREATE TABLE IF NOT EXISTS t (x)")
            await db.commit()
            KEPT.append(db)  # a program that holds its connection and forgets close()
        asyncio.run(main())
        """,
}


def clean_exit(root: Path, side: str, bound: float = 10.0) -> str:
    started = time.perf_counter()
    try:
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(CLEAN_EXIT[side]), str(root / f"exit-{side}.db")],
            timeout=bound,
            check=True,
            capture_output=True,
        )
    except subprocess.TimeoutExpired:
        return f"still running after {bound:g} s (killed)"
    return f"exited in {time.perf_counter() - started:.2f} s"


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 envelopes, 2 rounds")
    args = parser.parse_args()
    n, rounds = (2_000, 2) if args.quick else (20_000, 5)
    emit(case="setup", n=n, rounds=rounds, aiosqlite=aiosqlite.__version__, sqlite=aiosqlite.sqlite_version)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for mode in ("sequential", "pipelined_64"):
            results: dict[str, list[dict[str, float]]] = {"ag2net": [], "aiosqlite": []}
            for round_no in range(rounds):
                order = ("ag2net", "aiosqlite") if round_no % 2 == 0 else ("aiosqlite", "ag2net")
                for side in order:  # alternate which goes first, round by round
                    results[side].append(await one_round(root, side, mode, n, round_no))
            for side, figures in results.items():
                emit(
                    case=mode,
                    bridge=side,
                    n=n,
                    wall_us_per_envelope=round(statistics.median(f["wall_us"] for f in figures), 1),
                    cpu_us_per_envelope=round(statistics.median(f["cpu_us"] for f in figures), 1),
                    read_wal_ms=round(statistics.median(f["read_ms"] for f in figures), 1),
                    rounds=[round(f["wall_us"], 1) for f in figures],
                )
        for side in ("ag2net", "aiosqlite"):
            emit(case="clean_exit_without_close", bridge=side, result=clean_exit(root, side))


if __name__ == "__main__":
    asyncio.run(main())

"""The fsync store's zero-filled ``-wal`` file (``SqliteStore._preallocate_wal``): commits overwrite blocks the
file has, and nothing about recovery changes. Checked with ``kill -9`` mid-stream, after WAL restarts (a
small ``checkpoint_bytes``, so commits run over frames of earlier cycles and over the zeros), on a reopen
of a preallocated file, and that a store without fsync leaves the file to SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from ag2net.store import SqliteStore

#: appends one at a time and in groups into two channels, printing each acknowledged envelope id, forever
WRITER = textwrap.dedent(
    """
    import asyncio, json, sys
    from ag2net.store import SqliteStore

    async def main(path, checkpoint_bytes):
        store = SqliteStore(path, fsync=True, checkpoint_bytes=checkpoint_bytes, ids_batch=50)
        await store.open()
        print("open", flush=True)
        n = 0
        while True:
            n += 1
            cid = f"c{n % 2}"
            if n % 5:
                eid = f"{n:032x}"
                await store.append(cid, eid, json.dumps({"envelope_id": eid, "pad": "x" * 200}))
                print("ack", cid, eid, flush=True)
            else:
                items = []
                for k in range(7):
                    n += 1
                    eid = f"{n:032x}"
                    items.append((eid, json.dumps({"envelope_id": eid, "pad": "y" * 200})))
                await store.append_group(cid, items)
                for eid, _ in items:
                    print("ack", cid, eid, flush=True)

    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
    """
)


def run_and_kill(path: Path, checkpoint_bytes: int, acks: int) -> dict[str, list[str]]:
    """Run ``WRITER`` until it has acknowledged ``acks`` envelopes, SIGKILL it; each channel's acked ids."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(checkpoint_bytes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    acked: dict[str, list[str]] = {}
    count = 0
    deadline = time.monotonic() + 60
    try:
        assert proc.stdout is not None
        while count < acks:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died early: {proc.stderr.read() if proc.stderr else ''}")
            if line.startswith("ack "):
                _, cid, eid = line.split()
                acked.setdefault(cid, []).append(eid)
                count += 1
            assert time.monotonic() < deadline, "writer too slow"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        rest = proc.stdout.read() if proc.stdout else ""
        for line in rest.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "ack":
                acked.setdefault(parts[1], []).append(parts[2])
    return acked


@pytest.mark.parametrize(
    ("checkpoint_bytes", "acks"),
    [(16 << 20, 1500), (96 << 10, 1500)],
    ids=["one-cycle", "many-restarts"],
)
async def test_kill_9_loses_no_acknowledged_write_over_a_zero_filled_wal(tmp_path, checkpoint_bytes, acks):
    path = tmp_path / "durable.db"
    acked = run_and_kill(path, checkpoint_bytes, acks)
    wal = Path(f"{path}-wal")
    assert wal.stat().st_size >= checkpoint_bytes  # zero-filled at open (and kept by SQLite)
    for reopen in range(2):  # recovery, then a reopen of the file that recovery wrote
        async with SqliteStore(path, fsync=True, checkpoint_bytes=checkpoint_bytes) as store:
            for cid, ids in acked.items():
                rows = await store.read_wal_seq(cid, 1, 10**9)
                assert [seq for seq, _ in rows] == list(range(1, len(rows) + 1)), "seqs must be contiguous"
                stored = [json.loads(text)["envelope_id"] for _, text in rows]
                assert stored[: len(ids)] == ids, f"an acknowledged write of {cid} is missing or out of order"
                assert len(stored) - len(ids) <= 8  # at most the group in flight when the kill came
                eid = f"{10**6 + 10 * reopen + int(cid[1:]):032x}"
                assert await store.append(cid, eid, json.dumps({"envelope_id": eid})) == len(rows) + 1
                acked[cid] = [*stored, eid]


async def test_only_the_fsync_store_zero_fills_and_never_shrinks_the_file(tmp_path):
    plain = tmp_path / "plain.db"
    async with SqliteStore(plain, checkpoint_bytes=1 << 20) as store:
        await store.append("c", "a" * 32, "{}")
        assert Path(f"{plain}-wal").stat().st_size < 1 << 20
    durable = tmp_path / "durable.db"
    async with SqliteStore(durable, fsync=True, checkpoint_bytes=1 << 20) as store:
        wal = Path(f"{durable}-wal")
        assert wal.stat().st_size == 1 << 20
        for i in range(40):
            await store.append("c", f"{i:032x}", json.dumps({"i": i, "pad": "z" * 300}))
        assert wal.stat().st_size >= 1 << 20
        assert await store.wal_count("c") == 40
    async with SqliteStore(durable, fsync=True, checkpoint_bytes=1 << 10) as store:  # already larger: kept
        assert [seq for seq, _ in await store.read_wal_seq("c", 1, 99)] == list(range(1, 41))

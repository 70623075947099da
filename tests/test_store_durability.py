"""Kill -9 a process that is appending to a SqliteStore: every acknowledged envelope must be in the file."""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import time

import pytest

from ag2net.store import SqliteStore, StoreError

# The child appends with eight appenders in flight and prints "channel envelope_id seq" the moment
# each append has returned, i.e. once the store has acknowledged it.
CHILD = r"""
import asyncio, json, sys
from ag2net.store import SqliteStore, StoreError

async def main(path, writer, fsync):
    store = SqliteStore(path, writer=writer, fsync=fsync == "1", checkpoint_bytes=1 << 20)
    await store.open()
    out = sys.stdout

    async def appender(k):
        i = 0
        while True:
            channel = "c%d" % ((k + i) % 3)
            envelope_id = "%02d%030d" % (k, i)
            # Every 16th envelope spans several pages, so a torn row would show.
            text = "x" * (9000 if i % 16 == 0 else 200)
            seq = await store.append(channel, envelope_id, json.dumps({"id": envelope_id, "text": text}))
            out.write("%s %s %d\n" % (channel, envelope_id, seq))
            out.flush()
            i += 1

    await asyncio.gather(*(appender(k) for k in range(8)))

asyncio.run(main(*sys.argv[1:]))
"""

ACKS_BEFORE_KILL = 3000


def run_and_kill(path, writer: str, fsync: bool) -> list[tuple[str, str, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), writer, "1" if fsync else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    buffer = b""
    lines = 0
    deadline = time.monotonic() + 20
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while lines < ACKS_BEFORE_KILL:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"child stopped early: {proc.stderr.read().decode()[-2000:]}")
            if selector.select(timeout=0.5):
                chunk = os.read(proc.stdout.fileno(), 65536)
                buffer += chunk
                lines = buffer.count(b"\n")
    proc.send_signal(signal.SIGKILL)
    # Whatever the child wrote before it died was acknowledged too: read it all.
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    buffer += rest
    complete = buffer[: buffer.rfind(b"\n") + 1].decode()  # a line cut by the kill was not acknowledged
    acks = []
    for line in complete.splitlines():
        channel, envelope_id, seq = line.split()
        acks.append((channel, envelope_id, int(seq)))
    return acks


@pytest.mark.parametrize(("writer", "fsync"), [("inline", False), ("thread", False), ("thread", True)])
def test_every_acknowledged_append_survives_kill_9(tmp_path, writer, fsync):
    path = tmp_path / "killed.db"
    acks = run_and_kill(path, writer, fsync)
    assert len(acks) >= ACKS_BEFORE_KILL

    async def check() -> None:
        async with SqliteStore(path) as store:
            counts = await store.wal_counts()
            rows: dict[str, list[tuple[int, str]]] = {}
            async for channel, seq, text in store.iter_wal():
                rows.setdefault(channel, []).append((seq, text))
            assert set(rows) == set(counts) == {"c0", "c1", "c2"}
            stored: dict[str, tuple[str, int]] = {}
            for channel, channel_rows in rows.items():
                seqs = [seq for seq, _ in channel_rows]
                assert seqs == list(range(1, len(seqs) + 1)), f"gap in {channel}"
                assert counts[channel] == len(seqs)
                for seq, text in channel_rows:
                    envelope = json.loads(text)  # no torn rows
                    assert set(envelope) == {"id", "text"}
                    stored[envelope["id"]] = (channel, seq)
            missing = [ack for ack in acks if stored.get(ack[1]) != (ack[0], ack[2])]
            assert not missing, f"{len(missing)} acknowledged envelopes lost or moved, e.g. {missing[:3]}"
            # Ids are found (some from the bulk index, the newest re-read from the WAL) and stay unique.
            for channel, envelope_id, seq in [*acks[:: max(1, len(acks) // 40)], *acks[-5:]]:
                assert await store.find_seq(channel, envelope_id) == seq
            with pytest.raises(StoreError, match="already in the WAL"):
                await store.append("c1", acks[-1][1], "{}")
            # The reopened store carries on numbering where the killed one stopped.
            assert await store.append("c0", "after-restart", "{}") == counts["c0"] + 1

    asyncio.run(check())

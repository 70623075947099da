"""kill -9 a process mid-stream: every envelope whose post_envelope returned is in the reopened database."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from ag2net.hub import Hub
from ag2net.store import SqliteStore

HELPER = Path(__file__).parent / "helpers" / "hub_writer.py"


async def test_sigkill_loses_no_acknowledged_envelope(tmp_path):
    db = tmp_path / "durable.db"
    proc = subprocess.Popen(
        [sys.executable, str(HELPER), str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    acked: list[str] = []
    channel_id = None
    deadline = time.monotonic() + 30
    try:
        assert proc.stdout is not None
        while len(acked) < 3000:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"writer died early: {proc.stderr.read() if proc.stderr else ''}")
            if line.startswith("channel "):
                channel_id = line.split()[1]
            elif line.startswith("ack "):
                acked.append(line.split()[1])
            assert time.monotonic() < deadline, "writer too slow"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        # whatever the pipe still holds was acknowledged before the kill too
        rest = proc.stdout.read() if proc.stdout else ""
        acked += [ln.split()[1] for ln in rest.splitlines() if ln.startswith("ack ") and len(ln.split()) == 2]
    assert channel_id

    raw = sqlite3.connect(db)
    rows = raw.execute(
        "SELECT seq, envelope_id, envelope FROM wal WHERE channel_id = ? ORDER BY seq", (channel_id,)
    ).fetchall()
    raw.close()
    seqs = [r[0] for r in rows]
    assert seqs == list(range(1, len(rows) + 1)), "seqs must be contiguous"
    for _seq, envelope_id, text in rows:
        assert json.loads(text)["envelope_id"] == envelope_id  # no torn rows
    stored = {r[1] for r in rows}
    missing = [a for a in acked if a not in stored]
    assert not missing, f"{len(missing)} acknowledged envelopes lost"

    hub = await Hub.open(SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        assert hub.wal_count(channel_id) == len(rows)
        assert {e.envelope_id for e in await hub.read_wal(channel_id)} >= set(acked)
    finally:
        await hub.close()

"""A hub on SQLite that is never closed must not keep the process alive (issue 14, defect 10).

The script opens a hub on a SQLite file, posts, and crashes before ``hub.close()``; run in a real
subprocess, it must exit (with the crash's status) within the timeout instead of hanging at
interpreter shutdown on a store thread. Both writer modes are covered (``thread`` runs batches on a
writer thread).
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from ag2net import HubClient, Passport
    from ag2net.hub import Hub
    from ag2net.store import SqliteStore

    async def main(path, writer):
        hub = await Hub.open(SqliteStore(path, writer=writer))
        client = HubClient.local(hub)
        alice = await client.register_human(Passport(name="alice", kind="human"))
        await client.register_human(Passport(name="bob", kind="human"))
        channel = await alice.open(type="conversation", target="bob")
        await channel.send("hello")
        assert [e.event_data.get("text") for e in await hub.read_wal(channel.channel_id)].count("hello") == 1
        raise RuntimeError("crash before hub.close()")

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.parametrize("writer", ["inline", "thread"])
def test_a_script_that_never_closes_its_sqlite_hub_exits(tmp_path, writer):
    try:
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(tmp_path / "hub.db"), writer],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"the process did not exit within 30 s after the crash (stderr: {exc.stderr!r})")
    assert done.returncode == 1, done.stderr
    assert "RuntimeError: crash before hub.close()" in done.stderr
    # what was acknowledged before the crash is in the file
    with sqlite3.connect(tmp_path / "hub.db") as db:
        texts = [row[0] for row in db.execute("SELECT envelope FROM wal")]
    assert sum('"hello"' in text for text in texts) == 1

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


# --- a remote HubClient left open (issue 21, item 4) ---------------------------------------------------

REMOTE_SCRIPT = textwrap.dedent(
    """
    import asyncio, sys
    from ag2net import HubClient, Passport

    async def main(url, wait):
        client = HubClient.connect(url, identity_secrets=False)
        alice = await client.register_human(Passport(name=f"alice-{wait}", kind="human"))
        await client.register_human(Passport(name=f"bob-{wait}", kind="human"))
        channel = await alice.open(type="conversation", target=f"bob-{wait}")
        await channel.send("hello")
        print("main returns" if wait == "return" else "waiting", flush=True)
        if wait != "return":
            await asyncio.Event().wait()  # until Ctrl-C

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.fixture(scope="module")
def served_hub():
    """A real ``ag2net serve`` (in memory) on a free loopback port."""
    import os
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AG2NET_")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ag2net.cli", "serve", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "listening on" in line, line
    yield f"ws://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(10)


def _start_script(url: str, wait: str) -> tuple[subprocess.Popen[str], float]:
    """Run REMOTE_SCRIPT; return it and the time it said it got where ``wait`` says."""
    import time

    proc = subprocess.Popen(
        [sys.executable, "-c", REMOTE_SCRIPT, url, wait],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    at = time.monotonic()
    if not line:
        proc.wait(10)
        pytest.fail(f"the script stopped before connecting: {proc.stderr.read() if proc.stderr else ''}")
    return proc, at


def _exit_within(proc: subprocess.Popen[str], since: float, limit: float, what: str) -> int:
    import time

    try:
        code = proc.wait(timeout=max(limit * 5, 10))
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        pytest.fail(f"the process still ran {max(limit * 5, 10):.0f} s after {what} (hung); stderr: {err!r}")
    took = time.monotonic() - since
    print(f"\nexited {took:.2f} s after {what}")
    assert took < limit, f"the process exited {took:.2f} s after {what}, more than {limit} s"
    return code


def test_a_script_that_never_closes_its_remote_client_exits_when_main_returns(served_hub):
    proc, returned_at = _start_script(served_hub, "return")
    code = _exit_within(proc, returned_at, 2.0, "its main coroutine returned")
    assert code == 0, proc.stderr.read() if proc.stderr else ""


def test_ctrl_c_ends_a_script_whose_remote_client_is_open(served_hub):
    import signal

    proc, _ = _start_script(served_hub, "forever")
    import time

    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    code = _exit_within(proc, sent, 2.0, "SIGINT")
    assert code in (-signal.SIGINT, 1, 130), code  # KeyboardInterrupt ends it

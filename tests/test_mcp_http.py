"""``ag2net mcp`` over streamable HTTP (a real subprocess on a real socket on 127.0.0.1) and on a running hub
(``--connect`` to ``serve_ws`` with the workbench's tokens): the SDK's own client lists the tools, calls them,
pages, is refused in one sentence; a request without the ``--http-token`` is answered 401; ``post`` posts as
the workbench's human only with ``--allow-post``."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_mcp import every_tool
from test_mcp_support import ROOT, answer, demo_db, env, refusal, stdio_session

from ag2net import Hub, HubClient

pytest.importorskip("mcp", reason="needs the 'mcp' extra")
import httpx2  # the SDK's own HTTP client
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

__all__ = ["demo_db"]  # the fixture, imported


@contextlib.contextmanager
def http_server(*args: str) -> Iterator[str]:
    """``ag2net mcp ARGS --http 127.0.0.1:0`` as a subprocess; yields its URL, stops it with SIGTERM."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "ag2net.mcp.cli", *args, "--http", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env(),
        cwd=str(ROOT),
    )
    try:
        assert proc.stderr is not None
        line = ""
        deadline = time.monotonic() + 60
        while "http://" not in line and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the server ended before it listened"
        assert line.startswith("ag2net mcp: streamable HTTP at http://127.0.0.1:"), line
        yield line.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err


@contextlib.asynccontextmanager
async def http_session(url: str, token: str | None = None) -> AsyncIterator[Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120) as client,
    ):
        yield client


async def test_over_http_with_a_token_the_tools_answer_and_page(demo_db):
    db, steps = demo_db
    pairing = f"conversation·{steps['pairing'][-4:]}"
    with http_server("--db", str(db), "--http-token", "s3cret") as url:
        async with http_session(url, "s3cret") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            first = await answer(client, "read_wal", {"channel": pairing, "limit": 8})
            rest = await answer(
                client, "read_wal", {"channel": pairing, "limit": 8, "cursor": first["next_cursor"]}
            )
            turns = await answer(client, "turns", {"channel": pairing, "participant": "critic", "turn": 3})
            vis = await answer(client, "visibility", {"channel": pairing, "from_seq": 9, "limit": 1})
            sentence = await refusal(client, "post", {"channel": pairing, "text": "hi"})
            await every_tool(client, steps)
        async with httpx2.AsyncClient() as bare:
            unauthorized = await bare.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            wrong = await bare.post(url, json={}, headers={"Authorization": "Bearer nope"})
    assert names[0] == "list_channels" and "post" not in names
    assert [e["seq"] for e in first["envelopes"] + rest["envelopes"]] == list(range(1, 17))
    assert turns["turns"][0]["turn"] == 3 and turns["turns"][0]["reply"].startswith(
        "On “the server acknowledges"
    )
    assert vis["rows"][0]["cells"]["coder"]["delivered"] is True
    assert sentence.startswith("post is off: this server is read-only")
    assert unauthorized.status_code == 401 and wrong.status_code == 401
    assert "--http-token" in unauthorized.json()["error"]


async def test_over_http_on_loopback_no_token_is_needed(demo_db):
    db, _ = demo_db
    with http_server("--db", str(db)) as url:
        async with http_session(url) as client:
            channels = await answer(client, "list_channels", {"limit": 3})
    assert len(channels["channels"]) == 3 and channels["next_cursor"]


@contextlib.asynccontextmanager
async def served_hub(db: Path, tmp_path: Path) -> AsyncIterator[tuple[Hub, str]]:
    """A hub on a copy of the demo database, served on a WebSocket with an API key and an operator token."""
    from ag2net.server import serve_ws

    copy = tmp_path / "served.db"
    shutil.copy(db, copy)
    hub = await Hub.open(str(copy), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5)
    try:
        async with serve_ws(hub, "127.0.0.1", 0, token="hubkey", operator_token="optok") as server:
            yield hub, server.url()
    finally:
        await hub.close()


async def test_on_a_running_hub_with_the_workbench_tokens_and_allow_post(demo_db, tmp_path, monkeypatch):
    db, steps = demo_db
    pairing = f"conversation·{steps['pairing'][-4:]}"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))  # the identity secrets of the subprocess
    monkeypatch.setenv("AG2NET_TOKEN", "hubkey")
    async with served_hub(db, tmp_path) as (hub, url):
        # without the operator token this connection sees only its own channels: the refusal says so
        async with stdio_session("--connect", url) as client:
            sentence = await refusal(client, "read_wal", {"channel": pairing})
        assert sentence.endswith("so start ag2net mcp with --operator-token (or AG2NET_OPERATOR_TOKEN)")
        monkeypatch.setenv("AG2NET_OPERATOR_TOKEN", "optok")
        async with stdio_session("--connect", url, "--allow-post", "--as", "dana") as client:
            names = [t.name for t in (await client.list_tools()).tools]
            wal = await answer(client, "read_wal", {"channel": pairing, "limit": 3})
            turns = await answer(client, "turns", {"channel": pairing, "participant": "critic", "limit": 1})
            state = await answer(client, "state_at", {"channel": pairing, "seq": 9})
            vis = await answer(client, "visibility", {"channel": pairing, "from_seq": 5, "limit": 1})
            same = await answer(client, "replay", {"channel": pairing, "at_seq": 1})
            closed = await refusal(client, "post", {"channel": pairing, "text": "hi"})
            # dana is registered now (through the server): ana invites her, and she posts there
            hc = HubClient.local(hub)
            ana = await hc.attach_human("ana")
            channel = await ana.open(type="conversation", target="dana")
            label = f"conversation·{channel.channel_id[-4:]}"
            posted = await answer(client, "post", {"channel": label, "text": "posted from a coding agent"})
            await hc.close()
        wal_now = await hub.read_wal(channel.channel_id)
        dana = hub.find_agent_id("dana")
    assert names[-1] == "post"
    assert wal["wal_count"] == 20 and turns["turns_total"] == 8
    assert state["sender"] == "critic" and vis["rows"][0]["seq"] == 5
    assert same["identical"] is True
    assert closed.startswith(f"post: dana cannot post to {pairing}")
    assert posted["posted_as"] == "dana" and posted["envelope"]["sender"] == "dana"
    assert wal_now[-1].event_data["text"] == "posted from a coding agent"
    assert wal_now[-1].sender_id == dana


def test_http_refuses_a_port_in_use(demo_db):
    db, _ = demo_db
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "ag2net.mcp.cli", "--db", str(db), "--http", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env(),
            cwd=str(ROOT),
            check=False,
        )
    assert done.returncode == 2, done
    lines = [ln for ln in done.stderr.splitlines() if ln.strip() and not ln.startswith("ERROR:")]
    assert lines == [
        f"Error: --http 127.0.0.1:{port}: cannot listen there (Address already in use); choose another port or address"
    ]
    assert "Traceback" not in done.stderr

"""Shared by the ``ag2net mcp`` tests (no tests here): a demo database with one long channel, the server
started as a real subprocess and reached with the SDK's own client over stdio, and the checks of a refusal."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ag2net import Hub, HubClient
from ag2net.demo import start_demo
from ag2net.identity import Passport
from ag2net.store import SqliteStore

pytest.importorskip("mcp", reason="needs the 'mcp' extra")

from mcp import Client, StdioServerParameters

ROOT = Path(__file__).resolve().parents[1]
LONG = 1200
"""Texts the long channel holds (after its invite, ack and opening)."""


async def make_demo_db(db: Path) -> dict[str, str]:
    """The demo network run once into ``db``, plus ana and ben's conversation of ``LONG`` texts;
    channel id → what it was opened for."""
    hub = await Hub.open(
        SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    hc = HubClient.local(hub)
    try:
        demo = await start_demo(hc)
        await asyncio.wait_for(demo.run(), timeout=30)
        await demo.close()
        steps = {cid: step for cid, step in demo.steps.items()}
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        channel = await ana.open(type="conversation", target="ben")
        for n in range(LONG):
            await ana.send(channel.channel_id, f"message {n} " + "x" * 200)
        steps[channel.channel_id] = "long"
        return steps
    finally:
        await hc.close()
        await hub.close()


@pytest.fixture(scope="session")
def demo_db(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("mcp") / "demo.db"
    steps = asyncio.run(make_demo_db(db))
    return db, {step: cid for cid, step in steps.items()}


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "120"}


def server_params(*args: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "ag2net.mcp.cli", *args], env=env(), cwd=str(ROOT)
    )


@contextlib.asynccontextmanager
async def stdio_session(*args: str) -> AsyncIterator[Any]:
    """The SDK's ``Client`` on ``ag2net mcp ARGS`` started as a subprocess over stdio."""
    async with Client(server_params(*args), read_timeout_seconds=120) as client:
        yield client


async def answer(client: Any, tool: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON answer of a tool call that must succeed."""
    result = await client.call_tool(tool, arguments or {})
    text = result.content[0].text
    assert not result.is_error, f"{tool} {arguments}: {text}"
    data = json.loads(text)
    assert result.structured_content == data
    return data


async def refusal(client: Any, tool: str, arguments: dict[str, Any] | None = None) -> str:
    """The one sentence of a tool call that must be refused."""
    result = await client.call_tool(tool, arguments or {})
    assert result.is_error, f"{tool} {arguments} was not refused: {result.content[0].text[:200]}"
    [content] = result.content
    sentence = content.text
    assert "\n" not in sentence and "Traceback" not in sentence, sentence
    assert "; " in sentence or " one of " in sentence, (
        f"names no fix: {sentence}"
    )  # what is wrong; what to do
    assert not sentence.endswith("."), sentence
    return sentence


def run_cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ag2net.mcp.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env(),
        cwd=str(ROOT),
        check=False,
    )


def one_sentence(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr + done.stdout
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: ") and done.stdout == ""
    return lines[0]


def fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    return (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(os.listdir(path.parent)),
    )

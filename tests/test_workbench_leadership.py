"""A workbench embedding its hub on PostgreSQL (``ag2net tui --db postgresql://…``) takes part in the
database's leadership as ``ag2net serve`` does: it refuses to start while another hub holds the lock (one
sentence naming ``--connect``, exit 2, no waiting); while it holds the lock a served hub stands by and takes
over when the workbench quits; and if it loses the lock it writes nothing more and says so.

A throwaway PostgreSQL server (tests/pg_server.py); skipped with the reason only when it cannot be had.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from pg_server import DATABASE
from support import until
from test_failover import HubProcess, client, free_port, wait_for

from ag2net import Passport
from ag2net.errors import NetworkError
from ag2net.server.leadership import Leadership, lock_key
from ag2net.store.postgres import redact_url
from tui import launch as launch_module
from tui.app import WorkbenchApp
from tui.settings import Settings

HUB_OPTIONS: dict[str, Any] = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0}


@pytest.fixture
async def url(pg_server) -> str:
    return await pg_server.fresh_url()


def tui_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AG2NET_")}


async def wal_texts(url: str) -> list[str]:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT envelope FROM wal ORDER BY channel_id, seq")
    finally:
        await conn.close()
    return [r[0] for r in rows]


async def launch(url: str, drive, monkeypatch: pytest.MonkeyPatch, taken: list | None = None) -> None:
    """``ag2net tui --db URL --as ana`` in this process, the app driven by ``drive(app, pilot)``; the hub and
    the ``Leadership`` it took are appended to ``taken``."""

    async def run_async(app: WorkbenchApp) -> None:
        async with app.run_test(size=(140, 40)) as pilot:
            await until(lambda: app.ready)
            await drive(app, pilot)

    monkeypatch.setattr(WorkbenchApp, "run_async", run_async)

    async def open_hub(path):
        raise AssertionError("a postgresql:// URL is opened through the leadership, not open_hub")

    async def run_network(func, hub):
        return await func(hub)

    await launch_module.launch(
        settings=Settings(),
        db_path=url,
        human_name="ana",
        start_demo=False,
        network=None,
        connect=None,
        token=None,
        operator_token=None,
        open_hub=open_hub,
        run_network=run_network,
        lead=lambda u: lead(u, taken if taken is not None else []),
    )


async def lead(url: str, taken: list) -> tuple[Any, Any]:
    hub, leadership = await launch_module.take_leadership(url, **HUB_OPTIONS)
    taken.append((hub, leadership))
    return hub, leadership


async def test_the_workbench_refuses_to_embed_a_hub_while_a_serving_hub_holds_the_lock(pg_server, url):
    serving = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None)
    hub = await serving.take(**HUB_OPTIONS)
    try:
        started = time.monotonic()
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tui.cli", "--db", url, "--as", "ana"],
            capture_output=True,
            text=True,
            timeout=60,
            env=tui_env(),
            check=False,
        )
        took = time.monotonic() - started
        assert not serving.lost.is_set()
        assert await hub.store.append("c-check", "e-check", "{}") == 1  # still the one writer
    finally:
        await serving.close(hub)
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "another hub holds the leadership" in lines[0] and "--connect ws://" in lines[0]
    assert f"pid {os.getpid()} port 0" in lines[0]  # the holder, as its leader row records it
    assert pg_server.password not in lines[0]
    assert took < 30, f"the refusal took {took:.1f} s"  # it asked once; it did not stand by


async def test_a_served_hub_stands_by_while_the_workbench_holds_the_lock_and_takes_over_when_it_quits(
    pg_server, url, monkeypatch
):
    seen: dict[str, object] = {}
    standby: list[HubProcess] = []

    async def drive(app: WorkbenchApp, pilot: Any) -> None:
        hc, human = app.source.hc, app.source.human
        bo = await hc.register_human(Passport(name="bo", kind="human"))
        channel = await human.open(type="conversation", target=bo.agent_id)
        await human.send(channel.channel_id, "written while the workbench leads")
        seen["channel"] = channel.channel_id
        # A second workbench on the same database is refused: one writer.
        second = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "tui.cli", "--db", url, "--as", "bo"],
            capture_output=True,
            text=True,
            timeout=60,
            env=tui_env(),
            check=False,
        )
        seen["second"] = second
        hub = HubProcess(url, free_port())
        standby.append(hub)
        await wait_for(hub, "standing by")
        await asyncio.sleep(1.0)  # it keeps asking for the lock; the workbench still admits
        await human.send(channel.channel_id, "still the workbench's")
        assert not any("listening on" in text for _, text in hub.lines), hub.output()

    try:
        await launch(url, drive, monkeypatch)
        quit_at = time.monotonic()
        (hub,) = standby
        listening_at = await wait_for(hub, "listening on", timeout=20)
        takeover = listening_at - quit_at
        print(f"\nserve took over {takeover:.2f} s after the workbench quit")
        assert takeover < 10
        second = seen["second"]
        assert isinstance(second, subprocess.CompletedProcess) and second.returncode == 2, second
        lines = [line for line in second.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and f"pid {os.getpid()} embedded in ag2net tui" in lines[0], second.stderr
        assert "quit that workbench" in lines[0] and "--connect" in lines[0]
        # The hub that took over hydrated what the workbench wrote, and admits.
        hc = client(hub.url)
        try:
            await hc.open()
            bo = await hc.register_or_attach_human("bo")
            await bo.send(str(seen["channel"]), "admitted by the hub that took over")
        finally:
            await hc.close()
        texts = "\n".join(await wal_texts(url))
        assert "written while the workbench leads" in texts and "still the workbench's" in texts
        assert "admitted by the hub that took over" in texts
    finally:
        for hub in standby:
            hub.stop()


async def test_a_workbench_that_loses_the_lock_writes_nothing_more_and_says_so(pg_server, url, monkeypatch):
    import asyncpg

    schema = parse_qs(urlsplit(url).query)["search_path"][0]
    key = lock_key(DATABASE, schema) & 0xFFFFFFFFFFFFFFFF
    seen: dict[str, Any] = {}
    taken: list[tuple[Any, Any]] = []
    successor = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None)

    async def drive(app: WorkbenchApp, pilot: Any) -> None:
        hc, human = app.source.hc, app.source.human
        bo = await hc.register_human(Passport(name="bo", kind="human"))
        channel = await human.open(type="conversation", target=bo.agent_id)
        await human.send(channel.channel_id, "before the loss")
        taking = asyncio.ensure_future(successor.take(**HUB_OPTIONS))
        await asyncio.sleep(0.5)
        assert not taking.done()  # the workbench holds the lock: the successor stands by
        conn = await asyncpg.connect(url)
        try:  # the workbench's lock session ends (its connection is cut), as when its network fails
            ended = await conn.fetchval(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' "
                "AND granted AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1",
                key >> 32,
                key & 0xFFFFFFFF,
            )
        finally:
            await conn.close()
        assert ended == 1
        seen["hub"] = await asyncio.wait_for(taking, 20)
        messages = lambda: [n.message for n in app._notifications]  # noqa: E731
        await until(lambda: any("lost the leadership" in m for m in messages()))
        seen["notification"] = next(m for m in messages() if "lost the leadership" in m)
        assert "lost the leadership" in str(app.status.connection)
        # The person posts into the channel: the chat line says what happened and what to do.
        await until(lambda: channel.channel_id in app.source.metadata)
        app.channel_list.select(channel.channel_id)
        await pilot.pause()
        await pilot.press("i", *"after the loss", "enter")
        await until(lambda: bool(app.chat.reason))
        seen["chat"] = app.chat.reason
        seen["kept"] = app.chat.input.value
        with pytest.raises(NetworkError) as refused:  # the library's caller hears the same sentence
            await human.send(channel.channel_id, "after the loss, again")
        seen["library"] = str(refused.value)
        # The store stays open for reading: what was stored is still read back from the database.
        ((_, leadership),) = taken
        seen["read"] = await leadership.store.read_wal(channel.channel_id)
        await asyncio.sleep(0.5)  # the feed's next health check reads the database
        seen["running"] = app.is_running  # said so, did not crash

    try:
        await launch(url, drive, monkeypatch, taken)
        hub = seen["hub"]
        where = redact_url(url)
        assert pg_server.password in url and pg_server.password not in where
        sentence = (
            f"this workbench lost the leadership of {where}: it is read-only now and did not save this; "
            "attach to the hub that serves the database with --connect ws://HOST:PORT"
        )
        assert seen["chat"] == sentence, seen["chat"]
        assert seen["kept"] == "after the loss"  # the text stays in the input
        assert seen["library"] == sentence
        notification = seen["notification"]
        assert notification.startswith(f"This workbench lost the leadership of {where} (its lock session ")
        assert "read-only now" in notification and "--connect ws://HOST:PORT" in notification
        for said in (seen["chat"], notification):
            assert pg_server.password not in said and "not open" not in said
        assert any("before the loss" in text for text in seen["read"])
        texts = "\n".join(await wal_texts(url))
        assert "before the loss" in texts and "after the loss" not in texts
        assert seen["running"] is True
        # The successor is the one writer.
        assert await hub.store.append("c-next", "e-next", "{}") == 1
    finally:
        await successor.close(seen.get("hub"))


async def test_ag2net_web_on_postgres_refuses_beside_a_serving_hub_and_otherwise_holds_the_lock(
    pg_server, url
):
    pytest.importorskip("textual_serve")
    web = [sys.executable, "-m", "ag2net.cli", "web", "--db", url, "--port", "0", "--as", "ana"]
    serving = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None)
    hub = await serving.take(**HUB_OPTIONS)
    try:
        refused = await asyncio.to_thread(
            subprocess.run, web, capture_output=True, text=True, timeout=60, env=tui_env(), check=False
        )
    finally:
        await serving.close(hub)
    assert refused.returncode == 2, refused
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert "another hub holds the leadership" in lines[0] and "--connect ws://" in lines[0]
    # With the lock free, the web command's embedded hub takes it: a served hub stands by until it stops.
    proc = subprocess.Popen(web, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tui_env())
    successor = Leadership(url, "127.0.0.1", 0, echo=lambda _line: None)
    taking = None
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        if "open http://" not in line:
            proc.kill()
            raise AssertionError(f"ag2net web did not start: {line}{proc.stderr.read()}")
        taking = asyncio.ensure_future(successor.take(**HUB_OPTIONS))
        await asyncio.sleep(1.0)
        assert not taking.done(), "a second hub took the lock the web command's embedded hub holds"
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(proc.wait, 30) == 0
        stopped_at = time.monotonic()
        successor_hub = await asyncio.wait_for(taking, 10)
        print(f"\nthe standby took the lock {time.monotonic() - stopped_at:.2f} s after ag2net web stopped")
        await successor.close(successor_hub)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if taking is not None and not taking.done():
            taking.cancel()
            await successor.close()

"""Across processes: a hub server killed with SIGKILL mid-stream and restarted on the same database and port
(clients reconnect, replay fills the gap, nothing lost or duplicated), and ``delegate`` to an agent that
lives in another process."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from pathlib import Path

from support import until

from ag2net import EV_TEXT, Agent, HubClient, NetworkError, Passport, ScriptedModel, tool_call
from ag2net.events import ToolResultEvent
from ag2net.hub import Hub
from ag2net.server import serve_ws

HELPERS = Path(__file__).parent / "ws_helpers"


async def spawn(script: str, *args: str) -> tuple[asyncio.subprocess.Process, str]:
    """Start a helper script; returns it with the value it printed after ``READY``."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(HELPERS / script), *args, stdout=asyncio.subprocess.PIPE
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 20)
    except BaseException:
        proc.kill()
        await proc.wait()
        raise
    assert line.startswith(b"READY "), line
    return proc, line.split()[1].decode()


async def stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is None:
        proc.kill()
    await proc.wait()


async def test_server_killed_mid_stream_loses_and_duplicates_nothing(tmp_path):
    db = str(tmp_path / "hub.db")
    server, port = await spawn("serve_hub.py", "--db", db)
    url = f"ws://127.0.0.1:{port}"
    fast = {"rpc_timeout": 20, "reconnect_initial_delay": 0.02, "reconnect_max_delay": 0.2}
    tx, rx = HubClient.connect(url, **fast), HubClient.connect(url, **fast)
    try:
        ana = await tx.register_human(Passport(name="ana", kind="human"))
        ben = await rx.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")
        received: list[str] = []

        async def keep(env):
            if env.event_type == EV_TEXT:
                received.append(env.envelope_id)

        ben.on_envelope(keep)
        confirmed: list[str] = []
        failures = 0

        async def pump(n: int) -> None:
            nonlocal failures
            i = 0
            while i < n:
                try:
                    confirmed.append(await ana.send(ch.channel_id, f"m{i}"))
                except NetworkError:
                    failures += 1  # lost with the connection: it may or may not have been admitted
                    continue
                i += 1

        pumping = asyncio.create_task(pump(400))
        await until(lambda: len(received) >= 100)
        # The receiver comes back only after the sender posted more: that part reaches it by replay.
        rx.link.url = "ws://127.0.0.1:1"
        server.send_signal(signal.SIGKILL)
        await server.wait()
        await asyncio.sleep(0.3)
        server, again = await spawn("serve_hub.py", "--db", db, "--port", port)
        assert again == port
        at_restart = len(confirmed)
        await until(lambda: len(confirmed) >= at_restart + 50)
        posted_while_away = len(confirmed) - len(received)
        rx.link.url = url
        await asyncio.wait_for(pumping, 30)
        wal = [e.envelope_id for e in await rx.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
        await until(lambda: len(received) >= len(wal))
        await asyncio.sleep(0.1)
        assert received == wal  # every admitted envelope, in order, once
        assert set(confirmed) <= set(wal)  # nothing acknowledged to the sender was lost
        assert len(wal) >= 400
        assert tx.link.reconnects >= 1 and rx.link.reconnects >= 1
        assert posted_while_away >= 50  # the receiver really missed those
    finally:
        await tx.close()
        await rx.close()
        await stop(server)


async def test_delegate_to_an_agent_in_another_process():
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=10)
    carol = None
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            carol, carol_id = await spawn("remote_agent.py", server.url(), "carol", "42")

            def relay(call) -> str:
                results = [e for e in call.history if isinstance(e, ToolResultEvent)]
                return "carol says: " + results[-1].result

            here = HubClient.connect(server.url(), rpc_timeout=15)
            bob = await here.register(
                Agent(
                    "bob",
                    ScriptedModel(tool_call("delegate", target="carol", prompt="six times seven?"), relay),
                )
            )
            alice = await here.register_human(Passport(name="alice", kind="human"))
            ch = await alice.open(type="consulting", target="bob")
            await alice.send(ch.channel_id, "ask carol for me")
            answer = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=15)
            assert answer.event_data == {"text": "carol says: 42"}
            assert answer.sender_id == bob.agent_id
            [sub] = hub.query_channels(agent_id=carol_id, include_terminal=True)
            assert sub.close_reason == "consulting_complete"
            texts = [e for e in await hub.read_wal(sub.channel_id) if e.event_type == EV_TEXT]
            assert [(e.sender_id, e.event_data["text"]) for e in texts] == [
                (bob.agent_id, "six times seven?"),
                (carol_id, "42"),
            ]
            assert texts[0].depth == 1
            [turn] = await here.list_turns(channel_id=ch.channel_id)
            assert turn.tool_calls[0]["name"] == "delegate" and turn.tool_calls[0]["result"] == "42"
            await here.close()
    finally:
        if carol is not None:
            with contextlib.suppress(ProcessLookupError):
                carol.send_signal(signal.SIGTERM)
            await stop(carol)
        await hub.close()

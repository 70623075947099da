"""Clients given several hub URLs (an active hub and its standbys), on real sockets in one process: a
``StandbyListener`` (what a standby ``ag2net serve`` answers with) and ``serve_ws``. The client skips a
standby and a closed port, says which when none admits, and after a drop reconnects to whichever hub
admits then, re-attaching its identities and replaying what it missed. No PostgreSQL needed: the
processes and the database are in test_failover.py."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from typing import Any

import pytest
from support import until
from websockets.asyncio.client import connect as ws_connect

from ag2net import EV_TEXT, HubClient, Passport
from ag2net.errors import StandbyError, error_from_code
from ag2net.server import serve_ws
from ag2net.server.leadership import StandbyListener
from ag2net.transport.ws import ConnectionLostError, split_urls


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


pytestmark = pytest.mark.hub(store="memory")


@pytest.fixture
async def standby():
    listener = StandbyListener("this hub is the standby of postgresql://db/x: another hub holds it")
    port = await listener.start("127.0.0.1", 0)
    yield listener, f"ws://127.0.0.1:{port}"
    await listener.stop()


def connect(url, **kwargs) -> HubClient:
    return HubClient.connect(url, identity_secrets=False, **kwargs)


def test_urls_are_one_a_list_or_comma_separated():
    assert split_urls("ws://a:1") == ["ws://a:1"]
    assert split_urls("ws://a:1, ws://b:2,") == ["ws://a:1", "ws://b:2"]
    assert split_urls(["ws://a:1", "ws://b:2,ws://a:1"]) == ["ws://a:1", "ws://b:2"]
    with pytest.raises(ValueError, match="no hub URL"):
        split_urls(" , ")
    assert error_from_code("standby", "x").__class__ is StandbyError


async def test_the_standby_answers_every_op_and_hello_with_the_standby_code(standby):
    listener, url = standby
    async with ws_connect(url) as ws:
        assert ws.response is not None and ws.response.headers["X-Ag2net-Role"] == "standby"
        for op in ("register", "post_envelope", "health"):
            await ws.send(json.dumps({"kind": "request", "request_id": op, "op": op, "params": {}}))
            answer = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert (answer["request_id"], answer["ok"], answer["error_code"]) == (op, False, "standby")
            assert "standby" in answer["error_message"]
        await ws.send(json.dumps({"kind": "hello", "name": "ana", "auth_scheme": "none", "auth_claim": {}}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5))["code"] == "standby"
        await ws.send(json.dumps({"kind": "ping"}))
        assert json.loads(await asyncio.wait_for(ws.recv(), 5)) == {"kind": "pong"}
    assert listener.answered == 4


async def test_a_client_skips_a_standby_and_a_closed_port(hub, standby):
    _, standby_url = standby
    closed = f"ws://127.0.0.1:{free_port()}"
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        hc = connect(f"{closed},{standby_url},{srv.url()}")
        try:
            ana = await hc.register_human(Passport(name="ana", kind="human"))
            assert hc.connection_state()["url"] == srv.url()
            assert ana.agent_id in hub.identities.agents
        finally:
            await hc.close()


async def test_one_standby_url_is_refused_in_one_sentence(standby):
    _, url = standby
    with pytest.raises(StandbyError, match=r"is a standby: another hub on its database admits") as caught:
        await connect(url).open()
    assert "\n" not in str(caught.value)


async def test_when_no_hub_admits_the_client_says_what_each_answered(standby):
    _, standby_url = standby
    closed = f"ws://127.0.0.1:{free_port()}"
    with pytest.raises(StandbyError, match=r"no hub of .* admits now") as caught:
        await connect([closed, standby_url], open_timeout=0.5).open()
    assert f"{standby_url} is a standby" in str(caught.value) and closed in str(caught.value)
    other = f"ws://127.0.0.1:{free_port()}"
    with pytest.raises(ConnectionLostError, match="cannot connect to any of") as refused:
        await connect([closed, other]).open()
    assert closed in str(refused.value) and other in str(refused.value)


async def test_after_a_drop_the_client_moves_to_the_hub_that_admits_then_and_replays(hub):
    """The active stops; the standby on the other port takes over (here: the same hub served there)."""
    port_a, port_b = free_port(), free_port()
    url_a, url_b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
    listener = StandbyListener("standby")
    await listener.start("127.0.0.1", port_b)
    local = HubClient.local(hub)
    bo = await local.register_human(Passport(name="bo", kind="human"))
    hc = connect([url_a, url_b], reconnect_initial_delay=0.02, reconnect_max_delay=0.2)
    got: list = []
    try:
        async with serve_ws(hub, "127.0.0.1", port_a):
            ana = await hc.register_human(Passport(name="ana", kind="human"))
            ana.on_envelope(lambda env: _append(got, env))
            channel = await bo.open(type="conversation", target="ana")
            await bo.send(channel.channel_id, "one")
            await until(lambda: _texts(got) == ["one"])
        # The active is gone and the other answers standby: nothing admits; a post meanwhile waits.
        await bo.send(channel.channel_id, "two")
        await asyncio.sleep(0.3)
        assert not hc.connection_state()["connected"]
        await listener.stop()
        async with serve_ws(hub, "127.0.0.1", port_b):
            await until(lambda: "two" in _texts(got))
            # at least once: a delivery may come again after the move; by envelope id it came once each
            unique = {e.envelope_id: e for e in got if e.event_type == EV_TEXT}
            assert [e.event_data.get("text") for e in unique.values()] == ["one", "two"]
            assert hc.connection_state()["url"] == url_b
            await ana.send(channel.channel_id, "three")  # the identity was re-attached on the new hub
            assert "three" in [e.event_data.get("text") for e in await local.read_wal(channel.channel_id)]
    finally:
        await hc.close()


async def _append(got: list, env) -> None:
    got.append(env)


def _texts(got: list) -> list[str]:
    return [e.event_data.get("text") for e in got if e.event_type == EV_TEXT]


def test_tui_connect_takes_several_urls_and_names_a_bad_one():
    bad = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "tui", "--connect", "ws://127.0.0.1:1,http://x"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    lines = [line for line in bad.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "several separated by commas" in lines[0]


PROXY = """
import asyncio, sys

async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()

async def main(listen, target):
    async def handle(reader, writer):
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("forwarding", flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main(int(sys.argv[1]), int(sys.argv[2])))
"""


async def test_a_hub_that_stops_answering_is_left_for_the_one_that_admits(hub):
    """The active's process freezes (SIGSTOP of a real process in front of it: its kernel keeps the TCP
    connection and accepts new ones, nothing answers). The client's ping deadline counts the connection
    as lost and it moves to the hub that admits then, although the frozen one never closes anything."""
    import signal
    import time

    port_hub, port_a, port_b = free_port(), free_port(), free_port()
    url_a, url_b = f"ws://127.0.0.1:{port_a}", f"ws://127.0.0.1:{port_b}"
    proxy = subprocess.Popen(
        [sys.executable, "-c", PROXY, str(port_a), str(port_hub)], stdout=subprocess.PIPE, text=True
    )
    listener = StandbyListener("standby")
    await listener.start("127.0.0.1", port_b)
    local = HubClient.local(hub)
    bo = await local.register_human(Passport(name="bo", kind="human"))
    hc = connect([url_a, url_b], ping_deadline=1.0, reconnect_initial_delay=0.02)
    got: list = []
    try:
        assert proxy.stdout is not None and "forwarding" in await asyncio.to_thread(proxy.stdout.readline)
        async with serve_ws(hub, "127.0.0.1", port_hub):
            ana = await hc.register_human(Passport(name="ana", kind="human"))
            ana.on_envelope(lambda env: _append(got, env))
            assert hc.connection_state()["url"] == url_a
            channel = await bo.open(type="conversation", target="ana")
            await bo.send(channel.channel_id, "one")
            await until(lambda: _texts(got) == ["one"])
            proxy.send_signal(signal.SIGSTOP)
            frozen_at = time.monotonic()
            await listener.stop()
            async with serve_ws(hub, "127.0.0.1", port_b):
                await bo.send(channel.channel_id, "two")
                await until(lambda: "two" in _texts(got), timeout=15)
                moved = time.monotonic() - frozen_at
                print(
                    f"\nthe client moved off the frozen hub {moved:.2f} s after it froze (ping deadline 1 s)"
                )
                assert hc.connection_state()["url"] == url_b
                await ana.send(channel.channel_id, "three")
                assert "three" in [e.event_data.get("text") for e in await local.read_wal(channel.channel_id)]
                assert moved < 6.0  # the deadline and one reconnect (websockets' own keepalive: ~50 s)
    finally:
        await hc.close()
        proxy.send_signal(signal.SIGCONT)
        proxy.kill()
        proxy.wait(10)


def test_a_bad_ping_deadline_is_one_sentence():
    from ag2net.transport.ws import WsLinkClient

    bad: Any
    for bad in (0, -1, "3", True):
        with pytest.raises(ValueError, match=r"^ping_deadline must be a number of seconds more than 0") as e:
            WsLinkClient("ws://127.0.0.1:1", ping_deadline=bad)
        assert "\n" not in str(e.value)

"""Hostile and careless clients on real sockets (127.0.0.1): a peer that never reads, connection floods,
oversized skills and resumes, unauthenticated sockets on a token server, and frames nested too deep.
Each costs the server a bounded amount and never disturbs a well-behaved client (issue 9, items 7, 8, 11)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import socket
import subprocess
import sys
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import until
from typer.testing import CliRunner
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from ag2net import EV_TEXT, Envelope, HubClient, Passport, ProtocolError, Resume
from ag2net.cli import app
from ag2net.protocol.frames import MAX_JSON_DEPTH, frame_from_json, nesting_exceeds
from ag2net.server import MAX_INFLIGHT_REQUESTS, MAX_RESUME_BYTES, MAX_SKILL_BYTES, serve_ws
from ag2net.transport.ws import ConnectionLostError

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

TOKEN = "hardening-token"
CARD = "# card\n" + "lorem ipsum " * (900 * 1024 // 12)  # ~900 KB


pytestmark = pytest.mark.hub(store="memory")


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    """Identity secrets go to a temporary data folder, never the real home."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


# --- a WebSocket opened by hand, so the test decides when (if ever) it reads -------------------------------


def ws_frame(payload: bytes, opcode: int = 1) -> bytes:
    header = bytearray([0x80 | opcode])
    size = len(payload)
    if size < 126:
        header.append(0x80 | size)
    elif size < 65536:
        header += bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        header += bytes([0x80 | 127]) + size.to_bytes(8, "big")
    mask = os.urandom(4)
    return bytes(header) + mask + apply_mask(payload, mask)


async def non_reader(url: str) -> socket.socket:
    """A socket that completes the handshake, then never reads again (tiny receive buffer)."""
    host, port = url.removeprefix("ws://").rsplit(":", 1)
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await loop.sock_connect(sock, (host, int(port)))
    key = base64.b64encode(os.urandom(16)).decode()
    await loop.sock_sendall(
        sock,
        (
            f"GET / HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode(),
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await loop.sock_recv(sock, 1)
        assert chunk, "server closed during the handshake"
        head += chunk
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


async def send_requests(sock: socket.socket, op: str, params: dict, count: int) -> None:
    loop = asyncio.get_running_loop()
    for i in range(count):
        data = {"kind": "request", "request_id": f"r{i}", "op": op, "params": params}
        await asyncio.wait_for(loop.sock_sendall(sock, ws_frame(json.dumps(data).encode())), 10)


def anonymous_endpoint(srv):
    [endpoint] = [e for e in srv.endpoints.values() if not e.bound and not e.operator]
    return endpoint


async def carded_server(hub, **options):
    """A server holding an identity whose skill card is ~900 KB, and a well-behaved client."""
    cm = serve_ws(hub, "127.0.0.1", 0, **options)
    srv = await cm.__aenter__()
    good = HubClient.connect(srv.url(), rpc_timeout=10)
    carded = await good.register_human(Passport(name="carded", kind="human"))
    await good.set_skill(carded.agent_id, CARD)
    return cm, srv, good, carded


# --- item 7: bounded per-connection memory ------------------------------------------------------------------


async def test_a_peer_that_never_reads_is_closed_and_costs_one_reply_of_buffer(hub):
    cm, srv, good, carded = await carded_server(hub, send_timeout=1.0)
    try:
        sock = await non_reader(srv.url())
        await send_requests(sock, "get_skill", {"agent_id": carded.agent_id}, 200)
        abuser = anonymous_endpoint(srv)
        peak = 0
        round_trips: list[float] = []
        deadline = time.monotonic() + 15
        while abuser.endpoint_id in srv.endpoints and time.monotonic() < deadline:
            transport = abuser.ws.transport
            if transport is not None:
                peak = max(peak, transport.get_write_buffer_size())
            start = time.perf_counter()
            assert (await good.get_agent("carded")).agent_id == carded.agent_id
            round_trips.append(time.perf_counter() - start)
            await asyncio.sleep(0.01)
        # closed, with a reason, once a reply was not taken within send_timeout
        assert abuser.endpoint_id not in srv.endpoints
        close = abuser.ws.protocol.close_sent
        assert close is not None and close.code == 1008
        assert close.reason.startswith("send timeout: a message was not taken within 1 s")
        # one ~900 KB reply sits in the socket buffer at a time, not 200 of them (~180 MB)
        assert peak <= 4 * 1024 * 1024, peak
        assert round_trips and max(round_trips) < 1.0
        sock.close()
    finally:
        await good.close()
        await cm.__aexit__(None, None, None)


async def test_unread_answers_hold_their_in_flight_slots(hub):
    cm, srv, good, carded = await carded_server(hub, send_timeout=60, ping_interval=None)
    try:
        sock = await non_reader(srv.url())
        abuser = None
        loop = asyncio.get_running_loop()
        for i in range(MAX_INFLIGHT_REQUESTS + 300):
            data = {
                "kind": "request",
                "request_id": f"r{i}",
                "op": "get_skill",
                "params": {"agent_id": carded.agent_id},
            }
            try:
                await asyncio.wait_for(loop.sock_sendall(sock, ws_frame(json.dumps(data).encode())), 0.5)
            except TimeoutError:
                break  # the server stopped reading us: our requests wait in our own socket
        await asyncio.sleep(0.5)
        abuser = anonymous_endpoint(srv)
        # every slot is held by an answer not yet written, and no request beyond them was read
        assert abuser._free_slots == 0
        assert len(abuser._tasks) <= MAX_INFLIGHT_REQUESTS
        assert (await good.get_agent("carded")).agent_id == carded.agent_id
        sock.close()
    finally:
        await good.close()
        await cm.__aexit__(None, None, None)


async def test_keepalive_times_out_a_peer_whose_buffer_is_full(hub, caplog):
    cm, srv, good, carded = await carded_server(hub, send_timeout=60, ping_interval=0.3, ping_timeout=0.5)
    try:
        sock = await non_reader(srv.url())
        await send_requests(sock, "get_skill", {"agent_id": carded.agent_id}, 20)
        abuser = anonymous_endpoint(srv)
        # the ping waits behind replies the peer never reads: its deadline covers that wait
        await until(lambda: abuser.endpoint_id not in srv.endpoints, timeout=10)
        close = abuser.ws.protocol.close_sent
        assert close is not None and close.code == 1011
        assert close.reason == "keepalive ping timeout: no pong within 0.5 s"
        assert good.link.connected and good.link.reconnects == 0  # it reads, so it answers its pings
        assert (await good.get_agent("carded")).agent_id == carded.agent_id
        sock.close()
    finally:
        await good.close()
        await cm.__aexit__(None, None, None)


async def test_connections_are_limited_per_address_and_in_total(hub):
    async with serve_ws(hub, "127.0.0.1", 0, max_connections=4, max_connections_per_address=2) as srv:
        url = srv.url()
        a, b = await ws_connect(url), await ws_connect(url)
        with pytest.raises(InvalidStatus) as refused:
            await ws_connect(url)
        assert refused.value.response.status_code == 503
        assert b"127.0.0.1 already holds 2 connections to this hub, its limit per address" in (
            refused.value.response.body
        )
        with pytest.raises(
            ConnectionLostError, match=re.escape("HTTP 503: 127.0.0.1 already holds 2 connections")
        ):
            await HubClient.connect(url, rpc_timeout=5).open()
        c = await ws_connect(url, local_addr=("127.0.0.2", 0))
        d = await ws_connect(url, local_addr=("127.0.0.3", 0))
        with pytest.raises(InvalidStatus) as full:
            await ws_connect(url, local_addr=("127.0.0.4", 0))
        assert b"holds its limit of 4 connections" in full.value.response.body
        await a.close()
        await until(lambda: srv.limits.connections == 3)
        again = HubClient.connect(url, rpc_timeout=5)
        assert (await again.health())["registered_agents"] == 0
        for ws in (b, c, d):
            await ws.close()
        await again.close()
        await until(lambda: srv.limits.connections == 0 and not srv.limits.per_address)


async def test_skill_markdown_and_resumes_are_capped_at_the_wire(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        client = HubClient.connect(srv.url(), rpc_timeout=10)
        too_big = "x" * (MAX_SKILL_BYTES + 1)
        with pytest.raises(
            ProtocolError, match=r"params.skill_md is 1,048,577 bytes; the limit is 1,048,576 bytes \(1 MiB\)"
        ):
            await client.call("register", passport=Passport(name="big", kind="human"), skill_md=too_big)
        ana = await client.register_human(Passport(name="ana2", kind="human"))
        await client.set_skill(ana.agent_id, CARD)  # ~900 KB is within the cap
        with pytest.raises(ProtocolError, match=re.escape("params.skill_md is 1,048,577 bytes")):
            await client.set_skill(ana.agent_id, too_big)
        assert await client.get_skill(ana.agent_id) == CARD
        huge = Resume(summary="y" * (MAX_RESUME_BYTES + 10))
        with pytest.raises(
            ProtocolError, match=r"params.resume is [\d,]+ bytes as JSON; the limit is 262,144"
        ):
            await client.set_resume(ana.agent_id, huge)
        with pytest.raises(ProtocolError, match=re.escape("params.resume is")):
            await client.call("register", passport=Passport(name="eve", kind="human"), resume=huge)
        assert hub.find_agent_id("eve") is None and hub.find_agent_id("big") is None
        await client.close()


# --- item 8: authentication on token servers --------------------------------------------------------------


async def test_a_token_server_closes_connections_that_do_not_authenticate(hub):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN, auth_timeout=0.5) as srv:
        url = srv.url()
        idle = await ws_connect(url)
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(idle.recv(), 5)
        assert idle.close_code == 1008
        assert idle.close_reason.startswith("auth_failed: not authenticated within 0.5 s")
        # one that presents the token in time stays, idle or not
        raw = await ws_connect(url)
        await raw.send(
            json.dumps(
                {"kind": "hello", "name": "", "auth_scheme": "api_key", "auth_claim": {"token": TOKEN}}
            )
        )
        assert json.loads(await raw.recv())["kind"] == "welcome"
        client = HubClient.connect(url, token=TOKEN, rpc_timeout=5)
        await client.open()  # WsLink authenticates the connection on connect
        await asyncio.sleep(1.0)
        assert client.link.connected and client.link.reconnects == 0
        assert (await client.health())["registered_agents"] == 0
        await raw.send(json.dumps({"kind": "ping"}))
        assert json.loads(await raw.recv()) == {"kind": "pong"}
        # a wrong token is an authentication failure, said at once
        wrong = await ws_connect(url)
        await wrong.send(
            json.dumps({"kind": "hello", "name": "", "auth_scheme": "api_key", "auth_claim": {"token": "x"}})
        )
        assert json.loads(await wrong.recv())["code"] == "auth_failed"
        with pytest.raises(ConnectionClosed):
            await wrong.recv()
        await raw.close()
        await client.close()


DIRECTORY_READS = [
    ("list_agents", {}),
    ("get_agent", {"name_or_id": "ana"}),
    ("get_skill", {"agent_id": "AGENT"}),
    ("get_skill_info", {"agent_id": "AGENT"}),
    ("get_resume", {"agent_id": "AGENT"}),
    ("get_rule", {"agent_id": "AGENT"}),
    ("names_for", {"agent_ids": ["AGENT"]}),
    ("health", {}),
    ("find_agent_id", {"name": "ana"}),  # directory access too (issue 21 item 11)
]


async def _request(ws, op: str, params: dict, request_id: str) -> dict:
    await ws.send(json.dumps({"kind": "request", "request_id": request_id, "op": op, "params": params}))
    while True:
        frame = json.loads(await asyncio.wait_for(ws.recv(), 5))
        if frame.get("kind") == "response" and frame["request_id"] == request_id:
            return frame


async def test_anonymous_connections_do_not_read_the_directory_of_a_token_server(hub):
    ana = await HubClient.local(hub).register_human(Passport(name="ana", kind="human"))
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        anon = await ws_connect(srv.url())
        for op, params in DIRECTORY_READS:
            params = json.loads(json.dumps(params).replace("AGENT", ana.agent_id))
            reply = await _request(anon, op, params, f"r-{op}")
            assert reply["ok"] is False and reply["error_code"] == "access_denied", (op, reply)
            assert reply["error_message"] == (
                f"'{op}' reads the directory, which this server shows only to authenticated connections; "
                "connect with the server's token (HubClient.connect(url, token=...)) or ask its operator "
                "for --public-directory"
            )
        await anon.send(
            json.dumps(
                {"kind": "hello", "name": "", "auth_scheme": "api_key", "auth_claim": {"token": TOKEN}}
            )
        )
        assert json.loads(await anon.recv())["kind"] == "welcome"
        for op, params in DIRECTORY_READS:
            params = json.loads(json.dumps(params).replace("AGENT", ana.agent_id))
            assert (await _request(anon, op, params, f"ok-{op}"))["ok"] is True, op
        await anon.close()
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN, public_directory=True) as srv:
        anon = await ws_connect(srv.url())
        reply = await _request(anon, "list_agents", {}, "pub")
        assert [p["name"] for p in reply["result"]] == ["ana"]
        await anon.close()
    async with serve_ws(hub, "127.0.0.1", 0) as srv:  # no token: today's behaviour
        anon = await ws_connect(srv.url())
        assert (await _request(anon, "get_skill", {"agent_id": ana.agent_id}, "open"))["ok"] is True
        await anon.close()


# --- item 11: errors keep their request id; the nesting limit ---------------------------------------------


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


async def test_deep_nesting_is_a_protocol_error_that_keeps_its_request_id(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        ws = await ws_connect(srv.url(), max_size=None)
        limit_message = (
            f"frame nests JSON arrays/objects deeper than {MAX_JSON_DEPTH} levels (the limit is {MAX_JSON_DEPTH}); "
            "send flatter data"
        )
        for depth in (5000, 150, MAX_JSON_DEPTH - 2):  # past the parser's recursion, past ours, within
            await ws.send(
                f'{{"params": {{"x": {nested(depth)}}}, "kind": "request", "request_id": "d{depth}", "op": "health"}}'
            )
            reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
            assert reply["kind"] == "response" and reply["request_id"] == f"d{depth}"
            if depth > MAX_JSON_DEPTH:
                assert reply["ok"] is False and reply["error_code"] == "protocol_error"
                assert reply["error_message"] == limit_message
            else:
                assert reply["ok"] is True
        # a deep frame that is not a request: an error frame naming the limit, the connection stays
        await ws.send(f'{{"kind": "hello", "name": "x", "auth_claim": {{"a": {nested(3000)}}}}}')
        assert json.loads(await ws.recv()) == {
            "kind": "error",
            "code": "protocol_error",
            "message": limit_message,
            "envelope_id": None,
        }
        await ws.send(json.dumps({"kind": "ping"}))
        assert json.loads(await ws.recv()) == {"kind": "pong"}
        await ws.close()
        # through the client: the caller gets the error at once, not at its timeout
        a, b = HubClient.connect(srv.url(), rpc_timeout=30), HubClient.connect(srv.url(), rpc_timeout=30)
        ana = await a.register_human(Passport(name="ana", kind="human"))
        await b.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")
        deep: object = "leaf"
        for _ in range(150):
            deep = [deep]
        started = time.monotonic()
        with pytest.raises(ProtocolError, match=re.escape(f"(the limit is {MAX_JSON_DEPTH})")):
            await ana.send_envelope(
                Envelope(ch.channel_id, ana.agent_id, None, EV_TEXT, {"text": "x", "d": deep})
            )
        assert time.monotonic() - started < 5
        await ana.send(ch.channel_id, "still fine")
        texts = [e.event_data["text"] for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
        assert texts == ["still fine"]
        await a.close()
        await b.close()


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


tricky_text = st.text(alphabet=st.sampled_from(list('ab[]{}"\\é\u2028')), max_size=6)
json_trees = st.recursive(
    st.none() | st.integers() | tricky_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(tricky_text, inner, max_size=3),
    max_leaves=30,
)


@given(json_trees, st.integers(1, 8), st.booleans())
@settings(max_examples=400, deadline=None)
def test_nesting_check_agrees_with_the_parsed_depth(value, limit, ascii_only):
    text = json.dumps(value, ensure_ascii=ascii_only)
    assert nesting_exceeds(text, limit) == (_depth(value) > limit)


def test_frame_from_json_refuses_deep_frames_with_protocol_error():
    with pytest.raises(ProtocolError, match="the limit is 100"):
        frame_from_json('{"kind": "ping", "x": ' + nested(10_000) + "}")


# --- the `ag2net serve` options -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--legacy-identities"], "--legacy-identities applies to a server started with --token"),
        (["--public-directory"], "--public-directory applies to a server started with --token"),
        (["--max-connections", "0"], "--max-connections must be more than 0, got 0"),
        (["--max-connections-per-address", "-1"], "--max-connections-per-address must be more than 0"),
        (["--auth-timeout", "0"], "--auth-timeout must be more than 0"),
        (["--send-timeout", "-2"], "--send-timeout must be more than 0"),
    ],
)
def test_serve_refuses_bad_limits_in_one_sentence(args, message, monkeypatch):
    monkeypatch.delenv("AG2NET_TOKEN", raising=False)
    result = CliRunner().invoke(app, ["serve", "--port", "0", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


async def test_ag2net_serve_enforces_its_limits_in_a_real_process(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_DATA_HOME": str(tmp_path)}
    env.pop("AG2NET_TOKEN", None)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ag2net.cli", "serve", "--port", "0", "--token", TOKEN,
        "--auth-timeout", "0.5", "--max-connections-per-address", "2",
        stdout=asyncio.subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(tmp_path),
    )  # fmt: skip
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        url = re.search(r"(ws://\S+)", line).group(1)
        client = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "s.json")
        me = await client.register_human(Passport(name="me", kind="human"))
        anon = await ws_connect(url)  # unauthenticated: its own budget, not the two per address
        second = await ws_connect(url)
        await second.send(json.dumps({"kind": "hello", "name": "", "auth_claim": {"token": TOKEN}}))
        assert json.loads(await second.recv())["kind"] == "welcome"
        third = await ws_connect(url)  # a third authenticated connection from 127.0.0.1 is one too many
        await third.send(json.dumps({"kind": "hello", "name": "", "auth_claim": {"token": TOKEN}}))
        with pytest.raises(ConnectionClosed):
            while True:
                await asyncio.wait_for(third.recv(), 5)
        assert third.close_code == 1013
        assert (
            "127.0.0.1 already holds 2 connections to this hub, its limit per address" in third.close_reason
        )
        with pytest.raises(ConnectionClosed):
            await asyncio.wait_for(anon.recv(), 5)
        assert anon.close_reason.startswith("auth_failed: not authenticated within 0.5 s")
        assert (await client.get_agent("me")).agent_id == me.agent_id
        await client.close()
    finally:
        proc.kill()
        await proc.wait()

"""ag2 1.2.1's transport names on ag2net: frames and their JSON shapes, the link protocols, frame-level
in-process and WebSocket connections, ``WsLink.client()`` per caller, and remote agent proxies.

Written from the behaviour (reference §3.7, §3.15, §7): the expected JSON shapes below are what ag2
1.2.1's ``encode_frame`` prints; ``test_frames_encode_like_ag2`` also compares with the real ag2 when its
virtualenv is there.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from support import quiet, until
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve

from ag2net import (
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_TEXT,
    AccessDeniedError,
    Agent,
    AuthAdapter,
    AuthBlock,
    Envelope,
    ErrorFrame,
    HelloFrame,
    HubClient,
    LinkClient,
    LinkEndpoint,
    LinkFactory,
    LocalLink,
    LocalLinkClient,
    LocalLinkEndpoint,
    NotFoundError,
    NotifyFrame,
    Passport,
    PingFrame,
    PongFrame,
    ProtocolError,
    ReceiptFrame,
    RemoteAgentProxy,
    RequestFrame,
    ResponseFrame,
    Resume,
    Rule,
    ScriptedModel,
    WelcomeFrame,
    WsLink,
    WsLinkClient,
    WsLinkEndpoint,
    decode_frame,
    encode_frame,
    serve_ws,
)
from ag2net.hub import ApiKeyAuth, AuthRegistry, Hub, NoAuth
from ag2net.identity import AccessBlock
from ag2net.store import MemoryStore

AG2_PYTHON = Path.home() / ".cache" / "ag2net-interop" / "venv" / "bin" / "python"

ENVELOPE = Envelope(
    channel_id="c1", sender_id="s1", audience=None, event_type="ag2.text", event_data={"text": "hi"}
)

# (frame, the JSON ag2 1.2.1's encode_frame makes of it)
SHAPES = [
    (
        HelloFrame("n"),
        {"name": "n", "auth_scheme": "none", "auth_claim": {}, "since_envelope_id": None, "kind": "hello"},
    ),
    (
        HelloFrame("n", "api_key", {"token": "t"}, ""),
        {
            "name": "n",
            "auth_scheme": "api_key",
            "auth_claim": {"token": "t"},
            "since_envelope_id": "",
            "kind": "hello",
        },
    ),
    (
        WelcomeFrame("e1", "2026-01-01T00:00:00Z"),
        {"endpoint_id": "e1", "hub_time": "2026-01-01T00:00:00Z", "kind": "welcome"},
    ),
    (PingFrame(), {"kind": "ping"}),
    (PongFrame(), {"kind": "pong"}),
    (
        RequestFrame("r1", "get_agent"),
        {"request_id": "r1", "op": "get_agent", "params": {}, "kind": "request"},
    ),
    (
        ResponseFrame("r1", True, {"a": [1]}),
        {
            "request_id": "r1",
            "ok": True,
            "result": {"a": [1]},
            "error_code": "",
            "error_message": "",
            "kind": "response",
        },
    ),
    (
        ResponseFrame("r2", False, None, "not_found", "agent not found: x"),
        {
            "request_id": "r2",
            "ok": False,
            "result": None,
            "error_code": "not_found",
            "error_message": "agent not found: x",
            "kind": "response",
        },
    ),
    (
        ErrorFrame("auth_failed", "no"),
        {"code": "auth_failed", "message": "no", "envelope_id": None, "kind": "error"},
    ),
    (
        ReceiptFrame("e1", "ack"),
        {
            "envelope_id": "e1",
            "status": "ack",
            "recipient_id": "",
            "channel_id": "",
            "reason": "",
            "kind": "receipt",
        },
    ),
    (
        NotifyFrame(ENVELOPE, "r1"),
        {
            "envelope": {
                "channel_id": "c1",
                "sender_id": "s1",
                "audience": None,
                "event_type": "ag2.text",
                "event_data": {"text": "hi"},
                "envelope_id": "",
                "task_id": None,
                "causation_id": None,
                "trace_id": None,
                "priority": "normal",
                "depth": 0,
                "idempotency_key": None,
                "created_at": "",
                "ttl_seconds": None,
            },
            "recipient_id": "r1",
            "kind": "notify",
        },
    ),
]


# --- frames ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("frame", "shape"), SHAPES, ids=[type(f).__name__ for f, _ in SHAPES])
def test_frame_round_trips_in_ag2s_json_shape(frame, shape):
    encoded = encode_frame(frame)
    assert encoded == shape
    assert list(encoded) == list(shape)  # same key order: the text on the wire is the same too
    decoded = decode_frame(json.loads(json.dumps(encoded)))
    assert type(decoded) is type(frame) and decoded == frame
    if isinstance(frame, NotifyFrame):
        assert isinstance(decoded.envelope, Envelope)


@pytest.mark.skipif(not AG2_PYTHON.exists(), reason="the ag2 1.2.1 virtualenv (interop tests) is not built")
def test_frames_encode_like_ag2():
    """The real ag2 decodes our JSON of every frame and encodes it back to the same JSON."""
    ours = [encode_frame(frame) for frame, _ in SHAPES]
    script = (
        "import json, sys\n"
        "from ag2.network import encode_frame, decode_frame\n"
        "print(json.dumps([encode_frame(decode_frame(d)) for d in json.loads(sys.stdin.read())]))\n"
    )
    done = subprocess.run(
        [str(AG2_PYTHON), "-c", script], input=json.dumps(ours), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ours


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"kind": "zzz"}, "unknown frame kind: 'zzz'"),
        ({}, "unknown frame kind: None"),
        ({"kind": "hello"}, "malformed hello frame: missing required field 'name'"),
        ({"kind": "request", "request_id": "r"}, "malformed request frame: missing required field 'op'"),
        ({"kind": "welcome", "endpoint_id": "e"}, "missing required field 'hub_time'"),
        ({"kind": "hello", "name": "n", "colour": 1}, "malformed hello frame: unknown field 'colour'"),
        ({"kind": "hello", "name": 5}, "malformed hello frame: name"),
        ({"kind": "hello", "name": "n", "auth_claim": []}, "malformed hello frame: auth_claim"),
        ({"kind": "request", "request_id": "r", "op": "x", "params": []}, "malformed request frame: params"),
        ({"kind": "receipt", "envelope_id": "e", "status": 1}, "malformed receipt frame: status"),
        ({"kind": "response", "request_id": "r", "ok": "yes"}, "malformed response frame: ok"),
        ({"kind": "error", "code": "c", "message": None}, "malformed error frame: message"),
        ({"kind": "notify", "envelope": "x"}, "malformed notify frame: field 'envelope' must be an envelope"),
        (
            {"kind": "notify", "envelope": {"channel_id": "c"}},
            "field 'envelope': envelope is missing required field",
        ),
        ([], "frame must be a JSON object, got list"),
    ],
)
def test_decode_errors_are_protocol_errors_naming_the_field(data, words):
    with pytest.raises(ProtocolError) as info:
        decode_frame(data)
    assert words in str(info.value)
    # ag2 raises ValueError (unknown kind) and TypeError (fields): code catching those still works
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)


# --- protocols -------------------------------------------------------------------------------------


class _Proxy:
    """A RemoteAgentProxy standing in for a bridge to another system: it records what it is handed and,
    like the far side of a real bridge, answers through the hub as the remote agent."""

    def __init__(self, hub: Hub, scheme: str = "a2a", reply: str | None = "far away says hi") -> None:
        self.hub = hub
        self.scheme = scheme
        self.reply = reply
        self.seen: list[tuple[Envelope, Passport]] = []
        self.closed = False

    async def dispatch(self, envelope: Envelope, recipient: Passport) -> None:
        self.seen.append((envelope, recipient))
        if envelope.event_type == EV_CHANNEL_INVITE:
            answer = Envelope(
                channel_id=envelope.channel_id,
                sender_id=recipient.agent_id,
                audience=None,
                event_type=EV_CHANNEL_INVITE_ACK,
                event_data={"channel_id": envelope.channel_id},
                causation_id=envelope.envelope_id,
            )
        elif envelope.event_type == EV_TEXT and self.reply is not None:
            answer = Envelope(
                channel_id=envelope.channel_id,
                sender_id=recipient.agent_id,
                audience=None,
                event_type=EV_TEXT,
                event_data={"text": self.reply},
                causation_id=envelope.envelope_id,
            )
        else:
            return
        asyncio.get_running_loop().create_task(self.hub.post_envelope(answer))

    async def close(self) -> None:
        self.closed = True


async def test_protocols_are_runtime_checkable_like_ag2(hub):
    link = LocalLink(hub)
    assert isinstance(link, LinkFactory) and isinstance(WsLink("ws://127.0.0.1:1"), LinkFactory)
    assert not isinstance(object(), LinkFactory)
    client = link.client()
    assert isinstance(client, LinkClient) and isinstance(WsLinkClient("ws://127.0.0.1:1"), LinkClient)
    assert isinstance(LocalLinkEndpoint("e", asyncio.Queue(), asyncio.Queue()), LinkEndpoint)
    assert isinstance(_Proxy(hub), RemoteAgentProxy)
    assert not isinstance(object(), RemoteAgentProxy)
    assert isinstance(NoAuth(), AuthAdapter) and isinstance(ApiKeyAuth({}), AuthAdapter)


# --- LocalLink, frame by frame ---------------------------------------------------------------------


async def next_frame(frames, timeout: float = 5.0):
    return await asyncio.wait_for(anext(frames), timeout)


async def collect(frames) -> list:
    return [f async for f in frames]


async def test_local_link_client_speaks_frames(hub):
    bob = await hub.register_identity(Passport(name="bob"), Resume())
    client = LocalLink(hub).client()
    assert isinstance(client, LocalLinkClient) and client.endpoint_id
    await client.open()  # ag2's open(): no handler, so the connection speaks frames
    frames = client.frames()

    await client.send_frame(HelloFrame("nobody"))
    assert await next_frame(frames) == ErrorFrame("not_found", "unknown name: nobody")
    await client.send_frame(HelloFrame("bob", "api_key", {"token": "t"}))
    refused = await next_frame(frames)
    assert isinstance(refused, ErrorFrame) and refused.code == "auth_failed"
    assert "does not match 'bob''s registered scheme 'none'" in refused.message

    await client.send_frame(HelloFrame("bob"))
    welcome = await next_frame(frames)
    assert isinstance(welcome, WelcomeFrame) and welcome.endpoint_id == client.endpoint_id

    await client.send_frame(RequestFrame("r1", "get_agent", {"name_or_id": "bob"}))
    response = await next_frame(frames)
    assert response.request_id == "r1" and response.ok
    assert (
        response.result["agent_id"] == bob.agent_id and response.result["name"] == "bob"
    )  # a dict, as in ag2
    await client.send_frame(RequestFrame("r2", "no_such_op"))
    response = await next_frame(frames)
    assert (response.ok, response.error_code) == (False, "protocol_error")
    assert "unknown control-plane op: 'no_such_op'" in response.error_message
    await client.send_frame(PingFrame())
    assert await next_frame(frames) == PongFrame()

    # a delivery to bob arrives as a NotifyFrame; its ack receipt moves bob's cursor
    asker = await HubClient(LocalLink(hub)).register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    opening = asyncio.create_task(asker.open(type="consulting", target="bob"))
    notify = await next_frame(frames)
    assert isinstance(notify, NotifyFrame) and notify.recipient_id == bob.agent_id
    assert notify.envelope.event_type == EV_CHANNEL_INVITE
    await client.send_frame(
        ReceiptFrame(notify.envelope.envelope_id, "ack", bob.agent_id, notify.envelope.channel_id)
    )
    ack = Envelope(
        channel_id=notify.envelope.channel_id,
        sender_id=bob.agent_id,
        audience=None,
        event_type=EV_CHANNEL_INVITE_ACK,
        event_data={"channel_id": notify.envelope.channel_id},
    )
    await client.send_frame(RequestFrame("r3", "post_envelope", {"envelope": ack.to_dict()}))
    channel = await asyncio.wait_for(opening, 5)
    assert channel.channel_id == notify.envelope.channel_id
    assert hub.inbox_cursor(bob.agent_id, channel.channel_id) == notify.envelope.envelope_id

    await client.close()
    rest = await asyncio.wait_for(collect(frames), 5)  # what was queued, then the end
    assert any(isinstance(f, ResponseFrame) and f.request_id == "r3" and f.ok for f in rest)
    assert client.endpoint_id not in hub.delivery.endpoints
    await asker.close()


async def test_local_link_client_made_from_queues_alone():
    """ag2's constructor: a bare queue pair, each side reading what the other sends."""
    up, down = asyncio.Queue(), asyncio.Queue()
    client = LocalLinkClient("e1", up, down)
    endpoint = LocalLinkEndpoint("e1", up, down)
    await client.open()
    await client.send_frame(PingFrame())
    assert await next_frame(endpoint.frames()) == PingFrame()
    await endpoint.send_frame(PongFrame())
    assert await next_frame(client.frames()) == PongFrame()
    await endpoint.close()
    assert [f async for f in client.frames()] == []
    await client.close()
    queued = up.qsize()
    await client.send_frame(PingFrame())  # after its own close: dropped silently, as in ag2
    assert up.qsize() == queued


async def test_local_frames_start_on_first_send_and_end_when_the_hub_closes():
    hub = await Hub.open(MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    client = LocalLink(hub).client()
    await client.send_frame(PingFrame())  # no open(): ag2's connection is live from client() on
    frames = client.frames()
    assert await next_frame(frames) == PongFrame()
    assert client.endpoint_id in hub.delivery.endpoints
    await hub.close()
    assert await asyncio.wait_for(collect(frames), 5) == []


async def test_one_local_connection_speaks_frames_or_serves_a_hub_client_not_both(hub):
    client = HubClient(LocalLink(hub))
    await client.open()
    with pytest.raises(RuntimeError, match="opened by a HubClient"):
        client.link.frames()
    await client.close()
    speaking = LocalLink(hub).client()
    await speaking.open()
    with pytest.raises(RuntimeError, match="opened to speak frames"):
        await HubClient(speaking).open()
    await speaking.close()


# --- WebSocket -------------------------------------------------------------------------------------


@pytest.fixture
async def ws_hub():
    hub = await Hub.open(MemoryStore(), **quiet())
    yield hub
    await hub.close()


async def consult(asker, target: str, question: str) -> str:
    channel = await asyncio.wait_for(asker.open(type="consulting", target=target), 5)
    await channel.send(question)
    reply = await asker.wait_for_channel_event(
        channel_id=channel.channel_id,
        predicate=lambda e: e.event_type == EV_TEXT and e.sender_id != asker.agent_id,
        timeout=5,
    )
    return reply.event_data["text"]


async def test_ws_link_client_is_a_fresh_connection_per_caller(ws_hub):
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        link = WsLink(server.url(), ping_interval=None)
        assert link.url == server.url()
        made = [link.client() for _ in range(3)]
        assert len({id(c) for c in made}) == 3 and all(
            type(c) is WsLinkClient and c is not link for c in made
        )
        assert all(c.url == link.url and c.ping_interval is None for c in made)
        one, two, three = (HubClient(c) for c in made)
        asker = await one.register(
            Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
        )
        await two.register(Agent("bob", ScriptedModel("bob here", loop=True)), attach_plugin=False)
        await three.register(Agent("cy", ScriptedModel("cy here", loop=True)), attach_plugin=False)
        # three connections (a WsLink made the ag2 way asks for no operator role, so it says no hello
        # until it binds an identity: the server's count is what tells the connections apart)
        assert len({id(c.link) for c in (one, two, three)}) == 3
        assert len(server.endpoints) == 3
        assert await consult(asker, "bob", "who?") == "bob here"
        assert await consult(asker, "cy", "who?") == "cy here"
        await two.close()
        assert await consult(asker, "cy", "still there?") == "cy here"
        await one.close()
        await three.close()


async def test_one_ws_connection_is_not_shared_by_two_hub_clients(ws_hub):
    """Two handlers on one connection would misdeliver silently; the second is refused instead."""
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        shared = WsLink(server.url(), ping_interval=None).client()
        first, second = HubClient(shared), HubClient(shared)
        await first.open()
        with pytest.raises(RuntimeError, match="already open for another HubClient"):
            await second.open()
        await first.close()


async def test_three_hub_clients_on_one_ws_link(ws_hub):
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        link = WsLink(server.url(), ping_interval=None)
        one, two, three = (HubClient(link) for _ in range(3))
        try:
            asker = await one.register(
                Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
            )
            await two.register(Agent("bob", ScriptedModel("bob here", loop=True)), attach_plugin=False)
            await three.register(Agent("cy", ScriptedModel("cy here", loop=True)), attach_plugin=False)
            assert await consult(asker, "bob", "who?") == "bob here"
            assert await consult(asker, "cy", "who?") == "cy here"
        finally:
            for c in (one, two, three):
                await c.close()


async def test_ws_link_client_speaks_frames(ws_hub):
    bob = await ws_hub.register_identity(Passport(name="bob"), Resume())
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        client = WsLink(server.url(), ping_interval=None).client()
        await client.open()  # connects only: no hello, no endpoint id yet
        assert client.endpoint_id == ""
        frames = client.frames()
        await client.send_frame(HelloFrame("bob"))
        welcome = await next_frame(frames)
        assert isinstance(welcome, WelcomeFrame) and client.endpoint_id == welcome.endpoint_id != ""
        await client.send_frame(RequestFrame("r1", "get_agent", {"name_or_id": "bob"}))
        response = await next_frame(frames)
        assert response.ok and response.result["agent_id"] == bob.agent_id
        await client.send_frame(HelloFrame("nobody"))
        assert await next_frame(frames) == ErrorFrame("not_found", "unknown name: nobody")
        with pytest.raises(RuntimeError, match="opened to speak frames"):
            await HubClient(client).open()
        await client.close()
        assert [f async for f in frames] == []


async def test_serve_ws_connections_are_ws_link_endpoints(ws_hub):
    bob = await ws_hub.register_identity(Passport(name="bob"), Resume())
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        client = WsLink(server.url(), ping_interval=None).client()
        await client.open()
        frames = client.frames()
        await client.send_frame(HelloFrame("bob"))
        assert isinstance(await next_frame(frames), WelcomeFrame)
        [endpoint] = server.endpoints.values()
        assert isinstance(endpoint, WsLinkEndpoint) and isinstance(endpoint, LinkEndpoint)
        assert endpoint.endpoint_id == client.endpoint_id and endpoint.agent_id == bob.agent_id
        await endpoint.send_frame(ErrorFrame("error", "from the hub side"))
        assert await next_frame(frames) == ErrorFrame("error", "from the hub side")
        with pytest.raises(RuntimeError, match="serve_ws reads this connection's frames"):
            endpoint.frames()
        await client.close()


async def test_ws_link_endpoint_frames_over_a_real_socket():
    """``WsLinkEndpoint(endpoint_id, ws)`` on a plain websockets server: decoded frames in, frames out,
    messages that are not frames skipped."""
    seen: list = []

    async def handler(ws):
        endpoint = WsLinkEndpoint("ep-1", ws)
        async for frame in endpoint.frames():
            seen.append(frame)
            if isinstance(frame, PingFrame):
                await endpoint.send_frame(PongFrame())
            elif isinstance(frame, HelloFrame):
                await endpoint.send_frame(WelcomeFrame(endpoint.endpoint_id, "now"))
                await endpoint.close()

    async with serve(handler, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        async with connect(f"ws://127.0.0.1:{port}") as ws:
            await ws.send("not json")
            await ws.send(json.dumps({"kind": "zzz"}))
            await ws.send(json.dumps(encode_frame(PingFrame())))
            assert decode_frame(json.loads(await ws.recv())) == PongFrame()
            await ws.send(json.dumps(encode_frame(HelloFrame("x"))))
            assert decode_frame(json.loads(await ws.recv())) == WelcomeFrame("ep-1", "now")
    assert seen == [PingFrame(), HelloFrame("x")]


# --- remote agent proxies --------------------------------------------------------------------------


class _Failures:
    def __init__(self) -> None:
        self.failed: list[tuple[str, str, BaseException]] = []

    async def on_dispatch_failed(self, envelope, recipient_id, reason) -> None:
        self.failed.append((envelope.event_type, recipient_id, reason))


async def remote(hub: Hub, name: str = "far", scheme: str = "a2a", rule: Rule | None = None) -> Passport:
    passport = Passport(
        name=name, kind="remote_agent", auth=AuthBlock(scheme=scheme, claim={"url": "https://x"})
    )
    return await hub.register_identity(passport, Resume(), rule=rule)


async def test_remote_agent_is_reached_through_its_schemes_proxy(hub):
    far = await remote(hub)
    proxy = _Proxy(hub)
    hub.register_remote_proxy(proxy)
    assert hub.remote_proxy_for("a2a") is proxy and hub.remote_proxy_for("grpc") is None
    asker = await HubClient(LocalLink(hub)).register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    assert await consult(asker, "far", "hello over there?") == "far away says hi"
    kinds = [e.event_type for e, _ in proxy.seen]
    assert kinds[0] == EV_CHANNEL_INVITE and EV_TEXT in kinds
    assert all(p.agent_id == far.agent_id and p.auth.scheme == "a2a" for _, p in proxy.seen)
    assert proxy.seen[0][1].auth.claim == {"url": "https://x"}  # a remote agent's stored claim is kept
    # a hand-off counts as delivered: nothing stays pending for the remote agent, its cursor moves
    assert hub.pending_inbox(far.agent_id) == 0
    text = next(e for e, _ in proxy.seen if e.event_type == EV_TEXT)
    assert hub.inbox_cursor(far.agent_id, text.channel_id) >= text.envelope_id
    await asker.close()
    await hub.close()
    assert not proxy.closed  # whoever registered a proxy owns it


async def test_missing_or_failing_proxy_is_reported_not_raised(hub):
    await remote(hub)
    failures = _Failures()
    hub.register_listener(failures)
    asker = await HubClient(LocalLink(hub)).register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    hub.invite_ack_timeout = 0.3
    with pytest.raises(ProtocolError):  # nobody acks the invite: the poster sees only the ack timeout
        await asker.open(type="consulting", target="far")
    await until(lambda: failures.failed)
    kind, _rid, reason = failures.failed[0]
    assert kind == EV_CHANNEL_INVITE and isinstance(reason, NotFoundError)
    assert "no remote proxy registered for scheme 'a2a'" in str(reason)

    class Broken(_Proxy):
        async def dispatch(self, envelope, recipient):
            raise ConnectionError("bridge down")

    hub.register_remote_proxy(Broken(hub))
    failures.failed.clear()
    with pytest.raises(ProtocolError):
        await asker.open(type="consulting", target="far")
    await until(lambda: failures.failed)
    assert isinstance(failures.failed[0][2], ConnectionError)
    assert hub.pending_inbox(hub.find_agent_id("far")) == 0
    await asker.close()


async def test_proxy_deliveries_obey_the_recipients_rule(hub):
    await remote(hub, rule=Rule(access=AccessBlock(inbound_from=["someone-else"])))
    proxy = _Proxy(hub)
    hub.register_remote_proxy(proxy)
    asker = await HubClient(LocalLink(hub)).register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    with pytest.raises(AccessDeniedError):  # refused at open (inbound_from), nothing reaches the proxy
        await asker.open(type="consulting", target="far")
    await asyncio.sleep(0.05)
    assert proxy.seen == []
    await asker.close()


async def test_proxy_registry(hub):
    first, second = _Proxy(hub), _Proxy(hub)
    hub.register_remote_proxy(first)
    hub.register_remote_proxy(second)  # same scheme: replaces
    assert hub.remote_proxy_for("a2a") is second
    assert hub.unregister_remote_proxy("a2a") is second
    assert hub.unregister_remote_proxy("a2a") is None and hub.remote_proxy_for("a2a") is None
    with pytest.raises(ValueError, match=r"proxy\.scheme must be a non-empty string"):
        hub.register_remote_proxy(_Proxy(hub, scheme=""))

    class NoDispatch:
        scheme = "x"

    with pytest.raises(TypeError, match="no dispatch"):
        hub.register_remote_proxy(NoDispatch())


async def test_auth_schemes():
    hub = Hub(MemoryStore())
    assert hub.auth_schemes == ["none"]
    hub = Hub(MemoryStore(), auth=AuthRegistry([NoAuth(), ApiKeyAuth({"a": "k"})]))
    assert sorted(hub.auth_schemes) == ["api_key", "none"]


class _HubBridge:
    """A real federation proxy: remote agents with ``auth.scheme == "ag2net-ws"`` live on another hub,
    reached over WebSocket. An invite is accepted on the far hub's behalf; each question is asked there in
    a consulting channel by a bridge identity, and the answer is posted back here as the remote agent."""

    scheme = "ag2net-ws"

    def __init__(self, here: Hub, far_url: str) -> None:
        self.here = here
        self.client = HubClient(WsLink(far_url, ping_interval=None))
        self.bridge = None
        self.tasks: set[asyncio.Task] = set()

    async def dispatch(self, envelope: Envelope, recipient: Passport) -> None:
        if envelope.event_type == EV_CHANNEL_INVITE:
            await self._post(envelope, recipient, EV_CHANNEL_INVITE_ACK, {"channel_id": envelope.channel_id})
        elif envelope.event_type == EV_TEXT:
            task = asyncio.get_running_loop().create_task(self._ask(envelope, recipient))
            self.tasks.add(task)  # handed off: the answer comes back later
            task.add_done_callback(self.tasks.discard)

    async def _ask(self, envelope: Envelope, recipient: Passport) -> None:
        if self.bridge is None:
            self.bridge = await self.client.register_human(Passport(name="bridge", kind="human"))
        far_name = recipient.auth.claim["name_there"]
        channel = await self.bridge.open(type="consulting", target=far_name)
        await self.bridge.send(channel.channel_id, envelope.event_data["text"])
        answer = await self.bridge.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.channel_id == channel.channel_id, timeout=10
        )
        await self._post(envelope, recipient, EV_TEXT, {"text": answer.event_data["text"]})

    async def _post(self, cause: Envelope, recipient: Passport, event_type: str, data: dict) -> None:
        await self.here.post_envelope(
            Envelope(
                channel_id=cause.channel_id,
                sender_id=recipient.agent_id,
                audience=None,
                event_type=event_type,
                event_data=data,
                causation_id=cause.envelope_id,
            )
        )

    async def close(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await self.client.close()


async def test_a_remote_agent_on_another_hub_answers_through_a_bridge_proxy(ws_hub):
    """Two hubs: 'oracle' is an agent of the far hub (served over WebSocket); on this hub it is a
    remote_agent whose envelopes the registered proxy carries there and whose answers it brings back."""
    here = await Hub.open(
        MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    far_agent = await HubClient(LocalLink(ws_hub)).register(
        Agent("oracle", ScriptedModel("forty-two", loop=True)), attach_plugin=False
    )
    async with serve_ws(ws_hub, "127.0.0.1", 0) as server:
        proxy = _HubBridge(here, server.url())
        here.register_remote_proxy(proxy)
        oracle = await here.register_identity(
            Passport(
                name="oracle-remote",
                kind="remote_agent",
                auth=AuthBlock(scheme="ag2net-ws", claim={"name_there": "oracle"}),
            ),
            Resume(),
        )
        asker = await HubClient(LocalLink(here)).register(
            Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
        )
        assert await consult(asker, "oracle-remote", "the answer?") == "forty-two"
        [texts] = [
            [e for e in await here.read_wal(md.channel_id) if e.event_type == EV_TEXT]
            for md in here.query_channels(agent_id=oracle.agent_id, include_terminal=True)
        ]
        assert [(e.sender_id, e.event_data["text"]) for e in texts] == [
            (asker.agent_id, "the answer?"),
            (oracle.agent_id, "forty-two"),
        ]
        # the question was really asked on the far hub, of its own agent
        [there] = ws_hub.query_channels(agent_id=far_agent.agent_id, include_terminal=True)
        asked = [
            e.event_data["text"] for e in await ws_hub.read_wal(there.channel_id) if e.event_type == EV_TEXT
        ]
        assert asked == ["the answer?", "forty-two"]
        await asker.close()
        await proxy.close()
    await far_agent.close()
    await here.close()

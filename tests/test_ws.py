"""The WebSocket transport on real sockets (127.0.0.1, ephemeral ports): HubClient over WsLink behaves like
the in-process one; authentication and per-connection authorisation; malformed and oversized input."""

from __future__ import annotations

import asyncio
import json
import logging
import re

import pytest
from support import quiet, until
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ag2net import (
    EV_TEXT,
    AccessDeniedError,
    Agent,
    AuthError,
    Envelope,
    HubClient,
    NotFoundError,
    Passport,
    ProtocolError,
    ScriptedModel,
    TransitionGraph,
    visible_to,
)
from ag2net.hub import Hub
from ag2net.hub.auth import ApiKeyAuth, AuthRegistry, NoAuth
from ag2net.hub.ops import OPS
from ag2net.identity import AuthBlock
from ag2net.server import WsEndpoint, classified_ops, serve_cli, serve_ws
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState
from ag2net.transport.ws import ConnectionLostError, WsLink

OPERATOR = "op-secret-1"


pytestmark = pytest.mark.hub(store="memory")


@pytest.fixture
async def server(hub):
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as srv:
        yield srv


@pytest.fixture
async def clients(server):
    made: list[HubClient] = []

    def make(**kwargs) -> HubClient:
        client = HubClient.connect(server.url(), rpc_timeout=10, **kwargs)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()


class Raw:
    """A bare WebSocket speaking JSON frames, for what HubClient never sends."""

    def __init__(self, ws):
        self.ws = ws

    async def send(self, data) -> None:
        await self.ws.send(data if isinstance(data, (str, bytes)) else json.dumps(data))

    async def recv(self, timeout: float = 5.0) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), timeout))

    async def request(self, op: str, params: dict, request_id: str = "r1") -> dict:
        await self.send({"kind": "request", "request_id": request_id, "op": op, "params": params})
        while True:
            frame = await self.recv()
            if frame.get("kind") == "response" and frame["request_id"] == request_id:
                return frame


async def raw(server) -> Raw:
    return Raw(await ws_connect(server.url()))


# --- registration, channels, envelopes -----------------------------------------------------------------


async def test_register_binds_the_connection(hub, server, clients):
    hc = clients()
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bot = await hc.register(Agent("bot", ScriptedModel("hi")), attach_plugin=False)
    assert hub.lookup_agent("ana").agent_id == ana.agent_id
    [endpoint] = server.endpoints.values()
    assert isinstance(endpoint, WsEndpoint)
    assert endpoint.bound == {ana.agent_id, bot.agent_id}
    assert hub.delivery.bindings[ana.agent_id] is endpoint
    assert hc.remote and hc.hub is None
    assert (await hc.get_agent("bot")).agent_id == bot.agent_id
    assert hc.name_for(bot.agent_id) == "bot"
    assert {p.name for p in await hc.list_agents()} == {"ana", "bot"}


async def test_bind_moves_an_identity_and_its_rights(hub, server, clients):
    first, second = clients(), clients()
    ana = await first.register_human(Passport(name="ana", kind="human"))
    ben = await first.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    again = await second.attach_human("ana")
    assert again.agent_id == ana.agent_id
    await again.send(ch.channel_id, "from the new connection")
    with pytest.raises(AccessDeniedError, match=f"connection is not bound to agent '{ana.agent_id}'"):
        await ana.send(ch.channel_id, "from the old one")
    got = await ben.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert got.event_data == {"text": "from the new connection"}
    with pytest.raises(NotFoundError, match="agent not found: nobody"):
        await second.attach_human("nobody")


async def test_every_channel_type_both_ways(hub, clients):
    a, b, c = clients(), clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    ben = await b.register_human(Passport(name="ben", kind="human"))
    cy = await c.register_human(Passport(name="cy", kind="human"))

    async def texts(human, cid, n):
        out = []
        while len(out) < n:
            env = await human.next_envelope(
                predicate=lambda e: e.channel_id == cid and e.event_type == EV_TEXT, timeout=5
            )
            out.append(env.event_data["text"])
        return out

    consulting = await ana.open(type="consulting", target="ben")
    await ana.send(consulting.channel_id, "q?")
    assert await texts(ben, consulting.channel_id, 1) == ["q?"]
    await ben.send(consulting.channel_id, "a.")
    assert await texts(ana, consulting.channel_id, 1) == ["a."]
    assert (await a.get_channel(consulting.channel_id)).close_reason == "consulting_complete"

    conversation = await ben.open(type="conversation", target="cy")
    for i in range(5):
        await ben.send(conversation.channel_id, f"b{i}")
    await cy.send(conversation.channel_id, "c0")
    assert await texts(cy, conversation.channel_id, 5) == [f"b{i}" for i in range(5)]
    assert await texts(ben, conversation.channel_id, 1) == ["c0"]

    discussion = await ana.open(type="discussion", target=["ben", "cy"])
    await ana.send(discussion.channel_id, "d0")
    await ben.send(discussion.channel_id, "d1")
    with pytest.raises(ProtocolError):
        await ben.send(discussion.channel_id, "out of turn")
    await cy.send(discussion.channel_id, "d2")
    assert await texts(ana, discussion.channel_id, 2) == ["d1", "d2"]
    assert await texts(cy, discussion.channel_id, 2) == ["d0", "d1"]

    graph = TransitionGraph.round_robin([ana.agent_id, ben.agent_id, cy.agent_id])
    workflow = await ana.open(type="workflow", target=["ben", "cy"], knobs={"graph": graph.to_dict()})
    await ana.send(workflow.channel_id, "w0")
    await ben.send(workflow.channel_id, "w1")
    assert await texts(cy, workflow.channel_id, 2) == ["w0", "w1"]
    state = await c.adapter_state(workflow.channel_id)
    assert state.expected_next_speaker == cy.agent_id
    wal = await c.read_wal(workflow.channel_id)
    assert [e.event_data.get("text") for e in wal if e.event_type == EV_TEXT] == ["w0", "w1"]
    # cy reads what cy could see (ben's invite is not among it: SPEC decision 25), at the WAL's own seqs
    everything = await hub.read_wal(workflow.channel_id)
    assert [e.envelope_id for e in wal] == [e.envelope_id for e in everything if visible_to(e, cy.agent_id)]
    assert [(s, e.envelope_id) for s, e in await c.read_wal_seq(workflow.channel_id, 1, 2)] == [
        (seq, e.envelope_id) for seq, e in enumerate(everything[:2], 1) if visible_to(e, cy.agent_id)
    ]
    assert await c.wal_count(workflow.channel_id) == len(everything)
    assert [e.envelope_id for e in await c.read_wal_until(workflow.channel_id, wal[-1].envelope_id)] == [
        e.envelope_id for e in wal[:-1]
    ]


async def test_invitee_on_the_creators_connection_does_not_deadlock(hub, clients):
    """Reference §10.4 is an ag2 deadlock: here requests of one connection run concurrently."""
    hc = clients()
    bot = await hc.register(Agent("bot", ScriptedModel("forty-two")), attach_plugin=False)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ch = await ana.open(type="consulting", target="bot")
    await ana.send(ch.channel_id, "what is six times seven?")
    reply = await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert reply.event_data == {"text": "forty-two"}
    assert reply.sender_id == bot.agent_id
    [turn] = await hc.list_turns(channel_id=ch.channel_id)
    assert turn.reply == "forty-two"
    assert [e.event_type for e in await hc.read_wal(ch.channel_id)] == [
        "ag2.channel.invite",
        "ag2.channel.invite.ack",
        "ag2.channel.opened",
        "ag2.msg.text",
        "ag2.msg.text",
        "ag2.channel.closed",
    ]


async def test_deliveries_in_order_and_acked(hub, clients):
    a, b = clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    ben = await b.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    slow: list[str] = []

    async def sleepy(env):
        if env.event_type == EV_TEXT:
            await asyncio.sleep(0.002)
            slow.append(env.event_data["text"])

    ben.on_envelope(sleepy)
    ids = [await ana.send(ch.channel_id, f"m{i}") for i in range(40)]
    await until(lambda: len(slow) >= 40)
    assert slow == [f"m{i}" for i in range(40)]
    await until(lambda: hub.pending_inbox(ben.agent_id) == 0)
    await until(lambda: hub.inbox_cursor(ben.agent_id, ch.channel_id) == ids[-1])


async def test_audience_restricted_delivery(hub, clients):
    a, b, c = clients(), clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    ben = await b.register_human(Passport(name="ben", kind="human"))
    cy = await c.register_human(Passport(name="cy", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    await ana.send(ch.channel_id, "only ben", audience=["ben"])
    got = await ben.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert got.audience == [ben.agent_id]
    with pytest.raises(ProtocolError, match="audience must list only participants of the channel"):
        await ana.send(ch.channel_id, "to cy", audience=[cy.agent_id])


# --- operator and authorisation --------------------------------------------------------------------------


async def test_operator_observes_and_reads_everything(hub, clients):
    op = clients(operator_token=OPERATOR)
    a, b = clients(), clients()
    await op.open()
    start = await op.observe_position()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await b.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    await ana.send(ch.channel_id, "watched")
    seen = []

    async def watch():
        async for ev in op.observe(since=start):
            seen.append(ev)
            if ev.kind == "envelope" and ev.envelope.event_type == EV_TEXT:
                return

    await asyncio.wait_for(watch(), 5)
    kinds = {ev.kind for ev in seen}
    assert {"agent", "channel", "envelope", "audit"} <= kinds
    assert [ev.position for ev in seen] == sorted(ev.position for ev in seen)
    text = seen[-1]
    assert text.channel_id == ch.channel_id and text.envelope.event_data == {"text": "watched"}
    assert isinstance(text.envelope, Envelope) and text.seq == 4
    assert op.name_for(ana.agent_id) == "ana"  # names learnt from agent events
    assert [m.channel_id for m in await op.list_channels()] == [ch.channel_id]
    assert len(await op.read_wal(ch.channel_id)) == 4
    assert ch.channel_id in await op.channel_stats()
    assert any(rec["kind"] == "channel_created" for _, rec in await op.list_audit())
    closed = await op.close_channel(ch.channel_id, reason="operator")
    assert closed.close_reason == "operator"
    # the operator never speaks for someone else
    with pytest.raises(AccessDeniedError, match="connection is not bound to agent"):
        await op.post_envelope(Envelope(ch.channel_id, ana.agent_id, None, EV_TEXT, {"text": "x"}))


async def test_observe_live_from_now(hub, clients):
    op = clients(operator_token=OPERATOR)
    a = clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    got: list = []
    started = asyncio.Event()

    async def watch():
        stream = op.observe()
        started.set()
        async for ev in stream:
            got.append(ev)
            if ev.kind == "channel":
                return

    task = asyncio.create_task(watch())
    await started.wait()
    await until(lambda: bool(op.link._subs))
    await asyncio.sleep(0.05)
    await a.register_human(Passport(name="ben", kind="human"))
    await ana.open(type="conversation", target="ben")
    await asyncio.wait_for(task, 5)
    first_agent = next(ev for ev in got if ev.kind == "agent")
    assert first_agent.payload["name"] == "ben" and first_agent.payload["kind"] == "registered"
    assert not op.link._subs


async def test_unauthorised_reads_are_refused(hub, clients):
    a, b, stranger = clients(), clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await b.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    await ana.send(ch.channel_id, "private")
    eve = await stranger.register_human(Passport(name="eve", kind="human"))
    no_participant = f"connection has no participant in channel '{ch.channel_id}'"
    for read in (
        stranger.read_wal(ch.channel_id),
        stranger.get_channel(ch.channel_id),
        stranger.wal_count(ch.channel_id),
        stranger.read_wal_seq(ch.channel_id, 1, 10),
        stranger.close_channel(ch.channel_id),
        stranger.list_turns(channel_id=ch.channel_id),
    ):
        with pytest.raises(AccessDeniedError, match=no_participant):
            await read
    with pytest.raises(NotFoundError, match="channel not found: nope"):
        await stranger.read_wal("nope")
    with pytest.raises(AccessDeniedError, match="needs the operator role"):
        await stranger.list_audit()
    with pytest.raises(AccessDeniedError, match="needs the operator role"):
        async for _ in stranger.observe(since=0):
            pass
    with pytest.raises(AccessDeniedError, match="list_turns needs channel_id or agent_id"):
        await stranger.list_turns()
    with pytest.raises(AccessDeniedError, match=f"connection is not bound to agent '{ana.agent_id}'"):
        await stranger.list_channels(agent_id=ana.agent_id)
    assert await stranger.list_channels() == []
    assert await stranger.channel_stats() == {}
    assert [m.channel_id for m in await a.list_channels()] == [ch.channel_id]
    assert list(await a.channel_stats()) == [ch.channel_id]
    # writes in someone else's name
    with pytest.raises(AccessDeniedError, match=f"connection is not bound to agent '{ana.agent_id}'"):
        await stranger.post_envelope(Envelope(ch.channel_id, ana.agent_id, None, EV_TEXT, {"text": "spoof"}))
    with pytest.raises(AccessDeniedError, match="connection is not bound to agent"):
        await stranger.create_channel(
            creator_id=ana.agent_id, manifest_type="conversation", participants=[eve.agent_id]
        )
    with pytest.raises(AccessDeniedError, match="connection is not bound to agent"):
        await stranger.set_skill(ana.agent_id, "# mine now")
    with pytest.raises(AccessDeniedError, match="connection is not bound to agent"):
        await stranger.unregister_agent(ana.agent_id)
    # the hub-only protocol, task ids
    with pytest.raises(ProtocolError, match=re.escape("'ag2.channel.opened' is emitted only by the hub")):
        await ana.send_envelope(Envelope(ch.channel_id, ana.agent_id, None, "ag2.channel.opened", {}))
    with pytest.raises(ProtocolError, match="invalid task_id"):
        await ana.send_envelope(
            Envelope(ch.channel_id, ana.agent_id, None, EV_TEXT, {"text": "t"}, task_id="../x")
        )
    with pytest.raises(ProtocolError, match="invalid task_id"):
        await stranger.get_task("no/slash")
    # open reads stay open
    assert (await stranger.get_agent("ana")).name == "ana"
    assert (await stranger.health())["registered_agents"] == 3
    assert [
        e.event_data.get("text") for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT
    ] == ["private"]


async def test_tasks_are_visible_to_their_owner_only(hub, clients):
    a, stranger, op = clients(), clients(), clients(operator_token=OPERATOR)
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await stranger.register_human(Passport(name="eve", kind="human"))
    meta = TaskMetadata("t-1", ana.agent_id, TaskSpec(title="write"), TaskState.RUNNING)
    observed = await a.observe_task(meta)
    assert observed.task_id == "t-1"
    assert (await a.get_task("t-1")).owner_id == ana.agent_id
    assert [t.task_id for t in await a.list_tasks()] == ["t-1"]
    assert [t.task_id for t in await op.list_tasks()] == ["t-1"]
    with pytest.raises(NotFoundError, match="task not found: t-1"):
        await stranger.get_task("t-1")
    assert await stranger.list_tasks() == []
    with pytest.raises(AccessDeniedError):
        await stranger.update_task("t-1", state=TaskState.FAILED)
    with pytest.raises(AccessDeniedError):
        await stranger.observe_task(TaskMetadata("t-1", ana.agent_id, TaskSpec(title="x"), TaskState.RUNNING))
    done = await a.update_task("t-1", state=TaskState.COMPLETED, result="ok")
    assert done.state == TaskState.COMPLETED


def test_every_op_has_a_wire_rule():
    assert set(OPS) <= classified_ops(), sorted(set(OPS) - classified_ops())


# --- authentication ----------------------------------------------------------------------------------------


async def test_bad_operator_token_is_refused_and_closes(hub, server, clients):
    bad = clients(operator_token="wrong")
    with pytest.raises(AuthError, match="operator token mismatch"):
        await bad.open()
    r = await raw(server)
    await r.send({"kind": "hello", "name": "op", "auth_scheme": "operator", "auth_claim": {"token": "nope"}})
    # a request right behind the refused hello is never processed
    await r.send(
        {
            "kind": "request",
            "request_id": "x",
            "op": "register",
            "params": {"passport": Passport(name="sneaky", kind="human").to_dict()},
        }
    )
    error = await r.recv()
    assert error == {
        "kind": "error",
        "code": "auth_failed",
        "message": "operator token mismatch",
        "envelope_id": None,
    }
    with pytest.raises(ConnectionClosed):
        await r.recv()
    assert r.ws.close_code == 1008
    assert hub.find_agent_id("sneaky") is None
    good = clients(operator_token=OPERATOR)
    assert (await good.health())["registered_agents"] == 0


async def test_operator_role_on_servers_without_an_operator_token():
    hub = await Hub.open(None, auth=AuthRegistry([ApiKeyAuth({"ana": "k"})]), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as srv:
            insistent = HubClient.connect(srv.url(), operator=True)
            with pytest.raises(
                AccessDeniedError, match="the operator role needs this server's operator token"
            ):
                await insistent.open()
            await insistent.close()
            # by default the role is only asked for in passing: refused, the client works without it
            casual = HubClient.connect(srv.url())
            assert (await casual.health())["registered_agents"] == 0
            assert casual.link.is_operator is False
            with pytest.raises(AccessDeniedError, match="needs the operator role"):
                await casual.list_audit()
            await casual.close()
            guessing = HubClient.connect(srv.url(), operator_token="guess")
            with pytest.raises(AuthError, match="grants no operator role"):
                await guessing.open()
            await guessing.close()
    finally:
        await hub.close()
    hub = await Hub.open(None, **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as srv:
            # an open (loopback, 'none') server grants the role freely
            client = HubClient.connect(srv.url())
            assert await client.list_audit() == []
            assert client.link.is_operator is True
            plain = HubClient.connect(srv.url(), operator=False)
            with pytest.raises(AccessDeniedError, match="needs the operator role"):
                await plain.list_audit()
            await client.close()
            await plain.close()
    finally:
        await hub.close()


async def test_shared_token_server(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))  # identity secrets are kept in the data folder
    hub = await Hub.open(None, **quiet())
    try:
        async with serve_ws(hub, "0.0.0.0", 0, token="s3cret") as srv:
            url = f"ws://127.0.0.1:{srv.port}"
            good = HubClient.connect(url, token="s3cret")
            ana = await good.register_human(Passport(name="ana", kind="human"))
            assert hub.lookup_agent("ana").auth.scheme == "api_key"
            assert hub.lookup_agent("ana").auth.claim == {}
            ben = await good.register_human(Passport(name="ben", kind="human"))
            ch = await ana.open(type="conversation", target="ben")

            anon = HubClient.connect(url)
            with pytest.raises(AuthError, match="this server requires authentication"):
                await anon.register_human(Passport(name="eve", kind="human"))
            with pytest.raises(AuthError):  # the connection was closed: the link stays refused
                await anon.health()
            assert hub.find_agent_id("eve") is None

            wrong = HubClient.connect(url, token="guess")
            with pytest.raises(AuthError, match="token mismatch"):
                await wrong.register_human(Passport(name="eve", kind="human"))
            thief = HubClient.connect(url, token="guess")
            with pytest.raises(AuthError, match="token mismatch"):
                await thief.attach_human("ana")

            again = HubClient.connect(url, token="s3cret")  # finds ana's secret in the data folder
            ana2 = await again.attach_human("ana")
            await ana2.send(ch.channel_id, "still me")
            got = await ben.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
            assert got.event_data == {"text": "still me"}

            r = Raw(await ws_connect(url))
            await r.send(
                {"kind": "hello", "name": "ana", "auth_scheme": "api_key", "auth_claim": {"token": "x"}}
            )
            assert (await r.recv())["code"] == "auth_failed"
            with pytest.raises(ConnectionClosed):
                await r.recv()
            r = Raw(await ws_connect(url))
            await r.send({"kind": "hello", "name": "ana", "auth_scheme": "none", "auth_claim": {}})
            frame = await r.recv()
            assert frame["code"] == "auth_failed"
            assert frame["message"] == "auth scheme 'none' does not match 'ana''s registered scheme 'api_key'"
            r = Raw(await ws_connect(url))
            secret = again.link.secret_for("ana")
            claim = {"token": "s3cret", "secret": secret}
            await r.send({"kind": "hello", "name": "ana", "auth_scheme": "api_key", "auth_claim": claim})
            assert (await r.recv())["kind"] == "welcome"
            await r.ws.close()
            for client in (good, anon, wrong, thief, again):
                await client.close()
        assert hub.auth.schemes() == ["none"]  # the shared key goes away with the server
    finally:
        await hub.close()


async def test_per_name_api_keys_from_the_hub_registry():
    hub = await Hub.open(None, auth=AuthRegistry([ApiKeyAuth({"ana": "ana-key"})]), **quiet())
    try:
        async with serve_ws(hub, "0.0.0.0", 0) as srv:
            url = f"ws://127.0.0.1:{srv.port}"
            client = HubClient.connect(url, token="ana-key")
            ana = await client.register_human(Passport(name="ana", kind="human"))
            assert ana.agent_id
            other = HubClient.connect(url)
            with pytest.raises(AuthError):
                await other.register_human(
                    Passport(
                        name="ana2",
                        kind="human",
                        auth=AuthBlock(scheme="api_key", claim={"token": "ana-key"}),
                    )
                )
            await client.close()
            await other.close()
    finally:
        await hub.close()


async def test_unauthenticated_server_is_loopback_only(hub, caplog):
    with pytest.raises(
        ValueError, match=re.escape("serve_ws on '0.0.0.0' would accept the 'none' auth scheme")
    ):
        async with serve_ws(hub, "0.0.0.0", 0):
            pass
    with caplog.at_level(logging.WARNING, logger="ag2net.server"):
        async with serve_ws(hub, "0.0.0.0", 0, allow_unauthenticated=True) as srv:
            client = HubClient.connect(f"ws://127.0.0.1:{srv.port}")
            assert (await client.health())["registered_agents"] == 0
            await client.close()
    assert "accepts the 'none' auth scheme from any host" in caplog.text
    with pytest.raises(ValueError, match="already has one"):
        async with serve_ws(await _api_hub(), "127.0.0.1", 0, token="t"):
            pass


async def _api_hub():
    hub = Hub(None, auth=AuthRegistry([NoAuth(), ApiKeyAuth({})]))
    return hub


# --- malformed and oversized input -------------------------------------------------------------------------


async def test_malformed_frames_get_protocol_error_and_the_connection_stays(hub, server):
    r = await raw(server)
    await r.send("this is not json")
    frame = await r.recv()
    assert frame["kind"] == "error" and frame["code"] == "protocol_error"
    assert frame["message"].startswith("frame is not valid JSON")
    await r.send({"kind": "zzz"})
    assert (await r.recv())["message"] == "unknown frame kind: 'zzz'"
    await r.send([1, 2])
    assert (await r.recv())["message"] == "frame must be a JSON object, got list"
    await r.send({"kind": "hello", "name": 7})
    assert (await r.recv())["message"] == "malformed hello frame: name"
    await r.send({"kind": "receipt", "envelope_id": 1, "status": "ack"})
    assert (await r.recv())["message"] == "malformed receipt frame: envelope_id"
    await r.send({"kind": "request", "request_id": "bad", "op": "health", "params": []})
    reply = await r.recv()
    assert reply == {
        "kind": "response",
        "request_id": "bad",
        "ok": False,
        "result": None,
        "error_code": "protocol_error",
        "error_message": "malformed request frame: params",
    }
    await r.send(b"\xff\xfe binary")
    assert (await r.recv())["code"] == "protocol_error"
    await r.send({"kind": "welcome", "endpoint_id": "x", "hub_time": "t"})
    assert (await r.recv())["message"] == "a client does not send welcome frames"
    assert (await r.request("nope", {}, "u"))["error_message"] == "unknown control-plane op: 'nope'"
    assert (await r.request("read_wal_seq", {"channel_id": "c"}, "k"))["error_code"] in (
        "protocol_error",
        "not_found",
    )
    await r.send({"kind": "ping"})
    assert await r.recv() == {"kind": "pong"}
    ok = await r.request("health", {}, "fine")
    assert ok["ok"] is True and ok["result"]["registered_agents"] == 0


async def test_oversized_message_closes_only_that_connection(hub):
    async with serve_ws(hub, "127.0.0.1", 0, max_message_bytes=64 * 1024) as srv:
        other = HubClient.connect(srv.url())
        ana = await other.register_human(Passport(name="ana", kind="human"))
        r = Raw(await ws_connect(srv.url(), max_size=None))
        await r.send(
            {"kind": "request", "request_id": "big", "op": "health", "params": {"pad": "x" * 100_000}}
        )
        with pytest.raises(ConnectionClosed):
            await r.recv()
        assert r.ws.close_code == 1009
        assert (await other.get_agent("ana")).agent_id == ana.agent_id
        await other.close()


async def test_envelope_over_the_admission_limit_is_refused(hub, clients):
    a, b = clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await b.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    with pytest.raises(ProtocolError, match="event_data"):
        await ana.send_envelope(
            Envelope(ch.channel_id, ana.agent_id, None, EV_TEXT, {"text": "x" * 1_100_000})
        )
    assert await a.health()


# --- ag2-compatible hello / replay, reconnect ----------------------------------------------------------------


async def test_hello_rebinds_and_replays_what_was_missed(hub, server, clients):
    a = clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    local = HubClient.local(hub)
    ben = await local.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    first = await ben.send(ch.channel_id, "one")
    await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    await a.close()
    await until(lambda: ana.agent_id not in hub.delivery.bindings)
    missed = [await ben.send(ch.channel_id, f"missed {i}") for i in range(3)]
    r = await raw(server)
    await r.send({"kind": "hello", "name": "nobody"})
    assert await r.recv() == {
        "kind": "error",
        "code": "not_found",
        "message": "unknown name: nobody",
        "envelope_id": None,
    }
    await r.send({"kind": "hello", "name": "ana", "since_envelope_id": first})
    welcome = await r.recv()
    assert welcome["kind"] == "welcome" and welcome["endpoint_id"]
    got = [await r.recv() for _ in missed]
    assert [f["envelope"]["envelope_id"] for f in got] == missed
    assert all(f["kind"] == "notify" and f["recipient_id"] == ana.agent_id for f in got)
    live = await ben.send(ch.channel_id, "live")
    assert (await r.recv())["envelope"]["envelope_id"] == live
    await local.close()


async def test_link_reconnects_and_catches_up(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        port = srv.port
        a = HubClient.connect(srv.url(), reconnect_initial_delay=0.02, reconnect_max_delay=0.1)
        ana = await a.register_human(Passport(name="ana", kind="human"))
        local = HubClient.local(hub)
        ben = await local.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")
        got: list[str] = []

        async def keep(env):
            if env.event_type == EV_TEXT:
                got.append(env.envelope_id)

        ana.on_envelope(keep)
        sent = [await ben.send(ch.channel_id, "before")]
        await until(lambda: len(got) == 1)
    # the server is gone: the link keeps trying while ben goes on talking
    sent += [await ben.send(ch.channel_id, f"while away {i}") for i in range(5)]
    with pytest.raises(ConnectionLostError):
        await _unreachable(a)
    async with serve_ws(hub, "127.0.0.1", port):
        await until(lambda: len(got) == 6)
        sent.append(await ben.send(ch.channel_id, "after"))
        await until(lambda: len(got) == 7)
        assert got == sent
        assert a.link.reconnects >= 1
        await ana.send(ch.channel_id, "ana is back")
        await until(lambda: hub.inbox_cursor(ana.agent_id, ch.channel_id) == sent[-1])
        await a.close()
    await local.close()


async def _unreachable(client: HubClient) -> None:
    client.link.rpc_timeout = 0.2
    try:
        await client.health()
    finally:
        client.link.rpc_timeout = 10


async def test_closed_link_refuses_calls(hub, server):
    client = HubClient.connect(server.url())
    await client.open()
    await client.close()
    with pytest.raises(RuntimeError, match="HubClient is closed"):
        await client.health()
    link = WsLink(server.url())
    with pytest.raises(RuntimeError, match="not open"):
        await link.request("health", {})
    with pytest.raises(ConnectionLostError, match=re.escape("cannot connect to ws://127.0.0.1:1:")):
        await HubClient.connect("ws://127.0.0.1:1").open()
    with pytest.raises(ValueError, match="is not a WebSocket URL"):
        await HubClient.connect("http://127.0.0.1:1").open()


async def test_serve_cli_prints_how_to_attach_without_tokens(hub):
    lines: list[str] = []
    task = asyncio.create_task(
        serve_cli(hub, "127.0.0.1", 0, token="tok-123", operator_token="op-456", echo=lines.append)
    )
    await until(lambda: len(lines) >= 2)
    text = "\n".join(lines)
    assert "ag2net tui --connect ws://127.0.0.1:" in text
    assert "--token <token>" in text and "--operator-token <operator token>" in text
    assert "tok-123" not in text and "op-456" not in text
    url = lines[0].split()[-1]
    client = HubClient.connect(url, token="tok-123", operator_token="op-456")
    assert await client.list_audit() == []
    await client.close()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_observe_resumes_across_reconnects_and_hub_restarts(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        port = srv.port
        op = HubClient.connect(
            srv.url(), operator=True, reconnect_initial_delay=0.02, reconnect_max_delay=0.1
        )
        local = HubClient.local(hub)
        seen: list = []
        stream = op.observe(since=0)

        async def watch():
            async for ev in stream:
                seen.append(ev)

        watcher = asyncio.create_task(watch())
        await local.register_human(Passport(name="p0", kind="human"))
        await until(lambda: any(ev.payload.get("name") == "p0" for ev in seen if ev.kind == "agent"))
    # server down: the same hub keeps going, then comes back on the same port
    await local.register_human(Passport(name="p1", kind="human"))
    async with serve_ws(hub, "127.0.0.1", port):
        await local.register_human(Passport(name="p2", kind="human"))
        # registrations (binding a human to its connection is an agent event too: bound)
        await until(
            lambda: sum(ev.kind == "agent" and ev.payload.get("kind") == "registered" for ev in seen) == 3
        )
        positions = [ev.position for ev in seen]
        assert positions == list(range(1, len(positions) + 1))  # no gap, no duplicate
    # a different hub (a restarted process) on the same port: its stream starts over
    other = await Hub.open(None, **quiet())
    try:
        async with serve_ws(other, "127.0.0.1", port):
            await HubClient.local(other).register_human(Passport(name="fresh", kind="human"))
            await until(
                lambda: any(
                    ev.kind == "agent"
                    and ev.payload.get("name") == "fresh"
                    and ev.payload.get("kind") == "registered"
                    for ev in seen[len(positions) :]
                )
            )
            tail = seen[len(positions) :]
            assert [ev.position for ev in tail] == list(range(1, len(tail) + 1))
            # the counter moves once the re-handshake is done; events of the new stream may come first
            await until(lambda: op.link.reconnects >= 2)
            assert op.link.reconnects == 2
            watcher.cancel()
            await op.close()
    finally:
        await other.close()
        await local.close()

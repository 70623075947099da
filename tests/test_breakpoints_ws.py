"""Breakpoints over a real WebSocket on 127.0.0.1: a held post does not time out an ag2net client (the hub
tells it the post is held), the operator ops are operators' only, a participant never sees the spec, and
the server signs answers with the connection's name (``by``)."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect as ws_connect

from ag2net import HubClient, Passport
from ag2net.envelope import Envelope
from ag2net.errors import AccessDeniedError, NetworkError
from ag2net.protocol import ops
from ag2net.server import serve_ws

OPERATOR = "op-secret-bp"
NOTE = "demo.note"
pytestmark = pytest.mark.hub(store="sqlite", invite_ack_timeout=30)


@pytest.fixture
async def server(hub):
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as srv:
        yield srv


async def waiting(hub, n: int = 1):
    for _ in range(2000):
        items = await hub.list_waiting()
        if len(items) >= n:
            return items
        await asyncio.sleep(0.005)
    raise AssertionError("nothing was held")


async def network(hub, server, **kw):
    local = HubClient.local(hub)
    ana = await local.register_human(Passport(name="ana", kind="human"))
    remote = HubClient.connect(server.url(), **kw)
    ben = await remote.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="discussion", target=["ben"])
    return local, remote, ana, ben, ch.channel_id


async def test_a_held_post_outlives_the_clients_rpc_timeout(hub, server):
    _local, remote, _ana, ben, cid = await network(hub, server, rpc_timeout=1)
    op = HubClient.connect(server.url(), operator_token=OPERATOR, rpc_timeout=10)
    try:
        await op.break_on("sender:ben", by="mallory")  # the server signs it, whatever the caller says
        (bp,) = await hub.list_breakpoints()
        assert bp.created_by == "operator"
        post = asyncio.create_task(
            remote.post_envelope(Envelope(cid, ben.agent_id, None, NOTE, {"text": "x"}))
        )
        (item,) = await waiting(hub)
        await asyncio.sleep(3)  # three times the client's rpc_timeout
        assert not post.done()
        (listed,) = await op.list_waiting()
        assert listed.item_id == item.item_id and listed.detail["envelope"]["event_data"] == {"text": "x"}
        answered = await op.answer_waiting(item.item_id, "release", by="mallory")
        assert answered.answer["by"] == "operator"
        envelope_id = await post
        assert [e.envelope_id for e in await hub.read_wal(cid)][-1] == envelope_id
    finally:
        await op.close()
        await remote.close()


async def test_without_a_hold_the_rpc_timeout_still_fires(hub, server):
    """The notice is what keeps a request alive: an op the hub never answers times out as before."""
    _local, remote, _ana, ben, cid = await network(hub, server, rpc_timeout=1)
    try:
        never: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def stuck(*_a, **_k):
            await never

        hub.turn_gate = stuck  # type: ignore[method-assign]  # the hub's behaviour of one op, stalled
        with pytest.raises(TimeoutError):
            await remote.turn_gate(ben.agent_id, cid)
    finally:
        await remote.close()


async def test_operator_ops_are_refused_to_participants(hub, server):
    _local, remote, _ana, ben, cid = await network(hub, server, rpc_timeout=10)
    try:
        for request in (
            ops.BreakOn("sender:ana"),
            ops.ListBreakpoints(),
            ops.ListWaiting(),
            ops.StepMode(cid),
            ops.AnswerWaiting("x", "release"),
            ops.PauseExpectations(cid),
        ):
            with pytest.raises(AccessDeniedError, match="needs the operator role"):
                await remote.request(request)
        # an agent's own turn ops are its own: another connection's agent is refused
        with pytest.raises(AccessDeniedError):
            await remote.turn_gate(_ana.agent_id, cid)
        assert await remote.turn_gate(ben.agent_id, cid) is False
    finally:
        await remote.close()


async def test_a_participant_is_told_its_post_is_held_never_the_spec(hub, server):
    local = HubClient.local(hub)
    ana = await local.register_human(Passport(name="ana", kind="human"))
    await HubClient.local(hub).register_human(Passport(name="cy", kind="human"))
    ch = await ana.open(type="discussion", target=["cy"])
    await hub.break_on('sender:cy text:"secret spec words"')
    ws = await ws_connect(server.url())
    try:
        await ws.send(json.dumps({"kind": "hello", "name": "cy", "auth_scheme": "none", "auth_claim": {}}))
        assert json.loads(await ws.recv())["kind"] == "welcome"
        cy_id = hub.find_agent_id("cy")
        env = Envelope(ch.channel_id, cy_id, None, NOTE, {"text": "secret spec words"}).to_dict()
        request = {"envelope": env, "held_notice": True}
        await ws.send(
            json.dumps({"kind": "request", "request_id": "r1", "op": "post_envelope", "params": request})
        )
        notice = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert notice["kind"] == "held" and notice["request_id"] == "r1" and notice["reason"] == "breakpoint"
        assert "secret spec" not in json.dumps(notice) and "breakpoint_id" not in notice
        (item,) = await hub.list_waiting()
        assert notice["item_id"] == item.item_id and notice["would_be_seq"] == item.detail["would_be_seq"]
        await hub.answer_waiting(item.item_id, "drop", reason="not now", by="ops")
        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert answer["kind"] == "response" and answer["ok"] is False
        assert answer["error_message"] == "dropped at a breakpoint by ops: not now"
    finally:
        await ws.close()


async def test_an_ag2_style_request_gets_no_notice(hub, server):
    """Without ``held_notice`` (an ag2 1.2.1 client) the hub sends nothing but the answer."""
    local = HubClient.local(hub)
    ana = await local.register_human(Passport(name="ana", kind="human"))
    await HubClient.local(hub).register_human(Passport(name="cy", kind="human"))
    ch = await ana.open(type="discussion", target=["cy"])
    await hub.break_on("sender:cy")
    ws = await ws_connect(server.url())
    try:
        await ws.send(json.dumps({"kind": "hello", "name": "cy", "auth_scheme": "none", "auth_claim": {}}))
        assert json.loads(await ws.recv())["kind"] == "welcome"
        env = Envelope(ch.channel_id, hub.find_agent_id("cy"), None, NOTE, {"text": "x"}).to_dict()
        await ws.send(
            json.dumps(
                {"kind": "request", "request_id": "r1", "op": "post_envelope", "params": {"envelope": env}}
            )
        )
        (item,) = await waiting(hub)
        await hub.answer_waiting(item.item_id, "release")
        answer = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert answer["kind"] == "response" and answer["ok"] is True
    finally:
        await ws.close()


async def test_a_paused_turn_and_an_approval_have_no_rpc_timeout(hub, server):
    _local, remote, _ana, ben, cid = await network(hub, server, rpc_timeout=1)
    try:
        await hub.break_on("agent:ben", on="turn")
        assert await remote.turn_gate(ben.agent_id, cid) is True
        turn = asyncio.create_task(remote.pause_turn(ben.agent_id, cid, {"messages": []}))
        approval = asyncio.create_task(remote.request_approval(ben.agent_id, cid, "rm", {"path": "x"}))
        items = await waiting(hub, 2)
        await asyncio.sleep(2)  # twice the client's rpc_timeout
        assert not turn.done() and not approval.done()
        by_kind = {i.kind: i for i in items}
        await hub.answer_waiting(by_kind["turn"].item_id, "skip", by="ops")
        await hub.answer_waiting(by_kind["approval"].item_id, "edit", arguments={"path": "y"}, by="ops")
        assert (await turn).action == "skip"
        decision = await approval
        assert (decision.action, decision.arguments, decision.by) == ("edit", {"path": "y"}, "ops")
    finally:
        await remote.close()


async def test_a_hub_stop_tells_the_remote_sender(hub, server):
    _local, remote, _ana, ben, cid = await network(hub, server, rpc_timeout=1)
    try:
        await hub.break_on("sender:ben")
        post = asyncio.create_task(
            remote.post_envelope(Envelope(cid, ben.agent_id, None, NOTE, {"text": "x"}))
        )
        await waiting(hub)
        await asyncio.sleep(1.5)
        hub.stepping.stop()  # what Hub.close does first
        with pytest.raises(NetworkError, match="the hub stopped while this post was held at a breakpoint"):
            await post
    finally:
        await remote.close()

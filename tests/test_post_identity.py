"""A post carries only an identity its own connection holds (issue 22 item 7, SPEC decision 26).

In-process as over the wire: a client cannot forge another participant into the WAL, whichever way it
reaches the hub (``send_envelope``, ``HubClient.post_envelope``, a ``LocalLinkClient`` used by hand, ag2's
frame-level seam), and the embedded workbench (an operator) posts as its own human only. ag2 1.2.1 admits
any sender in-process.
"""

from __future__ import annotations

import asyncio

import pytest

from ag2net import EV_TEXT, AccessDeniedError, Envelope, HubClient, Passport
from ag2net.hub import Hub
from ag2net.hub.local import LocalLink
from ag2net.protocol.frames import HelloFrame, RequestFrame, ResponseFrame
from ag2net.server import serve_ws


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


pytestmark = pytest.mark.hub(store="memory")


def forged(cid: str, sender_id: str, text: str = "forged") -> Envelope:
    return Envelope(
        channel_id=cid, sender_id=sender_id, audience=None, event_type=EV_TEXT, event_data={"text": text}
    )


async def two_people(hub: Hub):
    a, b = HubClient.local(hub), HubClient.local(hub)
    alice = await a.register_human(Passport(name="alice", kind="human"))
    bob = await b.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    return (a, b), (alice, bob), ch.channel_id


async def test_in_process_a_client_cannot_post_as_another_participant(hub):
    (a, b), (alice, bob), cid = await two_people(hub)
    try:
        before = await hub.read_wal(cid)
        with pytest.raises(AccessDeniedError, match="does not hold 'bob'"):
            await alice.send_envelope(forged(cid, bob.agent_id))
        with pytest.raises(AccessDeniedError, match="does not hold 'bob'"):
            await a.post_envelope(forged(cid, bob.agent_id))
        assert [e.envelope_id for e in await hub.read_wal(cid)] == [e.envelope_id for e in before]
        # each posts as itself
        await alice.send_envelope(forged(cid, alice.agent_id, "mine"))
        await bob.send_envelope(forged(cid, bob.agent_id, "mine too"))
        assert [e.sender_id for e in (await hub.read_wal(cid))[-2:]] == [alice.agent_id, bob.agent_id]
    finally:
        await a.close()
        await b.close()


async def test_the_embedded_workbench_posts_as_its_own_human_only(hub):
    """``HubClient.local(hub)`` is the operator of its hub (it reads everything), and still posts only as
    the identities its connection holds."""
    (a, b), (alice, bob), cid = await two_people(hub)
    bench = HubClient.local(hub)
    try:
        me = await bench.register_human(Passport(name="me", kind="human"))
        ch = await me.open(type="conversation", target="alice")
        await me.send(ch.channel_id, "hello from the workbench")
        with pytest.raises(AccessDeniedError, match="does not hold 'alice'"):
            await bench.post_envelope(forged(ch.channel_id, alice.agent_id))
        with pytest.raises(AccessDeniedError, match="does not hold 'bob'"):
            await bench.post_envelope(forged(cid, bob.agent_id))
    finally:
        for client in (a, b, bench):
            await client.close()


async def test_a_connection_made_by_hand_is_held_to_the_same_rule(hub):
    """A ``LocalLinkClient`` straight from ``LocalLink(hub).client()``, never opened, is a connection (not
    the hub itself): it holds no identity, so it posts as nobody."""
    (a, b), (alice, bob), cid = await two_people(hub)
    raw = LocalLink(hub).client()
    try:
        with pytest.raises(AccessDeniedError, match="does not hold 'bob'"):
            await raw.request("post_envelope", {"envelope": forged(cid, bob.agent_id)})
        # ag2's frame-level seam: hello binds alice to the connection; it may post as alice, not as bob
        await raw.send_frame(HelloFrame(name="alice"))
        frames = raw.frames()
        assert (await asyncio.wait_for(anext(frames), 5)).kind == "welcome"
        await raw.send_frame(RequestFrame("r1", "post_envelope", {"envelope": forged(cid, bob.agent_id)}))
        await raw.send_frame(RequestFrame("r2", "post_envelope", {"envelope": forged(cid, alice.agent_id)}))
        answers: dict[str, ResponseFrame] = {}
        while len(answers) < 2:
            frame = await asyncio.wait_for(anext(frames), 5)
            if isinstance(frame, ResponseFrame):
                answers[frame.request_id] = frame
        assert not answers["r1"].ok and answers["r1"].error_code == "access_denied"
        assert answers["r2"].ok
    finally:
        await raw.close()
        await a.close()
        await b.close()


async def test_over_the_wire_an_operator_posts_only_as_its_own_identities(hub):
    async with serve_ws(hub, "127.0.0.1", 0, operator_token="op") as server:
        a = HubClient.connect(server.url(), rpc_timeout=10)
        op = HubClient.connect(server.url(), operator_token="op", rpc_timeout=10)
        b = HubClient.local(hub)
        try:
            alice = await a.register_human(Passport(name="alice", kind="human"))
            bob = await b.register_human(Passport(name="bob", kind="human"))
            cid = (await alice.open(type="conversation", target="bob")).channel_id
            with pytest.raises(AccessDeniedError):
                await op.post_envelope(forged(cid, alice.agent_id))
            with pytest.raises(AccessDeniedError):
                await a.post_envelope(forged(cid, bob.agent_id))
            assert all(e.event_data.get("text") != "forged" for e in await hub.read_wal(cid))
        finally:
            for client in (a, op, b):
                await client.close()

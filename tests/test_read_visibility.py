"""Reads follow the audience (issue 21 item 12, SPEC decision 25): over the wire, every read of envelopes
gives a participant only the envelopes one of its identities could see (``visible_to``); operators see all.

A three-party discussion on a real server (127.0.0.1): alice tells bob something privately; carol, a
co-participant on her own connection, never gets it through any read (``read_wal``, ``read_wal_seq``,
``read_wal_until``, ``find_envelope_by_causation``, a dry run's projections, the replay a ``hello`` with
``since_envelope_id`` asks for), while bob and an operator do. ag2 1.2.1 gave carol everything.
"""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from support import quiet, until
from websockets.asyncio.client import connect as ws_connect

from ag2net import EV_TEXT, Envelope, HubClient, Passport, visible_to
from ag2net.hub import Hub
from ag2net.protocol.codec import ListOf, Record, TupleOf
from ag2net.protocol.ops import OPS
from ag2net.server import serve_ws
from ag2net.server.policy import ENVELOPE_READS

OPERATOR = "op-secret-25"
SECRET = "the vault code is 7d80"


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
async def served():
    hub = await Hub.open(None, **quiet())
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
        yield hub, server
    await hub.close()


def texts(envelopes) -> list[str]:
    return [e.event_data.get("text", "") for e in envelopes if e.event_type == EV_TEXT]


async def discussion(server):
    """alice, bob and carol, each on a connection of their own; alice tells bob a secret, bob answers it
    (also privately); carol speaks next."""
    a, b, c = (HubClient.connect(server.url(), rpc_timeout=10) for _ in range(3))
    alice = await a.register_human(Passport(name="alice", kind="human"))
    bob = await b.register_human(Passport(name="bob", kind="human"))
    carol = await c.register_human(Passport(name="carol", kind="human"))
    ch = await alice.open(type="discussion", target=["bob", "carol"])
    cid = ch.channel_id
    private = await alice.send(cid, SECRET, audience=["bob"])
    answer = await bob.send(cid, "noted", audience=["alice"], causation_id=private)
    return (a, b, c), (alice, bob, carol), cid, private, answer


async def test_a_co_participant_never_reads_an_envelope_addressed_to_someone_else(served):
    hub, server = served
    operator = HubClient.connect(server.url(), operator_token=OPERATOR, rpc_timeout=10)
    (a, b, c), (alice, bob, carol), cid, private, answer = await discussion(server)
    try:
        # a dry run of carol's own post (her turn now) shows her only her own projection: bob's and
        # alice's projections hold what they were told privately
        probe = Envelope(cid, carol.agent_id, None, EV_TEXT, {"text": "dry"})
        dry = await c.call("dry_run", envelope=probe)
        assert set(dry["projections"]) == {carol.agent_id}
        every = await operator.call("dry_run", envelope=probe)
        assert set(every["projections"]) == {alice.agent_id, bob.agent_id, carol.agent_id}
        await carol.send(cid, "hello everyone")
        everything = await hub.read_wal(cid)
        n = len(everything)
        assert SECRET in texts(everything)
        # carol: not in read_wal, read_wal_seq, read_wal_until, find_envelope_by_causation
        seen = await c.read_wal(cid)
        assert SECRET not in texts(seen) and "noted" not in texts(seen)
        assert "hello everyone" in texts(seen)
        assert private not in {e.envelope_id for e in seen}
        pairs = await c.read_wal_seq(cid, 1, n)
        assert private not in {e.envelope_id for _, e in pairs}
        # the seqs are the WAL's own, minus those carol could not see (bob's invite, the two private ones)
        full = await operator.read_wal_seq(cid, 1, n)
        assert [seq for seq, _ in pairs] == [seq for seq, e in full if visible_to(e, carol.agent_id)]
        assert len(pairs) == len(full) - 3
        until = await c.read_wal_until(cid, answer)
        assert SECRET not in texts(until) and "noted" not in texts(until)
        assert await c.find_envelope_by_causation(cid, sender_id=bob.agent_id, causation_id=private) is None
        # bob reads what was addressed to him, and his own answer
        bobs = texts(await b.read_wal(cid))
        assert SECRET in bobs and "noted" in bobs
        assert (
            await b.find_envelope_by_causation(cid, sender_id=bob.agent_id, causation_id=private)
        ) is not None
        # the operator reads everything
        assert [e.envelope_id for e in await operator.read_wal(cid)] == [e.envelope_id for e in everything]
        assert (
            await operator.find_envelope_by_causation(cid, sender_id=bob.agent_id, causation_id=private)
        ) is not None
    finally:
        for client in (a, b, c, operator):
            await client.close()


async def test_a_replay_on_hello_gives_carol_only_what_she_could_see(served):
    """carol is away while alice tells bob a secret and bob tells everyone something; her ``hello`` with
    ``since_envelope_id`` (a raw socket, as ag2 1.2.1 clients send it) replays the public one only."""
    hub, server = served
    a, b, c = (HubClient.connect(server.url(), rpc_timeout=10) for _ in range(3))
    try:
        alice = await a.register_human(Passport(name="alice", kind="human"))
        bob = await b.register_human(Passport(name="bob", kind="human"))
        carol = await c.register_human(Passport(name="carol", kind="human"))
        cid = (await alice.open(type="discussion", target=["bob", "carol"])).channel_id
        await c.close()
        await until(lambda: carol.agent_id not in hub.delivery.bindings)
        private = await alice.send(cid, SECRET, audience=["bob"])
        public = await bob.send(cid, "lunch at noon")
        got: list[dict] = []
        async with ws_connect(server.url()) as ws:
            hello = {
                "kind": "hello",
                "name": "carol",
                "auth_scheme": "none",
                "auth_claim": {},
                "since_envelope_id": "",
            }
            await ws.send(json.dumps(hello))
            deadline = time.monotonic() + 10
            while public not in {f["envelope"]["envelope_id"] for f in got}:
                assert time.monotonic() < deadline, f"no replay of the public envelope: {got}"
                frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
                if frame.get("kind") == "notify":
                    got.append(frame)
        replayed = {f["envelope"]["envelope_id"] for f in got}
        assert public in replayed and private not in replayed
    finally:
        for client in (a, b, c):
            await client.close()


def test_every_op_whose_answer_decodes_an_envelope_is_narrowed():
    """A new op returning envelopes must be added to ``ENVELOPE_READS`` (or it would leak them)."""

    def holds_envelopes(codec) -> bool:
        if isinstance(codec, Record):
            return codec.cls is Envelope
        if isinstance(codec, ListOf):
            return holds_envelopes(codec.item)
        if isinstance(codec, TupleOf):
            return any(holds_envelopes(i) for i in codec.items)
        return False

    decoding = {name for name, spec in OPS.items() if holds_envelopes(spec.result)}
    assert decoding  # read_wal at least
    assert decoding <= ENVELOPE_READS

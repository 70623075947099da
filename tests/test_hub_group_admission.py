"""Group admission: posts queued on one channel's gate are admitted together (one all-or-nothing store
group) and every post sees what it would see one by one: order, refusals, inbox caps, closes."""

from __future__ import annotations

import asyncio

import pytest

from ag2net import Hub, HubClient, Passport
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import InboxFull, ProtocolError
from ag2net.identity import InboxBlock, LimitsBlock, Rule
from ag2net.naming import channel_label
from ag2net.store import MemoryStore, SqliteStore
from ag2net.store.base import StoreError


class CountingStore(SqliteStore):
    """The real SQLite store, counting group appends (and failing them on demand)."""

    def __init__(self, path):
        super().__init__(path)
        self.groups: list[int] = []
        self.fail_groups = False

    async def append_group(self, channel_id, items):
        self.groups.append(len(items))
        if self.fail_groups:
            raise StoreError("the disk is full (a fault injected by the test)")
        return await super().append_group(channel_id, items)


pytestmark = pytest.mark.hub(store=CountingStore, invite_ack_timeout=30)


async def two_humans(hub: Hub, **open_kw):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben", **open_kw)
    return ana, ben, ch.channel_id


def text(cid: str, sender: str, i: int) -> Envelope:
    return Envelope(cid, sender, None, EV_TEXT, {"text": f"m{i}"})


async def test_concurrent_posts_share_store_groups_and_keep_their_order(hub):
    ana, _ben, cid = await two_humans(hub)
    envs = [text(cid, ana.agent_id, i) for i in range(200)]
    ids = await asyncio.gather(*(hub.post_envelope(e) for e in envs))
    wal = [e for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert [e.event_data["text"] for e in wal] == [f"m{i}" for i in range(200)]  # the order they were posted
    assert [e.envelope_id for e in wal] == ids == sorted(ids)
    assert hub.wal_count(cid) == len(await hub.read_wal(cid))
    assert hub.store.groups and max(hub.store.groups) > 1, "no posts were admitted together"
    assert sum(hub.store.groups) <= 200
    assert hub.adapter_state(cid).last_envelope_id == ids[-1]
    # the state is the fold of the WAL: a fresh hub folding the file agrees
    path = hub.store.path
    await hub.close()
    again = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        assert again.adapter_state(cid) == hub.adapter_state(cid)
    finally:
        await again.close()


class SilentEndpoint:
    endpoint_id = "silent"

    def __init__(self):
        self.bound: set[str] = set()
        self.got: list[Envelope] = []

    async def notify(self, recipient_id, envelope):
        self.got.append(envelope)

    async def close(self):
        pass


async def test_a_full_inbox_refuses_the_same_posts_as_one_by_one(hub):
    ana, ben, cid = await two_humans(hub)
    await hub.set_rule(ben.agent_id, Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=5))))
    silent = SilentEndpoint()
    hub.attach_endpoint(silent)
    hub.bind_endpoint(silent, ben.agent_id)  # delivers, never acknowledges
    pending_before = hub.pending_inbox(ben.agent_id)
    outcomes = await asyncio.gather(
        *(hub.post_envelope(text(cid, ana.agent_id, i)) for i in range(20)), return_exceptions=True
    )
    admitted = [o for o in outcomes if isinstance(o, str)]
    refused = [o for o in outcomes if not isinstance(o, str)]
    assert len(admitted) == 5 - pending_before
    assert outcomes[: len(admitted)] == admitted  # the first ones in line, as one by one
    assert all(isinstance(r, InboxFull) for r in refused)
    assert str(refused[0]) == "recipient ben inbox at capacity (5 >= 5)"


async def test_a_post_that_closes_the_channel_ends_the_group(hub):
    ana, ben, cid = await two_humans(hub, knobs={"max_turns": 3})
    outcomes = await asyncio.gather(
        *(hub.post_envelope(text(cid, ana.agent_id, i)) for i in range(10)), return_exceptions=True
    )
    assert all(isinstance(o, str) for o in outcomes[:3])
    assert all(isinstance(o, ProtocolError) and "closed" in str(o) for o in outcomes[3:])
    assert hub.lookup_channel(cid).is_terminal()
    wal = await hub.read_wal(cid)
    assert [e.event_data.get("text") for e in wal if e.event_type == EV_TEXT] == ["m0", "m1", "m2"]


async def test_a_close_waiting_for_the_gate_is_not_overtaken(hub):
    ana, _ben, cid = await two_humans(hub)
    first = [asyncio.ensure_future(hub.post_envelope(text(cid, ana.agent_id, i))) for i in range(5)]
    await asyncio.sleep(0)  # the first post holds the gate, the next ones wait behind it
    close = asyncio.ensure_future(hub.close_channel(cid, reason="done"))
    await asyncio.sleep(0)
    later = [asyncio.ensure_future(hub.post_envelope(text(cid, ana.agent_id, i))) for i in range(5, 10)]
    await asyncio.gather(*first, close, *later, return_exceptions=True)
    assert all(isinstance(f.result(), str) for f in first)
    assert all(isinstance(f.exception(), ProtocolError) for f in later)
    texts = [e.event_data.get("text") for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert texts == [f"m{i}" for i in range(5)]


async def test_a_failed_store_group_admits_each_post_on_its_own(hub):
    ana, _ben, cid = await two_humans(hub)
    hub.store.fail_groups = True
    ids = await asyncio.gather(*(hub.post_envelope(text(cid, ana.agent_id, i)) for i in range(30)))
    assert hub.store.groups, "the group path was not taken"
    wal = [e for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert [e.envelope_id for e in wal] == ids
    assert [e.event_data["text"] for e in wal] == [f"m{i}" for i in range(30)]
    assert hub.wal_count(cid) == len(await hub.read_wal(cid))


async def test_a_refused_post_in_a_group_does_not_touch_the_others(hub):
    ana, ben, cid = await two_humans(hub)
    hc = HubClient.local(hub)
    cy = await hc.register_human(Passport(name="cy", kind="human"))
    envs = [text(cid, ana.agent_id if i != 3 else cy.agent_id, i) for i in range(8)]
    outcomes = await asyncio.gather(*(hub.post_envelope(e) for e in envs), return_exceptions=True)
    assert isinstance(outcomes[3], ProtocolError)
    assert str(outcomes[3]) == (
        f"{channel_label(hub.lookup_channel(cid).manifest.type, cid)} only accepts sends from participants, got cy"
    )
    texts = [e.event_data.get("text") for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert texts == [f"m{i}" for i in range(8) if i != 3]


async def test_the_memory_store_appends_a_group_all_or_none():
    store = MemoryStore()
    await store.open()
    assert await store.append_group("c", [("e1", "{}"), ("e2", "{}")]) == [1, 2]
    with pytest.raises(StoreError):
        await store.append_group("c", [("e3", "{}"), ("e1", "{}")])
    assert await store.wal_count("c") == 2
    assert await store.append("c", "e3", "{}") == 3

"""Admission's uncontended path: a post into a channel whose lock is free and has nobody queued is a group
of one and goes straight to the plain append (no queued-post bookkeeping); posts that find the lock
held still form groups, and a failed commit fails exactly the posts it held, on real SQLite."""

from __future__ import annotations

import asyncio

import pytest

from ag2net import Hub, HubClient, Passport
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.store import SqliteStore
from ag2net.store.base import StoreError


class FaultyStore(SqliteStore):
    """The real SQLite store; counts plain and group appends and fails the appends of marked texts."""

    def __init__(self, path):
        super().__init__(path)
        self.appends = 0
        self.groups: list[int] = []
        self.poison = "#poisoned#"

    async def append(self, channel_id, envelope_id, envelope_json):
        self.appends += 1
        if self.poison in envelope_json:
            raise StoreError("the disk is full (a fault injected by the test)")
        return await super().append(channel_id, envelope_id, envelope_json)

    async def append_group(self, channel_id, items):
        self.groups.append(len(items))
        if any(self.poison in text for _, text in items):
            raise StoreError("the disk is full (a fault injected by the test)")
        return await super().append_group(channel_id, items)


pytestmark = pytest.mark.hub(store=FaultyStore, invite_ack_timeout=30)


async def pair(hub: Hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    return ana, ch.channel_id


def text(cid: str, sender: str, body: str) -> Envelope:
    return Envelope(cid, sender, None, EV_TEXT, {"text": body})


async def test_one_post_at_a_time_takes_no_group_and_keeps_the_wal_and_the_state_agreeing(hub):
    ana, cid = await pair(hub)
    groups_before = len(hub.store.groups)
    appends_before = hub.store.appends
    ids = [await hub.post_envelope(text(cid, ana.agent_id, f"m{i}")) for i in range(50)]
    assert len(hub.store.groups) == groups_before  # each post found the lock free: a group of one
    assert hub.store.appends - appends_before == 50
    wal = [e for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert [e.envelope_id for e in wal] == ids
    assert hub.wal_count(cid) == len(await hub.read_wal(cid))
    assert hub.adapter_state(cid).last_envelope_id == ids[-1]


async def test_a_failed_commit_fails_only_its_post_one_at_a_time_and_in_a_group(hub):
    ana, cid = await pair(hub)
    poison = hub.store.poison
    bodies = [f"m{i}" if i != 7 else f"m{i}{poison}" for i in range(20)]
    # one at a time: the 8th post fails, nothing of it is written, the others go on
    outcomes = []
    for body in bodies:
        try:
            outcomes.append(await hub.post_envelope(text(cid, ana.agent_id, body)))
        except Exception as exc:  # the store's error, as the poster sees it
            outcomes.append(exc)
    assert [isinstance(o, StoreError) for o in outcomes] == [i == 7 for i in range(20)]
    # concurrently: the group holding the bad post fails as a whole in the store, then each of its posts
    # is admitted on its own, so only the bad one fails
    results = await asyncio.gather(
        *(hub.post_envelope(text(cid, ana.agent_id, "c" + body)) for body in bodies), return_exceptions=True
    )
    assert hub.store.groups, "no group was formed"
    assert [isinstance(r, StoreError) for r in results] == [i == 7 for i in range(20)]
    acknowledged = [o for o in outcomes + results if isinstance(o, str)]
    wal = [e for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
    assert [e.envelope_id for e in wal] == acknowledged  # every acknowledged post, in order, nothing else
    assert poison not in "".join(e.event_data["text"] for e in wal)
    assert hub.wal_count(cid) == len(await hub.read_wal(cid))
    # the state is the fold of the file: a fresh hub folding it agrees
    path = hub.store.path
    state = hub.adapter_state(cid)
    await hub.close()
    again = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        assert again.adapter_state(cid) == state
    finally:
        await again.close()

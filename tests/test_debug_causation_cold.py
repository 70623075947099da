"""The causation map's first call on a long stored channel (a hub reopened on SQLite) indexes the channel
in slices that yield to the event loop: another task keeps running meanwhile (the workbench's tree screen
must not freeze), a call cancelled midway leaves a valid index, and the answer is the same as a warm one."""

from __future__ import annotations

import asyncio

from support import Ticker

from ag2net import EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.debug import causation_tree
from ag2net.debug.causation import _INDEXES
from ag2net.hub.dry_run import channel_log
from ag2net.store import SqliteStore

N = 4_000
CHAIN = 200


async def _fill(path) -> tuple[str, list[str]]:
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc = HubClient.local(hub)
        ana, bob = [
            (await hc.register_human(Passport(name=n, kind="human"))).agent_id for n in ("ana", "bob")
        ]
        assert ana and bob
        md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
        cid = md.channel_id
        for agent_id in (ana, bob):  # nobody connected: no deliveries to wait for
            hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
        chain: list[str] = []
        for i in range(hub.wal_count(cid), N):
            env = Envelope(cid, ana if i % 2 else bob, None, EV_TEXT, {"text": f"message {i}"})
            env.causation_id = chain[-1] if i >= N - CHAIN and chain else None
            eid = await hub.post_envelope(env)
            if i >= N - CHAIN:
                chain.append(eid)
        return cid, chain
    finally:
        await hub.close()


def _index_is_valid(hub: Hub, cid: str) -> int:
    idx = _INDEXES[hub][cid]
    assert len(idx.by_id) == idx.scanned
    assert sorted(seq for seq, _ in idx.by_id.values()) == list(range(1, idx.scanned + 1))
    kids = [kid for ids in idx.children.values() for kid in ids]
    assert len(kids) == len(set(kids))  # no envelope indexed twice
    return idx.scanned


async def test_a_cold_tree_on_a_reopened_sqlite_hub_lets_other_tasks_run(tmp_path):
    path = tmp_path / "hub.db"
    cid, chain = await _fill(path)
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        log = await channel_log(hub, cid)  # the WAL cache loads the newest envelopes; the rest is cold
        assert len(log) == N and log.base > 0
        async with Ticker() as ticker:
            tree = await causation_tree(hub, chain[-1], channel_id=cid)
        # the index was built in slices: the other task got the loop back between them
        assert ticker.ticks >= N // 1024 - 1
        assert tree.chain == chain and tree.root == chain[0] and len(tree.nodes) == CHAIN
        assert [n.seq for _, n in tree.walk()] == list(range(N - CHAIN + 1, N + 1))
        assert _index_is_valid(hub, cid) == N
        warm = await causation_tree(hub, chain[-1], channel_id=cid)
        assert warm.to_dict() == tree.to_dict()
    finally:
        await hub.close()


async def test_a_cold_tree_cancelled_midway_leaves_a_valid_index(tmp_path):
    path = tmp_path / "hub.db"
    cid, chain = await _fill(path)
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        await channel_log(hub, cid)
        call = asyncio.create_task(causation_tree(hub, chain[-1], channel_id=cid))
        for _ in range(3):
            await asyncio.sleep(0)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        assert call.cancelled()
        done = _index_is_valid(hub, cid)
        assert 0 < done < N  # cancelled with part of the channel indexed
        tree = await causation_tree(hub, chain[-1], channel_id=cid)  # continues from there
        assert _index_is_valid(hub, cid) == N
        assert tree.chain == chain and len(tree.nodes) == CHAIN
        # two cold calls at once on a fresh hub share the index without indexing anything twice
        await hub.close()
        hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
        await channel_log(hub, cid)
        one, two = await asyncio.gather(
            causation_tree(hub, chain[-1], channel_id=cid), causation_tree(hub, chain[0], channel_id=cid)
        )
        assert _index_is_valid(hub, cid) == N
        assert one.to_dict()["nodes"] == two.to_dict()["nodes"] and two.chain == chain[:1]
    finally:
        await hub.close()


async def test_a_closed_channel_is_read_back_whole_in_blocks(tmp_path):
    """A closed channel is not cached: ``channel_log`` reads it from the store block by block (more than
    one block here), with the same envelopes in the same order as one read, and the tree is the same."""
    path = tmp_path / "hub.db"
    cid, chain = await _fill(path)
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        live = (await causation_tree(hub, chain[-1], channel_id=cid)).to_dict()
        await hub.close_channel(cid, reason="done")
    finally:
        await hub.close()
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        assert hub.lookup_channel(cid).is_terminal() and await hub.logs.for_read(cid) is None
        log = await channel_log(hub, cid)
        whole = await hub.read_wal(cid)
        assert len(log) == len(whole) > N and log.base == 0
        assert [e.to_dict() for e in log] == [e.to_dict() for e in whole]
        closed = (await causation_tree(hub, chain[-1])).to_dict()
        assert closed == live
    finally:
        await hub.close()

"""A hub closing cleanly keeps its channels' visibility index summaries in the hydrate snapshot, and the
next hub opened on the same store installs them when it loads a channel's log: its first dry run reads the
window's block from the store, not every stored envelope, and answers what projecting the whole WAL as a
plain list answers. Envelopes appended after the snapshot are indexed on from it; an entry that does not
fit the log (another renderer, another last envelope, positions that the newest envelopes contradict,
garbage) is ignored and the dry run takes the slow path to the same answer."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from support import CountingCold, text

from ag2net import Envelope, Hub, HubClient, Passport
from ag2net.channel import Participant, ParticipantRole
from ag2net.debug import dry_run
from ag2net.hub.dry_run import channel_log, projection_delta
from ag2net.hub.records import SNAPSHOT_KEY
from ag2net.store import open_store
from ag2net.views.registry import resolve_view, view_spec
from ag2net.views.wal import WalLog

N = 3000  # a load reads the newest 256 (the cache's window is 1,000): most live in the store only


@pytest.fixture(params=["sqlite", "postgres"])
async def target(request, tmp_path) -> Path | str:
    """Where the hubs keep their data (both stores hold the hydrate snapshot as a meta value)."""
    if request.param == "sqlite":
        return tmp_path / "s.db"
    return await request.getfixturevalue("pg_server").fresh_url()


async def open_hub(path: Path | str) -> Hub:
    """A hub on the SQLite file ``path`` or the PostgreSQL database at that URL."""
    return await Hub.open(open_store(path), ttl_sweep_interval=0, expectation_sweep_interval=0)


class Channel:
    """A round-robin discussion of three under windowed views and a transcript, and eve (seated by hand,
    never expected to speak) under a windowed view, in the audience of few envelopes."""

    def __init__(self, cid: str, ids: list[str], speakers: list[str]) -> None:
        self.cid, self.ids, self.speakers, self.turn = cid, ids, speakers, 0
        self.length = 0  # envelopes stored when the filling hub closed

    @property
    def nxt(self) -> str:
        return self.speakers[self.turn % 3]

    async def say(self, hc: HubClient, body: str, audience: list[str] | None = None) -> None:
        await hc.hub.post_envelope(text(self.cid, self.nxt, body, audience))
        self.turn += 1


async def stored_channel(path: Path | str) -> Channel:
    hub = await open_hub(path)
    hc = HubClient.local(hub)
    try:
        ids = []
        for name in ("ana", "bob", "cat", "eve"):
            client = await hc.register_human(Passport(name=name, kind="human"))
            assert client.agent_id is not None
            ids.append(client.agent_id)
        ana, bob, cat, eve = ids
        md = await hc.create_channel(
            creator_id=ana,
            manifest_type="discussion",
            participants=[ana, bob, cat],
            knobs={
                "view_policies": {
                    ana: {"name": "windowed_summary", "recent_n": 3},
                    bob: {"name": "named_windowed_summary", "recent_n": 4},
                    cat: {"name": "full_transcript"},
                }
            },
        )
        for agent_id in ids:  # nobody connected: the fill queues no delivery
            hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
        seated = hub.lookup_channel(md.channel_id)
        seated.participants.append(
            Participant(eve, ParticipantRole.PARTICIPANT, 3, seated.participants[0].joined_at)
        )
        seated.knobs["view_policies"][eve] = {"name": "named_windowed_summary", "recent_n": 5}
        await hub.store.put_channel(seated.to_dict())
        order = list((await hc.adapter_state(md.channel_id)).participant_order)
        i = order.index(ana)
        ch = Channel(md.channel_id, ids, order[i:] + order[:i])
        for k in range(N):
            others = [p for p in ch.speakers if p != ch.nxt]
            await ch.say(hc, f"m{k} " + "x" * 100, audience=None if k % 7 else [*others, eve][: 1 + k % 3])
        # a warm dry run builds every participant's index (what a workbench's composer does)
        await dry_run(hub, text(ch.cid, ch.nxt, "warm"))
        ch.length = hub.wal_count(ch.cid)
        return ch
    finally:
        await hc.close()
        await hub.close()


async def counted_log(hub: Hub, cid: str) -> tuple[WalLog, CountingCold]:
    log = await channel_log(hub, cid)
    counting = CountingCold(log._cold)
    log._cold = counting
    return log, counting


async def plain(hub: Hub, env: Envelope) -> dict[str, Any]:
    """Each participant's projection delta from a plain list of the whole WAL (no log, no index)."""
    md = hub.lookup_channel(env.channel_id)
    adapter = hub.adapter_for_metadata(md)
    wal = await hub.read_wal(env.channel_id)
    out = {}
    for pid in md.participant_ids():
        view = resolve_view(md, pid, adapter)
        kw: dict[str, Any] = {
            "participant_id": pid,
            "channel": md,
            "render_envelope": adapter.render_envelope,
            "name_for": hub.name_for,
        }
        before = await view.project(list(wal), **kw)
        after = await view.project([*wal, env], **kw)
        out[pid] = {"view": view_spec(view), **projection_delta(before, after)}
    return out


async def snapshot_of(path: Path | str) -> dict[str, Any]:
    store = open_store(path)
    await store.open()
    try:
        text_ = await store.get_meta(SNAPSHOT_KEY)
        assert text_
        return json.loads(text_)
    finally:
        await store.close()


async def put_snapshot(path: Path | str, snapshot: dict[str, Any]) -> None:
    store = open_store(path)
    await store.open()
    try:
        await store.set_meta(SNAPSHOT_KEY, json.dumps(snapshot))
    finally:
        await store.close()


async def test_a_reopened_hub_first_dry_run_reads_one_block_and_answers_as_a_scan(target):
    path = target
    ch = await stored_channel(path)
    entry = (await snapshot_of(path))["channels"][ch.cid]["indexes"]
    assert entry["length"] == ch.length > N
    assert sorted(entry["summaries"]) == sorted(ch.ids)
    assert len(json.dumps(entry)) < 12_000  # four participants
    hub = await open_hub(path)
    try:
        log, counting = await counted_log(hub, ch.cid)
        assert all(log.indexed(pid, hub.adapter_for(ch.cid).render_envelope) for pid in ch.ids)
        probe = text(ch.cid, ch.nxt, "what if?")
        got = await dry_run(hub, probe)
        assert counting.read <= 512, counting.read  # eve's window, in one old block; no scan
        assert got.projections == await plain(hub, probe)
        # to an audience, and to eve (whose count grows)
        probe = text(ch.cid, ch.nxt, "psst", audience=[ch.ids[3]])
        assert (await dry_run(hub, probe)).projections == await plain(hub, probe)
    finally:
        await hub.close()
    # the next close keeps them again (the restored indexes, brought up to date)
    assert (await snapshot_of(path))["channels"][ch.cid]["indexes"]["length"] == ch.length


async def test_envelopes_appended_after_the_snapshot_are_still_counted(tmp_path):
    """A hub that appended after the last clean close and stopped without writing its own snapshot (a
    crash): the next one folds the WAL (the adapter state's seq differs) and indexes on from the entry."""
    path = tmp_path / "s.db"
    ch = await stored_channel(path)
    old = await snapshot_of(path)
    hub = await open_hub(path)
    hc = HubClient.local(hub)
    try:
        await channel_log(hub, ch.cid)  # loaded: the indexes kept are installed, then 40 appended
        for k in range(40):
            await ch.say(hc, f"late {k}", audience=[ch.ids[3]] if k % 2 else None)
    finally:
        await hc.close()
        await hub.close()
    # its close brought them up to date (the 40 are in memory) and kept them
    entry = (await snapshot_of(path))["channels"][ch.cid]["indexes"]
    assert entry["length"] == ch.length + 40 and sorted(entry["summaries"]) == sorted(ch.ids)
    await put_snapshot(path, old)  # as if that hub had crashed: the entry is 40 envelopes behind
    hub = await open_hub(path)
    try:
        log, counting = await counted_log(hub, ch.cid)
        assert len(log) == ch.length + 40
        probe = text(ch.cid, ch.nxt, "what if?")
        got = await dry_run(hub, probe)
        assert counting.read <= 512, counting.read
        assert got.projections == await plain(hub, probe)
        render = hub.adapter_for(ch.cid).render_envelope
        eve = log.indexed(ch.ids[3], render)
        assert eve is not None and eve.scanned == len(log)
    finally:
        await hub.close()


def _garble(entry: dict[str, Any], how: str, eve: str) -> Any:
    if how == "fingerprint":  # another release's renderer
        entry["fingerprint"] = "0" * 32
    elif how == "last_id":  # another WAL than this one's prefix
        entry["last_id"] = "not-this-one"
    elif how == "length":  # longer than the log
        entry["length"] += 1
    elif how == "positions":  # counts off by one: the newest positions no longer match the envelopes
        for summary in entry["summaries"].values():
            summary["positions"] = [p - 1 for p in summary["positions"]]
    elif how == "eve_only":  # one participant's summary contradicted: the others are installed
        summary = entry["summaries"][eve]
        summary["positions"] = summary["positions"][:-1]
    elif how == "garbage":
        return "garbage"
    return entry


@pytest.mark.parametrize("how", ["fingerprint", "last_id", "length", "positions", "eve_only", "garbage"])
async def test_an_entry_that_does_not_fit_is_ignored(tmp_path, how):
    path = tmp_path / "s.db"
    ch = await stored_channel(path)
    snapshot = await snapshot_of(path)
    eve = ch.ids[3]
    entry = snapshot["channels"][ch.cid]["indexes"]
    snapshot["channels"][ch.cid]["indexes"] = _garble(entry, how, eve)
    await put_snapshot(path, snapshot)
    hub = await open_hub(path)
    try:
        log, counting = await counted_log(hub, ch.cid)
        render = hub.adapter_for(ch.cid).render_envelope
        installed = [pid for pid in ch.ids if log.indexed(pid, render) is not None]
        assert installed == ([pid for pid in ch.ids if pid != eve] if how == "eve_only" else [])
        probe = text(ch.cid, ch.nxt, "what if?")
        got = await dry_run(hub, probe)
        assert counting.read >= N - 1000  # the slow path: a scan of the stored envelopes
        assert got.projections == await plain(hub, probe)
    finally:
        await hub.close()


REOPEN = """
import asyncio, json, sys
from ag2net import Hub
from ag2net.hub.dry_run import channel_log
from ag2net.store import SqliteStore

async def main():
    hub = await Hub.open(SqliteStore(sys.argv[1]), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        log = await channel_log(hub, sys.argv[2])
        render = hub.adapter_for(sys.argv[2]).render_envelope
        print(json.dumps(sorted(pid for pid in sys.argv[3:] if log.indexed(pid, render) is not None)))
    finally:
        await hub.close()

asyncio.run(main())
"""

FINGERPRINT = """
from ag2net.views.visibility_indexes import renderer_fingerprint

def render(env):
    return "x" if env.event_type in {"a", "b", "c", "d", "e", "f", "g", "h"} else None

print(renderer_fingerprint(render))
"""


async def test_a_restart_in_another_process_installs_them(tmp_path):
    """What a restart is: another process, another string hash seed (a renderer's set literals iterate
    in another order there; its fingerprint must not change with it)."""
    path = tmp_path / "s.db"
    ch = await stored_channel(path)
    for seed in ("1", "2"):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            REOPEN,
            str(path),
            ch.cid,
            *ch.ids,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        assert json.loads(out) == sorted(ch.ids)
    prints = set()
    for seed in ("1", "2", "3", "4"):
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            FINGERPRINT,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        out, _ = await proc.communicate()
        assert proc.returncode == 0
        prints.add(out)
    assert len(prints) == 1, prints

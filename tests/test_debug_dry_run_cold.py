"""A dry run on a channel whose log keeps no visibility index yet (a hub just reopened on a long stored
channel, the workbench's composer asking as the draft changes): the indexes its projections read (a
windowed view's summary count, a transcript's length) are built in slices that yield to the event loop,
every participant's together, so each stored envelope is read back once, and the answer is the one a warm
dry run gives and the one projecting a plain list of the whole WAL gives."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from support import CountingCold, Ticker, text

from ag2net import Envelope, Hub, HubClient, Passport
from ag2net.channel import Participant, ParticipantRole
from ag2net.debug import dry_run
from ag2net.hub.dry_run import channel_log, projection_delta
from ag2net.store import SqliteStore
from ag2net.views.registry import resolve_view, view_spec
from ag2net.views.visibility_indexes import SLICE, index_summaries, restore_indexes

N_LATE = 6000  # > 8 cold blocks of 512 (what a log keeps): one participant's scan evicts what another read


async def open_hub(path: Path) -> Hub:
    return await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0, cache_mb=1)


async def stored_channel(path: Path) -> tuple[str, list[str], str]:
    """A round-robin discussion of four under four views (two windowed, two transcripts) and eve, seated
    by hand (never expected to speak) under a windowed view and in the audience of nothing in the last
    6,000 envelopes; an empty text and a protocol envelope between; written to SQLite, the hub closed.
    Returns the channel, the five ids and who speaks next."""
    hub = await open_hub(path)
    hc = HubClient.local(hub)
    try:
        ids = []
        for name in ("ana", "bob", "cat", "dan", "eve"):
            client = await hc.register_human(Passport(name=name, kind="human"))
            assert client.agent_id is not None
            ids.append(client.agent_id)
        ana, bob, cat, dan, eve = ids
        md = await hc.create_channel(
            creator_id=ana,
            manifest_type="discussion",
            participants=[ana, bob, cat, dan],
            knobs={
                "view_policies": {
                    ana: {"name": "windowed_summary", "recent_n": 2},
                    bob: {"name": "named_windowed_summary", "recent_n": 3},
                    cat: {"name": "full_transcript"},
                    dan: {"name": "named_transcript"},
                }
            },
        )
        cid = md.channel_id
        for agent_id in ids:  # nobody connected: the fill queues no delivery
            hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
        seated = hub.lookup_channel(cid)
        seated.participants.append(
            Participant(eve, ParticipantRole.PARTICIPANT, 4, seated.participants[0].joined_at)
        )
        seated.knobs["view_policies"][eve] = {"name": "named_windowed_summary", "recent_n": 4}
        await hub.store.put_channel(seated.to_dict())
        order = list((await hc.adapter_state(cid)).participant_order)
        i = order.index(ana)
        speakers = order[i:] + order[:i]
        turn = 0

        async def say(body: str, audience: list[str] | None = None) -> None:
            nonlocal turn
            await hub.post_envelope(text(cid, speakers[turn % 4], body, audience))
            turn += 1

        for k in range(30):
            await say(f"to all {k}")
        await say("to eve", audience=[eve])
        await say("")  # renders to "" (kept by the views)
        await hub.post_envelope(Envelope(cid, speakers[turn % 4], None, "x.custom", {"k": 1}))
        for k in range(N_LATE):
            others = [p for p in speakers if p != speakers[turn % 4]]
            await say(f"not for eve {k} " + "x" * 200, audience=others if k % 3 else [others[k % 2]])
        return cid, [ana, bob, cat, dan, eve], speakers[turn % 4]
    finally:
        await hc.close()
        await hub.close()


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


async def test_a_cold_dry_run_reads_each_stored_envelope_once_and_answers_as_a_warm_one(tmp_path):
    """A hub reopened on 6,000+ envelopes mostly in SQLite: the first dry run reads each stored envelope
    back once for all five participants (the old code scanned the store once per windowed participant and
    read every envelope twice more per transcript: 5 times over), and answers what the next (warm) dry
    run and the plain-list projections answer, for texts to all, to an audience, an empty one."""
    path = tmp_path / "s.db"
    cid, (ana, bob, cat, dan, eve), nxt = await stored_channel(path)
    other = next(p for p in (ana, bob, cat, dan) if p != nxt)
    probes = [
        lambda: text(cid, nxt, "what if?"),
        lambda: text(cid, nxt, "only one", audience=[other]),
        lambda: text(cid, nxt, ""),
    ]
    for make in probes:
        hub = await open_hub(path)
        try:
            log = await channel_log(hub, cid)
            assert log.base > 8 * 512, "the early envelopes must be out of memory for this test"
            counting = CountingCold(log._cold)
            log._cold = counting
            cold = await dry_run(hub, make())
            # each stored envelope once, and again the block eve's window lies in (to show it)
            assert counting.read <= log.base + 512, (counting.read, log.base)
            reads = counting.read
            warm = await dry_run(hub, make())
            assert counting.read == reads, "a warm dry run reads nothing back"
            assert cold == warm
            assert cold.admitted and set(cold.projections) == {ana, bob, cat, dan, eve}
            assert cold.projections == await plain(hub, make())
        finally:
            await hub.close()
    # what the views show, spelled out for the first probe
    hub = await open_hub(path)
    try:
        dry = await dry_run(hub, probes[0]())
        summary = dry.projections[bob]["added"][0]["summary"]
        assert summary.startswith("Earlier in this channel: ") and dry.projections[bob]["after"] == 4
        assert dry.projections[cat]["removed"] == [] and dry.projections[cat]["after"] == (
            dry.projections[cat]["before"] + 1
        )
        # eve sees nothing of the last 6,000: her window (4) reaches back to the fill's start
        assert dry.projections[eve]["before"] == 5 and dry.projections[eve]["after"] == 5
    finally:
        await hub.close()


async def test_the_event_loop_keeps_ticking_during_a_cold_dry_run(tmp_path):
    """Another task on the loop ticks between the slices the first dry run indexes (the old code built
    every index in one go: it did not tick once), and the indexes stay warm for the next dry run."""
    path = tmp_path / "s.db"
    cid, _ids, nxt = await stored_channel(path)
    hub = await open_hub(path)
    try:
        log = await channel_log(hub, cid)
        async with Ticker() as ticker:
            start = ticker.ticks
            cold = await dry_run(hub, text(cid, nxt, "what if?"))
            during = ticker.ticks - start
            start = ticker.ticks
            warm = await dry_run(hub, text(cid, nxt, "what if?"))
            during_warm = ticker.ticks - start
        assert during >= len(log) // SLICE, during  # at least one yield per slice of the indexes
        assert during_warm <= 1, during_warm  # warm: nothing left to build, nothing to yield for
        assert cold == warm
    finally:
        await hub.close()


async def test_a_cancelled_cold_dry_run_keeps_what_it_indexed(tmp_path):
    """The composer cancels a dry run when the draft changes again: the slices indexed so far stay in the
    log, so the next dry run goes on from there instead of starting over."""
    path = tmp_path / "s.db"
    cid, ids, nxt = await stored_channel(path)
    hub = await open_hub(path)
    try:
        log = await channel_log(hub, cid)
        adapter = hub.adapter_for_metadata(hub.lookup_channel(cid))
        task = asyncio.create_task(dry_run(hub, text(cid, nxt, "first draft")))
        for _ in range(3):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        indexes = [log.indexed(pid, adapter.render_envelope) for pid in ids]
        done = min(index.scanned if index is not None else 0 for index in indexes)
        assert 0 < done < log.base, done
        counting = CountingCold(log._cold)
        log._cold = counting
        again = await dry_run(hub, text(cid, nxt, "second draft"))
        # on from where the cancelled one stopped (give or take the cold block it stopped in)
        assert counting.read <= log.base - done + 512, (counting.read, done, log.base)
        assert again.projections == await plain(hub, text(cid, nxt, "second draft"))
    finally:
        await hub.close()


async def test_index_summaries_kept_from_the_last_hub_spare_the_scan(tmp_path):
    """Summaries of the indexes a warm dry run built (``index_summaries``: counts, first senders, the
    newest positions; JSON), installed in the log of the next hub opened on the same file before anything
    is appended (``restore_indexes``), make its first dry run read only the block a window lies in (not the
    5,600 stored envelopes), with the same answer; summaries taken at another length, or garbled, are
    skipped (the counts would be wrong)."""
    path = tmp_path / "s.db"
    cid, ids, nxt = await stored_channel(path)
    hub = await open_hub(path)
    try:
        log = await channel_log(hub, cid)
        render = hub.adapter_for_metadata(hub.lookup_channel(cid)).render_envelope
        want = await dry_run(hub, text(cid, nxt, "what if?"))
        blob = json.dumps(index_summaries(log, render))
    finally:
        await hub.close()
    hub = await open_hub(path)
    try:
        log = await channel_log(hub, cid)
        render = hub.adapter_for_metadata(hub.lookup_channel(cid)).render_envelope
        # the hub installed what the last one kept at its close (Hub._index_snapshot); by hand from here
        assert all(log.indexed(pid, render) is not None for pid in ids)
        log._indexes.clear()
        assert restore_indexes(log, render, {ids[0]: {"scanned": "x"}, 3: {}}) == []
        assert sorted(restore_indexes(log, render, json.loads(blob))) == sorted(ids)
        assert restore_indexes(log, render, json.loads(blob)) == []  # warm ones are never replaced
        counting = CountingCold(log._cold)
        log._cold = counting
        got = await dry_run(hub, text(cid, nxt, "what if?"))
        # eve's window, in the oldest block, and another's just under the newest 256 a load reads (a load
        # read 1,000 before: 744 more than now)
        assert counting.read <= 2 * 512, counting.read
        assert got == want
        assert got.projections == await plain(hub, text(cid, nxt, "what if?"))
        hc = HubClient.local(hub)
        await hub.post_envelope(text(cid, nxt, "one more"))
        await hc.close()
        log._indexes.clear()
        assert restore_indexes(log, render, json.loads(blob)) == []  # taken at another length
    finally:
        await hub.close()

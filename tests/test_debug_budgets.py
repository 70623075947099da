"""The debugger's budgets without changing its answers: the visibility matrix projects a per-envelope view
(the transcripts) over the page only, and the scrubber steps without reading the WAL back. Each result is
compared with the full computation (the whole WAL projected; every step reading its envelope)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from support import CountingCold, humans, quiet, run_demo, text

from ag2net import EV_TEXT, Envelope, Hub, HubClient
from ag2net.debug import states_at, visibility
from ag2net.debug.scrubber import Scrubber
from ag2net.hub.dry_run import channel_log

visibility_module = importlib.import_module("ag2net.debug.visibility")

PREVIEWS: list[Any] = [
    None,
    "full_transcript",
    "named_transcript",
    {"name": "windowed_summary", "recent_n": 3},
]


async def full_matrix(monkeypatch: pytest.MonkeyPatch, hub: Hub, cid: str, **kw: Any) -> dict[str, Any]:
    """The matrix as computed before: every view projected over the whole WAL."""
    with monkeypatch.context() as m:
        m.setattr(visibility_module, "_PER_ENVELOPE", ())
        return (await visibility(hub, cid, **kw)).to_dict()


def pages(n: int) -> list[tuple[int, int | None]]:
    return [(1, None), (1, 1), (2, max(2, n // 2)), (max(1, n // 2), n), (n, n), (max(1, n - 2), n + 5)]


async def assert_pages_equal(monkeypatch: pytest.MonkeyPatch, hub: Hub, cid: str) -> int:
    n = hub.wal_count(cid)
    checked = 0
    for preview in PREVIEWS:
        for first, last in pages(n):
            kw = {"first_seq": first, "last_seq": last, "preview_view": preview}
            fast = (await visibility(hub, cid, **kw)).to_dict()
            assert fast == await full_matrix(monkeypatch, hub, cid, **kw), (cid, kw)
            checked += len(fast["rows"])
    return checked


async def test_the_demo_pages_match_the_whole_wal_projection(monkeypatch: pytest.MonkeyPatch):
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        await run_demo(hc)
        channels = hub.query_channels(include_terminal=True, limit=None)
        assert {md.manifest.type for md in channels} >= {
            "conversation",
            "discussion",
            "workflow",
            "consulting",
        }
        checked = 0
        for md in channels:
            checked += await assert_pages_equal(monkeypatch, hub, md.channel_id)
        assert checked > 200
    finally:
        await hc.close()
        await hub.close()


async def test_a_hand_built_channel_matches_the_whole_wal_projection(monkeypatch: pytest.MonkeyPatch):
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        ana, bob, cat, dan = await humans(hc, "ana", "bob", "cat", "dan")
        md = await hc.create_channel(
            creator_id=ana,
            manifest_type="discussion",
            participants=[ana, bob, cat, dan],
            knobs={"view_policies": {ana: {"name": "full_transcript"}, bob: {"name": "named_transcript"}}},
        )
        cid = md.channel_id
        order = list((await hc.adapter_state(cid)).participant_order)
        i = order.index(ana)  # the creator speaks first, then round robin
        p0, p1, p2, p3 = order[i:] + order[:i]
        await hub.post_envelope(text(cid, p0, "to everyone"))
        await hub.post_envelope(text(cid, p1, "to p0 and me", audience=[p1, p0]))
        await hub.post_envelope(text(cid, p2, "to p3 only", audience=[p3]))
        await hub.post_envelope(text(cid, p3, ""))  # renders to "" (kept by the views)
        await hub.post_envelope(text(cid, p0, "to p1 only", audience=[p1]))
        await hub.post_envelope(Envelope(cid, p1, None, "x.custom", {"k": 1}))
        await hub.post_envelope(text(cid, p1, "last"))
        wal = await hub.read_wal(cid)
        # hand-built: p3 joined at the fourth text
        [seat] = [p for p in hub.lookup_channel(cid).participants if p.agent_id == p3]
        seat.joined_at = wal[-4].created_at
        matrix = await visibility(hub, cid, preview_view="named_transcript")
        views = matrix.views
        assert views[ana] == {"name": "full_transcript"} and views[bob] == {"name": "named_transcript"}
        secret = next(r for r in matrix.rows if r.event_type == EV_TEXT and r.audience == [p1])
        assert secret.cells[p1].projected == "shown"
        assert secret.cells[p2].projected == "hidden" and secret.cells[p2].preview == "hidden"
        assert secret.cells[p0].preview_role == "assistant"
        assert any(r.cells[p3].reason == "not_yet_participant" for r in matrix.rows)
        assert await assert_pages_equal(monkeypatch, hub, cid) > 30
    finally:
        await hc.close()
        await hub.close()


async def test_a_transcript_page_renders_the_page_not_the_channel():
    """The work of a page is O(page): 2,000 envelopes, a page of 20, each renderer call counted."""
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        ana, bob = await humans(hc, "ana", "bob")
        md = await hc.create_channel(
            creator_id=ana,
            manifest_type="discussion",
            participants=[ana, bob],
            knobs={"view_policy": {"name": "named_transcript"}},  # in force: a transcript too
        )
        cid = md.channel_id
        for agent_id in (ana, bob):  # nobody connected: 2,000 posts fill no inbox
            hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
        for i in range(2000):
            await hub.post_envelope(text(cid, bob if i % 2 else ana, f"message {i}"))
        adapter = hub.adapter_for_metadata(hub.lookup_channel(cid))
        await channel_log(hub, cid)
        calls = 0
        render = type(adapter).render_envelope

        def counting(self: Any, env: Envelope) -> Any:
            nonlocal calls
            calls += 1
            return render(self, env)

        n = hub.wal_count(cid)
        type(adapter).render_envelope = counting  # type: ignore[method-assign]
        try:
            matrix = await visibility(hub, cid, first_seq=n - 19, last_seq=n, preview_view="full_transcript")
        finally:
            type(adapter).render_envelope = render  # type: ignore[method-assign]
        assert len(matrix.rows) == 20
        assert all(c.preview == "shown" for r in matrix.rows for c in r.cells.values())
        assert calls <= 20 * 2 * 3, calls  # the whole channel would be >= 2 x 2,000
    finally:
        await hc.close()
        await hub.close()


# ----------------------------------------------------------------------------- the scrubber


async def test_steps_read_nothing_back_and_match_a_fresh_fold(tmp_path):
    """A channel older than the WAL cache (its old envelopes live in SQLite only): after the first fold,
    stepping anywhere reads no envelope back, and every state equals a fresh scrubber's."""
    from ag2net.store import SqliteStore

    hub = await Hub.open(
        SqliteStore(tmp_path / "s.db"), ttl_sweep_interval=0, expectation_sweep_interval=0, cache_mb=1
    )
    hc = HubClient.local(hub)
    try:
        ana, bob = await humans(hc, "ana", "bob")
        md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
        cid = md.channel_id
        assert md.manifest.expectations  # max_silence: each step asks its evaluator over the prefix
        for agent_id in (ana, bob):  # nobody connected: 3,000 posts fill no inbox
            hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
        for i in range(3000):
            await hub.post_envelope(text(cid, ana if i % 2 else bob, f"message {i} " + "x" * 300))
        scrubber = await states_at(hub, cid)
        log = scrubber.log
        assert log.base > 1000, "the early envelopes must be out of memory for this test"
        counting = CountingCold(log._cold)
        log._cold = counting
        n = len(scrubber)
        scrubber.at(n)  # the first fold reads everything once
        read_by_fold = counting.read
        assert read_by_fold >= log.base
        log._cold_blocks.clear()
        seqs = [*range(1, 40), *range(n // 2 - 20, n // 2 + 20), *range(n, n - 40, -1), 700, 5, 2999]
        stepped = [scrubber.at(s).to_dict() for s in seqs]
        assert counting.read == read_by_fold, "a step read envelopes back from the store"
        fresh = Scrubber(hub, scrubber.metadata, log)
        assert stepped == [fresh.at(s).to_dict() for s in seqs]
        # and what a step used to read from the envelope itself, read from it now
        adapter, md = scrubber.adapter, scrubber.metadata
        for s, state in zip(seqs, stepped, strict=True):
            env = log[s - 1]
            assert (state["envelope_id"], state["event_type"], state["sender_id"], state["at"]) == (
                env.envelope_id,
                env.event_type,
                env.sender_id,
                env.created_at,
            )
            result = adapter.on_accepted(md, env, scrubber.state(s))
            want = (
                {"state": result.next_state.value, "reason": result.auto_close_reason}
                if result is not None and result.next_state is not None
                else None
            )
            assert state["closes"] == want
    finally:
        await hc.close()
        await hub.close()

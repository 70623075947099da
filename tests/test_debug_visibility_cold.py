"""The visibility matrix's first page on a channel whose log keeps no visibility index yet (a workbench just
opened on a long channel): a windowed view is run over a suffix of the WAL instead of indexing every stored
envelope, and a participant who sees too little of the suffix gets the index built in slices that yield
to the event loop. Each page is compared with the whole-WAL computation (every view projected over the
whole WAL, through the log's index)."""

from __future__ import annotations

import importlib
from typing import Any

import pytest
from support import CountingCold, Ticker, humans, text

from ag2net import Envelope, Hub, HubClient
from ag2net.channel import Participant, ParticipantRole
from ag2net.debug import visibility
from ag2net.hub.dry_run import channel_log
from ag2net.store import SqliteStore
from ag2net.views.wal import WalLog

visibility_module = importlib.import_module("ag2net.debug.visibility")


def unbind(hub: Hub, *agent_ids: str) -> None:
    """Nobody connected: long fills queue no delivery."""
    for agent_id in agent_ids:
        hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)


def forget_indexes(log: WalLog) -> None:
    """The log as a fresh hub loads it: no (participant, renderer) index yet."""
    log._indexes.clear()


async def full_matrix(monkeypatch: pytest.MonkeyPatch, hub: Hub, cid: str, **kw: Any) -> dict[str, Any]:
    """Every view projected over the whole WAL (the windowed ones through the log's index)."""
    with monkeypatch.context() as m:
        m.setattr(visibility_module, "_PER_ENVELOPE", ())
        m.setattr(visibility_module, "_WINDOWED", ())
        return (await visibility(hub, cid, **kw)).to_dict()


class CountingRender:
    """Counts the adapter's renderer calls (the work an index build does once per envelope)."""

    def __init__(self, adapter: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = 0
        render = type(adapter).render_envelope

        def counting(this: Any, env: Envelope) -> Any:
            self.calls += 1
            return render(this, env)

        monkeypatch.setattr(type(adapter), "render_envelope", counting)


async def test_a_cold_first_page_reads_the_window_not_the_stored_channel(tmp_path, monkeypatch):
    """3,000 envelopes, most of them only in SQLite; a hub reopened on the file (no index, no cold block):
    the last page and an old page each read and render a window's worth, not the channel, and give the
    whole-WAL answer."""
    path = tmp_path / "s.db"
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0, cache_mb=1)
    hc = HubClient.local(hub)
    try:
        ana, bob = await humans(hc, "ana", "bob")
        md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
        cid = md.channel_id
        unbind(hub, ana, bob)
        for i in range(3000):
            await hub.post_envelope(text(cid, ana if i % 2 else bob, f"message {i} " + "x" * 300))
    finally:
        await hc.close()
        await hub.close()
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0, cache_mb=1)
    try:
        n = hub.wal_count(cid)
        log = await channel_log(hub, cid)
        assert log.base > 1500, "the early envelopes must be out of memory for this test"
        counting = CountingCold(log._cold)
        log._cold = counting
        adapter = hub.adapter_for_metadata(hub.lookup_channel(cid))
        with monkeypatch.context() as m:
            renders = CountingRender(adapter, m)
            last = await visibility(hub, cid, first_seq=n - 49, last_seq=n)
            assert counting.read == 0, "the last page and its window are in memory"
            old = await visibility(hub, cid, first_seq=101, last_seq=150)
            assert counting.read <= 512, counting.read  # the page's block, not the 2,000+ stored ones
            assert renders.calls <= 2 * 2 * 150, renders.calls  # an index would render 2 x 3,000
        assert log.indexed(ana, adapter.render_envelope) is None  # no index was built for this
        # the same cells as the whole-WAL projection (which builds the index)
        assert last.to_dict() == await full_matrix(monkeypatch, hub, cid, first_seq=n - 49, last_seq=n)
        assert old.to_dict() == await full_matrix(monkeypatch, hub, cid, first_seq=101, last_seq=150)
        shown = [row.seq for row in last.rows if row.cells[ana].projected == "shown"]
        assert shown == list(range(n - 9, n + 1))  # windowed_summary(10), in force
        assert {row.cells[bob].projected for row in old.rows} == {"elided"}
    finally:
        await hub.close()


async def sparse_channel(hc: HubClient, hub: Hub) -> tuple[str, list[str]]:
    """A round-robin discussion of four, each under another windowed view, and eve, seated by hand after
    the creation (so never expected to speak), in the audience of nothing in the last 600 envelopes;
    a protocol envelope and an empty text between."""
    ana, bob, cat, dan, eve = await humans(hc, "ana", "bob", "cat", "dan", "eve")
    md = await hc.create_channel(
        creator_id=ana,
        manifest_type="discussion",
        participants=[ana, bob, cat, dan],
        knobs={
            "view_policies": {
                ana: {"name": "windowed_summary", "recent_n": 2},
                bob: {"name": "named_windowed_summary", "recent_n": 3},
                cat: {"name": "windowed_summary", "recent_n": 1},
            }
        },
    )
    cid = md.channel_id
    unbind(hub, ana, bob, cat, dan, eve)
    seated = hub.lookup_channel(cid)
    seated.participants.append(
        Participant(eve, ParticipantRole.PARTICIPANT, 4, seated.participants[0].joined_at)
    )
    seated.knobs["view_policies"][eve] = {"name": "named_windowed_summary", "recent_n": 4}
    order = list((await hc.adapter_state(cid)).participant_order)
    i = order.index(ana)  # the creator speaks first, then round robin
    speakers = order[i:] + order[:i]
    turn = 0

    async def say(body: str, audience: list[str] | None = None) -> str:
        nonlocal turn
        sender = speakers[turn % 4]
        await hub.post_envelope(text(cid, sender, body, audience))
        turn += 1
        return sender

    for k in range(40):
        await say(f"to all {k}")
    await say("to eve", audience=[eve])
    await say("")  # renders to "" (kept by the views)
    await hub.post_envelope(Envelope(cid, speakers[turn % 4], None, "x.custom", {"k": 1}))
    for k in range(600):
        others = [p for p in speakers if p != speakers[turn % 4]]
        await say(f"not for eve {k}", audience=others if k % 3 else [others[k % 2]])
    return cid, [ana, bob, cat, dan, eve]


def pages(n: int) -> list[tuple[int, int | None]]:
    return [(1, None), (1, 3), (40, 45), (n // 2, n // 2 + 30), (n - 49, n), (n, n)]


PREVIEWS: list[Any] = [
    None,
    {"name": "windowed_summary", "recent_n": 3},
    {"name": "named_windowed_summary", "recent_n": 1},
    "full_transcript",
]


@pytest.mark.parametrize("cap", [None, 64, 8])
async def test_cold_pages_of_windowed_views_match_the_whole_wal(monkeypatch: pytest.MonkeyPatch, cap):
    """Edge cases for the suffix: windows of 1 to 10, a participant (eve) who sees nothing in the last
    600 envelopes (the suffix never elides for it: the index is built), audiences, an empty text, a
    protocol envelope; with the default cap, and caps small enough that others fall back too. Each page
    is computed cold (no index), then again warm, and compared with the whole-WAL computation."""
    if cap is not None:
        monkeypatch.setattr(visibility_module, "_SUFFIX_CAP", cap)
        monkeypatch.setattr(visibility_module, "_SLICE", 5)
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        cid, (_ana, _bob, _cat, dan, eve) = await sparse_channel(hc, hub)
        log = await channel_log(hub, cid)
        n = len(log)
        checked = 0
        for preview in PREVIEWS:
            for first, last in pages(n):
                kw = {"first_seq": first, "last_seq": last, "preview_view": preview}
                forget_indexes(log)
                cold = (await visibility(hub, cid, **kw)).to_dict()
                warm = (await visibility(hub, cid, **kw)).to_dict()
                forget_indexes(log)
                want = await full_matrix(monkeypatch, hub, cid, **kw)
                assert cold == want, (cap, kw)
                assert warm == want, (cap, kw)
                checked += len(cold["rows"])
        assert checked > 1000
        matrix = await visibility(hub, cid, preview_view={"name": "windowed_summary", "recent_n": 3})
        cells = {row.seq: row.cells[eve] for row in matrix.rows}
        shown = sorted(seq for seq, cell in cells.items() if cell.projected == "shown")
        texts = [cells[seq].text for seq in shown]
        assert texts == ["[cat]: to all 38", "[dan]: to all 39", "[ana]: to eve", "[bob]: "]
        assert sum(cell.preview == "shown" for cell in cells.values()) == 3
        assert sum(row.cells[dan].projected == "shown" for row in matrix.rows) == 10
    finally:
        await hc.close()
        await hub.close()


async def test_a_page_that_needs_the_index_builds_it_in_slices_between_yields(monkeypatch):
    """eve sees nothing in the last 600 envelopes: its window needs the index. The page is computed while
    another task ticks on the same loop; it ticks in between (the old code ran through in one go), and the
    index stays warm for the next page."""
    monkeypatch.setattr(visibility_module, "_SUFFIX_CAP", 64)
    monkeypatch.setattr(visibility_module, "_SLICE", 50)
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        cid, (*_, eve) = await sparse_channel(hc, hub)
        log = await channel_log(hub, cid)
        n = len(log)
        forget_indexes(log)
        async with Ticker() as ticker:
            matrix = await visibility(hub, cid, first_seq=n - 49, last_seq=n)
            during = ticker.ticks
        assert during >= n // 50, during  # at least one yield per slice of the index
        adapter = hub.adapter_for_metadata(hub.lookup_channel(cid))
        index = log.indexed(eve, adapter.render_envelope)
        assert index is not None and index.scanned == n
        assert {row.cells[eve].projected for row in matrix.rows} == {"hidden"}
        assert matrix.to_dict() == await full_matrix(monkeypatch, hub, cid, first_seq=n - 49, last_seq=n)
    finally:
        await hc.close()
        await hub.close()

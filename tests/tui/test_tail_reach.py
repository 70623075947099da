"""Issue 22 item 3: the tail reaches the whole WAL. ``tail_limit`` bounds how many rows are held, never which
envelopes ``g``, ``:SEQ``, scrolling and search reach: what is not held is paged in from the store (a real
SQLite hub here), with a visible "loading older…" row. At 80×24, as a new user sees it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual import events
from tui_network import until

from ag2net import Hub, HubClient, Passport
from ag2net.store import SqliteStore
from tui.app import WorkbenchApp, build_app
from tui.models import TailItem
from tui.settings import Settings
from tui.source import HubSource
from tui.widgets.envelope_tail import EnvelopeTail

SIZE = (80, 24)
LIMIT = 100  # the smallest tail_limit the settings accept
LONG = 420  # envelopes of the long channel (more than four times the limit)
NEEDLE = "a needle in the oldest hay"


class Reach:
    def __init__(self, hub: Hub, hc: HubClient, long: str, other: str) -> None:
        self.hub = hub
        self.hc = hc
        self.long = long
        self.other = other


@pytest.fixture
async def reach(tmp_path: Path):
    hub = await Hub.open(
        SqliteStore(tmp_path / "reach.db"), ttl_sweep_interval=0, expectation_sweep_interval=0
    )
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    long = (await ana.open(type="conversation", target="bob")).channel_id
    other = (await bob.open(type="conversation", target="ana")).channel_id
    await until(lambda: True)
    base = await hc.wal_count(long)
    for i in range(base, LONG):
        speaker = ana if i % 2 else bob
        text = NEEDLE if i == base else f"line {i + 1} of the long channel"
        await speaker.send(long, text)
        if i % 3 == 0:  # the other channel interleaves, so pages across channels are merged
            await (bob if i % 2 else ana).send(other, f"aside {i}")
    assert await hc.wal_count(long) == LONG
    yield Reach(hub, hc, long, other)
    await hc.close()
    await hub.close()


async def workbench(reach: Reach) -> WorkbenchApp:
    human = await reach.hc.attach_human("ana")
    return await build_app(reach.hc, human, Settings(tail_limit=LIMIT, first_page=40))


def screen_text(tail: EnvelopeTail) -> list[str]:
    return [tail.render_line(y).text for y in range(tail.size.height)]


def bounded(tail: EnvelopeTail) -> bool:
    return tail.row_count <= LIMIT + tail.page_size


async def test_g_reaches_seq_1_of_a_channel_longer_than_the_tail_limit(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.select_channel(reach.long)
        app.tail.focus()
        await pilot.pause()
        assert min(r.seq or 0 for r in app.tail.visible_rows()) > 1  # seq 1 is not held
        older = LONG - app.tail.visible_count
        assert f"· {older} older" in screen_text(app.tail)[0]  # and the tail says so
        await pilot.press("g")
        await until(lambda: app.tail.cursor_row is not None and app.tail.cursor_row.seq == 1)
        row = app.tail.cursor_row
        assert row is not None and row.envelope.channel_id == reach.long
        assert bounded(app.tail)
        await pilot.pause()
        assert any(line.lstrip().startswith("1 ") for line in screen_text(app.tail))
        # down from the first page reads the next ones (the window is paged, the limit holds)
        for _ in range(12):
            await pilot.press("pagedown")
            await until(lambda: not app.tail.paging)
            assert bounded(app.tail)
        assert app.tail.cursor_row is not None and (app.tail.cursor_row.seq or 0) > app.tail.page_size
        seqs = [r.seq for r in app.tail.visible_rows()]
        assert seqs == list(range(seqs[0] or 0, (seqs[-1] or 0) + 1)) and seqs[0] != 1  # the oldest went


async def test_colon_seq_lands_on_that_seq(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.select_channel(reach.long)
        app.tail.focus()
        await pilot.pause()
        await pilot.press("colon", "1", "0", "enter")
        await until(lambda: app.tail.cursor_row is not None and app.tail.cursor_row.seq == 10)
        row = app.tail.cursor_row
        assert row is not None and row.envelope.channel_id == reach.long
        assert not app.tail.following
        # a seq the channel does not have is one sentence naming the range
        assert app.tail.goto_text("9999").startswith("conversation·")
        assert "has seqs 1 to 420" in app.tail.goto_text("9999")


async def test_end_returns_to_live_after_a_jump(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.select_channel(reach.long)
        app.tail.focus()
        await pilot.press("g")
        await until(lambda: app.tail.cursor_row is not None and app.tail.cursor_row.seq == 1)
        human = await reach.hc.attach_human("bob")
        await human.send(reach.long, "said while the tail was at seq 1")
        await until(lambda: app.tail.pending_count >= 1)  # counted, not held (it would leave a gap)
        assert all(r.seq != LONG + 1 for r in app.tail.visible_rows())
        await pilot.press("G")
        await until(lambda: app.tail.following and not app.tail.paging)
        rows = app.tail.visible_rows()
        assert rows[-1].seq == LONG + 1 and rows[-1].envelope.event_data["text"].startswith("said while")
        assert [r.seq for r in rows] == list(range(rows[0].seq or 0, LONG + 2))  # no gap
        await human.send(reach.long, "and live again")
        await until(lambda: app.tail.visible_rows()[-1].seq == LONG + 2)
        assert app.tail.cursor_row is not None and app.tail.cursor_row.seq == LONG + 2


async def test_search_finds_a_text_only_in_an_old_envelope(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.tail.focus()
        assert app.tail.channel_filter is None  # every channel: pages are merged across them
        assert not any(NEEDLE in str(r.envelope.event_data) for r in app.tail.visible_rows())
        await pilot.press("s", *"needle", "enter")
        await until(
            lambda: app.tail.cursor_row is not None and NEEDLE in str(app.tail.cursor_row.envelope.event_data)
        )
        assert bounded(app.tail)
        await pilot.pause()
        assert any(NEEDLE[:20] in line for line in screen_text(app.tail))  # the match is on screen
        rows = app.tail.visible_rows()
        ids = [r.envelope.envelope_id for r in rows]
        assert ids == sorted(ids) and len(ids) == len(set(ids))  # a contiguous run, in admission order
        # every envelope between the needle and the oldest row held is there, of both channels
        first = {
            cid: min(r.seq or 0 for r in rows if r.envelope.channel_id == cid)
            for cid in (reach.long, reach.other)
        }
        for cid in (reach.long, reach.other):
            seqs = sorted(r.seq or 0 for r in rows if r.envelope.channel_id == cid)
            assert seqs == list(range(first[cid], first[cid] + len(seqs)))


async def test_loading_older_row_shows_while_a_page_is_read(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.select_channel(reach.long)
        app.tail.focus()
        await pilot.pause()
        feed = app.feed
        read = feed.page_older
        gate = asyncio.Event()

        async def held_back(tops: dict[str, int], count: int):
            await gate.wait()  # the store read itself is real; it only starts when the test says so
            return await read(tops, count)

        feed.page_older = held_back  # type: ignore[method-assign]
        oldest = min(r.seq or 0 for r in app.tail.visible_rows())
        for _ in range(10):  # up to the first row held, and one more: the page above it is read
            await pilot.press("pageup")
            if app.tail.paging:
                break
        assert app.tail.paging == "older"
        assert any("loading older…" in text for text in screen_text(app.tail)[1:3])
        gate.set()
        await until(lambda: not app.tail.paging)
        await pilot.pause()
        row = app.tail.cursor_row
        assert row is not None and row.seq is not None and row.seq < oldest  # the cursor went on up
        assert not any("loading older…" in text for text in screen_text(app.tail))
        assert bounded(app.tail)


async def test_colon_label_switches_the_tail_to_that_channel(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.tail.focus()
        label = app.channel_label(reach.other)
        await pilot.press("colon", *label.replace("·", "."), "enter")  # "." types the label's "·"
        await until(lambda: app.selected_channel == reach.other)
        assert app.tail.channel_filter == reach.other
        assert app.query_one("#tail-pane").border_title == f"2 WAL · {label}"
        assert {r.envelope.channel_id for r in app.tail.visible_rows()} == {reach.other}
        # and with a seq: that channel, that seq
        long_label = app.channel_label(reach.long)
        await pilot.press("colon", *f"{long_label.replace('·', '.')} 7".replace(" ", "#"), "enter")
        await until(lambda: app.tail.cursor_row is not None and app.tail.cursor_row.seq == 7)
        row = app.tail.cursor_row
        assert row is not None and row.envelope.channel_id == reach.long
        await until(lambda: app.selected_channel == reach.long)


async def test_header_counts_the_channel_shown(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        total = app.tail.row_count
        app.select_channel(reach.other)
        await pilot.pause()
        shown = app.tail.visible_count
        assert 0 < shown < total
        assert app.tail.summary.startswith(f"{shown:,} rows")  # not "25 of 100 rows": every channel held
        assert app.tail.summary == f"{shown:,} rows · {app.tail.older_count:,} older"
        assert app.tail.older_count == await reach.hc.wal_count(reach.other) - shown
        app.tail.set_filter("text:aside")
        await pilot.pause()
        assert app.tail.summary.startswith(
            f"{app.tail.visible_count:,} of {app.tail.model.held_of(reach.other):,} rows"
        )


async def test_history_reads_every_page_not_only_the_first(reach: Reach) -> None:
    """The root of "the tail holds the newest 5,500 rows": the history's merge dropped a channel whose read
    buffer it had just refilled (it looked at the emptied list), so each channel gave one page only."""
    human = await reach.hc.attach_human("ana")
    source = HubSource(reach.hc, human)
    rows = await source.load_channels()
    sizes = {r.channel_id: r.count for r in rows}
    loaded = {cid: size - 9 for cid, size in sizes.items()}  # the newest 10 of each are shown
    got: list[TailItem] = []
    async for batch, done, _total in source.older_pages(rows, loaded, limit=10_000, page=60):
        got[0:0] = batch
        assert done == sum(10 for _ in sizes) + len(got)
    for cid, size in sizes.items():
        assert sorted(seq for env, seq, _ in got if env.channel_id == cid) == list(range(1, size - 9))
    ids = [env.envelope_id for env, _seq, _label in got]
    assert ids == sorted(ids)  # newest pages first, each oldest first: admission order overall


async def test_the_mouse_wheel_at_the_top_reads_the_page_above(reach: Reach) -> None:
    app = await workbench(reach)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.select_channel(reach.long)
        await pilot.pause()
        oldest = min(r.seq or 0 for r in app.tail.visible_rows())
        for _ in range(40):  # wheel up to the top, and once more there
            await pilot._post_mouse_events([events.MouseScrollUp], app.tail, offset=(10, 5))
            await pilot.pause()
            if min(r.seq or 0 for r in app.tail.visible_rows()) < oldest:
                break
        await until(lambda: not app.tail.paging)
        assert min(r.seq or 0 for r in app.tail.visible_rows()) < oldest
        assert not app.tail.following and bounded(app.tail)

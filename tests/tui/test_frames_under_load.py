"""While envelopes stream in and the tail is paused (someone reading, moving the cursor), each batch repaints
what it changed and nothing else, in a frame of its own.

Textual paints the bounding box of a frame's dirty regions: a batch that dirtied the tail (middle), the
channel list (left) and the status bar (bottom) re-rendered nearly every widget on screen, ~46 ms of CPU
per batch at 1,000 envelopes/s, and a key pressed then waited for it (bench/tui.py key_latency: p95 290 ms).
"""

from __future__ import annotations

import asyncio

from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable

from ag2net.client import HubClient
from ag2net.hub import Hub
from ag2net.identity import Passport
from tui.app import build_app
from tui.settings import Settings
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.quiet_label import QuietLabel

SIZE = (160, 40)
FAR_AWAY = {"ChannelTable", "DataTable", "QuietLabel", "Sparkline", "StatusBar"}
"""Widgets whose repaint in the tail's frame widens that frame to most of the screen."""


async def until(predicate, timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def test_a_paused_tail_under_a_stream_repaints_only_what_changed(monkeypatch) -> None:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="bob", kind="human"))
        channel = (await ana.open(type="conversation", target="bob")).channel_id
        frames: list[set[str]] = []
        recording = False
        on_timer_update = Screen._on_timer_update

        def frame(self: Screen) -> None:  # the screen's update timer holds it from the start
            if recording:
                frames.append({type(widget).__name__ for widget in self._dirty_widgets})
            on_timer_update(self)

        monkeypatch.setattr(Screen, "_on_timer_update", frame)
        app = await build_app(hc, ana, Settings(), load_history=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            tail = app.tail
            for i in range(120):  # more rows than the screen shows: the scrollbar is on
                await ana.send(channel, f"before {i}")
            await until(lambda: tail.row_count >= 121)
            await pilot.pause(0.5)
            await ana.send(channel, "after the scrollbar came")  # its appearance narrows the rows once
            await until(lambda: tail.row_count >= 122)
            await pilot.pause(0.3)
            tail.focus()
            await pilot.press("k", "k")  # reading: the tail is paused, the rows arriving go below the screen
            assert not tail.following and app.status.following is False
            for i in range(20):  # the status bar says "paused · 20 new" (a layout pass: it was "paused")
                await ana.send(channel, f"while paused {i}")
            await until(lambda: tail.pending_count >= 20)
            await pilot.pause(1.2)  # the paused count, the rate and the channel figures have been shown

            full_tail_repaints: list[int] = []
            layouts: list[str] = []
            clears: list[int] = []
            refresh = Widget.refresh
            clear = DataTable.clear

            def spy(self: Widget, *regions, **kwargs):
                if kwargs.get("layout"):
                    layouts.append(f"{type(self).__name__}#{self.id}")
                if isinstance(self, EnvelopeTail) and not regions:
                    full_tail_repaints.append(1)
                return refresh(self, *regions, **kwargs)

            def spy_clear(self: DataTable, *args, **kwargs):
                clears.append(1)
                return clear(self, *args, **kwargs)

            recording = True
            monkeypatch.setattr(Widget, "refresh", spy)
            monkeypatch.setattr(DataTable, "clear", spy_clear)
            rows = tail.row_count
            cursor = tail.cursor_row
            repainted = tail.lines_repainted
            for burst in range(25):  # 2.5 s of 200 envelopes/s
                for i in range(20):
                    await ana.send(channel, f"burst {burst}.{i}")
                    if i % 5 == 4:  # a server reading sockets lets the app run in between
                        await asyncio.sleep(0)
                await asyncio.sleep(0.1)
            await until(lambda: tail.row_count >= rows + 500)
            await pilot.pause(1.2)  # the last figures are shown
            recording = False
            monkeypatch.setattr(Widget, "refresh", refresh)
            monkeypatch.setattr(DataTable, "clear", clear)

            batches = [f for f in frames if "EnvelopeTail" in f]
            assert len(batches) >= 10, frames
            # the tail's frames carry nothing from the left or the bottom of the screen (the old code: all of
            # them did; a batch handled late may still meet a repaint of the figures now and then)
            crowded = [f for f in batches if f & FAR_AWAY]
            assert len(crowded) <= len(batches) // 4, frames
            # ...which still show the new figures, in frames of their own
            assert any("ChannelTable" in f for f in frames) and any("QuietLabel" in f for f in frames)
            assert full_tail_repaints == []  # header and new rows on screen only, never every row
            assert tail.lines_repainted - repainted <= 2 * len(batches)
            assert clears == []  # the channel table is updated in place (the order did not change)
            assert [w for w in layouts if w.startswith(("EnvelopeTail", "QuietLabel"))] == [], layouts
            assert tail.cursor_row is cursor and not tail.following

            # what is shown is current: the channel's count and the paused count
            count = await hc.wal_count(channel)
            table = app.channel_list.table
            assert app.channel_list.get_row(channel).count == count
            assert str(table.get_cell(channel, "env")) == str(count)
            assert str(table.get_cell("__all__", "env")) == str(count)
            assert f"{tail.pending_count:,} new" in str(
                app.status.query_one("#status-follow", QuietLabel).render()
            )
    finally:
        await hc.close()
        await hub.close()

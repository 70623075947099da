"""Envelopes arriving while the workbench follows the tail repaint the tail, the channel list and the status
bar without a layout pass over the whole screen (each one re-renders every widget: under 1,000 envelopes/s
that was most of the key-to-frame latency)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from textual.app import App
from textual.pilot import Pilot
from textual.widget import Widget
from tui_network import close, small_network, until

from tui.app import build_app
from tui.settings import Settings
from tui.widgets.quiet_label import QuietLabel

SIZE = (160, 30)


async def test_a_stream_of_envelopes_causes_no_layout_pass(monkeypatch) -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human, Settings(), load_history=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            channel = network.discussion

            async def one_round(i: int) -> None:
                before = await network.hc.wal_count(channel)
                await network.human.send(channel, f"round {i}")
                await until(lambda: app.tail.row_count >= before + 2)  # ours and the critic's reply

            for i in range(22):  # more rows than the tail shows: its scrollbar is on
                await one_round(i)
                if i == 19:
                    await pilot.pause(0.3)  # the scrollbar's appearance narrows the rows once
            await pilot.pause(0.3)
            assert app.tail.virtual_size.height > app.tail.size.height

            layouts: list[str] = []
            refresh = Widget.refresh

            def spy(self: Widget, *regions, **kwargs):
                if kwargs.get("layout"):
                    layouts.append(f"{type(self).__name__}#{self.id}")
                return refresh(self, *regions, **kwargs)

            monkeypatch.setattr(Widget, "refresh", spy)
            rows = app.tail.row_count
            for i in range(22, 28):
                await one_round(i)
            await pilot.pause(0.3)
            assert app.tail.row_count >= rows + 12
            assert app.tail.following
            # the rate and the health legitimately change width now and then; nothing else may lay out
            ours = [
                w
                for w in layouts
                if w.startswith(("EnvelopeTail", "QuietLabel", "DataTable"))
                and w not in ("QuietLabel#status-rate", "QuietLabel#status-health")
            ]
            assert ours == [], layouts
    finally:
        await close(network)


@contextlib.asynccontextmanager
async def spied_label(text: str, monkeypatch) -> AsyncIterator[tuple[QuietLabel, list[bool], Pilot[None]]]:
    """A ``QuietLabel`` alone in an app, and the list of its refreshes (True: one that asked for a layout)."""

    class One(App[None]):
        def compose(self):
            yield QuietLabel(text, id="rate")

    app = One()
    async with app.run_test() as pilot:
        label = app.query_one(QuietLabel)
        calls: list[bool] = []
        refresh = Widget.refresh

        def spy(self: Widget, *regions, **kwargs):
            if self is label:
                calls.append(bool(kwargs.get("layout")))
            return refresh(self, *regions, **kwargs)

        monkeypatch.setattr(Widget, "refresh", spy)
        yield label, calls, pilot


async def test_a_quiet_label_lays_out_only_when_its_width_changes(monkeypatch) -> None:
    async with spied_label("12 env/s", monkeypatch) as (label, calls, pilot):
        label.show("12 env/s")  # unchanged: nothing
        assert calls == []
        label.show("13 env/s")  # same width: a repaint only
        assert calls == [False]
        label.show("130 env/s")  # wider: a layout pass
        assert calls == [False, True]
        await pilot.pause()
        assert str(label.render()) == "130 env/s" and label.text == "130 env/s"


async def test_a_quiet_label_keeps_its_width_for_a_figure_with_fewer_digits(monkeypatch) -> None:
    async with spied_label("", monkeypatch) as (label, calls, pilot):
        label.show("980 env/s", keep_width=True, min_width=11, align="right")  # room reserved: one layout
        assert calls == [True]
        label.show("1,000 env/s", keep_width=True, align="right")  # fits the room: a repaint only
        label.show("7 env/s", keep_width=True, align="right")
        assert calls == [True, False, False]
        await pilot.pause()
        assert str(label.render()) == "    7 env/s" and label.text == "7 env/s"
        label.show("12 new")  # without keep_width it takes its own width again
        assert calls[-1] is True and str(label.render()) == "12 new"

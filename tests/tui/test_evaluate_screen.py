"""Evaluate… in the real workbench on the demo network (seeded ids), driven through pilot: a bad form is one
inline sentence; with no change every channel replays from the recording; a view change on the critic with a
scripted live model runs both variants with a progress bar, the leaderboard has one row per variant, the
flipped channels are listed (pass → fail), and Enter on one opens its replay beside the original at the
first divergence. The leaderboard is saved as an SVG under /tmp (``AG2NET_EVAL_SVG`` names the file)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from fork_app import RealTimeDemo, wait_for
from textual.widgets import DataTable, Input, ProgressBar, Select, SelectionList, Static

from tui.screens.evaluate import EvaluateScreen
from tui.screens.replay_compare import ReplayCompare
from tui.screenshots import channel_of, ready


async def _until_runs(pilot: Any, screen: EvaluateScreen, timeout: float = 120.0) -> None:
    for _ in range(int(timeout / 0.05)):
        if screen.runs and not (screen.running and screen.running.is_running):
            await pilot.pause()
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no runs within {timeout} s: {screen.query_one('#ev-status', Static).render()}")


async def test_evaluate_a_view_change_shows_the_leaderboard_and_opens_a_flipped_channel():
    app = RealTimeDemo()
    async with app.run_test(size=(150, 44)) as pilot:
        await ready(pilot)
        ids = app.channel_list.shown_ids()
        conv, discussion = channel_of(app, "conversation"), channel_of(app, "discussion")
        screen = EvaluateScreen(app.source, ids, selected=[conv, discussion])
        app.push_screen(screen)
        await pilot.pause()
        assert sorted(screen.query_one("#ev-channels", SelectionList).selected) == sorted([conv, discussion])

        screen.query_one("#ev-axis", Select).value = "view"
        await pilot.press("ctrl+r")
        assert "the view axis needs a change" in str(screen.query_one("#ev-error", Static).render())
        screen.query_one("#ev-change", Input).value = "nobody=full_transcript"
        await pilot.press("ctrl+r")
        assert "'nobody' takes part in none of the ticked channels" in str(
            screen.query_one("#ev-error", Static).render()
        )

        screen.query_one("#ev-change", Input).value = "critic=windowed_summary:recent_n=2"
        screen.query_one("#ev-live", Input).value = "scripted:Looks fine."
        await pilot.press("ctrl+r")
        await _until_runs(pilot, screen)
        assert str(screen.query_one("#ev-error", Static).render()) == ""
        base, changed = screen.runs
        assert base.variant == "no change" and base.pass_rate("reproduced") == 1.0
        assert base.totals()["live_calls"] == 0 and changed.totals()["live_calls"] > 0
        bar = screen.query_one("#ev-progress", ProgressBar)
        assert (bar.progress, bar.total) == (4, 4)
        board = screen.query_one("#ev-board", DataTable)
        assert board.row_count == 2
        flips = screen.query_one("#ev-flips", DataTable)
        assert flips.row_count == len(screen.flips) >= 2
        assert {f.key for f in screen.flips} >= {"reproduced"}
        assert "regression(s)" in str(screen.query_one("#ev-status", Static).render())
        folder = Path(os.environ.get("AG2NET_EVAL_SVG_DIR", "/tmp"))
        app.save_screenshot("ag2net-eval-leaderboard.svg", path=str(folder))
        assert (folder / "ag2net-eval-leaderboard.svg").stat().st_size > 1000

        flips.focus()
        flips.move_cursor(row=0)
        await pilot.press("enter")
        compare = await wait_for(pilot, ReplayCompare, timeout=60)
        assert not compare.diff.identical and compare.differing
        assert compare.label == screen.flips[0].label
        await pilot.press("escape")
        await wait_for(pilot, EvaluateScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, EvaluateScreen)

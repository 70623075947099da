"""SVG snapshots of the debugger screens on the deterministic demo at 80x24 and 120x36: the visibility
matrix with a cell explained, the protocol scrubber below the tail, the causation tree of a delegated answer
(reviewed as PNGs).

Update after reviewing the pictures: ``pytest tests/tui/test_debugger_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot

from tui.screens.causation_tree import CausationTreeScreen
from tui.screens.visibility_matrix import VisibilityMatrixScreen
from tui.screenshots import DemoWorkbench, channel_of, ready, settle
from tui.widgets.scrub_panel import ScrubPanel

SIZES = {"80x24": (80, 24), "120x36": (120, 36)}


async def _until(predicate: Callable[[], bool]) -> None:
    for _ in range(1500):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


async def matrix(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, "workflow"))
    await settle(pilot)
    app.action_focus_pane("tail")
    await pilot.press("m")
    await _until(lambda: isinstance(app.screen, VisibilityMatrixScreen) and app.screen.matrix is not None)
    await settle(pilot)
    await pilot.press(*["up"] * 6, "enter")  # seq 7 x planner: not in the review request's audience
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, VisibilityMatrixScreen)
    screen.elapsed_ms = 0.0  # the page's compute time varies from run to run
    screen._status()
    await settle(pilot)


async def scrub(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, "discussion"))
    await settle(pilot)
    app.action_focus_pane("tail")
    await pilot.press("S")
    await _until(lambda: bool(app.query(ScrubPanel)) and app.query_one(ScrubPanel).state is not None)
    await pilot.press("left_square_bracket", "left_square_bracket")
    await settle(pilot)


async def tree(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    asked = next(
        cid
        for cid, md in app.source.metadata.items()
        if md.manifest.type == "consulting"
        and sorted(app.source.name_for(p) for p in md.participant_ids()) == ["critic", "researcher"]
    )
    app.channel_list.select(asked)
    await settle(pilot)
    app.action_focus_pane("tail")
    assert app.tail.goto_seq(5)
    await pilot.press("t")
    await _until(lambda: isinstance(app.screen, CausationTreeScreen) and app.screen.result is not None)
    await settle(pilot)


SCENES: dict[str, Callable[[Pilot[Any]], Awaitable[None]]] = {"matrix": matrix, "scrub": scrub, "tree": tree}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("scene", list(SCENES))
def test_debugger(snap_compare, scene: str, size: str) -> None:
    assert snap_compare(DemoWorkbench(), terminal_size=SIZES[size], run_before=SCENES[scene])

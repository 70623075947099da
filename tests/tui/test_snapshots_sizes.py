"""SVG snapshots of the main screen, the composer, the envelope detail and the agent view at 80x24 (one
pane at a time), 120x36 (channels beside the middle) and 200x50 (three panes), on the deterministic demo.

Update after reviewing the pictures: ``pytest tests/tui/test_snapshots_sizes.py --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from tui.screenshots import DemoWorkbench, channel_of, ready, settle

SIZES = {"80x24": (80, 24), "120x36": (120, 36), "200x50": (200, 50)}


async def main_screen(pilot: Pilot[Any]) -> None:
    await ready(pilot)
    await settle(pilot)


async def composer(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.settings.source = None
    app.channel_list.select(channel_of(app, "conversation"))
    await settle(pilot)
    await pilot.press("ctrl+e")
    await settle(pilot)
    screen = app.screen
    screen.draft_path = None  # type: ignore[attr-defined]
    event_type = screen.query_one("#composer-type", Input)
    event_type.value = "review.request"
    event_type.cursor_position = len(event_type.value)
    screen.query_one("#composer-data", TextArea).load_text('{\n  "document_id": "doc-123",\n}')
    await settle(pilot)
    await dry_run_settled(pilot)


async def dry_run_settled(pilot: Pilot[Any]) -> None:
    """Wait out the composer's dry-run debounce (a timer, then a worker), then settle."""
    for _ in range(200):
        if not getattr(pilot.app.screen, "dry_run_pending", False):
            break
        await pilot.pause(0.02)
    await settle(pilot)


async def detail(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, "workflow"))
    await settle(pilot)
    app.tail.focus()
    app.tail.set_filter("type:ag2.packet")
    await pilot.press("enter")
    await settle(pilot)


async def agent_view(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, "discussion"))
    await settle(pilot)
    await pilot.press("3")
    await settle(pilot)


SCENES: dict[str, Callable[[Pilot[Any]], Awaitable[None]]] = {
    "main": main_screen,
    "composer": composer,
    "detail": detail,
    "agent_view": agent_view,
}


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("scene", list(SCENES))
def test_sizes(snap_compare, scene: str, size: str) -> None:
    assert snap_compare(DemoWorkbench(), terminal_size=SIZES[size], run_before=SCENES[scene])

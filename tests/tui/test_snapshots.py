"""SVG snapshots of every pane and screen on the deterministic demo (fixed size, no blink, a manual clock and seeded ids).

Update after reviewing the look: ``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio

from snapshot_app import SNAPSHOT_SIZE, DemoWorkbench
from textual.pilot import Pilot
from textual.widgets import Input, TextArea

from tui.app import WorkbenchApp
from tui.screenshots import settle as screenshots_settle


async def ready(pilot: Pilot) -> WorkbenchApp:
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    for _ in range(1000):
        if app.ready and app.peers.peers:
            break
        await asyncio.sleep(0.01)
    await pilot.pause()
    return app


def channel_of(app: WorkbenchApp, kind: str) -> str:
    return next(cid for cid in app.channel_list.shown_ids() if app.channel_list.get_row(cid).type == kind)


async def settle(pilot: Pilot) -> None:
    """The screenshots' settle: workers done (one cancelled by its successor is fine), cursor blink off."""
    await screenshots_settle(pilot)


def test_main_all_channels(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_channel_selected_agent_view(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "discussion"))
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_agent_view_tools(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "conversation"))
        await settle(pilot)
        app.query_one("#pv-tabs").active = "pv-tab-tools"
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_agent_view_last_turn_diff(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "conversation"))
        await settle(pilot)
        app.projected_view.switch_view("windowed_summary", 2)
        await settle(pilot)
        app.query_one("#pv-tabs").active = "pv-tab-turn"
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_peers_card(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        await pilot.press("4")
        app.peers.select("researcher")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_tail_paused_and_filtered(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.tail.focus()
        app.tail.set_filter("-family:channel")
        await pilot.press("k", "k", "k")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_envelope_detail(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "workflow"))
        await settle(pilot)
        app.tail.focus()
        app.tail.set_filter("type:ag2.packet")
        await pilot.press("enter")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_composer_with_validation_message(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.settings.source = None
        app.channel_list.select(channel_of(app, "conversation"))
        await settle(pilot)
        app.action_compose_envelope()
        await settle(pilot)
        composer = app.screen
        composer.draft_path = None  # type: ignore[attr-defined]
        event_type = composer.query_one("#composer-type", Input)
        event_type.value = "review_request"
        event_type.cursor_position = len(event_type.value)
        composer.query_one("#composer-data", TextArea).load_text('{"document_id": "doc-123",}')
        await settle(pilot)
        for _ in range(200):  # the dry run's debounce is a timer, then a worker
            if not getattr(composer, "dry_run_pending", False):
                break
            await pilot.pause(0.02)
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_open_channel_form(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+o")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_jump_labels(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        await ready(pilot)
        await pilot.press("ctrl+g")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_help_for_the_tail(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.tail.focus()
        await pilot.press("f1")
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)


def test_chat_refused(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "workflow"))
        await settle(pilot)
        await pilot.press("i", *"shall we ship it?", "enter")
        for _ in range(300):
            if app.chat.reason:
                break
            await asyncio.sleep(0.01)
        await settle(pilot)

    assert snap_compare(DemoWorkbench(), terminal_size=SNAPSHOT_SIZE, run_before=run_before)

"""The approval screen (issue 24 part 4): the tool call, its arguments and the agent's reason, and each
answer (approve, deny with a reason, edit the arguments, or closed undecided); an empty denial and a bad
edit are refused inline in one sentence; at 80x24 everything scrolls inside the frame and the footer shows
every key. Textual's pilot on the real screen; the screenshots go to /tmp/shots/ as SVG and PNG."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.app import App
from textual.geometry import Region
from textual.widgets import Input, Static, TextArea
from textual.widgets._footer import FooterKey
from tui_network import close, small_network, until

from ag2net.breakpoints import WaitingItem
from tui.app import build_app
from tui.screens.approval import ApprovalScreen, arguments_of, check_arguments
from tui.settings import Settings
from tui.widgets.fitted_footer import FittedFooter

SIZE = (80, 24)
CRITIC = "b" * 32
CHANNEL = "c" * 32
SHOTS = Path("/tmp/shots")
ARGUMENTS = {"table": "orders", "where": "created_at < '2020-01-01'", "limit": 500, "dry_run": False}
REASON = "The old orders are stale; deleting them makes the report count only this year's."


def approval_item(**detail: Any) -> WaitingItem:
    body = {
        "tool": "delete_rows",
        "arguments": ARGUMENTS,
        "reason": REASON,
        "call_id": "call_9f8e7d6c",
        **detail,
    }
    return WaitingItem("item-2", "approval", CHANNEL, CRITIC, "2026-12-02T06:01:02.123+00:00", body)


class Host(App[None]):
    """Opens the screen over an empty app and keeps what it dismissed with."""

    def __init__(self, item: WaitingItem) -> None:
        super().__init__()
        self.item = item
        self.results: list[Any] = []

    def on_mount(self) -> None:
        names = {CRITIC: "critic"}
        screen = ApprovalScreen(
            self.item, name_for=lambda a: names.get(a, a), channel_label="discussion·cccc"
        )
        self.push_screen(screen, self.results.append)


def plain(renderable: Any, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def footer_keys(screen: ApprovalScreen) -> dict[str, str]:
    return {k.key: k.description for k in screen.query_one(FittedFooter).query(FooterKey) if k.display}


async def opened(pilot: Any) -> ApprovalScreen:
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, ApprovalScreen)
    await pilot.pause()
    return screen


def visible(screen: ApprovalScreen, selector: str) -> None:
    """``selector`` is drawn inside the frame and inside the 80x24 terminal."""
    region = screen.query_one(selector).region
    frame = screen.query_one("#approval-frame").region
    assert region.area, f"{selector} is not drawn"
    assert frame.contains_region(region), f"{selector} at {region} is outside the frame {frame}"
    assert Region(0, 0, *SIZE).contains_region(region), f"{selector} at {region} is cut off at 80x24"


async def test_the_call_its_arguments_and_the_reason_are_shown() -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        text = plain(screen.query_one("#approval-body", Static).content)
        assert "delete_rows(…) with" in text
        assert json.dumps(ARGUMENTS, indent=2, sort_keys=True).replace("\n", "\n  ") in text
        assert "critic's reason" in text and REASON in text
        assert "critic wants to run delete_rows · call id call_9f8e7d6c" in str(
            screen.query_one("#approval-head", Static).render()
        )


@pytest.mark.parametrize(
    ("key", "answer"), [("a", {"action": "approve"}), ("y", {"action": "approve"}), ("escape", None)]
)
async def test_approve_and_escape_answer_at_once(key: str, answer: dict[str, Any] | None) -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert app.results == [answer]
        assert not isinstance(app.screen, ApprovalScreen)


async def test_a_denial_needs_a_reason_and_sends_it() -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("d")
        await pilot.pause()
        field = screen.query_one("#approval-deny-reason", Input)
        assert field.has_focus
        await pilot.press("enter")  # empty: refused, in words, in view
        await pilot.pause()
        assert "A denial needs a reason" in screen.error and app.results == []
        visible(screen, "#approval-deny-error")
        await pilot.press("space", "space", "ctrl+s")  # blanks are no reason either
        await pilot.pause()
        assert "A denial needs a reason" in screen.error and app.results == []
        await pilot.press("ctrl+a", *"not", "space", *"in", "space", *"production")
        await pilot.pause()
        assert screen.error == ""  # typing clears the complaint
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [{"action": "deny", "reason": "not in production"}]


async def test_editing_the_arguments_sends_the_new_object() -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")
        await pilot.pause()
        editor = screen.query_one("#approval-edit-arguments", TextArea)
        assert editor.has_focus and json.loads(editor.text) == ARGUMENTS
        edited = {**ARGUMENTS, "dry_run": True, "limit": 10}
        editor.load_text(json.dumps(edited))
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.results == [{"action": "edit", "arguments": edited}]


async def test_a_bad_edit_is_an_inline_sentence_and_nothing_is_sent() -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")
        await pilot.pause()
        editor = screen.query_one("#approval-edit-arguments", TextArea)
        cases = [
            ('{"table": "orders",', "arguments: not valid JSON at line 1 column"),
            ('["orders"]', "arguments must be a JSON object"),
            ("42", 'arguments must be a JSON object ({"name": value, …}), got a number'),
        ]
        for text, expected in cases:
            editor.load_text(text)
            await pilot.pause()
            assert expected in screen.error, f"{text!r}: {screen.error!r}"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.results == [] and app.screen is screen and editor.text == text
            visible(screen, "#approval-edit-error")
        editor.load_text(json.dumps(ARGUMENTS))  # valid, but what the model asked for already
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Nothing was changed" in screen.error and app.results == []
        await pilot.press("escape")  # back to the call; its keys again
        await pilot.pause()
        assert screen.mode == "approval-call" and screen.error == ""
        assert footer_keys(screen) == {"a": "Approve", "d": "Deny", "e": "Edit arguments", "escape": "Close"}


async def test_the_reason_fields_letters_are_typed_not_taken_as_keys() -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("d", "a", "y", "e", "d")
        await pilot.pause()
        assert screen.query_one("#approval-deny-reason", Input).value == "ayed"
        assert app.results == [] and screen.mode == "approval-deny"


def test_arguments_read_from_json_text_and_odd_values() -> None:
    assert arguments_of(approval_item(arguments='{"q": 1}')) == {"q": 1}
    assert arguments_of(approval_item(arguments="not json")) == {"value": "not json"}
    assert arguments_of(approval_item(arguments=None)) == {}
    assert check_arguments('{"q": [1, 2]}') == {"q": [1, 2]}


async def test_at_80x24_a_long_call_scrolls_inside_the_frame_and_every_key_shows() -> None:
    big = {f"field_{i}": "a value that takes some room " * 3 for i in range(12)}
    app = Host(approval_item(arguments=big, reason=REASON * 4))
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        assert Region(0, 0, *SIZE).contains_region(screen.query_one("#approval-frame").region)
        scroll = screen.query_one("#approval-call")
        visible(screen, "#approval-call")
        assert scroll.has_focus and scroll.max_scroll_y > 0 and scroll.max_scroll_x == 0
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y  # the reason, at the end, is in reach
        footer = screen.query_one(FittedFooter)
        assert Region(0, 0, *SIZE).contains_region(footer.region) and footer.hidden_items == []
        assert footer_keys(screen) == {"a": "Approve", "d": "Deny", "e": "Edit arguments", "escape": "Close"}
        await pilot.press("d")
        await pilot.pause()
        visible(screen, "#approval-deny-reason")
        assert footer_keys(screen) == {"ctrl+s": "Send denial", "escape": "Back"}
        await pilot.press("escape", "e")
        await pilot.pause()
        visible(screen, "#approval-edit-arguments")
        assert footer_keys(screen) == {"ctrl+s": "Run with these", "escape": "Back"}


@pytest.mark.parametrize("mode", ["call", "deny", "edit"])
async def test_screenshot_at_80x24(mode: str) -> None:
    app = Host(approval_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        if mode == "deny":
            await pilot.press("d", "enter")
        elif mode == "edit":
            await pilot.press("e")
            screen.query_one("#approval-edit-arguments", TextArea).load_text('{"table": "orders",')
        await pilot.pause()
        SHOTS.mkdir(parents=True, exist_ok=True)
        svg = Path(app.save_screenshot(filename=f"approval_{mode}.svg", path=str(SHOTS)))
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ")
    assert "Approve delete_rows? · critic" in text and "discussion·cccc" in text
    expected = {"call": "Approve", "deny": "A denial needs a reason", "edit": "arguments: not valid JSON"}[
        mode
    ]
    assert expected in text
    if shutil.which("rsvg-convert"):
        png = svg.with_suffix(".png")
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        assert png.stat().st_size > 0


async def test_a_call_cancelled_while_open_takes_no_decision_here() -> None:
    item = approval_item()
    app = Host(item)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("d", *"no")
        screen.item_changed(
            WaitingItem(item.item_id, "approval", CHANNEL, CRITIC, item.created_at, item.detail, "cancelled")
        )
        await pilot.pause()
        assert "No longer waiting (cancelled)" in str(screen.query_one("#approval-settled", Static).render())
        visible(screen, "#approval-settled")
        assert screen.mode == "approval-call" and footer_keys(screen) == {"escape": "Close"}
        await pilot.press("a", "y", "d", "enter")
        await pilot.pause()
        assert app.results == []
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_in_the_workbench_names_come_from_the_hub_and_its_keys_are_the_screens() -> None:
    """Opened over the real workbench as the inbox opens it (no names given): the agent and the channel
    are named from the hub, and the workbench's own keys (panes, chat, escape) do not take its keys."""
    net = await small_network()
    try:
        app = await build_app(net.hc, net.human, Settings())
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            item = WaitingItem(
                "item-9", "approval", net.discussion, net.critic.agent_id, "", approval_item().detail
            )
            results: list[Any] = []
            app.push_screen(ApprovalScreen(item), results.append)
            await until(lambda: isinstance(app.screen, ApprovalScreen))
            screen = app.screen
            assert isinstance(screen, ApprovalScreen)
            await pilot.pause()
            frame = screen.query_one("#approval-frame")
            assert frame.border_title == "Approve delete_rows? · critic"
            assert frame.border_subtitle == app.source.label_for(net.discussion)
            await pilot.press("d", *"i2", "escape", "escape")  # typed into the reason, back, and closed
            await pilot.pause()
            assert results == [None]
    finally:
        await close(net)

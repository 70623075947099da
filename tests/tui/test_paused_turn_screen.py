"""The paused turn screen (issue 24 part 3): the exact request about to go out (system prompt, projected
messages, input, tools, token budget) and each decision's answer (continue, edit, answer as the agent,
skip, or closed undecided); a bad edit is one inline sentence naming the field, never a crash; at 80x24
everything scrolls inside the frame and the footer shows every key. Textual's pilot on the real screen;
the screenshots go to /tmp/shots/ as SVG and PNG."""

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
from textual.widgets import Static, TextArea
from textual.widgets._footer import FooterKey
from tui_network import close, small_network, until

from ag2net.breakpoints import WaitingItem
from ag2net.events import ModelMessage, ModelRequest, TextInput, ToolCallEvent, ToolResultEvent
from tui.app import build_app
from tui.screens.paused_turn import PausedTurnScreen, check_messages
from tui.settings import Settings
from tui.widgets.fitted_footer import FittedFooter

SIZE = (80, 24)
CRITIC = "b" * 32
PLANNER = "a" * 32
CHANNEL = "c" * 32
NAMES = {CRITIC: "critic", PLANNER: "planner"}
SHOTS = Path("/tmp/shots")

MESSAGES = [
    ModelRequest(
        [TextInput("[planner]: The plan: 1. gather sources 2. draft it all 3. review. Thoughts?")]
    ).to_dict(),
    ModelMessage("Step 2 is too big: split it into an outline and the prose.").to_dict(),
    ToolCallEvent("search_web", '{"query": "outline before prose"}', "call-1").to_dict(),
    ToolResultEvent("call-1", "search_web", "3 results: outlines shorten drafting time.").to_dict(),
    ModelRequest([TextInput("[planner]: Revised: 1. sources 2a. outline 2b. prose 3. review.")]).to_dict(),
]
TOOLS = [
    {
        "name": "search_web",
        "description": "Search the web and return the top results.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]},
    },
    {
        "name": "read_page",
        "description": "Read one page of a result.",
        "requires_approval": True,
        "parameters": {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    },
]
SYSTEM = "You are critic. Point out the weakest step of the plan, in two sentences at most."
BUDGET = {"system": 21, "history": 96, "tools": 74, "input": 12, "method": "heuristic", "max_tokens": 400}
"""What the agent's handler sends (``ag2net.client.handler.turn_request``): the counts and the reply limit."""


def paused_item(**request: Any) -> WaitingItem:
    body = {
        "system_prompt": SYSTEM,
        "messages": MESSAGES,
        "inputs": [{"type": "text_input", "content": "[planner]: your turn, critic: is it better now?"}],
        "tools": TOOLS,
        "model": "gpt-4o-mini",
        "token_budget": BUDGET,
        **request,
    }
    return WaitingItem(
        "item-1",
        "turn",
        CHANNEL,
        CRITIC,
        "2026-12-02T06:01:02.123+00:00",
        {"request": body, "breakpoint_id": "bp"},
    )


class Host(App[None]):
    """Opens the screen over an empty app and keeps what it dismissed with."""

    def __init__(self, item: WaitingItem) -> None:
        super().__init__()
        self.item = item
        self.results: list[Any] = []

    def on_mount(self) -> None:
        screen = PausedTurnScreen(
            self.item, name_for=lambda a: NAMES.get(a, a), channel_label="discussion·cccc"
        )
        self.push_screen(screen, self.results.append)


def plain(renderable: Any, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def footer_keys(screen: PausedTurnScreen) -> dict[str, str]:
    footer = screen.query_one(FittedFooter)
    return {k.key: k.description for k in footer.query(FooterKey) if k.display}


async def opened(pilot: Any) -> PausedTurnScreen:
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, PausedTurnScreen)
    await pilot.pause()
    return screen


def visible(screen: PausedTurnScreen, selector: str) -> None:
    """``selector`` is drawn inside the frame and inside the 80x24 terminal."""
    region = screen.query_one(selector).region
    frame = screen.query_one("#turn-frame").region
    assert region.area, f"{selector} is not drawn"
    assert frame.contains_region(region), f"{selector} at {region} is outside the frame {frame}"
    assert Region(0, 0, *SIZE).contains_region(region), f"{selector} at {region} is cut off at 80x24"


# ---------------------------------------------------------------------- the request


async def test_the_request_shows_prompt_messages_input_tools_and_budget() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        text = plain(screen.query_one("#turn-request-body", Static).content)
        assert SYSTEM in text
        for role in ("#1 user", "#2 assistant", "#3 tool call", "#4 tool result", "#5 user"):
            assert role in text, f"{role!r} missing from the request:\n{text}"
        assert 'search_web({"query": "outline before prose"})' in text
        assert "your turn, critic" in text  # this turn's input
        assert "2 tools offered" in text and "read_page" in text and '"required"' in text
        assert "203 / 128k tokens" in text  # the counts the agent sent, against gpt-4o-mini's window
        assert "up to 400 tokens (the model's max_tokens)" in text
        assert "need a person's approval before they run: read_page" in text
        head = str(screen.query_one("#turn-head", Static).render())
        assert "critic is about to call gpt-4o-mini: 5 messages, 2 tools offered" in head


async def test_a_request_without_a_budget_is_estimated_and_odd_messages_are_shown_raw() -> None:
    odd = {"role": "user", "content": "not an ag2net event"}
    app = Host(paused_item(token_budget=None, messages=[*MESSAGES[:2], odd]))
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        text = plain(screen.query_one("#turn-request-body", Static).content)
        assert "token budget (estimated here)" in text and "/ 128k tokens (estimate)" in text
        assert "#3 not an event" in text and "not an ag2net event" in text


# ---------------------------------------------------------------------- each decision


@pytest.mark.parametrize(
    ("key", "answer"), [("c", {"action": "continue"}), ("s", {"action": "skip"}), ("escape", None)]
)
async def test_continue_skip_and_escape_answer_at_once(key: str, answer: dict[str, Any] | None) -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert app.results == [answer]
        assert not isinstance(app.screen, PausedTurnScreen)


async def test_edit_sends_the_changed_messages_and_system_prompt() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")
        await pilot.pause()
        editor = screen.query_one("#turn-edit-messages", TextArea)
        assert editor.has_focus
        assert json.loads(editor.text) == MESSAGES  # the editor starts from the request's messages
        edited = [*MESSAGES[:4], ModelRequest([TextInput("[planner]: Revised: outline only.")]).to_dict()]
        editor.load_text(json.dumps(edited, indent=2))
        system = screen.query_one("#turn-edit-system", TextArea)
        system.load_text(SYSTEM + " Be kind.")
        await pilot.pause()
        assert screen.error == ""
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.results == [{"action": "edit", "messages": edited, "system_prompt": SYSTEM + " Be kind."}]


async def test_an_edit_of_the_messages_alone_leaves_the_system_prompt_out() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")
        await pilot.pause()
        editor = screen.query_one("#turn-edit-messages", TextArea)
        editor.load_text(json.dumps(MESSAGES[2:], indent=2))
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.results == [{"action": "edit", "messages": MESSAGES[2:]}]


async def test_a_bad_edit_is_an_inline_sentence_naming_the_field_and_nothing_is_sent() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")
        await pilot.pause()
        editor = screen.query_one("#turn-edit-messages", TextArea)
        cases = [
            ('[{"type": "model_message", "content": "hi"', "messages: not valid JSON at line 1 column"),
            ('{"type": "model_message"}', "messages must be a JSON list of events"),
            (
                '[{"type": "model_message", "content": "a"}, {"type": "nope"}]',
                "messages[1].type 'nope' is not",
            ),
            ('[{"type": "model_message", "contnt": "a"}]', "messages[0].content is missing"),
            ('[{"type": "model_message", "content": "a", "role": "x"}]', "unknown field 'role'"),
            (
                '[{"type": "tool_call", "name": "f", "arguments": {"q": 1}}]',
                "messages[0].arguments must be a string",
            ),
            (
                '[{"type": "model_request", "parts": [{"type": "text_input"}]}]',
                "messages[0].parts[0].content must be",
            ),
            ('["hello"]', "messages[0] must be an object"),
        ]
        for text, expected in cases:
            editor.load_text(text)
            await pilot.pause()
            assert expected in screen.error, f"{text!r}: {screen.error!r}"
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert app.results == [] and app.screen is screen  # refused in place, the editor keeps the text
            assert editor.text == text
            visible(screen, "#turn-edit-error")
            assert expected in str(screen.query_one("#turn-edit-error").render()).replace("\n", " ")
        editor.load_text(json.dumps(MESSAGES))  # back to the original: valid, but nothing changed
        await pilot.pause()
        assert screen.error == ""
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "Nothing was changed" in screen.error and app.results == []
        await pilot.press("escape")  # back to the request; Escape there closes, undecided
        await pilot.pause()
        assert screen.mode == "turn-request" and screen.error == ""
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_answering_in_the_agents_place_posts_the_typed_text() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("a")
        await pilot.pause()
        assert "replying to: [planner]: your turn, critic" in str(
            screen.query_one("#turn-answer-context", Static).render()
        )
        await pilot.press("ctrl+s")  # nothing typed yet: refused, in words
        await pilot.pause()
        assert "The answer is empty" in screen.error and app.results == []
        visible(screen, "#turn-answer-error")
        await pilot.press(*"Better", "space", *"now.")
        await pilot.pause()
        assert screen.error == ""  # typing clears the complaint
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.results == [{"action": "answer", "text": "Better now."}]


async def test_the_editors_keys_type_text_instead_of_deciding() -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("a", "c", "s", "e")  # in the answer these are letters, not continue / skip / edit
        await pilot.pause()
        assert screen.query_one("#turn-answer-text", TextArea).text == "cse"
        assert app.results == [] and screen.mode == "turn-answer"


def test_check_messages_reads_every_event_type() -> None:
    summary = {"type": "compaction_summary", "summary": "3 earlier posts", "event_count": 3}
    assert check_messages(json.dumps([*MESSAGES, summary])) == [*MESSAGES, summary]
    with pytest.raises(ValueError, match=r"messages\[0\].event_count must be a whole number"):
        check_messages(json.dumps([{**summary, "event_count": "3"}]))
    with pytest.raises(ValueError, match=r"messages\[0\].name is empty"):
        check_messages('[{"type": "tool_call", "name": " "}]')


# ---------------------------------------------------------------------- 80x24


async def test_at_80x24_the_request_scrolls_inside_the_frame_and_every_key_shows() -> None:
    long_history = MESSAGES * 4
    app = Host(paused_item(messages=long_history))
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        frame = screen.query_one("#turn-frame")
        assert Region(0, 0, *SIZE).contains_region(frame.region)
        scroll = screen.query_one("#turn-request")
        visible(screen, "#turn-request")
        assert scroll.has_focus and scroll.max_scroll_y > 0 and scroll.max_scroll_x == 0
        await pilot.press("end")
        await pilot.pause()
        assert scroll.scroll_y == scroll.max_scroll_y  # the tools, at the end, are in reach
        footer = screen.query_one(FittedFooter)
        assert Region(0, 0, *SIZE).contains_region(footer.region)
        assert {"c": "Continue", "e": "Edit", "a": "Answer", "s": "Skip", "escape": "Close"}.items() <= (
            footer_keys(screen).items()
        )
        assert footer.hidden_items == []
        await pilot.press("e")
        await pilot.pause()
        for selector in ("#turn-edit-system", "#turn-edit-messages"):
            visible(screen, selector)
        assert footer_keys(screen) == {"ctrl+s": "Apply edit", "escape": "Back"}
        await pilot.press("escape", "a")
        await pilot.pause()
        visible(screen, "#turn-answer-text")
        assert footer_keys(screen) == {"ctrl+s": "Send answer", "escape": "Back"}


@pytest.mark.parametrize("mode", ["request", "edit", "answer"])
async def test_screenshot_at_80x24(mode: str) -> None:
    app = Host(paused_item())
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        if mode == "edit":
            await pilot.press("e")
            screen.query_one("#turn-edit-messages", TextArea).load_text('[{"type": "nope"}]')
        elif mode == "answer":
            await pilot.press("a", *"Better", "space", *"now.")
        await pilot.pause()
        SHOTS.mkdir(parents=True, exist_ok=True)
        svg = Path(app.save_screenshot(filename=f"paused_turn_{mode}.svg", path=str(SHOTS)))
    text = svg.read_text(encoding="utf-8").replace("&#160;", " ")
    assert "Paused turn · critic" in text and "discussion·cccc" in text
    shown = {"request": "Continue", "edit": "Apply edit", "answer": "Send answer"}[mode]
    assert shown in text
    if mode == "edit":
        assert "messages[0].type 'nope' is not an event type" in text.replace("&#x27;", "'")
    if shutil.which("rsvg-convert"):
        png = svg.with_suffix(".png")
        subprocess.run(["rsvg-convert", "-o", str(png), str(svg)], check=True)
        assert png.stat().st_size > 0


async def test_a_turn_answered_elsewhere_takes_no_decision_here() -> None:
    item = paused_item()
    app = Host(item)
    async with app.run_test(size=SIZE) as pilot:
        screen = await opened(pilot)
        await pilot.press("e")  # half-way through an edit when another operator continues the turn
        await pilot.pause()
        other = WaitingItem(
            item.item_id,
            "turn",
            CHANNEL,
            CRITIC,
            item.created_at,
            item.detail,
            "answered",
            {"action": "continue", "by": "bob"},
        )
        screen.item_changed(other)
        await pilot.pause()
        assert screen.mode == "turn-request"
        shown = str(screen.query_one("#turn-settled", Static).render())
        assert "Already answered by bob (continue)" in shown
        visible(screen, "#turn-settled")
        assert footer_keys(screen) == {"escape": "Close"}
        await pilot.press("c", "s", "e", "a")
        await pilot.pause()
        assert app.results == [] and screen.mode == "turn-request"
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


async def test_in_the_workbench_names_come_from_the_hub_and_its_keys_are_the_screens() -> None:
    """Opened over the real workbench as the inbox opens it (no names given): the agent and the channel
    are named from the hub, and the workbench's own keys (panes, compose, escape) do not take its keys."""
    net = await small_network()
    try:
        app = await build_app(net.hc, net.human, Settings())
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            item = WaitingItem(
                "item-9", "turn", net.discussion, net.critic.agent_id, "", paused_item().detail
            )
            results: list[Any] = []
            app.push_screen(PausedTurnScreen(item), results.append)
            await until(lambda: isinstance(app.screen, PausedTurnScreen))
            screen = app.screen
            assert isinstance(screen, PausedTurnScreen)
            await pilot.pause()
            frame = screen.query_one("#turn-frame")
            assert frame.border_title == "⏸ Paused turn · critic"
            assert frame.border_subtitle == app.source.label_for(net.discussion)
            await pilot.press("a", *"i2", "escape", "e", "escape")  # typed, back, editor, back: no pane moved
            await pilot.pause()
            assert isinstance(app.screen, PausedTurnScreen) and results == []
            await pilot.press("a", "ctrl+e", *"ok", "ctrl+s")  # ctrl+e: the end of the line, not compose
            await pilot.pause()
            assert results == [{"action": "answer", "text": "i2ok"}]
    finally:
        await close(net)

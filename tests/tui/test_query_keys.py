"""Keys typed right after the tail's ``/``, ``s`` or ``:`` reach the query bar they open, every one of them,
when a terminal hands them over in one read (a fast typist, a paste): the key that opens the bar is
resolved when the app reads it and the focus moves at once (issue 22 item 5, keys that are never lost)."""

from __future__ import annotations

from textual import events
from textual.app import App
from textual.widgets import Input
from tui_network import close, small_network, until

from tui.app import build_app
from tui.settings import Settings

NAMES = {"/": "slash", ":": "colon", " ": "space"}


def burst(app: App[None], text: str) -> None:
    """Queue ``text`` as one read from the terminal does: every key queued before the first is handled."""
    for char in text:
        event = events.Key(NAMES.get(char, char), char)
        event.set_sender(app)
        app.post_message(event)


async def test_text_typed_right_after_a_query_key_lands_in_the_query_bar() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human, Settings())
        async with app.run_test(size=(80, 24)) as pilot:
            await until(lambda: app.ready)
            bar = app.query_one("#query-bar", Input)
            for key, text in (("/", "sender:planner"), ("s", "tell me"), (":", "3")):
                app.screen.set_focus(app.tail)
                await pilot.pause()
                before = app.tail.cursor_row
                burst(app, key + text)
                await until(lambda text=text: bar.value == text)
                assert bar.has_focus
                assert app.tail.cursor_row == before  # nothing of it moved the tail
                await pilot.press("escape")
                await pilot.pause()
    finally:
        await close(network)

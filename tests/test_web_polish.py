"""``ag2net web`` in Debian's Chromium through Playwright (as tests/test_web.py drives it): the page has the
keyboard on load, so a key typed before any click reaches the workbench (issue 22 item 5)."""

from __future__ import annotations

import pytest
from test_web import (
    NOTE_TERMINAL,
    SCREEN_TEXT,
    chromium_or_skip,
    free_port,
    home,  # noqa: F401 (the fixture)
    needs_textual_serve,
    served,
    showing,
    until,
)


@needs_textual_serve
def test_the_page_has_the_keyboard_on_load(home: dict[str, str]) -> None:  # noqa: F811
    executable = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    with sync_api.sync_playwright() as playwright:
        try:
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
        except Exception as exc:  # a Chromium that cannot start here is a machine without one
            pytest.skip(f"Chromium at {executable} cannot be started: {str(exc).splitlines()[0]}")
        with served("--memory", "--port", str(free_port()), env=home) as web:
            context = browser.new_context(viewport={"width": 1200, "height": 800})
            context.route(lambda url: not url.startswith(web.url), lambda route: route.abort())
            context.add_init_script(NOTE_TERMINAL)
            page = context.new_page()
            page.goto(web.url)
            until(lambda: showing(page, "Channels"), 45, "the channels pane", page)
            focused = page.evaluate("() => document.activeElement && document.activeElement.className")
            assert "xterm-helper-textarea" in str(focused), focused
            # no click: F1 typed now opens the help of the focused pane
            page.keyboard.press("F1")
            until(
                lambda: "WAL tail" in page.evaluate(SCREEN_TEXT) and showing(page, "Help"), 20, "help", page
            )
        browser.close()

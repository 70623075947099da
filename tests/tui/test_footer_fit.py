"""The main screen's footer never cuts an item mid-word: at every width from 80 to 200 columns each item it
shows is whole ("^o Open channel", not "^o Open channe"), those that do not fit are left out from the end
(f1 Help stays), and a footer that left any out ends with "…". Live resizes and focus changes re-fit it."""

from __future__ import annotations

import pytest
from textual.widgets import Footer
from textual.widgets._footer import FooterKey
from tui_network import close, small_network, until

from tui.app import WorkbenchApp, build_app
from tui.settings import Settings
from tui.widgets.fitted_footer import ELLIPSIS, FittedFooter


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def footer_line(app: WorkbenchApp) -> str:
    """The footer's row as the terminal shows it."""
    return app.screen._compositor.render_strips()[-1].text


def whole_items(app: WorkbenchApp) -> set[str]:
    """Every item the footer may show, whole: "key description" of each key, and the "…"."""
    footer = app.screen.query_one(Footer)
    return {f"{k.key_display} {k.description}".strip() for k in footer.query(FooterKey)} | {ELLIPSIS}


async def settled(app: WorkbenchApp, pilot) -> None:
    """Wait for the footer to show its keys, then for its fit after the last layout."""
    await until(lambda: "palette" in footer_line(app))
    for _ in range(3):
        await pilot.pause()


def check_footer(app: WorkbenchApp, width: int) -> list[str]:
    """Assert nothing in the footer is cut; return the items shown (left of the palette key)."""
    line = footer_line(app)
    assert len(line) == width
    left, sep, palette = line.partition("▏")
    assert sep and palette.strip() == "^p palette", line
    shown = [item.strip() for item in left.split("  ") if item.strip()]
    known = whole_items(app)
    cut = [item for item in shown if item not in known]
    assert not cut, f"{width} columns: footer items cut at the edge: {cut} in {line!r}"
    footer = app.screen.query_one(Footer)
    assert isinstance(footer, FittedFooter), "the main screen's footer fits its items"
    if footer.hidden_items:
        assert shown[-1] == ELLIPSIS, line
    else:
        assert ELLIPSIS not in shown, line
    return shown


@pytest.mark.parametrize("width", [80, 100, 120, 140, 200])
async def test_no_footer_item_is_cut(network, width: int) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=(width, 36)) as pilot:
        await until(lambda: app.ready)
        await settled(app, pilot)
        shown = check_footer(app, width)
        assert "f1 Help" in shown  # pinned: the way to every other key stays
        if width >= 140:
            assert "^o Open channel" in shown and ELLIPSIS not in shown
        else:
            assert ELLIPSIS in shown and "^o Open channel" not in shown


async def test_the_footer_refits_on_resize_and_focus_change(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=(200, 36)) as pilot:
        await until(lambda: app.ready)
        await settled(app, pilot)
        assert ELLIPSIS not in check_footer(app, 200)
        await pilot.resize_terminal(100, 36)
        await settled(app, pilot)
        assert ELLIPSIS in check_footer(app, 100)
        await pilot.press("i")  # the chat field: its own keys come first
        await settled(app, pilot)
        check_footer(app, 100)
        await pilot.resize_terminal(200, 36)
        await settled(app, pilot)
        assert ELLIPSIS not in check_footer(app, 200)


async def test_the_footer_is_rebuilt_only_when_its_keys_change(network) -> None:
    """A focus move that keeps the same keys builds nothing; one that changes them rebuilds the items."""
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=(200, 36)) as pilot:
        await until(lambda: app.ready)
        await settled(app, pilot)
        footer = app.screen.query_one(FittedFooter)
        at_start = footer.recomposes
        assert at_start <= 2  # the first build, and at most one when the tail took focus
        for _ in range(3):  # the same bindings signalled again: nothing to rebuild
            footer.bindings_changed(app.screen)
            await pilot.pause()
        assert footer.recomposes == at_start
        await pilot.press("i")  # the chat field has other keys: rebuilt, and it shows them
        await settled(app, pilot)
        assert footer.recomposes > at_start
        check_footer(app, 200)

"""A focus model people can predict: Escape leaves text fields, Tab completes @names, modals show their
own footer keys, and the detail's Escape closes while b goes back. Real workbench, real hub, pilot."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Footer, Input
from textual.widgets._footer import FooterKey
from tui_network import close, small_network, until

from tui.app import build_app
from tui.screens.composer import EnvelopeComposer
from tui.screens.jump import JumpOverlay
from tui.screens.open_channel import OpenChannelForm
from tui.settings import Settings
from tui.widgets.envelope_detail import EnvelopeDetail

SIZE = (160, 45)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def _keys(screen) -> dict[str, str]:
    footers = list(screen.query(Footer))
    assert footers, f"{type(screen).__name__} has no footer of its own"
    return {key.key: key.description for key in footers[0].query(FooterKey)}


async def footer_keys(screen) -> dict[str, str]:
    """``{key: description}`` the footer mounted in ``screen`` shows (once it has drawn its keys)."""
    await until(lambda: bool(_keys(screen)))
    return _keys(screen)


async def test_escape_clears_the_channel_filter_and_leaves_it_for_the_table(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1", "ctrl+f")
        flt = app.channel_list.query_one("#channels-filter", Input)
        assert flt.has_focus
        await pilot.press(*"crit", "escape")
        await pilot.pause()
        assert app.focused is app.channel_list.query_one(DataTable)
        assert flt.value == ""  # escape clears the filter as it leaves it (issue 22 item 5)
        # and from the table, pane keys work again (they were typed into the filter before)
        await pilot.press("2")
        assert app.focused is app.tail


async def test_tab_accepts_the_mention_completion_then_moves_focus(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        await pilot.press("i", *"@cr")
        await until(lambda: app.chat.completion is not None)
        await pilot.press("tab")
        assert app.chat.input.value == "@critic "
        assert app.chat.input.has_focus  # Tab completed, it did not move on
        await pilot.press(*"ok?")
        assert app.chat.input.value == "@critic ok?"
        await pilot.press("tab")  # nothing to complete: Tab moves the focus as everywhere
        await pilot.pause()
        assert not app.chat.input.has_focus


async def test_detail_escape_closes_after_following_the_cause_and_b_goes_back(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        app.tail.focus()
        await pilot.press("enter")
        await pilot.pause()
        first = app.screen
        assert isinstance(first, EnvelopeDetail) and first.envelope.causation_id
        keys = await footer_keys(first)
        assert keys.get("escape") == "Close" and keys.get("o") == "Open cause"
        assert "ctrl+e" not in keys and "i" not in keys  # not the main screen's keys
        await pilot.press("o")
        await pilot.pause()
        second = app.screen
        assert isinstance(second, EnvelopeDetail)
        assert second.envelope.envelope_id == first.envelope.causation_id
        assert len(app.screen_stack) == 2  # switched, not stacked
        assert (await footer_keys(second)).get("b") == "Back"
        await pilot.press("b")
        await pilot.pause()
        assert isinstance(app.screen, EnvelopeDetail)
        assert app.screen.envelope.envelope_id == first.envelope.envelope_id
        await pilot.press("o")
        await pilot.pause()
        await pilot.press("escape")  # closes, whatever was followed
        await pilot.pause()
        assert not isinstance(app.screen, EnvelopeDetail)
        assert len(app.screen_stack) == 1


async def test_composer_open_form_and_jump_show_their_own_footer_keys(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and bool(app.peers.peers))
        app.channel_list.select(network.discussion)
        await pilot.pause()
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        keys = await footer_keys(app.screen)
        assert keys.get("ctrl+s") == "Send" and keys.get("escape") == "Close"
        assert "ctrl+o" not in keys and "1" not in keys
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, EnvelopeComposer))
        await pilot.press("ctrl+o")
        await until(lambda: isinstance(app.screen, OpenChannelForm))
        keys = await footer_keys(app.screen)
        assert keys.get("ctrl+s") == "Open" and keys.get("escape") == "Cancel"
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, OpenChannelForm))
        await pilot.press("ctrl+g")
        await until(lambda: isinstance(app.screen, JumpOverlay))
        keys = await footer_keys(app.screen)
        assert keys.get("escape") == "Cancel" and keys.get("c") == "channels" and keys.get("t") == "WAL tail"
        await pilot.press("c")
        await pilot.pause()
        assert app.focused is app.channel_list.query_one(DataTable)

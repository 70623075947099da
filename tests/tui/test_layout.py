"""The workbench fits the terminal from 80x24 to 250x70, switches panes with 1-4 and the mouse, keeps its
state across live resizes, and its app-level keys work from inside text fields (issue 11)."""

from __future__ import annotations

import pytest
from textual.command import CommandPalette
from textual.geometry import Region
from textual.widgets import DataTable, HelpPanel, Input, OptionList
from tui_network import close, small_network, until

from tui.app import WorkbenchApp, build_app
from tui.screens.composer import EnvelopeComposer
from tui.screens.confirm import ConfirmScreen
from tui.screens.open_channel import OpenChannelForm
from tui.widgets.pane_strip import PaneStrip

SIZES = [(80, 24), (90, 30), (99, 30), (100, 30), (120, 36), (139, 40), (140, 40), (200, 50), (250, 70)]
PANE_IDS = {"channels": "#channels-pane", "tail": "#tail-pane", "right": "#right-pane"}


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def started(network) -> WorkbenchApp:
    return await build_app(network.hc, network.human)


def on_screen(app: WorkbenchApp) -> dict[str, Region]:
    """The panes laid out on the screen, with their regions."""
    shown = {}
    for name, selector in PANE_IDS.items():
        pane = app.query_one(selector)
        if pane.display and pane.region.area:
            shown[name] = pane.region
    return shown


def assert_fits(app: WorkbenchApp, width: int, height: int) -> None:
    screen = Region(0, 0, width, height)
    for name, region in on_screen(app).items():
        assert screen.contains_region(region), f"{name} pane {region} leaves the {width}x{height} screen"
    for widget in (app.chat, app.status, *app.status.children):
        if widget.display and widget.region.area:
            assert screen.contains_region(widget.region), f"{widget!r} {widget.region} is cut at {width}"
    follow = app.status.query_one("#status-follow")
    assert follow.region.area and follow.region.right <= width, "the tail's mode is pushed off the status bar"


@pytest.mark.parametrize(("width", "height"), SIZES)
async def test_the_panes_fit_at_every_size(network, width: int, height: int) -> None:
    app = await started(network)
    async with app.run_test(size=(width, height)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        shown = on_screen(app)
        strip = app.query_one(PaneStrip)
        if width >= 140:
            assert set(shown) == {"channels", "tail", "right"}
            assert not strip.display
            assert shown["tail"].width >= 50 and shown["right"].width >= 40
        elif width >= 100:
            assert set(shown) == {"channels", "tail"}  # the right pane waits behind 3 / 4
            assert strip.display
        else:
            assert set(shown) == {"tail"}
            assert shown["tail"].width == width
            assert strip.display
        assert_fits(app, width, height)


@pytest.mark.parametrize(("width", "height"), [(140, 40), (160, 45), (200, 50), (250, 70)])
async def test_the_tail_gets_the_width_in_three_columns(network, width: int, height: int) -> None:
    app = await started(network)
    async with app.run_test(size=(width, height)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        shown = on_screen(app)
        assert shown["tail"].width > max(shown["channels"].width, shown["right"].width)
        if width >= 160:  # a browser tab's usual width: the tail has about half the screen
            assert shown["tail"].width >= 0.45 * width


async def test_number_keys_show_one_pane_at_a_time_when_narrow(network) -> None:
    app = await started(network)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        strip = app.query_one(PaneStrip)
        assert strip.active == "tail" and strip.tab("tail").has_class("-active")
        await pilot.press("1")
        assert set(on_screen(app)) == {"channels"}
        assert app.focused is app.channel_list.query_one(DataTable)
        assert strip.active == "channels" and strip.tab("channels").has_class("-active")
        assert not strip.tab("tail").has_class("-active")
        await pilot.press("3")
        assert set(on_screen(app)) == {"right"}
        assert app.query_one("#right-tabs").active == "tab-view"
        assert app.pane_of(app.focused) == "view" and strip.active == "view"
        await pilot.press("escape")  # not in a text field: nothing to leave, the pane stays
        await pilot.press("4")
        assert set(on_screen(app)) == {"right"}
        assert app.query_one("#right-tabs").active == "tab-peers"
        assert isinstance(app.focused, OptionList)  # the list, not the search box: 1-4 keep working
        await pilot.press("2")
        assert set(on_screen(app)) == {"tail"} and app.focused is app.tail
        assert "pane 2/4" in str(strip.query_one("#pane-strip-where").render())


async def test_a_click_on_the_strip_shows_that_pane(network) -> None:
    app = await started(network)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        assert await pilot.click("#pane-tab-peers")
        await pilot.pause()
        assert set(on_screen(app)) == {"right"}
        assert app.query_one("#right-tabs").active == "tab-peers"
        assert await pilot.click("#pane-tab-channels")
        await pilot.pause()
        assert set(on_screen(app)) == {"channels"}


async def test_medium_width_puts_the_right_pane_in_the_middle(network) -> None:
    app = await started(network)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        await pilot.press("3")
        assert set(on_screen(app)) == {"channels", "right"}
        await pilot.press("1")  # the channels pane takes the keys; the middle keeps the agent view
        assert set(on_screen(app)) == {"channels", "right"}
        await pilot.press("2")
        assert set(on_screen(app)) == {"channels", "tail"}
        middle = on_screen(app)["tail"]
        assert middle.right == 120


async def test_a_live_resize_keeps_channel_tail_position_and_draft(network) -> None:
    app = await started(network)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.ready)
        for text in ("one", "two", "three", "four"):
            await network.human.send(network.conversation, text)
        app.channel_list.select(network.conversation)
        await until(lambda: app.tail.visible_count >= 6)
        await pilot.pause()
        tail = app.tail
        tail.focus()
        await pilot.press("up", "up")
        row = tail.cursor_row
        assert row is not None
        cursor, following = row.envelope.envelope_id, tail.following
        assert not following
        await pilot.press("i", *"a draft")
        await pilot.press("escape")
        assert app.focused is tail
        for width, height in [(120, 36), (80, 24), (99, 40), (250, 70), (80, 24), (200, 50)]:
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            assert app.size == (width, height)
            assert app.selected_channel == network.conversation
            assert app.channel_list.selected_channel == network.conversation
            row = tail.cursor_row
            assert row is not None and row.envelope.envelope_id == cursor and tail.following == following
            assert app.chat.input.value == "a draft"
            assert "tail" in on_screen(app) and app.focused is tail
            assert_fits(app, width, height)


async def test_focus_in_the_right_pane_keeps_it_on_screen_when_the_terminal_narrows(network) -> None:
    app = await started(network)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        app.peers.query_one("#peers-list").focus()
        await pilot.pause()
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert set(on_screen(app)) == {"right"}
        assert app.query_one(PaneStrip).active == "peers"
        await pilot.resize_terminal(120, 36)
        await pilot.pause()
        assert set(on_screen(app)) == {"channels", "right"}


# ---------------------------------------------------------------- app keys from text fields


async def test_global_keys_work_from_the_chat_field(network) -> None:
    app = await started(network)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        await pilot.press("i", *"half typed")
        assert app.chat.input.has_focus
        await pilot.press("ctrl+e")
        assert isinstance(app.screen, EnvelopeComposer)
        await pilot.press("ctrl+e")  # inside the composer the key is its editor's, not a second composer
        assert len(app.screen_stack) == 2
        await pilot.press("escape")
        assert app.screen is app.screen_stack[0]
        assert app.chat.input.value == "half typed"  # ctrl+e did not act on the field
        app.chat.input.focus()
        await pilot.press("ctrl+o")
        await until(lambda: isinstance(app.screen, OpenChannelForm))
        await pilot.press("escape")
        await until(lambda: app.screen is app.screen_stack[0])
        app.chat.input.focus()
        await pilot.press("ctrl+w")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        assert app.chat.input.value == "half typed"  # ctrl+w did not delete a word
        app.chat.input.focus()
        await pilot.press("f1")
        assert app.screen.query(HelpPanel)
        await pilot.press("f1")
        app.chat.input.focus()
        await pilot.press("ctrl+p")
        await until(lambda: isinstance(app.screen, CommandPalette))
        await pilot.press("escape")


@pytest.mark.parametrize(
    "field", ["#chat-text", "#channels-filter", "#peers-search", "#query-bar", "#pv-recent"]
)
async def test_escape_leaves_every_text_field_for_its_pane(network, field: str) -> None:
    app = await started(network)
    async with app.run_test(size=(200, 50)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        if field == "#query-bar":
            app.tail.focus()
            await pilot.press("slash")
        else:
            if field == "#peers-search":
                await pilot.press("4")
            app.tail.focus()  # the chat goes back to the pane it came from
            await pilot.pause()
            app.query_one(field, Input).focus()
        await pilot.pause()
        assert isinstance(app.focused, Input) and app.focused.id == field[1:]
        await pilot.press("escape")
        focused = app.focused
        assert not isinstance(focused, Input), f"escape left the focus in {focused!r}"
        expected = {
            "#chat-text": "tail",
            "#channels-filter": "channels",
            "#peers-search": "peers",
            "#query-bar": "tail",
            "#pv-recent": "view",
        }[field]
        assert app.pane_of(focused) == expected
        if field == "#query-bar":
            assert not app.query_one("#query-bar").has_class("-visible")
        await pilot.press("1")  # back in pane navigation: a digit switches panes, it is not typed
        assert app.pane_of(app.focused) == "channels"


async def test_closing_a_channel_asks_first(network) -> None:
    app = await started(network)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        await pilot.pause()
        await pilot.press("ctrl+w")
        assert isinstance(app.screen, ConfirmScreen)
        label = app.channel_label(network.discussion)
        assert label.endswith("·" + network.discussion[-4:]) and label in app.screen.question
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        assert not (await network.hc.get_channel(network.discussion)).is_terminal()
        await pilot.press("ctrl+w")
        await pilot.press("y")
        await until(lambda: any(n.message == f"Closed {label}." for n in app._notifications))
        assert (await network.hc.get_channel(network.discussion)).is_terminal()
        messages = [n.message for n in app._notifications]
        assert not any(network.discussion[:8] in m for m in messages)


async def test_toasts_sit_above_the_chat_bar_and_its_refusal(network) -> None:
    app = await started(network)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await until(lambda: app.ready)
        await network.hc.close_channel(network.discussion, reason="done")
        app.channel_list.select(network.discussion)
        await pilot.pause()
        await pilot.press("i", *"hello", "enter")
        await until(lambda: bool(app.chat.reason))
        app.notify("a long notification that would have covered the bottom right corner", timeout=30)
        await until(lambda: any(t.region.area for t in app.screen.query("Toast")))
        await pilot.pause()
        bottom = app.query_one("#bottom").region
        toasts = [t.region for t in app.screen.query("Toast")]
        assert toasts
        for region in toasts:
            assert region.bottom <= bottom.y, f"toast {region} covers the bars at {bottom}"
        reason = app.chat.query_one("#chat-reason")
        assert reason.region.area and not any(r.overlaps(reason.region) for r in toasts)

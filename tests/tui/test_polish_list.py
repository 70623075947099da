"""Issue 22 item 5, the polish list a new user made: each point driven through the pilot at 80×24 (or the
size the point is about), against a real in-process hub."""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from textual.widgets import Footer, HelpPanel
from textual.widgets._footer import FooterKey
from tui_network import close, small_network, until

from tui.app import WorkbenchApp, build_app
from tui.settings import Settings
from tui.widgets.keys_panel import BindingIdsTable

SIZE = (80, 24)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def started(network, settings: Settings | None = None, **kwargs) -> WorkbenchApp:
    return await build_app(network.hc, network.human, settings or Settings(), **kwargs)


def footer_items(app: WorkbenchApp) -> set[str]:
    """The descriptions of every key the main screen's footer offers (shown or left out for width)."""
    footer = app.screen.query_one(Footer)
    return {str(key.description) for key in footer.query(FooterKey)}


def screen_text(app: WorkbenchApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_footer_stops_offering_close_once_the_channel_is_closed(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        await pilot.pause()
        await until(lambda: "Close channel" in footer_items(app))
        await network.hc.close_channel(network.discussion, reason="done")
        await until(lambda: app.channel_list.get_row(network.discussion).state == "closed")
        for _ in range(3):
            await pilot.pause()
        assert "Close channel" not in footer_items(app)


async def test_a_toast_never_covers_the_query_bar_it_talks_about(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        app.tail.focus()
        await pilot.press("colon")
        await pilot.press(*"nosuch", "enter")
        await until(lambda: bool(app.screen.query("Toast")))
        for _ in range(3):
            await pilot.pause()
        bar = app.query_one("#query-bar")
        assert bar.has_focus and bar.region.height == 1
        for toast in app.screen.query("Toast"):
            assert not toast.region.overlaps(bar.region), (toast.region, bar.region)


async def test_channel_header_marks_the_sorted_column(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        table = app.channel_list.table
        labels = lambda: [column.label.plain for column in table.ordered_columns]  # noqa: E731
        await until(lambda: table.row_count == 3)
        assert labels() == ["channel", "last ▼", "env"]  # by activity, newest first
        expected = {
            "type": ["channel ▲", "state", "env"],
            "state": ["channel", "state ▲", "env"],
            "envelopes": ["channel", "state", "env ▼"],
        }
        for sort in ("type", "state", "envelopes"):
            await pilot.press("o")
            await pilot.pause()
            assert app.channel_list.sort_by == sort
            assert labels() == expected[sort]
        header = screen_text(app).splitlines()[3]
        assert "env ▼" in header, header


async def test_escape_clears_the_channel_filter_and_home_end_move_the_cursor(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        channels = app.channel_list
        table = channels.table
        await until(lambda: table.row_count == 3)
        await pilot.press("ctrl+f", *"critic")
        await pilot.pause()
        assert len(channels.shown_ids()) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert channels.filter_query == "" and len(channels.shown_ids()) == 2
        assert table.has_focus
        # on the table, escape also clears a filter left in the box
        channels.filter_input.value = "critic"
        await pilot.pause()
        assert len(channels.shown_ids()) == 1
        await pilot.press("escape")
        await pilot.pause()
        assert channels.filter_query == "" and len(channels.shown_ids()) == 2
        await pilot.press("end")
        assert table.cursor_row == table.row_count - 1
        await pilot.press("home")
        assert table.cursor_row == 0


async def test_channel_list_uses_the_width_at_80_columns(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        table = app.channel_list.table
        await until(lambda: table.row_count == 3)
        for _ in range(3):
            await pilot.pause()
        used = sum(column.get_render_width(table) for column in table.ordered_columns)
        assert used == table.scrollable_content_region.width == 78
        # the state and count columns sit at the right edge of the pane
        lines = screen_text(app).splitlines()
        row = next(line for line in lines if "all channels" in line)
        assert row.rstrip().endswith("8 │"), row


async def test_help_lists_only_the_channel_tables_meaningful_keys(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        await pilot.pause()
        shown = {binding.description for _, binding, _, _ in app.screen.active_bindings.values()}
        assert {"Next channel", "Previous channel", "First row", "Last row", "Select channel"} <= shown
        assert not shown & {"Cursor left", "Cursor right", "Page Left", "Page Right", "Home", "End"}


def warnings(app: WorkbenchApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "warning"]


async def test_unknown_theme_and_clashing_keys_warn_in_one_sentence_each(network, tmp_path) -> None:
    settings = Settings(theme="solarised-nope", keys={"tail.follow": "s"})
    settings.source = tmp_path / "workbench.toml"
    app = await started(network, settings)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        said = warnings(app)
        theme = [m for m in said if "solarised-nope" in m]
        assert len(theme) == 1 and theme[0].count(". ") == 0 and "textual-dark" in theme[0]
        keys = [m for m in said if "[keys]" in m]
        assert len(keys) == 1, said
        assert (
            "'tail.follow'" in keys[0]
            and "'s'" in keys[0]
            and "'tail.search'" in keys[0]
            and str(settings.source) in keys[0]
        )
        assert keys[0].count(". ") == 0


async def test_keys_panel_lists_the_binding_ids_to_remap(network) -> None:
    app = await started(network)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.ready)
        app.tail.focus()
        await pilot.pause()
        await pilot.press("question_mark")
        for _ in range(3):
            await pilot.pause()
        panel = app.screen.query_one(BindingIdsTable)
        console = Console(width=60, record=True, file=io.StringIO())
        console.print(panel.render())
        text = console.export_text()
        assert "tail.follow" in text and "app.help" in text
        assert "f Follow" in text.replace("  ", " ")
        visible = screen_text(app)
        assert "tail.cursor_up" in visible  # the first of the tail's keys, on screen


async def test_chat_refusal_names_everyone_who_speaks_first(network) -> None:
    channel = await network.critic.open(
        type="discussion", target=[network.planner.agent_id, network.human.agent_id]
    )
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and channel.channel_id in app.source.metadata)
        app.channel_list.select(channel.channel_id)
        await pilot.pause()
        await pilot.press("i", *"me first", "enter")
        await until(lambda: bool(app.chat.reason))
        assert app.chat.reason == "critic's turn — you can speak after critic and planner"
        assert app.chat.input.value == "me first"


async def test_chat_history_first_up_gives_the_newest_line(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        await pilot.press("i")
        for line in ("first line", "second line", "third line"):
            before = await network.hc.wal_count(network.conversation)
            await pilot.press(*line, "enter")
            await until(lambda: app.chat.input.value == "" or bool(app.chat.reason))
            assert not app.chat.reason, app.chat.reason
            await network.planner.idle()
            await until(lambda before=before: app.tail.visible_count >= before + 2)
        await pilot.press("up")
        assert app.chat.input.value == "third line"
        await pilot.press("up")
        assert app.chat.input.value == "second line"
        await pilot.press("down", "down")
        assert app.chat.input.value == ""
        # walked back, then edited: the next first up gives the newest line again, not an older one
        await pilot.press("up", "up", "up")
        assert app.chat.input.value == "first line"
        await pilot.press("backspace")
        app.chat.input.value = ""
        await pilot.pause()
        await pilot.press("up")
        assert app.chat.input.value == "third line"


async def test_a_screenshot_without_downloads_saves_in_the_current_directory_and_says_so(
    network, tmp_path, monkeypatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_PICTURES_DIR", raising=False)
    monkeypatch.chdir(here)
    app = await started(network)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        app.action_screenshot()
        await until(lambda: any(n.title == "Screenshot" for n in app._notifications))
        await pilot.pause()
        saved = list(here.glob("*.svg"))
        assert len(saved) == 1, list(here.iterdir())
        said = [n.message for n in app._notifications if n.title == "Screenshot"]
        assert str(saved[0]) in said[0], said
        assert not (home / "Downloads").exists()


async def test_a_screenshot_that_cannot_be_written_says_why(network, tmp_path) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        missing = tmp_path / "gone"
        app.action_screenshot(path=str(missing))
        await until(lambda: any(n.title == "Screenshot" for n in app._notifications))
        await pilot.pause()
        said = [n.message for n in app._notifications if n.title == "Screenshot"]
        assert len(said) == 1 and str(missing) in said[0] and "No such file" in said[0], said


async def test_f1_help_scrolls_to_its_last_line_at_80x24(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        await pilot.press("f1")
        for _ in range(3):
            await pilot.pause()
        panel = app.screen.query_one(HelpPanel)
        text = screen_text(app)
        assert "Every channel the hub" in text
        assert "ctrl+w" not in text.replace("**", "")  # the help's last line is below the fold
        assert panel.max_scroll_y > 0
        markdown = panel.query_one("#widget-help")
        bottom = markdown.virtual_region_with_margin.bottom
        panel.scroll_to(y=bottom - panel.scrollable_content_region.height, animate=False)
        for _ in range(3):
            await pilot.pause()
        text = " ".join(line.split("▏")[-1].strip() for line in screen_text(app).splitlines())
        assert "closes the selected one" in text, text


async def test_counts_of_one_are_singular() -> None:
    from ag2net import Hub, HubClient, Passport

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    human = await hc.register_human(Passport(name="ana", kind="human"))
    app = await build_app(hc, human, Settings())
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready and bool(app.status.health) and bool(app.peers.peers))
            await pilot.pause()
            assert app.status.health == "0 active · 1 identity"
            assert str(app.peers.query_one("#peers-count").render()).startswith("1 peer")
    finally:
        await hc.close()
        await hub.close()


def contrast(a, b) -> float:
    """The WCAG contrast ratio of two rich colours."""

    def luminance(color) -> float:
        def channel(value: int) -> float:
            c = value / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

        r, g, b_ = color.get_truecolor()
        return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b_)

    hi, lo = sorted((luminance(a), luminance(b)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


async def test_composer_preview_json_is_legible_on_a_light_theme(network) -> None:
    from textual.widgets import TextArea

    app = await started(network, Settings(theme="textual-light"))
    async with app.run_test(size=(120, 36)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        await pilot.press("ctrl+e")
        await until(lambda: bool(app.screen.query("#composer-preview")))
        await pilot.pause()
        area = app.screen.query_one("#composer-preview", TextArea)
        theme = area._theme
        background = theme.base_style.bgcolor
        for name in ("punctuation.delimiter", "punctuation.bracket", "number", "json.null", "string"):
            style = theme.syntax_styles.get(name)
            if style is not None and style.color is not None:
                assert contrast(style.color, background) >= 3.0, (name, style, background)


async def test_a_question_asked_before_the_workbench_started_is_preselected(network) -> None:
    channel = await network.critic.open(type="consulting", target=network.human.agent_id)
    await channel.send("Is the budget final?")
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        await until(lambda: app.selected_channel == channel.channel_id)
        assert app.chat.channel_id == channel.channel_id


async def test_a_remote_workbench_names_senders_in_its_first_rows() -> None:
    """Over a socket the client knows no passport until it asks: the first page's rows (what the browser's
    first frame shows) name their senders, not 32-hex ids."""
    from ag2net import Hub, HubClient, Passport, serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    ben = await local.register_human(Passport(name="ben", kind="human"))
    await local.register_human(Passport(name="cy", kind="human"))
    channel = await ben.open(type="conversation", target="cy")
    await ben.send(channel.channel_id, "hello from ben")
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        hc = HubClient.connect(server.url(), rpc_timeout=5.0)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        app = await build_app(hc, ana, Settings(), load_history=False)
        named: list[str] = []
        last_page = app.source.last_page

        async def noting(*args, **kwargs):  # the names known when the first page is read and drawn
            named.append(app.source.name_for(ben.agent_id))
            return await last_page(*args, **kwargs)

        app.source.last_page = noting  # type: ignore[method-assign]
        async with app.run_test(size=(120, 36)) as pilot:
            await until(lambda: app.ready)
            await pilot.pause()
            assert named[:1] == ["ben"], named
            assert "ben" in screen_text(app)
        await hc.close()
    await local.close()
    await hub.close()

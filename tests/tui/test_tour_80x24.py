"""A fresh user at 80x24 does the README's tour end to end, with the keys the README names: choose a channel,
chat, filter the tail, open an envelope's detail, the agent view with a view switch, peers, send from the
composer, open a channel and close it. At every step what has the keyboard is on screen."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import DataTable, OptionList, Select, SelectionList, TextArea
from tui_network import close, small_network, until

from ag2net.envelope import EV_TEXT
from tui.app import build_app
from tui.screens.composer import EnvelopeComposer
from tui.screens.confirm import ConfirmScreen
from tui.screens.open_channel import OpenChannelForm
from tui.widgets.envelope_detail import EnvelopeDetail

SIZE = (80, 24)


def assert_visible(widget: Widget | None) -> None:
    assert widget is not None, "nothing has the keyboard"
    region = widget.region
    assert region.area, f"{widget!r} has the keyboard but is not on screen"
    assert Region(0, 0, *SIZE).contains_region(region), f"{widget!r} at {region} is cut off at 80x24"


async def test_the_readme_tour_at_80x24() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready and bool(app.peers.peers))
            await pilot.pause()

            # 1 Channels: pick the conversation with the arrow keys and Enter
            await pilot.press("1")
            table = app.channel_list.query_one(DataTable)
            assert app.focused is table
            assert_visible(table)
            for _ in range(10):
                if table.cursor_row == table.get_row_index(network.conversation):
                    break
                await pilot.press("down")
            await pilot.press("enter")
            await until(lambda: app.selected_channel == network.conversation)

            # 5 Chat: i, type, Enter; the text lands in the WAL; Escape goes back
            await pilot.press("i")
            assert_visible(app.focused)
            await pilot.press(*"hello from the tour", "enter")

            async def human_said() -> bool:
                wal = await network.hc.read_wal(network.conversation)
                return any(e.sender_id == network.human.agent_id and e.event_type == EV_TEXT for e in wal)

            for _ in range(300):
                if await human_said():
                    break
                await pilot.pause(0.02)
            assert await human_said()
            await pilot.press("escape")
            assert app.focused is table

            # 2 WAL tail: / filters, Enter opens the detail, Escape closes it
            await pilot.press("2")
            assert app.focused is app.tail
            assert_visible(app.tail)
            await pilot.press("slash", *"type:ag2.msg.text", "enter")
            await until(lambda: app.tail.visible_count > 0)
            assert all(r.envelope.event_type == EV_TEXT for r in app.tail.visible_rows())
            assert app.focused is app.tail
            await pilot.press("enter")
            await until(lambda: isinstance(app.screen, EnvelopeDetail))
            assert Region(0, 0, *SIZE).contains_region(app.screen.region)
            await pilot.press("escape")
            await until(lambda: app.screen is app.screen_stack[0])

            # 3 Agent view, then switch its view from the command palette
            await pilot.press("3")
            assert_visible(app.focused)
            view = app.projected_view
            await until(lambda: view.data is not None)
            await pilot.press("ctrl+p")
            await until(lambda: isinstance(app.screen, CommandPalette))
            await pilot.press(*"agent view windowed_summary")
            await pilot.pause(0.3)
            await pilot.press("enter")
            await until(lambda: app.screen is app.screen_stack[0])
            await until(
                lambda: view.data is not None and view.data.preview.view.get("name") == "windowed_summary"
            )

            # 4 Peers: the list has the keyboard; Down shows the next card
            await pilot.press("4")
            peers_list = app.peers.query_one(OptionList)
            assert app.focused is peers_list
            assert_visible(peers_list)
            first = app.peers.card.peer
            await pilot.press("down")
            await until(lambda: app.peers.card.peer is not None and app.peers.card.peer != first)

            # 6 Composer: ctrl+e, a custom event, ctrl+s sends it
            await pilot.press("ctrl+e")
            await until(lambda: isinstance(app.screen, EnvelopeComposer))
            composer = app.screen
            composer.draft_path = None  # type: ignore[attr-defined]
            assert Region(0, 0, *SIZE).contains_region(composer.region)
            type_field = composer.query_one("#composer-type")
            assert app.screen.focused is type_field
            assert_visible(type_field)
            await pilot.press("end", "ctrl+u", *"tour.note")  # replace the template's type
            composer.query_one("#composer-data", TextArea).load_text('{"ok": true}')
            await pilot.pause()
            await pilot.press("ctrl+s")
            try:
                await until(lambda: app.screen is app.screen_stack[0])
            except AssertionError:
                raise AssertionError(
                    f"the composer did not send: {composer.errors} {composer.send_error}"
                ) from None

            async def noted() -> bool:
                wal = await network.hc.read_wal(network.conversation)
                return any(e.event_type == "tour.note" for e in wal)

            for _ in range(300):
                if await noted():
                    break
                await pilot.pause(0.02)
            if not await noted():
                wal = await network.hc.read_wal(network.conversation)
                other = await network.hc.read_wal(network.discussion)
                raise AssertionError(
                    f"{[e.event_type for e in wal[-3:]]} {[e.event_type for e in other[-3:]]} "
                    f"{[n.message for n in app._notifications]}"
                )

            # ctrl+o opens a channel from the form
            await pilot.press("ctrl+o")
            await until(lambda: isinstance(app.screen, OpenChannelForm))
            form = app.screen
            assert Region(0, 0, *SIZE).contains_region(form.region)
            form.query_one("#open-type", Select).value = "consulting"
            form.query_one("#open-targets", SelectionList).select(network.critic.agent_id)
            await pilot.press("ctrl+s")
            await until(lambda: app.screen is app.screen_stack[0])
            await until(lambda: app.selected_channel not in (None, network.conversation, network.discussion))
            opened = app.selected_channel
            assert opened is not None
            assert (await network.hc.get_channel(opened)).manifest.type == "consulting"

            # ctrl+w closes it, after asking
            await pilot.press("ctrl+w")
            assert isinstance(app.screen, ConfirmScreen)
            assert Region(0, 0, *SIZE).contains_region(app.screen.query_one("#confirm-box").region)
            await pilot.press("y")
            await until(lambda: app.source.metadata[opened].is_terminal())
            assert (await network.hc.get_channel(opened)).is_terminal()
    finally:
        await close(network)

"""The workbench against a real in-process hub: every pane's behaviour from the issue, driven by the pilot."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console
from textual.widgets import DataTable, Input, Select, SelectionList, TextArea
from tui_network import close, small_network, until

from ag2net.envelope import EV_TEXT
from tui.app import WorkbenchApp, build_app
from tui.screens.composer import EnvelopeComposer
from tui.screens.open_channel import OpenChannelForm
from tui.settings import Settings, SettingsError
from tui.widgets.envelope_detail import EnvelopeDetail
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.peer_card import PeerCard

SIZE = (160, 45)


def rendered(renderable) -> str:
    console = Console(width=100, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def started(network, tmp_path=None, **kwargs) -> WorkbenchApp:
    settings = Settings(database=tmp_path / "wb.db") if tmp_path else Settings()
    if tmp_path is not None:
        settings.source = tmp_path / "workbench.toml"
    return await build_app(network.hc, network.human, settings, **kwargs)


async def test_selecting_a_channel_filters_the_tail(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        tail = app.tail
        channels = {r.envelope.channel_id for r in tail.visible_rows()}
        assert channels == {network.conversation, network.discussion}
        table = app.channel_list.query_one(DataTable)
        table.focus()
        row = table.get_row_index(network.discussion)
        table.move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        assert app.selected_channel == network.discussion
        assert {r.envelope.channel_id for r in tail.visible_rows()} == {network.discussion}
        assert tail.visible_count == await network.hc.wal_count(network.discussion)
        assert "conversation·" in str(app.query_one("#tail-pane").border_title)
        # the first row, all channels, shows everything again
        table.move_cursor(row=0)
        await pilot.press("enter")
        await pilot.pause()
        assert tail.channel_filter is None
        assert tail.visible_count == tail.row_count


async def test_chat_posts_ev_text_into_wal_and_tail(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.discussion)
        await pilot.press("i")
        assert app.chat.input.has_focus
        await pilot.press(*"@cr")
        await pilot.pause()
        await pilot.press("right")  # accept the @critic completion
        await pilot.press(*"please review", "enter")
        await until(
            lambda: any(r.envelope.event_data.get("text") == "please review" for r in app.tail.visible_rows())
        )
        wal = await network.hc.read_wal(network.discussion)
        posted = [e for e in wal if e.event_type == EV_TEXT and e.event_data == {"text": "please review"}]
        assert len(posted) == 1
        assert posted[0].sender_id == network.human.agent_id
        assert posted[0].audience == [network.critic.agent_id]
        assert app.chat.input.value == ""
        assert app.chat.history == ["@critic please review"]
        await pilot.press("up")
        assert app.chat.input.value == "@critic please review"


async def test_refused_send_keeps_the_text_and_shows_the_reason(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await network.hc.close_channel(network.discussion, reason="done")
        app.channel_list.select(network.discussion)
        await pilot.press("i", *"anyone there?", "enter")
        await until(lambda: bool(app.chat.reason))
        assert "closed" in app.chat.reason
        assert app.chat.input.value == "anyone there?"
        wal = await network.hc.read_wal(network.discussion)
        assert not any(e.event_data.get("text") == "anyone there?" for e in wal)


async def test_composed_custom_envelope_reaches_the_hub_with_every_field(network, tmp_path) -> None:
    app = await started(network, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        cause = app.tail.visible_rows()[-1].envelope.envelope_id
        await pilot.press("ctrl+e")
        await pilot.pause()
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        composer.query_one("#composer-audience", SelectionList).select(network.planner.agent_id)
        composer.query_one("#composer-type", Input).value = "myapp.review_request"
        composer.query_one("#composer-data", TextArea).load_text(
            '{"document_id": "doc-123", "kind": "security"}'
        )
        composer.query_one("#composer-priority", Select).value = "urgent"
        composer.query_one("#composer-causation", Select).value = cause
        composer.query_one("#composer-ttl", Input).value = "120"
        composer.query_one("#composer-task", Input).value = "task-42"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, EnvelopeComposer))
        wal = await network.hc.read_wal(network.conversation)
        env = next(e for e in wal if e.event_type == "myapp.review_request")
        assert env.sender_id == network.human.agent_id
        assert env.audience == [network.planner.agent_id]
        assert env.event_data == {"document_id": "doc-123", "kind": "security"}
        assert (env.priority, env.causation_id, env.ttl_seconds, env.task_id) == (
            "urgent",
            cause,
            120,
            "task-42",
        )
        await until(
            lambda: any(r.envelope.event_type == "myapp.review_request" for r in app.tail.visible_rows())
        )


async def test_composer_refusal_shows_hub_error_and_keeps_draft(network, tmp_path) -> None:
    app = await started(network, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await network.hc.close_channel(network.discussion, reason="done")
        app.channel_list.select(network.discussion)
        await pilot.press("ctrl+e")
        await pilot.pause()
        composer = app.screen
        composer.query_one("#composer-type", Input).value = "myapp.late"
        composer.query_one("#composer-data", TextArea).load_text('{"late": true}')
        await pilot.pause()
        await pilot.press("ctrl+s")
        await until(lambda: bool(composer.send_error.strip()))
        assert "closed" in composer.send_error
        assert app.screen is composer
        assert composer.query_one("#composer-type", Input).value == "myapp.late"


async def test_switching_the_view_changes_the_projection_not_the_channel(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE):
        await until(lambda: app.ready)
        for text in ("one", "two", "three"):
            await network.human.send(network.conversation, text)
        await until(lambda: len(network.planner.agent.model.calls) >= 4)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.data is not None and view.data.participant_id == network.planner.agent_id)
        before = await network.hc.get_channel(network.conversation)
        in_force = view.data.in_force
        full = len(view.data.preview.history)
        view.switch_view("windowed_summary", 2)
        await until(lambda: view.data.preview.view == {"name": "windowed_summary", "recent_n": 2})
        history = view.data.preview.history
        assert type(history[0]).__name__ == "CompactionSummary"
        assert len(history) == 3 and full > 3
        assert view.query_one("#pv-status").has_class("-switched")
        after = await network.hc.get_channel(network.conversation)
        assert after.knobs == before.knobs  # the channel's view did not change
        fresh = await network.hc.preview_turn(network.conversation, network.planner.agent_id)
        assert fresh.view == in_force
        # the last turn diff marks what the switched view would have changed
        assert view.data.turn is not None and view.data.replay is not None
        assert "differ" in view.turn_summary
        view.switch_view(None)
        await until(lambda: view.data.preview.view == in_force)
        assert view.turn_summary.startswith("identical")


async def test_peer_card_shows_front_matter(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("4")
        await until(lambda: bool(app.peers.peers))
        assert app.peers.select("planner")
        await pilot.pause()
        card = app.peers.query_one(PeerCard)
        assert dict(card.frontmatter_rows) == {"title": "Planning Lead", "expertise": "planning, budgets"}
        assert "Planning Lead" in rendered(card.query_one("#peer-frontmatter").content)
        app.peers.select("critic")
        await pilot.pause()
        assert app.peers.query_one(PeerCard).query("#peer-generated")  # no skill registered: fallback card


async def test_follow_pauses_on_scroll_up_and_resumes_on_end(network) -> None:
    app = await started(network)
    async with app.run_test(size=(160, 30)) as pilot:
        await until(lambda: app.ready)
        for i in range(40):
            await network.human.send(network.conversation, f"line {i}")
        await until(lambda: app.tail.row_count > 40)
        tail = app.tail
        tail.focus()
        await pilot.press("k")
        assert not tail.following and not app.status.following
        await network.human.send(network.conversation, "while paused")
        await until(lambda: tail.pending_count >= 1)
        await pilot.pause()
        assert "new" in str(app.status.query_one("#status-follow").render())
        await pilot.press("end")
        await pilot.pause()
        assert tail.following and app.status.following and tail.pending_count == 0


async def test_detail_opens_on_enter_and_follows_causation(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        app.tail.focus()
        await pilot.press("enter")  # the planner's reply, caused by ana's question
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, EnvelopeDetail)
        assert detail.envelope.sender_id == network.planner.agent_id
        assert detail.envelope.causation_id
        await pilot.press("o")
        await pilot.pause()
        assert isinstance(app.screen, EnvelopeDetail)
        assert app.screen.envelope.envelope_id == detail.envelope.causation_id
        assert json.loads(app.screen.json_text)["sender_id"] == network.human.agent_id


async def test_filter_bar_and_status(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.tail.focus()
        await pilot.press("slash")
        bar = app.query_one("#query-bar", Input)
        assert bar.has_focus
        await pilot.press(*"type:ag2.msg", "enter")
        await pilot.pause()
        assert all(r.envelope.event_type == EV_TEXT for r in app.tail.visible_rows())
        assert "type:ag2.msg" in str(app.status.query_one("#status-filter").render())
        await pilot.press("slash")
        bar.value = "colour:red"
        await pilot.press("enter")
        await pilot.pause()
        assert bar.has_focus  # a bad query keeps the bar open (the error is a notification)
        await pilot.press("escape")
        assert app.tail.has_focus


async def test_open_channel_form_opens_a_channel(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and bool(app.peers.peers))
        await pilot.press("ctrl+o")
        await until(lambda: isinstance(app.screen, OpenChannelForm))
        form = app.screen
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "tick at least one" in str(form.query_one("#open-targets-msg").render())
        form.query_one("#open-type", Select).value = "consulting"
        form.query_one("#open-targets", SelectionList).select(network.critic.agent_id)
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, OpenChannelForm))
        await until(lambda: app.selected_channel not in (None, network.conversation, network.discussion))
        md = await network.hc.get_channel(app.selected_channel)
        assert md.manifest.type == "consulting"
        assert set(md.participant_ids()) == {network.human.agent_id, network.critic.agent_id}


async def test_panes_reachable_by_keys_jump_labels_and_help(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        assert app.focused is app.channel_list.query_one(DataTable)
        await pilot.press("2")
        assert app.focused is app.tail
        await pilot.press("ctrl+g")
        await pilot.pause()
        await pilot.press("i")
        await pilot.pause()
        assert app.focused is app.chat.input
        app.tail.focus()
        await pilot.press("f1")
        await pilot.pause()
        assert app.screen.query("HelpPanel")
        await pilot.press("f1")
        await pilot.pause()
        assert not app.screen.query("HelpPanel")
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen.query("KeyPanel")


async def test_palette_commands_depend_on_state(network) -> None:
    app = await started(network, demo=None)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        titles = [c.title for c in app.domain_commands()]
        assert "Open channel…" in titles and "Compose envelope…" in titles and "Go to seq…" in titles
        assert not any(t.startswith("Close channel") for t in titles)
        assert any(t == "Switch agent view: full_transcript" for t in titles)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        assert any(t.startswith("Close channel") for t in (c.title for c in app.domain_commands()))


async def test_keymap_remaps_by_binding_id(network) -> None:
    settings = Settings(keys={"tail.follow": "F"})
    app = await build_app(network.hc, network.human, settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.tail.focus()
        await pilot.press("F")
        assert not app.tail.following
    with pytest.raises(SettingsError, match=r"'tail\.nope'"):
        await build_app(network.hc, network.human, Settings(keys={"tail.nope": "x"}))


async def test_demo_command_starts_the_demo(network) -> None:
    started_flag: list[bool] = []

    async def demo() -> None:
        started_flag.append(True)

    app = await started(network, demo=demo)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        command = next(c for c in app.domain_commands() if c.title == "Start demo network")
        command.callback()
        await until(lambda: bool(started_flag))
        await pilot.pause()
        assert all(c.title != "Start demo network" for c in app.domain_commands())


def test_tail_selected_message_is_nested() -> None:
    assert EnvelopeTail.Selected.__qualname__ == "EnvelopeTail.Selected"


async def test_escape_leaves_the_chat_for_the_pane_focused_before(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        table = app.channel_list.query_one(DataTable)
        assert table.has_focus
        await pilot.press("i")
        assert app.chat.input.has_focus
        await pilot.press("escape")
        await pilot.pause()
        assert table.has_focus
        # with focus back, pane keys are keys again, not text in the chat input
        await pilot.press("2")
        await pilot.pause()
        assert app.tail.has_focus
        assert app.chat.input.value == ""
        await pilot.press("i", "h", "escape")
        await pilot.pause()
        assert app.tail.has_focus
        assert app.chat.input.value == "h"


async def test_status_bar_shows_a_lost_connection_and_the_reconnect() -> None:
    from ag2net import Hub, HubClient, Passport, serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    ben = await local.register_human(Passport(name="ben", kind="human"))
    await local.register_human(Passport(name="cy", kind="human"))
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    port = server.port
    hc = HubClient.connect(server.url(), reconnect_initial_delay=0.02, reconnect_max_delay=0.1)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    app = await build_app(hc, ana, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        # startup is over once the health line shows (``ready`` comes before the health request):
        # a health answer still on its way would change what is shown after the drop
        await until(lambda: app.ready and bool(app.status.health))
        label = app.status.query_one("#status-connection")
        assert str(label.render()).startswith("● remote hub ws://127.0.0.1:")
        shown = (app.tail.row_count, set(app.channel_list.rows), app.status.health)
        await serving.__aexit__(None, None, None)  # the server dies under the running app
        await until(lambda: app.status.reconnecting, timeout=3)
        assert str(label.render()) == "○ disconnected — reconnecting…"
        assert label.has_class("-reconnecting")
        await pilot.pause(0.2)
        assert (app.tail.row_count, set(app.channel_list.rows), app.status.health) == shown
        channel = await ben.open(type="conversation", target="cy")
        async with serve_ws(hub, "127.0.0.1", port):
            await until(lambda: not app.status.reconnecting, timeout=5)
            await until(lambda: channel.channel_id in app.channel_list.rows, timeout=5)
            await pilot.pause()
            assert any(n.message == "reconnected" for n in app._notifications)
            assert str(label.render()).startswith("● remote hub")
            await hc.close()
    await local.close()
    await hub.close()


async def test_a_request_that_meets_a_lost_connection_leaves_the_workbench_running() -> None:
    """Loading peers while the hub is unreachable: the request fails, the workbench carries on."""
    from ag2net import Hub, HubClient, Passport, serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    hc = HubClient.connect(
        server.url(), rpc_timeout=2.0, reconnect_initial_delay=0.02, reconnect_max_delay=0.1
    )
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await HubClient.local(hub).register_human(Passport(name="ben", kind="human"))
    app = await build_app(hc, ana, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and bool(app.status.health))
        await until(lambda: bool(app.peers.peers))
        peers = [p.name for p in app.peers.peers]
        await serving.__aexit__(None, None, None)
        await until(lambda: app.status.reconnecting, timeout=3)
        await app.feed.load_peers().wait()  # waits rpc_timeout for the link, then fails
        await pilot.pause()
        assert app.is_running and app._exception is None
        assert [p.name for p in app.peers.peers] == peers
        await hc.close()
    await hub.close()


async def test_channel_cursor_stays_on_its_channel_when_rows_resort(network) -> None:
    from tui.widgets.channel_list import ChannelRow

    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        table = app.channel_list.query_one(DataTable)

        def highlighted() -> str:
            return str(table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value)

        await pilot.press("down", "down")
        await pilot.pause()
        chosen = highlighted()
        assert chosen != "__all__"
        for i in range(3):  # newer channels sort above it
            row = ChannelRow(f"new{i}", "conversation", "active", ["x"], 1, f"2099-01-01T00:00:0{i}.000000Z")
            app.channel_list.upsert(row)
            await pilot.pause()
        app.channel_list.bump({chosen: (1, "2099-02-01T00:00:00.000000Z")})  # and it jumps to the top
        await pilot.pause()
        assert highlighted() == chosen
        await pilot.press("enter")
        await pilot.pause()
        assert app.selected_channel == chosen


async def test_a_question_to_the_human_is_announced_and_its_channel_selected(network) -> None:
    from ag2net import Passport

    cy = await network.hc.register_human(Passport(name="cy", kind="human"))
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        assert app.selected_channel is None
        channel = await cy.open(type="consulting", target=network.human.agent_id, intent="question")
        await cy.send(channel.channel_id, "Ship offline sync first or last?")
        await until(lambda: app.selected_channel == channel.channel_id)
        await pilot.pause()
        messages = [n.message for n in app._notifications]
        assert "cy asks you: Ship offline sync first or last? — press i to answer" in messages
        assert app.chat.channel_id == channel.channel_id
        # the human's own answer is not announced
        before = len(app._notifications)
        await network.human.send(channel.channel_id, "Last.")
        await pilot.pause(0.3)
        assert len(app._notifications) == before


async def test_the_goto_prompt_takes_a_channel_label_and_says_why_not(network) -> None:
    app = await started(network)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and len(app.tail.visible_rows()) > 0)
        app.tail.focus()
        label = app.channel_label(network.conversation)
        await pilot.press("colon")
        bar = app.query_one("#query-bar", Input)
        assert bar.has_focus and "channel label" in bar.placeholder
        bar.value = f"{label} 1"
        await pilot.press("enter")
        await pilot.pause()
        row = app.tail.cursor_row
        assert row is not None and row.envelope.channel_id == network.conversation and row.seq == 1
        await pilot.press("colon")
        bar.value = "workflow·ffff"
        await pilot.press("enter")
        await pilot.pause()
        assert any("matches no channel" in n.message for n in app._notifications)

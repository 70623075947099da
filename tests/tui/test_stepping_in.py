"""Stepping into a live network from the workbench (issue 24), driven by keys through the pilot at 80x24:
"Break when…" on the critic's texts in the live demo, the held post in the inbox ("Waiting for you") and in
the tail as ``⏸ held`` with its would-be seq, one edited and released, one dropped with a reason, both in
the audit log and the edited one marked in the envelope detail; step mode holding posts of a channel one
at a time; the waiting count in the status bar."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Input, Label, TextArea
from tui_network import close, small_network, until

from ag2net import Agent, Hub, HubClient, Passport, ScriptedModel
from ag2net.demo import start_demo
from ag2net.envelope import EV_TEXT
from tui.app import WorkbenchApp, build_app
from tui.screens.break_when import BreakWhenScreen
from tui.screens.breakpoints import BreakpointsScreen
from tui.screens.inbox import AskScreen, EditHeldScreen, InboxScreen
from tui.widgets.envelope_detail import EnvelopeDetail
from tui.widgets.tail_lines import HELD_MARK

SIZE = (80, 24)


async def wait_screen(pilot: Pilot[Any], kind: type, timeout: float = 20.0) -> Any:
    await until(lambda: isinstance(pilot.app.screen, kind), timeout)
    await pilot.pause()
    return pilot.app.screen


def held_of(app: WorkbenchApp, name: str) -> list[Any]:
    return [e for e in app.inbox.held() if app.source.name_for(e.agent_id) == name]


def tail_lines(app: WorkbenchApp) -> list[str]:
    tail = app.tail
    return [tail.render_line(y).text for y in range(tail.size.height)]


async def test_break_on_the_critics_texts_edit_one_drop_one() -> None:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    human = await hc.register_human(Passport(name="ana", kind="human"))
    demos: list[Any] = []

    async def demo() -> None:
        demos.append(await start_demo(hc, human_name="ana", pace=0.05, step_timeout=120))

    app = await build_app(hc, human, demo=demo)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            await pilot.pause()

            # ctrl+p → "Break when…", typed: hold the critic's texts before they are appended
            app.open_break_when()
            form = await wait_screen(pilot, BreakWhenScreen)
            assert form.focused is form.spec_input
            await pilot.press(*"sender:critic type:ag2.msg.text", "enter")
            await until(lambda: app.screen is app.screen_stack[0])
            assert [b.spec for b in app.breakpoints] == ["sender:critic type:ag2.msg.text"]
            assert app.breakpoints[0].created_by == "ana"

            app.start_demo()
            await until(lambda: bool(held_of(app, "critic")), 60)
            await pilot.pause()
            first = held_of(app, "critic")[0]
            assert first.envelope is not None and first.envelope.event_type == EV_TEXT
            assert first.would_be_seq is not None

            # the count in the status bar at 80x24, and the held row at the tail's end with its would-be seq
            status = app.query_one("#status-waiting", Label)
            assert f"{len(app.inbox)} waiting" in str(status.render())
            assert Region(0, 0, *SIZE).contains_region(status.region)
            app.select_channel(first.channel_id)
            app.action_focus_pane("tail")
            await until(lambda: bool(app.tail.held_rows))
            await pilot.pause()
            held_lines = [line for line in tail_lines(app) if HELD_MARK in line]
            assert held_lines and held_lines[0].split()[0] == str(first.would_be_seq)
            wal = await hc.read_wal(first.channel_id)
            assert all(e.envelope_id != first.envelope.envelope_id for e in wal), (
                "a held post is not in the WAL"
            )

            # w → the inbox; e → the JSON of the held post; the edit is admitted in its place
            await pilot.press("w")
            inbox = await wait_screen(pilot, InboxScreen)
            await until(lambda: first.key in inbox._keys)
            inbox.option_list.highlighted = inbox._keys.index(first.key)
            await pilot.pause()
            await pilot.press("e")
            editor = await wait_screen(pilot, EditHeldScreen)
            area = editor.query_one("#edit-json", TextArea)
            data = json.loads(area.text)
            data["event_data"]["text"] = "EDITED BY ANA: a kinder review."
            area.text = json.dumps(data, indent=2)
            await pilot.press("ctrl+s")
            await wait_screen(pilot, InboxScreen)

            async def admitted(text: str) -> Any:
                for env in await hc.read_wal(first.channel_id):
                    if env.event_type == EV_TEXT and text in str(env.event_data.get("text")):
                        return env
                return None

            for _ in range(500):
                edited = await admitted("EDITED BY ANA")
                if edited is not None:
                    break
                await asyncio.sleep(0.02)
            assert edited is not None and hc.name_for(edited.sender_id) == "critic"
            await until(lambda: first.key not in app.inbox)

            # the critic's next text is held too: d, a reason, enter drops it
            await until(lambda: bool(held_of(app, "critic")), 60)
            await pilot.pause()
            second = held_of(app, "critic")[0]
            await until(lambda: second.key in inbox._keys)
            inbox.option_list.highlighted = inbox._keys.index(second.key)
            await pilot.pause()
            await pilot.press("d")
            ask = await wait_screen(pilot, AskScreen)
            assert ask.focused is ask.query_one("#ask-input", Input)
            await pilot.press(*"off topic", "enter")
            await wait_screen(pilot, InboxScreen)
            await until(lambda: second.key not in app.inbox)
            assert second.envelope is not None
            wal = await hc.read_wal(second.channel_id)
            assert all(e.envelope_id != second.envelope.envelope_id for e in wal)

            # both in the audit log, by ana
            records = [r for _, r in await hc.list_audit(since=0, limit=None)]
            kinds = {r["kind"]: r for r in records if r["kind"] in ("held_edited", "held_dropped")}
            assert (
                kinds["held_edited"]["by"] == "ana"
                and kinds["held_edited"]["envelope_id"] == edited.envelope_id
            )
            assert kinds["held_dropped"]["by"] == "ana" and "off topic" in kinds["held_dropped"]["reason"]

            # the detail of the admitted edit says who edited it
            await pilot.press("escape")
            await until(lambda: app.screen is app.screen_stack[0])
            await until(lambda: app.tail.find_envelope(edited.envelope_id) is not None)
            row = app.tail.find_envelope(edited.envelope_id)
            assert row is not None
            app.open_envelope(row.envelope, row.seq, row.channel)
            detail = await wait_screen(pilot, EnvelopeDetail)
            assert str(detail.query_one("#detail-edited", Label).render()) == "edited at a breakpoint by ana"
            assert Region(0, 0, *SIZE).contains_region(detail.query_one("#detail-edited").region)
            await pilot.press("escape")

            # the breakpoints list: space disables it; the hub says so
            app.action_breakpoints()
            listing = await wait_screen(pilot, BreakpointsScreen)
            await until(lambda: listing.table.row_count == 1)
            await pilot.press("space")
            await until(lambda: not hub.breakpoints.table[app.breakpoints[0].breakpoint_id].enabled)
            await pilot.press("escape")
    finally:
        for network in demos:
            await network.close()
        await hc.close()
        await hub.close()


async def test_step_mode_holds_each_post_of_a_channel_until_released() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            await pilot.pause()
            app.channel_list.select(network.conversation)
            await until(lambda: app.selected_channel == network.conversation)
            command = next(c for c in app.domain_commands() if c.title.startswith("Step mode on: conv"))
            command.callback()
            await until(lambda: network.conversation in app.step_channels)
            before = await network.hc.wal_count(network.conversation)

            # the human's own text is held: not in the WAL, shown held in the tail, counted
            await pilot.press("i", *"one more thing", "enter")
            await until(lambda: len(app.inbox.held()) == 1)
            await pilot.pause()
            assert await network.hc.wal_count(network.conversation) == before
            assert app.tail.held_rows[0].seq == before + 1
            assert "1 waiting" in str(app.query_one("#status-waiting", Label).render())
            await pilot.press("escape")

            # released from the inbox: admitted with the seq it was shown with
            await pilot.press("w")
            await wait_screen(pilot, InboxScreen)
            await pilot.press("r")
            await until(lambda: not any(h.agent_id == network.human.agent_id for h in app.inbox.held()))
            wal = await network.hc.read_wal(network.conversation)
            assert wal[before].event_data.get("text") == "one more thing"
            # the planner's reply is held next, in its turn
            await until(lambda: any(h.agent_id == network.planner.agent_id for h in app.inbox.held()), 20)
            assert await network.hc.wal_count(network.conversation) == before + 1
            await pilot.press("r")
            await until(lambda: not app.inbox.held())
            await until(lambda: app.query_one("#status-waiting", Label).has_class("-empty"))
    finally:
        await close(network)


async def test_b_prefills_break_when_from_the_tail_the_channel_and_the_peer() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready and bool(app.peers.peers))
            await pilot.pause()
            app.channel_list.select(network.conversation)
            await until(lambda: app.selected_channel == network.conversation)
            label = app.channel_label(network.conversation)

            # the tail: the envelope under the cursor (the planner's reply, the last text)
            await pilot.press("2")
            row = app.tail.cursor_row
            assert row is not None
            await pilot.press("b")
            form = await wait_screen(pilot, BreakWhenScreen)
            sender = network.hc.name_for(row.envelope.sender_id)
            assert form.spec_input.value == f"sender:{sender} type:{row.envelope.event_type} channel:{label}"
            # a bad spec: the hub's one sentence under the field, the form stays
            form.spec_input.value = "sender:critic colour:blue"
            await pilot.press("enter")
            error = form.query_one("#bw-error", Label)
            await until(lambda: "colour" in str(error.render()))
            assert isinstance(app.screen, BreakWhenScreen) and not app.breakpoints
            await pilot.press("escape")

            # the channel list: the channel under the cursor
            await pilot.press("1")
            await pilot.press("b")
            form = await wait_screen(pilot, BreakWhenScreen)
            assert form.spec_input.value.startswith("channel:")
            await pilot.press("escape")

            # a peer card: its sender; the agent view: its next turn
            await pilot.press("4")
            app.peers.select("critic")
            await pilot.pause()
            await pilot.press("b")
            form = await wait_screen(pilot, BreakWhenScreen)
            assert form.spec_input.value == "sender:critic"
            assert form.on_select.value == "envelope"
            await pilot.press("enter")
            await until(lambda: app.screen is app.screen_stack[0])
            assert [b.spec for b in await network.hc.list_breakpoints()] == ["sender:critic"]
    finally:
        await close(network)


async def test_a_turn_breakpoint_opens_the_paused_turn_from_the_inbox() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            await pilot.pause()
            await app.source.break_on("sender:planner", on="turn")
            app.channel_list.select(network.conversation)
            await until(lambda: app.selected_channel == network.conversation)
            before = await network.hc.wal_count(network.conversation)
            await pilot.press("i", *"and the travel budget?", "enter")
            await until(lambda: any(e.kind == "turn" for e in app.inbox.entries()), 20)
            await pilot.press("escape")
            await pilot.press("w")
            inbox = await wait_screen(pilot, InboxScreen)
            entry = next(e for e in app.inbox.entries() if e.kind == "turn")
            await until(lambda: entry.key in inbox._keys)
            inbox.option_list.highlighted = inbox._keys.index(entry.key)
            await pilot.pause()
            await pilot.press("enter")
            from tui.screens.paused_turn import PausedTurnScreen

            await wait_screen(pilot, PausedTurnScreen)
            await pilot.press("c")  # continue: the model is called as it would have been
            await until(lambda: entry.key not in app.inbox, 20)
            for _ in range(500):
                if await network.hc.wal_count(network.conversation) >= before + 2:
                    break
                await asyncio.sleep(0.02)
            wal = await network.hc.read_wal(network.conversation)
            assert wal[-1].sender_id == network.planner.agent_id and wal[-1].event_type == EV_TEXT
            records = [r for _, r in await network.hc.list_audit(since=0, limit=None)]
            assert any(r["kind"] == "turn_decided" and r.get("by") == "ana" for r in records)
    finally:
        await close(network)


async def test_an_invite_waits_in_the_inbox_when_invites_are_answered_by_hand() -> None:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=30)
    hc = HubClient.local(hub)
    human = await hc.register_human(Passport(name="ana", kind="human"), auto_ack_invites=False)
    planner = await hc.register(
        Agent("planner", model=ScriptedModel("Hello.", loop=True)), Passport(name="planner")
    )
    try:
        app = await build_app(hc, human)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            opening = asyncio.ensure_future(planner.open(type="conversation", target="ana"))
            await until(lambda: any(e.kind == "invite" for e in app.inbox.entries()), 20)
            await pilot.pause()
            assert "1 waiting" in str(app.query_one("#status-waiting", Label).render())
            await pilot.press("w")
            inbox = await wait_screen(pilot, InboxScreen)
            await until(lambda: bool(inbox._keys))
            await pilot.press("enter")  # accept
            channel = await asyncio.wait_for(opening, 20)
            assert (await hc.get_channel(channel.channel_id)).state.value == "active"
            await until(lambda: not any(e.kind == "invite" for e in app.inbox.entries()))
    finally:
        await hc.close()
        await hub.close()


async def test_attached_over_a_websocket_the_inbox_releases_a_held_post() -> None:
    from ag2net import serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=10)
    local = HubClient.local(hub)
    await local.register(Agent("ben", model=ScriptedModel("Noted.", loop=True)), Passport(name="ben"))
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    hc = HubClient.connect(server.url())
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        channel = await ana.open(type="conversation", target="ben")
        app = await build_app(hc, ana, load_history=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            await pilot.pause()
            await app.source.break_on("sender:ben")
            app.channel_list.select(channel.channel_id)
            await until(lambda: app.selected_channel == channel.channel_id)
            await pilot.press("i", *"hello ben", "enter")
            await until(lambda: bool(app.inbox.held()), 20)
            await pilot.pause()
            assert app.tail.held_rows and "1 waiting" in str(app.query_one("#status-waiting", Label).render())
            await pilot.press("escape", "w")
            inbox = await wait_screen(pilot, InboxScreen)
            await until(lambda: bool(inbox._keys))
            await pilot.press("r")
            await until(lambda: not app.inbox.held(), 20)
            await until(lambda: not app.tail.held_rows)
            wal = await local.read_wal(channel.channel_id)
            assert wal[-1].event_data.get("text") == "Noted."
            records = [r for _, r in await local.list_audit(since=0, limit=None)]
            released = [r for r in records if r["kind"] == "held_released"]
            assert released and released[-1]["by"] == "ana"
    finally:
        await hc.close()
        await serving.__aexit__(None, None, None)
        await local.close()
        await hub.close()


def test_a_turn_decided_at_a_breakpoint_says_who_in_the_turns_tab() -> None:
    from rich.console import Console

    from ag2net.client.turns import TurnRecord
    from tui.widgets.projection_render import ProjectionPainter

    painter = ProjectionPainter(lambda _name, fallback: fallback, lambda agent_id: agent_id)
    answered = TurnRecord(
        turn_id="t1",
        channel_id="c",
        agent_id="critic",
        trigger_envelope_id="e",
        operator={"action": "answer", "by": "ana"},
    )
    plain = TurnRecord(turn_id="t2", channel_id="c", agent_id="critic", trigger_envelope_id="e")
    console = Console(width=100, record=True)

    def text(record: TurnRecord) -> str:
        with console.capture() as captured:
            for part in painter.turn_head(record, 1, 1, capped=False):
                console.print(part)
        return captured.get()

    assert "answered by ana" in text(answered)
    assert " by " not in text(plain)

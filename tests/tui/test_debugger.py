"""The debugger screens in the real workbench on the demo network, driven by keys through pilot (issue 12):
``m`` the visibility matrix (glyphs, Enter explains a cell, ``v`` a preview view, ``/`` a filter, Escape),
``S`` the protocol scrubber beside or below the tail (``[`` ``]`` step, ``{`` ``}`` state changes), ``t`` the
causation tree from the tail and from the envelope detail (Enter goes to the envelope in its channel's
tail); over ``--connect`` each says in one line that it needs the embedded hub."""

from __future__ import annotations

import asyncio
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static, Tree

from ag2net import Hub, HubClient, Passport, serve_ws
from ag2net.views import registered_views
from tui.app import WorkbenchApp, build_app
from tui.screens.causation_tree import CausationTreeScreen
from tui.screens.visibility_matrix import NEEDS_HUB as MATRIX_NEEDS_HUB
from tui.screens.visibility_matrix import VisibilityMatrixScreen
from tui.screenshots import DemoWorkbench, channel_of, ready, settle
from tui.settings import Settings
from tui.widgets.envelope_detail import EnvelopeDetail
from tui.widgets.scrub_panel import NEEDS_HUB as SCRUB_NEEDS_HUB
from tui.widgets.scrub_panel import ScrubPanel


async def wait_for(pilot: Pilot[Any], kind: type, timeout: float = 30.0) -> Any:
    for _ in range(int(timeout / 0.02)):
        if isinstance(pilot.app.screen, kind):
            await settle(pilot)
            return pilot.app.screen
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} within {timeout} s; the screen is {pilot.app.screen!r}")


async def until(predicate, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached in time")


def consulting_of(app: WorkbenchApp, *names: str) -> str:
    """The consulting channel between exactly these participants."""
    return next(
        cid
        for cid, md in app.source.metadata.items()
        if md.manifest.type == "consulting"
        and sorted(app.source.name_for(p) for p in md.participant_ids()) == sorted(names)
    )


def glyphs(screen: VisibilityMatrixScreen, name: str) -> dict[int, str]:
    """``{seq: glyph}`` of one participant's column."""
    table = screen.table
    assert screen.matrix is not None
    pid = next(p for p in screen.matrix.participants if screen.name_for(p) == name)
    column = table.get_column_index(pid)
    return {seq: str(table.get_cell_at((row, column))) for row, seq in enumerate(screen.shown)}


def text_of(widget: Static) -> str:
    return str(widget.render())


async def open_matrix(pilot: Pilot[Any], kind: str) -> VisibilityMatrixScreen:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, kind))
    await settle(pilot)
    app.action_focus_pane("tail")
    await pilot.press("m")
    return await wait_for(pilot, VisibilityMatrixScreen)


async def test_the_matrix_of_the_demo_workflow_explains_its_cells():
    app = DemoWorkbench()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_matrix(pilot, "workflow")
        table = screen.table
        assert screen.shown == list(range(1, 14))
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["seq", "sender", "text", "planner", "drafter", "reviewer"]
        # seq 7: the drafter's review request goes to the reviewer alone; 8: the drafter's packet to all
        assert (glyphs(screen, "planner")[7], glyphs(screen, "reviewer")[7]) == ("✕", "○")
        assert [glyphs(screen, n)[8] for n in ("planner", "drafter", "reviewer")] == ["●", "◆", "●"]
        assert glyphs(screen, "planner")[5] == "○"  # channel.opened: delivered, renders to nothing
        # the cursor starts on the tail's row (the last) in the first participant column; walk to 7 x planner
        assert table.cursor_coordinate == (12, 3)
        await pilot.press(*["up"] * 6, "enter")
        await settle(pilot)
        explain = screen.query_one("#vm-explain", Static)
        assert explain.display
        words = text_of(explain)
        assert "#7 drafter · demo.review_request · to reviewer → planner" in words
        assert "not delivered: not in the envelope's audience" in words
        assert "not visible to it (audience)" in words
        await pilot.press("down", "right")  # 8 x drafter: its own packet, shown to its model as assistant
        await settle(pilot)
        words = text_of(explain)
        assert "its own envelope" in words and "shown as assistant: " in words
        assert "named_windowed_summary(recent_n=6)" in words
        # v: the glyphs under a preview view; the explanation shows both
        await pilot.press("v")
        await settle(pilot)
        assert screen.preview == registered_views()[0]
        assert text_of(screen.query_one("#vm-view", Static)) == registered_views()[0]
        assert f"preview ({registered_views()[0]}" in text_of(explain)
        # / filters like the tail; a bad query is one sentence, the rows stay
        await pilot.press("slash")
        assert isinstance(screen.focused, Input)
        await pilot.press(*"sender:reviewer", "enter")
        await settle(pilot)
        assert screen.shown == [4, 9, 12] and table.row_count == 3
        assert "filter sender:reviewer" in text_of(screen.query_one("#vm-status", Static))
        await pilot.press("slash", *"re:/(/", "enter")
        await settle(pilot)
        assert screen.shown == [4, 9, 12] and screen.query_one("#vm-filter", Input).has_class("-error")
        assert any(n.severity == "error" for n in app._notifications)
        await pilot.press("escape")  # leaves the filter field first
        assert screen.focused is table and app.screen is screen
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.screen_stack[0]


async def test_the_matrix_shows_elided_envelopes_and_a_preview_that_shows_them():
    app = DemoWorkbench()
    async with app.run_test(size=(120, 36)) as pilot:
        screen = await open_matrix(pilot, "conversation")
        # windowed_summary(recent_n=10): the first texts are left out of the coder's projection
        coder = glyphs(screen, "coder")
        assert (coder[4], coder[5], coder[10], coder[11]) == ("◐", "◐", "◆", "●")
        screen.set_preview("full_transcript")
        await settle(pilot)
        coder = glyphs(screen, "coder")
        assert (coder[4], coder[5]) == ("◆", "●")
        assert float(text_of(screen.query_one("#vm-status", Static)).split(" ms")[0].split("· ")[-1]) < 100


async def test_the_scrubber_steps_the_tail_and_marks_what_changed():
    app = DemoWorkbench()
    async with app.run_test(size=(200, 50)) as pilot:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "discussion"))
        await settle(pilot)
        app.action_focus_pane("tail")
        await pilot.press("S")
        await settle(pilot)
        panel = app.query_one(ScrubPanel)
        tail = app.tail
        await until(lambda: panel.state is not None)
        assert panel.seq == 13 and panel.state.lifecycle == "closed"
        assert panel.region.x > tail.region.x and panel.region.y == tail.region.y  # beside at 200 columns
        await pilot.press("left_square_bracket", "left_square_bracket")
        await settle(pilot)
        assert (panel.seq, tail.cursor_row.seq) == (11, 11)
        body = text_of(panel.body)
        assert "▸ expected     planner · round 4" in body and "changed from #10: expected" in body
        assert "after #11" in str(panel.border_title)
        # { } go to the envelopes that changed the state: 7 (opened) is the first, nothing before it
        await pilot.press("home")
        await settle(pilot)
        assert panel.seq == 1
        await pilot.press("right_curly_bracket")
        await settle(pilot)
        await until(lambda: panel.seq == 7)
        assert tail.cursor_row.seq == 7 and panel.state.lifecycle == "active"
        await pilot.press("left_curly_bracket")
        await settle(pilot)
        assert panel.seq == 7 and any(
            "No protocol state change before #7" in n.message for n in app._notifications
        )
        # the agent view keeps its own [ ] when it has the keyboard
        await pilot.press("3")
        await pilot.press("left_square_bracket")
        await settle(pilot)
        assert panel.seq == 7
        await pilot.press("2", "S")
        await settle(pilot)
        assert not app.query(ScrubPanel)


async def test_the_scrubber_sits_below_the_tail_at_80x24():
    app = DemoWorkbench()
    async with app.run_test(size=(80, 24)) as pilot:
        app = await ready(pilot)
        app.channel_list.select(channel_of(app, "workflow"))
        await settle(pilot)
        await pilot.press("2", "S")
        await settle(pilot)
        panel = app.query_one(ScrubPanel)
        await until(lambda: panel.state is not None)
        assert panel.region.y > app.tail.region.y and panel.region.x == app.tail.region.x
        await pilot.press("up", "up", "up", "up", "up", "up", "up")  # seq 6: the planner's kickoff
        await settle(pilot)
        assert panel.seq == 6
        body = text_of(panel.body)
        assert "workflow" in body and "node drafter" in body


async def test_the_causation_tree_from_the_tail_and_from_the_detail():
    app = DemoWorkbench()
    async with app.run_test(size=(120, 36)) as pilot:
        app = await ready(pilot)
        asked = consulting_of(app, "researcher", "critic")
        app.channel_list.select(asked)
        await settle(pilot)
        app.action_focus_pane("tail")
        assert app.tail.goto_seq(5)  # the critic's answer, two delegations down from the planner
        await pilot.press("t")
        screen = await wait_for(pilot, CausationTreeScreen)
        await until(lambda: screen.result is not None)
        await settle(pilot)
        tree = screen.query_one(Tree)
        lines = [str(node.label) for node in screen.nodes.values()]
        assert len(lines) == 4 and len(screen.result.chain) == 3
        assert any("⇢ delegated researcher: What is the biggest risk" in line for line in lines)
        assert tree.cursor_node is screen.nodes[screen.envelope_id]
        assert str(tree.cursor_node.label).startswith(f"▶ {app.channel_label(asked)} #5 critic: ")
        # to the root (the planner's question, in another channel) and Enter: the tail shows it there
        await pilot.press("home", "enter")
        await settle(pilot)
        assert app.screen is app.screen_stack[0]
        root = screen.result.nodes[screen.result.root]
        assert app.selected_channel == root.channel_id == consulting_of(app, "planner", "researcher")
        assert app.tail.cursor_row.envelope.envelope_id == root.envelope_id and app.tail.has_focus
        # from the envelope detail: t opens the tree of the envelope shown; Escape goes back to the detail
        await pilot.press("enter")
        detail = await wait_for(pilot, EnvelopeDetail)
        await pilot.press("t")
        screen = await wait_for(pilot, CausationTreeScreen)
        assert screen.envelope_id == detail.envelope.envelope_id == root.envelope_id
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is detail


async def test_over_connect_each_debugger_says_it_needs_the_embedded_hub():
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    await local.register_human(Passport(name="ben", kind="human"))
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    hc = HubClient.connect(server.url())
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await ana.open(type="conversation", target="ben")
        app = await build_app(hc, ana, Settings(), load_history=False)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(lambda: app.ready and app.tail.row_count > 0)
            await pilot.pause()
            app.action_focus_pane("tail")
            await pilot.press("m", "t")
            await pilot.pause()
            messages = [n.message for n in app._notifications]
            assert MATRIX_NEEDS_HUB in messages
            assert "The causation tree needs the embedded hub (run ag2net tui without --connect)." in messages
            await pilot.press("S")
            await pilot.pause()
            assert text_of(app.query_one(ScrubPanel).body) == SCRUB_NEEDS_HUB
            assert app.screen is app.screen_stack[0] and app.is_running
            await pilot.press("left_square_bracket", "right_curly_bracket")  # nothing to step: no crash
            await pilot.pause()
            assert app.is_running
    finally:
        await hc.close()
        await serving.__aexit__(None, None, None)
        await local.close()
        await hub.close()


async def test_the_palette_lists_the_debugger_and_the_keys_are_remappable():
    assert {"debug.visibility", "debug.causation", "debug.scrub", "matrix.view", "causation.go"} <= (
        WorkbenchApp.binding_ids()
    )
    app = DemoWorkbench()
    async with app.run_test(size=(120, 36)) as pilot:
        app = await ready(pilot)
        titles = [c.title for c in app.domain_commands()]
        assert {"Visibility matrix…", "Causation tree…", "Protocol scrubber"} <= set(titles)
        app.channel_list.select(channel_of(app, "discussion"))
        await settle(pilot)
        next(c for c in app.domain_commands() if c.title == "Visibility matrix…").callback()
        screen = await wait_for(pilot, VisibilityMatrixScreen)
        assert screen.channel_id == channel_of(app, "discussion")
        assert isinstance(screen.table, DataTable)


async def test_the_panels_step_to_a_state_change_agrees_with_the_scrubbers_list():
    from ag2net.debug import states_at
    from ag2net.demo import start_demo

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana")
        await demo.run()
        await demo.close()
        panel = ScrubPanel(hub, hub.name_for, str)
        for md in hub.query_channels(include_terminal=True, limit=None):
            scrubber = await states_at(hub, md.channel_id)
            forward, at = [], 0
            while (at := await panel.change_after(md.channel_id, at, True)) is not None:
                forward.append(at)
            backward, at = [], len(scrubber) + 1
            while (at := await panel.change_after(md.channel_id, at, False)) is not None:
                backward.append(at)
            assert forward == backward[::-1] == scrubber.changes(), md.manifest.type
    finally:
        await hc.close()
        await hub.close()

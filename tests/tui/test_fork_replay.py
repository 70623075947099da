"""Fork here… in the real workbench on the demo network, driven by keys through pilot: F on a tail envelope
opens the form; Ctrl+R forks and replays in a worker and the comparison replaces the form. A straight replay
of the demo conversation shows no divergence; a narrower view for the critic marks its turns; a scripted
critic marks the envelope where it answered differently; Escape cancels a run that waits on a model; the
agent view's F forks at the shown turn's trigger; a bad field is one inline sentence."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from fork_app import RealTimeDemo, open_form, run_to_compare, wait_for
from textual.coordinate import Coordinate
from textual.widgets import DataTable, Input, Static, TabbedContent

from tui.screens.fork import ForkForm
from tui.screens.replay_compare import ReplayCompare
from tui.screenshots import channel_of, ready, settle


def rendered(widget: Static) -> str:
    return str(widget.render())


def column(table: DataTable, key: str) -> list[str]:
    return [
        str(table.get_cell_at(Coordinate(row, table.get_column_index(key)))) for row in range(table.row_count)
    ]


async def test_a_straight_replay_of_the_demo_conversation_shows_no_divergence():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, seq=1)
        assert [a.name for a in form.agents] == ["coder", "critic"]
        assert (form.query_one("#fork-seq", Input).value, form.total) == ("1", 20)
        hub = app.source.hc.hub
        cid = form.channel_id
        before = [e.to_dict() for e in await hub.read_wal(cid)], len(await hub.list_turns(limit=1000))
        screen = await run_to_compare(pilot)
        assert screen.diff.identical and screen.result.stopped == "original replayed"
        summary = rendered(screen.query_one("#rc-summary", Static))
        assert "forked after seq 1 · 20 envelopes vs 20" in summary
        assert "completed: 20 of 20 envelopes reproduced" in summary and "changed: nothing" in summary
        assert "turns: 15 answered from the recording" in summary
        table = screen.query_one("#rc-rows", DataTable)
        assert table.row_count == 20 and set(column(table, "mark")) == {""}
        assert column(table, "original") == column(table, "replay")
        assert column(table, "original")[4].startswith("critic  msg.text  On “where do we start?”")
        # nothing was written to the workbench's hub; Escape goes back to the main screen
        assert (
            [e.to_dict() for e in await hub.read_wal(cid)],
            len(await hub.list_turns(limit=1000)),
        ) == before
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is app.screen_stack[0]


async def test_the_form_shows_the_faithful_baseline_before_anything_is_changed():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, seq=1)
        for _ in range(1500):
            if form.baseline is not None:
                break
            await asyncio.sleep(0.02)
        assert form.baseline_text == "faithful: 20/20 reproduced (a replay with no change from seq 1)"
        assert form.query_one("#fork-baseline", Static).has_class("-faithful")
        # another seq: the baseline is checked again there
        form.query_one("#fork-seq", Input).value = "7"
        for _ in range(1500):
            if "seq 7)" in form.baseline_text:
                break
            await asyncio.sleep(0.02)
        assert form.baseline_text == "faithful: 20/20 reproduced (a replay with no change from seq 7)"


async def test_a_static_tool_result_and_a_bad_tool_policy():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, seq=1)
        form.set_override("critic", tools="say=sometimes")
        form.action_run()
        await pilot.pause()
        error = rendered(form.query_one("#fork-error", Static))
        assert error == "critic's tools: tool policy 'sometimes' is not one of recorded, live or static:JSON"
        form.set_override("critic", tools='say=static:"noted"; *=recorded')
        screen = await run_to_compare(pilot)
        assert screen.diff.identical  # the critic never calls say: nothing changes
        summary = rendered(screen.query_one("#rc-summary", Static))
        assert 'changed: critic: tool say static:"noted"; tool * recorded' in summary


async def test_a_narrower_view_for_the_critic_marks_its_turns():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, seq=1)
        form.set_override("critic", view="windowed_summary", params="recent_n=2")
        screen = await run_to_compare(pilot)
        # the critic's third request is not the recorded one: the replay model has no reply and says so
        assert not screen.diff.identical and screen.diff.first_divergence == 8
        summary = rendered(screen.query_one("#rc-summary", Static))
        assert "changed: critic: view windowed_summary:recent_n=2" in summary
        assert (
            "stopped at seq 9: critic's model is `replay` and has no recorded reply for a changed request; "
            "give critic `scripted` or `openai` to go on"
        ) in summary
        assert (
            "first divergent turn: critic's turn 3: different history, reply (history 4 → 3 events" in summary
        )
        await pilot.press("t")
        await settle(pilot)
        assert screen.query_one("#rc-tabs", TabbedContent).active == "rc-tab-turns"
        turns = screen.query_one("#rc-turns", DataTable)
        marks = column(turns, "mark")
        agents = column(turns, "agent")
        assert agents[marks.index("≠")] == "critic"  # then the turns the stopped replay never took
        assert turns.cursor_row == marks.index("≠")
        assert column(turns, "history")[turns.cursor_row] == "≠ differs"
        detail = rendered(screen.query_one("#rc-turn-detail", Static))
        assert detail.startswith("critic's turn 3: different history") and "+ compaction_summary" in detail
        assert "(answered by no answer: the replay model has no recorded reply" in detail


async def test_a_scripted_critic_marks_the_envelope_it_answered_differently():
    app = RealTimeDemo()
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_form(pilot, seq=3)
        form.set_override("critic", model="scripted", model_arg="I disagree.")
        screen = await run_to_compare(pilot)
        assert (screen.diff.first_divergence, screen.diff.why) == (4, "different reply")
        summary = rendered(screen.query_one("#rc-summary", Static))
        assert "first divergence at seq 5: different reply" in summary
        table = screen.query_one("#rc-rows", DataTable)
        assert not screen.side_by_side  # 80 columns: one column, a differing envelope on two lines
        assert table.cursor_row == 4 and column(table, "mark")[4] == "≠"
        both = column(table, "both")[4].splitlines()
        assert both[0].startswith("◂ critic  msg.text  On “where do we start?”")
        assert both[1] == "▸ critic  msg.text  I disagree."
        await pilot.press("n")
        assert table.cursor_row == 5
        await pilot.press("N", "N")
        assert table.cursor_row == table.row_count - 1  # wraps round to the last one


async def test_escape_cancels_a_run_waiting_on_a_model(monkeypatch):
    with socket.socket() as silent:  # a model endpoint that accepts and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        app = RealTimeDemo()
        async with app.run_test(size=(120, 36)) as pilot:
            form = await open_form(pilot, seq=1)
            hub = app.source.hc.hub
            before = len(await hub.read_wal(form.channel_id))
            form.set_override("critic", model="openai", model_arg="gpt-4o-mini")
            await pilot.press("ctrl+r")
            for _ in range(500):
                if (
                    "replaying conversation·" in form.progress_text
                    and " 4 of 20 envelopes" in form.progress_text
                ):
                    break
                await asyncio.sleep(0.02)
            assert "Escape cancels" in form.progress_text, form.progress_text
            await pilot.press("escape")
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.screen is form and form.outcome is None
            assert (
                form.progress_text.startswith("cancelled after ") and "nothing was kept" in form.progress_text
            )
            assert form._box is None and len(await hub.read_wal(form.channel_id)) == before
            await pilot.press("escape")  # nothing running: Escape closes the form
            await settle(pilot)
            assert app.screen is app.screen_stack[0]


async def test_the_agent_view_forks_at_the_shown_turn():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        app_ = await ready(pilot)
        app_.channel_list.select(channel_of(app_, "conversation"))
        await settle(pilot)
        view = app_.projected_view
        await pilot.press("3")
        await settle(pilot)
        view.show_turn(1)
        await settle(pilot)
        data = view.data
        assert data is not None and view.turn_index == 1
        trigger = data.turns[1].trigger_envelope_id
        found = await app_.source.find_envelope(data.channel_id, trigger)
        assert found is not None
        view.focus()
        await pilot.press("F")
        form = await wait_for(pilot, ForkForm)
        await settle(pilot)
        assert form.channel_id == data.channel_id and form.at_seq == found[0]
        assert form.query_one("#fork-seq", Input).value == str(found[0])


async def test_a_bad_field_is_one_inline_sentence():
    app = RealTimeDemo()
    async with app.run_test(size=(120, 36)) as pilot:
        form = await open_form(pilot, seq=1)
        error = form.query_one("#fork-error", Static)
        cases: list[tuple[dict[str, Any], str]] = [
            ({"seq": "21"}, "seq '21' is not a number between 0 and 20; fix it"),
            ({"turns": "none"}, "turns 'none' is not a number more than 1; fix it"),
            ({"critic": {"view": "windowed_summary", "params": "recent_n"}}, "'recent_n' is not k=v"),
            ({"critic": {"view": "windowed_summary", "params": "depth=3"}}, "rejected parameters"),
            ({"critic": {"params": "recent_n=2"}}, "critic's view: parameters 'recent_n=2' need a view"),
            ({"coder": {"model": "scripted", "model_arg": ""}}, ""),
        ]
        for change, expected in cases:
            form.query_one("#fork-seq", Input).value = change.get("seq", "1")
            form.query_one("#fork-turns", Input).value = change.get("turns", "200")
            for agent in ("coder", "critic"):
                form.set_override(agent, **change.get(agent, {}))
            form.action_run()
            await pilot.pause()
            if expected:
                assert expected in rendered(error) and not error.has_class("-empty"), (
                    change,
                    rendered(error),
                )
                assert app.screen is form
            else:
                assert error.has_class("-empty")
                await wait_for(pilot, ReplayCompare)


async def test_fork_over_a_websocket_client_with_the_operator_role():
    from ag2net import Hub, HubClient, Passport, serve_ws
    from ag2net.demo import start_demo
    from tui.app import build_app
    from tui.settings import Settings

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    demo = await start_demo(local)
    await demo.run()
    cid = next(c for c, step in demo.steps.items() if step == "pairing")
    try:
        async with serve_ws(hub, "127.0.0.1", 0, operator_token="op") as server:
            for token, expected in (("op", None), (None, "Cannot read channel·")):
                hc = HubClient.connect(
                    server.url(), operator_token=token, rpc_timeout=15, identity_secrets=False
                )
                ana = await hc.register_human(Passport(name=f"ana{'-op' if token else ''}", kind="human"))
                app = await build_app(hc, ana, Settings(), load_history=False, observe=False)
                try:
                    async with app.run_test(size=(120, 36)) as pilot:
                        assert app.source.hc.remote
                        await ready(pilot)
                        app.open_fork(cid, seq=1)
                        form = await wait_for(pilot, ForkForm)
                        await settle(pilot)
                        if expected is None:
                            assert [a.name for a in form.agents] == ["coder", "critic"]
                            screen = await run_to_compare(pilot)
                            assert screen.diff.identical and screen.result.stopped == "original replayed"
                        else:  # without the operator role the hub refuses to read another's channel
                            error = rendered(form.query_one("#fork-error", Static))
                            assert error.startswith(expected) and "to fork it: " in error, error
                            assert cid not in error  # named, not in hex
                finally:
                    await hc.close()
    finally:
        await demo.close()
        await local.close()
        await hub.close()


def test_the_fork_keys_are_remappable_by_id():
    from tui.app import WorkbenchApp
    from tui.settings import Settings, check_keymap

    ids = {"app.fork", "view.fork", "fork.run", "fork.cancel", "replay.close", "replay.next", "replay.prev"}
    assert ids | {"replay.tab"} <= WorkbenchApp.binding_ids()
    check_keymap(
        Settings(keys={"app.fork": "ctrl+k", "fork.run": "ctrl+s", "replay.next": "j"}),
        WorkbenchApp.binding_ids(),
    )

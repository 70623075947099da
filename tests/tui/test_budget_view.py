"""The agent view's token budget bar (issue 12 item 6): figures per part against the context window, the
80% warning, "window unknown", and a fit at 80 columns."""

from __future__ import annotations

import asyncio
import io
import math
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static, TabbedContent
from tui_network import close, small_network, until

from ag2net import Hub, HubClient, Passport
from ag2net.agent.budget import (
    ENV_VAR,
    ContextWindow,
    TurnBudget,
    clear_context_windows,
    compact,
    set_context_window,
    turn_budget,
)
from ag2net.demo.network import start_demo
from tui.app import build_app
from tui.settings import Settings
from tui.widgets.budget_bar import BudgetBar, segments
from tui.widgets.projected_view import ProjectedView


def plain(renderable: Any, width: int = 100) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def shown(view: ProjectedView, selector: str, width: int = 100) -> str:
    return plain(view.query_one(selector, Static).content, width)


@pytest.fixture(autouse=True)
def _windows(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("AG2NET_TOKENIZER", "heuristic")
    clear_context_windows()
    yield
    clear_context_windows()


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def test_a_demo_turn_shows_its_budget_with_the_right_figures() -> None:
    set_context_window("ag2net-demo", 128_000)  # the demo's passports name the model "ag2net-demo"
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    human = await hc.register_human(Passport(name="ana", kind="human"))
    demo = await start_demo(hc)
    try:
        planner = await hc.get_agent("planner")
        assert planner.agent_id and planner.model == "ag2net-demo"
        turns: list[Any] = []
        for _ in range(500):
            turns = await hc.list_turns(agent_id=planner.agent_id, limit=1)
            if turns:
                break
            await asyncio.sleep(0.02)
        assert turns, "the demo planner recorded no turn"
        record = turns[0]
        app = await build_app(hc, human, Settings(), load_history=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await until(lambda: app.ready)
            app.channel_list.select(record.channel_id)
            view = app.projected_view
            await until(lambda: view.data is not None and view.channel_id == record.channel_id)
            view.select_participant(planner.agent_id)
            await until(
                lambda: (
                    view.data is not None
                    and view.data.participant_id == planner.agent_id
                    and view.shown_turn_budget is not None
                ),
                timeout=10,
            )
            data = view.data
            assert data is not None and data.turn is not None
            expected = turn_budget(data.turn, model="ag2net-demo", agents=["planner"])
            assert expected.window == ContextWindow(
                128_000, "configured for model ag2net-demo", "ag2net-demo"
            )
            assert view.shown_turn_budget == expected
            assert expected.input > 0 and expected.history > 0 and expected.system > 0
            view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-turn"
            await pilot.pause()
            text = shown(view, "#pv-turn", 120)
            assert "this turn" in text
            assert f"{compact(expected.total)} / 128k tokens (estimate)" in text
            for part in ("system", "history", "tools", "input"):
                assert f"{part}\u00a0{compact(getattr(expected, part))}" in text
            assert "⚠" not in text
            # the projection now (the next turn) has its own bar above the tabs
            top = shown(view, "#pv-budget", 120)
            now = turn_budget(data.preview, model="ag2net-demo")
            assert view.budget == now and "next turn" in top
            assert f"{compact(now.total)} / 128k tokens (estimate)" in top
    finally:
        await demo.close()
        await hc.close()
        await hub.close()


async def test_a_tiny_configured_window_warns_at_eighty_percent(network) -> None:
    record = (await network.hc.list_turns(agent_id=network.planner.agent_id, limit=1))[0]
    total = turn_budget(record).total
    window = math.ceil(total / 0.9)  # the turn fills ~90% of it
    set_context_window("planner", window)
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=(160, 45)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.shown_turn_budget is not None)
        budget = view.shown_turn_budget
        assert isinstance(budget, TurnBudget)
        assert budget.window == ContextWindow(window, "configured for agent planner", "scripted")
        assert budget.total == total and budget.warning
        view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-turn"
        await pilot.pause()
        text = shown(view, "#pv-turn", 120)
        assert f"{compact(total)} / {compact(window)} tokens (estimate) · 90%" in text
        assert "⚠ 90% of the context window (warning at 80%)" in text
        # the warning is drawn in the theme's warning colour
        bar = BudgetBar(budget, view._budget_colors())
        warning = bar.warning()
        assert warning is not None and view._color("text-warning", "yellow") in str(warning.style)


async def test_an_unknown_model_says_window_unknown(network) -> None:
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=(160, 45)):
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        view = app.projected_view
        await until(lambda: view.budget is not None)
        assert view.window == ContextWindow(None, "unknown model scripted", "scripted")
        top = shown(view, "#pv-budget", 120)
        assert "tokens · window unknown (estimate)" in top and "⚠" not in top


async def test_the_bar_fits_eighty_columns(network) -> None:
    record = (await network.hc.list_turns(agent_id=network.planner.agent_id, limit=1))[0]
    set_context_window("planner", math.ceil(turn_budget(record).total / 0.85))
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.press("3")
        view = app.projected_view
        await until(lambda: view.budget is not None)
        await pilot.pause()
        budget_static = view.query_one("#pv-budget", Static)
        width = budget_static.content_region.width
        assert 0 < width <= 78
        text = shown(view, "#pv-budget", width)
        lines = [line.rstrip() for line in text.splitlines() if line.strip()]
        assert all(len(line) <= width for line in lines), lines
        assert lines[0].startswith("next turn ") and "█" in lines[0]
        assert any("tokens (estimate)" in line for line in lines)
        assert any(line.startswith("⚠ ") for line in lines)


@pytest.mark.parametrize("width", [30, 50, 80, 120])
def test_bar_cells_add_up_and_shrink(width: int) -> None:
    budget = TurnBudget(100, 500, 200, 50, ContextWindow(2_000, "explicit"), "heuristic")
    cells = segments(budget, 20)
    assert sum(c for _, c in cells) == 20
    assert dict(cells) == {"system": 1, "history": 5, "tools": 2, "input": 0, "empty": 12}
    text = plain(BudgetBar(budget), width)
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert all(len(line) <= width for line in lines)
    assert any("850 / 2k tokens (estimate)" in line or "850 / 2k tokens (est…" in line for line in lines)
    bar_cells = lines[0].count("█") + lines[0].count("░")
    assert bar_cells <= 40


def test_over_the_window_is_an_error_line() -> None:
    budget = TurnBudget(100, 2_500, 200, 50, ContextWindow(2_000, "explicit"), "heuristic")
    text = plain(BudgetBar(budget), 100)
    assert "⚠ over the context window (142% of 2k)" in text
    assert sum(c for p, c in segments(budget, 40) if p != "empty") == 40

"""The workbench's cost pieces (``tui/widgets/cost_view.py``): a turn's cost line labelled provider or estimate,
failures one sentence each, the cache sparkline, an agent's panel with why its cache read fell, the channel
list's figure, and ``CostView`` mounted in a Textual app (pilot)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console
from textual.app import App, ComposeResult

from ag2net.costs import BUILTIN_PRICES, costs_by_channel, price_table
from tui.widgets.cost_view import (
    CostView,
    agent_cost,
    channel_cost_labels,
    channel_cost_text,
    failure_lines,
    sparkline,
    token_line,
    turn_cost_line,
)


def plain(renderable: Any, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


def tool(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name, "parameters": {}}}


def record(n: int, *, prompt: int, cached: int, completion: int = 100, method: str = "provider", **kw: Any):
    data: dict[str, Any] = {
        "turn_id": f"t{n}",
        "channel_id": kw.pop("channel", "c1"),
        "agent_id": "a1",
        "trigger_envelope_id": "e",
        "system_prompt": "You are bob.",
        "history": [],
        "inputs": [{"type": "text_input", "content": f"q{n}", "metadata": {}}],
        "tools": kw.pop("tools", [tool("say"), tool("peers")]),
        "view": {"name": "full_transcript"},
        "model_params": {"model": kw.pop("model", "gpt-4o-mini")},
        "tokens": {"system": 8, "prompt": prompt, "cached": cached, "completion": completion, "reasoning": 0},
        "token_method": method,
        "parts_method": "heuristic",
        "rounds": [{"request": "r", "usage": {"prompt_tokens": prompt, "cached_tokens": cached}}]
        if method == "provider"
        else [{"request": "r"}],
    }
    data.update(kw)
    return data


TABLE = price_table(environ={})


def test_a_turn_cost_line_says_provider_or_estimate():
    price = BUILTIN_PRICES["gpt-4o-mini"]
    provider = plain(turn_cost_line(record(1, prompt=10_000, cached=8_192, completion=512), TABLE))
    dollars = (1_808 * price.input + 8_192 * price.cached_input + 512 * price.output) / 1e6
    assert provider.strip() == (
        f"cost ${dollars:.4f} (provider usage) · prompt 10k (8.2k cached, 82%) · completion 512"
    )
    estimate = plain(turn_cost_line(record(2, prompt=900, cached=0, method="heuristic"), TABLE))
    assert "cost ~$" in estimate and "(estimate, heuristic)" in estimate and "cached" not in estimate
    unpriced = plain(turn_cost_line(record(3, prompt=900, cached=0, model="llama3"), TABLE))
    assert "no price for model 'llama3'; add it to [prices] in the settings file or AG2NET_PRICES" in unpriced


def test_token_line_labels_totals_and_parts_apart():
    text = plain(token_line(record(1, prompt=1_200, cached=1_024)))
    assert "tokens: system 8 (heuristic)" in text
    assert "totals: prompt 1200 · cached 1024 · completion 100 · reasoning 0 (provider)" in text


def test_failures_are_one_sentence_each():
    data = record(
        1,
        prompt=10,
        cached=0,
        rounds=[
            {
                "request": "r",
                "retries": ["attempt 1 of 3 failed: model endpoint x answered HTTP 429; retried after 2 s"],
            }
        ],
        error="ModelError: model endpoint x answered HTTP 500 for model 'm': boom (attempt 3 of 3; the 2 before it failed too)",
    )
    lines = [line.plain for line in failure_lines(data)]
    assert lines == [
        "↻ call 1: attempt 1 of 3 failed: model endpoint x answered HTTP 429; retried after 2 s",
        "✗ ModelError: model endpoint x answered HTTP 500 for model 'm': boom (attempt 3 of 3; the 2 before it failed too)",
    ]
    assert failure_lines(record(2, prompt=10, cached=0)) == []


def test_sparkline_levels_and_unknowns():
    assert sparkline([0.0, 0.5, 1.0, None]).plain == "▁▅█·"
    assert len(sparkline([0.5] * 40).plain) == 24  # the newest turns only
    assert sparkline([]).plain == ""


def test_agent_panel_has_total_hit_rate_and_why_the_cache_fell():
    records = [
        record(1, prompt=2_000, cached=0),
        record(2, prompt=2_100, cached=1_920),
        record(3, prompt=2_200, cached=0, tools=[tool("peers"), tool("say")]),
    ]
    text = plain(agent_cost(records, TABLE))
    assert text.splitlines()[0].startswith("cost $") and "over 3 turns" in text.splitlines()[0]
    assert f"cache hit rate {1_920 / 6_300:.0%} ▁▇▁" in text
    assert "turn 3: cost $" in text
    assert (
        "▼ turn 3: cache read fell from 1920 to 0 tokens: tools offered changed order: `peers` is now where "
        "`say` was" in text
    )
    assert "unknown (no provider usage recorded)" in plain(
        agent_cost([record(1, prompt=5, cached=0, method="heuristic")], TABLE)
    )
    assert "no turns recorded yet" in plain(agent_cost([], TABLE))


def test_channel_figures():
    records = [
        record(1, prompt=1_000_000, cached=0, completion=0),
        record(2, prompt=0, cached=0, completion=100_000, channel="c2", method="heuristic"),
    ]
    labels = channel_cost_labels(records, TABLE)
    assert labels["c1"].plain == "$0.15"
    assert labels["c2"].plain == "~$0.06"  # an estimate is marked
    assert (
        channel_cost_text(
            costs_by_channel([record(3, prompt=1, cached=0, model="llama3")], TABLE)["c1"]
        ).plain
        == ""
    )
    assert channel_cost_text(None).plain == ""


class CostApp(App[None]):
    def compose(self) -> ComposeResult:
        yield CostView(TABLE, id="cost")


async def test_cost_view_in_a_running_app():
    app = CostApp()
    records = [record(1, prompt=2_000, cached=0), record(2, prompt=2_100, cached=1_920)]
    async with app.run_test(size=(100, 20)) as pilot:
        view = app.query_one("#cost", CostView)
        view.show(records)
        await pilot.pause()
        text = plain(view.content, 100)
        assert "cache hit rate" in text and "▁▇" in text and "turn 2: cost $" in text
        assert view.region.height >= 4  # it takes the lines it shows


async def test_cost_view_says_a_bad_prices_variable_in_one_sentence(monkeypatch):
    monkeypatch.setenv("AG2NET_PRICES", "{oops")

    class Bare(App[None]):
        def compose(self) -> ComposeResult:
            yield CostView(id="cost")

    app = Bare()
    async with app.run_test(size=(100, 10)) as pilot:
        view = app.query_one("#cost", CostView)
        view.show([record(1, prompt=10, cached=0)])
        await pilot.pause()
        assert plain(view.content, 100).startswith("AG2NET_PRICES is not valid JSON")

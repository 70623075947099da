"""What turns cost, for the agent view and the channel list: pure render functions and a small widget.

* ``turn_cost_line(record, table)``: ``cost $0.0031 (provider usage) · prompt 10k (8.2k cached, 82%) ·
  completion 512 (128 reasoning)``; an estimate says ``~$… (estimate, heuristic)``; a model with no price
  says so and how to add one.
* ``failure_lines(record)``: the turn's error and every retried failure of its model calls, one sentence
  each.
* ``sparkline(rates)``: cache hit rates as ``▁▃█▆``, ``·`` where a turn has no provider figures.
* ``agent_cost(records, table)``: an agent's total, its cache hit rate with the sparkline, the newest turns'
  costs and, for each turn whose cache read fell, why (``ag2net.cache_diff``).
* ``channel_cost_text(sum)``: the channel list's short figure (``$0.42``, ``~$0.42`` when estimated).

``CostView`` is a ``Static`` that shows ``agent_cost`` for the records it is given (``show``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.widgets import Static

from ag2net.agent.budget import compact
from ag2net.cache_diff import SeqOf, cache_drops
from ag2net.costs import (
    CostSum,
    PriceTable,
    agent_hit_rate,
    cache_hit_rates,
    costs_by_agent,
    format_dollars,
    turn_cost,
)

BARS = "▁▂▃▄▅▆▇█"
UNKNOWN = "·"
SPARK_WIDTH = 24
"""Turns the sparkline shows at most (the newest)."""
RECENT_TURNS = 5
"""Turns whose cost lines ``agent_cost`` lists (the newest)."""


def _get(record: Any, name: str, default: Any = None) -> Any:
    value = record.get(name, default) if isinstance(record, dict) else getattr(record, name, default)
    return default if value is None else value


def sparkline(rates: Sequence[float | None], width: int = SPARK_WIDTH) -> Text:
    """One cell per turn (the newest ``width``): the hit rate 0…1 as a bar, ``·`` when unknown."""
    text = Text()
    for rate in list(rates)[-width:] if width > 0 else []:
        if rate is None:
            text.append(UNKNOWN, style="dim")
        else:
            level = min(len(BARS) - 1, max(0, round(rate * (len(BARS) - 1))))
            text.append(BARS[level], style="green" if rate >= 0.5 else "yellow")
    return text


def _percent(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "—"


def turn_cost_line(record: Any, table: PriceTable) -> Text:
    """One turn's cost and tokens, labelled provider or estimate."""
    cost = turn_cost(record, table)
    tokens = cost.tokens
    line = Text("cost ", style="dim")
    if cost.dollars is None:
        line.append(cost.reason, style="dim italic")
    else:
        line.append(cost.label, style="bold" if not cost.estimated else "")
    prompt = f"prompt {compact(tokens.prompt)}"
    if tokens.provider or tokens.cached:
        prompt += f" ({compact(tokens.cached)} cached, {_percent(tokens.cached, tokens.prompt)})"
    completion = f"completion {compact(tokens.completion)}"
    if tokens.reasoning:
        completion += f" ({compact(tokens.reasoning)} reasoning)"
    line.append(f" · {prompt} · {completion}", style="dim")
    return line


def token_line(record: Any) -> Text:
    """The turn's token figures, saying how each was counted: the totals (``provider`` or the estimate's
    method) and the parts ag2net counted (``parts_method``). For the agent view's Turns tab."""
    tokens = dict(_get(record, "tokens", {}) or {})
    method = str(_get(record, "token_method", "") or "heuristic")
    parts_method = str(_get(record, "parts_method", "") or method)
    parts = " · ".join(
        f"{k} {tokens[k]}" for k in ("system", "history", "tools", "input", "output") if k in tokens
    )
    text = Text(f"tokens: {parts} ({parts_method})", style="dim")
    if "prompt" in tokens:
        label = "provider" if method == "provider" else f"estimate, {method}"
        text.append(
            f"\ntotals: prompt {tokens.get('prompt', 0)} · cached {tokens.get('cached', 0)} · completion "
            f"{tokens.get('completion', 0)} · reasoning {tokens.get('reasoning', 0)} ({label})",
            style="dim",
        )
    return text


def failure_lines(record: Any) -> list[Text]:
    """The turn's error and each retried failure of its model calls, one sentence a line (none: [])."""
    out: list[Text] = []
    for n, rnd in enumerate(_get(record, "rounds", []) or []):
        for sentence in (rnd.get("retries") or []) if isinstance(rnd, dict) else []:
            out.append(Text(f"↻ call {n + 1}: {sentence}", style="yellow"))
    error = _get(record, "error", None)
    if error:
        out.append(Text(f"✗ {error}", style="bold red"))
    return out


def channel_cost_text(total: CostSum | None) -> Text:
    """The channel list's cost figure: ``$0.42``, ``~$0.42`` (some turns estimated), ``""`` (no priced turn)."""
    if total is None or not total.priced:
        return Text("")
    mark = "~" if total.estimated else ""
    return Text(f"{mark}{format_dollars(total.dollars)}", style="dim" if total.estimated else "")


def channel_cost_labels(records: Sequence[Any], table: PriceTable) -> dict[str, Text]:
    """``{channel_id: channel_cost_text}`` for the channels of ``records``."""
    from ag2net.costs import costs_by_channel

    return {cid: channel_cost_text(total) for cid, total in costs_by_channel(records, table).items()}


def agent_cost(
    records: Sequence[Any],
    table: PriceTable,
    *,
    seq_of: SeqOf | None = None,
    recent: int = RECENT_TURNS,
    label: Callable[[Any, int], str] | None = None,
) -> RenderableType:
    """One agent's turns (oldest first): the total, the cache hit rate and its sparkline, the newest turns'
    costs with their failures, and why each fall of the cache read happened."""
    if not records:
        return Text("no turns recorded yet: nothing has cost anything", style="dim")
    totals = list(costs_by_agent(records, table).values())
    head = Text("cost ", style="dim")
    head.append(totals[0].label if len(totals) == 1 else " · ".join(t.label for t in totals), style="bold")
    rate = agent_hit_rate(records)
    cache = Text("cache hit rate ", style="dim")
    if rate is None:
        cache.append("unknown (no provider usage recorded)", style="dim italic")
    else:
        cache.append(f"{rate:.0%} ", style="bold")
        cache.append_text(sparkline(cache_hit_rates(records)))
    lines: list[RenderableType] = [head, cache]
    start = max(0, len(records) - recent)
    for n, record in enumerate(records[start:], start=start + 1):
        name = label(record, n) if label is not None else f"turn {n}"
        line = Text(f"{name}: ", style="bold dim")
        line.append_text(turn_cost_line(record, table))
        lines.append(line)
        lines.extend(failure_lines(record))
    number = {str(_get(r, "turn_id", "")): i + 1 for i, r in enumerate(records)}
    for drop in cache_drops(records, seq_of=seq_of):
        line = Text(f"▼ turn {number.get(drop.turn_id, '?')}: ", style="yellow")
        line.append(drop.sentence)
        lines.append(line)
    return Group(*lines)


class CostView(Static):
    """An agent's cost and cache, redrawn by ``show``."""

    DEFAULT_CSS = """
    CostView { height: auto; padding: 0 1; }
    """

    def __init__(self, table: PriceTable | None = None, **kwargs: Any) -> None:
        super().__init__("", **kwargs)
        self.table = table
        self.records: list[Any] = []

    def show(self, records: Sequence[Any], *, seq_of: SeqOf | None = None) -> None:
        """Show ``records`` (one agent's turns, oldest first)."""
        from ag2net.costs import price_table

        self.records = list(records)
        if self.table is None:
            try:
                self.table = price_table()
            except ValueError as exc:  # a bad AG2NET_PRICES: its one sentence, where the costs would be
                self.update(Text(str(exc), style="bold red"))
                return
        self.update(agent_cost(self.records, self.table, seq_of=seq_of))


__all__ = [
    "CostView",
    "agent_cost",
    "channel_cost_labels",
    "channel_cost_text",
    "failure_lines",
    "sparkline",
    "token_line",
    "turn_cost_line",
]

"""How the agent view draws a projection, without a widget: Rich renderables for the projected history,
the tools offered, one recorded turn (beside its re-projection now) and a comparison of two turns.

``ProjectionPainter`` takes the theme's colours as a lookup (``color(name, fallback)``) and the names of
agents (``name_for``); ``ProjectedView`` makes one per render and shows what it returns.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from ag2net.agent.tokens import default_counter
from ag2net.client.turns import TurnRecord, operator_label
from ag2net.events import BaseEvent, part_text
from tui.formatting import id_legend
from tui.models import ProjectionData
from tui.widgets.budget_bar import BudgetBar
from tui.widgets.cost_view import failure_lines
from tui.widgets.cost_view import token_line as tokens_of
from tui.widgets.projection_diff import (
    DiffRow,
    diff_events,
    diff_tools,
    event_body,
    role_of,
    spec_text,
    tool_name,
    turn_label,
)

CONTEXT = 2
"""Unchanged events kept around each change when two turns are compared (the rest are folded)."""

TURNS_PRIVATE = (
    "Turn records are private to each agent's own connection and to operators, and this "
    "workbench is not an operator of the hub: attach with --operator-token to see this "
    "participant's turns (system prompt and tools included)."
)


def shown_turn(data: ProjectionData, index: int | None) -> TurnRecord | None:
    """Turn ``index`` of ``data.turns`` (default: the one ``data`` says is shown), else ``data.turn``."""
    turns = data.turns
    if index is None:
        index = data.turn_index
    return turns[index] if index is not None and 0 <= index < len(turns) else data.turn


class ProjectionPainter:
    """Renderables of a projection, its tools, its turns and their comparison, in the theme's colours."""

    def __init__(self, color: Callable[[str, str], str], name_for: Callable[[str], str]) -> None:
        self.color = color
        self.name_for = name_for

    # ------------------------------------------------------------------ styles

    def role_style(self, role: str) -> str:
        colors = {
            "system": self.color("text-warning", "yellow"),
            "user": self.color("text-primary", "blue"),
            "assistant": self.color("text-success", "green"),
            "summary": self.color("text-accent", "magenta"),
            "tool call": self.color("text-secondary", "cyan"),
            "tool result": self.color("text-secondary", "cyan"),
        }
        return f"bold {colors.get(role, 'white')}"

    def mark_styles(self) -> dict[str, str]:
        return {
            "~": self.color("text-warning", "yellow"),
            "-": self.color("text-error", "red"),
            "+": self.color("text-success", "green"),
            " ": "dim",
        }

    def budget_colors(self) -> dict[str, str]:
        return {
            "system": self.color("text-warning", "yellow"),
            "history": self.color("text-primary", "blue"),
            "tools": self.color("text-secondary", "cyan"),
            "input": self.color("text-success", "green"),
            "warning": self.color("text-warning", "yellow"),
            "error": self.color("text-error", "red"),
        }

    def legend(self, texts: Sequence[str]) -> RenderableType | None:
        """Which agent each raw id in ``texts`` is (None when the texts carry no known id)."""
        pairs = id_legend(texts, self.name_for)
        if not pairs:
            return None
        legend = Text("Agent ids in this text, as the model gets them:", style="dim")
        for agent_id, name in pairs:
            legend.append("\n  ")
            legend.append(agent_id, style="dim")
            legend.append(" = ", style="dim")
            legend.append(name, style="bold")
        return legend

    # ------------------------------------------------------------------ the projection and its tools

    def history(self, system_prompt: str, history: Sequence[BaseEvent]) -> RenderableType:
        """One block per event: a header line (index, role, tokens) and the content indented below."""
        counter = default_counter()
        if not history and not system_prompt:
            return Text(
                "Nothing to project yet: no visible envelope renders for this participant.", style="dim"
            )
        blocks: list[RenderableType] = []
        texts = [system_prompt, *(event_body(e) for e in history)]
        legend = self.legend(texts)
        if legend is not None:
            blocks.append(Padding(legend, (0, 0, 1, 0)))
        if system_prompt:
            blocks.append(self.block("", "system", Text(system_prompt), counter.count_system(system_prompt)))
        for index, event in enumerate(history, 1):
            blocks.append(
                self.block(str(index), role_of(event), Text(event_body(event)), counter.count_event(event))
            )
        return Group(*blocks)

    def block(self, index: str, role: str, content: Text, tokens: int) -> RenderableType:
        head = Text()
        if index:
            head.append(f"#{index} ", style="dim")
        head.append(role, style=self.role_style(role))
        head.append(f"  ≈{tokens} tok", style="dim")
        return Group(head, Padding(content, (0, 0, 0, 2)))

    def tools(self, tools: Sequence[dict[str, Any]]) -> RenderableType:
        """Each tool: its name and token estimate, its whole description, and its JSON schema — every
        line wrapped to the pane (nothing is cut at the right edge)."""
        if not tools:
            return Text("No tools offered to this participant on this turn.", style="dim italic")
        counter = default_counter()
        heading = Text.assemble(
            (f"{len(tools)} tools offered", "bold"), f"  (≈ {counter.count_tools(tools)} tokens)"
        )
        blocks: list[RenderableType] = [heading]
        highlight = JSONHighlighter()
        for schema in tools:
            fn = schema.get("function", schema)
            name = tool_name(schema)
            head = Text.assemble(
                ("\n" + name, f"bold {self.color('text-warning', 'yellow')}"),
                (f"  ≈ {counter.count_tools([schema])} tokens", "dim"),
            )
            blocks.append(head)
            description = str(fn.get("description") or "").strip() if isinstance(fn, dict) else ""
            if description:
                blocks.append(Text(description))
            parameters = fn.get("parameters", {}) if isinstance(fn, dict) else {}
            body = highlight(Text(json.dumps(parameters, indent=2, sort_keys=True, ensure_ascii=False)))
            body.overflow = "fold"
            blocks.append(Padding(body, (0, 0, 0, 1)))
        return Group(*blocks)

    # ------------------------------------------------------------------ one turn

    def turn(
        self, data: ProjectionData, index: int | None, *, loading: bool, budget: Any
    ) -> tuple[RenderableType, str]:
        """Turn ``index`` of ``data.turns`` (default: ``data.turn``) and a one-line summary of it: what it
        got and did (and its ``budget``), and — for the turn ``data.replay`` belongs to — its history
        beside a re-projection of the same WAL now."""
        turn = shown_turn(data, index)
        if index is None:
            index = data.turn_index
        if turn is None and data.preview.turns_private:
            return Text(TURNS_PRIVATE, style="dim"), "turns private"
        if turn is None:
            return Text("No recorded turn for this participant on this channel yet.", style="dim"), "no turn"
        number = (index + 1) if index is not None else len(data.turns) or 1
        parts = self.turn_head(turn, number, len(data.turns) or 1, capped=data.turns_capped)
        if budget is not None:
            parts.append(BudgetBar(budget, self.budget_colors(), title="this turn"))
        replayed = data.turn is not None and data.turn.turn_id == turn.turn_id and not loading
        if not replayed:
            parts.append(Text("\nre-projecting this turn's WAL now…", style="dim italic"))
            parts.append(self.history(turn.system_prompt, turn.history))
            return Group(*parts), "re-projecting…"
        now = data.replay if data.replay is not None else data.preview.history
        table, summary, changed = self.replay(turn, now, spec_text(data.preview.view))
        mark_style = self.mark_styles()
        parts.append(Text("\n" + summary, style=f"bold {mark_style['~'] if changed else mark_style['+']}"))
        parts.append(table)
        legend = self.legend([event_body(e) for e in (*turn.history, *now)])
        if legend is not None:
            parts.append(Padding(legend, (1, 0, 0, 0)))
        return Group(*parts), summary

    def turn_head(self, turn: TurnRecord, number: int, count: int, *, capped: bool) -> list[RenderableType]:
        """A turn's position, timing and view, its input, its reply, its tool calls and its tokens."""
        position = Text()
        position.append(f"Turn {number} of {count}", style="bold")
        if capped:
            position.append(f" (the newest {count} recorded)", style="dim")
        position.append("   [ previous · ] next · d compare", style="dim")
        header = Text(
            f"{turn.started_at[11:23]} · {turn.duration_ms:.0f} ms · view {spec_text(turn.view)}",
            style="dim",
        )
        if turn.error:
            header.append(f"\nerror: {turn.error}", style=self.color("text-error", "red"))
        stepped_in = operator_label(turn)
        if stepped_in:  # a person decided this turn at a breakpoint: "answered by ana"
            header.append(f"\n{stepped_in}", style=f"bold {self.color('text-warning', 'yellow')}")
        for line in failure_lines({"rounds": turn.rounds}):  # retried failures, one sentence each
            header.append("\n")
            header.append_text(line)
        reply = Text.assemble(("\nreply: ", "bold"), turn.reply if turn.reply is not None else "(none)")
        calls = Text()
        for call in turn.tool_calls:
            mark = "✗" if call.get("is_error") else "✓"
            calls.append(
                f"\n  {mark} {call.get('name')}({json.dumps(call.get('arguments'), default=str)[:120]})"
            )
        token_line = tokens_of(turn)  # the parts (ag2net's count) and the totals (provider or estimate)
        inputs = Text.assemble(("\ninput: ", "bold"), " ".join(part_text(p) for p in turn.inputs)[:500])
        parts: list[RenderableType] = [position, header, inputs, reply]
        if turn.tool_calls:
            parts.append(calls)
        parts.append(token_line)
        return parts

    def replay(self, turn: TurnRecord, now: Sequence[BaseEvent], now_label: str) -> tuple[Table, str, int]:
        """The turn's history beside ``now`` (its WAL re-projected), one row per event; the summary
        (``2 of 9 events differ`` or ``identical: 9 events``) and how many rows differ."""
        rows = diff_events(turn.history, now)
        changed = sum(1 for r in rows if r.mark != " ")
        table = Table(expand=True, show_edge=False, box=None, padding=(0, 1))
        table.add_column("", width=1, no_wrap=True)
        table.add_column(f"at turn time ({spec_text(turn.view)})", ratio=1, overflow="fold")
        table.add_column(f"re-projected now ({now_label})", ratio=1, overflow="fold")
        mark_style = self.mark_styles()
        for row in rows:
            style = mark_style[row.mark]
            cells = []
            for event in (row.then, row.now):
                if event is None:
                    cells.append(Text(""))
                else:
                    text = Text(f"{role_of(event)}: ", self.role_style(role_of(event)))
                    text.append_text(Text(event_body(event, 600)))
                    if row.mark != " ":
                        text.stylize(f"on {self.color('surface-lighten-1', '#333333')}")
                    cells.append(text)
            table.add_row(Text(row.mark, style=f"bold {style}"), *cells)
        summary = f"{changed} of {len(rows)} events differ" if changed else f"identical: {len(rows)} events"
        return table, summary, changed

    # ------------------------------------------------------------------ two turns

    def compare(self, turns: Sequence[TurnRecord], a: int, b: int) -> tuple[RenderableType, str]:
        """Turn ``a`` against turn ``b``: projection, system prompt and tools; and a one-line summary."""
        then, now = turns[a], turns[b]
        styles = self.mark_styles()
        rows = diff_events(then.history, now.history)
        changed = sum(1 for r in rows if r.mark != " ")
        tools = diff_tools(then.tools, now.tools)
        added = sum(1 for t in tools if t.mark == "+")
        removed = sum(1 for t in tools if t.mark == "-")
        altered = sum(1 for t in tools if t.mark == "~")
        system_same = then.system_prompt == now.system_prompt
        summary = (
            f"projection: {changed} of {len(rows)} events differ · tools: +{added} −{removed} ~{altered}"
            f" · system prompt {'same' if system_same else 'changed'}"
        )
        out: list[RenderableType] = [
            Text.assemble(
                (f"{turn_label(then, a + 1)} → {turn_label(now, b + 1)}", "bold"),
                ("\n" + summary, "dim"),
            )
        ]
        if then.view != now.view:
            out.append(Text(f"view: {spec_text(then.view)} → {spec_text(now.view)}", style=styles["~"]))
        if not system_same:
            out.append(Text("\nSystem prompt", style="bold"))
            out.append(unified(then.system_prompt.splitlines(), now.system_prompt.splitlines(), styles))
        out.append(Text("\nProjection", style="bold"))
        out.append(self.event_lines(rows, styles))
        out.append(Text("\nTools offered", style="bold"))
        if not tools:
            out.append(Text("none at either turn", style="dim"))
        for tool in tools:
            line = Text(f"{tool.mark} {tool.name}", style=styles[tool.mark])
            if tool.mark == " ":
                line.append("  (same schema)", style="dim")
            out.append(line)
            if tool.lines:
                out.append(Padding(diff_text(tool.lines, styles), (0, 0, 0, 2)))
        legend = self.legend([event_body(e) for e in (*then.history, *now.history)])
        if legend is not None:
            out.append(Padding(legend, (1, 0, 0, 0)))
        return Group(*out), summary

    def event_lines(self, rows: Sequence[DiffRow], styles: dict[str, str]) -> Text:
        """A unified diff of two histories, one line per event; runs of unchanged events are folded."""
        text = Text()
        keep = {
            j
            for i, row in enumerate(rows)
            if row.mark != " "
            for j in range(max(0, i - CONTEXT), min(len(rows), i + CONTEXT + 1))
        }
        folded = 0
        for i, row in enumerate(rows):
            if row.mark == " " and i not in keep:
                folded += 1
                continue
            if folded:
                text.append(f"  … {folded} unchanged events\n", style="dim italic")
                folded = 0
            pairs = (
                [("-", row.then), ("+", row.now)]
                if row.mark == "~"
                else [(row.mark, row.then if row.mark == "-" else row.now)]
            )
            for mark, event in pairs:
                if event is None:
                    continue
                text.append(f"{mark} ", style=f"bold {styles[mark]}")
                text.append(f"{role_of(event)}: ", style=self.role_style(role_of(event)))
                text.append(event_body(event, 600) + "\n", style="dim" if mark == " " else "")
        if folded:
            text.append(f"  … {folded} unchanged events\n", style="dim italic")
        if not rows:
            text.append("(both empty)", style="dim")
        text.rstrip()
        return text


def unified(then: list[str], now: list[str], styles: dict[str, str]) -> Text:
    """A unified diff of two texts' lines, one line of context."""
    return diff_text(list(difflib.unified_diff(then, now, lineterm="", n=1))[2:], styles)


def diff_text(lines: Sequence[str], styles: dict[str, str]) -> Text:
    text = Text(overflow="fold")
    for line in lines:
        mark = line[:1] if line[:1] in "+-" else " "
        text.append(line + "\n", style="dim" if line.startswith("@@") else styles[mark])
    text.rstrip()
    return text


__all__ = ["CONTEXT", "ProjectionPainter", "diff_text", "shown_turn", "unified"]

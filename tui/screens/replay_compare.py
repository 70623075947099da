"""The comparison of a fork's replay with the original: envelope by envelope, and turn by turn.

On top, the fork point, the verdict in words ("completed: 20 of 20 envelopes reproduced", or "stopped early at
seq N because …"), the overrides, the first envelope that differs, who answered the turns (the recording or a
live model) and the first turn that differs (``ag2net.debug.compare``). Below, two tabs:

- **Transcript**: one table, so both sides scroll together. From 100 columns the original is on the left and
  the replay on the right; narrower, each envelope is one line when both runs made it alike and two lines
  (``◂`` original, ``▸`` replay) when they differ. A differing row is marked ``≠``; ``n``/``N`` step through them.
- **Turns**: each agent's turns lined up (history, input, tools, reply: same or ``≠``) and, for the turn under
  the cursor, what its projected history lost and gained.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static, TabbedContent, TabPane

from ag2net.cli.replay import answered_summary, divergence_summary, envelope_summary, turn_summary
from tui.wording import plural

WIDE = 100
"""From this many columns the two sides stand side by side."""


class ReplayCompare(Screen[None]):
    """Original left, replay right; divergences marked; the first one summarised on top."""

    HELP = """\
## Replay comparison

The original run against the replay from the fork point. `≠` marks an envelope (or a turn) the two runs
made differently; **n** / **N** go to the next / previous one, **t** switches between the transcript and
the turns, **Escape** goes back to the workbench.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="replay.close", tooltip="Back to the workbench"),
        Binding("n", "divergence(1)", "Next ≠", id="replay.next", tooltip="Next row that differs"),
        Binding(
            "N", "divergence(-1)", "Prev ≠", show=False, id="replay.prev", tooltip="Previous row that differs"
        ),
        Binding("t", "toggle_tab", "Tabs", id="replay.tab", tooltip="Transcript or turns"),
    ]

    DEFAULT_CSS = """
    ReplayCompare {
        & #rc-summary { height: auto; padding: 0 1; }
        & #rc-tabs { height: 1fr; }
        & DataTable { height: 1fr; }
        & #rc-turn-detail { height: auto; max-height: 8; padding: 0 1; color: $text-muted; }
        & Footer { dock: bottom; }
    }
    """

    def __init__(
        self,
        label: str,
        at_seq: int,
        result: Any,
        diff: Any,
        name_for: Any,
        overrides: dict[str, str] | None = None,
    ) -> None:
        super().__init__()
        self.label = label
        self.at_seq = at_seq
        self.result = result
        self.diff = diff
        self.name_for = name_for
        self.overrides = overrides or {}
        self.differing = [i for i, row in enumerate(diff.rows) if not row["same"]]
        """Indexes of ``diff.rows`` that differ (the rows marked ``≠``)."""
        self.differing_turns = [i for i, row in enumerate(diff.turns) if _turn_differs(row)]
        self._width = 0

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static(self.summary(), id="rc-summary")
        with TabbedContent(id="rc-tabs", initial="rc-tab-transcript"):
            with TabPane(f"Transcript ({len(self.differing)} ≠)", id="rc-tab-transcript"):
                yield DataTable(id="rc-rows", cursor_type="row", zebra_stripes=False)
            with TabPane(f"Turns ({len(self.differing_turns)} ≠)", id="rc-tab-turns"):
                yield DataTable(id="rc-turns", cursor_type="row")
                yield Static("", id="rc-turn-detail")
        yield Footer()

    def summary(self) -> Text:
        result, diff = self.result, self.diff
        text = Text()
        text.append(self.label, style="bold")
        text.append(
            f" forked after seq {self.at_seq} · {plural(len(result.replayed), 'envelope')} vs {len(result.original)}\n"
        )
        if self.overrides:
            text.append(
                "changed: " + " · ".join(f"{who}: {what}" for who, what in self.overrides.items()) + "\n",
                style="italic",
            )
        else:
            text.append("changed: nothing (a straight replay)\n", style="italic")
        verdict = getattr(diff, "verdict", "") or divergence_summary(diff)
        text.append(verdict + "\n", style="bold red" if self.differing else "green")
        if self.differing:
            text.append(divergence_summary(diff) + "\n")
        text.append(answered_summary(diff, self.name_for) + "\n")
        text.append(
            "first divergent turn: " + turn_summary(diff.first_turn, self.name_for, diff.turn_why),
            style="bold yellow" if diff.first_turn is not None else "green",
        )
        return text

    def on_mount(self) -> None:
        self._fill_rows(self.size.width)
        self._fill_turns()
        self.query_one("#rc-rows", DataTable).focus()
        if self.differing:
            self.query_one("#rc-rows", DataTable).move_cursor(row=self.differing[0])

    def on_resize(self) -> None:
        if (self.size.width >= WIDE) != (self._width >= WIDE):
            self._fill_rows(self.size.width)

    @property
    def side_by_side(self) -> bool:
        return self._width >= WIDE

    def _fill_rows(self, width: int) -> None:
        self._width = width
        table = self.query_one("#rc-rows", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        names = self.name_for
        if width >= WIDE:
            side = max((width - 14) // 2, 20)
            table.add_column("", width=1, key="mark")
            table.add_column("seq", width=4, key="seq")
            table.add_column("original", width=side, key="original")
            table.add_column("replay", width=side, key="replay")
            for row in self.diff.rows:
                left = envelope_summary(row["original"], names)
                right = envelope_summary(row["replayed"], names)
                if row["same"]:
                    table.add_row("", str(row["seq"]), left, Text(right, style="dim"), key=str(row["seq"]))
                else:
                    table.add_row(
                        Text("≠", style="bold red"),
                        Text(str(row["seq"]), style="bold red"),
                        Text(left, style="red"),
                        Text(right, style="bold green"),
                        key=str(row["seq"]),
                    )
        else:
            table.add_column("", width=1, key="mark")
            table.add_column("seq", width=4, key="seq")
            both_width = max(width - 12, 20)
            table.add_column("original ◂ / replay ▸", width=both_width, key="both")
            for row in self.diff.rows:
                left = envelope_summary(row["original"], names)
                if row["same"]:
                    table.add_row("", str(row["seq"]), left, key=str(row["seq"]))
                else:
                    right = envelope_summary(row["replayed"], names)
                    both = Text(no_wrap=True, overflow="ellipsis")
                    both.append(_clip("◂ " + left, both_width) + "\n", style="red")
                    both.append(_clip("▸ " + right, both_width), style="bold green")
                    table.add_row(
                        Text("≠", style="bold red"),
                        Text(str(row["seq"]), style="bold red"),
                        both,
                        key=str(row["seq"]),
                        height=2,
                    )
        if self.diff.rows:
            table.move_cursor(row=min(cursor, len(self.diff.rows) - 1))

    def _fill_turns(self) -> None:
        table = self.query_one("#rc-turns", DataTable)
        table.add_column("", width=1, key="mark")
        table.add_column("agent", key="agent")
        table.add_column("turn", key="turn")
        for what in ("history", "input", "tools", "reply"):
            table.add_column(what, key=what)
        for index, row in enumerate(self.diff.turns):
            differs = _turn_differs(row)
            cells: list[Any] = [
                Text("≠", style="bold red") if differs else "",
                self.name_for(row["agent_id"]),
                str(row["turn"]),
            ]
            if "missing" in row:
                cells += [Text(f"missing in the {row['missing']} run", style="bold red"), "", "", ""]
            else:
                for key in ("history_same", "inputs_same", "tools_same", "reply_same"):
                    cells.append("same" if row[key] else Text("≠ differs", style="bold red"))
            table.add_row(*cells, key=str(index))
        if self.differing_turns:
            table.move_cursor(row=self.differing_turns[0])
        self._show_turn(table.cursor_row)

    # ------------------------------------------------------------------ the turn under the cursor

    @on(DataTable.RowHighlighted, "#rc-turns")
    def _turn_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_turn(event.cursor_row)

    def _show_turn(self, index: int) -> None:
        detail = self.query_one("#rc-turn-detail", Static)
        if not 0 <= index < len(self.diff.turns):
            detail.update("")
            return
        row = self.diff.turns[index]
        by = row.get("answered_by") or ""
        answered = f" (answered by {by})" if by else ""
        if not _turn_differs(row):
            detail.update(
                f"{self.name_for(row['agent_id'])}'s turn {row['turn']}: the same in both runs{answered}"
            )
            return
        lines = [turn_summary(row, self.name_for, _turn_why(row)) + answered]
        delta = row.get("history_delta") or {}
        for sign, key in (("-", "removed"), ("+", "added")):
            for event in delta.get(key, [])[:3]:
                lines.append(f"  {sign} {event.get('type', '?')}: {_event_text(event)}")
            if len(delta.get(key, [])) > 3:
                lines.append(f"  {sign} … {len(delta[key]) - 3} more")
        detail.update("\n".join(lines))

    # ------------------------------------------------------------------ keys

    def action_close(self) -> None:
        self.dismiss()

    def action_toggle_tab(self) -> None:
        tabs = self.query_one("#rc-tabs", TabbedContent)
        tabs.active = "rc-tab-turns" if tabs.active == "rc-tab-transcript" else "rc-tab-transcript"
        table_id = "#rc-turns" if tabs.active == "rc-tab-turns" else "#rc-rows"
        self.query_one(table_id, DataTable).focus()

    def action_divergence(self, step: int) -> None:
        turns = self.query_one("#rc-tabs", TabbedContent).active == "rc-tab-turns"
        marks = self.differing_turns if turns else self.differing
        table = self.query_one("#rc-turns" if turns else "#rc-rows", DataTable)
        if not marks:
            self.notify("The two runs do not differ here.", timeout=3)
            return
        here = table.cursor_row
        after = [i for i in marks if (i > here if step > 0 else i < here)]
        target = (after[0] if step > 0 else after[-1]) if after else (marks[0] if step > 0 else marks[-1])
        table.move_cursor(row=target)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def _turn_differs(row: dict[str, Any]) -> bool:
    if "missing" in row:
        return True
    return not all(row[k] for k in ("history_same", "inputs_same", "tools_same", "reply_same"))


def _turn_why(row: dict[str, Any]) -> str:
    if "missing" in row:
        return f"the turn is missing in the {row['missing']} run"
    changed = [k for k in ("history", "inputs", "tools", "reply") if not row[f"{k}_same"]]
    return "different " + ", ".join(changed)


def _event_text(event: dict[str, Any]) -> str:
    for key in ("content", "text", "summary"):
        value = event.get(key)
        if isinstance(value, str):
            return " ".join(value.split())[:100]
    parts = event.get("parts")
    if isinstance(parts, list) and parts:
        first = parts[0]
        if isinstance(first, dict):
            return _event_text(first)
    return json.dumps(event, ensure_ascii=False, default=str)[:100]


__all__ = ["WIDE", "ReplayCompare"]

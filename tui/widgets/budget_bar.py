"""A token budget as a bar: system / history / tools / input against the model's context window.

``BudgetBar(budget, colors)`` is a Rich renderable sized to the width it is given: one line with the bar
and ``12.3k / 128k tokens (estimate)`` when both fit, else the bar on a line of its own and the figures
below it (ellipsized at the edge); then a legend of the parts, and at ``WARN_FRACTION`` of the window or
more a warning line. With no known window the bar shows the parts' shares and says ``window unknown``.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from ag2net.agent.budget import PARTS, WARN_FRACTION, TurnBudget, compact

BAR_MAX = 40
BAR_MIN = 8
FILLED = "█"
EMPTY = "░"
SHARES = "▒"

DEFAULT_COLORS = {
    "system": "yellow",
    "history": "blue",
    "tools": "cyan",
    "input": "green",
    "warning": "yellow",
    "error": "red",
}


def segments(budget: TurnBudget, width: int) -> list[tuple[str, int]]:
    """(part, cells) for each part and ``empty`` for the rest of the bar; the cells add up to ``width``.

    Scaled to the window (to the total when the window is unknown or exceeded)."""
    total = budget.total
    window = budget.window.tokens
    scale = max(window or 0, total) or 1
    out: list[tuple[str, int]] = []
    running = 0
    placed = 0
    for part in PARTS:
        running += getattr(budget, part)
        edge = min(width, round(running / scale * width))
        out.append((part, edge - placed))
        placed = edge
    out.append(("empty", width - placed))
    return out


class BudgetBar:
    """The budget of one turn, drawn to fit the width Rich offers."""

    def __init__(
        self, budget: TurnBudget, colors: dict[str, str] | None = None, *, title: str = "budget"
    ) -> None:
        self.budget = budget
        self.colors = {**DEFAULT_COLORS, **(colors or {})}
        self.title = title

    def bar(self, width: int) -> Text:
        """The parts against the window; with no known window, their shares drawn shaded (not a fill)."""
        text = Text()
        glyph = FILLED if self.budget.window.tokens else SHARES
        for part, cells in segments(self.budget, width):
            if cells <= 0:
                continue
            if part == "empty":
                text.append(EMPTY * cells, style="dim")
            else:
                text.append(glyph * cells, style=self.colors[part])
        return text

    def figures(self) -> Text:
        budget = self.budget
        fraction = budget.fraction
        style = ""
        if budget.warning:
            style = f"bold {self.colors['error' if fraction is not None and fraction >= 1 else 'warning']}"
        text = Text(budget.summary(), style=style)
        if fraction is not None:
            text.append(f" · {fraction:.0%}", style=style or "dim")
        return text

    def legend(self) -> Text:
        text = Text()
        for i, part in enumerate(PARTS):
            if i:
                text.append("  ")
            text.append("■\u00a0", style=self.colors[part])  # no-break spaces: an entry never splits
            text.append(f"{part}\u00a0{compact(getattr(self.budget, part))}", style="dim")
        return text

    def warning(self) -> Text | None:
        budget = self.budget
        fraction = budget.fraction
        if not budget.warning or fraction is None:
            return None
        if fraction >= 1:
            return Text(
                f"⚠ over the context window ({fraction:.0%} of {compact(budget.window.tokens or 0)}): "
                "the model cannot take this turn whole",
                style=f"bold {self.colors['error']}",
            )
        return Text(
            f"⚠ {fraction:.0%} of the context window (warning at {WARN_FRACTION:.0%}): little room is left "
            "for the reply",
            style=f"bold {self.colors['warning']}",
        )

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        head = Text(f"{self.title} ", style="dim")
        figures = self.figures()
        room = width - head.cell_len - 1 - figures.cell_len
        line = head.copy()
        if room >= BAR_MIN:
            line.append_text(self.bar(min(BAR_MAX, room)))
            line.append(" ")
            line.append_text(figures)
            yield line
        else:
            line.append_text(self.bar(max(1, min(BAR_MAX, width - head.cell_len))))
            yield line
            figures.overflow = "ellipsis"
            figures.no_wrap = True
            yield figures
        yield self.legend()
        warning = self.warning()
        if warning is not None:
            yield warning


__all__ = ["BAR_MAX", "BudgetBar", "segments"]

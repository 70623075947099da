"""The visibility matrix of one channel: envelopes (rows) by participants (columns), one glyph per cell
for what the hub delivered and what each participant's model gets of it (``ag2net.debug.visibility``).

The library computes one page at a time (``PAGE`` envelopes, or ``PAGE`` rows matching the filter); the
cursor moves cell by cell and Enter explains the cell: delivered or why not, and the role and text the
participant's model reads. ``v`` cycles a preview view (the glyphs then show that view's projection), ``/``
filters rows with the tail's query language, ``[`` / ``]`` page, Escape closes.

It needs the embedded hub: the library runs the hub's own dispatch and views in process.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.coordinate import Coordinate
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label, Static

from ag2net.envelope import Envelope
from ag2net.filtering import FilterError, FilterSpec
from ag2net.views import registered_views
from ag2net.views.wal import WalLog
from tui.formatting import event_family, preview, short_type
from tui.wording import plural

if TYPE_CHECKING:  # ag2net.debug loads the hub: imported when the matrix is asked for (issue 28)
    from ag2net.debug import Cell, VisibilityMatrix

PAGE = 50
"""Envelopes per page (with a filter: matching envelopes per page, over at most ``SPAN`` seqs)."""

SPAN = 1000
"""The most seqs one filtered page covers (the library computes every row of its range)."""

FIXED = 3
"""Columns before the participants: seq, sender, text."""

GLYPHS: dict[str, tuple[str, str, str]] = {
    # key: (glyph, style, legend)
    "user": ("●", "bold green", "shown as user"),
    "assistant": ("◆", "bold cyan", "own, shown as assistant"),
    "elided": ("◐", "yellow", "elided by the view"),
    "delivered": ("○", "", "delivered, renders to nothing"),
    "own": ("·", "dim", "own event"),
    "excluded": ("✕", "red", "excluded"),
    "absent": ("–", "dim", "not a participant now"),
}

REASONS = {
    "delivered": "delivered",
    "sender": "not delivered: its own envelope (a sender is not sent what it posts)",
    "audience": "not delivered: not in the envelope's audience",
    "not_yet_participant": "not delivered: it joined the channel after this envelope",
    "left": "not delivered: no longer a participant (left, or no longer registered)",
    "inbound_from": "not delivered: its inbound rule refuses the sender",
    "arbiter": "not delivered: the channel's arbiter refused it",
}

PROJECTED = {
    "elided": "left out by the view (a window's summary counts it)",
    "hidden": "not visible to it (audience)",
    "not_rendered": "the adapter renders this event to nothing",
    "not_a_participant": "not a participant now: no projection",
}

NEEDS_HUB = "The visibility matrix needs the embedded hub (run ag2net tui without --connect)."


def glyph_key(projected: str | None, role: str | None, cell: Cell) -> str:
    """Which glyph a cell shows for a projection outcome (``projected``/``role``: in force or preview)."""
    if projected == "shown":
        return "assistant" if role == "assistant" else "user"
    if projected == "elided":
        return "elided"
    if projected == "not_a_participant":
        return "absent"
    if projected == "not_rendered":
        return "delivered" if cell.delivered else "own" if cell.reason == "sender" else "excluded"
    return "excluded"


def legend() -> Text:
    text = Text()
    for glyph, style, words in GLYPHS.values():
        if text:
            text.append("  ")
        text.append(glyph, style or None)
        text.append(f" {words}")
    return text


def view_words(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "?"
    params = ", ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec.get('name')}({params})" if params else str(spec.get("name"))


class VisibilityMatrixScreen(ModalScreen[None]):
    """The matrix for ``channel_id`` of ``hub``; starts on the page holding ``seq`` (default: the last)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close", id="matrix.close", tooltip="Back to the workbench"),
        Binding(
            "enter", "explain", "Explain", id="matrix.explain", tooltip="Explain the cell under the cursor"
        ),
        Binding(
            "v", "cycle_view", "Preview view", id="matrix.view", tooltip="Show the glyphs under another view"
        ),
        Binding("slash", "filter", "Filter", id="matrix.filter", tooltip="Filter rows like the tail"),
        Binding("left_square_bracket", "page(-1)", "Prev page", id="matrix.page_prev"),
        Binding("right_square_bracket", "page(1)", "Next page", id="matrix.page_next"),
    ]

    DEFAULT_CSS = """
    VisibilityMatrixScreen {
        background: $surface;
        & #vm-title { width: 1fr; height: 1; padding: 0 1; background: $panel; text-style: bold; }
        & #vm-controls { height: 1; }
        & #vm-controls > Label { width: auto; padding: 0 1; color: $text-muted; }
        & #vm-view { width: auto; min-width: 16; padding: 0 1; color: $text-accent; }
        & #vm-filter { width: 1fr; }
        & #vm-filter.-error { color: $text-error; }
        & #vm-table { height: 1fr; }
        & #vm-explain { height: auto; max-height: 9; padding: 0 1; background: $boost; display: none; }
        & #vm-explain.-open { display: block; }
        & #vm-status { height: 1; padding: 0 1; color: $text-muted; }
        & #vm-legend { height: auto; padding: 0 1; }
    }
    """

    def __init__(
        self,
        hub: Any,
        channel_id: str,
        label: str,
        name_for: Callable[[str], str],
        *,
        seq: int | None = None,
        channels: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__()
        self.hub = hub
        self.channel_id = channel_id
        self.label = label
        self.name_for = name_for
        self.start_seq = seq
        self.channels = channels or []
        self.views: list[str | None] = [None, *registered_views()]
        self.preview: str | None = None
        self.spec = FilterSpec()
        self.matrix: VisibilityMatrix | None = None
        self.envelopes: WalLog | list[Envelope] = []
        self.pages: list[tuple[int, int]] = []
        """``(first_seq, last_seq)`` of every page (with a filter: ranges holding matching rows)."""
        self.shown: list[int] = []
        """The seqs of the rows in the table, in order."""
        self.page = 0
        self.elapsed_ms = 0.0
        """How long the library took for the page on screen."""

    def compose(self) -> ComposeResult:
        yield Static(f"Visibility · {escape(self.label)}", id="vm-title")
        with Horizontal(id="vm-controls"):
            yield Label("preview view")
            yield Label("in force", id="vm-view")
            yield Input(placeholder="/ filter: sender:planner text:words", id="vm-filter", compact=True)
        table: DataTable[Any] = DataTable(id="vm-table", cursor_type="cell", zebra_stripes=True)
        yield table
        yield Static(id="vm-explain")
        yield Static(id="vm-status")
        yield Static(legend(), id="vm-legend")
        yield Footer()

    @property
    def table(self) -> DataTable[Any]:
        return self.query_one("#vm-table", DataTable)

    def on_mount(self) -> None:
        self.table.focus()
        self._load(self.start_seq)

    # ------------------------------------------------------------------ computing a page

    @work(exclusive=True, group="matrix")
    async def _load(self, seq: int | None = None, *, keep: Coordinate | None = None) -> None:
        from ag2net.debug import visibility
        from ag2net.hub.dry_run import channel_log

        log = await channel_log(self.hub, self.channel_id)
        self.envelopes = log
        self.pages = self._paginate()
        if seq is not None:
            self.page = next((i for i, (a, b) in enumerate(self.pages) if a <= seq <= b), len(self.pages) - 1)
        self.page = min(max(self.page, 0), max(0, len(self.pages) - 1))
        if not self.pages:
            self.matrix = None
            self.shown = []
            self._fill(None, seq, keep)
            return
        first, last = self.pages[self.page]
        started = time.perf_counter()
        matrix = await visibility(
            self.hub, self.channel_id, first_seq=first, last_seq=last, preview_view=self.preview
        )
        self.elapsed_ms = (time.perf_counter() - started) * 1000
        self.matrix = matrix
        self.shown = [row.seq for row in matrix.rows if self._passes(row.seq)]
        self._fill(matrix, seq, keep)

    def _passes(self, seq: int) -> bool:
        return self.spec.empty or self.spec.matches(self.envelopes[seq - 1], self.name_for, seq)

    def _paginate(self) -> list[tuple[int, int]]:
        n = len(self.envelopes)
        if self.spec.empty:
            return [(a, min(n, a + PAGE - 1)) for a in range(1, n + 1, PAGE)]
        pages: list[tuple[int, int]] = []
        first = last = count = 0
        for seq in range(1, n + 1):
            if not self._passes(seq):
                continue
            if count and (count >= PAGE or seq - first >= SPAN):
                pages.append((first, last))
                count = 0
            if not count:
                first = seq
            last = seq
            count += 1
        if count:
            pages.append((first, last))
        return pages

    def _fill(self, matrix: VisibilityMatrix | None, seq: int | None, keep: Coordinate | None) -> None:
        table = self.table
        table.clear(columns=True)
        table.add_column("seq", key="seq")
        table.add_column("sender", key="sender")
        table.add_column("text", key="text", width=self._text_width(matrix))
        if matrix is not None:
            for pid in matrix.participants:
                table.add_column(self.name_for(pid)[:12], key=pid)
            shown = set(self.shown)
            for row in matrix.rows:
                if row.seq not in shown:
                    continue
                env = self.envelopes[row.seq - 1]
                cells: list[Any] = [
                    Text(str(row.seq), style="dim", justify="right"),
                    Text(self.name_for(row.sender_id)[:12], style="bold"),
                    Text(self.short_text(env), no_wrap=True, overflow="ellipsis"),
                ]
                for pid in matrix.participants:
                    cell = row.cells[pid]
                    key = self._glyph(cell)
                    glyph, style, _ = GLYPHS[key]
                    cells.append(Text(glyph, style=style or "", justify="center"))
                table.add_row(*cells, key=str(row.seq))
        if keep is not None and table.row_count:
            table.cursor_coordinate = Coordinate(min(keep.row, table.row_count - 1), keep.column)
        elif table.row_count:
            row_index = self.shown.index(seq) if seq in self.shown else table.row_count - 1
            table.cursor_coordinate = Coordinate(row_index, FIXED if len(table.columns) > FIXED else 0)
        self._status()
        self._explain_if_open()
        self.refresh_bindings()

    @staticmethod
    def short_text(env: Envelope) -> str:
        """A text or packet's words; any other event's short type."""
        if event_family(env.event_type) in ("text", "packet"):
            return preview(env, 60)
        return short_type(env.event_type)

    def _text_width(self, matrix: VisibilityMatrix | None) -> int:
        columns = len(matrix.participants) if matrix is not None else 0
        names = sum(
            min(12, max(3, len(self.name_for(p)))) + 2 for p in (matrix.participants if matrix else [])
        )
        room = self.size.width - 6 - 14 - names - 4
        return max(12, min(60, room)) if columns else 40

    def _glyph(self, cell: Cell) -> str:
        if self.preview is not None and cell.preview is not None:
            return glyph_key(cell.preview, cell.preview_role, cell)
        return glyph_key(cell.projected, cell.role, cell)

    def _status(self) -> None:
        n = len(self.envelopes)
        status = self.query_one("#vm-status", Static)
        if not self.pages:
            status.update("no envelope matches the filter" if n else "the channel has no envelope yet")
            return
        first, last = self.pages[self.page]
        parts = [
            f"seq {first}–{last} of {n}",
            f"page {self.page + 1}/{len(self.pages)}",
            plural(len(self.shown), "row"),
            f"{self.elapsed_ms:.0f} ms",
            "enter explains a cell",
        ]
        if not self.spec.empty:
            parts.insert(2, f"filter {self.spec.query}")
        status.update(" · ".join(parts))

    # ------------------------------------------------------------------ explanation

    def cell_at(self, coordinate: Coordinate) -> tuple[int, str | None] | None:
        """``(seq, participant id)`` under ``coordinate`` (participant None on the seq/sender/text columns)."""
        if self.matrix is None or not 0 <= coordinate.row < len(self.shown):
            return None
        seq = self.shown[coordinate.row]
        column = coordinate.column - FIXED
        pid = self.matrix.participants[column] if 0 <= column < len(self.matrix.participants) else None
        return seq, pid

    def explanation(self, coordinate: Coordinate) -> str:
        """Markup explaining the cell under ``coordinate``."""
        found = self.cell_at(coordinate)
        if found is None or self.matrix is None:
            return "No cell here."
        seq, pid = found
        env = self.envelopes[seq - 1]
        sender = self.name_for(env.sender_id)
        audience = (
            ", ".join(self.name_for(a) for a in env.audience) if env.audience is not None else "everyone"
        )
        head = f"[b]#{seq}[/] {escape(sender)} · {escape(env.event_type)} · to {escape(audience)}"
        if pid is None:
            return f"{head}\n{escape(preview(env, 200))}\n[dim]{env.envelope_id} · {env.created_at}[/]"
        cell = self.matrix.cell(seq, pid)
        name = self.name_for(pid)
        lines = [f"{head} → [b]{escape(name)}[/]"]
        lines.append(
            ("[green]" if cell.delivered else "[red]") + escape(REASONS.get(cell.reason, cell.reason)) + "[/]"
        )
        view = view_words(self.matrix.views.get(pid))
        lines.append(f"in force ({escape(view)}): " + self._projection(cell.projected, cell.role, cell.text))
        if self.matrix.preview_view is not None and cell.preview is not None:
            pv = view_words(self.matrix.preview_view)
            lines.append(
                f"preview ({escape(pv)}): "
                + self._projection(cell.preview, cell.preview_role, cell.preview_text)
            )
        return "\n".join(lines)

    @staticmethod
    def _projection(projected: str, role: str | None, text: str | None) -> str:
        if projected == "shown":
            body = (text or "").strip().replace("\n", " ")
            if len(body) > 160:
                body = body[:159] + "…"
            return f"shown as [b]{role}[/]: {escape(body)}"
        return escape(PROJECTED.get(projected, projected))

    def _explain_if_open(self) -> None:
        box = self.query_one("#vm-explain", Static)
        if box.has_class("-open"):
            box.update(self.explanation(self.table.cursor_coordinate))

    def action_explain(self) -> None:
        box = self.query_one("#vm-explain", Static)
        if box.has_class("-open"):
            box.remove_class("-open")
        else:
            box.add_class("-open")
            self._explain_if_open()

    @on(DataTable.CellSelected, "#vm-table")
    def _cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        self.action_explain()

    @on(DataTable.CellHighlighted, "#vm-table")
    def _cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        self._explain_if_open()

    # ------------------------------------------------------------------ view, filter, pages

    def action_cycle_view(self) -> None:
        at = self.views.index(self.preview) if self.preview in self.views else 0
        self.set_preview(self.views[(at + 1) % len(self.views)])

    def set_preview(self, name: str | None) -> None:
        """Show the glyphs under the view ``name`` (None: each participant's view in force)."""
        self.preview = name
        self.query_one("#vm-view", Label).update(name or "in force")
        self._load(keep=self.table.cursor_coordinate)

    def action_filter(self) -> None:
        self.query_one("#vm-filter", Input).focus()

    @on(Input.Submitted, "#vm-filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        box = event.input
        try:
            self.set_filter(event.value)
        except FilterError as exc:
            box.add_class("-error")
            self.notify(str(exc), severity="error", timeout=6)
            return
        box.remove_class("-error")
        self.table.focus()

    def set_filter(self, query: str) -> None:
        """Show only rows matching ``query`` (the tail's language; raises ``FilterError``)."""
        self.spec = FilterSpec.parse(query.strip(), self.channels)
        self.page = 0
        self._load()

    def action_page(self, delta: int) -> None:
        target = self.page + delta
        if 0 <= target < len(self.pages):
            self.page = target
            self._load()

    def action_close(self) -> None:
        if isinstance(self.focused, Input):
            self.table.focus()
            return
        self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "page":
            delta = parameters[0] if parameters else 0
            return 0 <= self.page + int(delta) < len(self.pages)  # type: ignore[arg-type]
        return True


__all__ = ["GLYPHS", "NEEDS_HUB", "PAGE", "VisibilityMatrixScreen", "glyph_key"]

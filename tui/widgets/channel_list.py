"""The channels pane: every channel with type, state, participants, envelope count and last activity.

Filter with the box above the table, cycle the sort with ``o``; Enter announces ``ChannelList.Selected``
(the first row, *all channels*, clears the selection).
"""

from __future__ import annotations

from collections.abc import Iterable
from time import monotonic
from typing import TYPE_CHECKING, Any, ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Input, Label
from textual.widgets.data_table import RowKey

from ag2net.naming import ChannelRefError, channel_labels, resolve_channel_ref
from tui.formatting import short_time
from tui.models import ChannelRow
from tui.widgets.quiet_label import QuietLabel
from tui.wording import plural

if TYPE_CHECKING:
    from typing import Self


ALL_KEY = "__all__"
SORTS: tuple[str, ...] = ("activity", "type", "state", "envelopes")
STATE_ORDER = {"active": 0, "pending": 1, "closed": 2, "expired": 3}
SORT_MARKS: dict[str, tuple[str, str, str]] = {
    # sort: (column key, the header of that column, the mark: ▲ ascending, ▼ descending)
    "activity": ("state", "last", "▼"),
    "type": ("channel", "channel", "▲"),
    "state": ("state", "state", "▲"),
    "envelopes": ("env", "env", "▼"),
}
HEADERS = {"channel": "channel", "state": "state", "env": "env"}
STATE_WIDTH = 8
"""The state column: a state (``pending``) over the last activity's time (``22:37:02``)."""
MIN_CHANNEL_WIDTH = 20
"""The channel column is never narrower than this (the table scrolls sideways in a narrower pane)."""
FIGURES_INTERVAL = 1.0
"""Under a stream of envelopes, the table shows new counts and re-sorts at most this often (seconds):
each repaint of the table also repaints most of the screen, as the dirty regions of one frame are
painted as their bounding box (the list at the left, the tail, the status bar at the bottom)."""


class ChannelTable(DataTable[Text]):
    """The channels' table: figures that change on every batch are updated row by row.

    Its keys are the ones that mean something on a table of rows: up/down, page up/down, Home/End (the
    first and last row) and Enter; DataTable's column and sideways-scroll keys are hidden (``check_action``)
    so that help and the footer list only these.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Select channel", show=False, id="channels.select"),
        Binding("up", "cursor_up", "Previous channel", show=False, id="channels.up"),
        Binding("down", "cursor_down", "Next channel", show=False, id="channels.down"),
        Binding("pageup", "page_up", "Page up", show=False, id="channels.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="channels.page_down"),
        Binding("home", "first_row", "First row", show=False, id="channels.first"),
        Binding("end", "last_row", "Last row", show=False, id="channels.last"),
    ]
    HIDDEN_ACTIONS = frozenset(
        {
            "cursor_left",
            "cursor_right",
            "scroll_home",
            "scroll_end",
            "scroll_top",
            "scroll_bottom",
            "page_left",
            "page_right",
            "scroll_left",
            "scroll_right",
        }
    )
    """DataTable's (and its scroll container's) actions that mean nothing here: one column of rows."""

    _rows_only = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rows_repainted = 0
        """Rows repainted by ``update_rows`` (a figure for tests and benchmarks)."""

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._rows_only and not regions and not layout and not recompose:
            return self  # update_rows repaints the rows it changed
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.HIDDEN_ACTIONS:
            return False
        return super().check_action(action, parameters)

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0, animate=False)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def on_resize(self) -> None:
        parent = self.parent
        while parent is not None and not isinstance(parent, ChannelList):
            parent = parent.parent
        if isinstance(parent, ChannelList):
            parent.refit()

    def update_rows(self, updates: dict[str, dict[str, Text]]) -> bool:
        """Set cells (``{row key: {column key: value}}``) and repaint only their rows (``update_cell``
        repaints the whole table). False, changing nothing, when a value is wider than its column."""
        columns = {str(key.value): column for key, column in self.columns.items()}
        for cells in updates.values():
            for column_key, value in cells.items():
                column = columns[column_key]
                width = max(cell_len(line) for line in value.plain.split("\n"))
                if width > (column.content_width if column.auto_width else column.width):
                    return False
        self._rows_only = True
        try:
            for row_key, cells in updates.items():
                for column_key, value in cells.items():
                    self.update_cell(row_key, column_key, value)
        finally:
            self._rows_only = False
        for row_key in updates:
            self.refresh_row(self.get_row_index(row_key))
            self.rows_repainted += 1
        return True


class ChannelList(Vertical):
    """Channels as a table; posts ``ChannelList.Selected`` when one is chosen."""

    HELP = """\
## Channels

Every channel the hub knows, with its state, participants, WAL size and last activity.

- **Enter** selects a channel: the WAL tail and the agent view follow it. The first row,
  *all channels*, shows everything again.
- **Home** / **End** go to the first / last row.
- Type in the filter box (**ctrl+f**) to narrow by type, state, participant, label
  (`discussion·7d80`, or `discussion.7d80`, in any case) or id; **Escape** clears the filter.
  **o** cycles the sort (activity, type, state, envelopes); the header marks the sorted column
  (▲ ascending, ▼ descending).
- **ctrl+o** opens a new channel, **ctrl+w** closes the selected one (from the command palette too).
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("o", "cycle_sort", "Sort", id="channels.sort", tooltip="Cycle the sort order"),
        Binding(
            "E",
            "app.evaluate",
            "Evaluate",
            id="channels.evaluate",
            tooltip="Evaluate a change across channels",
        ),
        Binding(  # priority: the keys typed right after it go to the filter box, not to the table
            "ctrl+f", "focus_filter", "Filter", id="channels.filter", tooltip="Filter channels", priority=True
        ),
        Binding(
            "escape",
            "clear_filter",
            "Clear filter",
            id="channels.clear_filter",
            tooltip="Clear the channel filter and go back to the table",
        ),
    ]

    DEFAULT_CSS = """
    ChannelList {
        height: 1fr;
        & #channels-filter { margin: 0; }
        & #channels-filter-status { width: 1fr; height: auto; padding: 0 1; color: $text-warning; }
        & #channels-filter-status.-empty { display: none; }
        & DataTable { height: 1fr; background: $surface; }
    }
    """

    sort_by: reactive[str] = reactive("activity")
    selected_channel: reactive[str | None] = reactive(None)

    class Selected(Message):
        """A channel was chosen (``channel_id`` None: all channels)."""

        def __init__(self, channel_list: ChannelList, channel_id: str | None, row: ChannelRow | None) -> None:
            super().__init__()
            self.channel_list = channel_list
            self.channel_id = channel_id
            self.row = row

        @property
        def control(self) -> ChannelList:
            return self.channel_list

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._rows: dict[str, ChannelRow] = {}
        self._labels: dict[str, str] = {}
        self._stale: set[str] = set()
        """Channels whose figures changed since the table last showed them."""
        self._figures_shown = -FIGURES_INTERVAL
        self._figures_due = False
        self._figures_asked = 0.0
        self._fitted_width: int | None = None

    def compose(self) -> ComposeResult:
        yield Input(placeholder="filter channels… (ctrl+f)", compact=True, id="channels-filter")
        yield QuietLabel("", id="channels-filter-status", classes="-empty")
        table = ChannelTable(cursor_type="row", zebra_stripes=True, id="channels-table")
        for key in HEADERS:
            table.add_column(self._header(key), key=key)
        yield table

    @property
    def table(self) -> ChannelTable:
        return self.query_one("#channels-table", ChannelTable)

    @property
    def rows(self) -> dict[str, ChannelRow]:
        return dict(self._rows)

    def get_row(self, channel_id: str) -> ChannelRow | None:
        return self._rows.get(channel_id)

    def shown_ids(self) -> list[str]:
        """Channel ids in display order (without the *all channels* row); the filter applies."""
        return [str(key.value) for key in self.table.rows if key.value != ALL_KEY]

    def all_ids(self) -> list[str]:
        """Every channel id in the sort order, whatever the filter hides (the composer's picker)."""
        return [row.channel_id for row in self._sorted(filtered=False)]

    def label_of(self, channel_id: str) -> str:
        """The channel's label in this list (unique among the channels listed)."""
        row = self._rows.get(channel_id)
        return self._labels.get(channel_id) or (row.label if row is not None else channel_id)

    @property
    def filter_input(self) -> Input:
        return self.query_one("#channels-filter", Input)

    @property
    def filter_query(self) -> str:
        return self.query_one("#channels-filter", Input).value.strip()

    @property
    def filter_status(self) -> str:
        """What the filter line says ('' when nothing is filtered)."""
        label = self.query_one("#channels-filter-status", Label)
        return "" if label.has_class("-empty") else str(label.render())

    # ------------------------------------------------------------------ updates

    def set_channels(self, rows: Iterable[ChannelRow]) -> None:
        old = self._rows
        self._rows = {r.channel_id: r for r in rows}
        for row in self._rows.values():  # a fresh read carries no cost: keep the one shown
            if not row.cost and row.channel_id in old:
                row.cost = old[row.channel_id].cost
        self._relabel()
        self._rebuild()

    def set_costs(self, costs: dict[str, str]) -> None:
        """What each channel's turns cost (priced from ``HubSource.recent_turn_records`` once the workbench is ready), shown after its participants."""
        changed = False
        for channel_id, cost in costs.items():
            row = self._rows.get(channel_id)
            if row is not None and row.cost != cost:
                row.cost, changed = cost, True
        if changed:
            self._rebuild()

    def upsert(self, row: ChannelRow) -> None:
        """Add or replace one channel (keeps its count when the new row has none)."""
        old = self._rows.get(row.channel_id)
        if old is not None and not row.count:
            row.count = old.count
            row.last_activity = row.last_activity or old.last_activity
        if old is not None and not row.cost:
            row.cost = old.cost
        self._rows[row.channel_id] = row
        if old is None:
            self._relabel()
        self._rebuild()

    def bump(self, activity: dict[str, tuple[int, str]]) -> None:
        """Add envelope counts and set last activity for several channels at once.

        The figures (``rows``) change at once; the table shows them in the frame after the next one
        (not in the frame that shows the batch's rows in the tail: one frame repaints the bounding box
        of its dirty regions, which from this list to the tail is most of the screen), and under a
        stream of batches at most once per ``FIGURES_INTERVAL``. Only the rows whose figures changed
        are repainted; the table is rebuilt only when the sort order changes or a figure no longer fits
        its column.
        """
        for channel_id, (delta, last) in activity.items():
            row = self._rows.get(channel_id)
            if row is None:
                continue
            row.count += delta
            row.last_activity = max(row.last_activity, last)
            self._stale.add(channel_id)
        if not self._stale or not self.is_mounted:
            return
        now = monotonic()
        if self._figures_due and now - self._figures_asked < 3 * FIGURES_INTERVAL:
            return  # asked for, and not lost (a screen torn down before it refreshed drops the callback)
        self._figures_due = True
        self._figures_asked = now
        wait = self._figures_shown + FIGURES_INTERVAL - now
        if wait > 0:
            self.set_timer(wait, self._figures_after_frame, name="channel figures")
        else:
            self._figures_after_frame()

    def _figures_after_frame(self) -> None:
        self.call_after_refresh(self._show_figures)

    def _show_figures(self) -> None:
        """Show the figures of the channels bumped since they were last shown."""
        self._figures_due = False
        self._figures_shown = monotonic()
        if not self.is_mounted:
            return
        stale, self._stale = self._stale, set()
        if not stale:
            return
        if self._order_changed() or not self._update_in_place(stale):
            self._rebuild()

    def _order_changed(self) -> bool:
        """Whether the sort (or the filter) would list the rows in another order than shown."""
        return [row.channel_id for row in self._sorted()] != self.shown_ids()

    def _update_in_place(self, channel_ids: set[str]) -> bool:
        """Show the new figures of ``channel_ids`` (and the total) without rebuilding the table; False
        when a figure is wider than its column (the table must be rebuilt to widen it)."""
        table = self.table
        shown = set(self.shown_ids())
        updates: dict[str, dict[str, Text]] = {}
        for channel_id in channel_ids & shown:
            state, count = self._figures(self._rows[channel_id])
            updates[channel_id] = {"state": state, "env": count}
        if not updates:
            return True
        total = sum(self._rows[cid].count for cid in shown)  # what the first row counts (filtered)
        updates[ALL_KEY] = {"env": Text(str(total), justify="right")}
        return table.update_rows(updates)

    def _figures(self, row: ChannelRow) -> tuple[Text, Text]:
        """The state cell (state, then last activity) and the envelope-count cell of ``row``."""
        state = self._state_text(row.state, row.close_reason)
        state.append("\n" + short_time(row.last_activity)[:8], style="dim")
        return state, Text(str(row.count), justify="right")

    def select(self, channel_id: str | None) -> None:
        """Select ``channel_id`` (None: all channels) as if the user pressed Enter on it."""
        key = channel_id or ALL_KEY
        table = self.table
        try:
            table.move_cursor(row=table.get_row_index(key))
        except Exception:  # filtered out of view: still select it
            pass
        self._announce(channel_id)

    # ------------------------------------------------------------------ actions and events

    def action_cycle_sort(self) -> None:
        self.sort_by = SORTS[(SORTS.index(self.sort_by) + 1) % len(SORTS)]
        self.notify(f"Channels sorted by {self.sort_by}.", timeout=2)

    def action_focus_filter(self) -> None:
        field = self.query_one("#channels-filter", Input)
        field.screen.set_focus(field)  # at once: the keys typed after ctrl+f are queued already

    def action_clear_filter(self) -> None:
        """Escape in the filter box or on a filtered table: every channel shows again, the table has the keys."""
        box = self.query_one("#channels-filter", Input)
        if box.value:
            box.value = ""
            self._rebuild()
        self.table.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "clear_filter":
            # Escape means something only in the filter box or while a filter hides channels; elsewhere
            # it falls through
            box = self.query_one("#channels-filter", Input)
            return box.has_focus or bool(box.value)
        return True

    def watch_sort_by(self) -> None:
        if self.is_mounted:
            self._rebuild()

    def sort_header(self) -> tuple[str, str]:
        """The column the sort marks and its header (``("env", "env ▼")``)."""
        column = SORT_MARKS[self.sort_by][0]
        return column, self._header(column)

    def _header(self, column: str) -> str:
        key, name, mark = SORT_MARKS[self.sort_by]
        return f"{name} {mark}" if key == column else HEADERS[column]

    @on(Input.Changed, "#channels-filter")
    def _filter_changed(self) -> None:
        self._rebuild()

    @on(Input.Submitted, "#channels-filter")
    def _filter_submitted(self) -> None:
        self.table.focus()

    @on(DataTable.RowSelected, "#channels-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        key = event.row_key.value
        self._announce(None if key == ALL_KEY else str(key))

    def _announce(self, channel_id: str | None) -> None:
        self.selected_channel = channel_id
        self.post_message(self.Selected(self, channel_id, self._rows.get(channel_id or "")))

    # ------------------------------------------------------------------ rendering

    def _matches(self, row: ChannelRow, query: str, resolved: str | None) -> bool:
        if row.channel_id == resolved:
            return True
        label = self._labels.get(row.channel_id, row.label).lower()
        words = query.lower().split()
        return row.matches(query) or (len(words) == 1 and words[0] in label)

    def _sorted(self, *, filtered: bool = True) -> list[ChannelRow]:
        query = self.query_one("#channels-filter", Input).value.strip() if filtered else ""
        if query:
            try:
                resolved: str | None = resolve_channel_ref(
                    query, ((r.type, r.channel_id) for r in self._rows.values())
                )
            except ChannelRefError:
                resolved = None
            rows = [r for r in self._rows.values() if self._matches(r, query, resolved)]
        else:
            rows = list(self._rows.values())
        key = self.sort_by
        if key == "activity":
            rows.sort(key=lambda r: r.last_activity, reverse=True)
        elif key == "type":
            rows.sort(key=lambda r: (r.type, r.last_activity))
        elif key == "state":
            rows.sort(key=lambda r: (STATE_ORDER.get(r.state, 9), r.type))
        else:
            rows.sort(key=lambda r: r.count, reverse=True)
        return rows

    def _relabel(self) -> None:
        self._labels = channel_labels((r.type, r.channel_id) for r in self._rows.values())

    def _state_text(self, state: str, reason: str) -> Text:
        colors = {
            "active": self._var("text-success", "green"),
            "pending": self._var("text-warning", "yellow"),
            "closed": self._var("text-muted", "grey50"),
            "expired": self._var("text-error", "red"),
        }
        text = Text(state, style=colors.get(state, ""))
        return text

    def _var(self, name: str, fallback: str) -> str:
        return self.app.theme_variables.get(name, fallback)

    def _rebuild(self) -> None:
        self._stale.clear()  # every row shows its figures as they are now
        table = self.table
        cursor_key: RowKey | None = None
        if table.row_count and table.cursor_row is not None and 0 <= table.cursor_row < table.row_count:
            cursor_key = table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key
        table.clear()
        shown = self._sorted()
        query = self.filter_query
        total = sum(r.count for r in shown)
        every = plural(len(self._rows), "channel")
        count = f"{len(shown)} of {every}" if query else every
        table.add_row(
            Text.assemble(("all channels", "bold"), "\n", (count, "dim")),
            Text(""),
            Text(str(total), justify="right"),
            key=ALL_KEY,
            height=2,
        )
        status = self.query_one("#channels-filter-status", QuietLabel)
        if not query:
            message = ""
        elif not shown:
            message = f"no channel matches {query!r} · esc leaves the filter"
        else:
            message = f"filtered by {query!r}: {len(shown)} of {every}"
        status.show(message)
        status.set_class(not message, "-empty")
        width = self._fit_columns(total, len(shown))
        for row in shown:
            who = ", ".join(row.participants)
            label = Text(
                self._labels.get(row.channel_id, row.label), style="bold" if row.state == "active" else ""
            )
            label.append("\n")
            if row.cost:  # what its turns cost, after the participants (who is cut first)
                width -= len(row.cost) + 3
            label.append(who if len(who) <= width else who[: max(0, width - 1)] + "…", style="dim")
            if row.cost:
                label.append(f" · {row.cost}", style="dim")
            state, count = self._figures(row)
            table.add_row(label, state, count, key=row.channel_id, height=2)
        if cursor_key is not None and cursor_key.value in {k.value for k in table.rows}:
            table.move_cursor(row=table.get_row_index(cursor_key), animate=False)

    def refit(self) -> None:
        """The table's width changed: the channel column takes what the others leave."""
        if self.is_mounted and self.table.size.width != self._fitted_width:
            self._rebuild()

    def _fit_columns(self, total: int, rows: int) -> int:
        """Set the columns' headers and widths for ``rows`` channels counting ``total`` envelopes: state
        and env as wide as their contents, the channel column the rest of the table's width (never less
        than ``MIN_CHANNEL_WIDTH``). Returns the channel column's width."""
        table = self.table
        self._fitted_width = table.size.width
        counts = [total, *(r.count for r in self._rows.values())]
        widths = {
            "state": max(STATE_WIDTH, cell_len(self._header("state"))),
            "env": max(max(len(str(n)) for n in counts), cell_len(self._header("env"))),
        }
        padding = 2 * table.cell_padding * len(HEADERS)
        height = 1 + 2 * (rows + 1)  # the header, then two lines a row (with *all channels*)
        scrollbar = table.styles.scrollbar_size_vertical if height > table.size.height else 0
        room = table.size.width - scrollbar - padding - widths["state"] - widths["env"]
        widths["channel"] = max(MIN_CHANNEL_WIDTH, room)
        for key, column in table.columns.items():
            name = str(key.value)
            column.label = Text(self._header(name))
            column.auto_width = False
            column.width = widths[name]
        table.refresh(layout=True)
        return widths["channel"]


__all__ = ["ChannelList", "ChannelRow"]

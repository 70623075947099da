"""The live WAL tail: a Line-API ``ScrollView`` over envelopes, with follow mode, filter, search and a cursor.

The rows, their index and the filters live in a ``TailModel`` (``tui/tail_model.py``), the lines' text in
``tail_lines.py``, the store reads in ``tail_reach.py`` and the repaint economy in ``tail_repaint.py``;
this widget owns what is on screen: the cursor, following, and the strips. No Rich work is done until a
row is on screen, where its strip is cached in an LRU keyed by the row's absolute index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive, var
from textual.strip import Strip

from ag2net.envelope import Envelope
from ag2net.filtering import FilterSpec
from tui.formatting import FAMILIES
from tui.models import TailRow
from tui.tail_model import DEFAULT_LIMIT, TailModel
from tui.widgets.tail_held import HeldLines, HeldRow
from tui.widgets.tail_keys import TAIL_BINDINGS, TAIL_COMPONENT_CLASSES, TAIL_CSS, TAIL_HELP
from tui.widgets.tail_lines import (
    Columns,
    ColumnWidths,
    Item,
    fit,
    header_text,
    newer_text,
    older_text,
    row_text,
    tail_summary,
)
from tui.widgets.tail_lines import fit_label as _fit_label  # noqa: F401  (tests reach them here)
from tui.widgets.tail_lines import fit_left as _fit_left  # noqa: F401
from tui.widgets.tail_lines import fit_type as _fit_type  # noqa: F401
from tui.widgets.tail_reach import TailPager, TailReach
from tui.widgets.tail_repaint import QuietRepaint

if TYPE_CHECKING:
    pass


class TailMessage(Message):
    """A message of one ``EnvelopeTail`` (its ``control``); a ``replaceable`` one still queued gives way
    to the next of its kind from the same tail (a flood of them collapses to the latest)."""

    replaceable = False

    def __init__(self, tail: EnvelopeTail) -> None:
        super().__init__()
        self.tail = tail

    @property
    def control(self) -> EnvelopeTail:
        return self.tail

    def can_replace(self, message: Message) -> bool:
        return self.replaceable and isinstance(message, type(self)) and message.tail is self.tail


class EnvelopeTail(HeldLines, TailReach, QuietRepaint, can_focus=True):
    """Every admitted envelope, newest at the bottom; follows the end until you scroll up."""

    HELP = TAIL_HELP
    BINDINGS: ClassVar[list[BindingType]] = TAIL_BINDINGS
    COMPONENT_CLASSES: ClassVar[set[str]] = TAIL_COMPONENT_CLASSES
    DEFAULT_CSS = TAIL_CSS

    following: var[bool] = var(True)
    """True while new rows scroll into view; False once the user moves away from the end."""
    pending_count: reactive[int] = reactive(0, repaint=False)
    """Rows that arrived (and pass the filter) while following was paused and are below the screen."""
    show_channel: reactive[bool] = reactive(True)
    """Show the channel column (hidden when the tail is filtered to one channel)."""

    class Selected(TailMessage):
        """The user opened the envelope under the cursor (Enter or double click)."""

        def __init__(self, tail: EnvelopeTail, row: TailRow) -> None:
            super().__init__(tail)
            self.envelope = row.envelope
            self.seq = row.seq
            self.channel_label = row.channel

    class FollowChanged(TailMessage):
        """Following started or stopped; ``pending`` is the count of rows that arrived meanwhile."""

        def __init__(self, tail: EnvelopeTail, following: bool, pending: int) -> None:
            super().__init__(tail)
            self.following = following
            self.pending = pending

    class QueryRequested(TailMessage):
        """The user asked for the query bar: ``mode`` is ``filter``, ``search`` or ``goto``."""

        def __init__(self, tail: EnvelopeTail, mode: str) -> None:
            super().__init__(tail)
            self.mode = mode

    class StateChanged(TailMessage):
        """Filter, search or channel filter changed (the status bar shows them)."""

        replaceable = True

    class ChannelRequested(TailMessage):
        """The ``:`` prompt named a channel (or a seq of a channel not shown): the tail shows that channel
        now; the app points the channel list, chat and agent view at it too."""

        def __init__(self, tail: EnvelopeTail, channel_id: str) -> None:
            super().__init__(tail)
            self.channel_id = channel_id

    class HeldOpened(TailMessage):
        """A held post's row was clicked (the app opens it in the inbox)."""

        def __init__(self, tail: EnvelopeTail, held: HeldRow) -> None:
            super().__init__(tail)
            self.held = held

    class CursorMoved(TailMessage):
        """The cursor went to another row (keys, click, search, go to, follow); read ``cursor_row``."""

        replaceable = True

    def __init__(
        self,
        name_for: Callable[[str], str] | None = None,
        *,
        limit: int = DEFAULT_LIMIT,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.model = TailModel(name_for, limit=limit)
        """The rows and their index; change them through this widget so the screen follows."""
        self._cursor: int | None = None
        self._strips: LRUCache[tuple[int, bool], Strip] = LRUCache(1024)
        self._styles: dict[str, Style] | None = None
        self._width = 0
        self._labels_version = 0
        self._mark = 0
        """Absolute index of the first row that arrived after following paused (or the view changed)."""
        self._subtitle = ""
        self._init_repaint()
        self.lines_repainted = 0
        """Screen lines marked for repaint by batches and cursor moves (a figure for tests and benchmarks:
        a paused tail repaints the header and the new rows on screen, not the screen)."""
        self._init_reach(limit)
        self._lead = 0
        """1 when the first virtual line is the "older envelopes" row."""
        self._trail = 0
        """1 when the last virtual line is the "newer envelopes" row (a window paged away from live)."""
        self._widths = ColumnWidths()
        self._init_held()

    # ------------------------------------------------------------------ public API

    @property
    def name_for(self) -> Callable[[str], str]:
        return self.model.name_for

    @property
    def limit(self) -> int:
        return self.model.limit

    @property
    def row_count(self) -> int:
        """Rows held (after the limit dropped the oldest), regardless of filters."""
        return self.model.row_count

    @property
    def visible_count(self) -> int:
        """Rows that pass the channel filter and the filter."""
        return self.model.visible_count

    @property
    def channel_filter(self) -> str | None:
        return self.model.channel_filter

    @property
    def filter_spec(self) -> FilterSpec:
        return self.model.filter_spec

    @property
    def search_spec(self) -> FilterSpec:
        return self.model.search_spec

    @property
    def cursor_row(self) -> TailRow | None:
        """The row under the cursor (the last visible row while following)."""
        index = self._cursor_abs()
        return None if index is None else self.model.row(index)

    def visible_rows(self) -> list[TailRow]:
        """The rows that pass the filters, oldest first (for tests and exports; O(rows))."""
        return self.model.visible_rows()

    def append(self, envelope: Envelope, seq: int | None = None, channel_label: str = "") -> None:
        """Add one envelope at the end."""
        self.append_many(((envelope, seq, channel_label),))

    def append_many(self, items: Iterable[tuple[Envelope, int | None, str]]) -> None:
        """Add envelopes at the end in one batch: one virtual-size update and one refresh.

        While paused (the rows on screen stay where they are), only what changed is repainted: the
        header, and the new rows that land on screen; the scrollbar only when its thumb moves."""
        model = self.model
        if self.paging == "newest":
            self._during_load.extend(items)
            return
        if model.scope is not None:
            scope = model.scope
            items = [item for item in items if item[0].channel_id == scope]
        if model.detached:
            # the window was paged away from live: these rows would leave a gap; they are counted and
            # read from the store when the reader comes back down
            arrived = sum(1 for env, _seq, _label in items if model.channel_filter in (None, env.channel_id))
            if arrived:
                if self.following:
                    self._set_following(False)
                self.pending_count += arrived
                self._after_change(repaint=False)
                self._refresh_lines(model.visible_count, model.visible_count + 1)
            return
        items = list(items)
        self._note_widths(items)
        before = model.row_count + model.base
        base = model.base
        first_line = model.visible_count
        added = model.append(items)
        if model.row_count + model.base == before:
            return
        if self._cursor is not None and self._cursor < model.base:
            self._cursor = model.index_at(0) if self.visible_count else None
        if self.following or model.base != base:
            self._after_change()  # the rows on screen move: repaint them all
        else:
            self._after_change(repaint=False)
            self._refresh_lines(first_line, model.visible_count)
        if self.following:
            self._scroll_to_end()
        elif added:
            self._count_pending()

    def prepend_many(self, items: Iterable[tuple[Envelope, int | None, str]]) -> int:
        """Add older envelopes before the first row (history loading); returns how many were kept.

        Never pushes newer rows out: when the limit is reached the oldest of ``items`` are dropped.
        The view does not move (a paused reader keeps looking at the same rows).
        """
        if self._paged:
            return 0  # the reader pages the window itself now (history would land in another window)
        items = list(items)
        self._note_widths(items)
        duplicates = self.model.duplicates
        kept = self._prepend(items, evict=False)
        return kept + self.model.duplicates - duplicates

    def _prepend(self, items: Sequence[Item], *, evict: bool) -> int:
        kept, shown = self.model.prepend(items, evict=evict)
        if not kept:
            self._after_change()
            return 0
        if self._cursor is not None and self._cursor >= self.model.base + self.model.row_count:
            self._cursor = self.model.index_at(self.visible_count - 1) if self.visible_count else None
        self._after_change()
        if self.following:
            self._scroll_to_end()
        elif shown:
            self.scroll_to(y=self.scroll_y + shown, animate=False, immediate=True, force=True)
        return kept

    def clear(self) -> None:
        """Forget every row (filters stay)."""
        self._generation += 1
        self.model.clear()
        self._cursor = None
        self._strips.clear()
        self._mark = self.model.base
        self.pending_count = 0
        self._after_change()

    def set_channel_filter(self, channel_id: str | None, *, load: bool = True) -> None:
        """Show only one channel's envelopes (None: every channel).

        A window paged within one channel holds no other: showing another (or all) reads the newest page
        of what is shown now from the store (``load=False``: the caller reads another page)."""
        keep = self._cursor_abs()
        if not self.model.set_channel_filter(channel_id):
            return
        self.show_channel = channel_id is None
        scope = self.model.scope
        if scope is not None and scope != channel_id:
            self._cursor = None
            self._generation += 1
            self.model.reset(channel_id, detached=False)
            self._set_following(True)
            self._view_changed(None)
            if load:
                self._load_newest()
            return
        self._view_changed(keep)

    def set_filter(self, spec: FilterSpec | str | None) -> None:
        """Show only rows matching ``spec`` (a ``FilterSpec`` or a query string; raises ``FilterError``)."""
        keep = self._cursor_abs()
        self.model.set_filter(spec)
        self._view_changed(keep)

    def set_search(self, spec: FilterSpec | str | None) -> bool:
        """Mark rows matching ``spec`` and move to the next match after the cursor; False when none matches."""
        self.model.set_search(spec)
        self._strips.clear()
        self.refresh()
        self.post_message(self.StateChanged(self))
        if self.model.search_spec.empty:
            return True
        if not self.model.matches:
            if self._can_page("older"):
                self._search_pages(forward=False)
                return True
            return False
        line = self._cursor_line()
        found = self.model.find_match(line if line is not None else -1, forward=True, inclusive=True)
        if found is None:
            found = self.model.find_match(-1, forward=True, inclusive=False)
        if found is not None:
            self._move_cursor_to_line(found)
            return True
        return False

    def search_next(self) -> bool:
        """Move the cursor to the next search match (wrapping); False when nothing matches."""
        return self._step_search(forward=True)

    def search_prev(self) -> bool:
        """Move the cursor to the previous search match (wrapping); False when nothing matches."""
        return self._step_search(forward=False)

    def goto_envelope(self, envelope_id: str) -> bool:
        """Move the cursor to the visible row of ``envelope_id``; False when it is not shown."""
        line = self.model.line_of_envelope(envelope_id)
        if line is None:
            return False
        self._move_cursor_to_line(line)
        return True

    def recent_rows(self, channel_id: str, limit: int = 25) -> list[TailRow]:
        """The newest held rows of ``channel_id`` (filters ignored), newest first."""
        return self.model.recent_rows(channel_id, limit)

    def find_envelope(self, envelope_id: str) -> TailRow | None:
        """Any held row (filtered or not) carrying ``envelope_id``."""
        return self.model.find_envelope(envelope_id)

    def follow(self) -> None:
        """Resume following: cursor to the last row, pending count reset (a window paged away from live
        reads the newest page first)."""
        if self.model.detached and self.pager is not None:
            self._load_newest(follow=True)
            return
        self._cursor = None
        self._set_following(True)
        self._scroll_to_end()
        self._strips.clear()
        self.refresh()
        self._announce_cursor()

    def pause(self) -> None:
        """Stop following, leaving the cursor where it is."""
        if self.following:
            self._cursor = self._cursor_abs()
            self._set_following(False)

    @property
    def match_position(self) -> tuple[int, int]:
        """(k, n): the cursor is on the k-th of n search matches shown (k 0 when not on a match)."""
        return self.model.match_position(self._cursor_abs())

    @property
    def summary(self) -> str:
        """What the header's right end says: rows shown (of held), search position, rows below."""
        model = self.model
        return tail_summary(
            model,
            pending=0 if self.following else self.pending_count,
            match=(0, 0) if model.search_spec.empty else self.match_position,
            older=self.older_count,
        )

    def refresh_names(self) -> None:
        """Re-render rows (call after names resolve differently, e.g. an agent registered)."""
        self._strips.clear()
        self.refresh()

    # ------------------------------------------------------------------ actions

    def action_cursor_up(self) -> None:
        self._move_by(-1)

    def action_cursor_down(self) -> None:
        self._move_by(1)

    def action_page_up(self) -> None:
        self._move_by(-max(1, self._body_height() - 1))

    def action_page_down(self) -> None:
        self._move_by(max(1, self._body_height() - 1))

    def action_cursor_home(self) -> None:
        if self._can_page("older"):
            self._jump_oldest()
        elif self.visible_count:
            self._move_cursor_to_line(0)

    def action_cursor_end(self) -> None:
        self.follow()

    def action_toggle_follow(self) -> None:
        if self.following:
            self.pause()
        else:
            self.follow()

    def action_open_envelope(self) -> None:
        row = self.cursor_row
        if row is not None:
            self.post_message(self.Selected(self, row._replace(channel=self.model.label_of(row))))

    def action_request_query(self, mode: str) -> None:
        opener = getattr(self.app, "open_query", None)
        if callable(opener):
            opener(mode)  # at once: the keys queued behind this one must find the bar focused
        else:
            self.post_message(self.QueryRequested(self, mode))

    def action_search_next(self) -> None:
        if not self.search_next():
            self.notify("No envelope matches the search.", severity="warning", timeout=3)

    def action_search_prev(self) -> None:
        if not self.search_prev():
            self.notify("No envelope matches the search.", severity="warning", timeout=3)

    def action_clear_query(self) -> None:
        self.set_search(None)
        self.set_filter(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("search_next", "search_prev"):
            return not self.model.search_spec.empty
        if action == "clear_query":
            return not (self.model.search_spec.empty and self.model.filter_spec.empty)
        if action == "open_envelope":
            return True if self.visible_count else None
        return True

    # ------------------------------------------------------------------ events

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.pause()
        if self.scroll_y <= 1 and self._can_page("older"):
            self._load_page("older", None)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        if self.is_vertical_scroll_end and self._can_page("newer"):
            self._load_page("newer", None)
        elif not self.following and self.is_vertical_scroll_end:
            self.follow()

    def watch_scroll_y(self, old_value: float, new_value: float) -> None:
        super().watch_scroll_y(old_value, new_value)
        if not self.following and self.pending_count:
            self._count_pending()
        if self.is_vertical_scrollbar_grabbed:
            if new_value < old_value:
                self.pause()
                if new_value <= 0 and self._can_page("older"):
                    self._load_page("older", None)
            elif self.is_vertical_scroll_end and self._can_page("newer"):
                self._load_page("newer", None)
            elif self.is_vertical_scroll_end and not self.following:
                self.follow()

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        line = int(self.scroll_y) + offset.y - 1 - self._lead
        if line < 0 and self._lead and self._can_page("older"):
            self._load_page("older", None)
        elif line == self.visible_count and self._trail and self._can_page("newer"):
            self._load_page("newer", None)
        elif 0 <= line < self.visible_count:
            self._move_cursor_to_line(line)
            if event.chain >= 2:
                self.action_open_envelope()
        elif (held := self.held_at(line, self.visible_count + self._trail)) is not None:
            self.post_message(self.HeldOpened(self, held))

    def on_resize(self, event: events.Resize) -> None:
        self._strips.clear()
        if self.following:
            self._scroll_to_end()
        else:
            self._count_pending()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles = None
        self._strips.clear()

    def _on_focus(self, event: events.Focus) -> None:
        super()._on_focus(event)
        self._strips.clear()

    def _on_blur(self, event: events.Blur) -> None:
        super()._on_blur(event)
        self._strips.clear()

    def watch_show_channel(self) -> None:
        self._strips.clear()
        self.refresh()

    def watch_pending_count(self) -> None:
        self._update_subtitle()

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        # ScrollView moves the thumb only on scroll: rows that scrolled the tail before its scrollbar
        # appeared would leave the thumb at the top.
        if shown:
            self.vertical_scrollbar.position = self.scroll_y

    # ------------------------------------------------------------------ rendering

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width != self._width:
            self._width = width
            self._strips.clear()
        styles = self._get_styles()
        if self.model.labels_version != self._labels_version:
            self._labels_version = self.model.labels_version
            self._strips.clear()
        if y == 0:
            return self._render_header(width, styles)
        line = int(self.scroll_y) + y - 1 - self._lead
        if line < 0:
            return self._render_marker(
                older_text(self.paging, self._searched, self.older_count), width, styles
            )
        if line >= self.visible_count:
            if self._trail and line == self.visible_count:
                return self._render_marker(
                    newer_text(self.paging, self._searched, self.newer_count), width, styles
                )
            held = self.held_at(line, self.visible_count + self._trail)
            if held is not None:
                return self._render_held(held, width, styles)
            return Strip.blank(width, self.rich_style)
        index = self.model.index_at(line)
        is_cursor = index == self._cursor_abs()
        key = (index, is_cursor)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(self.model.row(index), width, is_cursor, styles)
            self._strips[key] = strip
        return strip

    def _columns(self, width: int) -> Columns:
        """Column widths for ``width`` cells: drop or narrow columns until the preview has room."""
        return self._widths.columns(width, show_channel=self.show_channel)

    def _render_header(self, width: int, styles: dict[str, Style]) -> Strip:
        text = header_text(self._columns(width), width, self.summary)
        return Strip(
            [*Text(text, style=styles["header"], end="").render(self.app.console)]
        ).adjust_cell_length(width, styles["header"])

    def _render_row(self, row: TailRow, width: int, is_cursor: bool, styles: dict[str, Style]) -> Strip:
        text = row_text(
            row,
            self._columns(width),
            width,
            label=self.model.label_of(row),
            name_for=self.name_for,
            matched=self.model.is_match(row),
            styles=styles,
        )
        if is_cursor:
            text.stylize(styles["cursor"])
        strip = Strip(list(text.render(self.app.console)))
        return strip.adjust_cell_length(width, styles["base"])

    def _render_held(self, held: HeldRow, width: int, styles: dict[str, Style]) -> Strip:
        text = row_text(
            held.as_row(),
            self._columns(width),
            width,
            label=held.channel,
            name_for=self.name_for,
            matched=False,
            styles=styles,
            held=True,
        )
        return Strip(list(text.render(self.app.console))).adjust_cell_length(width, styles["base"])

    def _render_marker(self, text: str, width: int, styles: dict[str, Style]) -> Strip:
        line = Text(fit(text, width), style=styles["audience"], end="")
        return Strip(list(line.render(self.app.console))).adjust_cell_length(width, styles["base"])

    def _get_styles(self) -> dict[str, Style]:
        if self._styles is None:
            get = self.get_component_rich_style
            styles = {
                "base": self.rich_style,
                "header": get("envelope-tail--header"),
                "cursor": get("envelope-tail--cursor"),
            }
            for name in ("seq", "time", "label", "sender", "audience", "preview", "match", "held", *FAMILIES):
                styles[name] = get(f"envelope-tail--{name}", partial=True)
            self._styles = styles
        return self._styles

    def _note_widths(self, items: Iterable[Item]) -> None:
        """Widen the sender and type columns to the widest name and type held (they only widen)."""
        if self._widths.note(items, self.name_for):
            self._strips.clear()

    # ------------------------------------------------------------------ internals

    def _view_changed(self, keep: int | None) -> None:
        """After the shown rows changed: keep the cursor on its envelope (or the nearest row before it)."""
        self._held_filters_changed()
        if not self.following and keep is not None:
            line = self.model.line_of(keep)
            self._cursor = None if line is None else self.model.index_at(line)
        self._mark = self.model.base + self.model.row_count  # rows already held are not new
        self.pending_count = 0
        self._strips.clear()
        self._after_change()
        if self.following or self._cursor is None:
            self._scroll_to_end()
        else:
            self._scroll_cursor_into_view()
        self.post_message(self.StateChanged(self))

    def _after_change(self, *, repaint: bool = True) -> None:
        """The rows changed: set the virtual size (and the scrollbar), and repaint unless told not to."""
        lead, trail = self._lead, self._trail
        self._lead, self._trail = self._markers()
        if (lead, trail) != (self._lead, self._trail):
            repaint = True
        self._set_virtual_size(
            Size(self._width, self.visible_count + 1 + self._lead + self._trail + self.held_count),
            repaint=repaint,
        )
        if self._lead != lead and not self.following:
            # the "older" row came or went above the rows: they stay where they are on screen
            self.scroll_to(
                y=max(0, self.scroll_y + self._lead - lead), animate=False, immediate=True, force=True
            )
        if repaint:
            self.refresh()
            self.lines_repainted += self.size.height

    def _refresh_lines(self, first: int, end: int, *, header: bool = True) -> None:
        """Repaint the screen rows showing lines ``first`` to ``end`` (those shown), and the header."""
        width = self.size.width
        top = int(self.scroll_y) - self._lead
        start = max(first - top + 1, 1)
        stop = min(end + self._trail - top + 1, self.size.height)
        regions = [Region(0, 0, width, 1)] if header else []
        if start < stop:
            regions.append(Region(0, start, width, stop - start))
        if regions:
            self.refresh(*regions)
        self.lines_repainted += header + max(0, stop - start)

    def _count_pending(self) -> None:
        """Rows that arrived since following paused and are not on screen (below its last line)."""
        model = self.model
        count = model.visible_count
        if self.following or not count:
            self.pending_count = 0
            return
        if model.view is None:
            first_new = max(0, self._mark - model.base)
        else:
            first_new = bisect_left(model.view, self._mark)
        if model.detached:
            return  # counted as they arrive: none of them is held
        bottom = int(self.scroll_y) + self._body_height() - self._lead
        self.pending_count = max(0, count - max(first_new, bottom))
        self.refresh(Region(0, 0, self.size.width, 1))

    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _cursor_abs(self) -> int | None:
        if self._cursor is not None:
            return self._cursor
        count = self.visible_count
        return self.model.index_at(count - 1) if count else None

    def _cursor_line(self) -> int | None:
        index = self._cursor_abs()
        return None if index is None else self.model.line_of(index)

    def _move_by(self, delta: int) -> None:
        count = self.visible_count
        if not count:
            if self._can_page("older"):
                self._load_page("older", delta)
            return
        line = self._cursor_line()
        line = count - 1 if line is None else line
        if line + delta < 0 and self._can_page("older"):
            if line:
                self._move_cursor_to_line(0)
            self._load_page("older", line + delta)
            return
        if line + delta > count - 1 and self._can_page("newer"):
            if line != count - 1:
                self._move_cursor_to_line(count - 1)
            self._load_page("newer", line + delta - (count - 1))
            return
        target = min(max(line + delta, 0), count - 1)
        if delta > 0 and target == count - 1 and not self.model.detached:
            self.follow()
            return
        self._move_cursor_to_line(target)

    def _move_cursor_to_line(self, line: int) -> None:
        old = self._cursor_abs()
        old_line = self._cursor_line()
        self._cursor = self.model.index_at(line)
        if self.following and line != self.visible_count - 1:
            self._set_following(False)
        if old is not None:
            self._strips.discard((old, True))
            self._strips.discard((old, False))
        self._strips.discard((self._cursor, False))
        top = self.scroll_y
        self._scroll_cursor_into_view()
        if self.scroll_y == top:
            # the rows stay put: repaint the row left and the row reached (and the header if its
            # summary changed: "match k of n"), not the screen
            header = not self.model.search_spec.empty
            self._refresh_lines(line, line + 1, header=header)
            if old_line is not None and old_line != line:
                self._refresh_lines(old_line, old_line + 1, header=False)
        else:
            self.refresh()
        self._announce_cursor()

    def _scroll_cursor_into_view(self) -> None:
        line = self._cursor_line()
        if line is None:
            return
        top = int(self.scroll_y)
        height = self._body_height()
        # virtual lines: the first row's marker above it and the last row's below it come into view too
        first = line + self._lead if line else 0
        last = line + self._lead + (self._trail if line == self.visible_count - 1 else 0)
        if first < top:
            self.scroll_to(y=first, animate=False, immediate=True, force=True)
        elif last >= top + height:
            self.scroll_to(y=last - height + 1, animate=False, immediate=True, force=True)

    def _scroll_to_end(self) -> None:
        self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True, force=True)

    def _set_following(self, value: bool) -> None:
        if value == self.following:
            if value:
                self.pending_count = 0
            return
        self.following = value
        self._mark = self.model.base + self.model.row_count
        if value:
            self.pending_count = 0
        self._update_subtitle()
        self.post_message(self.FollowChanged(self, value, self.pending_count))

    def _request_channel(self, channel_id: str) -> None:
        self.post_message(self.ChannelRequested(self, channel_id))

    def _announce_cursor(self) -> None:
        self.post_message(self.CursorMoved(self))

    def _update_subtitle(self) -> None:
        if self.following:
            text = "following"
        elif self.pending_count:
            text = f"paused · {self.pending_count:,} new · End to follow"
        else:
            text = "paused · End to follow"
        if text == self._subtitle:
            return
        self._subtitle = text
        self._set_subtitle(text)

    def on_mount(self) -> None:
        self._update_subtitle()


__all__ = ["DEFAULT_LIMIT", "EnvelopeTail", "TailPager", "TailRow"]

"""The live WAL tail: a Line-API ``ScrollView`` over envelopes, with follow mode, filter, search and a cursor.

The rows, their index and the filters live in a ``TailModel`` (``tui/tail_model.py``); this widget owns
only what is on screen: the cursor, following, and the strips. Nothing becomes a widget and no Rich work
is done until a row is on screen, where its strip is cached in an LRU keyed by the row's absolute index.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from time import monotonic
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.cache import LRUCache
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import Reactive, reactive, var
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.strip import Strip
from textual.widget import Widget

from ag2net.envelope import Envelope
from ag2net.naming import ChannelRefError, resolve_channel_ref
from tui.filtering import FilterSpec
from tui.formatting import FAMILIES, audience_label, event_family, preview, short_time, short_type
from tui.models import TailItem, TailRow
from tui.tail_model import DEFAULT_LIMIT, TailModel

if TYPE_CHECKING:
    from typing import Self

    from textual.timer import Timer

THUMB_INTERVAL = 2.0
"""While paused under a stream of envelopes, the scrollbar's thumb moves at most this often (seconds)."""
Item = tuple[Envelope, int | None, str]
"""(envelope, seq, channel label): what the tail is given (a seq may be unknown)."""
PAGE = 500
"""Envelopes read from the store per page when the tail reaches past the rows it holds."""


class TailPager(Protocol):
    """Where the tail reads the envelopes it does not hold (``tui.feed.LiveFeed`` is one)."""

    def channel_sizes(self) -> dict[str, int]:
        """Per channel, the highest seq known (its WAL's length)."""
        ...

    def channel_pairs(self) -> list[tuple[str, str]]:
        """``(channel_type, channel_id)`` of every channel known."""
        ...

    async def page_older(self, tops: dict[str, int], count: int) -> list[TailItem]:
        """The newest ``count`` envelopes at or below ``tops[channel]`` per channel, oldest first."""
        ...

    async def page_newer(self, bottoms: dict[str, int], count: int) -> list[TailItem]:
        """The oldest ``count`` envelopes at or above ``bottoms[channel]`` per channel, oldest first."""
        ...

    def stop_history(self) -> None:
        """Stop filling the tail with older envelopes in the background (the reader pages it now)."""
        ...


def _fit(text: str, width: int) -> str:
    """``text`` cut or padded to exactly ``width`` cells, with an ellipsis when cut."""
    if width <= 0:
        return ""
    length = cell_len(text)
    if length <= width:
        return text + " " * (width - length)
    out = []
    used = 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…" + " " * (width - 1 - used)


def _fit_left(text: str, width: int) -> str:
    """Like ``_fit`` but cuts from the left, so the end (an event type's last dotted part) stays visible."""
    if width <= 0:
        return ""
    length = cell_len(text)
    if length <= width:
        return text + " " * (width - length)
    out: list[str] = []
    used = 0
    for ch in reversed(text):
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "…" + "".join(reversed(out)) + " " * (width - 1 - used)


def _fit_label(label: str, width: int) -> str:
    """A channel label in ``width`` cells: the type is shortened first (``consul…·cb2c``), so the id's
    tail, the part that tells channels apart, stays visible as long as it fits at all."""
    if cell_len(label) <= width:
        return _fit(label, width)
    kind, sep, tail = label.rpartition("·")
    if not sep or cell_len(tail) + 2 > width:
        return _fit_left(label, width)
    room = width - cell_len(tail) - 1  # the type's cells, its ellipsis included
    return _fit(kind, room) + sep + tail if room >= 2 else _fit_left(label, width)


def _fit_type(event_type: str, width: int) -> str:
    """An event type in ``width`` cells: built-in types without ``ag2.``, dropping leading dotted parts
    when narrow ("…invite.ack"); custom types cut in the middle, keeping their namespace and the end of
    the rest (``myapp.…request``), or from the left when even the namespace does not fit."""
    shown = short_type(event_type)
    if cell_len(shown) <= width:
        return _fit(shown, width)
    if shown != event_type:
        parts = shown.split(".")
        while len(parts) > 1 and cell_len("…" + ".".join(parts)) > width:
            parts.pop(0)
        return _fit_left("…" + ".".join(parts), width)
    namespace, dot, rest = event_type.partition(".")
    room = width - cell_len(namespace) - 2  # the dot and the ellipsis
    if dot and rest and room >= 3:
        return namespace + dot + "…" + _fit_left(rest, room + 1)[1:]
    return _fit_left(shown, width)


@dataclass(slots=True)
class _Columns:
    seq: int
    time: int
    channel: int
    sender: int
    etype: int
    audience: int

    def preview_width(self, width: int) -> int:
        used = self.seq + 1 + self.time + 1 + self.sender + 1 + self.etype + 1
        used += (self.channel + 1 if self.channel else 0) + (self.audience + 1 if self.audience else 0)
        return max(0, width - used)


VIRTUAL_SIZE = cast("Reactive[Size]", vars(Widget)["virtual_size"])
"""The widget's ``virtual_size`` reactive itself (the class attribute reads as a Size to a type checker)."""


class EnvelopeTail(ScrollView, can_focus=True):
    """Every admitted envelope, newest at the bottom; follows the end until you scroll up."""

    HELP = """\
## WAL tail

Every envelope the hub admits, in order. While **following**, new rows scroll in; moving up or
scrolling up pauses and counts *N new*; **End** (or **f**) resumes.

**Enter** opens an envelope · **/** filter · **s** search, then **n** / **N** · **x** clears · **:** go to seq

The tail reaches the whole WAL: **g**, **:** *seq*, scrolling and search read older (or newer) pages
from the store on demand (a *loading older…* row shows meanwhile); **End** comes back to live.
**:** *label* (`:discussion·7d80`) shows that channel.

Query terms (ANDed, `-` negates, commas mean OR): `type:ag2.msg` `family:custom`
`sender:planner` `to:critic` `to:all` `text:"two words"` `re:/x.+y/i` `seq:10-20`
`channel:discussion·7d80` (a label as the channel column shows it; `.` works for `·`).
The header's right end counts the rows shown and says *match k of n* while searching.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor_up", "Up", show=False, id="tail.cursor_up"),
        Binding("down,j", "cursor_down", "Down", show=False, id="tail.cursor_down"),
        Binding("pageup", "page_up", "Page up", show=False, id="tail.page_up"),
        Binding("pagedown", "page_down", "Page down", show=False, id="tail.page_down"),
        Binding("home,g", "cursor_home", "First", show=False, id="tail.home"),
        Binding("end,G", "cursor_end", "Last + follow", show=False, id="tail.end"),
        Binding(
            "enter", "open_envelope", "Open", id="tail.open", tooltip="Open the envelope under the cursor"
        ),
        Binding(
            "f",
            "toggle_follow",
            "Follow",
            id="tail.follow",
            tooltip="Follow new envelopes (or pause following)",
        ),
        Binding(
            "slash",
            "request_query('filter')",
            "Filter",
            id="tail.filter",
            tooltip="Filter rows by a query",
            priority=True,  # resolved when the app reads it: the keys typed after it reach the bar
        ),
        Binding(
            "s",
            "request_query('search')",
            "Search",
            id="tail.search",
            tooltip="Search rows (then n / N)",
            priority=True,
        ),
        Binding("n", "search_next", "Next match", id="tail.search_next", tooltip="Next search match"),
        Binding(
            "N", "search_prev", "Prev match", show=False, id="tail.search_prev", tooltip="Previous match"
        ),
        Binding(
            "x", "clear_query", "Clear filter", id="tail.clear_filter", tooltip="Clear the filter and search"
        ),
        Binding(
            "colon",
            "request_query('goto')",
            "Go to seq",
            id="tail.goto",
            tooltip="Jump to a sequence number",
            priority=True,
        ),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "envelope-tail--header",
        "envelope-tail--cursor",
        "envelope-tail--seq",
        "envelope-tail--time",
        "envelope-tail--label",
        "envelope-tail--sender",
        "envelope-tail--audience",
        "envelope-tail--preview",
        "envelope-tail--match",
        *(f"envelope-tail--{family}" for family in FAMILIES),
    }

    DEFAULT_CSS = """
    EnvelopeTail {
        background: $surface;
        color: $foreground;
        overflow-x: hidden;
        overflow-y: auto;
        &:focus { background-tint: $foreground 4%; }
        & > .envelope-tail--header { background: $panel; color: $text-muted; text-style: bold; }
        & > .envelope-tail--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
        }
        &:focus > .envelope-tail--cursor {
            background: $block-cursor-background;
            color: $block-cursor-foreground;
            text-style: $block-cursor-text-style;
        }
        & > .envelope-tail--seq { color: $text-muted; }
        & > .envelope-tail--time { color: $text-muted; }
        & > .envelope-tail--label { color: $text-secondary; }
        & > .envelope-tail--sender { color: $foreground; text-style: bold; }
        & > .envelope-tail--audience { color: $text-muted; text-style: italic; }
        & > .envelope-tail--preview { color: $foreground; }
        & > .envelope-tail--match { color: $text-warning; text-style: bold reverse; }
        & > .envelope-tail--text { color: $text-primary; }
        & > .envelope-tail--packet { color: $text-secondary; }
        & > .envelope-tail--channel { color: $text-muted; }
        & > .envelope-tail--task { color: $text-warning; }
        & > .envelope-tail--expectation { color: $text-error; }
        & > .envelope-tail--context { color: $text-success; }
        & > .envelope-tail--custom { color: $text-accent; }
    }
    """

    _quiet = False
    """Set while ``border_subtitle`` changes without a border to show it (no repaint then)."""

    following: var[bool] = var(True)
    """True while new rows scroll into view; False once the user moves away from the end."""
    pending_count: reactive[int] = reactive(0, repaint=False)
    """Rows that arrived (and pass the filter) while following was paused and are below the screen."""
    show_channel: reactive[bool] = reactive(True)
    """Show the channel column (hidden when the tail is filtered to one channel)."""

    class Selected(Message):
        """The user opened the envelope under the cursor (Enter or double click)."""

        def __init__(self, tail: EnvelopeTail, row: TailRow) -> None:
            super().__init__()
            self.tail = tail
            self.envelope = row.envelope
            self.seq = row.seq
            self.channel_label = row.channel

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

    class FollowChanged(Message):
        """Following started or stopped; ``pending`` is the count of rows that arrived meanwhile."""

        def __init__(self, tail: EnvelopeTail, following: bool, pending: int) -> None:
            super().__init__()
            self.tail = tail
            self.following = following
            self.pending = pending

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

    class QueryRequested(Message):
        """The user asked for the query bar: ``mode`` is ``filter``, ``search`` or ``goto``."""

        def __init__(self, tail: EnvelopeTail, mode: str) -> None:
            super().__init__()
            self.tail = tail
            self.mode = mode

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

    class StateChanged(Message):
        """Filter, search or channel filter changed (the status bar shows them)."""

        def __init__(self, tail: EnvelopeTail) -> None:
            super().__init__()
            self.tail = tail

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, EnvelopeTail.StateChanged) and message.tail is self.tail

    class ChannelRequested(Message):
        """The ``:`` prompt named a channel (or a seq of a channel not shown): the tail shows that channel
        now; the app points the channel list, chat and agent view at it too."""

        def __init__(self, tail: EnvelopeTail, channel_id: str) -> None:
            super().__init__()
            self.tail = tail
            self.channel_id = channel_id

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

    class CursorMoved(Message):
        """The cursor went to another row (keys, click, search, go to, follow); read ``cursor_row``."""

        def __init__(self, tail: EnvelopeTail) -> None:
            super().__init__()
            self.tail = tail

        @property
        def control(self) -> EnvelopeTail:
            return self.tail

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, EnvelopeTail.CursorMoved) and message.tail is self.tail

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
        self._thumb_timer: Timer | None = None
        self._thumb_moved = -THUMB_INTERVAL
        self.lines_repainted = 0
        """Screen lines marked for repaint by batches and cursor moves (a figure for tests and benchmarks:
        a paused tail repaints the header and the new rows on screen, not the screen)."""
        self.pager: TailPager | None = None
        """Where rows the tail does not hold are read (set by the app); without one the tail shows what
        it was given."""
        self.page_size = max(1, min(PAGE, limit))
        self.paging = ""
        """What is being read from the store: ``older``, ``newer``, ``newest``, ``search`` or ''."""
        self._generation = 0
        """Counts window changes (a page read for an earlier window is dropped)."""
        self._paged = False
        """The reader paged the window: background history pages are no longer taken."""
        self._during_load: list[Item] = []
        """Live rows that arrived while the newest page was read (added after it)."""
        self._lead = 0
        """1 when the first virtual line is the "older envelopes" row."""
        self._trail = 0
        """1 when the last virtual line is the "newer envelopes" row (a window paged away from live)."""
        self._searched = 0
        self._sender_width = 0
        self._type_width = 0
        self._widths_seen: set[str] = set()

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

    def goto_seq(self, seq: int, channel_id: str | None = None) -> bool:
        """Move the cursor to the newest visible row with this per-channel ``seq`` (of ``channel_id``
        when given); when no row shown has it, read the page around it from the store (a channel's seq:
        the channel shown, else the cursor's). False when it cannot be reached."""
        model = self.model
        channel = channel_id or model.channel_filter
        for line in range(model.visible_count - 1, -1, -1):
            row = model.row_at(line)
            if row.seq == seq and (channel is None or row.envelope.channel_id == channel):
                self._move_cursor_to_line(line)
                return True
        if self.pager is None:
            return False
        if channel is None:
            row = self.cursor_row
            if row is None:
                return False
            channel = row.envelope.channel_id
        size = self.pager.channel_sizes().get(channel, 0)
        if not 1 <= seq <= size:
            return False
        if model.channel_filter != channel:
            self.set_channel_filter(channel, load=False)
            self.post_message(self.ChannelRequested(self, channel))
        self._jump(channel, seq)
        return True

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
        self.post_message(self.CursorMoved(self))

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
        parts = []
        if self.pending_count and not self.following:
            parts.append(f"paused · {self.pending_count:,} new")
        if not model.search_spec.empty:
            k, n = self.match_position
            if not n:
                parts.append("no match")
            elif k:
                parts.append(f"match {k:,} of {n:,}")
            else:
                parts.append(f"{n:,} match{'es' if n != 1 else ''}")
        shown = model.channel_filter
        if not model.filter_spec.empty:
            held = model.held_of(shown) if shown is not None else model.row_count
            parts.append(f"{model.visible_count:,} of {held:,} rows")
        else:  # the channel shown (or every channel): its rows held
            parts.append(f"{model.visible_count:,} row{'s' if model.visible_count != 1 else ''}")
        older = self.older_count
        if older:  # reachable, not held: ↑ or g reads them
            parts.append(f"{older:,} older")
        return " · ".join(parts)

    def goto_text(self, text: str) -> str:
        """Go to what the ``:`` prompt holds: a seq (``12``), a channel label or id, or both
        (``discussion·7d80 12``, ``discussion·7d80#12``); '' when done, else one sentence saying why not.

        A channel shown in the tail is selected by moving the cursor to its newest row (or to that
        seq in it); the channel filter is not changed here."""
        words = text.replace("#", " ").split()
        if not words:
            return "type a seq number, a channel label such as discussion·7d80, or both"
        seq: int | None = None
        if words[-1].isdigit():
            seq = int(words.pop())
        channel: str | None = None
        if words:
            ref = " ".join(words)
            pairs = self.model.channel_pairs()
            if self.pager is not None:
                pairs = self.pager.channel_pairs() or pairs
            try:
                channel = resolve_channel_ref(ref, pairs)
            except ChannelRefError as exc:
                return str(exc)
        model = self.model
        if self.pager is not None and channel is not None and channel != model.channel_filter:
            # ``:label``: the tail shows that channel (and the app the rest of the workbench)
            self.set_channel_filter(channel, load=seq is None)
            self.post_message(self.ChannelRequested(self, channel))
            if seq is None:
                self.follow()
                return ""
        if seq is not None and self.pager is not None:
            if self.goto_seq(seq, channel):
                return ""
            return self._no_such_seq(seq, channel or model.channel_filter)
        for line in range(model.visible_count - 1, -1, -1):
            row = model.row_at(line)
            if channel is not None and row.envelope.channel_id != channel:
                continue
            if seq is not None and row.seq != seq:
                continue
            self._move_cursor_to_line(line)
            return ""
        where = f" in {model.labels.get(channel, channel)}" if channel else ""
        if seq is None:
            return f"no row of {model.labels.get(channel or '', channel)} is shown; clear the filter (x)"
        return f"seq {seq}{where} is not among the rows shown"

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
            return self._render_marker(self._older_text(), width, styles)
        if line >= self.visible_count:
            if self._trail and line == self.visible_count:
                return self._render_marker(self._newer_text(), width, styles)
            return Strip.blank(width, self.rich_style)
        index = self.model.index_at(line)
        is_cursor = index == self._cursor_abs()
        key = (index, is_cursor)
        strip = self._strips.get(key)
        if strip is None:
            strip = self._render_row(self.model.row(index), width, is_cursor, styles)
            self._strips[key] = strip
        return strip

    def _columns(self, width: int) -> _Columns:
        """Column widths for ``width`` cells: drop or narrow columns until the preview has room."""
        # sender and type are as wide as the widest held (within bounds): the rest goes to the preview
        sender = min(12, max(6, self._sender_width or 12))
        etype = min(18, max(10, self._type_width or 18))
        cols = _Columns(
            seq=6, time=12, channel=17 if self.show_channel else 0, sender=sender, etype=etype, audience=12
        )
        # the channel column survives longest: with every channel shown it says where a row belongs
        steps = (
            ("audience", 0),
            ("channel", 12 if self.show_channel else 0),
            ("time", 8),
            ("sender", min(9, sender)),
            ("etype", min(14, etype)),
            ("channel", 9 if self.show_channel else 0),  # con…·9272: the id's tail stays
            ("channel", 0),
        )
        for name, value in steps:
            # the channel narrows before the preview gets short, and goes only when the preview would
            # be nearly gone: in the all-channels tail it is what tells the rows' channels apart
            wanted = {9: 14, 0: 6}.get(value, 28) if name == "channel" else 28
            if cols.preview_width(width) >= wanted:
                break
            setattr(cols, name, value)
        return cols

    def _render_header(self, width: int, styles: dict[str, Style]) -> Strip:
        c = self._columns(width)
        parts = ["seq".ljust(c.seq), " ", _fit("time", c.time), " "]
        if c.channel:
            parts += [_fit("channel", c.channel), " "]
        parts += [_fit("sender", c.sender), " ", _fit("event type", c.etype), " "]
        if c.audience:
            parts += [_fit("audience", c.audience), " "]
        rest = c.preview_width(width)
        summary = self.summary
        if cell_len(summary) + 9 > rest and " · " in summary:
            # narrow: the search's position first, then what is not held ("87,500 older"), then the rest
            parts_ = summary.split(" · ")
            ordered = sorted(parts_, key=lambda p: 0 if "match" in p else 1 if p.endswith("older") else 2)
            summary = ordered[0]
            for part in ordered[1:]:
                if cell_len(summary) + 3 + cell_len(part) + 9 > rest:
                    break
                summary += " · " + part
        if cell_len(summary) + 9 <= rest:
            parts.append("preview" + summary.rjust(rest - 7))
        else:
            parts.append(_fit("preview", rest))
        text = "".join(parts)
        return Strip(
            [*Text(text, style=styles["header"], end="").render(self.app.console)]
        ).adjust_cell_length(width, styles["header"])

    def _render_row(self, row: TailRow, width: int, is_cursor: bool, styles: dict[str, Style]) -> Strip:
        env = row.envelope
        c = self._columns(width)
        base = styles["base"]
        text = Text(style=base, no_wrap=True, end="")
        matched = self.model.is_match(row)
        seq = "·" if row.seq is None else str(row.seq)
        text.append(seq.rjust(c.seq)[-c.seq :], styles["match"] if matched else styles["seq"])
        text.append(" ")
        text.append(_fit(short_time(env.created_at)[: c.time], c.time), styles["time"])
        text.append(" ")
        if c.channel:
            text.append(_fit_label(self.model.label_of(row), c.channel), styles["label"])
            text.append(" ")
        text.append(_fit(self.name_for(env.sender_id), c.sender), styles["sender"])
        text.append(" ")
        text.append(_fit_type(env.event_type, c.etype), styles[event_family(env.event_type)])
        text.append(" ")
        if c.audience:
            text.append(_fit(audience_label(env, self.name_for), c.audience), styles["audience"])
            text.append(" ")
        rest = c.preview_width(width)
        if rest:
            text.append(_fit(preview(env, rest + 1), rest), styles["preview"])
        if is_cursor:
            text.stylize(styles["cursor"])
        strip = Strip(list(text.render(self.app.console)))
        return strip.adjust_cell_length(width, base)

    def _render_marker(self, text: str, width: int, styles: dict[str, Style]) -> Strip:
        line = Text(_fit(text, width), style=styles["audience"], end="")
        return Strip(list(line.render(self.app.console))).adjust_cell_length(width, styles["base"])

    def _older_text(self) -> str:
        if self.paging == "older":
            return "⋯ loading older…"
        if self.paging == "search":
            return f"⋯ searching older… ({self._searched:,} read)"
        if self.paging == "newest":
            return "⋯ loading the newest envelopes…"
        older = self.older_count
        if not older:
            return ""
        return f"▲ {older:,} older envelope{'s' if older != 1 else ''} · ↑ or g reads them"

    def _newer_text(self) -> str:
        if self.paging == "newer":
            return "⋯ loading newer…"
        if self.paging == "search-newer":
            return f"⋯ searching newer… ({self._searched:,} read)"
        newer = self.newer_count
        what = f"{newer:,} newer envelope{'s' if newer != 1 else ''}" if newer else "newer envelopes"
        return f"▼ {what} · ↓ reads them · End returns to live"

    def _get_styles(self) -> dict[str, Style]:
        if self._styles is None:
            get = self.get_component_rich_style
            styles = {
                "base": self.rich_style,
                "header": get("envelope-tail--header"),
                "cursor": get("envelope-tail--cursor"),
            }
            for name in ("seq", "time", "label", "sender", "audience", "preview", "match", *FAMILIES):
                styles[name] = get(f"envelope-tail--{name}", partial=True)
            self._styles = styles
        return self._styles

    # ------------------------------------------------------------------ paging

    def _sizes(self) -> dict[str, int]:
        return self.pager.channel_sizes() if self.pager is not None else {}

    def _paging_channels(self, sizes: dict[str, int]) -> list[str]:
        """The channels a page is read from: the one shown, else the window's scope."""
        shown = self.model.channel_filter
        return [shown] if shown is not None else self.model.scope_channels(sizes)

    @property
    def older_count(self) -> int:
        """Envelopes of what is shown (the channel, or every channel) older than the rows held."""
        if self.pager is None:
            return 0
        sizes = self._sizes()
        return sum(self.model.older_of(cid, sizes.get(cid, 0)) for cid in self._paging_channels(sizes))

    @property
    def newer_count(self) -> int:
        """Envelopes of what is shown newer than the rows held (0 unless the window left live)."""
        model = self.model
        if self.pager is None or not model.detached:
            return 0
        sizes = self._sizes()
        return sum(
            max(0, sizes.get(cid, 0) - model.newer_from(cid, sizes.get(cid, 0)) + 1)
            for cid in self._paging_channels(sizes)
        )

    def _markers(self) -> tuple[int, int]:
        if self.pager is None:
            return 0, 0
        lead = 1 if self.paging in ("older", "search", "newest") or self.older_count else 0
        trail = 1 if self.paging in ("newer", "search-newer") or self.model.detached else 0
        return lead, trail

    def _can_page(self, direction: str) -> bool:
        if self.pager is None or self.paging == "newest":
            return False
        if direction == "older":
            return self.older_count > 0
        return self.model.detached

    def _start(self, kind: str, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` (a read from the store) with ``kind`` shown in the marker row; one at a time."""
        if self.pager is not None and not self._paged and kind != "newest":
            self._paged = True
            self.pager.stop_history()
        self.paging = kind
        self._after_change()
        self.run_worker(self._guarded(work), name=f"tail {kind}", group="tail-page", exclusive=True)

    async def _guarded(self, work: Coroutine[Any, Any, None]) -> None:
        try:
            await work
        except Exception as exc:  # the hub failed or did not answer: say so, keep what is shown
            self.paging = ""
            self._during_load = []
            self._after_change()
            why = str(exc) or type(exc).__name__
            self.notify(f"Cannot read envelopes from the store: {why}", severity="error", timeout=8)

    def _done(self) -> None:
        self.paging = ""
        self._after_change()

    def _narrow_to_shown(self, sizes: dict[str, int]) -> None:
        """Before a page of the shown channel goes into a window of every channel: keep that channel's
        rows only (a window holds a contiguous run of its scope)."""
        model = self.model
        shown = model.channel_filter
        if shown is None or model.scope == shown:
            return
        moved = model.narrow(shown, sizes.get(shown, 0))
        self._generation += 1
        if self._cursor is not None:
            self._cursor = moved.get(self._cursor)
        self._mark = model.base + model.row_count
        self._strips.clear()

    def _load_page(self, direction: str, then: int | None) -> None:
        """Read the next page older (or newer) than the window; then move the cursor ``then`` lines from
        the row that was at that end (None: leave it)."""
        if self.paging:
            return
        self._start(direction, self._read_page(direction, then))

    async def _read_page(self, direction: str, then: int | None) -> None:
        assert self.pager is not None
        model = self.model
        sizes = self._sizes()
        self._narrow_to_shown(sizes)
        generation = self._generation
        channels = self._paging_channels(sizes)
        try:
            if direction == "older":
                tops = {cid: model.older_of(cid, sizes.get(cid, 0)) for cid in channels}
                items = await self.pager.page_older(tops, self.page_size)
            else:
                bottoms = {cid: model.newer_from(cid, sizes.get(cid, 0)) for cid in channels}
                items = await self.pager.page_newer(bottoms, self.page_size)
        finally:
            if generation == self._generation:
                self.paging = ""
        if generation != self._generation:
            return
        edge = (
            model.index_at(0 if direction == "older" else self.visible_count - 1)
            if self.visible_count
            else None
        )
        self._note_widths(items)
        if direction == "older":
            self._prepend(items, evict=True)
        else:
            self._append_page(items, sizes)
        if then is not None and self.visible_count:
            line = model.line_of(edge) if edge is not None else None
            if line is None:
                line = self.visible_count - 1 if direction == "older" else 0
            self._move_cursor_to_line(min(max(line + then, 0), self.visible_count - 1))
        self._done()

    def _append_page(self, items: list[TailItem], sizes: dict[str, int]) -> None:
        """A page newer than a detached window: the oldest rows past the limit go; at the newest of the
        scope the window is live again."""
        model = self.model
        base = model.base
        model.append(items)
        model.settle(self._sizes())
        if self._cursor is not None and self._cursor < model.base:
            self._cursor = model.index_at(0) if self.visible_count else None
        if not model.detached:
            self.pending_count = 0  # what arrived meanwhile came with the page
        self._after_change()
        if model.base != base:
            self._scroll_cursor_into_view()

    def _load_newest(self, *, follow: bool = True) -> None:
        """Read the newest page of what is shown into a fresh window (End from a paged window; showing
        another channel after paging one); live rows arriving meanwhile are added after it."""
        if self.pager is None:
            return
        self._during_load = []
        self._start("newest", self._read_newest(follow))

    async def _read_newest(self, follow: bool) -> None:
        assert self.pager is not None
        model = self.model
        sizes = self._sizes()
        shown = model.channel_filter
        channels = [shown] if shown is not None else [cid for cid, size in sizes.items() if size]
        self._generation += 1
        generation = self._generation
        try:
            items = await self.pager.page_older({cid: sizes.get(cid, 0) for cid in channels}, self.page_size)
        except BaseException:
            self.paging = ""
            self._during_load = []
            raise
        if generation != self._generation:
            return
        self.paging = ""
        model.reset(shown, detached=False)
        arrived, self._during_load = self._during_load, []
        self._cursor = None
        self.pending_count = 0
        self.append_many(items)
        if arrived:
            self.append_many(arrived)
        if follow:
            self._set_following(True)
            self._scroll_to_end()
        self._view_changed(None)
        self._done()
        self.post_message(self.CursorMoved(self))

    def _jump(self, channel_id: str, seq: int) -> None:
        """Show the page of ``channel_id`` around ``seq`` in a fresh window of that channel, the cursor
        on ``seq``."""
        first = max(1, seq - self.page_size // 2)
        self._start("older", self._read_jump({channel_id: first}, channel_id, {channel_id: first - 1}, seq))
        self.scroll_to(y=0, animate=False, immediate=True, force=True)

    def _jump_oldest(self) -> None:
        """``g``: the first page of what is shown (the channel from seq 1, or every channel's oldest)."""
        sizes = self._sizes()
        shown = self.model.channel_filter
        channels = [shown] if shown is not None else [cid for cid, size in sizes.items() if size]
        bottoms = dict.fromkeys(channels, 1)
        self._start("older", self._read_jump(bottoms, shown, dict.fromkeys(channels, 0), None))
        self.scroll_to(y=0, animate=False, immediate=True, force=True)  # the "loading older…" row shows

    async def _read_jump(
        self, bottoms: dict[str, int], scope: str | None, older: dict[str, int], seq: int | None
    ) -> None:
        assert self.pager is not None
        self._generation += 1
        generation = self._generation
        try:
            items = await self.pager.page_newer(bottoms, self.page_size)
        finally:
            if generation == self._generation:
                self.paging = ""
        if generation != self._generation:
            return
        model = self.model
        model.reset(scope, detached=True, older=older, newer=bottoms)
        self._cursor = None
        self._strips.clear()
        self._note_widths(items)
        model.append(items)
        model.settle(self._sizes())
        self.pending_count = 0
        if self.following:
            self._set_following(False)
        self._mark = model.base + model.row_count
        self._after_change()
        line = 0
        if seq is not None:
            found = model.line_of_seq(seq)
            line = found if found is not None else 0
        if self.visible_count:
            self._cursor = model.index_at(line)
            self.scroll_to(y=0, animate=False, immediate=True, force=True)
            self._move_cursor_to_line(line)
        self._done()

    def _search_pages(self, *, forward: bool) -> None:
        """Read pages older (or newer) than the window until one holds a match of the search; the cursor
        goes to the match nearest to where it was. The pages stay held (the limit drops the far end)."""
        if self.paging:
            return
        self._searched = 0
        self._start("search" if not forward else "search-newer", self._read_search(forward))

    async def _read_search(self, forward: bool) -> None:
        assert self.pager is not None
        model = self.model
        sizes = self._sizes()
        self._narrow_to_shown(sizes)
        generation = self._generation
        channels = self._paging_channels(sizes)
        found: int | None = None
        while generation == self._generation:
            if forward:
                if not model.detached:
                    break
                bottoms = {cid: model.newer_from(cid, sizes.get(cid, 0)) for cid in channels}
                items = await self.pager.page_newer(bottoms, self.page_size)
            else:
                tops = {cid: model.older_of(cid, sizes.get(cid, 0)) for cid in channels}
                if not any(tops.values()):
                    break
                items = await self.pager.page_older(tops, self.page_size)
            if generation != self._generation or not items:
                break
            self._searched += len(items)
            self._note_widths(items)
            edge = model.base if not forward else model.base + model.row_count
            if forward:
                self._append_page(items, sizes)
                hits = [i for i in model.matches if i >= edge]
            else:
                self._prepend(items, evict=True)
                hits = [i for i in model.matches if i < edge]
            if hits:
                found = hits[0] if forward else hits[-1]
                break
            self._after_change()
        if generation != self._generation:
            return
        self.paging = ""
        if found is not None:
            line = model.line_of(found)
            if line is not None:
                self._move_cursor_to_line(line)
        else:
            self.notify("No envelope matches the search.", severity="warning", timeout=3)
        self._done()

    def _note_widths(self, items: Iterable[Item]) -> None:
        """Widen the sender and type columns to the widest name and type held (they only widen)."""
        seen = self._widths_seen
        fresh = {env.sender_id for env, _s, _l in items} | {"\0" + env.event_type for env, _s, _l in items}
        fresh -= seen
        if not fresh:
            return
        seen |= fresh
        sender, etype = self._sender_width, self._type_width
        for key in fresh:
            if key.startswith("\0"):
                etype = max(etype, cell_len(short_type(key[1:])))
            else:
                sender = max(sender, cell_len(self.name_for(key)))
        if (sender, etype) != (self._sender_width, self._type_width):
            self._sender_width, self._type_width = sender, etype
            self._strips.clear()

    def _label(self, channel_id: str | None) -> str:
        if channel_id is None:
            return "the channel"
        label = self.model.labels.get(channel_id)
        if label is None and self.pager is not None:
            from ag2net.naming import channel_labels

            label = channel_labels(self.pager.channel_pairs()).get(channel_id)
        return label or channel_id

    def _no_such_seq(self, seq: int, channel_id: str | None) -> str:
        if channel_id is None:
            return f"seq {seq}: name the channel too, e.g. discussion·7d80 {seq}"
        size = self._sizes().get(channel_id, 0)
        label = self._label(channel_id)
        if not size:
            return f"{label} has no envelope yet; seq {seq} does not exist"
        return f"{label} has seqs 1 to {size:,}; seq {seq} is not one of them"

    # ------------------------------------------------------------------ internals

    def _view_changed(self, keep: int | None) -> None:
        """After the shown rows changed: keep the cursor on its envelope (or the nearest row before it)."""
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
        size = Size(self._width, self.visible_count + 1 + self._lead + self._trail)
        old = self.virtual_size
        if size != old:
            height = self.size.height
            if size.width == old.width and old.height > height and size.height > height:
                # the scrollbar was and stays shown: only its thumb moves, so no layout pass over the
                # whole screen (which setting ``virtual_size`` does) on every batch of envelopes
                self.set_reactive(VIRTUAL_SIZE, size)
                if repaint:
                    self._scroll_update(size)
                elif not self._thumb_moves(size.height):
                    # the thumb is drawn where it was: nothing of the scrollbar to repaint
                    self.vertical_scrollbar.set_reactive(ScrollBar.window_virtual_size, size.height)
                else:
                    self._move_thumb_soon()
            else:
                self.virtual_size = size
        if self._lead != lead and not self.following:
            # the "older" row came or went above the rows: they stay where they are on screen
            self.scroll_to(
                y=max(0, self.scroll_y + self._lead - lead), animate=False, immediate=True, force=True
            )
        if repaint:
            self.refresh()
            self.lines_repainted += self.size.height

    def _move_thumb_soon(self) -> None:
        """Move the scrollbar's thumb to where the rows added below a paused tail put it, now or at
        most ``THUMB_INTERVAL`` after it last moved that way (a repaint of the scrollbar repaints the
        tail's full height: under a stream of envelopes that was a third of the frames)."""
        if self._thumb_timer is not None:
            return
        wait = self._thumb_moved + THUMB_INTERVAL - monotonic()
        if wait <= 0:
            self._move_thumb()
        else:
            self._thumb_timer = self.set_timer(wait, self._move_thumb, name="tail scrollbar")

    def _move_thumb(self) -> None:
        self._thumb_timer = None
        self._thumb_moved = monotonic()
        if self.is_mounted:
            self._scroll_update(self.virtual_size)

    def _thumb_moves(self, virtual_height: int) -> bool:
        """Whether the scrollbar's thumb is drawn differently for this virtual height (it is drawn in
        eighths of a cell: most batches of rows added below a paused tail do not move it)."""
        bar = self.vertical_scrollbar
        if not bar.display:
            return True
        size = bar.size.height
        window = bar.window_size

        def cells(virtual: int) -> object:
            shown = window if window < virtual else 0
            return ScrollBarRender.render_bar(size, virtual, shown, bar.position).segments

        return cells(bar.window_virtual_size) != cells(virtual_height)

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
        self.post_message(self.CursorMoved(self))

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
        edge, _color = self.styles.border_bottom
        if edge in ("", "none", "hidden"):
            # no border to show it in (the pane around the tail has one): setting the subtitle would
            # repaint every row, on every batch while paused
            self._quiet = True
        try:
            self.border_subtitle = text
        finally:
            self._quiet = False

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._quiet and not regions and not layout and not recompose:
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def _step_search(self, *, forward: bool) -> bool:
        model = self.model
        if model.search_spec.empty:
            return False
        line = self._cursor_line()
        if line is not None:
            found = model.find_match(line, forward=forward, inclusive=False)
            if found is not None:
                self._move_cursor_to_line(found)
                return True
        if self._can_page("newer" if forward else "older"):
            self._search_pages(forward=forward)
            return True
        found = model.step_match(line, forward=forward)
        if found is None:
            return False
        self._move_cursor_to_line(found)
        return True

    def on_mount(self) -> None:
        self._update_subtitle()


__all__ = ["DEFAULT_LIMIT", "EnvelopeTail", "TailRow"]

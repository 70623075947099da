"""How the WAL tail reaches the envelopes it does not hold: pages older or newer than its window, the
newest page, a jump to a seq or to the first envelope, and a search that reads page after page.

``EnvelopeTail`` inherits ``TailReach``; the reads go through its ``pager`` (``tui.feed.LiveFeed`` is one)
in a worker, one at a time, with what is being read shown in a marker row (``paging``). A read for a
window that changed meanwhile is dropped (``_generation``).
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from textual.scroll_view import ScrollView

from ag2net.naming import ChannelRefError, resolve_channel_ref
from tui.models import TailItem, TailRow
from tui.widgets.tail_lines import Item

if TYPE_CHECKING:
    from textual.cache import LRUCache
    from textual.strip import Strip

    from tui.tail_model import TailModel

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


class TailReach(ScrollView):
    """The store reads of ``EnvelopeTail`` (a base of it, not a widget of its own)."""

    if TYPE_CHECKING:  # what EnvelopeTail has, that the reads move
        model: TailModel
        _cursor: int | None
        _mark: int
        _strips: LRUCache[tuple[int, bool], Strip]
        following: bool
        pending_count: int

        @property
        def visible_count(self) -> int: ...

        def append_many(self, items: Iterable[Item]) -> None: ...
        def _prepend(self, items: Sequence[Item], *, evict: bool) -> int: ...
        def _note_widths(self, items: Iterable[Item]) -> None: ...
        def _after_change(self, *, repaint: bool = True) -> None: ...
        def _view_changed(self, keep: int | None) -> None: ...
        def _move_cursor_to_line(self, line: int) -> None: ...
        def _scroll_cursor_into_view(self) -> None: ...
        def _scroll_to_end(self) -> None: ...
        def _set_following(self, value: bool) -> None: ...
        def _announce_cursor(self) -> None: ...
        def _request_channel(self, channel_id: str) -> None: ...
        def _cursor_line(self) -> int | None: ...
        @property
        def cursor_row(self) -> TailRow | None: ...
        def set_channel_filter(self, channel_id: str | None, *, load: bool = True) -> None: ...
        def follow(self) -> None: ...

    def _init_reach(self, limit: int) -> None:
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
        self._searched = 0

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
            self._request_channel(channel)
        self._jump(channel, seq)
        return True

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
            self._request_channel(channel)
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

    def _prepare_read(self) -> tuple[dict[str, int], int, list[str]]:
        """Before a read beyond the window: (channel sizes, the window's generation, the channels read)."""
        sizes = self._sizes()
        self._narrow_to_shown(sizes)
        return sizes, self._generation, self._paging_channels(sizes)

    def _edges(self, channels: list[str], sizes: dict[str, int], *, forward: bool) -> dict[str, int]:
        """Per channel, the seq a page newer than the window starts at (``forward``), else the one a page
        older than it ends at (0: none older)."""
        model = self.model
        if forward:
            return {cid: model.newer_from(cid, sizes.get(cid, 0)) for cid in channels}
        return {cid: model.older_of(cid, sizes.get(cid, 0)) for cid in channels}

    async def _read_beyond(self, edges: dict[str, int], *, forward: bool) -> list[TailItem]:
        assert self.pager is not None
        if forward:
            return await self.pager.page_newer(edges, self.page_size)
        return await self.pager.page_older(edges, self.page_size)

    async def _read_page(self, direction: str, then: int | None) -> None:
        assert self.pager is not None
        model = self.model
        sizes, generation, channels = self._prepare_read()
        forward = direction != "older"
        try:
            items = await self._read_beyond(self._edges(channels, sizes, forward=forward), forward=forward)
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
        self._announce_cursor()

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
        sizes, generation, channels = self._prepare_read()
        found: int | None = None
        while generation == self._generation:
            if forward and not model.detached:
                break
            edges = self._edges(channels, sizes, forward=forward)
            if not forward and not any(edges.values()):
                break
            items = await self._read_beyond(edges, forward=forward)
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


__all__ = ["PAGE", "TailPager", "TailReach"]

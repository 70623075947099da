"""The tail's rows and index, without a widget: what ``EnvelopeTail`` renders and moves its cursor over.

Rows are small tuples (seq, envelope, channel label) held oldest first up to ``limit``; the oldest are
dropped past it. A row has an absolute index that never changes while it is held (``base`` counts the
rows dropped so far), so a cursor or a cache can key on it. The *view* is the list of absolute indexes
that pass the channel filter and the filter, or None when nothing is filtered (every row is shown).
A *line* is a position in the view: line 0 is the oldest row shown.

An envelope is held once: a row whose ``envelope_id`` is already held in its channel is skipped
(the first page, the history pages and the live feed can each bring the same envelope when traffic
arrives while they read). Each channel seen gets a label unique among the channels held (``labels``), and the search's
matches among the shown rows are kept in order (``matches``) for "match k of n".

The rows are a *window* on the WAL: a contiguous run of it, in admission order, either across every
channel (``scope`` None) or of one channel (``scope`` its id). ``limit`` bounds how many rows are held,
never which ones can be reached: older and newer runs are paged in from the store (``EnvelopeTail`` asks
its pager) and the rows at the far end are dropped. Because the window is contiguous, a channel's held
seqs run without a gap from ``low`` to ``high``, and every envelope of it below ``low`` is older than
every row held: ``older_of`` is how many there are (seqs start at 1). A window whose newest row is not
the newest of its scope is ``detached``: live rows are not added to it (they would leave a gap).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

from ag2net.envelope import Envelope
from ag2net.filtering import FilterSpec
from ag2net.naming import SEPARATOR, channel_labels
from tui.models import TailRow

DEFAULT_LIMIT = 100_000

NameFor = Callable[[str], str]


class TailModel:
    """The rows of the WAL tail, the channel filter, the filter and the search."""

    def __init__(self, name_for: NameFor | None = None, *, limit: int = DEFAULT_LIMIT) -> None:
        if limit < 1:
            raise ValueError(f"tail limit must be at least 1, got {limit}")
        self.name_for: NameFor = name_for or (lambda agent_id: agent_id)
        self.limit = limit
        self.rows: list[TailRow] = []
        self.base = 0
        """Absolute index of ``rows[0]`` (how many rows were dropped or cleared before it)."""
        self.view: list[int] | None = None
        self.channel_filter: str | None = None
        self.filter_spec = FilterSpec()
        self.search_spec = FilterSpec()
        self.held_ids: dict[str, str] = {}
        """``{envelope_id: channel_id}`` of every row held (a second copy of one is never added)."""
        self.duplicates = 0
        """Rows skipped because their envelope was already held."""
        self.channel_types: dict[str, str] = {}
        """Every channel seen: its type, from the label its rows came with ('' when that names none)."""
        self.labels: dict[str, str] = {}
        """``{channel_id: label}``, unique among ``channel_types`` (see ``ag2net.naming.channel_labels``)."""
        self.labels_version = 0
        """Counts label changes (a new channel can lengthen every label's tail)."""
        self.matches: list[int] = []
        """Absolute indexes of the shown rows that match the search, oldest first."""
        self.scope: str | None = None
        """The channel the window is a run of (its rows only), or None: a run across every channel."""
        self.detached = False
        """The newest row held is not the newest of the scope (the window was paged away from live)."""
        self.low: dict[str, int] = {}
        """Per channel held, its lowest held seq."""
        self.high: dict[str, int] = {}
        """Per channel held, its highest held seq."""
        self.counts: dict[str, int] = {}
        """Per channel held, how many of its rows are held."""
        self.older: dict[str, int] = {}
        """Per channel with no row held: how many of its envelopes are older than the window (when known)."""
        self.newer: dict[str, int] = {}
        """Per channel with no row held, in a detached window: its lowest seq newer than the window."""

    # ------------------------------------------------------------------ sizes and lookups

    @property
    def row_count(self) -> int:
        """Rows held (after the limit dropped the oldest), regardless of filters."""
        return len(self.rows)

    @property
    def visible_count(self) -> int:
        """Rows that pass the channel filter and the filter."""
        return len(self.view) if self.view is not None else len(self.rows)

    def row(self, index: int) -> TailRow:
        """The row with absolute index ``index`` (it must be held)."""
        return self.rows[index - self.base]

    def index_at(self, line: int) -> int:
        """The absolute index of the row shown on ``line``."""
        return self.view[line] if self.view is not None else self.base + line

    def row_at(self, line: int) -> TailRow:
        return self.rows[self.index_at(line) - self.base]

    def line_of(self, index: int) -> int | None:
        """The line of ``index``, or of the closest shown row before it (else the first); None if empty."""
        count = self.visible_count
        if not count:
            return None
        if self.view is None:
            return min(max(index - self.base, 0), count - 1)
        pos = bisect_left(self.view, index)
        if pos < count and self.view[pos] == index:
            return pos
        return max(pos - 1, 0)

    def visible_rows(self) -> list[TailRow]:
        """The rows that pass the filters, oldest first (O(rows))."""
        if self.view is None:
            return list(self.rows)
        base = self.base
        return [self.rows[i - base] for i in self.view]

    def accepts(self, row: TailRow) -> bool:
        """Whether ``row`` passes the channel filter and the filter."""
        if self.channel_filter is not None and row.envelope.channel_id != self.channel_filter:
            return False
        return self.filter_spec.empty or self.filter_spec.matches(row.envelope, self.name_for, row.seq)

    def is_match(self, row: TailRow) -> bool:
        """Whether ``row`` matches the search (never when there is no search)."""
        return not self.search_spec.empty and self.search_spec.matches(row.envelope, self.name_for, row.seq)

    def channel_pairs(self) -> list[tuple[str, str]]:
        """``(channel_type, channel_id)`` of every channel held (type ``channel`` when unknown)."""
        return [(t or "channel", cid) for cid, t in self.channel_types.items()]

    def label_of(self, row: TailRow) -> str:
        """The label of ``row``'s channel in this tail (unique among the channels held), else its own."""
        return self.labels.get(row.envelope.channel_id) or row.channel

    def match_position(self, index: int | None) -> tuple[int, int]:
        """(k, n): ``index`` is the k-th of n search matches shown (k 0 when it is not a match)."""
        n = len(self.matches)
        if index is None or not n:
            return 0, n
        pos = bisect_left(self.matches, index)
        return (pos + 1 if pos < n and self.matches[pos] == index else 0), n

    def held_of(self, channel_id: str) -> int:
        """Rows of ``channel_id`` held."""
        return self.counts.get(channel_id, 0)

    def older_of(self, channel_id: str, size: int) -> int:
        """How many envelopes of ``channel_id`` (``size`` in its WAL) are older than every row held."""
        low = self.low.get(channel_id)
        if low is not None:
            return max(0, low - 1)
        if channel_id in self.older:
            return self.older[channel_id]
        # never held: an attached window of every channel is newer than all of it, a detached one or
        # another channel's window says nothing about it
        return size if self.scope is None and not self.detached else 0

    def newer_from(self, channel_id: str, size: int) -> int:
        """The lowest seq of ``channel_id`` newer than every row held (``size + 1``: none)."""
        high = self.high.get(channel_id)
        if high is not None:
            return high + 1
        if self.detached and channel_id in self.newer:
            return self.newer[channel_id]
        return size + 1

    def scope_channels(self, sizes: dict[str, int]) -> list[str]:
        """The channels the window runs over (one, or every channel with envelopes)."""
        if self.scope is not None:
            return [self.scope]
        return [cid for cid, size in sizes.items() if size]

    def older_total(self, sizes: dict[str, int]) -> int:
        """Envelopes of the scope older than the window."""
        return sum(self.older_of(cid, sizes.get(cid, 0)) for cid in self.scope_channels(sizes))

    def newer_total(self, sizes: dict[str, int]) -> int:
        """Envelopes of the scope newer than the window (0 unless detached)."""
        if not self.detached:
            return 0
        return sum(
            max(0, sizes.get(cid, 0) - self.newer_from(cid, sizes.get(cid, 0)) + 1)
            for cid in self.scope_channels(sizes)
        )

    # ------------------------------------------------------------------ changes

    def append(self, items: Iterable[tuple[Envelope, int | None, str]]) -> int:
        """Add rows at the end (dropping the oldest past the limit); returns how many of them are shown.

        Envelopes already held are skipped."""
        start = self.base + len(self.rows)
        new = self._new_rows(items)
        if not new:
            return 0
        self.rows.extend(new)
        self._note_held(new)
        if self.view is None:
            shown = len(new)
            added = range(start, start + len(new))
        else:
            accept = self.accepts
            before = len(self.view)
            self.view.extend(start + i for i, row in enumerate(new) if accept(row))
            shown = len(self.view) - before
            added = self.view[before:]
        if not self.search_spec.empty:
            self.matches.extend(i for i in added if self.is_match(self.rows[i - self.base]))
        self._trim()
        return shown

    def prepend(
        self, items: Iterable[tuple[Envelope, int | None, str]], *, evict: bool = False
    ) -> tuple[int, int]:
        """Add older rows before the first one; returns (kept, shown).

        Without ``evict`` it never pushes newer rows out: when the limit is reached the oldest of
        ``items`` are dropped. With ``evict`` (the reader paged up) every item is kept and the newest
        rows past the limit are dropped: the window is then ``detached`` from live.
        """
        room = self.limit - len(self.rows)
        if room <= 0 and not evict:
            return 0, 0
        new = self._new_rows(items, keep_last=None if evict else room)
        if not new:
            return 0, 0
        self.base -= len(new)
        self.rows[0:0] = new
        self._note_held(reversed(new))
        shown = len(new)
        if self.view is not None:
            accepted = [self.base + i for i, row in enumerate(new) if self.accepts(row)]
            self.view[0:0] = accepted
            shown = len(accepted)
        else:
            accepted = list(range(self.base, self.base + len(new)))
        if not self.search_spec.empty:
            self.matches[0:0] = [i for i in accepted if self.is_match(self.rows[i - self.base])]
        if evict:
            self._trim_newest()
        return len(new), shown

    def clear(self) -> None:
        """Forget every row (filters stay; absolute indexes keep growing)."""
        self.base += len(self.rows)
        self.rows.clear()
        self.held_ids.clear()
        self.matches.clear()
        self.low.clear()
        self.high.clear()
        self.counts.clear()
        self.older.clear()
        self.newer.clear()
        if self.view is not None:
            self.view.clear()

    def reset(
        self,
        scope: str | None,
        *,
        detached: bool,
        older: dict[str, int] | None = None,
        newer: dict[str, int] | None = None,
    ) -> None:
        """Forget every row and start a window on ``scope``: ``older``/``newer`` say, per channel of the
        scope, how many of its envelopes are older than the run about to be added and its lowest seq newer
        than it (a channel the run will hold needs neither)."""
        self.clear()
        self.scope = scope
        self.detached = detached
        self.older = dict(older or {})
        self.newer = dict(newer or {})

    def narrow(self, channel_id: str, size: int) -> dict[int, int]:
        """Keep only ``channel_id``'s rows (``size`` in its WAL; its run is contiguous too): the window's
        scope becomes that channel. Returns ``{old absolute index: new one}`` of the rows kept."""
        keep = [
            (self.base + i, row) for i, row in enumerate(self.rows) if row.envelope.channel_id == channel_id
        ]
        older = self.older_of(channel_id, size)
        newer = self.newer.get(channel_id)
        self.base += len(self.rows)
        moved = {old: self.base + i for i, (old, _row) in enumerate(keep)}
        rows = [row for _old, row in keep]
        self.rows = rows
        self.held_ids = {row.envelope.envelope_id: channel_id for row in rows}
        self.low.clear()
        self.high.clear()
        self.counts.clear()
        self.older = {channel_id: older} if not rows else {}
        self.newer = {channel_id: newer} if newer is not None and not rows else {}
        self._note_held(rows)
        self.scope = channel_id
        self._rebuild()
        if self.detached:  # an attached window stays attached: its newest rows of the channel are kept
            self.settle(sizes={channel_id: size})
        return moved

    def settle(self, sizes: dict[str, int]) -> None:
        """Work out ``detached`` again: whether any channel of the scope has envelopes newer than the window."""
        self.detached = any(
            self.newer_from(cid, sizes.get(cid, 0)) <= sizes.get(cid, 0) for cid in self.scope_channels(sizes)
        )

    def set_channel_filter(self, channel_id: str | None) -> bool:
        """Show only ``channel_id`` (None: every channel); False when it was already so."""
        if channel_id == self.channel_filter:
            return False
        self.channel_filter = channel_id
        self._rebuild()
        return True

    def set_filter(self, spec: FilterSpec | str | None) -> None:
        """Show only rows matching ``spec`` (a ``FilterSpec`` or a query string; raises ``FilterError``).

        A ``channel:`` term names a channel by its label among the channels held."""
        self.filter_spec = _spec(spec, self.channel_pairs())
        self._rebuild()

    def set_search(self, spec: FilterSpec | str | None) -> None:
        """Mark rows matching ``spec`` (raises ``FilterError`` for a bad query)."""
        self.search_spec = _spec(spec, self.channel_pairs())
        self._rematch()

    # ------------------------------------------------------------------ finding

    def find_match(self, line: int, *, forward: bool, inclusive: bool) -> int | None:
        """The first line from ``line`` (itself only when ``inclusive``) whose row matches the search."""
        count = self.visible_count
        search = self.search_spec
        name_for = self.name_for
        if forward:
            lines: Iterable[int] = range(line if inclusive else line + 1, count)
        else:
            lines = range(line if inclusive else line - 1, -1, -1)
        for candidate in lines:
            if candidate < 0:
                continue
            row = self.row_at(candidate)
            if search.matches(row.envelope, name_for, row.seq):
                return candidate
        return None

    def step_match(self, line: int | None, *, forward: bool) -> int | None:
        """The next (or previous) matching line after ``line``, wrapping around; None when none matches."""
        if self.search_spec.empty or not self.visible_count:
            return None
        line = self.visible_count - 1 if line is None else line
        found = self.find_match(line, forward=forward, inclusive=False)
        if found is None:
            found = self.find_match(-1 if forward else self.visible_count, forward=forward, inclusive=False)
        return found

    def line_of_seq(self, seq: int) -> int | None:
        """The line of the newest shown row with this per-channel ``seq``."""
        for line in range(self.visible_count - 1, -1, -1):
            if self.row_at(line).seq == seq:
                return line
        return None

    def line_of_envelope(self, envelope_id: str) -> int | None:
        """The line of the shown row carrying ``envelope_id``."""
        for line in range(self.visible_count - 1, -1, -1):
            if self.row_at(line).envelope.envelope_id == envelope_id:
                return line
        return None

    def recent_rows(self, channel_id: str, limit: int = 25) -> list[TailRow]:
        """The newest held rows of ``channel_id`` (filters ignored), newest first."""
        found: list[TailRow] = []
        for row in reversed(self.rows):
            if row.envelope.channel_id == channel_id:
                found.append(row)
                if len(found) >= limit:
                    break
        return found

    def find_envelope(self, envelope_id: str) -> TailRow | None:
        """Any held row (filtered or not) carrying ``envelope_id``."""
        for row in reversed(self.rows):
            if row.envelope.envelope_id == envelope_id:
                return row
        return None

    # ------------------------------------------------------------------ internals

    def _new_rows(
        self, items: Iterable[tuple[Envelope, int | None, str]], keep_last: int | None = None
    ) -> list[TailRow]:
        """Rows for ``items`` whose envelopes are not held yet (the last ``keep_last`` of them);
        registers their ids and channels. A batch without duplicates (the usual case) is checked with
        set operations only, and the index holds the envelopes' own id strings (nothing new to allocate
        or for the cyclic GC to walk), so appending stays close to the cost of building the rows."""
        items = list(items)
        if not items:
            return []
        held = self.held_ids
        ids = [env.envelope_id for env, _seq, _label in items]
        if len(set(ids)) == len(ids) and held.keys().isdisjoint(ids):
            new = [TailRow(seq, env, label) for env, seq, label in items]
        else:
            new = []
            batch: dict[str, str] = {}
            for env, seq, label in items:
                eid, cid = env.envelope_id, env.channel_id
                if eid and (held.get(eid) == cid or batch.get(eid) == cid):
                    self.duplicates += 1
                    continue
                batch[eid] = cid
                new.append(TailRow(seq, env, label))
        if keep_last is not None and len(new) > keep_last:
            new = new[len(new) - keep_last :]
        held.update((row.envelope.envelope_id, row.envelope.channel_id) for row in new)
        types = self.channel_types
        if any(types.get(cid, "channel") == "channel" for cid in {r.envelope.channel_id for r in new}):
            self._note_channels(new)
        return new

    def _note_channels(self, rows: list[TailRow]) -> None:
        """Learn the type of channels not seen before (from their rows' labels) and relabel if needed."""
        types = self.channel_types
        changed = False
        for row in rows:
            cid = row.envelope.channel_id
            known = types.get(cid)
            kind = row.channel.rpartition(SEPARATOR)[0] if SEPARATOR in row.channel else ""
            if known is None or (known == "channel" and kind and kind != known):
                types[cid] = kind
                changed = True
        if changed:
            # a row whose label names no type (an unknown channel) keeps the label it came with
            labels = channel_labels((t, cid) for cid, t in types.items() if t)
            if labels != self.labels:
                self.labels = labels
                self.labels_version += 1

    def _rematch(self) -> None:
        if self.search_spec.empty:
            self.matches = []
            return
        is_match = self.is_match
        base = self.base
        if self.view is None:
            self.matches = [base + i for i, row in enumerate(self.rows) if is_match(row)]
        else:
            rows = self.rows
            self.matches = [i for i in self.view if is_match(rows[i - base])]

    def _rebuild(self) -> None:
        if self.channel_filter is None and self.filter_spec.empty:
            self.view = None
        else:
            base = self.base
            accept = self.accepts
            self.view = [base + i for i, row in enumerate(self.rows) if accept(row)]
        self._rematch()

    def _trim(self) -> None:
        excess = len(self.rows) - self.limit
        if excess <= 0:
            return
        held = self.held_ids
        dropped = self.rows[:excess]
        for row in dropped:
            env = row.envelope
            if held.get(env.envelope_id) == env.channel_id:
                del held[env.envelope_id]
        self._forget_held(dropped, oldest=True)
        del self.rows[:excess]
        self.base += excess
        if self.view is not None:
            cut = bisect_left(self.view, self.base)
            if cut:
                del self.view[:cut]
        if self.matches:
            cut = bisect_left(self.matches, self.base)
            if cut:
                del self.matches[:cut]

    def _trim_newest(self) -> None:
        """Drop the newest rows past the limit (after a page of older rows): the window detaches."""
        excess = len(self.rows) - self.limit
        if excess <= 0:
            return
        self.detached = True
        held = self.held_ids
        dropped = self.rows[-excess:]
        for row in dropped:
            env = row.envelope
            if held.get(env.envelope_id) == env.channel_id:
                del held[env.envelope_id]
        self._forget_held(dropped, oldest=False)
        del self.rows[-excess:]
        end = self.base + len(self.rows)
        if self.view is not None:
            cut = bisect_left(self.view, end)
            del self.view[cut:]
        if self.matches:
            cut = bisect_left(self.matches, end)
            del self.matches[cut:]

    def _note_held(self, rows: Iterable[TailRow]) -> None:
        """Count ``rows`` (added at one end, in the order they move away from the window) in ``low``,
        ``high`` and ``counts``."""
        low, high, counts = self.low, self.high, self.counts
        for row in rows:
            cid = row.envelope.channel_id
            counts[cid] = counts.get(cid, 0) + 1
            seq = row.seq
            if seq is None:
                continue
            if cid not in low or seq < low[cid]:
                low[cid] = seq
            if cid not in high or seq > high[cid]:
                high[cid] = seq
        if self.older:
            for cid in self.older.keys() & low.keys():
                del self.older[cid]
        if self.newer:
            for cid in self.newer.keys() & high.keys():
                del self.newer[cid]

    def _forget_held(self, dropped: list[TailRow], *, oldest: bool) -> None:
        """``dropped`` rows left the window at its oldest (or newest) end: move each channel's bound past
        them (its run stays contiguous), or remember where it stands when none of it is held any more."""
        counts = self.counts
        edge: dict[str, int] = {}
        for row in dropped:
            cid = row.envelope.channel_id
            counts[cid] = counts.get(cid, 1) - 1
            if row.seq is not None:
                if oldest:
                    edge[cid] = max(edge.get(cid, 0), row.seq)
                else:
                    edge[cid] = min(edge.get(cid, row.seq), row.seq)
        for cid in {row.envelope.channel_id for row in dropped}:
            if counts.get(cid, 0) <= 0:
                counts.pop(cid, None)
                self.low.pop(cid, None)
                self.high.pop(cid, None)
                if cid in edge:
                    if oldest:
                        self.older[cid] = edge[cid]
                    else:
                        self.newer[cid] = edge[cid]
            elif cid in edge:
                if oldest:
                    self.low[cid] = edge[cid] + 1
                else:
                    self.high[cid] = edge[cid] - 1


def _spec(spec: FilterSpec | str | None, channels: list[tuple[str, str]] | None = None) -> FilterSpec:
    if spec is None:
        return FilterSpec()
    if isinstance(spec, str):
        return FilterSpec.parse(spec, channels)
    return spec


__all__ = ["DEFAULT_LIMIT", "TailModel"]

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
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable

from ag2net.envelope import Envelope
from ag2net.naming import SEPARATOR, channel_labels
from tui.filtering import FilterSpec
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

    # ------------------------------------------------------------------ changes

    def append(self, items: Iterable[tuple[Envelope, int | None, str]]) -> int:
        """Add rows at the end (dropping the oldest past the limit); returns how many of them are shown.

        Envelopes already held are skipped."""
        start = self.base + len(self.rows)
        new = self._new_rows(items)
        if not new:
            return 0
        self.rows.extend(new)
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

    def prepend(self, items: Iterable[tuple[Envelope, int | None, str]]) -> tuple[int, int]:
        """Add older rows before the first one; returns (kept, shown).

        Never pushes newer rows out: when the limit is reached the oldest of ``items`` are dropped.
        """
        room = self.limit - len(self.rows)
        if room <= 0:
            return 0, 0
        new = self._new_rows(items, keep_last=room)
        if not new:
            return 0, 0
        self.base -= len(new)
        self.rows[0:0] = new
        shown = len(new)
        if self.view is not None:
            accepted = [self.base + i for i, row in enumerate(new) if self.accepts(row)]
            self.view[0:0] = accepted
            shown = len(accepted)
        else:
            accepted = list(range(self.base, self.base + len(new)))
        if not self.search_spec.empty:
            self.matches[0:0] = [i for i in accepted if self.is_match(self.rows[i - self.base])]
        return len(new), shown

    def clear(self) -> None:
        """Forget every row (filters stay; absolute indexes keep growing)."""
        self.base += len(self.rows)
        self.rows.clear()
        self.held_ids.clear()
        self.matches.clear()
        if self.view is not None:
            self.view.clear()

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
        for row in self.rows[:excess]:
            env = row.envelope
            if held.get(env.envelope_id) == env.channel_id:
                del held[env.envelope_id]
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


def _spec(spec: FilterSpec | str | None, channels: list[tuple[str, str]] | None = None) -> FilterSpec:
    if spec is None:
        return FilterSpec()
    if isinstance(spec, str):
        return FilterSpec.parse(spec, channels)
    return spec


__all__ = ["DEFAULT_LIMIT", "TailModel"]

"""An append-only in-memory WAL (``WalLog``) and its O(1) read-only prefixes (``WalSlice``).

Why it exists: a windowed view must say how many visible messages it elided and from whom, which over a
plain list costs a scan of the whole prefix. A ``WalLog`` keeps, per (participant, renderer), an index of
the positions of the envelopes that participant can see and the renderer renders, built incrementally as
the log grows. A windowed view projecting a ``WalSlice`` of the log then costs O(window + log n + distinct
speakers) plus the envelopes appended since that (participant, renderer) last projected; the first
projection for a new pair pays one O(n) scan.

Bounded memory. A log may hold only its newest envelopes in memory: ``trim(keep)`` drops the older ones
(positions stay global: ``len(log)`` still counts every envelope) and a *cold reader* given to the log
(``cold(start, stop) -> envelopes``, e.g. a read from the store) fetches them back in blocks when an index
or a reader reaches below ``base``. The per-(participant, renderer) indexes keep their counts, so a windowed
view whose window lies in the resident part still costs O(window).

Contract: the log is append-only (no removal, no replacement of items), and a renderer used with it is
pure: the same envelope always renders to ``None`` or always to a string. Renderers are memo keys and are
compared with ``==`` (so ``adapter.render_envelope`` of one adapter instance is one key, while a fresh
lambda per call is a new key and gets no reuse). Only ``_MAX_INDEXES`` pairs are kept per log.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import islice
from typing import Any, overload

from ag2net.envelope import Envelope

_MAX_INDEXES = 64
_COLD_BLOCK = 512  # envelopes fetched per cold read
_COLD_BLOCKS = 8  # cold blocks kept per log
_KEEP_POSITIONS = 1024  # index positions kept below the resident part, for windows reaching back
ENVELOPE_OVERHEAD = 560  # bytes an in-memory Envelope costs beyond its JSON text, roughly (measured)

ColdReader = Callable[[int, int], list[Envelope]]


class VisibleIndex:
    """Where the envelopes visible to one participant and rendered by one renderer sit in a log.

    ``positions`` holds their log indices in order, less the first ``dropped`` ones (forgotten when the
    log trimmed them); ``first_seen`` maps each sender to the ordinal (among all such envelopes, dropped
    ones included) of its first one, so "who spoke among the first k" is a dict walk.
    """

    __slots__ = ("dropped", "first_seen", "participant_id", "positions", "render", "scanned")

    def __init__(self, participant_id: str, render: Callable[[Envelope], str | None]) -> None:
        self.participant_id = participant_id
        self.render = render
        self.scanned = 0
        self.dropped = 0
        self.positions = array("I")
        self.first_seen: dict[str, int] = {}

    def __len__(self) -> int:
        return self.dropped + len(self.positions)

    def count_before(self, end: int) -> int:
        """How many indexed envelopes sit at positions ``< end``."""
        return self.dropped + bisect_left(self.positions, end)

    def positions_between(self, lo: int, hi: int) -> Sequence[int] | None:
        """The log positions of indexed envelopes number ``lo`` to ``hi - 1``; None when forgotten."""
        if lo < self.dropped:
            return None
        return self.positions[lo - self.dropped : hi - self.dropped]

    def advance(self, log: WalLog, end: int) -> None:
        """Index ``log[scanned:end]`` (each envelope is rendered once per index)."""
        pid = self.participant_id
        render = self.render
        positions = self.positions
        first_seen = self.first_seen
        i = self.scanned
        try:
            for env in log.iter_range(i, end):
                audience = env.audience
                if (env.sender_id == pid or audience is None or pid in audience) and render(env) is not None:
                    if env.sender_id not in first_seen:
                        first_seen[env.sender_id] = self.dropped + len(positions)
                    positions.append(i)
                i += 1
        finally:
            self.scanned = i  # a renderer that raises leaves the index consistent up to that envelope

    def forget_before(self, base: int) -> None:
        """Drop positions below ``base``, keeping the last ``_KEEP_POSITIONS`` of them."""
        positions = self.positions
        cut = bisect_left(positions, base) - _KEEP_POSITIONS
        if cut > 0:
            del positions[:cut]
            self.dropped += cut


class WalLog(Sequence[Envelope]):
    """One channel's WAL in admission order, appended to as envelopes are admitted; hands out cheap
    prefixes. Positions are global: ``base`` envelopes before the resident ones may have been trimmed and
    are read back through the log's cold reader."""

    __slots__ = (
        "_base",
        "_cold",
        "_cold_blocks",
        "_index_by_id",
        "_indexes",
        "_items",
        "_sizes",
        "nbytes",
    )

    def __init__(
        self, envelopes: Iterable[Envelope] = (), *, base: int = 0, cold: ColdReader | None = None
    ) -> None:
        if base < 0:
            raise ValueError(f"WalLog base must be >= 0, got {base}")
        if base and cold is None:
            raise ValueError("a WalLog that starts past position 0 needs a cold reader")
        self._items: list[Envelope] = []
        self._sizes = array("I")
        self._base = base
        self._cold = cold
        self._cold_blocks: OrderedDict[int, list[Envelope]] = OrderedDict()
        self._index_by_id: dict[str, int] = {}
        self._indexes: OrderedDict[tuple[str, Any], VisibleIndex] = OrderedDict()
        self.nbytes = 0  # estimated memory held by the resident envelopes
        self.extend(envelopes)

    # --- appending and trimming ---

    def append(self, envelope: Envelope, size: int | None = None) -> int:
        """Add the next envelope; ``size`` is its JSON length when known. Returns its estimated cost."""
        if envelope.envelope_id:
            self._index_by_id.setdefault(envelope.envelope_id, self._base + len(self._items))
        self._items.append(envelope)
        cost = ENVELOPE_OVERHEAD + (size if size is not None else _approx_size(envelope))
        self._sizes.append(min(cost, 0xFFFFFFFF))
        self.nbytes += cost
        return cost

    def extend(self, envelopes: Iterable[Envelope]) -> None:
        for env in envelopes:
            self.append(env)

    @property
    def base(self) -> int:
        """How many of the oldest envelopes are not held in memory."""
        return self._base

    @property
    def resident(self) -> int:
        """How many envelopes are held in memory."""
        return len(self._items)

    @property
    def can_trim(self) -> bool:
        return self._cold is not None

    def trim(self, keep: int) -> int:
        """Keep only the newest ``keep`` envelopes in memory; returns the bytes released (estimate)."""
        if self._cold is None:
            raise ValueError("this WalLog has no cold reader; it cannot give envelopes back")
        drop = len(self._items) - max(0, keep)
        if drop <= 0:
            return 0
        by_id = self._index_by_id
        for env in self._items[:drop]:
            by_id.pop(env.envelope_id, None)
        freed = sum(self._sizes[:drop])
        del self._items[:drop]
        del self._sizes[:drop]
        self._base += drop
        self.nbytes -= freed
        for idx in self._indexes.values():
            idx.forget_before(self._base)
        return freed

    # --- reading ---

    def __len__(self) -> int:
        return self._base + len(self._items)

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> list[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | list[Envelope]:
        base = self._base
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if start >= base and step == 1:
                return self._items[start - base : max(stop, start) - base]
            if step == 1:
                return list(self.iter_range(start, stop))
            return [self[i] for i in range(start, stop, step)]
        if index < 0:
            index += len(self)
        if index >= base:
            return self._items[index - base]
        if index < 0:
            raise IndexError("WalLog index out of range")
        return self._cold_get(index)

    def __iter__(self) -> Iterator[Envelope]:
        return self.iter_range(0, len(self))

    def iter_range(self, start: int, stop: int) -> Iterator[Envelope]:
        """Envelopes at positions ``start`` to ``stop - 1`` (clamped), cold ones read in blocks."""
        stop = min(stop, len(self))
        i = max(0, start)
        while i < stop:
            # Re-read base at every chunk: the log may be trimmed while a consumer is suspended.
            base = self._base
            if i < base:
                block_no, offset = divmod(i, _COLD_BLOCK)
                end = min(stop, base, (block_no + 1) * _COLD_BLOCK)
                chunk = self._cold_block(block_no)[offset : offset + end - i]
            else:
                chunk = self._items[i - base : min(stop, i + _COLD_BLOCK) - base]
            if not chunk:
                return
            i += len(chunk)
            yield from chunk

    def _cold_get(self, index: int) -> Envelope:
        block_no, offset = divmod(index, _COLD_BLOCK)
        return self._cold_block(block_no)[offset]

    def _cold_block(self, block_no: int) -> list[Envelope]:
        blocks = self._cold_blocks
        block = blocks.get(block_no)
        start = block_no * _COLD_BLOCK
        stop = min(start + _COLD_BLOCK, self._base)
        if block is not None and len(block) == stop - start:
            blocks.move_to_end(block_no)
            return block
        # Not read yet, or read while the block was still partly resident (a later trim moved base).
        assert self._cold is not None
        block = self._cold(start, stop)
        if len(block) != stop - start:
            raise LookupError(
                f"the WAL store returned {len(block)} envelopes for positions {start}..{stop - 1}"
            )
        blocks[block_no] = block
        if len(blocks) > _COLD_BLOCKS:
            blocks.popitem(last=False)
        return block

    def __repr__(self) -> str:
        return f"WalLog(<{len(self)} envelopes, {len(self._items)} in memory>)"

    def prefix(self, end: int | None = None) -> WalSlice:
        """The first ``end`` envelopes (all when None) as a read-only slice; O(1), nothing is copied."""
        n = len(self)
        if end is None or end > n:
            end = n
        elif end < 0:
            end = max(0, n + end)
        return WalSlice(self, end)

    def index_of(self, envelope_id: str) -> int | None:
        """Position of a resident envelope in the log, or None when it is not held in memory."""
        return self._index_by_id.get(envelope_id)

    def until(self, envelope_id: str) -> WalSlice:
        """Everything strictly before ``envelope_id``; the whole log when the id is not resident."""
        i = self._index_by_id.get(envelope_id)
        return WalSlice(self, len(self) if i is None else i)

    def visible_index(
        self, participant_id: str, render: Callable[[Envelope], str | None], end: int
    ) -> VisibleIndex:
        """The (participant, renderer) index, brought up to at least ``end``."""
        key = (participant_id, render)
        idx = self._indexes.get(key)
        if idx is None:
            idx = VisibleIndex(participant_id, render)
            self._indexes[key] = idx
            if len(self._indexes) > _MAX_INDEXES:
                self._indexes.popitem(last=False)
        else:
            self._indexes.move_to_end(key)
        if idx.scanned < end:
            idx.advance(self, end)
        return idx

    def indexed(self, participant_id: str, render: Callable[[Envelope], str | None]) -> VisibleIndex | None:
        """The (participant, renderer) index as it stands, or None when the log keeps none; nothing is
        scanned or created (a reader can tell a warm index from the O(n) scan a first one costs)."""
        return self._indexes.get((participant_id, render))

    def rebuild_index(
        self, participant_id: str, render: Callable[[Envelope], str | None], end: int
    ) -> VisibleIndex:
        """A fresh index for the pair, scanned from position 0 (when a window reaches forgotten ones)."""
        self._indexes.pop((participant_id, render), None)
        return self.visible_index(participant_id, render, end)


def _approx_size(env: Envelope) -> int:
    data = env.event_data
    text = data.get("text") if isinstance(data, dict) else None
    return 300 + (len(text) if isinstance(text, str) else 200)


class Prefix(Sequence[Envelope]):
    """The first ``end`` envelopes of an indexable source, read in place (never copied): of a list
    (``Prefix(items, end)``: what the scrubber hands the expectation evaluators) or of a ``WalLog``
    (``WalSlice``)."""

    __slots__ = ("_end", "_source")
    _label = "prefix"  # what an IndexError calls it

    def __init__(self, source: Any, end: int) -> None:
        self._source = source
        self._end = end

    def __len__(self) -> int:
        return self._end

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | Sequence[Envelope]:
        if isinstance(index, slice):
            return self._slice(index)
        if index < 0:
            index += self._end
        if not 0 <= index < self._end:
            raise IndexError(f"{self._label} index out of range")
        return self._source[index]

    def _slice(self, index: slice) -> Sequence[Envelope]:
        return self._source[: self._end][index]

    def __iter__(self) -> Iterator[Envelope]:
        return islice(self._source, self._end)

    def __reversed__(self) -> Iterator[Envelope]:
        source = self._source
        for i in range(self._end - 1, -1, -1):
            yield source[i]


class WalSlice(Prefix):
    """A read-only view of the first ``end`` envelopes of a ``WalLog``: what views are given to project."""

    __slots__ = ()
    _label = "WalSlice"

    def __init__(self, log: WalLog, end: int) -> None:
        if not 0 <= end <= len(log):
            raise ValueError(f"WalSlice end must be between 0 and {len(log)}, got {end}")
        super().__init__(log, end)

    @property
    def log(self) -> WalLog:
        return self._source

    @property
    def end(self) -> int:
        return self._end

    def _slice(self, index: slice) -> Sequence[Envelope]:
        start, stop, step = index.indices(self._end)
        log: WalLog = self._source
        if start == 0 and step == 1:
            return WalSlice(log, max(stop, 0))
        if step == 1:
            return list(log.iter_range(start, stop))
        return [log[i] for i in range(start, stop, step)]

    def __iter__(self) -> Iterator[Envelope]:
        return self._source.iter_range(0, self._end)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (WalSlice, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"WalSlice(<{self._end} of {len(self._source)} envelopes>)"


def backing(wal: Iterable[Envelope]) -> tuple[Sequence[Envelope], int, WalLog | None]:
    """(indexable items, end, log-or-None) for any WAL argument a view may receive."""
    if isinstance(wal, WalSlice):
        log = wal.log
        return (log._items if log.base == 0 else log), wal.end, log
    if isinstance(wal, WalLog):
        return (wal._items if wal.base == 0 else wal), len(wal), wal
    if isinstance(wal, Sequence):
        return wal, len(wal), None
    items = list(wal)
    return items, len(items), None


__all__ = ["ENVELOPE_OVERHEAD", "ColdReader", "Prefix", "VisibleIndex", "WalLog", "WalSlice", "backing"]

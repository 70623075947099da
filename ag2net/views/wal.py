"""An append-only in-memory WAL (``WalLog``) and its O(1) read-only prefixes (``WalSlice``).

Why it exists: a windowed view must say how many visible messages it elided and from whom, which over a
plain list costs a scan of the whole prefix. A ``WalLog`` keeps, per (participant, renderer), an index of
the positions of the envelopes that participant can see and the renderer renders, built incrementally as
the log grows. A windowed view projecting a ``WalSlice`` of the log then costs O(window + log n + distinct
speakers) plus the envelopes appended since that (participant, renderer) last projected; the first
projection for a new pair pays one O(n) scan.

Contract: the log is append-only (no removal, no replacement of items), and a renderer used with it is
pure: the same envelope always renders to ``None`` or always to a string. Renderers are memo keys and are
compared with ``==`` (so ``adapter.render_envelope`` of one adapter instance is one key, while a fresh
lambda per call is a new key and gets no reuse). Only ``_MAX_INDEXES`` pairs are kept per log.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, overload

from ag2net.envelope import Envelope

_MAX_INDEXES = 64


class VisibleIndex:
    """Where the envelopes visible to one participant and rendered by one renderer sit in a log.

    ``positions`` holds their log indices in order; ``first_seen`` maps each sender to the position (in
    ``positions``) of its first such envelope, so "who spoke among the first k" is a dict walk.
    """

    __slots__ = ("first_seen", "participant_id", "positions", "render", "scanned")

    def __init__(self, participant_id: str, render: Callable[[Envelope], str | None]) -> None:
        self.participant_id = participant_id
        self.render = render
        self.scanned = 0
        self.positions = array("I")
        self.first_seen: dict[str, int] = {}

    def advance(self, items: list[Envelope], end: int) -> None:
        """Index ``items[scanned:end]`` (each envelope is rendered once per index)."""
        pid = self.participant_id
        render = self.render
        positions = self.positions
        first_seen = self.first_seen
        i = self.scanned
        try:
            while i < end:
                env = items[i]
                audience = env.audience
                if (env.sender_id == pid or audience is None or pid in audience) and render(env) is not None:
                    if env.sender_id not in first_seen:
                        first_seen[env.sender_id] = len(positions)
                    positions.append(i)
                i += 1
        finally:
            self.scanned = i  # a renderer that raises leaves the index consistent up to that envelope


class WalLog(Sequence[Envelope]):
    """One channel's WAL held in memory, appended to in admission order; hands out cheap prefixes."""

    __slots__ = ("_index_by_id", "_indexes", "_items")

    def __init__(self, envelopes: Iterable[Envelope] = ()) -> None:
        self._items: list[Envelope] = []
        self._index_by_id: dict[str, int] = {}
        self._indexes: OrderedDict[tuple[str, Any], VisibleIndex] = OrderedDict()
        self.extend(envelopes)

    def append(self, envelope: Envelope) -> None:
        if envelope.envelope_id:
            self._index_by_id.setdefault(envelope.envelope_id, len(self._items))
        self._items.append(envelope)

    def extend(self, envelopes: Iterable[Envelope]) -> None:
        for env in envelopes:
            self.append(env)

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> list[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | list[Envelope]:
        return self._items[index]

    def __iter__(self) -> Iterator[Envelope]:
        return iter(self._items)

    def __repr__(self) -> str:
        return f"WalLog(<{len(self._items)} envelopes>)"

    def prefix(self, end: int | None = None) -> WalSlice:
        """The first ``end`` envelopes (all when None) as a read-only slice; O(1), nothing is copied."""
        n = len(self._items)
        if end is None or end > n:
            end = n
        elif end < 0:
            end = max(0, n + end)
        return WalSlice(self, end)

    def index_of(self, envelope_id: str) -> int | None:
        """Position of an envelope in the log, or None when it is not there."""
        return self._index_by_id.get(envelope_id)

    def until(self, envelope_id: str) -> WalSlice:
        """Everything strictly before ``envelope_id``; the whole log when the id is unknown."""
        i = self._index_by_id.get(envelope_id)
        return WalSlice(self, len(self._items) if i is None else i)

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
            idx.advance(self._items, end)
        return idx


class WalSlice(Sequence[Envelope]):
    """A read-only view of the first ``end`` envelopes of a ``WalLog``: what views are given to project."""

    __slots__ = ("_end", "_log")

    def __init__(self, log: WalLog, end: int) -> None:
        if not 0 <= end <= len(log):
            raise ValueError(f"WalSlice end must be between 0 and {len(log)}, got {end}")
        self._log = log
        self._end = end

    @property
    def log(self) -> WalLog:
        return self._log

    @property
    def end(self) -> int:
        return self._end

    def __len__(self) -> int:
        return self._end

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | Sequence[Envelope]:
        if isinstance(index, slice):
            start, stop, step = index.indices(self._end)
            if start == 0 and step == 1:
                return WalSlice(self._log, max(stop, 0))
            return self._log._items[: self._end][index]
        if index < 0:
            index += self._end
        if not 0 <= index < self._end:
            raise IndexError("WalSlice index out of range")
        return self._log._items[index]

    def __iter__(self) -> Iterator[Envelope]:
        items = self._log._items
        for i in range(self._end):
            yield items[i]

    def __reversed__(self) -> Iterator[Envelope]:
        items = self._log._items
        for i in range(self._end - 1, -1, -1):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (WalSlice, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"WalSlice(<{self._end} of {len(self._log)} envelopes>)"


def backing(wal: Iterable[Envelope]) -> tuple[Sequence[Envelope], int, WalLog | None]:
    """(indexable items, end, log-or-None) for any WAL argument a view may receive."""
    if isinstance(wal, WalSlice):
        return wal.log._items, wal.end, wal.log
    if isinstance(wal, WalLog):
        return wal._items, len(wal), wal
    if isinstance(wal, Sequence):
        return wal, len(wal), None
    items = list(wal)
    return items, len(items), None


__all__ = ["VisibleIndex", "WalLog", "WalSlice", "backing"]

"""When the workbench lets Python's cycle collector run: never mid-keystroke for a full collection.

CPython's full (generation 2) collection walks every tracked object. With a hub, its history and a
tail of thousands of rows in one process, one such walk costs 100–400 ms, and under live traffic
one starts every few seconds: a key pressed then waits for it (the workbench's key-to-frame p95).
At startup the same walks run over the hub's freshly loaded state again and again before the first
frame.

``IdleCollector`` changes when collection happens, not whether:

- From ``hold()`` (the app loading; for ``ag2net tui``, ``tui.launch`` starting, before the workbench's
  modules are imported and the hub is opened) until ``settle()`` (the first page painted) the collector is
  off. Then one full collection runs (after the first frame, so it never delays it), and everything
  still alive — modules, the hub's state, the widgets of the main screen, all of which live as long
  as the workbench — is moved out of the collector's reach with ``gc.freeze()``. The collection
  first means no garbage is frozen; an object frozen here that becomes garbage later is only
  reclaimed by reference counting (cycles among such objects wait for ``release()``).
- Young generations keep being collected as usual (they are small and quick); the automatic full
  collection is switched off and ``tick()`` runs one instead once CPython would have (ten
  generation-1 collections since the last full one) and the person has not pressed a key or
  moved the mouse for ``IDLE_SECONDS`` — or, whatever they do, ``OVERDUE_SECONDS`` after it became
  due, so memory held by reference cycles is still given back.
- ``release()`` puts the collector back as it was (the app stopped).
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

IDLE_SECONDS = 1.5
"""No key press or mouse action for this long: a good moment for a full collection."""

OVERDUE_SECONDS = 60.0
"""A full collection due for this long runs even while the person keeps typing."""

DUE_AFTER_YOUNG = 10
"""Generation-1 collections after which a full one is due (CPython's own default threshold)."""

NEVER = 1_000_000_000
"""A generation-2 threshold CPython never reaches: no automatic full collections."""


class IdleCollector:
    """The workbench's garbage-collection policy (see the module docstring)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._saved: tuple[bool, tuple[int, int, int]] | None = None
        self._settled = False
        self._last_input = clock()
        self._young_at_last_full = 0
        self._due_since: float | None = None
        self.full_collections = 0
        """Full collections this policy ran (for tests and the bench)."""
        self.last_pause_seconds = 0.0
        """How long the last full collection took."""
        self.settle_pause_seconds = 0.0
        """How long the collection and freeze after the first page took."""

    @property
    def active(self) -> bool:
        return self._saved is not None

    def hold(self) -> None:
        """Switch the collector off while the workbench starts (until ``settle``)."""
        if self._saved is not None:
            return
        self._saved = (gc.isenabled(), gc.get_threshold())
        gc.disable()

    def settle(self) -> None:
        """The first page is painted: freeze what is alive, collect young generations only from now on."""
        if self._saved is None or self._settled:
            return
        self._settled = True
        started = time.perf_counter()
        gc.collect()
        gc.freeze()
        self.settle_pause_seconds = time.perf_counter() - started
        threshold0, threshold1, _ = self._saved[1]
        gc.set_threshold(threshold0, threshold1, NEVER)
        self._young_at_last_full = _young_collections()
        self._last_input = self._clock()
        if self._saved[0]:
            gc.enable()

    def note_input(self) -> None:
        """The person pressed a key or used the mouse."""
        self._last_input = self._clock()

    @property
    def due(self) -> bool:
        return _young_collections() - self._young_at_last_full >= DUE_AFTER_YOUNG

    def tick(self) -> bool:
        """Run a full collection if one is due and now is a good moment; True when one ran."""
        if not self._settled or self._saved is None or not self._saved[0]:
            return False
        now = self._clock()
        if not self.due:
            self._due_since = None
            return False
        if self._due_since is None:
            self._due_since = now
        idle = now - self._last_input >= IDLE_SECONDS
        overdue = now - self._due_since >= OVERDUE_SECONDS
        if not (idle or overdue):
            return False
        started = time.perf_counter()
        gc.collect()
        self.last_pause_seconds = time.perf_counter() - started
        self.full_collections += 1
        self._young_at_last_full = _young_collections()
        self._due_since = None
        return True

    def release(self) -> None:
        """Give the collector back as it was before ``hold`` (frozen objects become collectable again)."""
        if self._saved is None:
            return
        enabled, threshold = self._saved
        self._saved = None
        if self._settled:
            gc.unfreeze()
        gc.set_threshold(*threshold)
        if enabled:
            gc.enable()
        else:
            gc.disable()


def _young_collections() -> int:
    return gc.get_stats()[1]["collections"]


__all__ = ["IdleCollector"]

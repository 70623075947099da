"""Bringing a ``WalLog``'s visibility indexes up to date without blocking the event loop.

A windowed view over a ``WalLog`` costs O(window) once the log keeps the (participant, renderer) index, but
the first index of a pair is a scan of every envelope: on a channel whose old envelopes live in the store
only (a hub just opened on it), reading 100,000 of them back, decoding and rendering each, takes seconds.
``warm_indexes`` does that scan ``SLICE`` envelopes at a time with a yield to the event loop before each
slice, so a workbench (or another coroutine of the hub) keeps running meanwhile; all the pairs asked for
advance together slice by slice, so each block of old envelopes is read back from the store once for all
of them (the log keeps its last few cold blocks), not once per participant. The indexes stay in the log
(the next projections, the agents' turns included, reuse them). It scans nothing when they are warm.

Across a restart. ``index_summaries(log, render)`` gives what an index must know for the next projections
(how far it scanned, how many it counts, each sender's first ordinal, the newest ``KEPT`` positions) as
JSON-ready dicts, and ``restore_indexes`` installs them in a log of exactly that length: a hub that kept
them beside its adapter states at a clean shutdown would start with warm counts, and its first dry run
would read the window only (the hub does not do so yet).

``windowed(policy)`` and ``per_envelope(policy)`` name the built-in views whose cost the callers (the
debugger's visibility matrix, the hub's dry-run probe) can bound with an index: exactly those classes,
since a subclass may project differently.
"""

from __future__ import annotations

import asyncio
from array import array
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from ag2net.envelope import Envelope
from ag2net.views.builtin import FullTranscript, NamedTranscript, NamedWindowedSummary, WindowedSummary
from ag2net.views.wal import WalLog

SLICE = 1024
"""Envelopes read back and indexed between two yields to the event loop."""

PER_ENVELOPE = (FullTranscript, NamedTranscript)
"""Views whose event for an envelope depends on that envelope alone (one event per visible rendered one)."""

WINDOWED = (WindowedSummary, NamedWindowedSummary)
"""Views that show the last ``recent_n`` visible rendered envelopes and summarise the rest."""

Render = Callable[[Envelope], "str | None"]


def per_envelope(policy: Any) -> bool:
    """True for the built-in transcripts (exactly those classes): each visible rendered envelope becomes
    one event that depends on that envelope alone, so projecting part of the WAL gives those events."""
    return type(policy) in PER_ENVELOPE


def windowed(policy: Any) -> bool:
    """True for the built-in windowed views (exactly those classes): the last ``recent_n`` visible
    rendered envelopes after a summary of the rest (its count is the index's)."""
    return type(policy) in WINDOWED


def _retained(log: WalLog, pid: str, render: Render, n: int, recent_n: int) -> bool:
    """Whether the pair's index still holds the positions of the last ``recent_n`` it counts below ``n``
    (a trimmed log forgets old ones; a window reaching them needs the index rebuilt)."""
    idx = log.indexed(pid, render)
    if idx is None:
        return False
    hi = idx.count_before(n)
    return idx.positions_between(max(0, hi - recent_n), hi) is not None


async def warm_indexes(
    log: WalLog, pairs: Sequence[tuple[str, Render, int]], n: int, *, step: int = SLICE
) -> None:
    """Bring the log's index of each ``(participant, renderer, recent_n)`` up to position ``n``, ``step``
    envelopes at a time for all of them together, yielding before each slice; a pair whose window of
    ``recent_n`` would reach positions the index forgot (the log was trimmed) is rebuilt, in slices too."""
    todo = list(dict.fromkeys(pairs))
    for attempt in range(2):
        if attempt:
            for pid, render, _ in todo:
                log.rebuild_index(pid, render, 0)
        # each pass advances every pair that is behind by one slice from where its index stands (re-read
        # each time: another coroutine may advance or rebuild it meanwhile); pairs scanned together read
        # the same cold blocks. Bounded: a pair whose index the log evicts (past its 64 pairs) gets no
        # further than the projection that needs it would take it anyway
        for _ in range(n // step + 2):
            behind = [(pid, render) for pid, render, _ in todo if _scanned(log, pid, render) < n]
            if not behind:
                break
            await asyncio.sleep(0)
            for pid, render in behind:
                log.visible_index(pid, render, min(n, _scanned(log, pid, render) + step))
        todo = [pair for pair in todo if not _retained(log, pair[0], pair[1], n, pair[2])]
        if not todo:
            return


KEPT = 256
"""Positions an index summary keeps (the newest): enough for windows of up to that many envelopes."""


def index_summaries(log: WalLog, render: Render) -> dict[str, dict[str, Any]]:
    """The log's indexes for ``render`` that cover the whole log, as JSON-ready summaries by participant:
    how far scanned, how many visible rendered envelopes, each sender's first ordinal and the newest
    ``KEPT`` positions. What a hub could keep beside its adapter states at a clean shutdown, so that the
    next one starts with warm counts instead of a scan of every stored envelope (``restore_indexes``)."""
    out: dict[str, dict[str, Any]] = {}
    n = len(log)
    for pid, idx_render in list(log._indexes):
        idx = log.indexed(pid, idx_render)
        if idx is None or idx_render != render or idx.scanned != n:
            continue
        out[pid] = {
            "scanned": idx.scanned,
            "count": len(idx),
            "first_seen": dict(idx.first_seen),
            "positions": list(idx.positions[-KEPT:]),
        }
    return out


def restore_indexes(log: WalLog, render: Render, summaries: Any) -> list[str]:
    """Install ``index_summaries`` taken when the log was exactly as long as it is now (anything else is
    skipped: the counts would be wrong), for the pairs the log keeps no index of; returns the participants
    installed. A window reaching below the kept positions rebuilds that index, as after a trim."""
    n = len(log)
    done: list[str] = []
    if not isinstance(summaries, dict):
        return done
    for pid, summary in summaries.items():
        try:
            scanned, count = summary["scanned"], summary["count"]
            first_seen = {str(k): int(v) for k, v in summary["first_seen"].items()}
            positions = array("I", summary["positions"])
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError):
            continue
        ordered = all(a < b for a, b in pairwise(positions))
        if (
            not isinstance(pid, str)
            or scanned != n
            or not isinstance(count, int)
            or not len(positions) <= count <= n
            or not ordered
            or (positions and positions[-1] >= n)
            or any(not 0 <= v < count for v in first_seen.values())
            or log.indexed(pid, render) is not None
        ):
            continue
        idx = log.visible_index(pid, render, 0)
        idx.positions = positions
        idx.dropped = count - len(positions)
        idx.first_seen = first_seen
        idx.scanned = n
        done.append(pid)
    return done


def _scanned(log: WalLog, pid: str, render: Render) -> int:
    idx = log.indexed(pid, render)
    return 0 if idx is None else idx.scanned


__all__ = [
    "KEPT",
    "PER_ENVELOPE",
    "SLICE",
    "WINDOWED",
    "index_summaries",
    "per_envelope",
    "restore_indexes",
    "warm_indexes",
    "windowed",
]

"""Bringing a ``WalLog``'s visibility indexes up to date without blocking the event loop.

A windowed view over a ``WalLog`` costs O(window) once the log keeps the (participant, renderer) index, but
the first index of a pair is a scan of every envelope: on a channel whose old envelopes live in the store
only (a hub just opened on it), reading 100,000 of them back, decoding and rendering each, takes seconds.
``build_indexes`` does that scan ``SLICE`` envelopes at a time with a yield to the event loop before each
slice, so a workbench (or another coroutine of the hub) keeps running meanwhile; all the pairs asked for
advance together slice by slice, so each block of old envelopes is read back from the store once for all
of them (the log keeps its last few cold blocks), not once per participant. The indexes stay in the log
(the next projections, the agents' turns included, reuse them). It scans nothing when they are built already.

Across a restart. ``index_summaries(log, render)`` gives what an index must know for the next projections
(how far it scanned, how many it counts, each sender's first ordinal, the newest ``KEPT`` positions) as
JSON-ready dicts, and ``restore_indexes`` installs them in a log of exactly that length (or, with ``at``,
in a log that the caller vouches extends the one they were taken over: the next projection indexes the
envelopes appended since). The hub keeps them beside its adapter states at a clean shutdown through
``channel_indexes`` / ``restore_channel_indexes``, which wrap them with what makes a stale entry harmless:
the log length and the id of the last envelope they cover (a log that does not extend that prefix is
refused), and a fingerprint of the renderer (its code, its adapter's class, the package version: a
release rendering differently makes the counts wrong, so the entry is ignored); the newest envelopes
before that length are re-rendered as a spot check. A reopened hub's first dry run then reads the
window only instead of every stored envelope.

``windowed(policy)`` and ``per_envelope(policy)`` name the built-in views whose cost the callers (the
debugger's visibility matrix, the hub's dry run) can bound with an index: exactly those classes,
since a subclass may project differently.
"""

from __future__ import annotations

import asyncio
import hashlib
import types
from array import array
from collections.abc import Callable, Sequence
from itertools import pairwise
from typing import Any

from ag2net.envelope import Envelope
from ag2net.version import __version__
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


async def build_indexes(
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
    next one starts with built counts instead of a scan of every stored envelope (``restore_indexes``)."""
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


def restore_indexes(log: WalLog, render: Render, summaries: Any, *, at: int | None = None) -> list[str]:
    """Install ``index_summaries`` taken when the log was exactly as long as it is now (anything else is
    skipped: the counts would be wrong), for the pairs the log keeps no index of; returns the participants
    installed. A window reaching below the kept positions rebuilds that index, as after a trim.

    ``at``: the length the summaries were taken at, when the log has grown since; the caller vouches
    that the log's first ``at`` envelopes are the ones they were taken over (the store's WAL is append-
    only; ``restore_channel_indexes`` checks the last one's id). The installed indexes stand at ``at`` and
    the next projection indexes the envelopes after it."""
    n = len(log) if at is None else at
    done: list[str] = []
    if not isinstance(summaries, dict) or not 0 <= n <= len(log):
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


FORMAT = 1
"""Version of the entry ``channel_indexes`` makes (a different one is ignored)."""

MIN_LENGTH = SLICE
"""Logs shorter than this get no entry: their scan is one slice (a millisecond or two)."""

CHECKED = 32
"""Envelopes before the entry's length re-rendered, per participant, when it is restored (resident ones)."""

_FINGERPRINTS: dict[tuple[Any, Any], str] = {}


def _stable(value: Any) -> str:
    """``repr`` with sets sorted: the same in every process (a set's order follows the string hash seed)."""
    if isinstance(value, (frozenset, set)):
        return "{" + ",".join(sorted(_stable(v) for v in value)) + "}"
    if isinstance(value, tuple):
        return "(" + ",".join(_stable(v) for v in value) + ")"
    return repr(value)


def renderer_fingerprint(render: Render) -> str:
    """A digest of what decides ``render``'s answers, as far as the code tells: the package version,
    the class of the object it is bound to (an adapter), and the bytecode of the function and of the
    ag2net functions and methods it calls by name (recursively). Two releases whose renderers differ
    give two fingerprints, so an index summary taken under one is not restored under the other (a
    renderer reading configuration or state it is not given breaks the views' contract anyway)."""
    func = getattr(render, "__func__", render)
    owner = type(getattr(render, "__self__", None))
    key = (func, owner)
    known = _FINGERPRINTS.get(key)
    if known is not None:
        return known
    h = hashlib.sha256()
    h.update(f"{FORMAT}|{__version__}|{owner.__module__}.{owner.__qualname__}".encode())
    seen: set[int] = set()

    def walk_code(code: types.CodeType, globs: dict[str, Any], depth: int) -> None:
        h.update(code.co_code)
        h.update(repr(code.co_names).encode())
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk_code(const, globs, depth)
            else:
                h.update(_stable(const).encode())
        if depth >= 8:
            return
        for name in code.co_names:
            for target in (globs.get(name), getattr(owner, name, None)):
                if isinstance(target, (str, int, float, tuple, frozenset)):  # constants it reads (EV_TEXT)
                    h.update(f"{name}={_stable(target)}".encode())
                elif (
                    isinstance(target, types.FunctionType)
                    and id(target) not in seen
                    and (
                        (target.__module__ or "").startswith("ag2net") or target.__module__ == func.__module__
                    )
                ):
                    walk(target, depth + 1)

    def walk(fn: Any, depth: int) -> None:
        seen.add(id(fn))
        h.update(f"{fn.__module__}.{fn.__qualname__}".encode())
        code = getattr(fn, "__code__", None)
        if isinstance(code, types.CodeType):
            walk_code(code, getattr(fn, "__globals__", {}), depth)

    walk(func, 0)
    known = _FINGERPRINTS[key] = h.hexdigest()[:32]
    return known


def channel_indexes(log: WalLog, render: Render) -> dict[str, Any] | None:
    """What a hub keeps of a channel's log at a clean shutdown so the next one can restore its indexes
    for ``render`` (``restore_channel_indexes``): their summaries at the log's length, with that length,
    the last envelope's id and the renderer's fingerprint. Indexes behind by at most ``SLICE`` envelopes
    still in memory are brought up to date first (no store read; a close stays quick); those further
    behind are left out. None when there is
    nothing worth keeping (no index, or a log shorter than ``MIN_LENGTH``)."""
    n = len(log)
    if n < MIN_LENGTH:
        return None
    for pid, idx_render in list(log._indexes):
        idx = log.indexed(pid, idx_render)
        if idx is None or idx_render != render or idx.scanned == n or idx.scanned < max(log.base, n - SLICE):
            continue
        try:
            log.visible_index(pid, render, n)
        except Exception:  # a renderer that raises: that index stays behind and is left out
            continue
    summaries = index_summaries(log, render)
    if not summaries:
        return None
    return {
        "format": FORMAT,
        "fingerprint": renderer_fingerprint(render),
        "length": n,
        "last_id": log[n - 1].envelope_id,
        "summaries": summaries,
    }


def restore_channel_indexes(log: WalLog, render: Render, entry: Any) -> list[str]:
    """Install the indexes of a ``channel_indexes`` entry in ``log`` (the channel's log as a new hub
    loaded it: at least as long, the same envelopes first); returns the participants installed. The entry
    is ignored when its format or renderer fingerprint differ, when the log is shorter or its envelope at
    the entry's length is another one; a participant's summary is skipped when the newest envelopes
    before that length (``CHECKED``, those in memory) do not render to the positions it records.
    Envelopes appended after the entry are indexed by the next projection (from the entry's length)."""
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return []
    at, last_id, summaries = entry.get("length"), entry.get("last_id"), entry.get("summaries")
    if (
        not isinstance(at, int)
        or not 0 < at <= len(log)
        or not isinstance(summaries, dict)
        or entry.get("fingerprint") != renderer_fingerprint(render)
    ):
        return []
    try:
        if log[at - 1].envelope_id != last_id:
            return []
    except Exception:  # the store cannot give that envelope back: nothing to vouch for the prefix
        return []
    lo = max(at - CHECKED, log.base)
    recent = list(log.iter_range(lo, at)) if lo < at else []
    checked: dict[str, Any] = {}
    for pid, summary in summaries.items():
        try:
            kept = [p for p in summary["positions"] if isinstance(p, int) and p >= lo]
            want = [
                lo + k
                for k, env in enumerate(recent)
                if (env.sender_id == pid or env.audience is None or pid in env.audience)
                and render(env) is not None
            ]
        except Exception:
            continue
        # ``KEPT`` newest positions always reach back past ``lo`` (``CHECKED`` < ``KEPT``)
        if kept == want:
            checked[pid] = summary
    return restore_indexes(log, render, checked, at=at)


def _scanned(log: WalLog, pid: str, render: Render) -> int:
    idx = log.indexed(pid, render)
    return 0 if idx is None else idx.scanned


__all__ = [
    "CHECKED",
    "FORMAT",
    "KEPT",
    "MIN_LENGTH",
    "PER_ENVELOPE",
    "SLICE",
    "WINDOWED",
    "build_indexes",
    "channel_indexes",
    "index_summaries",
    "per_envelope",
    "renderer_fingerprint",
    "restore_channel_indexes",
    "restore_indexes",
    "windowed",
]

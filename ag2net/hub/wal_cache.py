"""Shell: the hub's WAL cache: which channels' envelopes are held in memory, and how much of them.

The store is the WAL; this is a bounded cache over it. Each live channel that has been read or written
recently keeps a ``WalLog`` of its newest envelopes (at most ``2 * window``, trimmed back to ``window``),
so agents' views, replay and seq reads of recent envelopes cost no store read. A load reads the newest
``LOAD`` (256) only; older envelopes are read back from the store through the log's cold reader
(``Store.read_wal_block``), in blocks. When the
estimated size of every log together passes the budget, the least recently used channels are dropped
whole; terminal channels are never cached (their reads go to the store).

Loading a channel's log is the caller's to serialise (the hub holds the channel's lock), so one load
installs one log and every append after it lands in that log.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from typing import Any

from ag2net.envelope import Envelope
from ag2net.store.base import BlockReader
from ag2net.views.wal import WalLog

log = logging.getLogger(__name__)

DEFAULT_CACHE_MB = 128
DEFAULT_WINDOW = 1000
LOAD = 256
"""Newest envelopes a channel's load reads (``WalCache.load_start``), when the store reads blocks back."""


class WalCache:
    """Per-channel ``WalLog``s under one memory budget, least recently used dropped first."""

    def __init__(
        self, store: Any, *, cache_mb: float = DEFAULT_CACHE_MB, window: int = DEFAULT_WINDOW
    ) -> None:
        if not cache_mb > 0:
            raise ValueError(f"cache_mb must be a positive number of MiB, got {cache_mb!r}")
        if window < 1:
            raise ValueError(f"the WAL cache window must be >= 1 envelope, got {window!r}")
        self.store = store
        self.budget = int(cache_mb * (1 << 20))
        self.window = window
        self._logs: OrderedDict[str, WalLog] = OrderedDict()
        self._bytes = 0
        self._block_reader = store if isinstance(store, BlockReader) else None

    # --- lookup ---

    def get(self, channel_id: str) -> WalLog | None:
        """The channel's cached log (marked as recently used), or None."""
        wal = self._logs.get(channel_id)
        if wal is not None:
            self._logs.move_to_end(channel_id)
        return wal

    def peek(self, channel_id: str) -> WalLog | None:
        """The channel's cached log without touching its recency."""
        return self._logs.get(channel_id)

    def __contains__(self, channel_id: object) -> bool:
        return channel_id in self._logs

    def logs(self) -> list[WalLog]:
        return list(self._logs.values())

    # --- building and installing ---

    def new_log(self, channel_id: str, envelopes: list[Envelope] | None = None, *, base: int = 0) -> WalLog:
        """A log for the channel starting at position ``base``, able to read older envelopes back."""
        cold = self._cold_reader(channel_id) if self._block_reader is not None else None
        wal = WalLog(base=base, cold=cold)
        for env in envelopes or ():
            wal.append(env)
        return wal

    def _cold_reader(self, channel_id: str) -> Any:
        reader = self._block_reader
        loads = json.loads

        def cold(start: int, stop: int) -> list[Envelope]:
            if reader is None:  # only made when the store reads blocks
                return []
            texts = reader.read_wal_block(channel_id, start + 1, stop)
            return [Envelope(**loads(t)) for t in texts]

        return cold

    def install(self, channel_id: str, wal: WalLog) -> WalLog:
        old = self._logs.pop(channel_id, None)
        if old is not None:
            self._bytes -= old.nbytes
        self._logs[channel_id] = wal
        self._bytes += wal.nbytes
        self._shrink(wal, channel_id)
        return wal

    def discard(self, channel_id: str) -> None:
        old = self._logs.pop(channel_id, None)
        if old is not None:
            self._bytes -= old.nbytes

    def clear(self) -> None:
        self._logs.clear()
        self._bytes = 0

    @property
    def load_start(self) -> int:
        """How many of a channel's newest envelopes a load reads into memory (0: all of them): at most
        ``LOAD``, since decoding them is most of what a reopened hub's first read of a long channel costs
        (a dry run, a turn's window: ~3 ms for 256, ~12 ms for 1,000); older ones come back from the store
        in blocks when something reaches them, and appends grow the log to twice the window as before."""
        return min(self.window, LOAD) if self._block_reader is not None else 0

    # --- growth ---

    def appended(self, channel_id: str, wal: WalLog, cost: int) -> None:
        """Account for one envelope appended to the channel's cached log, then keep within bounds."""
        self._bytes += cost
        if wal.resident > 2 * self.window and wal.can_trim:
            self._bytes -= wal.trim(self.window)
        if self._bytes > self.budget:
            self._shrink(wal, channel_id)

    def _shrink(self, keep: WalLog, keep_id: str) -> None:
        """Drop least recently used logs (never ``keep``) until within budget, then trim ``keep``."""
        logs = self._logs
        while self._bytes > self.budget and len(logs) > 1:
            victim_id = next(iter(logs))
            if victim_id == keep_id:
                logs.move_to_end(victim_id)
                victim_id = next(iter(logs))
            self._bytes -= logs.pop(victim_id).nbytes
        if self._bytes > self.budget and keep.can_trim and keep.resident > 1:
            share = self.budget / max(1, keep.nbytes)
            self._bytes -= keep.trim(max(1, int(keep.resident * share * 0.5)))
        elif self._bytes > self.budget and not keep.can_trim and keep.resident > 2 * self.window:
            log.warning(
                "the WAL cache holds %d bytes for channel %s, over its budget of %d: the store cannot "
                "read envelopes back by seq, so the channel stays whole in memory",
                keep.nbytes,
                keep_id,
                self.budget,
            )

    def stats(self) -> dict[str, Any]:
        logs = self._logs.values()
        return {
            "bytes": self._bytes,
            "budget_bytes": self.budget,
            "channels": len(self._logs),
            "envelopes": sum(w.resident for w in logs),
            "window": self.window,
            "trims": self._block_reader is not None,
        }


__all__ = ["DEFAULT_CACHE_MB", "DEFAULT_WINDOW", "LOAD", "WalCache"]

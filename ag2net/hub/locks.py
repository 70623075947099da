"""Shell: per-channel locks (``ChannelLocks``): one re-entrant lock per channel, never one for the whole hub.

Everything that reads a channel's adapter state and changes it — validation, the durable append, the
fold, dispatch, lifecycle transitions, loading the channel's WAL into the cache — runs holding the
channel's lock, so adapter state, ``wal_count`` and the WAL always agree. The lock is re-entrant for
the task holding it, because admitting one envelope may post another into the same channel (an ack
that completes the handshake posts ``EV_CHANNEL_OPENED``; a fold that ends a conversation closes it).

Each entry that waits is numbered in arrival order (``arrivals``); posts waiting their turn leave their
number in ``waiting``, so the holder can admit the posts queued right behind it together, in order
(group admission) — never past an entry of another kind, which keeps the FIFO order of the lock.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any


class ChannelLock:
    """A re-entrant ``asyncio`` lock: the task holding it may enter again; others wait in FIFO order."""

    __slots__ = ("_depth", "_lock", "_owner", "arrivals", "waiting")

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._owner: asyncio.Task[object] | None = None
        self._depth = 0
        self.arrivals = 0  # the number the next (non re-entrant) entry gets
        self.waiting: dict[int, Any] = {}  # arrival number -> a post waiting for the lock

    @property
    def held_here(self) -> bool:
        """Whether the running task holds the lock (its next entry is re-entrant)."""
        return self._owner is not None and self._owner is asyncio.current_task()

    @property
    def busy(self) -> bool:
        return self._owner is not None or self._lock.locked()

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            self._depth += 1
            return
        self.arrivals += 1
        await self._lock.acquire()
        self._owner = task
        self._depth = 1

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._lock.release()


class ChannelLocks:
    """The lock of each channel, made on first use."""

    __slots__ = ("_locks",)

    def __init__(self) -> None:
        self._locks: dict[str, ChannelLock] = {}

    def __call__(self, channel_id: str) -> ChannelLock:
        lock = self._locks.get(channel_id)
        if lock is None:
            lock = self._locks[channel_id] = ChannelLock()
        return lock

    def forget(self, channel_id: str) -> None:
        """Drop an idle lock (a terminal channel's); a busy one stays until its holders are done."""
        lock = self._locks.get(channel_id)
        if lock is not None and not lock.busy:
            del self._locks[channel_id]


__all__ = ["ChannelLock", "ChannelLocks"]

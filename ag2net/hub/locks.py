"""Shell: per-channel locks (``ChannelLocks``): one re-entrant lock per channel, never one for the whole hub.

Everything that reads a channel's adapter state and changes it — validation, the durable append, the
fold, dispatch, lifecycle transitions, loading the channel's WAL into the cache — runs holding the
channel's lock, so adapter state, ``wal_count`` and the WAL always agree. The lock is re-entrant for
the task holding it, because admitting one envelope may post another into the same channel (an ack
that completes the handshake posts ``EV_CHANNEL_OPENED``; a fold that ends a conversation closes it).

Entries wait in one FIFO line, and a release hands the lock to the first of them still waiting. A post
waits in that line as itself (``wait_turn``): the holder may take the posts queued right behind it
(``queued_posts``) and settle them together (group admission) — never past an entry of another kind,
which keeps the FIFO order of the lock. A post settled that way is answered through the same future it
waits on, so it never enters the lock at all.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Iterator
from types import TracebackType
from typing import Any

#: The outcome a waiting entry's future gets when the lock is handed to it.
GRANTED: Any = type("Granted", (), {"__repr__": lambda self: "GRANTED", "__slots__": ()})()


class ChannelLock:
    """A re-entrant ``asyncio`` lock: the task holding it may enter again; others wait in FIFO order."""

    __slots__ = ("_depth", "_held", "_line", "_owner", "gathering")

    def __init__(self) -> None:
        self._owner: asyncio.Task[object] | None = None  # None while handed to a waiter not yet running
        self._held = False
        self._depth = 0
        # (future, post) per waiting entry, in arrival order; post is None for an entry of another kind
        self._line: deque[tuple[asyncio.Future[Any], Any]] = deque()
        #: Set by admission while posts keep arriving together (its last holder admitted a group): a post
        #: that finds the lock free then waits one turn of the loop for the posts arriving with it.
        self.gathering = False

    @property
    def held_here(self) -> bool:
        """Whether the running task holds the lock (its next entry is re-entrant)."""
        return self._owner is not None and self._owner is asyncio.current_task()

    @property
    def busy(self) -> bool:
        return self._held

    @property
    def waiting(self) -> bool:
        """Whether any entry waits in line (a settled or cancelled one until the next release)."""
        return bool(self._line)

    def take(self) -> None:
        """Hold the free lock (``busy`` is False) as the running task."""
        self._held, self._owner, self._depth = True, asyncio.current_task(), 1

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        if task is not None and self._owner is task:
            self._depth += 1
            return
        if not self._held:
            self._held, self._owner, self._depth = True, task, 1
            return
        await self.wait_turn(None, asyncio.get_running_loop().create_future())

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()

    async def wait_turn(self, post: Any, future: asyncio.Future[Any]) -> Any:
        """Wait in line for the (busy) lock: ``GRANTED`` once the running task holds it (release it then),
        else the outcome a holder settled ``future`` with (a post admitted together with the holder's)."""
        self._line.append((future, post))
        try:
            outcome = await future
        except BaseException:
            if (
                future.done()
                and not future.cancelled()
                and future.exception() is None
                and future.result() is GRANTED
            ):
                self._hand_off()  # handed to this entry, which is cancelled before it ran
            raise
        if outcome is GRANTED:
            self._owner, self._depth = asyncio.current_task(), 1
        return outcome

    def queued_posts(self) -> Iterator[Any]:
        """The posts waiting right behind the holder, in order, up to the first entry of another kind."""
        for future, post in self._line:
            if future.done():
                continue  # cancelled (or settled already): skipped by the next release
            if post is None:
                return
            yield post

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._owner = None
            self._hand_off()

    def _hand_off(self) -> None:
        line = self._line
        while line:
            future, _ = line.popleft()
            if not future.done():
                future.set_result(GRANTED)
                return  # still held: the woken entry becomes the owner when it runs
        self._held = False


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


__all__ = ["GRANTED", "ChannelLock", "ChannelLocks"]

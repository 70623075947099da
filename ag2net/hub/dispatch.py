"""Shell: one priority mailbox per recipient, drained by its own task into the bound endpoint; and the
hub's background tasks (``Background``), cancelled when the hub closes.

Each mailbox serves ``urgent`` before ``normal`` before ``background``, FIFO within a level
(SPEC §3.1). Posting never waits on a slow recipient: the poster only appends to the mailbox.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ag2net.envelope import PRIORITY_RANK, Envelope

log = logging.getLogger(__name__)

_RANK = PRIORITY_RANK
_LEVELS = max(PRIORITY_RANK.values()) + 1


class Mailbox:
    """Pending deliveries of one recipient.

    One FIFO per priority level (``PRIORITY_RANK``: urgent, normal, background); the pump serves the most
    urgent non-empty level first. An idle pump waits on one future that the next ``put`` resolves (an
    ``asyncio.Event`` would make a future, a waiter list and a loop over it per delivery).
    """

    __slots__ = ("_levels", "_size", "_task", "_waiter", "endpoint", "on_failed", "recipient_id")

    def __init__(
        self,
        recipient_id: str,
        endpoint: Any,
        on_failed: Callable[[Envelope, str, BaseException], Awaitable[None]],
    ) -> None:
        self.recipient_id = recipient_id
        self.endpoint = endpoint
        self.on_failed = on_failed
        self._levels: tuple[deque[Envelope], ...] = tuple(deque() for _ in range(_LEVELS))
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return self._size

    def put(self, envelope: Envelope, rank: int | None = None) -> None:
        """Queue ``envelope``; ``rank`` is its priority level when the caller has it already (a dispatch to
        many recipients reads it once)."""
        self._levels[_RANK.get(envelope.priority, 1) if rank is None else rank].append(envelope)
        self._size += 1
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():  # cancelled with its pump (a loop shutting down)
                waiter.set_result(None)
        elif self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._pump())

    def _pop(self) -> Envelope | None:
        for level in self._levels:
            if level:
                self._size -= 1
                return level.popleft()
        return None

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        levels = self._levels
        urgent, normal = levels[0], levels[1]
        recipient_id = self.recipient_id
        while True:
            if not self._size:
                waiter = self._waiter = loop.create_future()
                await waiter
                continue
            # Drain without waiting while anything is queued: one wake serves every envelope that queued up
            # meanwhile. The common case first: nothing urgent, the next normal envelope (else the full
            # order, re-read before each delivery so an urgent one that arrives mid-drain goes next).
            if normal and not urgent:
                envelope = normal.popleft()
            else:
                for level in levels:
                    if level:
                        envelope = level.popleft()
                        break
                else:  # pragma: no cover - _size says something is queued
                    self._size = 0
                    continue
            self._size -= 1
            endpoint = self.endpoint
            if endpoint is None:
                continue
            try:
                await endpoint.notify(recipient_id, envelope)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken endpoint must not stop other deliveries
                await self.on_failed(envelope, recipient_id, exc)

    def clear(self) -> None:
        for level in self._levels:
            level.clear()
        self._size = 0

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._waiter = None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


class Background:
    """Tasks the hub starts and does not await (a mailbox stopped after an unbind, a cursor flush, a
    listener fan-out): kept until done, cancelled by ``cancel_all`` when the hub closes."""

    __slots__ = ("closed", "tasks")

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closed = False  # the hub is closing: start no new timer

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()


__all__ = ["Background", "Mailbox"]

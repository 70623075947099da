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

    def put(self, envelope: Envelope) -> None:
        self._levels[_RANK.get(envelope.priority, 1)].append(envelope)
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
        urgent, normal = self._levels[0], self._levels[1]
        recipient_id = self.recipient_id
        while True:
            # the common case first: nothing urgent, the next normal envelope (else _pop's full order)
            if normal and not urgent:
                self._size -= 1
                envelope = normal.popleft()
            else:
                envelope = self._pop()
                if envelope is None:
                    waiter = self._waiter = loop.create_future()
                    await waiter
                    continue
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

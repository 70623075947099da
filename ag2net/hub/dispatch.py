"""Delivery: one priority mailbox per recipient, drained by its own task into the bound endpoint.

Each mailbox serves ``urgent`` before ``normal`` before ``background``, FIFO within a level
(SPEC §3.1). Posting never waits on a slow recipient: the poster only pushes onto the heap.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ag2net.envelope import PRIORITY_RANK, Envelope

log = logging.getLogger(__name__)

_counter = itertools.count()


class Mailbox:
    """Pending deliveries of one recipient."""

    __slots__ = ("_heap", "_task", "_wake", "endpoint", "on_failed", "recipient_id")

    def __init__(
        self,
        recipient_id: str,
        endpoint: Any,
        on_failed: Callable[[Envelope, str, BaseException], Awaitable[None]],
    ) -> None:
        self.recipient_id = recipient_id
        self.endpoint = endpoint
        self.on_failed = on_failed
        self._heap: list[tuple[int, int, Envelope]] = []
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._heap)

    def put(self, envelope: Envelope) -> None:
        heapq.heappush(self._heap, (PRIORITY_RANK.get(envelope.priority, 1), next(_counter), envelope))
        self._wake.set()
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._pump())

    async def _pump(self) -> None:
        heap = self._heap
        while True:
            if not heap:
                self._wake.clear()
                await self._wake.wait()
                continue
            envelope = heapq.heappop(heap)[2]
            endpoint = self.endpoint
            if endpoint is None:
                continue
            try:
                await endpoint.notify(self.recipient_id, envelope)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken endpoint must not stop other deliveries
                await self.on_failed(envelope, self.recipient_id, exc)

    def clear(self) -> None:
        self._heap.clear()

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass


__all__ = ["Mailbox"]

"""Shell: the observe stream: every admitted envelope, lifecycle event and audit record, in admission order.

Positions are a per-hub counter. A bounded in-memory buffer (at most ``capacity`` events and about
``max_bytes`` of them) lets a late observer catch up from a position without gaps or duplicates; one
shared future wakes every waiting observer in O(1).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError
from ag2net.protocol.observe import ObservedEvent


class ObserveLog:
    """Append-only, bounded buffer of observed events with async followers."""

    def __init__(self, capacity: int = 250_000, *, max_bytes: int | None = None) -> None:
        self._buffer: deque[ObservedEvent] = deque()
        self._sizes: deque[int] = deque()
        self._capacity = max(1, capacity)
        self._max_bytes = max_bytes
        self.nbytes = 0  # estimated memory held by the buffered events
        self._position = 0
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    @property
    def position(self) -> int:
        """Position of the newest event (0 before any)."""
        return self._position

    def append(self, kind: str, *, size: int = 400, **fields: Any) -> ObservedEvent:
        """Record one event; ``size`` estimates the memory it holds (an envelope's: its JSON and more)."""
        self._position += 1
        return self._push(ObservedEvent(self._position, kind, **fields), size)

    def append_envelope(self, channel_id: str, seq: int, envelope: Envelope, size: int) -> ObservedEvent:
        """``append("envelope", ...)`` of one admitted envelope, its fields passed by position (once per
        post: no keyword dicts built and unpacked)."""
        self._position += 1
        return self._push(ObservedEvent(self._position, "envelope", channel_id, seq, envelope), size)

    def _push(self, event: ObservedEvent, size: int) -> ObservedEvent:
        buffer, sizes = self._buffer, self._sizes
        buffer.append(event)
        sizes.append(size)
        self.nbytes += size
        limit = self._max_bytes
        while len(buffer) > self._capacity or (limit is not None and self.nbytes > limit and len(buffer) > 1):
            buffer.popleft()
            self.nbytes -= sizes.popleft()
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return event

    def close(self) -> None:
        self._closed = True
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)
        self._waiter = None

    def _events_after(self, position: int) -> list[ObservedEvent]:
        buffer = self._buffer
        if not buffer or position >= self._position:
            return []
        oldest = buffer[0].position
        if position + 1 < oldest:
            raise ProtocolError(
                f"observe position {position} is older than the buffer (oldest {oldest}); "
                "read the WAL for older history and observe from a newer position"
            )
        start = position + 1 - oldest
        return [buffer[i] for i in range(start, len(buffer))]

    async def follow(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Yield events after ``since`` (default: from now on) until the log closes."""
        position = self._position if since is None else since
        while True:
            batch = self._events_after(position)
            if batch:
                for event in batch:
                    position = event.position
                    yield event
                continue
            if self._closed:
                return
            if self._waiter is None:
                self._waiter = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._waiter)


__all__ = ["ObserveLog", "ObservedEvent"]

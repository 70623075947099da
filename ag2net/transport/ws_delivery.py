"""The WebSocket link's delivery queues: one queue and one task per recipient, deduplicated, and the
queues of observe subscriptions.

A recipient's envelopes reach the client's handler in order, one at a time, by that recipient's task, so
a slow handler never stalls the reader; an envelope seen again (the hub replays after a reconnect) is
dropped, and acked again when it was already handled. No I/O of its own: acks go through ``ack``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.ports import NotifyHandler

log = logging.getLogger("ag2net.transport.ws")

END = object()
"""What a subscription's queue holds when its stream has ended."""


@dataclass(slots=True)
class Subscription:
    """One observe stream of a link: where it resumes (``last``, of which hub process) and its queue."""

    sid: str
    since: int | None
    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    last: int | None = None
    incarnation: str | None = None

    def started(self, result: dict[str, Any]) -> None:
        """The hub answered the observe request: where the stream starts."""
        incarnation = result.get("incarnation")
        if self.incarnation is not None and incarnation != self.incarnation:
            self.last = 0  # a new hub process: its positions start again from 1, streamed from the start
        self.incarnation = incarnation
        if self.last is None and self.since is None:
            self.last = int(result.get("position", 0))

    def observed(self, data: dict[str, Any]) -> None:
        """An ``observed`` frame for this subscription: an event (once), an error, or the end."""
        if "event" in data:
            event = ObservedEvent.from_dict(data["event"])
            if self.last is not None and event.position <= self.last:
                return
            self.last = event.position
            self.queue.put_nowait(event)
        elif "error" in data:
            self.queue.put_nowait(ProtocolError(str(data["error"])))
        elif data.get("end"):
            self.queue.put_nowait(END)


class DeliveryQueues:
    """Per-recipient queues and their tasks. ``handler()`` is the client's delivery handler (``None``: the
    envelope is dropped); ``ack(envelope_id, recipient_id, channel_id)`` returns the coroutine that acks a
    replay of an envelope already handled, and ``spawn`` runs it in the background."""

    def __init__(
        self,
        dedupe_window: int,
        handler: Callable[[], NotifyHandler | None],
        ack: Callable[[str, str, str], Coroutine[Any, Any, None]],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self.dedupe_window = dedupe_window
        self._handler = handler
        self._ack = ack
        self._spawn = spawn
        self.queues: dict[str, asyncio.Queue[Envelope]] = {}
        self.workers: dict[str, asyncio.Task[None]] = {}
        #: recipient -> envelope_id -> handled (acked); the newest ``dedupe_window`` of each
        self.seen: dict[str, OrderedDict[str, bool]] = {}

    def handled(self, recipient_id: str, envelope_id: str) -> None:
        """The client sent its receipt for ``envelope_id``: a replay of it is acked again, not delivered."""
        seen = self.seen.get(recipient_id)
        if seen is not None and envelope_id in seen:
            seen[envelope_id] = True

    def deliver(self, recipient_id: str, envelope: Envelope) -> None:
        envelope_id = envelope.envelope_id
        if envelope_id:
            seen = self.seen.get(recipient_id)
            if seen is None:
                seen = self.seen[recipient_id] = OrderedDict()
            acked = seen.get(envelope_id)
            if acked is not None:
                if acked:  # a replay of something already handled: move the hub's cursor past it
                    self._spawn(self._ack(envelope_id, recipient_id, envelope.channel_id))
                return
            seen[envelope_id] = False
            if len(seen) > self.dedupe_window:
                seen.popitem(last=False)
        queue = self.queues.get(recipient_id)
        if queue is None:
            queue = self.queues[recipient_id] = asyncio.Queue()
            self.workers[recipient_id] = asyncio.get_running_loop().create_task(
                self._work(recipient_id, queue)
            )
        queue.put_nowait(envelope)

    async def _work(self, recipient_id: str, queue: asyncio.Queue[Envelope]) -> None:
        while True:
            envelope = await queue.get()
            handler = self._handler()
            if handler is None:
                continue
            try:
                await handler(recipient_id, envelope)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivery of %s to %s failed", envelope.envelope_id, recipient_id)


__all__ = ["END", "DeliveryQueues", "Subscription"]

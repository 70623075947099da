"""The server's websockets connection: a complete message that arrives while its endpoint's reader waits
for one, with nothing queued ahead of it, is handed to the endpoint as it is parsed, in the transport's
``data_received`` callback, instead of going through websockets' message queue and waking the reader task
(two event-loop hops, and websockets' queue and ``recv`` machinery, per request and per receipt).

The endpoint (``taker``) takes a message only when it can act on it without awaiting (a request with a
free in-flight slot, a receipt) and says so; anything else (a hello, a ping, a frame it cannot parse, a
request over the in-flight limit, a fragmented message, a message while the reader is busy or has
messages queued) goes to websockets' queue, in arrival order, and the reader reads it as before. Messages
therefore reach the endpoint in the order they arrived either way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.asyncio.server import ServerConnection
from websockets.frames import Frame, Opcode


class TakingConnection(ServerConnection):
    """A ``ServerConnection`` that offers complete text messages to ``taker`` while ``reader_waiting``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        #: Offered each complete text message while the reader waits; returns whether it took it.
        self.taker: Callable[[str], bool] | None = None
        #: Set by the endpoint's reader while it waits for the next message (nothing else to do).
        self.reader_waiting = False
        #: Complete messages given to websockets' queue and not read yet (a fragmented one counts at its
        #: last frame; its first is never taken, having ``fin`` unset, nor its continuations).
        self.queued = 0

    def process_event(self, event: Any) -> None:
        if isinstance(event, Frame):
            opcode = event.opcode
            if opcode is Opcode.TEXT or opcode is Opcode.BINARY or opcode is Opcode.CONT:
                if (
                    opcode is Opcode.TEXT
                    and event.fin
                    and self.reader_waiting
                    and not self.queued
                    and self.taker is not None
                ):
                    try:
                        text = bytes(event.data).decode("utf-8")
                    except UnicodeDecodeError:
                        text = None  # websockets' queue refuses it as it always has (close 1007)
                    if text is not None and self.taker(text):
                        return
                if event.fin:
                    self.queued += 1
        super().process_event(event)

    def message_read(self) -> None:
        """The reader read one message from websockets' queue."""
        if self.queued:
            self.queued -= 1


__all__ = ["TakingConnection"]

"""Taking a complete message as it is parsed: the ``data_received`` fast path both ends of the WebSocket
transport share.

A complete text message that arrives while the connection's reader waits for one, with nothing queued ahead
of it, is offered to ``taker`` in the transport's ``data_received`` callback, instead of going through
websockets' message queue and waking the reader task (two event-loop hops, and websockets' queue and
``recv`` machinery, per message). ``taker`` returns whether it handled the message; one it does not take
(and anything else: fragments, binary frames, text that is not UTF-8, a message while the reader is busy
or has messages queued) goes to websockets' queue, in arrival order, and the reader reads it as before.
Messages therefore reach their handler in the order they arrived either way.

The reader sets ``reader_waiting`` around its ``recv()`` and calls ``message_read()`` after each message it
read. The server's connection is ``ag2net.server.connection.TakingConnection``; the client link's is
``TakingClientConnection`` (``ag2net.transport.ws``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from websockets.asyncio.client import ClientConnection
from websockets.frames import Frame, Opcode


class Taking:
    """Mixin for a websockets ``Connection``: offers complete text messages to ``taker`` while
    ``reader_waiting`` and nothing is queued."""

    #: Offered each complete text message while the reader waits; returns whether it took it.
    taker: Callable[[str], bool] | None = None
    #: Set by the reader while it waits for the next message (nothing else to do).
    reader_waiting = False
    #: Complete messages given to websockets' queue and not read yet (a fragmented one counts at its
    #: last frame; its first is never taken, having ``fin`` unset, nor its continuations).
    queued = 0

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
        super().process_event(event)  # type: ignore[misc]  # the websockets Connection it is mixed into

    def message_read(self) -> None:
        """The reader read one message from websockets' queue."""
        if self.queued:
            self.queued -= 1


class TakingClientConnection(Taking, ClientConnection):
    """The client link's connection (``WsLinkClient``): responses, deliveries and the rest taken as parsed."""


__all__ = ["Taking", "TakingClientConnection"]

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

from websockets.asyncio.server import ServerConnection

from ag2net.transport.ws_taking import Taking


class TakingConnection(Taking, ServerConnection):
    """A ``ServerConnection`` that offers complete text messages to ``taker`` while ``reader_waiting``
    (``ag2net.transport.ws_taking``, shared with the client link)."""


__all__ = ["TakingConnection"]

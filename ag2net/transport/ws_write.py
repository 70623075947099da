"""Writing one WebSocket text message without ``ws.send``'s machinery when nothing can make it wait.

``write_now(ws, text)`` frames ``text`` with the connection's sans-I/O protocol (``ws.protocol``, which masks
a client's frames) and hands the bytes to the transport, for an open connection whose transport buffer is
empty: what ``websockets``' ``send`` does then, minus its context manager and its drain, which waits only
when the buffer is above its limit (never with an empty one). Otherwise it writes nothing and says so, and
the caller awaits ``ws.send(text)``: its flow control, and its ``ConnectionClosed`` for a closing
connection. Both paths go through the protocol's one output buffer, so messages keep their order.
"""

from __future__ import annotations

from typing import Any

from websockets.protocol import State


def write_now(ws: Any, text: str) -> bool:
    """Write ``text`` as one text frame now, or return ``False`` (then the caller awaits ``ws.send``)."""
    protocol = ws.protocol
    transport = ws.transport
    if protocol.state is not State.OPEN or transport.get_write_buffer_size() or transport.is_closing():
        return False
    protocol.send_text(text.encode())
    for data in protocol.data_to_send():
        transport.write(data)  # a text frame on an open connection: never the end-of-stream marker
    return True


__all__ = ["write_now"]

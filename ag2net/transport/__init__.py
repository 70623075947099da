"""Client-side transports: the link seam and the WebSocket link (frames live in ``ag2net.protocol``).

The in-process link is ``ag2net.hub.local`` (it knows the hub); the WebSocket server is ``ag2net.server``.
Nothing here imports the hub: a remote agent loads none.
"""

from typing import TYPE_CHECKING

from ag2net.protocol.frames import (
    FRAME_TYPES,
    ErrorFrame,
    Frame,
    HelloFrame,
    NotifyFrame,
    PingFrame,
    PongFrame,
    ReceiptFrame,
    RequestFrame,
    ResponseFrame,
    WelcomeFrame,
    decode_frame,
    encode_frame,
    frame_from_json,
    frame_to_json,
)
from ag2net.protocol.ports import Endpoint, Link, LinkClient, LinkEndpoint, LinkFactory, NotifyHandler

if TYPE_CHECKING:
    from ag2net.transport.ws import ConnectionLostError, WsLink, WsLinkClient, WsLinkEndpoint

_LAZY = {
    "ConnectionLostError": "ag2net.transport.ws",
    "WsLink": "ag2net.transport.ws",
    "WsLinkClient": "ag2net.transport.ws",
    "WsLinkEndpoint": "ag2net.transport.ws",
}


def __getattr__(name: str) -> object:
    # The WebSocket link imports ``websockets``: loaded on first use only.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ag2net.transport' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


__all__ = [
    "FRAME_TYPES",
    "ConnectionLostError",
    "Endpoint",
    "ErrorFrame",
    "Frame",
    "HelloFrame",
    "Link",
    "LinkClient",
    "LinkEndpoint",
    "LinkFactory",
    "NotifyFrame",
    "NotifyHandler",
    "PingFrame",
    "PongFrame",
    "ReceiptFrame",
    "RequestFrame",
    "ResponseFrame",
    "WelcomeFrame",
    "WsLink",
    "WsLinkClient",
    "WsLinkEndpoint",
    "decode_frame",
    "encode_frame",
    "frame_from_json",
    "frame_to_json",
]

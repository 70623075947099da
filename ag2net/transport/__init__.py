"""Transports between clients and the hub: frames, the link seam, the in-process link and WebSocket."""

from ag2net.transport.frames import (
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
from ag2net.transport.link import (
    Endpoint,
    Link,
    LinkClient,
    LinkEndpoint,
    LinkFactory,
    LocalEndpoint,
    LocalLink,
    LocalLinkClient,
    LocalLinkEndpoint,
    NotifyHandler,
)

_LAZY = {
    "WsEndpoint": "ag2net.transport.server",
    "WsServer": "ag2net.transport.server",
    "serve_cli": "ag2net.transport.server",
    "serve_ws": "ag2net.transport.server",
    "ConnectionLostError": "ag2net.transport.ws",
    "WsLink": "ag2net.transport.ws",
    "WsLinkClient": "ag2net.transport.ws",
    "WsLinkEndpoint": "ag2net.transport.ws",
}


def __getattr__(name: str) -> object:
    # The WebSocket pieces import ``websockets`` and the hub's op table: loaded on first use only.
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
    "LocalEndpoint",
    "LocalLink",
    "LocalLinkClient",
    "LocalLinkEndpoint",
    "NotifyFrame",
    "NotifyHandler",
    "PingFrame",
    "PongFrame",
    "ReceiptFrame",
    "RequestFrame",
    "ResponseFrame",
    "WelcomeFrame",
    "WsEndpoint",
    "WsLink",
    "WsLinkClient",
    "WsLinkEndpoint",
    "WsServer",
    "decode_frame",
    "encode_frame",
    "frame_from_json",
    "frame_to_json",
    "serve_cli",
    "serve_ws",
]

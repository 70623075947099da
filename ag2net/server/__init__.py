"""The hub's WebSocket server (``serve_ws``), above the hub and the transport: it needs both, so it lives
in neither. ``websocket.py`` is the server (``WsServer``, ``serve_ws``), ``endpoint.py`` one connection
(``WsEndpoint``), ``policy.py`` the per-connection authorisation handed to it (``WirePolicy``)."""

from ag2net.identity import MAX_RESUME_BYTES, MAX_SKILL_BYTES
from ag2net.protocol.frames import MAX_JSON_DEPTH
from ag2net.server.endpoint import MAX_INFLIGHT_REQUESTS, OBSERVED_KIND, OPERATOR_SCHEME, WsEndpoint
from ag2net.server.policy import MIRROR_FAILED_KEYS, Connection, WirePolicy
from ag2net.server.websocket import (
    DIRECTORY_OPS,
    LOOPBACK_HOSTS,
    WsServer,
    classified_ops,
    serve_cli,
    serve_ws,
)

__all__ = [
    "DIRECTORY_OPS",
    "LOOPBACK_HOSTS",
    "MAX_INFLIGHT_REQUESTS",
    "MAX_JSON_DEPTH",
    "MAX_RESUME_BYTES",
    "MAX_SKILL_BYTES",
    "MIRROR_FAILED_KEYS",
    "OBSERVED_KIND",
    "OPERATOR_SCHEME",
    "Connection",
    "WirePolicy",
    "WsEndpoint",
    "WsServer",
    "classified_ops",
    "serve_cli",
    "serve_ws",
]

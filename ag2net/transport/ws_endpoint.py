"""The hub's side of one WebSocket connection as ag2 names it (``WsLinkEndpoint``): frames in and out over
a websockets connection, for a hub served by hand; ``serve_ws`` runs its own subclass
(``ag2net.server.endpoint.WsEndpoint``). Re-exported by ``ag2net.transport.ws``."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

from websockets.exceptions import ConnectionClosed

from ag2net.protocol.frames import decode_frame, encode_frame

log = logging.getLogger(__name__)


class WsLinkEndpoint:
    """The hub's side of one WebSocket connection, frame by frame (ag2's ``WsLinkEndpoint(endpoint_id, ws)``):
    ``send_frame`` writes a frame as JSON text, ``frames()`` reads decoded frames (a message that is not
    one is logged and skipped) until the connection closes, ``close()`` closes it. ``agent_id`` is the
    agent last bound to it. ``serve_ws`` runs its own endpoint class, which answers frames for the hub."""

    def __init__(self, endpoint_id: str, ws: Any) -> None:
        self.endpoint_id = endpoint_id
        self.ws = ws
        self.agent_id: str | None = None

    async def send_frame(self, frame: Any) -> None:
        await self.ws.send(json.dumps(encode_frame(frame)))

    def frames(self) -> AsyncIterator[Any]:
        return self._frames()

    async def _frames(self) -> AsyncIterator[Any]:
        try:
            async for message in self.ws:
                try:
                    frame = decode_frame(json.loads(message))
                except (ValueError, TypeError, RecursionError) as exc:  # FrameDecodeError is both
                    log.warning(
                        "endpoint %s: skipped a message that is not a frame (%s)", self.endpoint_id, exc
                    )
                    continue
                yield frame
        except ConnectionClosed:
            return

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self.ws.close()


__all__ = ["WsLinkEndpoint"]

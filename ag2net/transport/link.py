"""The transport seam, client side: the ``Link`` a ``HubClient`` speaks through and ag2's frame-level
``LinkClient``/``LinkEndpoint``/``LinkFactory`` (declared in ``ag2net.protocol.ports``).

The in-process link knows the hub, so it lives with it (``ag2net.hub.local``); the WebSocket link is
``ag2net.transport.ws``, its server ``ag2net.server``.
"""

from ag2net.protocol.ports import Endpoint, Link, LinkClient, LinkEndpoint, LinkFactory, NotifyHandler

__all__ = ["Endpoint", "Link", "LinkClient", "LinkEndpoint", "LinkFactory", "NotifyHandler"]

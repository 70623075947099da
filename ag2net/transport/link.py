"""The transport seam: a client-side ``Link`` and the hub-side ``Endpoint``, plus the in-process link.

``HubClient`` talks to the hub only through a link, by op name. The in-process link calls the hub
directly (no serialisation, no queue hop); the WebSocket link carries the same ops as frames.
``LocalLink(hub)`` is a factory: each ``HubClient`` built on it takes its own ``LocalLinkClient``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from ag2net.envelope import Envelope
from ag2net.ids import make_id

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub
    from ag2net.hub.observe import ObservedEvent

NotifyHandler = Callable[[str, Envelope], Awaitable[None]]


class Link(Protocol):
    """What a ``HubClient`` needs from a connection to a hub."""

    local: bool  # results arrive as Python objects (True) or JSON dicts (False)

    async def open(self, on_notify: NotifyHandler) -> None: ...

    async def request(self, op: str, params: dict[str, Any]) -> Any: ...

    async def receipt(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None: ...

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]: ...

    async def close(self) -> None: ...


class Endpoint(Protocol):
    """The hub's side of one connection; agents are bound to it."""

    endpoint_id: str

    async def notify(self, recipient_id: str, envelope: Envelope) -> None: ...

    async def close(self) -> None: ...


class LocalLinkEndpoint:
    """Hub-side end of one in-process connection: notifications call that client's handler directly."""

    def __init__(self, on_notify: NotifyHandler) -> None:
        self.endpoint_id = make_id()
        self._on_notify = on_notify
        self.closed = False

    async def notify(self, recipient_id: str, envelope: Envelope) -> None:
        if not self.closed:
            await self._on_notify(recipient_id, envelope)

    async def close(self) -> None:
        self.closed = True


#: The name this class had before ``LocalLink`` became a factory (the hub's op table checks it).
LocalEndpoint = LocalLinkEndpoint


class LocalLinkClient:
    """One in-process connection to a ``Hub``: its own endpoint, so its own deliveries and bindings.

    Made by ``LocalLink.client()``; ``HubClient`` does that for you. One ``LocalLinkClient`` serves one
    ``HubClient``: opening it for a second handler is refused, since the hub would deliver every
    notification to the first one only.
    """

    local = True

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        self.endpoint: LocalLinkEndpoint | None = None

    async def open(self, on_notify: NotifyHandler) -> None:
        if self.endpoint is None:
            self.endpoint = LocalLinkEndpoint(on_notify)
            self.hub.attach_endpoint(self.endpoint)
        elif self.endpoint._on_notify != on_notify:
            raise RuntimeError(
                "this LocalLinkClient is already open for another HubClient; pass the LocalLink itself "
                "(or a new link.client()) to each HubClient so each gets its own endpoint"
            )

    @property
    def endpoint_id(self) -> str:
        return self.endpoint.endpoint_id if self.endpoint else ""

    async def request(self, op: str, params: dict[str, Any]) -> Any:
        return await self.hub.handle_op(self.endpoint, op, params)

    async def receipt(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None:
        self.hub.handle_receipt(self.endpoint, envelope_id, status, recipient_id, channel_id, reason)

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        return self.hub.observe(since)

    async def close(self) -> None:
        if self.endpoint is not None:
            endpoint, self.endpoint = self.endpoint, None
            await self.hub.detach_endpoint(endpoint)


class LocalLink:
    """An in-process link to a ``Hub``: a factory of connections, one per ``HubClient``.

    ``link = LocalLink(hub)`` may be shared: every ``HubClient(link)`` calls ``link.client()`` and gets
    its own ``LocalLinkClient`` (own endpoint, own deliveries; closing one leaves the others attached).
    """

    local = True

    def __init__(self, hub: Hub) -> None:
        self._hub = hub

    @property
    def hub(self) -> Hub:
        return self._hub

    def client(self) -> LocalLinkClient:
        """A new connection to the hub (attached when its ``HubClient`` opens)."""
        return LocalLinkClient(self._hub)


__all__ = [
    "Endpoint",
    "Link",
    "LocalEndpoint",
    "LocalLink",
    "LocalLinkClient",
    "LocalLinkEndpoint",
    "NotifyHandler",
]

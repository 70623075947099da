"""The seams the links are typed against: ``Link`` (what a ``HubClient`` needs of a connection),
``Endpoint`` (the hub's side of one), ag2's frame-level ``LinkClient``/``LinkEndpoint``/``LinkFactory``,
and ``HubPort``: what an in-process link needs of a hub. No implementation lives here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.protocol.frames import Frame
from ag2net.protocol.observe import ObservedEvent

if TYPE_CHECKING:
    from ag2net.protocol.ops import Request

NotifyHandler = Callable[[str, Envelope], Awaitable[None]]
R = TypeVar("R")


class Link(Protocol):
    """What a ``HubClient`` needs from a connection to a hub.

    ``request(r)`` takes one op's typed request (``ag2net.protocol.ops``) and returns its typed result on
    every link, as every httpx transport returns the same ``Response``: an in-process link passes the
    request through to the hub, a network link encodes it and decodes the answer at its edge."""

    local: bool  # the hub runs in this process

    async def open(self, on_notify: NotifyHandler) -> None: ...

    async def request(self, request: Request[R]) -> R: ...

    async def receipt(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None: ...

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]: ...

    async def close(self) -> None: ...


@runtime_checkable
class InProcessLink(Protocol):
    """What an in-process link adds, synchronously, for the calls ag2 answers without a round trip
    (``HubClient.find_agent_id``, ``name_for``, ``adapter_for``, ``register_adapter``, ``adapter_state``)."""

    local: bool

    @property
    def hub(self) -> Any: ...

    def lookup_channel(self, channel_id: str) -> ChannelMetadata: ...

    def find_agent_id(self, name: str) -> str | None: ...

    def known_name(self, agent_id: str) -> str | None: ...

    def adapters(self) -> dict[tuple[str, int], Any]: ...

    def register_adapter(self, adapter: Any) -> None: ...

    def adapter_state(self, channel_id: str) -> Any: ...


class Endpoint(Protocol):
    """The hub's side of one connection; agents are bound to it."""

    endpoint_id: str

    async def notify(self, recipient_id: str, envelope: Envelope) -> None: ...

    async def close(self) -> None: ...


@runtime_checkable
class LinkClient(Protocol):
    """ag2's client side of one connection, frame by frame: ``open()``, ``send_frame(f)``, ``frames()``,
    ``close()``. (Runtime-checkable here; ag2 1.2.1 declares it without, so ``isinstance`` only works here.)"""

    endpoint_id: str

    async def open(self) -> None: ...

    async def send_frame(self, frame: Frame) -> None: ...

    def frames(self) -> AsyncIterator[Frame]: ...

    async def close(self) -> None: ...


@runtime_checkable
class LinkEndpoint(Protocol):
    """ag2's hub side of one connection: ``agent_id`` is set when an agent is bound to it."""

    endpoint_id: str
    agent_id: str | None

    async def send_frame(self, frame: Frame) -> None: ...

    def frames(self) -> AsyncIterator[Frame]: ...

    async def close(self) -> None: ...


@runtime_checkable
class LinkFactory(Protocol):
    """Makes one fresh ``LinkClient`` per caller (``LocalLink``, ``WsLink``)."""

    def client(self) -> LinkClient: ...


@runtime_checkable
class HubPort(Protocol):
    """What a link (in-process or the WebSocket server) needs of a hub: the op door, receipts, the observe
    stream and endpoint bookkeeping. ``ag2net.hub.Hub`` is one. ``params``: the op's JSON params, or its
    typed request (``ag2net.protocol.ops.Request``)."""

    def handle_op(self, endpoint: Any, op: str, params: Any) -> Awaitable[Any]:
        """Run one op for ``endpoint``; awaited for its result (the hub's op coroutine itself)."""
        ...

    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None: ...

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]: ...

    def attach_endpoint(self, endpoint: Any) -> None: ...

    async def detach_endpoint(self, endpoint: Any) -> None: ...

    def bind_endpoint(self, endpoint_id: Any, agent_id: str) -> None: ...


__all__ = [
    "Endpoint",
    "HubPort",
    "InProcessLink",
    "Link",
    "LinkClient",
    "LinkEndpoint",
    "LinkFactory",
    "NotifyHandler",
]

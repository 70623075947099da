"""The in-process link: the one module that knows both the hub and the client side of a connection.

``LocalLink(hub)`` is a factory: each ``HubClient`` built on it takes its own ``LocalLinkClient`` (own
endpoint, own deliveries). Ops go straight to ``hub.handle_op`` and return the same typed results the
WebSocket link decodes (no serialisation, no queue hop). The link also answers, synchronously, the few
calls ag2 serves without a round trip in-process (``InProcessLink``: name lookups, adapters, adapter
state), so ``HubClient`` never reaches into the hub itself.

ag2 1.2.1's frame-level seam is here too: a ``LocalLinkClient`` opened without a handler
(``await c.open()``) speaks frames: the hub answers its ``hello``/``request``/``receipt``/``ping`` frames
and delivers ``NotifyFrame``s to it, through the two queues it shares with its ``LocalLinkEndpoint``.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.ids import make_id
from ag2net.protocol import frames as fr
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.ops import Request, encode_result, request_of
from ag2net.protocol.ports import HubPort, NotifyHandler

log = logging.getLogger(__name__)
R = TypeVar("R")


class LocalHub(HubPort, Protocol):
    """What the in-process link needs of a hub beyond the op door (``HubPort``): the synchronous answers
    ag2 gives in-process, the hello handshake's lookups and its ids (``ag2net.hub.Hub`` is one)."""

    identities: Any
    channels: Any
    background: Any
    auth: Any
    ids: Any

    def clock(self) -> str: ...

    def lookup_channel(self, channel_id: str) -> ChannelMetadata: ...

    def find_agent_id(self, name: str) -> str | None: ...

    def name_for(self, agent_id: str, *, default: str | None = None) -> str: ...

    def register_adapter(self, adapter: Any) -> None: ...

    def adapter_state(self, channel_id: str) -> Any: ...

    async def replay(self, endpoint: Any, agent_id: str, since_envelope_id: str) -> int: ...


async def _done() -> None:
    """Nothing to wait for (a closed connection's delivery, or one queued as a frame)."""


async def _drain(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
    """Items of ``queue`` until the ``None`` sentinel a close pushes."""
    while True:
        item = await queue.get()
        if item is None:
            queue.put_nowait(None)  # every later reader ends too
            return
        yield item


class LocalLinkEndpoint:
    """Hub-side end of one in-process connection.

    ``LocalLinkEndpoint(endpoint_id, client_to_hub, hub_to_client)`` as in ag2: frames the client sends
    arrive on ``client_to_hub`` (read them with ``frames()``), ``send_frame`` puts on ``hub_to_client``.
    When a ``HubClient`` opened the connection with a handler, the hub's deliveries call that handler
    directly instead (no queue hop).
    """

    #: An in-process connection: the hub's own process, the operator unless ``operator`` says otherwise.
    in_process = True
    #: No access policy (``run_op`` asks ``endpoint.authorize``): said here, so the lookup finds it at once
    #: instead of raising and swallowing an AttributeError on every op.
    authorize = None

    def __init__(
        self,
        endpoint_id: str = "",
        client_to_hub: asyncio.Queue[Any] | None = None,
        hub_to_client: asyncio.Queue[Any] | None = None,
    ) -> None:
        self.endpoint_id = endpoint_id or make_id()
        self.client_to_hub: asyncio.Queue[Any] = (
            client_to_hub if client_to_hub is not None else asyncio.Queue()
        )
        self.hub_to_client: asyncio.Queue[Any] = (
            hub_to_client if hub_to_client is not None else asyncio.Queue()
        )
        self.agent_id: str | None = None
        self._on_notify: NotifyHandler | None = None
        self.closed = False

    def notify(self, recipient_id: str, envelope: Envelope) -> Awaitable[None]:
        """Deliver ``envelope`` (awaited by the caller, as ``Endpoint.notify``): the handler's own
        awaitable when a ``HubClient`` opened the connection, so a delivery runs one coroutine, not two."""
        on_notify = self._on_notify
        if self.closed:
            return _done()
        if on_notify is not None:
            return on_notify(recipient_id, envelope)
        self.hub_to_client.put_nowait(fr.NotifyFrame(envelope=envelope, recipient_id=recipient_id))
        return _done()

    async def send_frame(self, frame: fr.Frame) -> None:
        """To the client; dropped silently once the connection is closed (as in ag2)."""
        if self.closed:
            return
        if isinstance(frame, fr.NotifyFrame) and self._on_notify is not None:
            await self._on_notify(frame.recipient_id, frame.envelope)
            return
        self.hub_to_client.put_nowait(frame)

    def frames(self) -> AsyncIterator[fr.Frame]:
        """Frames from the client, until the connection closes."""
        return _drain(self.client_to_hub)

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.client_to_hub.put_nowait(None)
            self.hub_to_client.put_nowait(None)


#: The name this class had before ``LocalLink`` became a factory (the hub's op table checks it).
LocalEndpoint = LocalLinkEndpoint


class LocalLinkClient:
    """One in-process connection to a ``Hub``: its own endpoint, so its own deliveries and bindings.

    Made by ``LocalLink.client()``; ``HubClient`` does that for you. One ``LocalLinkClient`` serves one
    ``HubClient``: opening it for a second handler is refused, since the hub would deliver every
    notification to the first one only.

    ``LocalLinkClient(endpoint_id, client_to_hub, hub_to_client)`` is ag2's constructor; ``hub=`` (and the
    ``endpoint`` sharing the two queues) are what ``LocalLink.client()`` passes so the connection can
    reach its hub. Opened without a handler (``await client.open()``) it speaks frames: ``send_frame``
    a ``HelloFrame``/``RequestFrame``/``ReceiptFrame``/``PingFrame`` and read the answers and
    ``NotifyFrame`` deliveries from ``frames()``.
    """

    local = True

    def __init__(
        self,
        endpoint_id: str = "",
        client_to_hub: asyncio.Queue[Any] | None = None,
        hub_to_client: asyncio.Queue[Any] | None = None,
        *,
        hub: LocalHub | None = None,
        endpoint: LocalLinkEndpoint | None = None,
    ) -> None:
        if endpoint is None:
            endpoint = LocalLinkEndpoint(endpoint_id, client_to_hub, hub_to_client)
        self._endpoint = endpoint
        self.endpoint_id = endpoint.endpoint_id
        self.client_to_hub = endpoint.client_to_hub
        self.hub_to_client = endpoint.hub_to_client
        self.hub = hub
        self._attached = False
        self._serving: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def endpoint(self) -> LocalLinkEndpoint | None:
        """The hub-side end while the connection is attached to the hub (``None`` before and after)."""
        return self._endpoint if self._attached else None

    def _need_hub(self) -> LocalHub:
        if self.hub is None:
            raise RuntimeError(
                "this LocalLinkClient has no hub: make it with LocalLink(hub).client() (or pass hub=...)"
            )
        return self.hub

    def attach(self) -> None:
        """Attach the endpoint to the hub (``LocalLink.client()`` does: the connection is live at once, as
        in ag2, so ``hub.bind_endpoint(client.endpoint_id, ...)`` finds it). Idempotent."""
        if self._attached or self._closed or self.hub is None:
            return
        self.hub.attach_endpoint(self._endpoint)
        self._attached = True

    async def open(self, on_notify: NotifyHandler | None = None) -> None:
        """Attach to the hub. With ``on_notify`` (what ``HubClient`` passes) deliveries call it directly;
        without (ag2's ``open()``) the connection speaks frames through ``send_frame``/``frames()``."""
        if self._closed:
            raise RuntimeError("this LocalLinkClient is closed; take a new one with LocalLink(hub).client()")
        endpoint = self._endpoint
        if on_notify is not None:
            if endpoint._on_notify is None:
                if self._serving is not None:
                    raise RuntimeError(
                        "this LocalLinkClient was opened to speak frames; give the HubClient its own "
                        "connection (LocalLink(hub).client())"
                    )
                endpoint._on_notify = on_notify
            elif endpoint._on_notify != on_notify:
                raise RuntimeError(
                    "this LocalLinkClient is already open for another HubClient; pass the LocalLink itself "
                    "(or a new link.client()) to each HubClient so each gets its own endpoint"
                )
        if self.hub is None:
            return  # a bare queue pair (ag2's constructor): the other side is whoever holds the endpoint
        self.attach()
        if endpoint._on_notify is None and self._serving is None:
            # The hub's own task: closing the hub ends the frame loop (and so the connection: frames()
            # ends), as ag2's Hub.close cancels its endpoint tasks.
            self._serving = self.hub.background.spawn(_serve_frames(self.hub, endpoint))

    async def send_frame(self, frame: fr.Frame) -> None:
        """To the hub (its frame loop starts with the first frame; the endpoint is attached from
        ``client()`` on); dropped silently once the connection is closed (as in ag2)."""
        if self._closed or self._endpoint.closed:
            return
        if self._serving is None and self.hub is not None:
            await self.open()
        self.client_to_hub.put_nowait(frame)

    def frames(self) -> AsyncIterator[fr.Frame]:
        """Frames from the hub (answers and deliveries), until the connection closes."""
        if self._endpoint._on_notify is not None:
            raise RuntimeError(
                "this LocalLinkClient was opened by a HubClient, which takes its deliveries; "
                "read frames from a connection opened with open() and no handler"
            )
        return _drain(self.hub_to_client)

    async def request(self, request: Request[R] | str, params: dict[str, Any] | None = None) -> R:
        """Run an op as this connection: the hub sees its endpoint (its bound identities), never "no
        endpoint" (the hub itself), so a connection made by hand keeps the rules of one a client opened.
        ``request`` is the op's typed request (or, as ag2net's links took it before, its name and params)."""
        hub = self.hub
        if hub is None:
            hub = self._need_hub()
        if self._closed:
            raise RuntimeError("this LocalLinkClient is closed; take a new one with LocalLink(hub).client()")
        if not self._attached:  # attach(), without a call per op once attached
            self.attach()
        if isinstance(request, str):
            request = request_of(request, dict(params or {}))
        return await hub.handle_op(self._endpoint, request.spec.name, request)

    async def receipt(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None:
        self.receipt_now(envelope_id, status, recipient_id, channel_id, reason)

    def receipt_now(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None:
        """``receipt``, synchronously: the hub takes it at once (``HubClient.ack`` calls this)."""
        hub = self.hub
        if hub is None or not self._attached:  # one per delivery: the attached case without a call
            hub = self._need_hub()
            self.attach()
        hub.handle_receipt(self._endpoint, envelope_id, status, recipient_id, channel_id, reason)

    def receipt_handler(self) -> Callable[[str, str, str, str, str], None]:
        """What ``receipt_now`` calls, for a caller that takes one receipt per delivery: the hub's
        ``handle_receipt`` for this connection's endpoint, once attached (``receipt_now`` itself before)."""
        hub = self.hub
        if hub is None or not self._attached:
            return self.receipt_now
        own = getattr(hub, "_receipt_handler", None)  # a Hub's: its delivery book's, one call fewer
        return functools.partial(own() if own is not None else hub.handle_receipt, self._endpoint)

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        return self._need_hub().observe(since)

    # ------------------------------------------------------------------ in-process answers (InProcessLink)

    def lookup_channel(self, channel_id: str) -> ChannelMetadata:
        """A channel's metadata, synchronously (``NotFoundError`` when unknown)."""
        return self._need_hub().lookup_channel(channel_id)

    def find_agent_id(self, name: str) -> str | None:
        return self._need_hub().find_agent_id(name)

    def known_name(self, agent_id: str) -> str | None:
        """The name of a registered agent, or ``None``."""
        hub = self._need_hub()
        return hub.name_for(agent_id) if agent_id in hub.identities.agents else None

    def adapters(self) -> dict[tuple[str, int], Any]:
        """The hub's adapter registry (live: an adapter registered later shows up)."""
        return self._need_hub().channels.adapters

    def register_adapter(self, adapter: Any) -> None:
        self._need_hub().register_adapter(adapter)

    def adapter_state(self, channel_id: str) -> Any:
        """The hub's folded adapter state of a channel (``None`` when it holds none)."""
        return self._need_hub().adapter_state(channel_id)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        endpoint = self._endpoint
        if self._attached and self.hub is not None:
            self._attached = False
            await self.hub.detach_endpoint(endpoint)  # closes the endpoint too
        await endpoint.close()
        serving, self._serving = self._serving, None
        if serving is not None and serving is not asyncio.current_task():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await serving


def _code(exc: BaseException) -> str:
    code = getattr(exc, "code", None)
    return code if isinstance(code, str) else "error"


async def _serve_frames(hub: LocalHub, endpoint: LocalLinkEndpoint) -> None:
    """The hub's side of a frame-speaking in-process connection: one frame at a time, in order."""
    try:
        async for frame in endpoint.frames():
            try:
                await _serve_frame(hub, endpoint, frame)
            except Exception as exc:  # one bad frame must not end the connection
                log.warning("in-process frame %r failed: %s", getattr(frame, "kind", frame), exc)
                await endpoint.send_frame(fr.ErrorFrame(_code(exc), str(exc)))
    finally:
        with contextlib.suppress(Exception):
            await hub.detach_endpoint(endpoint)


async def _serve_frame(hub: LocalHub, endpoint: LocalLinkEndpoint, frame: Any) -> None:
    if isinstance(frame, fr.RequestFrame):
        try:
            result = await hub.handle_op(endpoint, frame.op, frame.params)
        except Exception as exc:
            await endpoint.send_frame(fr.ResponseFrame(frame.request_id, False, None, _code(exc), str(exc)))
        else:
            await endpoint.send_frame(
                fr.ResponseFrame(frame.request_id, True, encode_result(result, frame.op))
            )
    elif isinstance(frame, fr.ReceiptFrame):
        hub.handle_receipt(
            endpoint, frame.envelope_id, frame.status, frame.recipient_id, frame.channel_id, frame.reason
        )
    elif isinstance(frame, fr.HelloFrame):
        await _hello(hub, endpoint, frame)
    elif isinstance(frame, fr.PingFrame):
        await endpoint.send_frame(fr.PongFrame())
    elif not isinstance(frame, fr.PongFrame):
        kind = getattr(frame, "kind", type(frame).__name__)
        await endpoint.send_frame(
            fr.ErrorFrame(
                "protocol_error", f"a client sends hello, request, receipt or ping frames, not {kind!r}"
            )
        )


async def _hello(hub: LocalHub, endpoint: LocalLinkEndpoint, frame: fr.HelloFrame) -> None:
    """Bind a registered identity to this connection, after its auth claim checks out."""
    agent_id = hub.find_agent_id(frame.name)
    record = hub.identities.agents.get(agent_id) if agent_id is not None else None
    if record is None:
        await endpoint.send_frame(fr.ErrorFrame("not_found", f"unknown name: {frame.name}"))
        return
    passport = record.passport
    registered = passport.auth.scheme
    if frame.auth_scheme != registered:
        await endpoint.send_frame(
            fr.ErrorFrame(
                "auth_failed",
                f"auth scheme {frame.auth_scheme!r} does not match {frame.name!r}'s registered scheme "
                f"{registered!r}",
            )
        )
        return
    try:
        await hub.auth.get(registered).validate(passport, dict(frame.auth_claim or {}))
    except Exception as exc:
        await endpoint.send_frame(fr.ErrorFrame("auth_failed", str(exc)))
        return
    hub.bind_endpoint(endpoint, passport.agent_id)
    endpoint.agent_id = passport.agent_id
    await endpoint.send_frame(fr.WelcomeFrame(endpoint.endpoint_id, hub.clock()))
    if frame.since_envelope_id is not None:
        await hub.replay(endpoint, passport.agent_id, frame.since_envelope_id)


class LocalLink:
    """An in-process link to a ``Hub``: a factory of connections, one per ``HubClient``.

    ``link = LocalLink(hub)`` may be shared: every ``HubClient(link)`` calls ``link.client()`` and gets
    its own ``LocalLinkClient`` (own endpoint, own deliveries; closing one leaves the others attached).
    """

    local = True

    def __init__(self, hub: LocalHub) -> None:
        self._hub = hub

    @property
    def hub(self) -> LocalHub:
        return self._hub

    def client(self) -> LocalLinkClient:
        """A new connection to the hub: two queues, a ``LocalLinkEndpoint`` and its ``LocalLinkClient``,
        attached to the hub at once (``hub.bind_endpoint(client.endpoint_id, agent_id)`` works right away);
        its frame loop starts with the first frame it sends or ``open()``."""
        endpoint = LocalLinkEndpoint(self._hub.ids.new_id(), asyncio.Queue(), asyncio.Queue())
        client = LocalLinkClient(endpoint.endpoint_id, hub=self._hub, endpoint=endpoint)
        if not getattr(self._hub, "_closed", False):
            client.attach()  # live at once, as ag2's ``client()`` attaches its endpoint
        return client


__all__ = ["LocalEndpoint", "LocalLink", "LocalLinkClient", "LocalLinkEndpoint"]

"""The client side of the WebSocket transport: a ``Link`` that speaks frames to a hub served with ``serve_ws``.

Requests are correlated by ``request_id`` and may be in flight concurrently. Deliveries (``notify``) are
queued per recipient and handed to the client in order by one task per recipient, so a slow handler
never stalls the reader. When the connection drops the link reconnects with backoff, re-attaches every
identity it bound with a ``hello`` (``since_envelope_id=""``: the hub replays from its per-channel
delivery cursors, which advance on ``ack`` receipts) and drops any envelope it already delivered, so
each identity sees what it missed, in order, once. Observe subscriptions resume where they stopped.
The connection's states (connect, handshake, supervise, reconnect) are this module's ``WsLinkClient``;
matching answers to requests is ``ws_requests.PendingRequests``, the per-recipient queues and the observe
streams are ``ws_delivery``.

With a ``token`` the link authenticates the connection on connect (a ``hello`` with an empty name), asks
for an identity secret when it registers, and presents it when it attaches or re-attaches; secrets are
kept in a ``SecretFile`` when one is given (``HubClient.connect`` gives the user's data folder).

Several URLs (``WsLinkClient(["ws://a:8765", "ws://b:8765"])`` or ``"ws://a:8765,ws://b:8765"``) name the
hubs of one network, an active one and standbys on the same database (``ag2net serve --db
postgresql://…``): the link connects to the first that admits, skipping one that refuses the connection or
says it is a standby (its handshake carries ``X-Ag2net-Role: standby``; its answers are ``StandbyError``),
and after a drop it reconnects to whichever admits then, re-attaching and replaying as above. When every
hub answers standby (a takeover in progress) it keeps asking, up to ``open_timeout`` seconds on the first
connect. One URL behaves as before, except that a standby is refused with ``StandbyError``. With several
URLs every attempt asks all of them at once, each again on its own backoff, so a hub that does not answer
(a frozen process whose kernel still accepts connections) holds up only its own attempt.

Ping deadline: a hub that sends nothing for ``ping_deadline`` seconds (default 3) counts as lost. When
nothing has come from it for a third of that the link sends a WebSocket ping; if neither the pong nor any
other frame arrives before the deadline, the link drops the connection at once (no closing handshake with
a hub that does not answer) and reconnects as after any drop, to whichever of its URLs admits. Time this
process itself did not run (its own event loop stalled) is not held against the hub. ``None`` leaves only
websockets' keepalive (``ping_interval`` + ``ping_timeout``, then its closing timeout: about 50 s).

The link's background task ends with it: cancelled (``asyncio.run()`` ending while the client is still
open, Ctrl-C) it closes the connection and the link, and later ops fail with ``ConnectionLostError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any, TypeVar

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ag2net.envelope import Envelope
from ag2net.errors import AuthError, NetworkError, ProtocolError, StandbyError, error_from_code
from ag2net.ids import make_id
from ag2net.protocol.codec import to_wire
from ag2net.protocol.frames import (
    ErrorFrame,
    HelloFrame,
    NotifyFrame,
    PingFrame,
    ResponseFrame,
    WelcomeFrame,
    decode_frame,
    encode_frame,
)
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.protocol.ops import Request
from ag2net.protocol.ports import NotifyHandler
from ag2net.transport.secret_file import SecretFile
from ag2net.transport.ws_delivery import END, DeliveryQueues, Subscription
from ag2net.transport.ws_dial import (
    MULTI_URL_MAX_DELAY,
    ROLE_HEADER,
    STANDBY_ROLE,
    ConnectionLostError,
    Dialer,
    race,
)
from ag2net.transport.ws_endpoint import WsLinkEndpoint
from ag2net.transport.ws_identities import IdentityBook
from ag2net.transport.ws_requests import PendingRequests
from ag2net.transport.ws_taking import TakingClientConnection
from ag2net.transport.ws_write import write_now

log = logging.getLogger(__name__)

OPERATOR_SCHEME = "operator"
#: The message an ag2net hub sends for a request whose post it holds at a breakpoint (not a frame: ag2
#: 1.2.1 clients never ask for it), and the param of ``post_envelope`` that asks for it.
HELD_KIND = "held"
HELD_NOTICE_PARAM = "held_notice"
#: Ops that wait for a person however long it takes: no RPC timeout applies to them.
WAITS_ON_A_PERSON = frozenset({"pause_turn", "request_approval"})


R = TypeVar("R")


async def _finish(task: asyncio.Task[Any]) -> None:
    """Cancel ``task`` and wait for it to end. Its own outcome is dropped (it was handled where it
    happened); a cancellation of the caller itself propagates, unlike ``suppress(CancelledError)``."""
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()


def split_urls(url: str | Sequence[str]) -> list[str]:
    """The hub URLs ``url`` names: one, a comma-separated string, or a list of them (order kept, repeats
    dropped); ValueError when there is none."""
    items = [url] if isinstance(url, str) else list(url)
    urls: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError(f"a hub URL must be a string like ws://HOST:PORT, got {item!r}")
        for part in item.split(","):
            part = part.strip()
            if part and part not in urls:
                urls.append(part)
    if not urls:
        raise ValueError("no hub URL given; use ws://HOST:PORT (several separated by commas)")
    return urls


def to_json_params(value: Any) -> Any:
    """Op params as JSON data: records via ``to_dict`` (a passport keeps its claim: the hub checks it)."""
    return to_wire(value, claims=True)


class WsLinkClient:
    """A ``Link`` over one WebSocket connection (reconnecting) to ``url``: ag2's ``WsLinkClient``.

    ``HubClient`` opens it with its delivery handler (``open(on_notify)``): ops, deliveries, receipts and
    reconnects are handled here. Opened without one (ag2's ``await client.open()``) it only connects and
    speaks frames: ``send_frame(f)`` and ``async for f in client.frames()``; ``endpoint_id`` is ``""``
    until a ``WelcomeFrame`` arrives. One client is one connection, for one caller: ``WsLink(url).client()``
    makes a fresh one each time.

    ``token`` is the ``api_key`` presented for identities registered or attached through this link when
    their passport carries no claim of its own. ``operator_token`` asks for the operator role at connect
    time and fails if it is refused; so does ``operator=True`` without a token. ``operator=None`` asks for
    the role without a credential and carries on without it when the server says no (``is_operator``
    tells which) — what ``HubClient.connect`` does. The default, ``operator=False``, never asks: a
    ``WsLink(url)`` made the ag2 way sees only what its own identities may see, as in ag2.
    """

    local = False

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        operator_token: str | None = None,
        operator: bool | None = False,
        ssl_context: Any = None,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        ping_deadline: float | None = 3.0,
        open_timeout: float | None = 10.0,
        rpc_timeout: float | None = None,
        reconnect: bool = True,
        reconnect_initial_delay: float = 0.05,
        reconnect_max_delay: float = 5.0,
        max_message_bytes: int | None = 256 * 1024 * 1024,
        dedupe_window: int = 50_000,
        compression: str | None = None,
        secrets: SecretFile | None = None,
    ) -> None:
        if ping_deadline is not None and not (
            isinstance(ping_deadline, int | float)
            and not isinstance(ping_deadline, bool)
            and ping_deadline > 0
        ):
            raise ValueError(
                f"ping_deadline must be a number of seconds more than 0 (or None to turn it off), got {ping_deadline!r}"
            )
        self._settings: dict[str, Any] = {
            "token": token,
            "operator_token": operator_token,
            "operator": operator,
            "ssl_context": ssl_context,
            "ping_interval": ping_interval,
            "ping_timeout": ping_timeout,
            "ping_deadline": ping_deadline,
            "open_timeout": open_timeout,
            "rpc_timeout": rpc_timeout,
            "reconnect": reconnect,
            "reconnect_initial_delay": reconnect_initial_delay,
            "reconnect_max_delay": reconnect_max_delay,
            "max_message_bytes": max_message_bytes,
            "dedupe_window": dedupe_window,
            "compression": compression,
            "secrets": secrets,
        }
        #: every hub this link may connect to; ``url`` is the one it is (or was last) connected to
        self.urls = split_urls(url)
        self.url = self.urls[0]
        self.token = token
        self.secrets = secrets
        #: the identities this link holds, their credentials and secrets (``ws_identities``)
        self.identities = IdentityBook(self.urls, token, secrets)
        self.operator_token = operator_token
        self.operator = operator if operator is not None else (True if operator_token is not None else None)
        self.is_operator = False
        self.ping_deadline = None if ping_deadline is None else float(ping_deadline)
        self.open_timeout = open_timeout
        self.dialer = Dialer(
            ssl_context,
            open_timeout,
            ping_interval,
            ping_timeout,
            max_message_bytes,
            compression,
            self.ping_deadline,
        )
        self.rpc_timeout = rpc_timeout
        self._held_requests: set[str] = set()  # requests the hub said wait on a person (held posts)
        self.reconnect = reconnect
        self.reconnect_initial_delay = reconnect_initial_delay
        self.reconnect_max_delay = reconnect_max_delay
        self.dedupe_window = dedupe_window
        self.ssl_context, self.compression, self.max_message_bytes = (
            ssl_context,
            compression,
            max_message_bytes,
        )
        self.ping_interval, self.ping_timeout = ping_interval, ping_timeout
        self.endpoint_id = ""
        self.reconnects = 0
        self._on_notify: NotifyHandler | None = None
        self._ws: ClientConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None
        self._heard = 0.0  # loop time the hub was last heard from on the current connection
        self._supervisor: asyncio.Task[None] | None = None
        self._ready = asyncio.Event()
        self._closed = False
        self._failure: NetworkError | None = None
        #: the requests in flight and the hello frames awaiting a welcome (``ws_requests``)
        self.pending = PendingRequests()
        #: each recipient's queue of deliveries and its task (``ws_delivery``)
        self.deliveries = DeliveryQueues(dedupe_window, lambda: self._on_notify, self._ack_again, self._spawn)
        self._subs: dict[str, Subscription] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._raw: asyncio.Queue[Any] | None = None  # frames for frames(), when opened without a handler

    # ------------------------------------------------------------------ Link protocol

    @property
    def endpoint_id(self) -> str:
        """The hub's id for this connection, from its last ``WelcomeFrame`` (``""`` before one)."""
        return self._endpoint_id

    @endpoint_id.setter
    def endpoint_id(self, value: str) -> None:
        self._endpoint_id = value

    @property
    def connected(self) -> bool:
        return self._ready.is_set()

    @property
    def bound_ids(self) -> list[str]:
        """Identities this link re-attaches after a reconnect."""
        return list(self.identities.held)

    @property
    def displaced(self) -> dict[str, str]:
        """Identities another connection took over (agent id -> what the hub said); not re-attached."""
        return self.identities.displaced

    def secret_for(self, name: str) -> str | None:
        """The identity secret this link holds for ``name`` on its hub (memory, then the secret file)."""
        return self.identities.secret_for(name)

    async def resend_unacked(self, agent_id: str, since_envelope_id: str) -> None:
        """Ask the hub to resend what ``agent_id`` (bound through this link) has not acknowledged past
        ``since_envelope_id``: a ``hello`` for it, what the link itself sends after a reconnect."""
        ident = self.identities.held.get(agent_id)
        if ident is not None:
            await self._hello(HelloFrame(ident.name, ident.scheme, dict(ident.claim), since_envelope_id))

    async def open(self, on_notify: NotifyHandler | None = None) -> None:
        """Connect. With ``on_notify`` (what ``HubClient`` passes) also run the handshake and keep the
        connection up; without (ag2's ``open()``) only connect, and speak frames."""
        if self._closed:
            raise RuntimeError("WsLink is closed")
        if on_notify is None:
            if self._supervisor is not None:
                raise RuntimeError(
                    "this WsLinkClient is open for a HubClient, which reads its frames; take another "
                    "connection with WsLink(url).client() to speak frames"
                )
            if self._raw is None:
                self._raw = asyncio.Queue()
                try:
                    await self._connect()
                except BaseException:
                    self._raw = None
                    raise
            return
        if self._raw is not None:
            raise RuntimeError(
                "this WsLinkClient was opened to speak frames; give the HubClient its own connection "
                "(WsLink(url).client())"
            )
        if self._supervisor is not None:
            if on_notify != self._on_notify:
                raise RuntimeError(
                    "this WsLinkClient is already open for another HubClient; pass the WsLink itself "
                    "(or a new link.client()) to each HubClient so each gets its own connection"
                )
            return
        self._on_notify = on_notify
        self._failure = None
        await self._connect_first()
        try:
            await self._handshake(rebind=False)
        except BaseException:
            await self._drop_connection()
            raise
        self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def request(self, request: Request[R] | str, params: dict[str, Any] | None = None) -> R:
        """Run one op on the hub: ``request`` is its typed request (or its name, with ``params``); the
        answer is decoded to the op's typed result, the one every link returns."""
        if isinstance(request, str):
            op, params = request, params or {}
        else:
            op, params = request.spec.name, request.to_params()
        spec = CATALOGUE.get(op)
        wire = self.identities.present(
            op, spec.encode_params(params) if spec is not None else to_json_params(params)
        )
        if op == "post_envelope":
            wire = {**wire, HELD_NOTICE_PARAM: True}  # tell me when my post is held (ag2 hubs ignore it)
        request_id = make_id()
        try:
            text = json.dumps({"kind": "request", "request_id": request_id, "op": op, "params": wire})
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"params of op {op!r} are not JSON-serialisable: {exc}") from None
        await self._wait_ready(op)
        future = self.pending.ask(request_id, op)
        try:
            ws = self._ws
            if ws is None:
                raise ConnectionLostError(f"connection to {self.url} lost before op {op!r} was sent")
            try:
                if not write_now(ws, text):
                    await ws.send(text)
            except ConnectionClosed:
                await self._settle_reader()
                if self._failure is not None:
                    raise self._failed() from None
                raise ConnectionLostError(f"connection to {self.url} lost while sending op {op!r}") from None
            result = await self._answer(request_id, op, future)
        finally:
            self._held_requests.discard(request_id)
            secret = self.pending.forget(request_id)
        self.identities.learn(op, wire, result, secret)
        if spec is None:
            return result
        try:
            return spec.decode_result(result)  # the same typed result the in-process link returns
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"the hub's answer to {op!r} is not a {spec.result!r}: {exc}") from None

    async def _answer(self, request_id: str, op: str, future: asyncio.Future[Any]) -> Any:
        """The answer to one request, within ``rpc_timeout`` unless it waits on a person: an op that
        always may (a paused turn, an approval), or a post the hub said it holds at a breakpoint."""
        timeout = self.rpc_timeout
        if timeout is None or op in WAITS_ON_A_PERSON:
            return await future
        # A timer on the future itself, not asyncio.wait (its waiter, callbacks and a second hop per answer)
        timer = asyncio.get_running_loop().call_later(timeout, self._expire, request_id, op, future, timeout)
        try:
            return await future
        finally:
            timer.cancel()

    def _expire(self, request_id: str, op: str, future: asyncio.Future[Any], timeout: float) -> None:
        """``rpc_timeout`` has passed without an answer: the request fails, unless the hub said it holds
        the post at a breakpoint (then it waits for an operator, however long that takes)."""
        if future.done() or request_id in self._held_requests:
            return
        future.set_exception(
            TimeoutError(f"op {op!r} got no answer from {self.url} within {timeout}s (rpc_timeout)")
        )

    async def receipt(
        self, envelope_id: str, status: str, recipient_id: str, channel_id: str, reason: str = ""
    ) -> None:
        self.deliveries.handled(recipient_id, envelope_id)
        ws = self._ws
        if ws is None:
            return  # the hub replays from its cursor, and the duplicate is acked again on arrival
        data = {
            "kind": "receipt",
            "envelope_id": envelope_id,
            "status": status,
            "recipient_id": recipient_id,
            "channel_id": channel_id,
            "reason": reason,
        }
        text = json.dumps(data)
        if not write_now(ws, text):
            with contextlib.suppress(ConnectionClosed):
                await ws.send(text)

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Every observed event after ``since`` (default: from now). Needs the operator role."""
        return self._observe(since)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        supervisor, self._supervisor = self._supervisor, None
        if supervisor is not None:
            await _finish(supervisor)
        await self._drop_connection()
        if self._raw is not None:
            self._raw.put_nowait(None)
        self.pending.fail_all(ConnectionLostError(f"link to {self.url} closed"))
        for sub in self._subs.values():
            sub.queue.put_nowait(END)
        current = asyncio.current_task()
        workers = [t for t in (*self.deliveries.workers.values(), *self._background) if t is not current]
        for task in workers:
            task.cancel()
        if workers:
            await asyncio.wait(workers)
        self._ready.set()  # wake waiters so they see the link is closed

    async def send_frame(self, frame: Any) -> None:
        """Send one frame (``encode_frame`` as JSON text) on the open connection."""
        ws = self._ws
        if ws is None:
            raise RuntimeError("WsLinkClient is not open; await client.open() first")
        try:
            await ws.send(json.dumps(encode_frame(frame)))
        except ConnectionClosed:
            raise ConnectionLostError(f"connection to {self.url} closed; the frame was not sent") from None

    def frames(self) -> AsyncIterator[Any]:
        """Every frame the hub sends, decoded, until the connection closes (``open()`` without a
        handler first; a message that is not a frame is logged and skipped)."""
        if self._raw is None:
            raise RuntimeError(
                "frames() reads a connection opened with open() and no handler; a HubClient's connection "
                "is read by the HubClient"
            )
        return self._drain_frames(self._raw)

    @staticmethod
    async def _drain_frames(queue: asyncio.Queue[Any]) -> AsyncIterator[Any]:
        while True:
            frame = await queue.get()
            if frame is None:
                queue.put_nowait(None)
                return
            yield frame

    # ------------------------------------------------------------------ connection lifecycle

    async def _connect_first(self) -> None:
        """The first connect: with several URLs of which none admits but some answer standby (a takeover
        in progress), ask again until ``open_timeout`` has passed."""
        if len(self.urls) == 1:
            await self._connect_to(self.url)
            return
        until = asyncio.get_running_loop().time() + (self.open_timeout or 10.0)
        self._adopt(
            *await race(self.urls, self.dialer.open, self.dialer.discard, self.reconnect_initial_delay, until)
        )

    async def _connect(self) -> None:
        """Connect to the URL or, with several, to whichever admits first (asking until one does)."""
        if len(self.urls) == 1:
            await self._connect_to(self.url)
            return
        self._adopt(
            *await race(self.urls, self.dialer.open, self.dialer.discard, self.reconnect_initial_delay, None)
        )

    async def _connect_to(self, url: str) -> None:
        self._adopt(url, await self.dialer.open(url))

    def _adopt(self, url: str, ws: ClientConnection) -> None:
        """Make ``ws`` (to ``url``) the link's connection: read it, and watch that the hub answers."""
        loop = asyncio.get_running_loop()
        self.url = url
        self._ws = ws
        self._heard = loop.time()
        self._reader = loop.create_task(self._read(ws))
        if self.ping_deadline is not None:
            self._keeper = loop.create_task(self._keep_alive(ws, self.ping_deadline))

    async def _keep_alive(self, ws: ClientConnection, deadline: float) -> None:
        """Drop ``ws`` when the hub sends nothing (no frame, no pong) for ``deadline`` seconds."""
        loop = asyncio.get_running_loop()
        tick = min(deadline / 6, 0.5)
        heard = woke = loop.time()
        pong: Any = None

        def answered(future: asyncio.Future[Any]) -> None:
            nonlocal heard
            if not future.cancelled() and future.exception() is None:
                heard = max(heard, loop.time())

        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            if now - woke > tick + max(tick, 0.25):
                # This process did not run for a while (its own loop stalled): what the hub sent meanwhile
                # is still to be read, so the hub gets a fresh deadline.
                heard = now
            woke = now
            heard = max(heard, self._heard)
            silent = now - heard
            if silent >= deadline:
                log.warning(
                    "the hub at %s sent nothing for %.1f s (a ping unanswered): the connection counts as lost",
                    self.url,
                    silent,
                )
                ws.transport.abort()  # no closing handshake: a hub that does not answer would not answer it
                return
            if silent >= deadline / 3 and (pong is None or pong.done()):
                try:
                    pong = await ws.ping()
                except ConnectionClosed:
                    return
                pong.add_done_callback(answered)

    async def _drop_connection(self) -> None:
        self._ready.clear()
        ws, self._ws = self._ws, None
        reader, self._reader = self._reader, None
        keeper, self._keeper = self._keeper, None
        if keeper is not None and keeper is not asyncio.current_task():
            await _finish(keeper)
        if ws is not None:
            await self.dialer.discard(ws)
        if reader is not None and reader is not asyncio.current_task():
            await _finish(reader)

    async def _handshake(self, *, rebind: bool) -> None:
        if self.token is not None:
            # Prove the connection holds the token before anything else (a token server closes one that
            # does not within seconds). Servers without a token, and ag2 hubs, answer not_found: fine.
            try:
                await self._hello(HelloFrame("", "api_key", {"token": self.token}))
            except (AuthError, StandbyError):
                raise
            except NetworkError:
                pass
        if self.operator is not False:
            claim = {"token": self.operator_token} if self.operator_token is not None else {}
            try:
                await self._hello(HelloFrame("ag2net-operator", OPERATOR_SCHEME, claim))
                self.is_operator = True
            except (AuthError, StandbyError):
                raise
            except NetworkError:
                if self.operator:
                    raise
                self.is_operator = False  # only asked in passing (an ag2 hub answers not_found)
        if rebind:
            for agent_id, ident in list(self.identities.held.items()):
                try:
                    await self._hello(HelloFrame(ident.name, ident.scheme, dict(ident.claim), ""))
                except (AuthError, StandbyError):
                    raise
                except NetworkError as exc:
                    log.warning("could not re-attach %s after reconnect: %s", ident.name, exc)
                    self.identities.held.pop(agent_id, None)
            for sub in list(self._subs.values()):
                await self._subscribe(sub)
        self._ready.set()

    async def _hello(self, frame: HelloFrame) -> None:
        ws = self._ws
        if ws is None:
            raise ConnectionLostError(f"connection to {self.url} lost during hello")
        future = self.pending.hello()
        try:
            await ws.send(json.dumps(encode_frame(frame)))
            welcome = await asyncio.wait_for(future, self.open_timeout)
        except ConnectionClosed:
            raise ConnectionLostError(f"connection to {self.url} lost during hello") from None
        finally:
            self.pending.forget_hello(future)
        self.endpoint_id = welcome.endpoint_id

    async def _supervise(self) -> None:
        try:
            while not self._closed:
                reader = self._reader
                if reader is not None:
                    await asyncio.wait({reader})  # its end; a cancellation of this task is not swallowed
                await self._drop_connection()
                self.pending.fail_all(
                    ConnectionLostError(f"connection to {self.url} lost; the op may or may not have run")
                )
                if self._closed or self._failure is not None:
                    break
                if not self.reconnect:
                    self._failure = ConnectionLostError(f"connection to {self.url} closed")
                    break
                await self._reconnect()
        except asyncio.CancelledError:
            if not self._closed:
                # Cancelled from outside: asyncio.run() ending while the client is open, or Ctrl-C. The link
                # ends here (reconnecting would keep the event loop from ever finishing).
                self._failure = ConnectionLostError(
                    f"the link to {self.url} ended: its task was cancelled (the event loop is stopping); "
                    "connect again with a new client"
                )
                self.pending.fail_all(self._failed())
                await self._drop_connection()
            raise
        finally:
            self._ready.set()
            for sub in self._subs.values():
                if self._failure is not None:
                    sub.queue.put_nowait(self._failed())

    async def _reconnect(self) -> None:
        delay = self.reconnect_initial_delay
        while not self._closed:
            try:
                await self._connect()
                await self._handshake(rebind=True)
                self.reconnects += 1
                log.info("reconnected to %s", self.url)
                return
            except AuthError as exc:
                self._failure = exc
                await self._drop_connection()
                return
            except (ConnectionLostError, TimeoutError, ConnectionClosed, NetworkError) as exc:
                log.debug("reconnect to %s failed: %s", self.url, exc)
                await self._drop_connection()
            await asyncio.sleep(delay * (0.5 + random.random()))
            ceiling = self.reconnect_max_delay
            if len(self.urls) > 1:
                ceiling = min(ceiling, MULTI_URL_MAX_DELAY)
            delay = min(delay * 2, ceiling)

    async def _wait_ready(self, what: str) -> None:
        if self._closed:
            raise RuntimeError("WsLink is closed")
        if self._failure is not None:
            raise self._failed()
        if self._supervisor is None and not self._ready.is_set():
            raise RuntimeError("WsLink is not open; call HubClient.open() (or any op) first")
        if not self._ready.is_set():
            try:
                if self.rpc_timeout is None:
                    await self._ready.wait()
                else:
                    await asyncio.wait_for(self._ready.wait(), self.rpc_timeout)
            except TimeoutError:
                raise ConnectionLostError(
                    f"hub at {self.url} unreachable for {self.rpc_timeout}s; op {what!r} not sent"
                ) from None
        if self._closed:
            raise RuntimeError("WsLink is closed")
        if self._failure is not None:
            raise self._failed()

    def _failed(self) -> NetworkError:
        """A fresh copy of the fatal error (one instance raised many times would grow its traceback)."""
        failure = self._failure
        assert failure is not None
        return type(failure)(str(failure))

    async def _settle_reader(self) -> None:
        """Let the reader finish reading a close frame, so an auth refusal is known before we report."""
        reader = self._reader
        if reader is not None and reader is not asyncio.current_task():
            await asyncio.wait({reader}, timeout=1.0)

    # ------------------------------------------------------------------ reading

    async def _read(self, ws: ClientConnection) -> None:
        loop = asyncio.get_running_loop()
        taking = ws if isinstance(ws, TakingClientConnection) else None
        if taking is not None:
            # Meanwhile a message is handled as it is parsed (``ws_taking``): no reader wake-up per frame.
            taking.taker = lambda text: self._take(ws, text)
        try:
            while True:
                if taking is None:
                    message = await ws.recv()
                else:
                    taking.reader_waiting = True
                    try:
                        message = await ws.recv()
                    finally:
                        taking.reader_waiting = False
                    taking.message_read()
                self._heard = loop.time()
                data = self._parse(message)
                if data is not None and not self._handle(data):
                    await self._pong()
        except ConnectionClosed:
            pass
        finally:
            if taking is not None:
                taking.taker = None
            if self._raw is not None:
                self._raw.put_nowait(None)
            reason = ws.close_reason or ""
            if ws.close_code == 1008 and reason.startswith("auth_failed"):
                reason = reason.removeprefix("auth_failed:").strip()
                self._failure = AuthError(reason or "authentication failed")
                self.pending.fail_all(self._failed())

    def _take(self, ws: ClientConnection, text: str) -> bool:
        """A message on ``ws`` that arrived while its reader waited, nothing queued ahead of it: handled
        now, unless it is the hub's ping (its pong is sent by the reader, which may wait on the socket)."""
        try:
            self._heard = asyncio.get_running_loop().time()
            data = self._parse(text)
            return data is None or self._handle(data)
        except Exception:
            # What would end the reader ends the connection (the link reconnects, as after any drop).
            log.exception("handling a frame from the hub failed; dropping the connection")
            ws.transport.abort()
            return True

    @staticmethod
    def _parse(message: str | bytes) -> dict[str, Any] | None:
        """A message's JSON object, or ``None`` (logged when it is not JSON: skipped)."""
        try:
            data = json.loads(message)
        except (ValueError, TypeError, RecursionError):
            log.warning("hub sent a message that is not JSON (or nests too deep); skipped")
            return None
        return data if isinstance(data, dict) else None

    def _handle(self, data: dict[str, Any]) -> bool:
        """Handle one message from the hub at once; ``False`` for a ping frame, which awaits its pong."""
        try:
            if self._raw is not None:
                frame = decode_frame(data)
                if isinstance(frame, WelcomeFrame):
                    self.endpoint_id = frame.endpoint_id
                self._raw.put_nowait(frame)
                return True
            kind = data.get("kind")
            if kind == "observed":
                self._on_observed(data)
            elif kind == HELD_KIND:
                self._held_requests.add(str(data.get("request_id")))
            else:
                frame = decode_frame(data)
                if isinstance(frame, PingFrame):
                    return False
                self._on_frame(frame)
        except ProtocolError as exc:
            log.warning("hub sent a malformed frame (%s); skipped", exc)
        return True

    async def _pong(self) -> None:
        ws = self._ws
        if ws is not None:
            with contextlib.suppress(ConnectionClosed):
                await ws.send('{"kind": "pong"}')

    def _on_frame(self, frame: Any) -> None:
        if isinstance(frame, NotifyFrame):
            self._on_envelope(frame.recipient_id, frame.envelope)
        elif isinstance(frame, ResponseFrame):
            self.pending.answer(frame, Subscription.started)
        elif isinstance(frame, WelcomeFrame):
            self.pending.resolve_hello(frame, None)
        elif isinstance(frame, ErrorFrame):
            if frame.code == "access_denied" and self.identities.lost(frame.message):
                # Someone holding this identity's credentials attached it elsewhere: do not fight back.
                log.warning("hub: %s", frame.message)
            elif not self.pending.resolve_hello(None, error_from_code(frame.code, frame.message)):
                log.warning("hub reported %s: %s", frame.code, frame.message)

    def _on_envelope(self, recipient_id: str, envelope: Envelope) -> None:
        if recipient_id:
            targets = [recipient_id]
        else:
            audience = envelope.audience
            targets = [a for a in self.identities.held if audience is None or a in audience]
        for rid in targets:
            self.deliveries.deliver(rid, envelope)

    async def _ack_again(self, envelope_id: str, recipient_id: str, channel_id: str) -> None:
        await self.receipt(envelope_id, "ack", recipient_id, channel_id)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # ------------------------------------------------------------------ observe

    async def _observe(self, since: int | None) -> AsyncIterator[ObservedEvent]:
        await self._wait_ready("observe")
        sub = Subscription(make_id(), since)
        self._subs[sub.sid] = sub
        try:
            try:
                await self._subscribe(sub)
            except ConnectionLostError:
                if not self.reconnect or self._closed or self._failure is not None:
                    raise
                # Lost before the hub answered: the subscription stays registered, and the reconnect's
                # rebind subscribes it again from ``since``, like any subscription a drop interrupted.
            while True:
                item = await sub.queue.get()
                if item is END:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._subs.pop(sub.sid, None)
            if not self._closed and self._ws is not None:
                self._spawn(self._unsubscribe(sub.sid))

    async def _subscribe(self, sub: Subscription) -> None:
        params: dict[str, Any] = {
            "subscription": sub.sid,
            "since": sub.last if sub.last is not None else sub.since,
        }
        if sub.incarnation is not None:
            params["incarnation"] = sub.incarnation
        ws = self._ws
        if ws is None:
            raise ConnectionLostError(f"connection to {self.url} lost before observe")
        request_id = make_id()
        future = self.pending.ask(request_id, "observe", sub)
        try:
            await ws.send(
                json.dumps({"kind": "request", "request_id": request_id, "op": "observe", "params": params})
            )
            await asyncio.wait_for(future, self.open_timeout)
        except ConnectionClosed:
            raise ConnectionLostError(f"connection to {self.url} lost during observe") from None
        finally:
            self.pending.forget(request_id)

    async def _unsubscribe(self, sid: str) -> None:
        with contextlib.suppress(Exception):
            await self.request("unobserve", {"subscription": sid})

    def _on_observed(self, data: dict[str, Any]) -> None:
        sub = self._subs.get(data.get("subscription"))  # type: ignore[arg-type]
        if sub is not None:
            sub.observed(data)


class WsLink(WsLinkClient):
    """ag2's link factory for a hub served with ``serve_ws``: ``client()`` makes a fresh ``WsLinkClient``
    (its own connection, so its own bindings and deliveries) with these settings, once per caller.

    ``HubClient(WsLink(url))`` takes its connection from ``client()``. A ``WsLink`` is also a connection
    itself (what ``HubClient.connect`` and earlier ag2net code hand over), with the same settings.
    """

    def client(self) -> WsLinkClient:
        """A new, unopened connection to ``url`` with this link's settings."""
        return WsLinkClient(self.urls, **self._settings)


__all__ = [
    "ROLE_HEADER",
    "STANDBY_ROLE",
    "ConnectionLostError",
    "WsLink",
    "WsLinkClient",
    "WsLinkEndpoint",
    "split_urls",
    "to_json_params",
]

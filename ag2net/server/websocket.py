"""The hub's WebSocket server: frames in and out, authentication at hello/register, authorisation per op
(by the policy object handed to ``serve_ws``: ``ag2net.server.policy``).

Auth in one place (reference §7.3-7.4, plus ag2net's operator role):

* Identities authenticate with the hub's ``AuthRegistry`` (``none``, ``api_key``) when they register
  (``register`` op, the passport's ``auth`` block) or re-attach (``hello`` frame, or the ``bind`` op with
  ``auth_claim``). ``serve_ws(token=...)`` adds a shared ``api_key`` every name accepts and refuses the
  ``none`` scheme over the wire. Without a token, a hub that accepts ``none`` may only listen on loopback
  unless ``allow_unauthenticated=True`` (a warning is logged).
* The **operator** role (the workbench) is asked for with ``HelloFrame(name=..., auth_scheme="operator",
  auth_claim={"token": operator_token})``. It may observe every channel, read any WAL, channel, task,
  turn record and the audit log, and close any channel; it never posts as someone else. A server
  started without an ``operator_token`` grants it freely only when it already accepts ``none``. Asking
  without a token where one is needed answers ``access_denied`` and keeps the connection.
* An authentication failure answers ``auth_failed`` (a response to the op, or an ``ErrorFrame`` for a
  hello) and closes the connection with code 1008; frames read after it are not processed.
* A malformed frame answers ``protocol_error`` (a ``ResponseFrame`` when it carried a usable
  ``request_id``, else an ``ErrorFrame``) and the connection stays open. A message larger than
  ``max_message_bytes`` closes the connection with code 1009 (websockets' ``max_size``); one nesting
  arrays/objects deeper than ``MAX_JSON_DEPTH`` is a ``protocol_error`` that keeps its ``request_id``.

On a server started with a ``token`` (SPEC decisions 21 and 23):

* A connection authenticates by presenting the token: a ``hello`` with an empty name and
  ``auth_claim={"token": ...}`` (what ``WsLink`` sends on connect), or any successful ``register``,
  ``hello`` or ``bind`` of an identity, or the operator role. One that has not within ``auth_timeout``
  seconds is closed (1008, ``auth_failed: ...``). Until then it may not read the directory
  (``DIRECTORY_OPS``) unless the server was started with ``public_directory=True``.
* Each identity registered over the wire gets its own secret, returned once in the response's
  ``identity_secret`` field to a client that asked for it (``params.identity_secret: true``) and stored
  hashed. A later ``hello``/``bind`` for that name must present it as ``auth_claim.secret``. A connection
  that loses an identity this way is told (an ``access_denied`` error frame naming it) and, if it holds
  nothing else, closed (1008, ``displaced: ...``). Without ``legacy_identities=True`` a registration that
  does not ask for a secret (an ag2 1.2.1 client) is refused, and identities without a secret cannot be
  attached over the wire; with it, they are admitted on the shared token alone.

Every server bounds what one client can cost (decision 23): at most ``MAX_INFLIGHT_REQUESTS`` requests per
connection are read and not yet answered, an answer counting until it is written; one message is written
at a time, and a connection that does not take a message within ``send_timeout`` seconds is closed
(1008); the keepalive ping's deadline covers writing it, so a peer that stops reading is timed out
(1011); connections are limited in total and per remote address (HTTP 503 at the handshake); skill
markdown and resumes are capped at ``MAX_SKILL_BYTES`` and ``MAX_RESUME_BYTES``.

Requests of one connection run concurrently, each in its own task, so an invitee bound to the same
connection as the channel's creator can ack while ``create_channel`` waits. ``observe``/``unobserve``
are connection-level ops (not in the hub's op table) streaming ``{"kind": "observed", "subscription",
"event"}`` frames; an ag2 client never asks for them, so it never sees that kind.
"""

from __future__ import annotations

import asyncio
import http
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import Server, ServerConnection, serve

from ag2net.errors import AccessDeniedError, AuthError
from ag2net.hub.auth import ApiKeyAuth, AuthRegistry, IdentitySecrets
from ag2net.ids import make_id
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.server.connection import TakingConnection
from ag2net.server.connection_limits import (
    DEFAULT_MAX_UNAUTHENTICATED,
    DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS,
    ConnectionLimits,
    check_positive,
)
from ag2net.server.endpoint import (
    CLOSE_AUTH_FAILED,
    CLOSE_POLICY,
    CLOSE_TRY_AGAIN,
    WsEndpoint,
    address_of,
    encode_result,
    token_matches,
)
from ag2net.server.policy import WirePolicy

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub

log = logging.getLogger("ag2net.server")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
DEFAULT_AUTH_TIMEOUT = 5.0
DEFAULT_SEND_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 2000
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256
#: The ops a connection reads the directory with (their access rule in the catalogue is ``directory``).
DIRECTORY_OPS = frozenset(
    n for n, spec in CATALOGUE.items() if spec.access.rule == "directory" and not spec.connection
)


def classified_ops() -> frozenset[str]:
    """Every op name this server has an authorisation rule for (every op of the catalogue)."""
    return frozenset(n for n, spec in CATALOGUE.items() if not spec.connection)


_INCARNATIONS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _incarnation_of(observe_log: Any) -> str:
    """One name per observe log (per hub object): positions are comparable only within it."""
    name = _INCARNATIONS.get(observe_log)
    if name is None:
        name = _INCARNATIONS[observe_log] = f"{os.getpid()}-{time.time_ns():x}-{make_id()[:8]}"
    return name


class WsServer:
    """A running server: the websockets server plus the hub-facing policy it enforces."""

    def __init__(
        self,
        hub: Hub,
        limits: ConnectionLimits,
        *,
        token: str | None,
        operator_token: str | None,
        open_mode: bool,
        tls: bool = False,
        public_directory: bool = False,
        legacy_identities: bool = False,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        ping_interval: float | None = 20.0,
        ping_timeout: float | None = 20.0,
        policy: WirePolicy | None = None,
    ) -> None:
        self.hub = hub
        #: Who may run which op over a connection (``WirePolicy``: the catalogue's rules plus its own).
        self.policy = policy if policy is not None else WirePolicy()
        self.token = token
        self.operator_token = operator_token
        self.open_mode = open_mode
        self.tls = tls
        self.public_directory = public_directory
        self.legacy_identities = legacy_identities
        self.send_timeout = send_timeout
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        # Identity secrets exist on token servers only: without a token every local client is trusted.
        self.secrets = IdentitySecrets(hub) if token is not None else None
        self.endpoints: dict[str, WsEndpoint] = {}
        self.incarnation = _incarnation_of(hub.observe_log)
        self.server: Server | None = None
        self._replay_locks: dict[str, asyncio.Lock] = {}
        #: Authenticated and unauthenticated budgets, and the auth timeout (``ag2net.server.connection_limits``).
        self.limits = limits
        self._counted: set[Any] = set()  # connections counted against the authenticated budget
        self._by_connection: dict[Any, WsEndpoint] = {}

    @property
    def refused_connections(self) -> int:
        return self.limits.refused

    @property
    def sockets(self) -> Any:
        return self.server.sockets if self.server is not None else ()

    @property
    def port(self) -> int:
        return self.sockets[0].getsockname()[1]

    @property
    def host(self) -> str:
        return self.sockets[0].getsockname()[0]

    def url(self, host: str | None = None) -> str:
        shown = host or self.host
        if ":" in shown:
            shown = f"[{shown}]"
        scheme = "wss" if self.tls else "ws"
        return f"{scheme}://{shown}:{self.port}"

    def check_operator(self, claim: Any) -> None:
        """Grant the operator role, or refuse: ``AccessDeniedError`` without a token, ``AuthError`` for a bad one."""
        token = claim.get("token") if isinstance(claim, dict) else None
        if token is None:
            if self.operator_token is None and self.open_mode:
                return
            raise AccessDeniedError(
                "the operator role needs this server's operator token; connect with operator_token=..."
            )
        if self.operator_token is None:
            if self.open_mode:
                return
            raise AuthError("this server grants no operator role; start it with operator_token=...")
        if not token_matches(claim, self.operator_token):
            raise AuthError("operator token mismatch")

    async def check_identity(self, endpoint: WsEndpoint, passport: Any, scheme: Any, claim: Any) -> None:
        """Authenticate a re-attach of ``passport`` (hello frame or ``bind`` op)."""
        registered = passport.auth.scheme or "none"
        if not isinstance(claim, dict):
            raise AuthError("auth_claim must be a JSON object")
        if scheme is not None and scheme != registered:
            raise AuthError(
                f"auth scheme '{scheme}' does not match '{passport.name}''s registered scheme '{registered}'"
            )
        if passport.kind == "remote_agent":
            owners = (
                self.hub.identities.agents[passport.agent_id].owners
                if passport.agent_id in self.hub.identities.agents
                else []
            )
            if not any(o in endpoint.bound for o in owners):
                raise AuthError(
                    f"remote_agent '{passport.name}' re-attaches only on a connection holding its owner"
                )
            return
        if registered == "none":
            if not (self.open_mode or (self.token is not None and token_matches(claim, self.token))):
                raise AuthError(
                    f"'{passport.name}' has no credential on this hub and this server requires one"
                )
        else:
            await self.hub.auth.get(registered).validate(passport, claim)
        if self.secrets is not None:
            await self._check_secret(passport, claim)

    async def _check_secret(self, passport: Any, claim: dict[str, Any]) -> None:
        """On a token server the shared token is not enough to take a name: its own secret is."""
        secrets = self.secrets
        assert secrets is not None
        if await secrets.digest(passport.agent_id) is None:
            if self.legacy_identities:
                return
            raise AccessDeniedError(
                f"'{passport.name}' has no identity secret on this server (it was registered in-process, or "
                "before the server issued secrets), so it cannot be attached over the wire; register another "
                "name, or ask the operator to start the server with --legacy-identities"
            )
        if "secret" not in claim:
            raise AuthError(
                f"'{passport.name}' is protected by its identity secret on this server; present it as "
                "auth_claim.secret (HubClient.connect keeps it in the user's data folder)"
            )
        if not await secrets.matches(passport.agent_id, claim.get("secret")):
            raise AuthError(f"identity secret mismatch for '{passport.name}'")

    def claimed(self, endpoint: WsEndpoint, agent_id: str, *, rotated: bool = False) -> None:
        """``agent_id`` moved to ``endpoint`` (or, ``rotated``, its secret changed there): other connections
        lose their rights over it and its deliveries (and, on a token server, are told why)."""
        for other in list(self.endpoints.values()):
            if other is not endpoint and agent_id in other.bound:
                other.bound.discard(agent_id)
                if rotated:
                    self.hub.unbind_endpoint(other, agent_id)
                if self.secrets is not None:
                    other.displaced(agent_id, rotated=rotated)

    # ------------------------------------------------------------------ limits

    def admit(self, connection: ServerConnection, request: Any) -> Any:
        """websockets' ``process_request``: refuse the handshake (HTTP 503) over the connection limits.

        Without a token every connection is trusted and counts against the authenticated budget at once.
        On a token server a new connection counts against the unauthenticated budget only; when that is
        full, the oldest unauthenticated connection of its address (else of all) is closed to make room."""
        address = address_of(connection)
        limits = self.limits
        if self.token is None:
            refusal = limits.over_limit(address)
            if refusal is not None:
                limits.refused += 1
                return connection.respond(http.HTTPStatus.SERVICE_UNAVAILABLE, refusal + "\n")
            limits.count(address)
            self._counted.add(connection)
        else:
            evicted = limits.wait(connection, address)
            if evicted is not None:
                self._evict(evicted)
        connection.connection_lost_waiter.add_done_callback(lambda _: self._release(connection, address))
        return None

    def _evict(self, connection: Any) -> None:
        reason = (
            f"too many unauthenticated connections from {address_of(connection)}: the oldest is closed to "
            "make room; authenticate in the first message (a hello with the server's token)"
        )
        endpoint = self._by_connection.get(connection)
        if endpoint is not None:
            endpoint.kill(CLOSE_POLICY, reason)
            return
        transport = getattr(connection, "transport", None)
        if transport is not None:
            transport.abort()

    def _release(self, connection: Any, address: str) -> None:
        if connection in self._counted:
            self._counted.discard(connection)
            self.limits.release(address)
        else:
            self.limits.leave(connection)

    def promote(self, endpoint: WsEndpoint) -> None:
        """``endpoint`` authenticated: it leaves the unauthenticated budget for the authenticated one, or is
        closed (1013) when that is full."""
        connection = endpoint.ws
        if not self.limits.leave(connection):
            return  # counted already (a server without a token), or closing
        refusal = self.limits.over_limit(endpoint.address)
        if refusal is not None:
            self.limits.refused += 1
            endpoint.kill(CLOSE_TRY_AGAIN, refusal)
            return
        self.limits.count(endpoint.address)
        self._counted.add(connection)

    async def watchdog(self) -> None:
        """Close connections that do not take their messages within ``send_timeout`` seconds and, on a
        token server, connections still unauthenticated after ``auth_timeout`` seconds."""
        tick = max(0.05, min(0.25, self.send_timeout / 4, self.limits.auth_timeout / 4))
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(tick)
            now = loop.time()
            for endpoint in list(self.endpoints.values()):
                since = endpoint.writing_since
                if since is not None and now - since > self.send_timeout:
                    endpoint.kill(
                        CLOSE_POLICY,
                        f"send timeout: a message was not taken within {self.send_timeout:g} s; read your replies",
                    )
                elif (
                    self.token is not None
                    and not endpoint.authenticated
                    and not endpoint._shutting
                    and now - endpoint.opened_at > endpoint.auth_timeout
                ):
                    self.limits.failed(endpoint.address)
                    endpoint.kill(
                        CLOSE_AUTH_FAILED,
                        f"auth_failed: not authenticated within {endpoint.auth_timeout:g} s; "
                        "send a hello with the server's token first",
                    )

    @asynccontextmanager
    async def replay_lock(self, endpoint: WsEndpoint) -> AsyncIterator[None]:
        lock = self._replay_locks.setdefault(endpoint.endpoint_id, asyncio.Lock())
        async with lock:
            yield

    async def handle(self, ws: ServerConnection) -> None:
        endpoint = WsEndpoint(self, ws)
        self.endpoints[endpoint.endpoint_id] = endpoint
        self._by_connection[ws] = endpoint
        self.hub.attach_endpoint(endpoint)
        keepalive = None
        if self.ping_interval is not None and self.ping_timeout is not None:
            keepalive = endpoint._spawn(endpoint.keepalive(self.ping_interval, self.ping_timeout))
        try:
            await endpoint.run()
        finally:
            if keepalive is not None:
                keepalive.cancel()
            self.endpoints.pop(endpoint.endpoint_id, None)
            self._by_connection.pop(ws, None)
            self._replay_locks.pop(endpoint.endpoint_id, None)
            for task in list(endpoint._observers.values()):
                task.cancel()
            await self.hub.detach_endpoint(endpoint)

    async def shutdown(self) -> None:
        waiting = getattr(self.hub, "waiting", None)
        if waiting is not None and any(item.state == "waiting" for item in waiting.items.values()):
            # what is held is answered while its senders are still connected (the hub's close would
            # answer it too, but by then their sockets are gone and they read a lost connection)
            self.hub.stepping.stop()
            await asyncio.sleep(0.1)  # the answers' frames go out before the connections close
        for endpoint in list(self.endpoints.values()):
            await endpoint.shutdown()


def _with_shared_token(auth: AuthRegistry, token: str) -> AuthRegistry:
    """``auth`` plus the shared ``api_key`` scheme ``serve_ws(token=...)`` adds."""
    if not token:
        raise ValueError("serve_ws token must be a non-empty string")
    if "api_key" in auth:
        raise ValueError(
            "serve_ws(token=...) adds a shared 'api_key' scheme, but this hub already has one; "
            "configure the keys in one place"
        )

    async def resolve(name: str) -> str | None:
        return token

    adapters = [auth.get(s) for s in auth.schemes()]
    return AuthRegistry([*adapters, ApiKeyAuth(resolver=resolve)])


@asynccontextmanager
async def serve_ws(
    hub: Hub,
    host: str,
    port: int,
    *,
    ssl_context: Any = None,
    ping_interval: float | None = 20.0,
    ping_timeout: float | None = 20.0,
    allow_unauthenticated: bool = False,
    operator_token: str | None = None,
    token: str | None = None,
    max_message_bytes: int = 2 * 1024 * 1024,
    compression: str | None = None,
    public_directory: bool = False,
    legacy_identities: bool = False,
    auth_timeout: float = DEFAULT_AUTH_TIMEOUT,
    send_timeout: float = DEFAULT_SEND_TIMEOUT,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED,
    max_unauthenticated_per_address: int = DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS,
    policy: WirePolicy | None = None,
) -> AsyncIterator[WsServer]:
    """Serve ``hub`` on ``ws://host:port`` (port 0 picks one: read ``server.port``) until the block exits.

    ``token`` is a shared ``api_key`` that every identity registering or attaching over this server must
    present (``HubClient.connect(url, token=...)``); on such a server each identity also gets its own
    secret (``legacy_identities=True`` admits ag2 1.2.1 clients, which cannot present one), connections
    must authenticate within ``auth_timeout`` seconds, and only authenticated ones read the directory
    unless ``public_directory=True``. ``operator_token`` grants the operator role.
    ``send_timeout``: seconds a connection may take to accept one message before it is closed.
    ``max_connections`` / ``max_connections_per_address``: authenticated connections beyond them are
    refused (HTTP 503 at the handshake without a token; closed with 1013 when they authenticate on a token
    server). ``max_unauthenticated`` / ``max_unauthenticated_per_address``: on a token server, connections
    that have not authenticated yet count only against this smaller budget; when it is full the oldest of
    them is closed to make room (``ag2net.server.connection_limits``).
    ``compression="deflate"`` enables permessage-deflate (off by default: on loopback and LANs it costs
    more CPU than the bytes it saves).
    ``policy`` decides who may run which op over a connection (default ``WirePolicy()``: the access rules
    of the op catalogue, ``ag2net.protocol.ops``, plus its own rule for each op marked ``policy``).
    """
    limits = ConnectionLimits(  # refuses a limit that is not a positive number
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
        max_unauthenticated=max_unauthenticated,
        max_unauthenticated_per_address=max_unauthenticated_per_address,
        auth_timeout=auth_timeout,
    )
    check_positive("send_timeout", send_timeout)
    if token is None and (legacy_identities or public_directory):
        raise ValueError(
            "serve_ws legacy_identities and public_directory apply to a server with a token; "
            "without one every identity and the directory are already open to local clients"
        )
    original_auth = hub.auth
    if token is not None:
        hub.auth = _with_shared_token(hub.auth, token)
    if operator_token is not None and not operator_token:
        raise ValueError("serve_ws operator_token must be a non-empty string")
    open_mode = token is None and "none" in hub.auth
    if open_mode and host not in LOOPBACK_HOSTS:
        if not allow_unauthenticated:
            hub.auth = original_auth
            raise ValueError(
                f"serve_ws on {host!r} would accept the 'none' auth scheme: anyone who can reach the port could "
                "act as any agent. Set a token (token=..., ag2net serve --token), bind to 127.0.0.1, or allow "
                "it explicitly (allow_unauthenticated=True, ag2net serve --allow-unauthenticated)"
            )
        log.warning(
            "serve_ws on %r accepts the 'none' auth scheme from any host (allow_unauthenticated=True)", host
        )
    state = WsServer(
        hub,
        limits,
        token=token,
        operator_token=operator_token,
        open_mode=open_mode,
        tls=ssl_context is not None,
        public_directory=public_directory,
        legacy_identities=legacy_identities,
        send_timeout=send_timeout,
        ping_interval=ping_interval,
        ping_timeout=ping_timeout,
        policy=policy,
    )
    try:
        async with serve(
            state.handle,
            host,
            port,
            ssl=ssl_context,
            process_request=state.admit,
            ping_interval=None,  # our keepalive: its deadline covers writing the ping (see WsEndpoint)
            max_size=max_message_bytes,
            max_queue=64,
            compression=compression,
            create_connection=TakingConnection,
        ) as server:
            state.server = server
            watchdog = asyncio.get_running_loop().create_task(state.watchdog())
            try:
                yield state
            finally:
                watchdog.cancel()
                # Stop listening first: a client that reconnects at once must not reach this server again.
                listener = getattr(server, "server", None)
                if listener is not None:
                    listener.close()
                await state.shutdown()
                server.close()
                await server.wait_closed()
    finally:
        hub.auth = original_auth


async def serve_cli(
    hub: Hub,
    host: str,
    port: int,
    *,
    token: str | None = None,
    operator_token: str | None = None,
    allow_unauthenticated: bool = False,
    ssl_context: Any = None,
    echo: Any = print,
    **limits: Any,
) -> None:
    """Serve ``hub`` until cancelled, after printing the address and how to attach (tokens never echoed).

    ``limits`` are ``serve_ws``'s keyword options (``public_directory``, ``legacy_identities``,
    ``auth_timeout``, ``send_timeout``, ``max_connections``, ``max_connections_per_address``)."""
    async with serve_ws(
        hub,
        host,
        port,
        token=token,
        operator_token=operator_token,
        allow_unauthenticated=allow_unauthenticated,
        ssl_context=ssl_context,
        **limits,
    ) as server:
        shown = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else None)
        url = server.url(shown)
        echo(f"ag2net hub listening on {server.url()}")
        attach = f"ag2net tui --connect {url}"
        if token is not None:
            attach += " --token <token>"
        if operator_token is not None:
            attach += " --operator-token <operator token>"
        echo(f"attach the workbench with: {attach}")
        if token is None and operator_token is None:
            echo(
                "no tokens set: identities use the 'none' auth scheme and any local client may act as operator"
            )
        await asyncio.Event().wait()


__all__ = [
    "DIRECTORY_OPS",
    "LOOPBACK_HOSTS",
    "WsServer",
    "classified_ops",
    "encode_result",
    "serve_cli",
    "serve_ws",
]

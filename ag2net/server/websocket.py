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
import contextlib
import hmac
import http
import logging
import os
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from ag2net.envelope import Envelope
from ag2net.errors import AccessDeniedError, AuthError, NetworkError, ProtocolError
from ag2net.hub.auth import ApiKeyAuth, AuthRegistry, IdentitySecrets, new_identity_secret
from ag2net.identity import MAX_RESUME_BYTES, MAX_SKILL_BYTES
from ag2net.ids import make_id
from ag2net.protocol.codec import dumps, to_wire
from ag2net.protocol.frames import (
    MAX_JSON_DEPTH,
    ErrorFrame,
    FrameTooDeep,
    HelloFrame,
    PingFrame,
    ReceiptFrame,
    RequestFrame,
    ResponseFrame,
    WelcomeFrame,
    decode_frame,
    encode_frame,
    nesting_error,
    parse_json,
    top_level_fields,
)
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.server.connection_limits import (
    DEFAULT_MAX_UNAUTHENTICATED,
    DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS,
    ConnectionLimits,
)
from ag2net.server.policy import MIRROR_FAILED_KEYS, WirePolicy
from ag2net.transport.ws import WsLinkEndpoint

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub

log = logging.getLogger("ag2net.server")

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
OPERATOR_SCHEME = "operator"
OBSERVED_KIND = "observed"
CLOSE_AUTH_FAILED = 1008
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011
CLOSE_TRY_AGAIN = 1013
MAX_INFLIGHT_REQUESTS = 256
#: Limits on what one identity may store through the wire (SPEC decision 23).
DEFAULT_AUTH_TIMEOUT = 5.0
DEFAULT_SEND_TIMEOUT = 10.0
DEFAULT_MAX_CONNECTIONS = 2000
DEFAULT_MAX_CONNECTIONS_PER_ADDRESS = 256
CLOSE_GRACE = 1.0  # seconds a closing handshake may take before the socket is dropped
FAIR_SHARE = 0.002  # seconds one connection's reader may keep the event loop before it yields


# Per-op wire authorisation: each op's rule is declared in the catalogue (``ag2net.protocol.ops``) and
# enforced by the server's policy object (``ag2net.server.policy.WirePolicy``). These sets are views of
# the catalogue, kept for readers of the old names.
def _ops_with(rule: str) -> frozenset[str]:
    return frozenset(n for n, spec in CATALOGUE.items() if spec.access.rule == rule and not spec.connection)


DIRECTORY_OPS = _ops_with("directory")
OPEN_OPS = _ops_with("open") | DIRECTORY_OPS
AGENT_OPS: dict[str, tuple[str, bool]] = {
    n: (spec.access.param or "agent_id", spec.access.operators_too)
    for n, spec in CATALOGUE.items()
    if spec.access.rule == "agent"
}
CHANNEL_OPS = _ops_with("channel")
OPERATOR_OPS = _ops_with("operator")
SPECIAL_OPS = _ops_with("policy")
CONNECTION_OPS = frozenset(n for n, spec in CATALOGUE.items() if spec.connection)
ROTATE_SECRET_OP = "rotate_secret"


def classified_ops() -> frozenset[str]:
    """Every op name this server has an authorisation rule for (every op of the catalogue)."""
    return frozenset(n for n, spec in CATALOGUE.items() if not spec.connection)


def encode_result(value: Any, op: str | None = None) -> Any:
    """An op result as JSON data, by the op's codec (the one encoder of ``ag2net.protocol.codec``)."""
    spec = CATALOGUE.get(op) if op is not None else None
    return spec.encode_result(value) if spec is not None else to_wire(value)


_INCARNATIONS: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


def _incarnation_of(observe_log: Any) -> str:
    """One name per observe log (per hub object): positions are comparable only within it."""
    name = _INCARNATIONS.get(observe_log)
    if name is None:
        name = _INCARNATIONS[observe_log] = f"{os.getpid()}-{time.time_ns():x}-{make_id()[:8]}"
    return name


def _token_matches(claim: Any, expected: str) -> bool:
    token = claim.get("token") if isinstance(claim, dict) else None
    if not isinstance(token, str):
        return False
    try:
        given = token.encode()
    except UnicodeEncodeError:  # a lone surrogate is no token we gave out
        return False
    return hmac.compare_digest(given, expected.encode())


def _address_of(connection: Any) -> str:
    remote = connection.remote_address
    if isinstance(remote, tuple) and remote:
        return str(remote[0])
    return str(remote)


def _agent_id_of(result: Any) -> Any:
    if isinstance(result, dict):
        return result.get("agent_id")
    return getattr(result, "agent_id", None)


def _as_text(message: str | bytes) -> str:
    return message if isinstance(message, str) else bytes(message).decode("utf-8", "replace")


def _close_reason(text: str) -> str:
    """A close reason fits in 123 bytes of UTF-8."""
    data = text.encode("utf-8")[:120]
    return data.decode("utf-8", "ignore")


class _ReplaySink:
    """What ``hub.replay`` writes to: sends straight to the socket while live deliveries are held."""

    def __init__(self, endpoint: WsEndpoint) -> None:
        self.endpoint = endpoint
        self.sent: set[str] = set()

    async def notify(self, recipient_id: str, envelope: Envelope) -> None:
        await self.endpoint._send_notify(recipient_id, envelope)
        self.sent.add(envelope.envelope_id)


class WsEndpoint(WsLinkEndpoint):
    """The hub's side of one WebSocket connection: bound identities, operator flag, in-flight work.

    A ``WsLinkEndpoint`` (ag2's hub-side link endpoint): ``send_frame`` writes through the same ordered
    output as every answer and delivery; the server itself reads the connection's frames."""

    def __init__(self, server: WsServer, ws: ServerConnection) -> None:
        super().__init__(make_id(), ws)
        self.bound: set[str] = set()
        self.operator = False
        self.server = server
        self.hub = server.hub
        self.ws = ws
        self.closed = False
        self._refused = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._observers: dict[str, asyncio.Task[None]] = {}
        self._gates: dict[str, asyncio.Event] = {}
        self._held: dict[str, list[Envelope]] = {}
        self._replaying: dict[str, int] = {}
        self._inflight = asyncio.Semaphore(MAX_INFLIGHT_REQUESTS)
        # One message is written at a time: what waits is an answer's Python objects, not its encoded
        # copy, and the socket buffer holds at most one message beyond websockets' write limit.
        self._output = asyncio.Lock()
        self.opened_at = asyncio.get_running_loop().time()
        self.address = _address_of(ws)
        #: Seconds this connection has to authenticate on a token server (shorter for an address that
        #: keeps failing: ``ConnectionLimits.auth_timeout_for``).
        self.auth_timeout = server.limits.auth_timeout_for(self.address)
        self._authenticated = False
        self.writing_since: float | None = None  # when the message being written started (watchdog)
        self._shutting = False

    @property
    def authenticated(self) -> bool:
        return self._authenticated

    @authenticated.setter
    def authenticated(self, value: bool) -> None:
        if value and not self._authenticated:
            self._authenticated = True
            self.server.promote(self)

    # ------------------------------------------------------------------ hub-facing endpoint

    async def send_frame(self, frame: Any) -> None:
        if not self.closed:
            await self._send_frame(frame)

    def frames(self) -> AsyncIterator[Any]:
        raise RuntimeError(
            "serve_ws reads this connection's frames and answers them for the hub; to handle frames "
            "yourself, wrap a websockets connection in WsLinkEndpoint(endpoint_id, ws)"
        )

    async def notify(self, recipient_id: str, envelope: Envelope) -> None:
        if self.closed:
            return  # the identity replays from its cursor when it comes back
        held = self._held.get(recipient_id)
        if held is not None:
            held.append(envelope)
            return
        await self._send_notify(recipient_id, envelope)

    async def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        for task in list(self._observers.values()):
            task.cancel()
        self._observers.clear()
        await self.shut(1000, "")  # bounded: a peer that stopped reading does not hold the hub's shutdown

    async def authorize(self, hub: Hub, op: str, params: dict[str, Any]) -> None:
        """Refuse ``op`` unless this connection may run it: the server's policy decides (it may narrow
        ``params``)."""
        await self.server.policy.authorize(self, op, params)

    def narrow(self, op: str, params: dict[str, Any], result: Any) -> Any:
        """Cut a listing down to what this connection may see (the server's policy)."""
        return self.server.policy.narrow(self, op, params, result)

    # ------------------------------------------------------------------ socket side

    async def _send(self, data: dict[str, Any]) -> None:
        async with self._output:
            await self._write(dumps(data))

    async def _write(self, text: str) -> None:
        """Write one message; the caller holds ``_output``. The watchdog closes the connection when a
        write is not taken within the server's ``send_timeout``."""
        self.writing_since = asyncio.get_running_loop().time()
        try:
            await self.ws.send(text)
        finally:
            self.writing_since = None

    async def _send_frame(self, frame: Any) -> None:
        await self._send(encode_frame(frame))

    async def _send_notify(self, recipient_id: str, envelope: Envelope) -> None:
        await self._send({"kind": "notify", "envelope": envelope.to_dict(), "recipient_id": recipient_id})

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run(self) -> None:
        """Read frames until the connection ends."""
        clock = asyncio.get_running_loop().time
        turn_began = clock()
        try:
            async for message in self.ws:
                if self._refused:
                    break
                try:
                    await self._on_message(message)
                except ConnectionClosed:
                    raise
                except Exception as exc:  # one bad frame never ends the connection
                    log.exception("frame handling failed on connection %s", self.endpoint_id)
                    await self._send_frame(ErrorFrame("error", str(exc) or type(exc).__name__))
                if clock() - turn_began > FAIR_SHARE:
                    # Buffered messages are read without a pause: let other connections have the loop.
                    await asyncio.sleep(0)
                    turn_began = clock()
        except ConnectionClosed:
            pass

    async def _on_message(self, message: str | bytes) -> None:
        try:
            data = parse_json(message)
        except FrameTooDeep as exc:
            await self._answer_malformed(top_level_fields(_as_text(message)), exc)
            return
        except ProtocolError as exc:
            await self._protocol_error(str(exc))
            return
        try:
            frame = decode_frame(data)
        except RecursionError:
            await self._answer_malformed(data, nesting_error())
            return
        except (ProtocolError, ValueError, TypeError) as exc:
            await self._answer_malformed(data, exc)
            return
        if isinstance(frame, RequestFrame):
            await self._inflight.acquire()  # released once the answer is written (or cannot be)
            self._spawn(self._request(frame))
        elif isinstance(frame, ReceiptFrame):
            self.hub.handle_receipt(
                self, frame.envelope_id, frame.status, frame.recipient_id, frame.channel_id, frame.reason
            )
        elif isinstance(frame, HelloFrame):
            await self._hello(frame)
        elif isinstance(frame, PingFrame):
            await self._send({"kind": "pong"})
        else:
            await self._protocol_error(f"a client does not send {frame.kind} frames")

    async def _answer_malformed(self, data: Any, exc: Exception) -> None:
        """A frame that could not be decoded: answered to its request when it names one."""
        request_id = data.get("request_id") if isinstance(data, dict) else None
        if isinstance(data, dict) and data.get("kind") == "request" and isinstance(request_id, str):
            await self._respond_error(request_id, "protocol_error", str(exc))
        else:
            await self._protocol_error(str(exc))

    async def _protocol_error(self, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send_frame(ErrorFrame("protocol_error", message))

    async def _respond_error(self, request_id: str, code: str, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send_frame(ResponseFrame(request_id, False, None, code, message))

    async def _refuse(self, message: str) -> None:
        """Authentication failed: nothing else this connection sends is processed."""
        if self._refused:
            return
        self._refused = True
        if not self._authenticated:
            self.server.limits.failed(self.address)
        log.warning("connection %s refused: %s", self.endpoint_id, message)
        await self.shut(CLOSE_AUTH_FAILED, f"auth_failed: {message}")

    async def shut(self, code: int, reason: str) -> None:
        """Close with ``code`` and ``reason``; a peer that does not take the close frame within
        ``CLOSE_GRACE`` seconds (it stopped reading) has its socket dropped, buffered output with it."""
        if self._shutting:
            return
        self._shutting = True
        try:
            async with asyncio.timeout(CLOSE_GRACE):
                await self.ws.close(code, _close_reason(reason))
        except TimeoutError:
            log.warning("connection %s did not take its close frame; dropped", self.endpoint_id)
        except Exception:
            pass
        finally:
            transport = self.ws.transport
            if transport is not None and self.ws.state is not State.CLOSED:
                transport.abort()

    def kill(self, code: int, reason: str) -> None:
        """Close from outside the connection's own tasks (watchdog, keepalive, displacement)."""
        if not self._shutting:
            log.warning("closing connection %s: %s", self.endpoint_id, reason)
            self._spawn(self.shut(code, reason))

    async def keepalive(self, interval: float, timeout: float) -> None:
        """Ping every ``interval`` seconds; the deadline covers writing the ping as well as the pong, so a
        peer that stopped reading (its buffer full of our replies) is timed out like a silent one."""
        while True:
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(timeout):
                    pong = await self.ws.ping()
                    await pong
            except TimeoutError:
                self.kill(CLOSE_INTERNAL, f"keepalive ping timeout: no pong within {timeout:g} s")
                return
            except (ConnectionClosed, asyncio.CancelledError):
                return
            except Exception:
                return

    async def _hello(self, frame: HelloFrame) -> None:
        try:
            if frame.auth_scheme == OPERATOR_SCHEME:
                try:
                    self.server.check_operator(frame.auth_claim)
                except AccessDeniedError as exc:  # no credential presented: nothing to punish
                    await self._send_frame(ErrorFrame("access_denied", str(exc)))
                    return
                self.operator = True
                self.authenticated = True
                await self._send_frame(WelcomeFrame(self.endpoint_id, self.hub.clock()))
                return
            if frame.name == "" and self.server.token is not None:
                # The connection proves it holds the server's token, binding nothing (WsLink on connect).
                if not _token_matches(frame.auth_claim, self.server.token):
                    raise AuthError(
                        "token mismatch: this server's token is not the one given (token=..., --token)"
                    )
                self.authenticated = True
                await self._send_frame(WelcomeFrame(self.endpoint_id, self.hub.clock()))
                return
            agent_id = self.hub.find_agent_id(frame.name)
            if agent_id is None:
                await self._send_frame(ErrorFrame("not_found", f"unknown name: {frame.name}"))
                return
            passport = self.hub.lookup_agent(agent_id)
            await self.server.check_identity(self, passport, frame.auth_scheme, frame.auth_claim)
            self.hub.bind_endpoint(self, agent_id)
            self.agent_id = agent_id
        except AuthError as exc:
            with contextlib.suppress(ConnectionClosed):
                await self._send_frame(ErrorFrame("auth_failed", str(exc)))
            await self._refuse(str(exc))
            return
        except NetworkError as exc:
            await self._send_frame(ErrorFrame(exc.code, str(exc)))
            return
        except Exception:
            log.exception("hello from %r failed", frame.name)
            await self._send_frame(
                ErrorFrame(
                    "error", "the hub failed to answer this hello; its log says why (nothing was attached)"
                )
            )
            return
        if frame.since_envelope_id is not None:
            # Hold live deliveries until the replay is out, so replayed and live envelopes stay in order.
            # Nothing is awaited between the bind above and this line: no live delivery can slip in.
            self._held.setdefault(agent_id, [])
            self._replaying[agent_id] = self._replaying.get(agent_id, 0) + 1
        self.authenticated = True
        self.server.claimed(self, agent_id)
        await self._send_frame(WelcomeFrame(self.endpoint_id, self.hub.clock()))
        if frame.since_envelope_id is not None:
            self._spawn(self._replay(agent_id, frame.since_envelope_id))

    def displaced(self, agent_id: str, *, rotated: bool = False) -> None:
        """Another connection attached ``agent_id`` with its credentials (or its secret was rotated): say
        so, and close this one when it holds nothing else."""
        name = self.hub.name_for(agent_id)
        why = (
            "had its identity secret rotated; attach it again with the new secret"
            if rotated
            else "was attached by another connection presenting its credentials"
        )
        short = "had its identity secret rotated" if rotated else "was attached by another connection"
        message = f"identity '{name}' ({agent_id}) {why}; this connection no longer receives its deliveries"
        alone = not self.bound and not self.operator

        async def tell() -> None:
            with contextlib.suppress(ConnectionClosed):
                await self._send_frame(ErrorFrame("access_denied", message))
            if alone and not self.bound:
                await self.shut(CLOSE_POLICY, f"displaced: '{name}' {short}")

        self._spawn(tell())

    async def _replay(self, agent_id: str, since: str) -> None:
        sink = _ReplaySink(self)
        try:
            async with self.server.replay_lock(self):
                await self.hub.replay(sink, agent_id, since)
        except ConnectionClosed:
            pass
        except Exception:
            log.exception("replay to %s failed", agent_id)
        finally:
            self._replaying[agent_id] -= 1
            if self._replaying[agent_id] <= 0:
                del self._replaying[agent_id]
                await self._release_held(agent_id, sink.sent)

    async def _release_held(self, agent_id: str, already_sent: set[str]) -> None:
        held = self._held.get(agent_id)
        while held:
            batch = held[:]
            held.clear()
            for env in batch:
                if env.envelope_id in already_sent or self.closed:
                    continue
                try:
                    await self._send_notify(agent_id, env)
                except ConnectionClosed:
                    self._held.pop(agent_id, None)
                    return
        # Nothing awaited since the emptiness check: no live delivery can slip ahead of a held one.
        self._held.pop(agent_id, None)

    async def _request(self, frame: RequestFrame) -> None:
        try:
            try:
                result, secret = await self._run_request(frame)
            except AuthError as exc:
                await self._respond_error(frame.request_id, exc.code, str(exc))
                await self._refuse(str(exc))
                return
            except NetworkError as exc:
                await self._respond_error(frame.request_id, exc.code, str(exc))
                return
            except KeyError as exc:
                await self._respond_error(
                    frame.request_id, "protocol_error", f"{frame.op} failed: missing {exc.args[0]!r}"
                )
                return
            except RecursionError:
                await self._respond_error(frame.request_id, "protocol_error", str(nesting_error()))
                return
            except (TypeError, ValueError) as exc:
                await self._respond_error(
                    frame.request_id, "protocol_error", f"{frame.op}: bad params: {exc}"
                )
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("op %s failed", frame.op)
                await self._respond_error(frame.request_id, "error", str(exc) or type(exc).__name__)
                return
            with contextlib.suppress(ConnectionClosed):
                await self._respond(frame, result, secret)
        finally:
            # The slot is held until the answer is written: answers a peer does not read count against
            # its in-flight limit, so its reader stops and its requests wait in its own socket.
            self._inflight.release()
            gate = self._gates.pop(frame.request_id, None)
            if gate is not None:
                gate.set()

    async def _respond(self, frame: RequestFrame, result: Any, secret: str | None) -> None:
        async with self._output:
            if self.ws.state is not State.OPEN:
                return  # nobody to answer: skip the encoding
            data: dict[str, Any] = {
                "kind": "response",
                "request_id": frame.request_id,
                "ok": True,
                "result": None,
                "error_code": "",
                "error_message": "",
            }
            if secret is not None:
                data["identity_secret"] = secret
            try:
                # Encoded only now, holding the writer: queued answers stay references to hub objects.
                data["result"] = encode_result(result, frame.op)
                text = dumps(data)
            except (TypeError, ValueError, RecursionError) as exc:
                log.exception("result of op %s is not JSON", frame.op)
                text = dumps(
                    encode_frame(
                        ResponseFrame(
                            frame.request_id,
                            False,
                            None,
                            "error",
                            f"{frame.op} result is not JSON-serialisable: {exc}",
                        )
                    )
                )
            await self._write(text)

    async def _run_request(self, frame: RequestFrame) -> tuple[Any, str | None]:
        if frame.op in CONNECTION_OPS:
            return await self._connection_op(frame.request_id, frame.op, frame.params), None
        params = frame.params
        secret = None
        if frame.op == "register":
            params["_identity_secret"] = params.pop("identity_secret", None) is True
            params.pop("_secret_digest", None)  # only this server says what an identity's secret is
            if self.server.secrets is not None and params["_identity_secret"]:
                # The digest is written in the identity's own record, in the registration's one write:
                # no instant exists in which the identity is registered and looks like it has no secret.
                secret, params["_secret_digest"] = new_identity_secret()
        result = await self.hub.handle_op(self, frame.op, params)
        result = self.narrow(frame.op, params, result)
        await self._after(frame.op, params, result)
        if secret is not None and (
            _agent_id_of(result) is None or getattr(result, "kind", None) == "remote_agent"
        ):
            secret = None
        return result, secret

    async def _after(self, op: str, params: dict[str, Any], result: Any) -> None:
        """Bookkeeping once an op succeeded."""
        if op in ("register", "bind"):
            self.authenticated = True
            agent_id = _agent_id_of(result)
            if isinstance(agent_id, str) and agent_id in self.bound:
                self.server.claimed(self, agent_id)
        elif op in ("unregister", "unbind"):
            self.bound.discard(params.get("agent_id"))
            agent_id = params.get("agent_id")
            if op == "unregister" and self.server.secrets is not None and isinstance(agent_id, str):
                await self.server.secrets.forget(agent_id)

    # ------------------------------------------------------------------ observe

    async def _connection_op(self, request_id: str, op: str, params: dict[str, Any]) -> Any:
        if op == ROTATE_SECRET_OP:
            return await self._rotate_secret(params)
        self.server.policy.require_operator(self, op)
        sub = params.get("subscription")
        if not isinstance(sub, str) or not sub:
            raise ProtocolError(f"{op} needs params.subscription as a non-empty string")
        if op == "unobserve":
            task = self._observers.pop(sub, None)
            if task is not None:
                task.cancel()
            return None
        since = params.get("since")
        if since is not None and (not isinstance(since, int) or isinstance(since, bool) or since < 0):
            raise ProtocolError("observe needs params.since as a non-negative integer or null")
        if sub in self._observers:
            raise ProtocolError(f"subscription {sub!r} is already streaming on this connection")
        position = self.hub.observe_position
        incarnation = params.get("incarnation")
        if incarnation is not None and incarnation != self.server.incarnation:
            since = 0  # the client followed an earlier hub process: this one's stream starts over
        stream = self.hub.observe(position if since is None else since)
        # The first event goes out only after the response, so the client knows the incarnation first.
        gate = self._gates[request_id] = asyncio.Event()
        self._observers[sub] = self._spawn(self._stream(sub, stream, gate))
        return {"subscription": sub, "position": position, "incarnation": self.server.incarnation}

    async def _rotate_secret(self, params: dict[str, Any]) -> dict[str, Any]:
        """A new identity secret for ``params.agent_id`` (its holder, or an operator): the old secret is
        refused from now on, and every other connection holding the identity loses it (it is told)."""
        secrets = self.server.secrets
        if secrets is None:
            raise ProtocolError(
                "rotate_secret: this server issues no identity secrets (it was started without --token)"
            )
        agent_id = params.get("agent_id")
        if not isinstance(agent_id, str) or not agent_id:
            raise ProtocolError("rotate_secret needs params.agent_id as the identity's agent id")
        passport = self.hub.lookup_agent(agent_id)
        agent_id = passport.agent_id or agent_id
        if agent_id not in self.bound and not self.operator:
            raise AccessDeniedError(
                f"rotate_secret: this connection does not hold '{passport.name}'; attach it with its "
                "current secret first (operators may rotate any identity's secret)"
            )
        secret = await secrets.rotate(agent_id)
        self.server.claimed(self, agent_id, rotated=True)
        return {"agent_id": agent_id, "name": passport.name, "identity_secret": secret}

    async def _stream(self, sub: str, stream: Any, gate: asyncio.Event) -> None:
        try:
            await gate.wait()
            async for event in stream:
                await self._send({"kind": OBSERVED_KIND, "subscription": sub, "event": event.to_dict()})
        except (ConnectionClosed, asyncio.CancelledError):
            return
        except Exception as exc:
            with contextlib.suppress(Exception):
                await self._send({"kind": OBSERVED_KIND, "subscription": sub, "error": str(exc)})
        else:
            with contextlib.suppress(Exception):
                await self._send({"kind": OBSERVED_KIND, "subscription": sub, "end": True})
        finally:
            self._observers.pop(sub, None)
            with contextlib.suppress(Exception):
                await stream.aclose()

    async def shutdown(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await self.close()


class WsServer:
    """A running server: the websockets server plus the hub-facing policy it enforces."""

    def __init__(
        self,
        hub: Hub,
        *,
        token: str | None,
        operator_token: str | None,
        open_mode: bool,
        tls: bool = False,
        public_directory: bool = False,
        legacy_identities: bool = False,
        auth_timeout: float = DEFAULT_AUTH_TIMEOUT,
        send_timeout: float = DEFAULT_SEND_TIMEOUT,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_connections_per_address: int = DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
        max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED,
        max_unauthenticated_per_address: int = DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS,
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
        self.auth_timeout = auth_timeout
        self.send_timeout = send_timeout
        self.max_connections = max_connections
        self.max_connections_per_address = max_connections_per_address
        self.ping_interval = ping_interval
        self.ping_timeout = ping_timeout
        # Identity secrets exist on token servers only: without a token every local client is trusted.
        self.secrets = IdentitySecrets(hub) if token is not None else None
        self.endpoints: dict[str, WsEndpoint] = {}
        self.incarnation = _incarnation_of(hub.observe_log)
        self.server: Server | None = None
        self._replay_locks: dict[str, asyncio.Lock] = {}
        #: Authenticated and unauthenticated budgets (``ag2net.server.connection_limits``).
        self.limits = ConnectionLimits(
            max_connections=max_connections,
            max_connections_per_address=max_connections_per_address,
            max_unauthenticated=max_unauthenticated,
            max_unauthenticated_per_address=max_unauthenticated_per_address,
            auth_timeout=auth_timeout,
        )
        self._counted: set[Any] = set()  # connections counted against the authenticated budget
        self._by_connection: dict[Any, WsEndpoint] = {}

    @property
    def _connections(self) -> int:
        return self.limits.connections

    @property
    def _per_address(self) -> dict[str, int]:
        return self.limits.per_address

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
        if not _token_matches(claim, self.operator_token):
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
            owners = self.hub.agents[passport.agent_id].owners if passport.agent_id in self.hub.agents else []
            if not any(o in endpoint.bound for o in owners):
                raise AuthError(
                    f"remote_agent '{passport.name}' re-attaches only on a connection holding its owner"
                )
            return
        if registered == "none":
            if not (self.open_mode or (self.token is not None and _token_matches(claim, self.token))):
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
        address = _address_of(connection)
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
            f"too many unauthenticated connections from {_address_of(connection)}: the oldest is closed to "
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
        tick = max(0.05, min(0.25, self.send_timeout / 4, self.auth_timeout / 4))
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
        for endpoint in list(self.endpoints.values()):
            await endpoint.shutdown()


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
    for name, value in (
        ("auth_timeout", auth_timeout),
        ("send_timeout", send_timeout),
        ("max_connections", max_connections),
        ("max_connections_per_address", max_connections_per_address),
        ("max_unauthenticated", max_unauthenticated),
        ("max_unauthenticated_per_address", max_unauthenticated_per_address),
    ):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ValueError(f"serve_ws {name} must be a positive number, got {value!r}")
    if token is None and (legacy_identities or public_directory):
        raise ValueError(
            "serve_ws legacy_identities and public_directory apply to a server with a token; "
            "without one every identity and the directory are already open to local clients"
        )
    original_auth = hub.auth
    if token is not None:
        if not token:
            raise ValueError("serve_ws token must be a non-empty string")
        if "api_key" in hub.auth:
            raise ValueError(
                "serve_ws(token=...) adds a shared 'api_key' scheme, but this hub already has one; "
                "configure the keys in one place"
            )
        shared = token

        async def resolve(name: str) -> str | None:
            return shared

        adapters = [hub.auth.get(s) for s in hub.auth.schemes()]
        hub.auth = AuthRegistry([*adapters, ApiKeyAuth(resolver=resolve)])
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
        token=token,
        operator_token=operator_token,
        open_mode=open_mode,
        tls=ssl_context is not None,
        public_directory=public_directory,
        legacy_identities=legacy_identities,
        auth_timeout=auth_timeout,
        send_timeout=send_timeout,
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
        max_unauthenticated=max_unauthenticated,
        max_unauthenticated_per_address=max_unauthenticated_per_address,
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
    "MAX_INFLIGHT_REQUESTS",
    "MAX_JSON_DEPTH",
    "MAX_RESUME_BYTES",
    "MAX_SKILL_BYTES",
    "MIRROR_FAILED_KEYS",
    "OBSERVED_KIND",
    "OPERATOR_SCHEME",
    "WirePolicy",
    "WsEndpoint",
    "WsServer",
    "classified_ops",
    "serve_cli",
    "serve_ws",
]

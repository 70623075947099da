"""One WebSocket connection of the hub's server: ``WsEndpoint`` reads its frames, answers its requests
through the hub's op door, writes deliveries and answers in order, and keeps what the connection holds
(bound identities, the operator role, observe subscriptions, replays in progress).

What the server does around an op for the connection itself is one entry per op in the tables at the
end: ``CONNECTION_OPS`` (the ops the connection answers: the observe subscription, ``rotate_secret``),
``BEFORE`` (``register``: issue the identity's secret) and ``AFTER`` (bookkeeping once an op succeeded).
The server (``ag2net.server.websocket.WsServer``) is reached through ``ConnectionServer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

from websockets.asyncio.server import ServerConnection
from websockets.exceptions import ConnectionClosed
from websockets.protocol import State

from ag2net.envelope import Envelope
from ag2net.errors import AccessDeniedError, AuthError, NetworkError, ProtocolError
from ag2net.hub.auth import new_identity_secret
from ag2net.hub.waiting import HELD_NOTICE
from ag2net.ids import make_id
from ag2net.protocol import frames as fr
from ag2net.protocol.codec import dumps, notify_json, response_json
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.protocol.ops import encode_result
from ag2net.server.connection import TakingConnection
from ag2net.transport.ws import HELD_KIND, HELD_NOTICE_PARAM, WsLinkEndpoint
from ag2net.transport.ws_write import write_now

log = logging.getLogger("ag2net.server")

OPERATOR_SCHEME = "operator"
OBSERVED_KIND = "observed"
#: The ops whose ``by`` (who set or answered) the server fills in from the connection.
_ANSWERED_BY = frozenset({"break_on", "answer_waiting"})
CLOSE_AUTH_FAILED = 1008
CLOSE_POLICY = 1008
CLOSE_INTERNAL = 1011
CLOSE_TRY_AGAIN = 1013
MAX_INFLIGHT_REQUESTS = 256
CLOSE_GRACE = 1.0  # seconds a closing handshake may take before the socket is dropped
FAIR_SHARE = 0.002  # seconds one connection's reader may keep the event loop before it yields


class ConnectionServer(Protocol):
    """What a connection needs of its server (``WsServer`` is one)."""

    hub: Any
    policy: Any
    limits: Any
    token: str | None
    secrets: Any
    incarnation: str

    def check_operator(self, claim: Any) -> None: ...

    async def check_identity(self, endpoint: Any, passport: Any, scheme: Any, claim: Any) -> None: ...

    def claimed(self, endpoint: Any, agent_id: str, *, rotated: bool = False) -> None: ...

    def promote(self, endpoint: Any) -> None: ...

    def replay_lock(self, endpoint: Any) -> AbstractAsyncContextManager[None]: ...


def token_matches(claim: Any, expected: str) -> bool:
    token = claim.get("token") if isinstance(claim, dict) else None
    if not isinstance(token, str):
        return False
    try:
        given = token.encode()
    except UnicodeEncodeError:  # a lone surrogate is no token we gave out
        return False
    return hmac.compare_digest(given, expected.encode())


def address_of(connection: Any) -> str:
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

    def __init__(self, server: ConnectionServer, ws: ServerConnection) -> None:
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
        self._answered: dict[str, asyncio.Event] = {}  # request id -> set once its answer is written
        self._held: dict[str, list[Envelope]] = {}
        self._replaying: dict[str, int] = {}
        # Requests read and not yet answered may take this many more slots (``_take_slot``/``_give_slot``).
        self._free_slots = MAX_INFLIGHT_REQUESTS
        self._slot_freed: asyncio.Future[None] | None = None
        # One message is written at a time: what waits is an answer's Python objects, not its encoded
        # copy, and the socket buffer holds at most one message beyond websockets' write limit.
        self._output = asyncio.Lock()
        self.opened_at = asyncio.get_running_loop().time()
        self.address = address_of(ws)
        #: Seconds this connection has to authenticate on a token server (shorter for an address that
        #: keeps failing: ``ConnectionLimits.auth_timeout_for``).
        self.auth_timeout = server.limits.auth_timeout_for(self.address)
        self._authenticated = False
        self.writing_since: float | None = None  # when the message being written started (watchdog)
        self._shutting = False
        if isinstance(ws, TakingConnection):
            ws.taker = (
                self._take
            )  # requests and receipts handled as they are parsed (ag2net.server.connection)

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

    async def authorize(self, hub: Any, op: str, params: dict[str, Any]) -> None:
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
        write is not taken within the server's ``send_timeout``. An open connection whose socket took
        everything so far is written to at once (``ag2net.transport.ws_write``)."""
        if write_now(self.ws, text):
            return
        self.writing_since = asyncio.get_running_loop().time()
        try:
            await self.ws.send(text)
        finally:
            self.writing_since = None

    async def _send_frame(self, frame: Any) -> None:
        await self._send(fr.encode_frame(frame))

    async def _send_notify(self, recipient_id: str, envelope: Envelope) -> None:
        async with self._output:
            await self._write(notify_json(envelope, recipient_id))

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def run(self) -> None:
        """Read frames until the connection ends."""
        clock = asyncio.get_running_loop().time
        turn_began = clock()
        ws = self.ws
        taking = ws if isinstance(ws, TakingConnection) else None
        try:
            while True:
                if taking is None:
                    message = await ws.recv()
                else:
                    taking.reader_waiting = True  # meanwhile a request or receipt is taken as it arrives
                    try:
                        message = await ws.recv()
                    finally:
                        taking.reader_waiting = False
                    taking.message_read()
                if self._refused:
                    break
                try:
                    await self._on_message(message)
                except ConnectionClosed:
                    raise
                except Exception as exc:  # one bad frame never ends the connection
                    log.exception("frame handling failed on connection %s", self.endpoint_id)
                    await self._send_frame(fr.ErrorFrame("error", str(exc) or type(exc).__name__))
                if clock() - turn_began > FAIR_SHARE:
                    # Buffered messages are read without a pause: let other connections have the loop.
                    await asyncio.sleep(0)
                    turn_began = clock()
        except ConnectionClosed:
            pass

    def _take(self, text: str) -> bool:
        """A message that arrived while the reader waited, nothing queued ahead of it: handle it now when it
        is a request with a free in-flight slot or a receipt (what ``_on_message`` would do, without
        awaiting). Anything else is left to the reader (``False``), which parses it again and answers it."""
        if self._refused or self._free_slots <= 0:
            return False
        try:
            data = fr.parse_json(text)
            if type(data) is not dict or data.get("kind") not in ("request", "receipt"):
                return False
            frame = fr.decode_frame(data)
        except Exception:  # malformed: the reader's path says what is wrong with it
            return False
        if isinstance(frame, fr.RequestFrame):
            self._free_slots -= 1  # given back once the answer is written (or cannot be)
            self._spawn(self._request(frame))
            return True
        if isinstance(frame, fr.ReceiptFrame):
            try:
                self._receipt(frame)
            except Exception as exc:  # one bad frame never ends the connection
                log.exception("frame handling failed on connection %s", self.endpoint_id)
                self._spawn(
                    self._send_quietly(
                        fr.encode_frame(fr.ErrorFrame("error", str(exc) or type(exc).__name__))
                    )
                )
            return True
        return False

    def _receipt(self, frame: fr.ReceiptFrame) -> None:
        self.hub.handle_receipt(
            self, frame.envelope_id, frame.status, frame.recipient_id, frame.channel_id, frame.reason
        )

    async def _take_slot(self) -> None:
        """One in-flight slot for a request the reader read; waits while all are taken (only the reader
        waits: the connection takes a request as it arrives only while the reader waits for a message)."""
        while self._free_slots <= 0:
            waiter = self._slot_freed = asyncio.get_running_loop().create_future()
            try:
                await waiter
            finally:
                self._slot_freed = None
        self._free_slots -= 1

    def _give_slot(self) -> None:
        self._free_slots += 1
        waiter = self._slot_freed
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _on_message(self, message: str | bytes) -> None:
        try:
            data = fr.parse_json(message)
        except fr.FrameTooDeep as exc:
            await self._answer_malformed(fr.top_level_fields(_as_text(message)), exc)
            return
        except ProtocolError as exc:
            await self._protocol_error(str(exc))
            return
        try:
            frame = fr.decode_frame(data)
        except RecursionError:
            await self._answer_malformed(data, fr.nesting_error())
            return
        except (ProtocolError, ValueError, TypeError) as exc:
            await self._answer_malformed(data, exc)
            return
        if isinstance(frame, fr.RequestFrame):
            await self._take_slot()  # given back once the answer is written (or cannot be)
            self._spawn(self._request(frame))
        elif isinstance(frame, fr.ReceiptFrame):
            self._receipt(frame)
        elif isinstance(frame, fr.HelloFrame):
            await self._hello(frame)
        elif isinstance(frame, fr.PingFrame):
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
            await self._send_frame(fr.ErrorFrame("protocol_error", message))

    async def _respond_error(self, request_id: str, code: str, message: str) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send_frame(fr.ResponseFrame(request_id, False, None, code, message))

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

    async def _hello(self, frame: fr.HelloFrame) -> None:
        try:
            if frame.auth_scheme == OPERATOR_SCHEME:
                try:
                    self.server.check_operator(frame.auth_claim)
                except AccessDeniedError as exc:  # no credential presented: nothing to punish
                    await self._send_frame(fr.ErrorFrame("access_denied", str(exc)))
                    return
                self.operator = True
                self.authenticated = True
                await self._send_frame(fr.WelcomeFrame(self.endpoint_id, self.hub.clock()))
                return
            if frame.name == "" and self.server.token is not None:
                # The connection proves it holds the server's token, binding nothing (WsLink on connect).
                if not token_matches(frame.auth_claim, self.server.token):
                    raise AuthError(
                        "token mismatch: this server's token is not the one given (token=..., --token)"
                    )
                self.authenticated = True
                await self._send_frame(fr.WelcomeFrame(self.endpoint_id, self.hub.clock()))
                return
            agent_id = self.hub.find_agent_id(frame.name)
            if agent_id is None:
                await self._send_frame(fr.ErrorFrame("not_found", f"unknown name: {frame.name}"))
                return
            passport = self.hub.lookup_agent(agent_id)
            await self.server.check_identity(self, passport, frame.auth_scheme, frame.auth_claim)
            self.hub.bind_endpoint(self, agent_id)
            self.agent_id = agent_id
        except AuthError as exc:
            with contextlib.suppress(ConnectionClosed):
                await self._send_frame(fr.ErrorFrame("auth_failed", str(exc)))
            await self._refuse(str(exc))
            return
        except NetworkError as exc:
            await self._send_frame(fr.ErrorFrame(exc.code, str(exc)))
            return
        except Exception:
            log.exception("hello from %r failed", frame.name)
            await self._send_frame(
                fr.ErrorFrame(
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
        await self._send_frame(fr.WelcomeFrame(self.endpoint_id, self.hub.clock()))
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
                await self._send_frame(fr.ErrorFrame("access_denied", message))
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

    async def _request(self, frame: fr.RequestFrame) -> None:
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
                await self._respond_error(frame.request_id, "protocol_error", str(fr.nesting_error()))
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
            self._give_slot()
            answered = self._answered.pop(frame.request_id, None)
            if answered is not None:
                answered.set()

    async def _respond(self, frame: fr.RequestFrame, result: Any, secret: str | None) -> None:
        async with self._output:
            if self.ws.state is not State.OPEN:
                return  # nobody to answer: skip the encoding
            try:
                # Encoded only now, holding the writer: queued answers stay references to hub objects.
                encoded = encode_result(result, frame.op)
                if secret is None:
                    text = response_json(frame.request_id, encoded)
                else:
                    text = dumps(
                        {
                            "kind": "response",
                            "request_id": frame.request_id,
                            "ok": True,
                            "result": encoded,
                            "error_code": "",
                            "error_message": "",
                            "identity_secret": secret,
                        }
                    )
            except (TypeError, ValueError, RecursionError) as exc:
                log.exception("result of op %s is not JSON", frame.op)
                text = dumps(
                    fr.encode_frame(
                        fr.ResponseFrame(
                            frame.request_id,
                            False,
                            None,
                            "error",
                            f"{frame.op} result is not JSON-serialisable: {exc}",
                        )
                    )
                )
            await self._write(text)

    async def _run_request(self, frame: fr.RequestFrame) -> tuple[Any, str | None]:
        own = CONNECTION_OPS.get(frame.op)
        if own is not None:
            return await own(self, frame.request_id, frame.params), None
        params = frame.params
        before = BEFORE.get(frame.op)
        secret = before(self, params) if before is not None else None
        if frame.op in _ANSWERED_BY:
            params["by"] = self.who()  # who set or answered: the server says, not the caller
        if frame.op == "post_envelope" and params.pop(HELD_NOTICE_PARAM, None) is True:
            # an ag2net client: told when its post is held, so its RPC timeout does not fire meanwhile
            token = HELD_NOTICE.set(lambda item: self._held_notice(frame.request_id, item))
            try:
                result = await self.hub.handle_op(self, frame.op, params)
            finally:
                HELD_NOTICE.reset(token)
        else:
            result = await self.hub.handle_op(self, frame.op, params)
        result = self.narrow(frame.op, params, result)
        after = AFTER.get(frame.op)
        if after is not None:
            await after(self, params, result)
        if secret is not None and (
            _agent_id_of(result) is None or getattr(result, "kind", None) == "remote_agent"
        ):
            secret = None
        return result, secret

    def who(self) -> str:
        """The name an operator's answer is signed with: an identity this connection holds, else "operator"."""
        for agent_id in sorted(self.bound):
            return self.hub.name_for(agent_id)
        return "operator"

    def _held_notice(self, request_id: str, item: Any) -> None:
        """Tell the client its post is held (the item's id, its would-be seq and why: never the spec)."""
        detail = item.detail
        notice = {
            "kind": HELD_KIND,
            "request_id": request_id,
            "item_id": item.item_id,
            "would_be_seq": detail.get("would_be_seq"),
            "reason": detail.get("reason", ""),
        }
        self._spawn(self._send_quietly(notice))

    async def _send_quietly(self, data: dict[str, Any]) -> None:
        with contextlib.suppress(ConnectionClosed):
            await self._send(data)

    # ------------------------------------------------------------------ observe

    def _observe(self, request_id: str, params: dict[str, Any]) -> dict[str, Any]:
        sub = self._subscription("observe", params)
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
        answered = self._answered[request_id] = asyncio.Event()
        self._observers[sub] = self._spawn(self._stream(sub, stream, answered))
        return {"subscription": sub, "position": position, "incarnation": self.server.incarnation}

    def _unobserve(self, params: dict[str, Any]) -> None:
        task = self._observers.pop(self._subscription("unobserve", params), None)
        if task is not None:
            task.cancel()

    def _subscription(self, op: str, params: dict[str, Any]) -> str:
        self.server.policy.require_operator(self, op)
        sub = params.get("subscription")
        if not isinstance(sub, str) or not sub:
            raise ProtocolError(f"{op} needs params.subscription as a non-empty string")
        return sub

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

    async def _stream(self, sub: str, stream: Any, answered: asyncio.Event) -> None:
        try:
            await answered.wait()
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


# ---------------------------------------------------------------------------------------------- per-op


def _issue_secret(endpoint: WsEndpoint, params: dict[str, Any]) -> str | None:
    """``register``: a client asks for its identity secret; only this server says what it is."""
    params["_identity_secret"] = params.pop("identity_secret", None) is True
    params.pop("_secret_digest", None)
    if endpoint.server.secrets is None or not params["_identity_secret"]:
        return None
    # The digest is written in the identity's own record, in the registration's one write: no instant
    # exists in which the identity is registered and looks like it has no secret.
    secret, params["_secret_digest"] = new_identity_secret()
    return secret


async def _identity_taken(endpoint: WsEndpoint, params: dict[str, Any], result: Any) -> None:
    """``register``/``bind``: the connection authenticated, and holds the identity now."""
    endpoint.authenticated = True
    agent_id = _agent_id_of(result)
    if isinstance(agent_id, str) and agent_id in endpoint.bound:
        endpoint.server.claimed(endpoint, agent_id)


async def _identity_let_go(endpoint: WsEndpoint, params: dict[str, Any], result: Any) -> None:
    endpoint.bound.discard(params.get("agent_id"))


async def _identity_removed(endpoint: WsEndpoint, params: dict[str, Any], result: Any) -> None:
    agent_id = params.get("agent_id")
    endpoint.bound.discard(agent_id)
    if endpoint.server.secrets is not None and isinstance(agent_id, str):
        await endpoint.server.secrets.forget(agent_id)


async def _observe_op(endpoint: WsEndpoint, request_id: str, params: dict[str, Any]) -> Any:
    return endpoint._observe(request_id, params)


async def _unobserve_op(endpoint: WsEndpoint, request_id: str, params: dict[str, Any]) -> Any:
    return endpoint._unobserve(params)


async def _rotate_secret_op(endpoint: WsEndpoint, request_id: str, params: dict[str, Any]) -> Any:
    return await endpoint._rotate_secret(params)


#: The ops the connection answers itself (the catalogue's ``connection`` ops).
CONNECTION_OPS: dict[str, Callable[[WsEndpoint, str, dict[str, Any]], Awaitable[Any]]] = {
    "observe": _observe_op,
    "unobserve": _unobserve_op,
    "rotate_secret": _rotate_secret_op,
}
#: What the server does with an op's params before the hub sees them; the secret to hand over, if any.
BEFORE: dict[str, Callable[[WsEndpoint, dict[str, Any]], str | None]] = {"register": _issue_secret}
#: The connection's bookkeeping once an op succeeded.
AFTER: dict[str, Callable[[WsEndpoint, dict[str, Any], Any], Awaitable[None]]] = {
    "register": _identity_taken,
    "bind": _identity_taken,
    "unbind": _identity_let_go,
    "unregister": _identity_removed,
}
assert set(CONNECTION_OPS) == {n for n, spec in CATALOGUE.items() if spec.connection}


__all__ = [
    "AFTER",
    "BEFORE",
    "CONNECTION_OPS",
    "MAX_INFLIGHT_REQUESTS",
    "OBSERVED_KIND",
    "OPERATOR_SCHEME",
    "ConnectionServer",
    "WsEndpoint",
    "address_of",
    "encode_result",
    "token_matches",
]

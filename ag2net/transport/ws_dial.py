"""Dialing a hub: one WebSocket connection to a URL, or a race between several URLs.

``open_ws`` connects to one hub and refuses a standby (its handshake says so in ``ROLE_HEADER``);
``race`` asks every URL at once, each again on its own backoff, and keeps the first that admits, so a hub
that never answers holds up only its own attempt. ``WsLinkClient`` calls these when it connects and
reconnects; the connection's states after that are its own.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidHandshake, InvalidStatus, InvalidURI

from ag2net.errors import NetworkError, StandbyError
from ag2net.transport.ws_taking import TakingClientConnection

#: The handshake header by which a standby hub says what it is (``ag2net.server.leadership``).
ROLE_HEADER = "X-Ag2net-Role"
STANDBY_ROLE = "standby"
#: With several URLs a reconnect asks them again at least this often (a takeover takes seconds).
MULTI_URL_MAX_DELAY = 1.0


class ConnectionLostError(NetworkError, ConnectionError):
    """The hub could not be reached, or the connection dropped before an answer arrived."""


@dataclass(frozen=True, slots=True)
class Dialer:
    """How to open one connection (websockets' ``connect`` options) and how long a close may take."""

    ssl_context: Any = None
    open_timeout: float | None = 10.0
    ping_interval: float | None = 20.0
    ping_timeout: float | None = 20.0
    max_message_bytes: int | None = None
    compression: str | None = None
    close_deadline: float | None = None

    async def open(self, url: str) -> ClientConnection:
        """An open WebSocket connection to the hub at ``url``; StandbyError when it is a standby,
        ConnectionLostError when it cannot be had."""
        try:
            ws = await connect(
                url,
                ssl=self.ssl_context,
                open_timeout=self.open_timeout,
                ping_interval=self.ping_interval,
                ping_timeout=self.ping_timeout,
                max_size=self.max_message_bytes,
                max_queue=None,
                compression=self.compression,
                create_connection=TakingClientConnection,
            )
        except InvalidURI as exc:
            raise ValueError(
                f"{url!r} is not a WebSocket URL; use ws://HOST:PORT or wss://HOST:PORT"
            ) from exc
        except InvalidStatus as exc:
            body = (exc.response.body or b"").decode("utf-8", "replace").strip()
            detail = f"HTTP {exc.response.status_code}" + (f": {body}" if body else "")
            raise ConnectionLostError(f"cannot connect to {url}: {detail}") from None
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            raise ConnectionLostError(f"cannot connect to {url}: {exc}") from None
        response = ws.response
        if response is not None and response.headers.get(ROLE_HEADER) == STANDBY_ROLE:
            await self.discard(ws)
            raise StandbyError(
                f"the hub at {url} is a standby: another hub on its database admits; connect to that one "
                "(give both URLs: ws://a,ws://b)"
            )
        return ws

    async def discard(self, ws: ClientConnection) -> None:
        """Close ``ws``: with the closing handshake when the hub answers it within the ping deadline (10 s
        without one), else at once."""
        try:
            await asyncio.wait_for(ws.close(), self.close_deadline or 10.0)
        except BaseException as exc:
            ws.transport.abort()
            if not isinstance(exc, Exception):
                raise


async def race(
    urls: list[str],
    dial: Callable[[str], Awaitable[ClientConnection]],
    discard: Callable[[ClientConnection], Awaitable[None]],
    initial_delay: float,
    until: float | None,
) -> tuple[str, ClientConnection]:
    """The first URL to admit, and its connection. Every URL is asked at once, and again on its own
    backoff when it refuses or answers standby, so a hub that never answers (a frozen process: its kernel
    accepts the connection, the handshake never ends) holds up only its own attempt.

    ``until`` (a loop time; the first connect) gives up when every URL refused the connection (none
    answered standby) or at that time, with one sentence saying what each answered. ``None`` (a
    reconnect) asks until one admits."""
    loop = asyncio.get_running_loop()
    attempts: dict[asyncio.Task[ClientConnection], str] = {}
    answers: dict[str, Exception] = {}
    due = dict.fromkeys(urls, loop.time())
    delay = dict.fromkeys(urls, initial_delay)
    try:
        while True:
            now = loop.time()
            for url in urls:
                if url not in attempts.values() and due[url] <= now:
                    attempts[loop.create_task(dial(url))] = url  # type: ignore[arg-type]
            if until is not None and (
                now >= until
                or (not attempts and all(isinstance(answers.get(u), ConnectionLostError) for u in urls))
            ):
                raise none_admits(urls, answers)
            waits = [due[u] - now for u in urls if u not in attempts.values()]
            if until is not None:
                waits.append(until - now)
            timeout = max(0.0, min(waits)) if waits else None
            if not attempts:
                await asyncio.sleep(timeout or 0.0)  # every URL waits for its next turn
                continue
            done, _ = await asyncio.wait(attempts, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
            won: tuple[str, ClientConnection] | None = None
            for task in sorted(done, key=lambda t: urls.index(attempts[t])):
                url = attempts.pop(task)
                exc = task.exception()
                if exc is None:
                    if won is None:
                        won = (url, task.result())
                    else:
                        await discard(task.result())  # only one hub of a database admits
                    continue
                if not isinstance(exc, StandbyError | ConnectionLostError):
                    raise exc
                answers[url] = exc
                due[url] = loop.time() + delay[url] * (0.5 + random.random())
                delay[url] = min(delay[url] * 2, MULTI_URL_MAX_DELAY)
            if won is not None:
                return won
    finally:
        for task in attempts:
            task.cancel()
        if attempts:
            await asyncio.wait(attempts)
            for task in attempts:
                if not task.cancelled() and task.exception() is None:
                    await discard(task.result())


def none_admits(urls: list[str], answers: dict[str, Exception]) -> NetworkError:
    """The one error saying what each URL answered when none admitted."""
    failures: list[str] = []
    for url in urls:
        answer = answers.get(url)
        if answer is None:
            failures.append(f"{url} did not answer")
        elif isinstance(answer, StandbyError):
            failures.append(f"{url} is a standby")
        else:
            failures.append(str(answer).removeprefix("cannot connect to "))
    detail = "; ".join(failures)
    if any(isinstance(a, StandbyError) for a in answers.values()):
        return StandbyError(
            f"no hub of {', '.join(urls)} admits now ({detail}); a standby takes over within seconds "
            "of the active hub stopping"
        )
    return ConnectionLostError(f"cannot connect to any of {', '.join(urls)} ({detail})")


__all__ = [
    "MULTI_URL_MAX_DELAY",
    "ROLE_HEADER",
    "STANDBY_ROLE",
    "ConnectionLostError",
    "Dialer",
    "none_admits",
    "race",
]

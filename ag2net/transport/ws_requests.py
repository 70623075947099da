"""Request correlation for the WebSocket link: the ops in flight by ``request_id``, the ``hello`` waiters.

``WsLinkClient`` sends; this matches each ``ResponseFrame`` or ``WelcomeFrame`` to the one who asked, keeps
an identity secret a response handed over until its asker takes it, and fails every waiter when the
connection ends. No I/O of its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ag2net.errors import error_from_code
from ag2net.protocol.frames import ResponseFrame
from ag2net.transport.ws_delivery import Subscription


class PendingRequests:
    """The requests of one link awaiting their answers, and the ``hello`` frames awaiting a welcome."""

    def __init__(self) -> None:
        #: request_id -> (the asker's future, the op)
        self.futures: dict[str, tuple[asyncio.Future[Any], str]] = {}
        #: request_id -> the observe subscription that request (re)starts
        self.observing: dict[str, Subscription] = {}
        self.hello_waiters: list[asyncio.Future[Any]] = []
        self._issued: dict[str, str] = {}

    def ask(self, request_id: str, op: str, subscription: Subscription | None = None) -> asyncio.Future[Any]:
        """The future the answer to ``request_id`` resolves."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures[request_id] = (future, op)
        if subscription is not None:
            self.observing[request_id] = subscription
        return future

    def forget(self, request_id: str) -> str | None:
        """Stop waiting for ``request_id``; the identity secret its response handed over, if any."""
        self.futures.pop(request_id, None)
        self.observing.pop(request_id, None)
        return self._issued.pop(request_id, None)

    def answer(self, frame: ResponseFrame, started: Callable[[Subscription, dict[str, Any]], None]) -> None:
        """Resolve the asker of ``frame``; an observe answer first calls ``started`` with its subscription."""
        entry = self.futures.pop(frame.request_id, None)
        sub = self.observing.pop(frame.request_id, None)
        if entry is None or entry[0].done():
            return
        if sub is not None and frame.ok and isinstance(frame.result, dict):
            # Before the next frame is read: the events right behind this answer are filtered by it.
            started(sub, frame.result)
        if frame.identity_secret is not None:
            self._issued[frame.request_id] = frame.identity_secret
        if frame.ok:
            entry[0].set_result(frame.result)
        else:
            entry[0].set_exception(error_from_code(frame.error_code, frame.error_message))

    def hello(self) -> asyncio.Future[Any]:
        """The future the next welcome (or refusal) resolves."""
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.hello_waiters.append(future)
        return future

    def forget_hello(self, future: asyncio.Future[Any]) -> None:
        if future in self.hello_waiters:
            self.hello_waiters.remove(future)

    def resolve_hello(self, welcome: Any, error: Exception | None) -> bool:
        """Hand a welcome (or an error) to the oldest waiting ``hello``; False when none waits."""
        while self.hello_waiters:
            future = self.hello_waiters.pop(0)
            if future.done():
                continue
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(welcome)
            return True
        return False

    def fail_all(self, exc: Exception) -> None:
        """Fail every waiter, each with a fresh copy of ``exc`` (one instance raised in many tasks would
        share one traceback)."""
        pending, self.futures = self.futures, {}
        waiters, self.hello_waiters = self.hello_waiters, []
        for future in [f for f, _op in pending.values()] + waiters:
            if not future.done():
                future.set_exception(type(exc)(str(exc)))


__all__ = ["PendingRequests"]

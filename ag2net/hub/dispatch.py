"""Shell: one priority mailbox per recipient, drained by its own task into the bound endpoint; and the
hub's background tasks (``Background``), cancelled when the hub closes.

Each mailbox serves ``urgent`` before ``normal`` before ``background``, FIFO within a level
(SPEC §3.1). Posting never waits on a slow recipient: the poster only appends to the mailbox.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import types
from asyncio.tasks import _enter_task, _leave_task  # what a task's step does around it
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from typing import Any

from ag2net.envelope import PRIORITY_RANK, Envelope

log = logging.getLogger(__name__)

_RANK = PRIORITY_RANK
_COROUTINE = types.CoroutineType
_LEVELS = max(PRIORITY_RANK.values()) + 1


class Mailbox:
    """Pending deliveries of one recipient.

    One FIFO per priority level (``PRIORITY_RANK``: urgent, normal, background); the drain serves the most
    urgent non-empty level first.

    Each mailbox has its own pump task. While the pump is parked (nothing queued), a ``put`` does not wake
    it: it asks the hub's ``Drains`` to drain the mailbox in its next loop callback, one callback for every
    mailbox a dispatch filled (a fan-out to 20 recipients is one callback, not 20 task wakes, each with its
    future and handle). That drain runs with the pump as the current task and in the pump's own context, so a
    handler sees what it would see in the pump (``asyncio.current_task()``, ``asyncio.timeout``, a task
    group, context variables). A handler that finishes without suspending costs no wake at all; the first
    time one suspends, the rest of the drain moves into the pump task itself (woken once), so a slow
    handler holds up only its own recipient, and the callback goes on to the next mailbox.
    """

    __slots__ = (
        "_context",
        "_drains",
        "_levels",
        "_loop",
        "_resume",
        "_scheduled",
        "_size",
        "_task",
        "_waiter",
        "endpoint",
        "on_failed",
        "recipient_id",
    )

    def __init__(
        self,
        recipient_id: str,
        endpoint: Any,
        on_failed: Callable[[Envelope, str, BaseException], Awaitable[None]],
        drains: Drains | None = None,
    ) -> None:
        self.recipient_id = recipient_id
        self.endpoint = endpoint
        self.on_failed = on_failed
        self._levels: tuple[deque[Envelope], ...] = tuple(deque() for _ in range(_LEVELS))
        self._size = 0
        self._drains = drains if drains is not None else Drains()
        self._waiter: asyncio.Future[None] | None = None  # set while the pump is parked
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._context: contextvars.Context | None = None
        self._scheduled = False  # in ``_drains`` for its next callback
        # What the pump goes on with when a drain outside it suspended or raised: ``_drain_eager``.
        self._resume: tuple[Any, Any, Envelope, bool] | None = None

    def __len__(self) -> int:
        return self._size

    def put(self, envelope: Envelope, rank: int | None = None) -> None:
        """Queue ``envelope``; ``rank`` is its priority level when the caller has it already (a dispatch to
        many recipients reads it once)."""
        self._levels[_RANK.get(envelope.priority, 1) if rank is None else rank].append(envelope)
        self._size += 1
        if self._waiter is not None:  # the pump is parked: drain in the next callback
            if not self._scheduled:
                self._scheduled = True
                drains = self._drains  # drains.add(self), inline (once per recipient of a dispatch)
                drains._due.append(self)
                if drains._handle is None:
                    drains._handle = asyncio.get_running_loop().call_soon(drains._run)
        elif self._task is None:
            loop = self._loop = asyncio.get_running_loop()
            context = self._context = contextvars.copy_context()
            self._task = loop.create_task(self._pump(), context=context)

    def _pop(self) -> Envelope | None:
        for level in self._levels:
            if level:
                self._size -= 1
                return level.popleft()
        return None

    async def _drain(self) -> None:
        """Deliver until nothing is queued: one envelope after the other, each delivery awaited."""
        levels = self._levels
        urgent, normal = levels[0], levels[1]
        recipient_id = self.recipient_id
        while self._size:
            # The common case first: nothing urgent, the next normal envelope (else the full order, re-read
            # before each delivery so an urgent one that arrives mid-drain goes next).
            if normal and not urgent:
                envelope = normal.popleft()
            else:
                for level in levels:
                    if level:
                        envelope = level.popleft()
                        break
                else:  # pragma: no cover - _size says something is queued
                    self._size = 0
                    return
            self._size -= 1
            endpoint = self.endpoint
            if endpoint is None:
                continue
            try:
                await endpoint.notify(recipient_id, envelope)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a broken endpoint must not stop other deliveries
                await self.on_failed(envelope, recipient_id, exc)

    def _drain_eager(self) -> tuple[Any, Any, Envelope, bool] | None:
        """``_drain`` outside the pump, each delivery's coroutine (and a failed one's ``on_failed``) driven
        by hand. None when everything queued was delivered; else what the pump goes on with, when one
        suspends (``(its coroutine, what it yielded, its envelope, is_delivery)``) or raises past
        ``_drain``'s handler (``(None, the exception, its envelope, is_delivery)``)."""
        levels = self._levels
        urgent, normal = levels[0], levels[1]
        recipient_id = self.recipient_id
        while self._size:
            if normal and not urgent:
                envelope = normal.popleft()
            else:
                for level in levels:
                    if level:
                        envelope = level.popleft()
                        break
                else:  # pragma: no cover - _size says something is queued
                    self._size = 0
                    return None
            self._size -= 1
            endpoint = self.endpoint
            if endpoint is None:
                continue
            try:
                step: Any = endpoint.notify(recipient_id, envelope)
                if type(step) is not _COROUTINE:  # another awaitable: its iterator
                    step = step.__await__()
                yielded = step.send(None)
            except StopIteration:
                continue
            except asyncio.CancelledError as exc:
                return (None, exc, envelope, True)
            except Exception as exc:  # a broken endpoint must not stop other deliveries: report it now
                try:
                    step = self.on_failed(envelope, recipient_id, exc)
                    yielded = step.send(None)
                except StopIteration:
                    continue
                except BaseException as failed:  # raised in the pump, as _drain raises it
                    return (None, failed, envelope, False)
                return (step, yielded, envelope, False)
            except BaseException as exc:  # KeyboardInterrupt...: raised in the pump
                return (None, exc, envelope, True)
            return (step, yielded, envelope, True)
        return None

    async def _resume_drain(
        self, resume: tuple[Any, Any, Envelope, bool], thrown: BaseException | None = None
    ) -> None:
        """What a drain outside the pump left (a delivery or its ``on_failed`` that suspended, or an
        exception that ends the pump), finished here as ``_drain`` would have: a delivery's failure reported
        before the next delivery."""
        step, value, envelope, delivery = resume
        if step is None:  # CancelledError, KeyboardInterrupt, an on_failed that raised: as _drain
            raise value
        if not delivery:  # the rest of on_failed
            await _finish(step, value, thrown)
            return
        try:
            await _finish(step, value, thrown)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken endpoint must not stop other deliveries
            await self.on_failed(envelope, self.recipient_id, exc)

    async def _pump(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            resume = self._resume
            if resume is not None:
                self._resume = None
                await self._resume_drain(resume)
            elif self._size:
                await self._drain()
            else:
                waiter = self._waiter = loop.create_future()
                try:
                    await waiter
                except asyncio.CancelledError as exc:
                    # Cancelled after a drain outside moved here but before this task ran: the
                    # cancellation is the suspended handler's, as if it had come while it waited.
                    resume, self._resume = self._resume, None
                    if resume is None or resume[0] is None:
                        raise
                    await self._resume_drain(resume, exc)

    def clear(self) -> None:
        for level in self._levels:
            level.clear()
        self._size = 0

    async def stop(self) -> None:
        task, self._task = self._task, None
        self._waiter = None
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        resume, self._resume = self._resume, None
        if resume is not None and resume[0] is not None and hasattr(resume[0], "close"):
            resume[0].close()  # a delivery the pump never took over


@types.coroutine
def _finish(drain: Any, yielded: Any, thrown: BaseException | None = None) -> Generator[Any, Any, None]:
    """The rest of ``drain`` (a delivery's coroutine, which yielded ``yielded`` outside its pump), run by the pump: what a task's
    step does, by hand: pass each yielded future up, and what comes back (a value or an exception) down."""
    if thrown is not None:
        try:
            yielded = drain.throw(thrown)
        except StopIteration:
            return
    while True:
        try:
            sent = yield yielded
        except BaseException as exc:  # the drain's to handle
            try:
                yielded = drain.throw(exc)
            except StopIteration:
                return
        else:
            try:
                yielded = drain.send(sent)
            except StopIteration:
                return


class Drains:
    """Mailboxes to drain in the next loop callback (one callback for every mailbox queued meanwhile)."""

    __slots__ = ("_due", "_handle")

    def __init__(self) -> None:
        self._due: list[Mailbox] = []
        self._handle: asyncio.Handle | None = None

    def add(self, mailbox: Mailbox) -> None:
        self._due.append(mailbox)
        if self._handle is None:
            self._handle = asyncio.get_running_loop().call_soon(self._run)

    def _run(self) -> None:
        """Drain each due mailbox as its parked pump would, without waking it: ``_drain_eager`` with the
        pump as the current task (what a task's step does around it) and in the pump's context."""
        # Mailboxes queued while this runs (a handler's own post) go to the next callback.
        due, self._due = self._due, []
        self._handle = None
        for mailbox in due:
            mailbox._scheduled = False
            waiter = mailbox._waiter
            task = mailbox._task
            context = mailbox._context
            loop = mailbox._loop
            if (
                waiter is None
                or waiter.done()
                or task is None
                or context is None
                or loop is None
                or not mailbox._size
            ):
                continue  # the pump runs (it drains), was stopped, or nothing is left
            _enter_task(loop, task)
            try:
                resume = context.run(mailbox._drain_eager)
            finally:
                _leave_task(loop, task)
            if resume is not None:  # a delivery suspended or failed: the pump goes on with it
                mailbox._resume = resume
                mailbox._waiter = None
                waiter.set_result(None)


class Background:
    """Tasks the hub starts and does not await (a mailbox stopped after an unbind, a cursor flush, a
    listener fan-out): kept until done, cancelled by ``cancel_all`` when the hub closes."""

    __slots__ = ("closed", "tasks")

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self.closed = False  # the hub is closing: start no new timer

    def spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
        return task

    def cancel_all(self) -> None:
        for task in list(self.tasks):
            task.cancel()


__all__ = ["Background", "Drains", "Mailbox"]

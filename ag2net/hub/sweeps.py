"""Shell: the hub's interval sweepers (``hub.sweepers``) and the expectation evaluator tick (``hub.expectations``).

A sweeper sleeps first, then runs, forever; its exceptions are logged and swallowed (reference §3.1).
``Expectations.tick`` evaluates every active channel's expectations once: each violation is audited,
fanned out and handed to its violation handler, once per (expectation, violator).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ag2net.hub.audit import AUDIT_KIND_EXPECTATION_VIOLATED
from ag2net.hub.expectations import ExpectationContext
from ag2net.ids import parse_time

if TYPE_CHECKING:
    from ag2net.hub.core import ChannelTable
    from ag2net.hub.services import Services
    from ag2net.views.wal import WalLog

log = logging.getLogger(__name__)


class Sweepers:
    """Named interval tasks (``register_sweeper``): TTL expiry, the expectation tick, custom ones."""

    __slots__ = ("running",)

    def __init__(self) -> None:
        self.running: dict[str, asyncio.Task[None]] = {}

    def register(self, name: str, interval_seconds: float, fn: Callable[[], Any]) -> None:
        if name in self.running:
            raise ValueError(f"sweeper {name!r} is already registered")
        if interval_seconds <= 0:
            raise ValueError(f"sweeper interval must be positive, got {interval_seconds}")

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_seconds)
                try:
                    result = fn()
                    if inspect.isawaitable(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("sweeper %s failed", name)

        self.running[name] = asyncio.get_running_loop().create_task(loop())

    async def unregister(self, name: str) -> None:
        task = self.running.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def stop_all(self) -> None:
        for name in list(self.running):
            await self.unregister(name)


class Expectations:
    """The expectation evaluators and violation handlers by name, and which violations have fired."""

    __slots__ = ("channels", "evaluators", "fired", "handlers", "load_wal", "owner", "services")

    def __init__(
        self,
        services: Services,
        owner: Any,
        *,
        channels: ChannelTable,
        load_wal: Callable[[str], Awaitable[WalLog]],
    ) -> None:
        self.services = services
        self.owner = owner  # the hub: what a violation handler acts on (ag2net.hub.records)
        self.channels = channels
        self.load_wal = load_wal
        self.evaluators: dict[str, Any] = {}
        self.handlers: dict[str, Any] = {}
        self.fired: dict[str, set[tuple[int, str, str]]] = {}

    def forget(self, channel_id: str) -> None:
        """A closed channel's violations are not remembered."""
        self.fired.pop(channel_id, None)

    async def tick(self) -> int:
        """Evaluate every active channel's expectations once; returns how many violations fired."""
        if not self.evaluators or not self.handlers:
            return 0
        now_iso = self.services.clock()
        now_seconds = parse_time(now_iso).timestamp()
        fired = 0
        for cid, md in list(self.channels.items()):
            if md.is_terminal() or not md.manifest.expectations:
                continue
            # A prefix of the cached log: evaluators walk back from the end, so only the envelopes they
            # reach are read (older ones come back from the store in blocks).
            wal = (await self.load_wal(cid)).prefix()
            ctx = ExpectationContext(md, self.channels.states.get(cid), wal, now_iso, now_seconds)
            fired += await self._evaluate(cid, md, ctx)
        return fired

    async def _evaluate(self, cid: str, md: Any, ctx: ExpectationContext) -> int:
        fired = 0
        for index, exp in enumerate(md.manifest.expectations):
            evaluator = self.evaluators.get(exp.name)
            handler = self.handlers.get(exp.on_violation)
            if evaluator is None or handler is None:
                continue
            try:
                violation = evaluator.evaluate(exp, ctx)
            except Exception:
                log.exception("expectation %s on channel %s could not be evaluated", exp.name, cid)
                continue
            if violation is None:
                continue
            memory = self.fired.setdefault(cid, set())
            keys = [(index, exp.name, v) for v in (violation.violator_ids or [""])]
            if all(k in memory for k in keys):
                continue
            memory.update(keys)
            fired += 1
            await self.services.audit.record(
                AUDIT_KIND_EXPECTATION_VIOLATED,
                channel_id=cid,
                expectation=exp.name,
                on_violation=exp.on_violation,
                params=dict(exp.params),
                violators=list(violation.violator_ids),
                detail=dict(violation.detail),
            )
            await self.services.listeners.fan_out("on_expectation_fired", cid, exp, violation)
            try:
                await handler.handle(self.owner, cid, violation)
            except Exception:
                log.exception("violation handler %s failed", exp.on_violation)
            if exp.on_violation == "auto_close":
                break
        return fired


__all__ = ["Expectations", "Sweepers"]

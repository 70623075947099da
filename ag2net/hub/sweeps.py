"""Sweeps: TTL expiry of channels and tasks, and the expectation evaluator tick."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ag2net.channel import (
    ChannelState,
)
from ag2net.hub.audit import (
    AUDIT_KIND_EXPECTATION_VIOLATED,
)
from ag2net.hub.expectations import ExpectationContext
from ag2net.ids import parse_time
from ag2net.tasks import TaskState

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

log = logging.getLogger(__name__)


class Sweeps(HubShape):
    """Mixin of ``Hub``: what the periodic sweepers run."""

    async def expire_due(self) -> int:
        """Expire channels and tasks whose ``expires_at`` has passed; returns how many channels expired."""
        now = self.clock()
        count = 0
        for cid, md in list(self.channels.items()):
            if not md.is_terminal() and md.expires_at and md.expires_at <= now:
                await self._transition(cid, ChannelState.EXPIRED, "ttl_expired")
                count += 1
        for task in list(self._tasks.values()):
            if not task.is_terminal() and task.expires_at and task.expires_at <= now:
                await self.update_task(task.task_id, state=TaskState.EXPIRED, error="ttl_expired")
        return count

    async def tick_expectations(self) -> int:
        """Evaluate every active channel's expectations once; returns how many violations fired."""
        if not self._evaluators or not self._violation_handlers:
            return 0
        now_iso = self.clock()
        now_seconds = parse_time(now_iso).timestamp()
        fired = 0
        for cid, md in list(self.channels.items()):
            if md.is_terminal() or not md.manifest.expectations:
                continue
            # A prefix of the cached log: evaluators walk back from the end, so only the envelopes they
            # reach are read (older ones come back from the store in blocks).
            wal = (await self._ensure_wal(cid)).prefix()
            ctx = ExpectationContext(md, self.channel_table.states.get(cid), wal, now_iso, now_seconds)
            for index, exp in enumerate(md.manifest.expectations):
                evaluator = self._evaluators.get(exp.name)
                handler = self._violation_handlers.get(exp.on_violation)
                if evaluator is None or handler is None:
                    continue
                try:
                    violation = evaluator.evaluate(exp, ctx)
                except Exception:
                    log.exception("expectation %s on channel %s could not be evaluated", exp.name, cid)
                    continue
                if violation is None:
                    continue
                memory = self._fired.setdefault(cid, set())
                keys = [(index, exp.name, v) for v in (violation.violator_ids or [""])]
                if all(k in memory for k in keys):
                    continue
                memory.update(keys)
                fired += 1
                await self._audit(
                    AUDIT_KIND_EXPECTATION_VIOLATED,
                    channel_id=cid,
                    expectation=exp.name,
                    on_violation=exp.on_violation,
                    params=dict(exp.params),
                    violators=list(violation.violator_ids),
                    detail=dict(violation.detail),
                )
                await self._fan_out("on_expectation_fired", cid, exp, violation)
                try:
                    await handler.handle(self, cid, violation)
                except Exception:
                    log.exception("violation handler %s failed", exp.on_violation)
                if exp.on_violation == "auto_close":
                    break
        return fired


__all__ = ["Sweeps"]

"""Shell: ``Tasks`` (``hub.tasks``) — tasks mirrored from their owners: updates, lists, terminal audit."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ag2net.errors import AccessDeniedError, NotFoundError, ProtocolError
from ag2net.hub.audit import (
    AUDIT_KIND_TASK_TERMINATED,
)
from ag2net.hub.core import TaskBook, required
from ag2net.tasks import TASK_ID_RE, TaskMetadata, TaskState

if TYPE_CHECKING:
    from ag2net.hub.core import IdentityTable
    from ag2net.hub.services import Services

log = logging.getLogger(__name__)


class Tasks(TaskBook):
    """Tasks mirrored from their owners (the task table with its persisted changes)."""

    __slots__ = ("identities", "services")

    def __init__(self, services: Services, identities: IdentityTable) -> None:
        super().__init__()
        self.services = services
        self.identities = identities

    async def observe(self, metadata: TaskMetadata) -> TaskMetadata:
        if not TASK_ID_RE.fullmatch(metadata.task_id or ""):
            raise ProtocolError(f"invalid task_id {metadata.task_id!r}")
        existing = self.tasks.get(metadata.task_id)
        if existing is not None:
            existing.state = metadata.state
            existing.started_at = metadata.started_at or existing.started_at
            existing.expires_at = metadata.expires_at or existing.expires_at
            existing.channel_id = metadata.channel_id or existing.channel_id
            existing.progress.update(metadata.progress or {})
            await self.services.store.put_task(existing.to_dict())
            return existing
        owner = self.identities.record(metadata.owner_id)
        limit = owner.rule.limits.max_concurrent_tasks
        if limit > 0:
            active = sum(
                1 for t in self.tasks.values() if t.owner_id == metadata.owner_id and not t.is_terminal()
            )
            if active >= limit:
                raise AccessDeniedError(
                    f"owner '{metadata.owner_id}' exceeded max_concurrent_tasks ({active} >= {limit})"
                )
        self.tasks[metadata.task_id] = metadata
        await self.services.store.put_task(metadata.to_dict())
        return metadata

    async def update(
        self,
        task_id: str,
        *,
        state: TaskState | str | None = None,
        progress: dict[str, Any] | None = None,
        result: Any = None,
        error: str | None = None,
    ) -> TaskMetadata:
        task = self.tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"task not found: {task_id}")
        if task.is_terminal():
            return task
        now = self.services.clock()
        if progress:
            task.progress.update(progress)
            task.last_progress_at = now
        if result is not None:
            task.result = result
        if error is not None:
            task.error = error
        if state is not None:
            task.state = TaskState(state)
        await self.services.store.put_task(task.to_dict())
        if task.is_terminal():
            task.completed_at = now
            await self.services.store.put_task(task.to_dict())
            await self.services.audit.record(
                AUDIT_KIND_TASK_TERMINATED,
                at=now,
                task_id=task_id,
                owner_id=task.owner_id,
                channel_id=task.channel_id,
                outcome=task.state.value,
                capability=task.spec.capability,
                reason=task.error or "",
            )
            await self.services.listeners.fan_out(
                "on_task_event",
                task_id,
                task.state.value,
                {"owner_id": task.owner_id, "channel_id": task.channel_id, "reason": task.error or ""},
            )
        return task

    def lookup(self, task_id: str) -> TaskMetadata:
        """The task's metadata, synchronously."""
        return required(self.tasks, task_id, f"task not found: {task_id}")

    def query(
        self,
        *,
        agent_id: str | None = None,
        channel_id: str | None = None,
        state: TaskState | str | None = None,
        limit: int | None = 50,
    ) -> list[TaskMetadata]:
        out = []
        wanted = TaskState(state) if state is not None else None
        for task in self.tasks.values():
            if agent_id is not None and task.owner_id != agent_id:
                continue
            if channel_id is not None and task.channel_id != channel_id:
                continue
            if wanted is not None and task.state != wanted:
                continue
            out.append(task)
        return out if limit is None else out[:limit]

    async def fire_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        await self.services.listeners.fan_out("on_task_event", task_id, kind, payload)


__all__ = ["Tasks"]

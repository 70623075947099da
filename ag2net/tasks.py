"""The task model the hub observes: states, the spec an owner starts with, and the stored metadata.

Shapes match ag2 1.2.1's ``TaskSpec``/``TaskMetadata`` ``to_dict`` (state written as its value); both are
strict ``Record``s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ag2net.errors import ProtocolError
from ag2net.record import Record

TASK_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


class TaskState(StrEnum):
    """Where a task is in its life; the last four are terminal."""

    CREATED = "created"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


TERMINAL_TASK_STATES: frozenset[TaskState] = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.EXPIRED, TaskState.CANCELLED}
)


def check_task_id(task_id: Any) -> None:
    """Refuse a task id that is not 1–128 of ``[A-Za-z0-9._-]`` starting with a letter or digit."""
    if not isinstance(task_id, str) or TASK_ID_RE.fullmatch(task_id) is None:
        raise ProtocolError(
            f"task_id {task_id!r} is malformed; use 1 to 128 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


@dataclass(slots=True)
class TaskSpec(Record):
    """What the owner set out to do; ``capability`` feeds the owner's observed track record."""

    title: str
    description: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    capability: str | None = None


@dataclass(slots=True)
class TaskMetadata(Record):
    """The hub's record of one task: owner, spec, state, timestamps (ISO-Z), progress and outcome."""

    task_id: str
    owner_id: str
    spec: TaskSpec
    state: TaskState
    created_at: str = ""
    started_at: str | None = None
    completed_at: str | None = None
    expires_at: str | None = None
    last_progress_at: str | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    result: Any = None
    error: str = ""
    channel_id: str | None = None

    def is_terminal(self) -> bool:
        return TaskState(self.state) in TERMINAL_TASK_STATES


def task_summary(md: TaskMetadata) -> dict[str, Any]:
    """The short form the ``tasks`` tool returns for ``status``, ``list`` and ``wait``."""
    return {
        "task_id": md.task_id,
        "owner_id": md.owner_id,
        "title": md.spec.title,
        "capability": md.spec.capability,
        "state": TaskState(md.state).value,
        "created_at": md.created_at,
        "started_at": md.started_at,
        "completed_at": md.completed_at,
        "expires_at": md.expires_at,
        "last_progress_at": md.last_progress_at,
        "result": md.result,
        "error": md.error,
    }


__all__ = [
    "TASK_ID_RE",
    "TERMINAL_TASK_STATES",
    "TaskMetadata",
    "TaskSpec",
    "TaskState",
    "check_task_id",
    "task_summary",
]

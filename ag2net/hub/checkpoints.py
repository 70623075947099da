"""Edge: task checkpoints kept by the hub: one JSON object per task id, the last write wins (ag2 1.2.1 semantics).

A checkpoint is an owner's opaque resume snapshot (``HubBackedCheckpointStore`` writes and reads it).
The hub keeps only the latest one per task, no history, so it lives in the store's ``meta`` table under
``task_checkpoint/<task_id>``: durable in SQLite, with no schema step.

Who may touch a checkpoint over the wire (``authorize_checkpoint``, called by the WebSocket server):
* a task the hub observes: its owner must be bound to the connection (operators may also read); when the
  checkpoint was written before the task was observed, the caller must also hold one of its writers;
* a task the hub does not observe: the first ``checkpoint_task`` records the agents bound to the writing
  connection as its writers (``task_checkpoint_writers/<task_id>``); later reads and writes need one of
  them bound (operators may also read). An id nobody wrote reads as open: there is nothing to protect.
In-process callers (the hub's own process) are not checked, as for every other op.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from ag2net.errors import AccessDeniedError, ProtocolError
from ag2net.tasks import check_task_id

if TYPE_CHECKING:
    from ag2net.hub.core import TaskBook
    from ag2net.store import Store

CHECKPOINT_META_PREFIX = "task_checkpoint/"
WRITERS_META_PREFIX = "task_checkpoint_writers/"

_CLAIM_LOCKS: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


class CheckpointHost(Protocol):
    """What checkpoints need of the hub: its store and its task table."""

    @property
    def store(self) -> Store: ...

    @property
    def tasks(self) -> TaskBook: ...


def encode_checkpoint(state: Any) -> str:
    """``state`` as JSON text, or a ``ProtocolError`` naming the field when it is not a JSON object."""
    if not isinstance(state, dict):
        raise ProtocolError(
            f"the checkpoint state must be a dict (a JSON object), got {type(state).__name__}; "
            "pass e.g. {'step': 3}"
        )
    try:
        return json.dumps(state, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ProtocolError(
            f"the checkpoint state is not JSON-serialisable ({exc}); store plain dicts, lists, strings and numbers"
        ) from None


async def write_checkpoint(hub: CheckpointHost, task_id: str, state: dict[str, Any]) -> None:
    """Replace the checkpoint of ``task_id`` with ``state`` (committed before this returns)."""
    check_task_id(task_id)
    await hub.store.set_meta(CHECKPOINT_META_PREFIX + task_id, encode_checkpoint(state))


async def read_checkpoint(hub: CheckpointHost, task_id: str) -> dict[str, Any] | None:
    """The latest checkpoint of ``task_id``, or None if none was written."""
    check_task_id(task_id)
    raw = await hub.store.get_meta(CHECKPOINT_META_PREFIX + task_id)
    if raw is None:
        return None
    return json.loads(raw)


async def checkpoint_writers(hub: CheckpointHost, task_id: str) -> list[str] | None:
    """The agents recorded as writers of ``task_id``'s checkpoint by its first wire write, or None."""
    raw = await hub.store.get_meta(WRITERS_META_PREFIX + task_id)
    return None if raw is None else list(json.loads(raw))


async def authorize_checkpoint(
    hub: CheckpointHost, task_id: Any, *, bound: Collection[str], operator: bool, write: bool
) -> None:
    """Refuse a wire ``checkpoint_task`` (``write``) or ``read_task_checkpoint`` the rules above forbid.

    A first write of an unobserved task's checkpoint records ``bound`` as its writers.
    """
    check_task_id(task_id)
    bound = set(bound)
    reader_ok = operator and not write
    if not bound and not reader_ok:
        raise AccessDeniedError(
            "task checkpoints are read and written by a bound agent; register or attach an agent on this "
            "connection first"
        )
    task = hub.tasks.get(task_id)
    lock = _CLAIM_LOCKS.get(hub)
    if lock is None:
        lock = _CLAIM_LOCKS[hub] = asyncio.Lock()
    async with lock:
        writers = await checkpoint_writers(hub, task_id)
        if reader_ok:
            return
        if task is not None and task.owner_id not in bound:
            raise AccessDeniedError(
                f"the checkpoint of task '{task_id}' belongs to its owner; connect as the task's owner "
                "to read or write it"
            )
        if writers is None:
            if write and task is None:
                await hub.store.set_meta(WRITERS_META_PREFIX + task_id, json.dumps(sorted(bound)))
            return
    if not bound & set(writers):
        raise AccessDeniedError(
            f"connection holds no writer of task '{task_id}''s checkpoint; "
            "connect as one of the agents that first wrote it"
        )


__all__ = [
    "CHECKPOINT_META_PREFIX",
    "WRITERS_META_PREFIX",
    "CheckpointHost",
    "authorize_checkpoint",
    "checkpoint_writers",
    "encode_checkpoint",
    "read_checkpoint",
    "write_checkpoint",
]

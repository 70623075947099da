"""Edge: task checkpoints kept by the hub: one JSON object per task id, the last write wins (ag2 1.2.1 semantics).

A checkpoint is an owner's opaque resume snapshot (``HubBackedCheckpointStore`` writes and reads it).
The hub keeps only the latest one per task, no history, so it lives in the store's ``meta`` table under
``task_checkpoint/<task_id>``: durable in SQLite, with no schema step.

The writers of a checkpoint (``task_checkpoint_writers/<task_id>``) are kept here too; who may touch a
checkpoint over the wire is the server's rule (``ag2net.server.policy.authorize_checkpoint``).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Protocol

from ag2net.errors import ProtocolError
from ag2net.tasks import check_task_id

if TYPE_CHECKING:
    from ag2net.hub.core import TaskBook
    from ag2net.store import Store

CHECKPOINT_META_PREFIX = "task_checkpoint/"
WRITERS_META_PREFIX = "task_checkpoint_writers/"


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


async def record_checkpoint_writers(hub: CheckpointHost, task_id: str, writers: Collection[str]) -> None:
    """Record ``writers`` as the agents that first wrote ``task_id``'s checkpoint (``checkpoint_writers``)."""
    await hub.store.set_meta(WRITERS_META_PREFIX + task_id, json.dumps(sorted(writers)))


__all__ = [
    "CHECKPOINT_META_PREFIX",
    "WRITERS_META_PREFIX",
    "CheckpointHost",
    "checkpoint_writers",
    "encode_checkpoint",
    "read_checkpoint",
    "record_checkpoint_writers",
    "write_checkpoint",
]

"""``HubBackedCheckpointStore`` and ``TaskMirror``: an agent's tasks seen and kept by the hub (ag2 1.2.1 names).

* ``HubBackedCheckpointStore(hub)`` is a checkpoint store (``write(task_id, state)`` / ``read(task_id)``)
  over a ``Hub`` in this process or a ``HubClient`` (in-process or over the wire): the hub keeps the
  latest checkpoint of each task durably, so a restarted owner can resume from it.
* ``TaskMirror(hub_client=..., owner_id=...)`` forwards an agent's task lifecycle to the hub and never
  lets a forwarding failure reach the agent: failures are logged and reported to the hub's listeners as
  a ``mirror_failed`` task event. In ag2 it subscribes to the agent's event stream; ag2net's agents
  report tasks to a *task sink* instead, so the mirror is one: ``mirror.attach(agent)`` makes it the
  agent's ``task_sink`` (``agent.task(...)`` then reports through it) and ``mirror.detach(agent, ids)``
  puts the previous sink back. It can also be passed directly: ``agent.task("title", sink=mirror)``.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any, Unpack

from ag2net.agent.task import TaskChanges
from ag2net.errors import NotFoundError
from ag2net.ids import utc_now
from ag2net.protocol.ports import HubPort
from ag2net.tasks import TERMINAL_TASK_STATES, TaskMetadata, TaskState

if TYPE_CHECKING:
    from ag2net.client.hub_client import HubClient

log = logging.getLogger(__name__)


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _is_hub(obj: Any) -> bool:
    """A hub in this process (it answers ops itself), as opposed to a ``HubClient``."""
    return isinstance(obj, HubPort)


class HubBackedCheckpointStore:
    """Task checkpoints kept by a hub: pass a ``Hub`` (this process) or a ``HubClient`` (any link).

    ``write`` stores a copy of ``state`` (the last write wins); ``read`` returns it, or None when the
    task has no checkpoint. Both go through the hub's ``checkpoint_task`` / ``read_task_checkpoint``.
    """

    def __init__(self, hub: HubPort | HubClient) -> None:
        self._hub: Any = hub

    async def write(self, task_id: str, state: dict[str, Any]) -> None:
        payload = dict(state)
        if _is_hub(self._hub) and not hasattr(self._hub, "checkpoint_task"):
            # A hub in this process: through its op door, as the hub itself (no endpoint).
            await self._hub.handle_op(None, "checkpoint_task", {"task_id": task_id, "state": payload})
            return
        await self._hub.checkpoint_task(task_id, payload)

    async def read(self, task_id: str) -> dict[str, Any] | None:
        if _is_hub(self._hub) and not hasattr(self._hub, "read_task_checkpoint"):
            return await self._hub.handle_op(None, "read_task_checkpoint", {"task_id": task_id})
        return await self._hub.read_task_checkpoint(task_id)


class TaskMirror:
    """Forwards one agent's task lifecycle to the hub; forwarding failures never reach the agent.

    Give it the agent's ``HubClient`` (``hub_client=``) or, in-process, the ``Hub`` (``hub=``), the
    owner's agent id and optionally the channel the tasks belong to. As a task sink it stamps
    ``owner_id`` (and ``channel_id`` when the task has none) on what it forwards; when a task whose
    spec names a ``capability`` ends, the outcome is recorded on the owner's resume.
    """

    def __init__(
        self,
        *,
        hub_client: HubClient | None = None,
        hub: HubPort | None = None,
        owner_id: str,
        channel_id: str | None = None,
    ) -> None:
        if hub_client is None and hub is None:
            raise TypeError(
                "TaskMirror needs hub_client= (the agent's HubClient) or hub= (an in-process Hub)"
            )
        #: Where the lifecycle is forwarded: the ``HubClient`` when one is given, else the in-process hub.
        self._target: Any = hub_client if hub_client is not None else hub
        self._owner_id = owner_id
        self._channel_id = channel_id

    @property
    def agent_id(self) -> str:
        """The owner's id (``agent.task(...)`` takes a sink's ``agent_id`` as the task's owner)."""
        return self._owner_id

    # ------------------------------------------------------------------ attach to an agent

    def attach(self, stream: Any) -> list[object]:
        """Make this mirror the task sink of ``stream`` (an ag2net ``Agent``); returns what ``detach`` needs."""
        if not hasattr(stream, "task_sink"):
            raise TypeError(
                f"TaskMirror.attach needs an ag2net Agent (an object with a task_sink), got "
                f"{type(stream).__name__}; or pass the mirror as agent.task(..., sink=mirror)"
            )
        previous = stream.task_sink
        stream.task_sink = self
        return [previous]

    def detach(self, stream: Any, sub_ids: list[object]) -> None:
        """Undo ``attach``: the agent's previous task sink comes back (if the mirror is still its sink)."""
        if getattr(stream, "task_sink", None) is self:
            stream.task_sink = sub_ids[0] if sub_ids else None

    # ------------------------------------------------------------------ the task sink

    async def observe_task(self, metadata: TaskMetadata) -> TaskMetadata:
        metadata.owner_id = self._owner_id
        if metadata.channel_id is None:
            metadata.channel_id = self._channel_id
        try:
            await self._target.observe_task(metadata)
        except Exception as exc:
            await self._escalate(metadata.task_id, "started", exc)
        return metadata

    async def update_task(self, task_id: str, **changes: Unpack[TaskChanges]) -> None:
        state = changes.get("state")
        op = state.value if state is not None else "progress"
        try:
            await self._target.update_task(
                task_id,
                state=state,
                progress=changes.get("progress"),
                result=changes.get("result"),
                error=changes.get("error"),
            )
        except NotFoundError:
            pass  # the hub never saw the task start (its observe failed and was reported then)
        except Exception as exc:
            await self._escalate(task_id, op, exc)
        if state is not None and TaskState(state) in TERMINAL_TASK_STATES:
            await self._record_outcome(task_id, TaskState(state))

    async def _escalate(self, task_id: str, op: str, exc: BaseException) -> None:
        log.error("task mirror failed: op=%s task_id=%s exc=%r", op, task_id, exc)
        payload = {
            "op": op,
            "owner_id": self._owner_id,
            "channel_id": self._channel_id,
            "exc_type": type(exc).__name__,
            "exc_message": str(exc),
        }
        with contextlib.suppress(Exception):
            await self._target.fire_task_event(task_id, "mirror_failed", payload)

    async def _record_outcome(self, task_id: str, outcome: TaskState) -> None:
        """A terminal task whose spec names a capability counts in the owner's observed record."""
        try:
            task = await _maybe_await(self._target.get_task(task_id))
        except Exception:
            return
        if task is None or task.spec.capability is None:
            return
        latency_ms = None
        if task.started_at:
            with contextlib.suppress(ValueError):
                started = datetime.fromisoformat(task.started_at.replace("Z", "+00:00"))
                now = datetime.fromisoformat(utc_now().replace("Z", "+00:00"))
                latency_ms = int(max(0.0, (now - started).total_seconds()) * 1000)
        with contextlib.suppress(Exception):
            await self._target.record_observation(
                owner_id=task.owner_id,
                capability=task.spec.capability,
                outcome=outcome,
                latency_ms=latency_ms,
                task_id=task_id,
            )


__all__ = ["HubBackedCheckpointStore", "TaskMirror"]

"""``Task``: a unit of work an agent owns, run as ``async with agent.task(...)``, mirrored to the hub.

Inside the block the task is the *active task*: ``agent.ask(...)`` puts it under ``TASK_DEP`` so tools
with a ``TaskInject`` parameter (the ``tasks`` tool's progress/complete) receive it.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from typing import Any, Protocol, TypedDict, Unpack, runtime_checkable

from ag2net.ids import add_seconds, utc_now
from ag2net.tasks import TERMINAL_TASK_STATES, TaskMetadata, TaskSpec, TaskState

log = logging.getLogger(__name__)

CancelCallback = Callable[[str, str], Awaitable[Any]]
"""``(task_id, reason)``: called when a task is cancelled, e.g. to post ``EV_TASK_CANCELLED``."""


class TaskChanges(TypedDict, total=False):
    """What ``TaskSink.update_task`` may change; a key left out (or None) is left as it is."""

    state: TaskState | None
    progress: dict[str, Any] | None
    result: Any
    error: str | None


@runtime_checkable
class TaskSink(Protocol):
    """Where a task's state is mirrored (the agent's network client, or the hub itself).

    A sink may also define ``async post_task_cancelled(task_id, reason)`` (the network client posts
    ``EV_TASK_CANCELLED`` there); it is the cancel callback when ``Task`` gets no ``on_cancelled``.
    ``observe_task`` may fill in the metadata's ``owner_id`` and ``channel_id``; the task adopts them.
    """

    async def observe_task(self, metadata: TaskMetadata) -> Any: ...

    async def update_task(self, task_id: str, **changes: Unpack[TaskChanges]) -> Any: ...


class TaskOwner(Protocol):
    """What a task reads of the agent that owns it (an ``Agent``): its name."""

    @property
    def name(self) -> str: ...


# Innermost last; a tuple so each asyncio task sees its own stack without copying on read.
_ACTIVE: ContextVar[tuple[Task, ...]] = ContextVar("ag2net_active_tasks", default=())


def current_task() -> Task | None:
    """The innermost task whose ``async with`` block is running in this context, if any."""
    stack = _ACTIVE.get()
    return stack[-1] if stack else None


def active_task(agent: TaskOwner) -> Task | None:
    """The innermost running task owned by ``agent`` in this context, if any."""
    for task in reversed(_ACTIVE.get()):
        if task.agent is agent:
            return task
    return None


class TaskOptions(TypedDict, total=False):
    """The keyword options of ``Task`` (and ``Agent.task``); each may be left out (defaults in ``Task``)."""

    description: str
    payload: dict[str, Any] | None
    capability: str | None
    ttl_seconds: float | None
    sink: TaskSink | None
    on_cancelled: CancelCallback | None
    channel_id: str | None
    owner_id: str | None


class Task:
    """A unit of work with a lifecycle: created → running → completed | failed | cancelled.

    ``async with`` starts it (RUNNING, mirrored with ``sink.observe_task``); a clean exit completes
    it unless it already ended; an exception fails it (``error`` = the exception text) and is
    re-raised; ``asyncio`` cancellation cancels it. ``progress``, ``complete``, ``fail`` and
    ``cancel`` mirror with ``sink.update_task``. Sink errors propagate, except while the block is
    already raising (then they are logged and the original exception wins).

    ``owner_id`` defaults to the sink's ``agent_id`` when it has one, else the agent's name.
    ``progress(payload)`` merges a dict payload; any other payload is stored as ``{"value": payload}``.
    """

    def __init__(self, agent: TaskOwner, title: str, **options: Unpack[TaskOptions]) -> None:
        if unknown := options.keys() - TaskOptions.__optional_keys__:
            raise TypeError(f"Task() got unexpected keyword arguments: {', '.join(sorted(unknown))}")
        ttl_seconds = options.get("ttl_seconds")
        sink = options.get("sink")
        if not isinstance(title, str) or not title.strip():
            raise ValueError("a task needs a non-empty title, e.g. agent.task('summarise the thread')")
        if ttl_seconds is not None and ttl_seconds <= 0:
            raise ValueError(f"ttl_seconds must be positive, got {ttl_seconds}")
        self.agent = agent
        self.task_id = uuid.uuid4().hex
        self.spec = TaskSpec(
            title=title,
            description=options.get("description", ""),
            payload=dict(options.get("payload") or {}),
            capability=options.get("capability"),
        )
        self.owner_id = options.get("owner_id") or _sink_agent_id(sink) or agent.name
        self.channel_id = options.get("channel_id")
        self.ttl_seconds = ttl_seconds
        self.sink = sink
        on_cancelled = options.get("on_cancelled")
        if on_cancelled is None:
            on_cancelled = getattr(sink, "post_task_cancelled", None)
        self.on_cancelled = on_cancelled
        self.state = TaskState.CREATED
        self.created_at = utc_now()
        self.started_at: str | None = None
        self.completed_at: str | None = None
        self.expires_at: str | None = None
        self.last_progress_at: str | None = None
        self.progress_data: dict[str, Any] = {}
        self.result: Any = None
        self.error = ""
        self._token: Token[tuple[Task, ...]] | None = None

    def __repr__(self) -> str:
        return f"Task(task_id={self.task_id!r}, title={self.spec.title!r}, state={self.state.value!r})"

    @property
    def title(self) -> str:
        return self.spec.title

    def is_terminal(self) -> bool:
        return self.state in TERMINAL_TASK_STATES

    @property
    def metadata(self) -> TaskMetadata:
        """The record the hub keeps for this task, as of now."""
        return TaskMetadata(
            task_id=self.task_id,
            owner_id=self.owner_id,
            spec=self.spec,
            state=self.state,
            created_at=self.created_at,
            started_at=self.started_at,
            completed_at=self.completed_at,
            expires_at=self.expires_at,
            last_progress_at=self.last_progress_at,
            progress=dict(self.progress_data),
            result=self.result,
            error=self.error,
            channel_id=self.channel_id,
        )

    async def start(self) -> None:
        """Mark the task running and tell the sink (``async with`` does this for you)."""
        if self.state is not TaskState.CREATED:
            raise RuntimeError(f"task {self.task_id!r} was already started (state={self.state.value})")
        self.state = TaskState.RUNNING
        self.started_at = utc_now()
        if self.ttl_seconds is not None:
            self.expires_at = add_seconds(self.started_at, self.ttl_seconds)
        if self.sink is not None:
            metadata = self.metadata
            try:
                await self.sink.observe_task(metadata)
            except BaseException:
                # the hub refused (e.g. max_concurrent_tasks): the task never started
                self.state, self.started_at, self.expires_at = TaskState.CREATED, None, None
                raise
            self.owner_id = metadata.owner_id or self.owner_id
            self.channel_id = metadata.channel_id or self.channel_id

    def _require_running(self, action: str) -> None:
        if self.state is TaskState.CREATED:
            raise RuntimeError(
                f"task {self.task_id!r} has not started; {action} it inside 'async with agent.task(...)'"
            )
        if self.state is not TaskState.RUNNING:
            raise RuntimeError(
                f"task {self.task_id!r} is already {self.state.value}; {action} is only allowed while it runs"
            )

    async def progress(self, payload: Any) -> None:
        """Report progress; a dict is merged into ``progress_data``, anything else stored as ``value``."""
        self._require_running("report progress on")
        update = dict(payload) if isinstance(payload, dict) else {"value": payload}
        self.progress_data.update(update)
        self.last_progress_at = utc_now()
        if self.sink is not None:
            await self.sink.update_task(self.task_id, progress=update)

    async def complete(self, result: Any = None) -> None:
        """End the task successfully with ``result``."""
        self._require_running("complete")
        self._end(TaskState.COMPLETED)
        self.result = result
        if self.sink is not None:
            await self.sink.update_task(self.task_id, state=TaskState.COMPLETED, result=result)

    async def fail(self, error: Any) -> None:
        """End the task as failed; ``error`` is stored as text."""
        self._require_running("fail")
        self._end(TaskState.FAILED)
        self.error = str(error)
        if self.sink is not None:
            await self.sink.update_task(self.task_id, state=TaskState.FAILED, error=self.error)

    async def cancel(self, reason: str = "") -> None:
        """End the task as cancelled (e.g. honouring a peer's cancel request) and run the cancel callback."""
        self._require_running("cancel")
        self._end(TaskState.CANCELLED)
        self.error = reason
        if self.sink is not None:
            await self.sink.update_task(self.task_id, state=TaskState.CANCELLED, error=reason)
        if self.on_cancelled is not None:
            await self.on_cancelled(self.task_id, reason)

    def _end(self, state: TaskState) -> None:
        self.state = state
        self.completed_at = utc_now()

    async def __aenter__(self) -> Task:
        await self.start()
        self._token = _ACTIVE.set((*_ACTIVE.get(), self))
        return self

    async def __aexit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        self._pop()
        if self.is_terminal():
            return
        if exc is None:
            await self.complete()
            return
        try:
            if isinstance(exc, asyncio.CancelledError):
                await self.cancel("cancelled")
            else:
                await self.fail(str(exc) or type(exc).__name__)
        except Exception:
            log.exception(
                "could not record the end of task %s; the block's own error is re-raised", self.task_id
            )

    def _pop(self) -> None:
        token, self._token = self._token, None
        try:
            if token is not None:
                _ACTIVE.reset(token)
                return
        except ValueError:
            pass  # exited in another context than it was entered in; drop just this task
        _ACTIVE.set(tuple(t for t in _ACTIVE.get() if t is not self))


def _sink_agent_id(sink: Any) -> str | None:
    try:
        value = getattr(sink, "agent_id", None)
    except Exception:  # e.g. a client whose passport is not stamped yet
        return None
    return value if isinstance(value, str) and value else None


__all__ = ["CancelCallback", "Task", "TaskChanges", "TaskOptions", "TaskSink", "active_task", "current_task"]

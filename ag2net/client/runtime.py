"""ag2's client-side runtime names: ``NetworkClient`` (what the hub client delivers to) and ``ClientTask`` (a
handle on one task the hub observes)."""

from __future__ import annotations

import inspect
from typing import Protocol, runtime_checkable

from ag2net.client.channel import MetadataHandle
from ag2net.client.port import NetworkClientPort, ParticipantIdentity, TaskLookup
from ag2net.envelope import Envelope
from ag2net.identity import Resume
from ag2net.tasks import TaskMetadata, TaskState


@runtime_checkable
class NetworkClient(ParticipantIdentity, Protocol):
    """A participant a ``HubClient`` delivers envelopes to: ``AgentClient`` and ``HumanClient`` are both one."""

    @property
    def resume(self) -> Resume: ...

    async def receive(self, envelope: Envelope) -> None: ...

    async def disconnect(self) -> None: ...


class ClientTask(MetadataHandle[TaskMetadata, NetworkClientPort | TaskLookup]):
    """A client's handle on a task: the metadata it was made with, refreshed from the hub by ``info()``.

    ``client`` is an ``AgentClient``/``HumanClient`` (its ``hub_client`` is asked) or a ``HubClient``.
    """

    def __init__(self, *, metadata: TaskMetadata, client: NetworkClientPort | TaskLookup) -> None:
        if not isinstance(metadata, TaskMetadata):
            raise TypeError(
                f"ClientTask metadata must be a TaskMetadata, got {type(metadata).__name__}; "
                "use TaskMetadata.from_dict(...) for a dict"
            )
        super().__init__(metadata=metadata, client=client)

    @property
    def task_id(self) -> str:
        return self._metadata.task_id

    @property
    def owner_id(self) -> str:
        return self._metadata.owner_id

    @property
    def state(self) -> TaskState:
        return self._metadata.state

    async def info(self) -> TaskMetadata:
        """Fetch the task from the hub, keep it as ``metadata`` and return it (``NotFoundError`` if unknown)."""
        hub_client = getattr(self._client, "hub_client", None) or self._client
        get_task = getattr(hub_client, "get_task", None)
        if get_task is None:
            raise TypeError(
                f"ClientTask client must be an AgentClient, HumanClient or HubClient, got {type(self._client).__name__}"
            )
        result = get_task(self.task_id)
        if inspect.isawaitable(result):
            result = await result
        self._metadata = result
        return result

    def __repr__(self) -> str:
        state = getattr(self.state, "value", self.state)
        return f"ClientTask(task_id={self.task_id!r}, owner_id={self.owner_id!r}, state={state!r})"


__all__ = ["ClientTask", "NetworkClient"]

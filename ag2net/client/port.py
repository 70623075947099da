"""``NetworkClientPort``: what the plugin tools, the identity prefix and the ``Channel``/``ClientTask`` handles
use of a participant client (``AgentClient``, ``HumanClient``), and ``HubClientPort``: what they use of its
``HubClient``. Exactly those members, so a test double or another client only needs these.

A few members are optional and read with ``getattr`` where they are used, so they are not listed: ``name``
(the identity prefix falls back to ``passport.name``), and ``AgentClient``'s ``suppress_handler``,
``unsuppress_handler`` and ``current_handling_depth`` (``delegate`` uses them when present).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.identity import Passport, Resume
from ag2net.protocol.ops import DEFAULT_KNOWLEDGE_LIMIT, DEFAULT_LIMIT
from ag2net.tasks import TaskMetadata


class ChannelHandle(Protocol):
    """What the tools use of the ``Channel`` a client's ``open`` returns (``ag2net.client.channel.Channel``)."""

    @property
    def channel_id(self) -> str: ...

    @property
    def metadata(self) -> ChannelMetadata: ...

    async def send(
        self,
        content: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
        event_type: str = ...,
        event_data: dict[str, Any] | None = None,
        depth: int | None = None,
        priority: str = "normal",
    ) -> str: ...


class TaskLookup(Protocol):
    """Anything ``ClientTask.info()`` can ask for a task (a ``HubClient``; ag2's may answer synchronously)."""

    def get_task(self, task_id: str) -> Awaitable[TaskMetadata] | TaskMetadata: ...


@runtime_checkable
class HubClientPort(Protocol):
    """The ``HubClient`` members the plugin tools and the channel handle call."""

    async def get_agent(self, name_or_id: str) -> Passport: ...

    async def list_agents(
        self, *, capability: str | None = None, query: str | None = None, limit: int | None = DEFAULT_LIMIT
    ) -> list[Passport]: ...

    async def get_resume(self, agent_id: str) -> Resume: ...

    async def get_skill(self, agent_id: str) -> str | None: ...

    async def get_channel(self, channel_id: str) -> ChannelMetadata: ...

    async def list_channels(
        self,
        *,
        agent_id: str | None = None,
        include_terminal: bool = False,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[ChannelMetadata]: ...

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata: ...

    async def read_wal(self, channel_id: str) -> list[Envelope]: ...

    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any: ...

    async def get_task(self, task_id: str) -> TaskMetadata: ...

    async def list_tasks(
        self, *, agent_id: str | None = None, limit: int = DEFAULT_LIMIT
    ) -> list[TaskMetadata]: ...

    async def search_knowledge(
        self, agent_id: str, query: str, limit: int = DEFAULT_KNOWLEDGE_LIMIT
    ) -> list[dict[str, Any]]: ...

    def name_for(self, agent_id: str) -> str: ...


class ParticipantIdentity(Protocol):
    """Who a participant client is: its id and passport. Both ports of a participant start from it
    (``NetworkClientPort`` here, ``ag2net.client.runtime.NetworkClient`` for the hub client's deliveries)."""

    @property
    def agent_id(self) -> str: ...

    @property
    def passport(self) -> Passport: ...


@runtime_checkable
class NetworkClientPort(ParticipantIdentity, Protocol):
    """The participant-client members the plugin tools, ``identity_prefix``, ``NetworkContextPolicy``,
    ``Channel`` and ``ClientTask`` use."""

    @property
    def hub_client(self) -> HubClientPort: ...

    async def send_envelope(self, envelope: Envelope) -> str: ...

    async def open(
        self,
        *,
        type: str,
        target: str | list[str],
        ttl: Any = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
    ) -> ChannelHandle: ...

    def ensure_channel_inbox(self, channel_id: str) -> asyncio.Queue[Envelope | None]: ...

    def discard_channel_inbox(self, channel_id: str) -> None: ...

    async def wait_for_channel_event(
        self, *, channel_id: str, predicate: Callable[[Envelope], bool], timeout: float = 300.0
    ) -> Envelope: ...


# pyright checks that the real clients satisfy the ports in tests/test_client_port.py (importing them here
# would close an import circle: agent_client -> base -> channel -> port -> agent_client).


__all__ = ["ChannelHandle", "HubClientPort", "NetworkClientPort", "ParticipantIdentity", "TaskLookup"]

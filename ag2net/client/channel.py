"""``Channel``: a handle on one channel for the agent or human that opened or joined it."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import EV_TEXT, Envelope


class _ChannelHub(Protocol):
    async def get_channel(self, channel_id: str) -> ChannelMetadata: ...

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata: ...


class ChannelHolder(Protocol):
    """What a ``Channel`` uses of the participant holding it (every ``NetworkClientPort`` is one): its id,
    posting, and its ``HubClient`` for the channel's metadata. ``port.py`` names ``Channel`` as what
    ``open`` returns, so this module does not import the port back."""

    @property
    def agent_id(self) -> str: ...

    @property
    def hub_client(self) -> _ChannelHub: ...

    async def send_envelope(self, envelope: Envelope) -> str: ...


M = TypeVar("M")
C = TypeVar("C")


class MetadataHandle(Generic[M, C]):
    """A participant's handle on one record the hub keeps (a channel's or a task's metadata): the record as
    last seen, read-only as ``metadata`` (the handle's own methods refresh it), and the client that asks
    the hub. ``Channel`` and ``ClientTask`` are the two."""

    def __init__(self, *, metadata: M, client: C) -> None:
        self._metadata = metadata
        self._client = client

    @property
    def metadata(self) -> M:
        """The record as last seen (construction or the last refresh)."""
        return self._metadata


class Channel(MetadataHandle[ChannelMetadata, ChannelHolder]):
    """A participant's handle on a channel: send into it, refresh its metadata, close it."""

    @property
    def channel_id(self) -> str:
        return self._metadata.channel_id

    @property
    def state(self) -> ChannelState:
        return self._metadata.state

    def is_terminal(self) -> bool:
        return self._metadata.is_terminal()

    async def send(
        self,
        content: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
        event_type: str = EV_TEXT,
        event_data: dict[str, Any] | None = None,
        depth: int | None = None,
        priority: str = "normal",
    ) -> str:
        """Post into the channel; ``event_data`` defaults to ``{"text": content}``."""
        env = Envelope(
            channel_id=self.channel_id,
            sender_id=self._client.agent_id,
            audience=audience,
            event_type=event_type,
            event_data=event_data if event_data is not None else {"text": content},
            causation_id=causation_id,
            depth=depth or 0,
            priority=priority,  # type: ignore[arg-type]
        )
        return await self._client.send_envelope(env)

    async def info(self) -> ChannelMetadata:
        self._metadata = await self._client.hub_client.get_channel(self.channel_id)
        return self._metadata

    async def close(self, reason: str = "") -> ChannelMetadata:
        self._metadata = await self._client.hub_client.close_channel(self.channel_id, reason=reason)
        return self._metadata

    def __repr__(self) -> str:
        return f"Channel({self._metadata.manifest.type}, {self.channel_id}, {self._metadata.state.value})"


__all__ = ["Channel", "MetadataHandle"]

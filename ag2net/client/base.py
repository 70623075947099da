"""What ``AgentClient`` and ``HumanClient`` share: identity, opening channels, per-channel inboxes."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ag2net.client.channel import Channel
from ag2net.envelope import Envelope
from ag2net.identity import Passport, Resume, Rule

if TYPE_CHECKING:
    from ag2net.client.hub_client import HubClient


class ParticipantClient:
    """Base of the two participant kinds bound to one ``HubClient``."""

    kind_label = "client"

    def __init__(self, *, passport: Passport, resume: Resume, rule: Rule, hub_client: HubClient) -> None:
        self._passport = passport
        self._resume = resume
        self._rule = rule
        self._hub_client = hub_client
        self._disconnected = False
        self._inboxes: dict[str, asyncio.Queue[Envelope | None]] = {}

    @property
    def passport(self) -> Passport:
        return self._passport

    @property
    def resume(self) -> Resume:
        return self._resume

    @property
    def rule(self) -> Rule:
        return self._rule

    @property
    def hub_client(self) -> HubClient:
        return self._hub_client

    @property
    def _hub(self) -> HubClient:
        """The seed's handler examples pass ``hub=client._hub``: the ``HubClient``."""
        return self._hub_client

    @property
    def hub(self) -> HubClient:
        return self._hub_client

    @property
    def agent_id(self) -> str:
        agent_id = self._passport.agent_id
        if not agent_id:
            raise RuntimeError(f"{self.kind_label} passport has no agent_id yet; register it first")
        return agent_id

    @property
    def name(self) -> str:
        return self._passport.name

    @property
    def disconnected(self) -> bool:
        return self._disconnected

    def _check_connected(self) -> None:
        if self._disconnected:
            raise RuntimeError(f"{self.kind_label} is disconnected")

    async def send_envelope(self, envelope: Envelope) -> str:
        """Post a raw envelope (any event type); an empty ``sender_id`` is filled with this identity."""
        self._check_connected()
        if not envelope.sender_id:
            envelope.sender_id = self.agent_id
        return await self._hub_client.post_envelope(envelope)

    async def _resolve_ids(self, targets: str | list[str]) -> list[str]:
        names = [targets] if isinstance(targets, str) else list(targets)
        ids = []
        for target in names:
            ids.append((await self._hub_client.get_agent(target)).agent_id)
        return ids

    async def resolve_audience(self, audience: list[str] | None) -> list[str] | None:
        """Names or ids → ids (``None`` stays broadcast)."""
        if audience is None:
            return None
        return await self._resolve_ids(audience)

    async def open(
        self,
        *,
        type: str,
        target: str | list[str],
        ttl: Any = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> Channel:
        """Open a channel of ``type`` with ``target`` (names or ids); waits until every invitee acked."""
        self._check_connected()
        ids = await self._resolve_ids(target)
        md = await self._hub_client.create_channel(
            creator_id=self.agent_id,
            manifest_type=type,
            participants=ids,
            ttl=ttl,
            knobs=knobs,
            intent=intent,
            labels=labels,
        )
        return Channel(metadata=md, client=self)

    def ensure_channel_inbox(self, channel_id: str) -> asyncio.Queue[Envelope | None]:
        queue = self._inboxes.get(channel_id)
        if queue is None:
            queue = self._inboxes[channel_id] = asyncio.Queue()
        return queue

    def discard_channel_inbox(self, channel_id: str) -> None:
        self._inboxes.pop(channel_id, None)

    def _to_inbox(self, envelope: Envelope) -> None:
        queue = self._inboxes.get(envelope.channel_id)
        if queue is not None:
            queue.put_nowait(envelope)

    async def wait_for_channel_event(
        self, *, channel_id: str, predicate: Callable[[Envelope], bool], timeout: float = 300.0
    ) -> Envelope:
        """The next envelope of ``channel_id`` matching ``predicate`` (others are consumed)."""
        queue = self.ensure_channel_inbox(channel_id)

        async def wait() -> Envelope:
            while True:
                env = await queue.get()
                if env is None:
                    queue.put_nowait(None)
                    raise RuntimeError(f"{self.kind_label} is disconnected")
                if predicate(env):
                    return env

        return await asyncio.wait_for(wait(), timeout)

    async def close_channel(self, channel_id: str, reason: str = "") -> Any:
        return await self._hub_client.close_channel(channel_id, reason=reason)

    async def set_resume(self, resume: Resume) -> Resume:
        self._resume = await self._hub_client.set_resume(self.agent_id, resume)
        return self._resume

    async def set_skill(self, skill_md: str | None) -> None:
        await self._hub_client.set_skill(self.agent_id, skill_md)

    async def set_rule(self, rule: Rule) -> Rule:
        self._rule = await self._hub_client.set_rule(self.agent_id, rule)
        return self._rule

    async def unregister(self) -> None:
        if self._disconnected:
            return
        self.disconnect()
        with contextlib.suppress(Exception):
            await self._hub_client.unregister_agent(self.agent_id)

    def disconnect(self) -> None:
        """Stop receiving (stays registered on the hub)."""
        if self._disconnected:
            return
        self._disconnected = True
        for queue in self._inboxes.values():
            queue.put_nowait(None)


__all__ = ["ParticipantClient"]

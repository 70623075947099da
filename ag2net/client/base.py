"""What ``AgentClient`` and ``HumanClient`` share: identity, opening channels, per-channel inboxes."""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ag2net.client.channel import Channel
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.identity import Passport, Resume, Rule

if TYPE_CHECKING:
    from ag2net.client.hub_port import ParticipantHub


#: Python 3.13's queues can be shut down (then a put raises): ``ChannelInbox.push`` leaves that to them.
_SHUTDOWN = hasattr(asyncio.Queue(), "_is_shutdown")


class ChannelInbox(asyncio.Queue["Envelope | None"]):
    """One channel's inbox: an unbounded ``asyncio.Queue`` that a delivery joins with ``push``."""

    def push(self, envelope: Envelope, limit: int) -> bool:
        """``put_nowait(envelope)``, dropping the oldest entry first when ``limit`` are queued (as
        ``get_nowait()`` would); returns whether one was dropped.

        It runs once per delivery. While no task awaits ``get()`` there is nobody to wake, so it does what
        the two calls do to the queue without their ten method calls; a waiting getter takes them."""
        state: Any = self  # asyncio.Queue's own fields (what its _put/_get hooks use), not in typeshed
        if state._getters or limit <= 0 or state._maxsize > 0 or (_SHUTDOWN and state._is_shutdown):
            dropped = self.qsize() >= limit
            if dropped:
                self.get_nowait()
            self.put_nowait(envelope)
            return dropped
        items = state._queue
        dropped = len(items) >= limit
        if dropped:
            items.popleft()
        items.append(envelope)
        state._unfinished_tasks += 1
        finished = state._finished
        if finished._value:  # what finished.clear() does, without its call when clear already
            finished.clear()
        return dropped


class ParticipantClient:
    """Base of the two participant kinds bound to one ``HubClient``."""

    kind_label = "client"

    #: Envelopes a channel's inbox keeps for a later ``wait_for_channel_event``; beyond it the oldest go
    #: (counted in ``inbox_dropped``).
    inbox_limit = 1000
    #: Channel inboxes kept; beyond it the least recently used one that nobody is waiting on goes.
    inbox_channels = 1000

    def __init__(self, *, passport: Passport, resume: Resume, rule: Rule, hub_client: ParticipantHub) -> None:
        self._passport = passport
        self._resume = resume
        self._rule = rule
        self._hub_client = hub_client
        self._disconnected = False
        # Every received envelope is queued in its channel's inbox (created on demand, and by open() for
        # the creator), so a waiter that starts late still sees what arrived before it.
        self._inboxes: OrderedDict[str, ChannelInbox] = OrderedDict()
        self._waiting: dict[str, int] = {}
        self._discarded: OrderedDict[str, None] = OrderedDict()
        self.inbox_dropped = 0

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
    def hub_client(self) -> ParticipantHub:
        return self._hub_client

    #: The same ``HubClient`` under ag2's other names (the seed's handler examples pass ``hub=client._hub``).
    hub = _hub = hub_client

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

    async def send(
        self,
        channel_id: str,
        text: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
    ) -> str:
        """Post ``EV_TEXT`` as this participant (an ``AgentClient`` and a ``HumanClient`` alike; ag2 1.2.1's
        ``AgentClient`` has only ``send_envelope`` and ``Channel.send``); ``audience`` may name
        participants by name or id."""
        self._check_connected()
        return await self._hub_client.post_envelope(
            Envelope(
                channel_id=channel_id,
                sender_id=self.agent_id,
                audience=await self.resolve_audience(audience),
                event_type=EV_TEXT,
                event_data={"text": text},
                causation_id=causation_id,
            )
        )

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
        self.ensure_channel_inbox(md.channel_id)
        return Channel(metadata=md, client=self)

    def ensure_channel_inbox(self, channel_id: str) -> asyncio.Queue[Envelope | None]:
        """The channel's inbox queue (created if missing; undoes an earlier ``discard_channel_inbox``)."""
        self._discarded.pop(channel_id, None)
        return self._inbox(channel_id)

    def _inbox(self, channel_id: str) -> ChannelInbox:
        queue = self._inboxes.get(channel_id)
        if queue is not None:
            self._inboxes.move_to_end(channel_id)
            return queue
        queue = self._inboxes[channel_id] = ChannelInbox()
        excess = len(self._inboxes) - self.inbox_channels
        for old in list(self._inboxes)[:-1]:
            if excess <= 0:
                break
            if not self._waiting.get(old):
                del self._inboxes[old]
                excess -= 1
        return queue

    def discard_channel_inbox(self, channel_id: str) -> None:
        """Drop the channel's inbox; envelopes arriving later are not queued until it is ensured again."""
        self._inboxes.pop(channel_id, None)
        self._discarded[channel_id] = None
        self._discarded.move_to_end(channel_id)
        if len(self._discarded) > self.inbox_channels:
            self._discarded.popitem(last=False)

    def _to_inbox(self, envelope: Envelope) -> None:
        channel_id = envelope.channel_id
        if channel_id in self._discarded:
            return
        inboxes = self._inboxes
        queue = inboxes.get(channel_id)
        if queue is None:
            queue = self._inbox(channel_id)
        else:  # _inbox's hit path, inline (one call per delivery)
            inboxes.move_to_end(channel_id)
        limit = self.inbox_limit
        state: Any = queue  # ChannelInbox.push's path with nobody waiting, inline (one call per delivery)
        if state._getters or limit <= 0 or state._maxsize > 0 or (_SHUTDOWN and state._is_shutdown):
            if queue.push(envelope, limit):
                self.inbox_dropped += 1
            return
        items = state._queue
        if len(items) >= limit:
            items.popleft()
            self.inbox_dropped += 1
        items.append(envelope)
        state._unfinished_tasks += 1
        finished = state._finished
        if finished._value:  # what finished.clear() does, without its call when clear already
            finished.clear()

    async def wait_for_channel_event(
        self, *, channel_id: str, predicate: Callable[[Envelope], bool], timeout: float = 300.0
    ) -> Envelope:
        """The next envelope of ``channel_id`` matching ``predicate`` (others are consumed).

        Envelopes that arrived before the call are in the inbox already, so a close or a fast reply
        that came while the caller was busy is found.
        """
        queue = self.ensure_channel_inbox(channel_id)

        async def wait() -> Envelope:
            while True:
                env = await queue.get()
                if env is None:
                    queue.put_nowait(None)
                    raise RuntimeError(f"{self.kind_label} is disconnected")
                if predicate(env):
                    return env

        self._waiting[channel_id] = self._waiting.get(channel_id, 0) + 1
        try:
            return await asyncio.wait_for(wait(), timeout)
        finally:
            left = self._waiting[channel_id] - 1
            if left:
                self._waiting[channel_id] = left
            else:
                del self._waiting[channel_id]

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
        self._disconnect()
        with contextlib.suppress(Exception):
            await self._hub_client.unregister_agent(self.agent_id)

    async def disconnect(self) -> None:
        """Stop receiving (stays registered on the hub); a coroutine, as in ag2."""
        self._disconnect()

    def _disconnect(self) -> None:
        if self._disconnected:
            return
        self._disconnected = True
        for queue in self._inboxes.values():
            queue.put_nowait(None)


__all__ = ["ParticipantClient"]

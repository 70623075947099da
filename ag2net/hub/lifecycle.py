"""Shell: ``Channels`` (``hub.channels``) — channels from invitation to their terminal state.

The channel table (``ag2net.hub.core.ChannelTable``, read as a mapping of ``ChannelMetadata`` by id) with
what changes it: ``create`` checks the request (``ag2net.hub.plans.open_request``), asks the arbiter,
plans the channel (``plan_channel``), stores it and invites; acks activate it (``handshake``); ``close`` and
the TTL sweep end it (``transition``), each step done by the component named.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    Envelope,
)
from ag2net.errors import ProtocolError
from ag2net.hub.audit import AUDIT_KIND_CHANNEL_CLOSED, AUDIT_KIND_CHANNEL_CREATED, AUDIT_KIND_CHANNEL_EXPIRED
from ag2net.hub.core import ChannelTable
from ag2net.hub.locks import ChannelLocks
from ag2net.hub.plans import OpenRequest, open_request, plan_channel, ttl_seconds
from ag2net.hub.records import TERMINAL_TASKS
from ag2net.tasks import TaskState

if TYPE_CHECKING:
    from ag2net.hub.arbiter import Arbitration
    from ag2net.hub.core import IdentityTable
    from ag2net.hub.delivery import Delivery
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.services import Services
    from ag2net.hub.sweeps import Expectations
    from ag2net.hub.task_table import Tasks

log = logging.getLogger(__name__)

#: Admits one envelope the lifecycle makes (an invite, ``opened``): the hub's ``post_envelope``.
Post = Callable[[Envelope], Awaitable[str]]


class Channels(ChannelTable):
    """The hub's channels and their lifecycle (the parts it uses are given at construction)."""

    def __init__(self, services: Services, invite_ack_timeout: float) -> None:
        super().__init__()
        self.services = services
        self.invite_ack_timeout = invite_ack_timeout
        self.locks = ChannelLocks()  # one per channel: whatever reads and changes its state holds it
        self.open_waiters: dict[str, asyncio.Future[ChannelMetadata]] = {}

    def connect(
        self,
        *,
        identities: IdentityTable,
        arbitration: Arbitration,
        delivery: Delivery,
        tasks: Tasks,
        expectations: Expectations,
        logs: ChannelLogs,
        post: Post,
    ) -> None:
        """The components a lifecycle step uses (made after this table, which most of them read)."""
        self.identities, self.arbitration, self.delivery = identities, arbitration, delivery
        self.tasks, self.expectations, self.logs = tasks, expectations, logs
        self.post = post

    # ------------------------------------------------------------------ reads

    def observe(self, channel_id: str, kind: str, metadata: ChannelMetadata, **extra: Any) -> None:
        """A ``channel`` event on the observe stream."""
        self.services.observe_log.append(
            "channel", channel_id=channel_id, payload={"kind": kind, "metadata": metadata.to_dict(), **extra}
        )

    def query(
        self,
        *,
        agent_id: str | None = None,
        state: ChannelState | str | None = None,
        include_terminal: bool = True,
        limit: int | None = 50,
    ) -> list[ChannelMetadata]:
        """Channels in creation order, filtered."""
        wanted = ChannelState(state) if state is not None else None
        out = []
        for md in self.by_id.values():
            if wanted is not None and md.state != wanted:
                continue
            if agent_id is not None and agent_id not in md.participant_ids():
                continue
            if not include_terminal and md.is_terminal():
                continue
            out.append(md)
        return out if limit is None else out[:limit]

    def stats(self) -> dict[str, dict[str, Any]]:
        return {
            cid: {"wal_count": self.wal_counts.get(cid, 0), "last_activity": self.last_activity.get(cid, "")}
            for cid in self.by_id
        }

    def default_view_policy(self, channel_id: str, participant_id: str) -> Any:
        """The view a participant of the channel gets by default: its per-participant override, the
        channel's ``view`` knob, else the adapter's default (``NotFoundError`` for an unknown channel)."""
        from ag2net.views.registry import resolve_view

        metadata = self.metadata(channel_id)
        return resolve_view(metadata, participant_id, self.adapter_required(metadata))

    # ------------------------------------------------------------------ opening

    async def create(
        self,
        *,
        creator_id: str,
        manifest_type: str,
        manifest_version: int = 1,
        participants: list[str],
        required_acks: int | None = None,
        ttl: str | int | float | None = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> ChannelMetadata:
        """Create a channel, invite every other participant and wait for their acks (quorum)."""
        request = open_request(
            self.identities,
            self,
            creator_id=creator_id,
            manifest_type=manifest_type,
            manifest_version=manifest_version,
            participants=participants,
            knobs=knobs,
        )
        # The arbiter (by default the rules: invitees' inbound_from, max_concurrent_channels) may refuse.
        await self.arbitration.authorize_channel_open(request)
        now = self.services.clock()
        md, state = plan_channel(
            request,
            channel_id=self.services.ids.new_id(),
            now=now,
            ttl=ttl_seconds(ttl, request.creator),
            required_acks=required_acks,
            knobs=knobs,
            intent=intent,
            labels=labels,
        )
        await self._install(request, md, state, now)
        if not request.invitees:
            await self._activate(md)
            return md
        await self._invite(md, manifest_type, manifest_version)
        return md

    async def _install(self, request: OpenRequest, md: ChannelMetadata, state: Any, now: str) -> None:
        """Store the planned channel, then hold it in memory with an empty log, and announce it."""
        cid = md.channel_id
        # Stored first: a failed write leaves no channel in memory that the store does not know.
        await self.services.store.put_channel(md.to_dict())
        self.by_id[cid] = md
        self.states[cid] = state
        self.logs.cache.install(cid, self.logs.cache.new_log(cid))
        self.wal_counts[cid] = 0
        self.last_activity[cid] = now
        await self.services.audit.record(
            AUDIT_KIND_CHANNEL_CREATED,
            at=now,
            channel_id=cid,
            manifest_type=md.manifest.type,
            manifest_version=md.manifest.version,
            creator_id=md.creator_id,
            participants=list(request.ids),
        )
        self.observe(cid, "created", md)
        await self.services.listeners.fan_out(
            "on_channel_event", cid, "created", {"metadata": md, "participants": request.ids, "at": now}
        )

    async def _invite(self, md: ChannelMetadata, manifest_type: str, manifest_version: int) -> None:
        """Post an invite to each invitee, then wait for every ack (closing the channel on failure)."""
        cid = md.channel_id
        waiter: asyncio.Future[ChannelMetadata] = asyncio.get_running_loop().create_future()
        self.open_waiters[cid] = waiter
        invite = {
            "channel_id": cid,
            "manifest_type": manifest_type,
            "manifest_version": manifest_version,
            "creator_id": md.creator_id,
            "knobs": md.knobs,
            "labels": md.labels,
        }
        try:
            for pid in list(md.pending_acks):
                await self.post(Envelope(cid, md.creator_id, [pid], EV_CHANNEL_INVITE, dict(invite)))
        except BaseException:
            self.open_waiters.pop(cid, None)
            await self.transition(cid, ChannelState.CLOSED, "invite_failed")
            raise
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.invite_ack_timeout)
        except TimeoutError:
            self.open_waiters.pop(cid, None)
            await self.transition(cid, ChannelState.CLOSED, "invite_timeout")
            raise ProtocolError(f"channel '{cid}' ack timeout") from None
        finally:
            self.open_waiters.pop(cid, None)

    async def _activate(self, md: ChannelMetadata) -> None:
        await self.services.store.put_channel({**md.to_dict(), "state": ChannelState.ACTIVE.value})
        md.state = ChannelState.ACTIVE
        self.observe(md.channel_id, "opened", md)
        await self.services.listeners.fan_out("on_channel_event", md.channel_id, "opened", {"metadata": md})
        await self.post(
            Envelope(
                channel_id=md.channel_id,
                sender_id=md.creator_id,
                audience=md.participant_ids(),
                event_type=EV_CHANNEL_OPENED,
                event_data={"channel_id": md.channel_id},
            )
        )
        waiter = self.open_waiters.get(md.channel_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(md)

    async def handshake(self, md: ChannelMetadata, env: Envelope) -> None:
        """An invitee's ack or reject (admitted, in the channel's lock): activate on the last ack."""
        if md.state != ChannelState.PENDING or env.sender_id not in md.pending_acks:
            return
        if env.event_type == EV_CHANNEL_INVITE_ACK:
            pending = [a for a in md.pending_acks if a != env.sender_id]
            await self.services.store.put_channel({**md.to_dict(), "pending_acks": pending})
            md.pending_acks = pending
            if not md.pending_acks and not md.rejected_by:
                await self._activate(md)
        else:
            md.rejected_by.append(env.sender_id)
            await self.transition(md.channel_id, ChannelState.CLOSED, "invite_rejected")

    # ------------------------------------------------------------------ ending

    async def close(self, channel_id: str, *, reason: str = "") -> ChannelMetadata:
        """Close a channel (no-op on a terminal one). Unknown id → ``NotFoundError`` (SPEC §3.19)."""
        md = self.metadata(channel_id)
        if md.is_terminal():
            return md
        await self.transition(channel_id, ChannelState.CLOSED, reason or "explicit_close")
        return md

    async def expire_due(self) -> int:
        """Expire channels and tasks whose ``expires_at`` has passed; returns how many channels expired."""
        now = self.services.clock()
        count = 0
        for cid, md in list(self.by_id.items()):
            if not md.is_terminal() and md.expires_at and md.expires_at <= now:
                await self.transition(cid, ChannelState.EXPIRED, "ttl_expired")
                count += 1
        for task in list(self.tasks.tasks.values()):
            if not task.is_terminal() and task.expires_at and task.expires_at <= now:
                await self.tasks.update(task.task_id, state=TaskState.EXPIRED, error="ttl_expired")
        return count

    async def transition(self, channel_id: str, new_state: ChannelState, reason: str) -> None:
        """End a live channel (``closed`` or ``expired``), holding its lock."""
        async with self.locks(channel_id):
            await self._transition_locked(channel_id, new_state, reason)
        self.logs.cache.discard(channel_id)  # terminal channels are read from the store

    async def _transition_locked(self, channel_id: str, new_state: ChannelState, reason: str) -> None:
        md = self.by_id[channel_id]
        if md.is_terminal():
            return
        was_pending = md.state == ChannelState.PENDING
        previous = md.state
        # ``closing`` until the close is durable: from now on nothing may start on this channel (a handler
        # checking ``can_send`` stops), while readers never see ``closed`` before the WAL holds the close.
        md.state = ChannelState.CLOSING
        try:
            await self._end(md, new_state, reason, was_pending)
        except BaseException:
            if md.state == ChannelState.CLOSING:
                md.state = previous
            raise

    async def _end(
        self, md: ChannelMetadata, new_state: ChannelState, reason: str, was_pending: bool
    ) -> None:
        channel_id = md.channel_id
        for task in list(self.tasks.tasks.values()):
            if task.channel_id == channel_id and task.state not in TERMINAL_TASKS:
                await self.tasks.update(task.task_id, state=TaskState.EXPIRED, error="channel_closed")
        expired = new_state == ChannelState.EXPIRED
        env = Envelope(
            channel_id=channel_id,
            sender_id=md.creator_id,
            audience=md.participant_ids(),
            event_type=EV_CHANNEL_EXPIRED if expired else EV_CHANNEL_CLOSED,
            event_data={"reason": reason, "channel_id": channel_id},
        )
        self.services.stamp(env)
        now = env.created_at
        # The closing envelope is in the WAL before the channel reads as terminal anywhere (in memory or in
        # the store): whoever sees the state can read the envelope. A crash between the two writes is
        # repaired by ``hydrate`` (a live channel whose WAL ends with its close is closed).
        await self.logs.append(md, env)
        try:
            await self.services.store.put_channel(
                {**md.to_dict(), "state": new_state.value, "close_reason": reason, "closed_at": now}
            )
        except Exception:
            # the WAL already says closed (the source of truth); the next hydrate writes the row
            log.exception("channel %s: closed in the WAL, but its metadata row was not updated", channel_id)
        md.state, md.close_reason, md.closed_at = new_state, reason, now
        self.expectations.forget(channel_id)
        waiter = self.open_waiters.get(channel_id)
        if was_pending and waiter is not None and not waiter.done():
            waiter.set_exception(ProtocolError(f"channel {channel_id!r} closed during handshake: {reason}"))
            waiter.exception()  # mark retrieved: the creator may already have given up
        adapter = self.adapter_of(md)
        state = self.states.get(channel_id)
        if adapter is not None and state is not None:
            self.states[channel_id] = adapter.fold(env, state)  # state stays a fold of the WAL
        self.delivery.dispatch(md, env, await self.arbitration.dispatch_denials(md, env))
        kind = "expired" if expired else "closed"
        self.observe(channel_id, kind, md, reason=reason)
        await self.services.audit.record(
            AUDIT_KIND_CHANNEL_EXPIRED if expired else AUDIT_KIND_CHANNEL_CLOSED,
            at=now,
            channel_id=channel_id,
            reason=reason,
        )
        await self.services.listeners.fan_out(
            "on_channel_event", channel_id, kind, {"reason": reason, "metadata": md, "at": now}
        )


__all__ = ["Channels", "Post"]

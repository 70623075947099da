"""Channel lifecycle on the hub: create with invite/ack quorum, activate, close, expire."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import TYPE_CHECKING, Any

from ag2net.channel import (
    ChannelMetadata,
    ChannelState,
    Participant,
    ParticipantRole,
)
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    Envelope,
)
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.hub.audit import (
    AUDIT_KIND_CHANNEL_CLOSED,
    AUDIT_KIND_CHANNEL_CREATED,
    AUDIT_KIND_CHANNEL_EXPIRED,
)
from ag2net.hub.records import (
    TERMINAL_TASKS,
)
from ag2net.identity import (
    parse_duration,
)
from ag2net.ids import add_seconds
from ag2net.tasks import TaskState

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

log = logging.getLogger(__name__)


class ChannelLifecycle(HubShape):
    """Mixin of ``Hub``: channels from invitation to their terminal state."""

    def _channel(self, channel_id: str) -> ChannelMetadata:
        md = self.channels.get(channel_id)
        if md is None:
            raise NotFoundError(f"channel not found: {channel_id}")
        return md

    def lookup_channel(self, channel_id: str) -> ChannelMetadata:
        """The channel's metadata, synchronously (``NotFoundError`` when unknown)."""
        return self._channel(channel_id)

    def default_view_policy(self, channel_id: str, participant_id: str) -> Any:
        """The view a participant of the channel gets by default: its per-participant override, the
        channel's ``view`` knob, else the adapter's default (``NotFoundError`` for an unknown channel)."""
        from ag2net.views.registry import resolve_view

        metadata = self._channel(channel_id)
        return resolve_view(metadata, participant_id, self.adapter_for_metadata(metadata))

    async def get_channel(self, channel_id: str) -> ChannelMetadata:
        """The channel's metadata (``NotFoundError("channel not found: ...")`` when unknown)."""
        return self._channel(channel_id)

    def query_channels(
        self,
        *,
        agent_id: str | None = None,
        state: ChannelState | str | None = None,
        include_terminal: bool = True,
        limit: int | None = 50,
    ) -> list[ChannelMetadata]:
        """Channels in creation order, filtered (synchronous; ``list_channels`` is the awaitable form)."""
        wanted = ChannelState(state) if state is not None else None
        out = []
        for md in self.channels.values():
            if wanted is not None and md.state != wanted:
                continue
            if agent_id is not None and agent_id not in md.participant_ids():
                continue
            if not include_terminal and md.is_terminal():
                continue
            out.append(md)
        return out if limit is None else out[:limit]

    async def list_channels(
        self,
        *,
        agent_id: str | None = None,
        state: ChannelState | str | None = None,
        limit: int | None = 50,
        include_terminal: bool = True,
    ) -> list[ChannelMetadata]:
        """Channels, filtered by participant and state, as ag2's ``Hub.list_channels`` (terminal ones
        included unless ``include_terminal=False``)."""
        return self.query_channels(
            agent_id=agent_id, state=state, include_terminal=include_terminal, limit=limit
        )

    def channel_stats(self) -> dict[str, dict[str, Any]]:
        return {
            cid: {
                "wal_count": self.channel_table.wal_counts.get(cid, 0),
                "last_activity": self.channel_table.last_activity.get(cid, ""),
            }
            for cid in self.channels
        }

    async def create_channel(
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
        creator = self.agents.get(creator_id)
        if creator is None:
            raise NotFoundError(f"creator not registered: {creator_id}")
        if not participants:
            raise ProtocolError("channel requires at least one participant")
        seen: set[str] = set()
        for pid in participants:
            if pid in seen:
                raise ProtocolError(f"participant listed twice: {pid!r}")
            seen.add(pid)
            if pid != creator_id and pid not in self.agents:
                raise NotFoundError(f"participant not registered: {pid}")
        ids = list(participants) if creator_id in participants else [creator_id, *participants]
        adapter = self.get_adapter(manifest_type, manifest_version)
        if knobs is not None and not isinstance(knobs, dict):
            raise ProtocolError("knobs must be a JSON object (dict) or null")
        invitees = [i for i in ids if i != creator_id]
        active = sum(
            1 for md in self.channels.values() if creator_id in md.participant_ids() and not md.is_terminal()
        )
        # The arbiter (by default the rules: invitees' inbound_from, max_concurrent_channels) may refuse.
        await self._authorize_channel_open(
            adapter.manifest, creator, [self.agents[p] for p in invitees], active
        )
        now = self.clock()
        ttl_value = creator.rule.limits.channel_ttl_default if ttl is None else ttl
        try:
            ttl_seconds = (
                float(ttl_value) if isinstance(ttl_value, (int, float)) else parse_duration(ttl_value)
            )
        except (TypeError, ValueError):
            raise ProtocolError(
                f"ttl {ttl_value!r} is not a duration; use seconds or e.g. '90s', '15m', '2h'"
            ) from None
        two = len(ids) == 2
        md = ChannelMetadata(
            channel_id=self.ids.new_id(),
            manifest=adapter.manifest,
            creator_id=creator_id,
            participants=[
                Participant(
                    agent_id=pid,
                    role=ParticipantRole.INITIATOR
                    if pid == creator_id
                    else (ParticipantRole.RESPONDENT if two else ParticipantRole.PARTICIPANT),
                    order=i,
                    joined_at=now,
                )
                for i, pid in enumerate(ids)
            ],
            state=ChannelState.PENDING,
            created_at=now,
            expires_at=add_seconds(now, ttl_seconds) if ttl_seconds > 0 else None,
            knobs=json.loads(json.dumps(knobs or {})),
            labels={**(labels or {}), **({"intent": intent} if intent else {})},
            required_acks=required_acks,
            pending_acks=list(invitees),
        )
        adapter.validate_create(md)
        state = adapter.initial_state(md)
        from ag2net.views.registry import resolve_view  # validate any view override knobs now

        for pid in ids:
            resolve_view(md, pid, adapter)
        cid = md.channel_id
        # Stored first: a failed write leaves no channel in memory that the store does not know.
        await self.store.put_channel(md.to_dict())
        self.channels[cid] = md
        self.channel_table.states[cid] = state
        self._wal_cache.install(cid, self._wal_cache.new_log(cid))
        self.channel_table.wal_counts[cid] = 0
        self.channel_table.last_activity[cid] = now
        await self._audit(
            AUDIT_KIND_CHANNEL_CREATED,
            at=now,
            channel_id=cid,
            manifest_type=manifest_type,
            manifest_version=manifest_version,
            creator_id=creator_id,
            participants=list(ids),
        )
        self._observe_channel(cid, "created", md)
        await self._fan_out(
            "on_channel_event", cid, "created", {"metadata": md, "participants": ids, "at": now}
        )
        if not invitees:
            await self._activate(md)
            return md
        waiter: asyncio.Future[ChannelMetadata] = asyncio.get_running_loop().create_future()
        self._open_waiters[cid] = waiter
        try:
            for pid in invitees:
                await self.post_envelope(
                    Envelope(
                        channel_id=cid,
                        sender_id=creator_id,
                        audience=[pid],
                        event_type=EV_CHANNEL_INVITE,
                        event_data={
                            "channel_id": cid,
                            "manifest_type": manifest_type,
                            "manifest_version": manifest_version,
                            "creator_id": creator_id,
                            "knobs": md.knobs,
                            "labels": md.labels,
                        },
                    )
                )
        except BaseException:
            self._open_waiters.pop(cid, None)
            await self._transition(cid, ChannelState.CLOSED, "invite_failed")
            raise
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.invite_ack_timeout)
        except TimeoutError:
            self._open_waiters.pop(cid, None)
            await self._transition(cid, ChannelState.CLOSED, "invite_timeout")
            raise ProtocolError(f"channel '{cid}' ack timeout") from None
        finally:
            self._open_waiters.pop(cid, None)
        return md

    async def _activate(self, md: ChannelMetadata) -> None:
        await self.store.put_channel({**md.to_dict(), "state": ChannelState.ACTIVE.value})
        md.state = ChannelState.ACTIVE
        self._observe_channel(md.channel_id, "opened", md)
        await self._fan_out("on_channel_event", md.channel_id, "opened", {"metadata": md})
        await self.post_envelope(
            Envelope(
                channel_id=md.channel_id,
                sender_id=md.creator_id,
                audience=md.participant_ids(),
                event_type=EV_CHANNEL_OPENED,
                event_data={"channel_id": md.channel_id},
            )
        )
        waiter = self._open_waiters.get(md.channel_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(md)

    async def _handshake(self, md: ChannelMetadata, env: Envelope) -> None:
        if md.state != ChannelState.PENDING or env.sender_id not in md.pending_acks:
            return
        if env.event_type == EV_CHANNEL_INVITE_ACK:
            pending = [a for a in md.pending_acks if a != env.sender_id]
            await self.store.put_channel({**md.to_dict(), "pending_acks": pending})
            md.pending_acks = pending
            if not md.pending_acks and not md.rejected_by:
                await self._activate(md)
        else:
            md.rejected_by.append(env.sender_id)
            await self._transition(md.channel_id, ChannelState.CLOSED, "invite_rejected")

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata:
        """Close a channel (no-op on a terminal one). Unknown id → ``NotFoundError`` (SPEC §3.19)."""
        md = self._channel(channel_id)
        if md.is_terminal():
            return md
        await self._transition(channel_id, ChannelState.CLOSED, reason or "explicit_close")
        return md

    async def _transition(self, channel_id: str, new_state: ChannelState, reason: str) -> None:
        async with self._gates(channel_id):
            await self._transition_in_gate(channel_id, new_state, reason)
        self._wal_cache.discard(channel_id)  # terminal channels are read from the store

    async def _transition_in_gate(self, channel_id: str, new_state: ChannelState, reason: str) -> None:
        md = self.channels[channel_id]
        if md.is_terminal():
            return
        was_pending = md.state == ChannelState.PENDING
        previous = md.state
        # ``closing`` until the close is durable: from now on nothing may start on this channel (a handler
        # checking ``can_send`` stops), while readers never see ``closed`` before the WAL holds the close.
        md.state = ChannelState.CLOSING
        try:
            await self._close_in_gate(md, channel_id, new_state, reason, was_pending)
        except BaseException:
            if md.state == ChannelState.CLOSING:
                md.state = previous
            raise

    async def _close_in_gate(
        self, md: ChannelMetadata, channel_id: str, new_state: ChannelState, reason: str, was_pending: bool
    ) -> None:
        for task in list(self._tasks.values()):
            if task.channel_id == channel_id and task.state not in TERMINAL_TASKS:
                await self.update_task(task.task_id, state=TaskState.EXPIRED, error="channel_closed")
        expired = new_state == ChannelState.EXPIRED
        env = Envelope(
            channel_id=channel_id,
            sender_id=md.creator_id,
            audience=md.participant_ids(),
            event_type=EV_CHANNEL_EXPIRED if expired else EV_CHANNEL_CLOSED,
            event_data={"reason": reason, "channel_id": channel_id},
        )
        self._stamp(env)
        now = env.created_at
        # The closing envelope is in the WAL before the channel reads as terminal anywhere (in memory or in
        # the store): whoever sees the state can read the envelope. A crash between the two writes is
        # repaired by ``hydrate`` (a live channel whose WAL ends with its close is closed).
        await self._append(md, env)
        try:
            await self.store.put_channel(
                {**md.to_dict(), "state": new_state.value, "close_reason": reason, "closed_at": now}
            )
        except Exception:
            # the WAL already says closed (the source of truth); the next hydrate writes the row
            log.exception("channel %s: closed in the WAL, but its metadata row was not updated", channel_id)
        md.state = new_state
        md.close_reason = reason
        md.closed_at = now
        self._fired.pop(channel_id, None)
        waiter = self._open_waiters.get(channel_id)
        if was_pending and waiter is not None and not waiter.done():
            waiter.set_exception(ProtocolError(f"channel {channel_id!r} closed during handshake: {reason}"))
            waiter.exception()  # mark retrieved: the creator may already have given up
        adapter = self.channel_table.adapters.get((md.manifest.type, md.manifest.version))
        state = self.channel_table.states.get(channel_id)
        if adapter is not None and state is not None:
            self.channel_table.states[channel_id] = adapter.fold(env, state)  # state stays a fold of the WAL
        if self._arbiter_custom is None:
            self._dispatch(md, env)
        else:
            await self._dispatch_arbitrated(md, env)
        kind = "expired" if expired else "closed"
        self._observe_channel(channel_id, kind, md, reason=reason)
        await self._audit(
            AUDIT_KIND_CHANNEL_EXPIRED if expired else AUDIT_KIND_CHANNEL_CLOSED,
            at=now,
            channel_id=channel_id,
            reason=reason,
        )
        await self._fan_out(
            "on_channel_event", channel_id, kind, {"reason": reason, "metadata": md, "at": now}
        )


__all__ = ["ChannelLifecycle"]

"""Admission: the checks every envelope passes before it is stamped, stored, folded and dispatched."""

from __future__ import annotations

import logging

from ag2net.channel import (
    ChannelMetadata,
    ChannelState,
)
from ag2net.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_TASK_CANCEL_REQUEST,
    Envelope,
    check_shape,
    encode_envelope,
    is_protocol_event,
)
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub import rules
from ag2net.hub.records import (
    TERMINAL,
    TERMINAL_TASKS,
    AgentRecord,
)
from ag2net.views.wal import ENVELOPE_OVERHEAD

log = logging.getLogger(__name__)


class Admission:
    """Mixin of ``Hub``: ``post_envelope`` and ``can_send``."""

    def _stamp(self, env: Envelope) -> None:
        env.envelope_id = self._ids()
        env.created_at = self.clock()

    async def _append(self, md: ChannelMetadata, env: Envelope, text: str | None = None) -> int:
        """Durably append one stamped envelope, then count and cache it; returns its seq.

        The caller holds the channel's gate. Nothing in memory changes until the store has committed,
        so a failed append leaves ``wal_count``, the cache and the adapter state as they were.
        """
        cid = md.channel_id
        if text is None:
            text = env.to_json()
        seq = self._wal_counts.get(cid, 0) + 1
        await self.store.append(cid, env.envelope_id, text)
        self._wal_counts[cid] = seq
        self._last_activity[cid] = env.created_at
        cache = self._wal_cache
        wal = cache.peek(cid)  # an uncached channel is read from the store when next needed
        if wal is not None:
            if len(wal) == seq - 1:
                cache.appended(cid, wal, wal.append(env, len(text)))
            else:
                log.warning("channel %s: cached WAL out of step (%d, seq %d); dropped", cid, len(wal), seq)
                cache.discard(cid)
        self.observe_log.append(
            "envelope", channel_id=cid, seq=seq, envelope=env, size=len(text) + ENVELOPE_OVERHEAD
        )
        return seq

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``."""
        try:
            return await self._admit(envelope)
        except NetworkError as exc:
            if self._tracer is not None:
                self._tracer.fail_envelope(envelope, exc)
            if self._listeners or self._own_hooks:
                await self._fan_out("on_envelope_rejected", envelope, exc)
            raise

    async def _admit(self, env: Envelope) -> str:
        check_shape(env)
        sender = self.agents.get(env.sender_id)
        if sender is None:
            raise NotFoundError(f"sender not registered: {env.sender_id}")
        arbiter = self._arbiter_custom
        if arbiter is None:  # the default RuleBasedArbiter, decided synchronously (same rules, same errors)
            audience = env.audience
            if audience and sender.rule.access.outbound_to != ["*"]:
                names = [
                    self.agents[a].passport.name for a in audience if a in self.agents and a != env.sender_id
                ]
                if names:
                    rules.check_outbound(sender.passport.name, sender.rule.access.outbound_to, names)
            rules.check_depth(sender.passport.name, env.depth, sender.rule.limits.delegation_depth)
        else:
            await self._arbitrate_send(arbiter, env, sender)
        cid = env.channel_id
        if cid not in self.channels:
            raise NotFoundError(f"channel not found: {cid}")
        # Validation -> append -> fold -> dispatch run inside the channel's gate: adapter state,
        # wal_count and the WAL always agree, whatever else is posted concurrently.
        async with self._gates(cid):
            return await self._admit_in_gate(env, sender)

    async def _admit_in_gate(self, env: Envelope, sender: AgentRecord) -> str:
        cid = env.channel_id
        audience = env.audience
        md = self.channels.get(cid)
        if md is None:
            raise NotFoundError(f"channel not found: {cid}")
        if md.state in TERMINAL:
            raise ProtocolError(f"channel '{cid}' is {md.state.value}")
        event_type = env.event_type
        protocol = is_protocol_event(event_type)
        if not protocol and md.state != ChannelState.ACTIVE:
            raise ProtocolError(f"channel '{cid}' not active (state={md.state.value})")
        participants = [p.agent_id for p in md.participants]
        peer_cancel = False
        if env.sender_id not in participants:
            if not self._is_peer_cancel(md, env):
                raise ProtocolError(
                    f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'"
                )
            peer_cancel = True
        if audience:
            for a in audience:
                if a not in participants:
                    await self._resolve_audience(md, env, participants)  # refuses unless an arbiter resolves
                    audience = env.audience
                    break
        adapter = self._adapters.get((md.manifest.type, md.manifest.version))
        if adapter is None:
            raise ProtocolError(
                f"channel '{cid}' has no registered adapter (manifest {md.manifest.type!r}@v{md.manifest.version})"
            )
        if not protocol:
            recipients = audience if audience is not None else [p for p in participants if p != env.sender_id]
            arbiter = self._arbiter_custom
            for rid in recipients:
                if rid == env.sender_id:
                    continue
                rec = self.agents.get(rid)
                if rec is not None:
                    pending = self._unacked.get(rid)
                    if arbiter is None:
                        rules.check_inbox(
                            rid, len(pending) if pending else 0, rec.rule.limits.inbox.max_pending
                        )
                    else:
                        await self._arbitrate_inbox(arbiter, env, rec, len(pending) if pending else 0)
        state = self._states.get(cid)
        if state is None:
            raise ProtocolError(f"channel '{cid}' has no adapter state")
        if peer_cancel and env.sender_id in self._peer_cancellers.get(env.task_id or "", ()):
            raise ProtocolError(
                f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'"
            )
        adapter.validate_send(md, env, state)
        self._stamp(env)
        if self._tracer is not None and not protocol:
            self._tracer.start_envelope(env)  # writes the span's traceparent into trace_id before the WAL
        text = encode_envelope(env)
        new_state = adapter.fold(env, state)
        result = adapter.on_accepted(md, env, new_state)
        await self._append(md, env, text)
        self._states[cid] = new_state
        if peer_cancel:
            self._peer_cancellers.setdefault(env.task_id or "", set()).add(env.sender_id)
        if event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT):
            await self._handshake(md, env)
            return env.envelope_id
        if self._arbiter_custom is None:
            self._dispatch(md, env)
        else:
            await self._dispatch_arbitrated(md, env)
        if self._tracer is not None and not protocol:
            self._tracer.end_envelope(env)
        if self._listeners or self._own_hooks:
            await self._fan_out("on_envelope_posted", env, md)
        if result is not None and result.next_state is not None:
            await self._transition(cid, result.next_state, result.auto_close_reason)
        return env.envelope_id

    def _is_peer_cancel(self, md: ChannelMetadata, env: Envelope) -> bool:
        if env.event_type != EV_TASK_CANCEL_REQUEST or not env.task_id:
            return False
        task = self._tasks.get(env.task_id)
        data = env.event_data
        return (
            task is not None
            and task.state not in TERMINAL_TASKS
            and md.state == ChannelState.ACTIVE
            and task.channel_id == md.channel_id
            and env.audience == [task.owner_id]
            and set(data) == {"task_id", "reason"}
            and data.get("task_id") == env.task_id
            and isinstance(data.get("reason"), str)
            and len(data["reason"]) <= 500
        )

    def can_send(self, channel_id: str, sender_id: str, *, event_type: str | None = None) -> bool:
        """Whether ``sender_id`` may send a substantive envelope on the channel now (synchronous, as in ag2)."""
        return self.why_not_send(channel_id, sender_id, event_type=event_type)[0]

    async def explain_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]:
        """Whether ``sender_id`` may send now, and if not, one sentence saying why."""
        return self.why_not_send(channel_id, sender_id, event_type=event_type)

    def why_not_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]:
        """``explain_send``'s synchronous body."""
        from ag2net.envelope import EV_TEXT

        md = self.channels.get(channel_id)
        if md is None:
            return False, f"channel '{channel_id}' not found"
        if md.is_terminal():
            reason = f" (reason: {md.close_reason})" if md.close_reason else ""
            return False, f"channel '{channel_id}' is {md.state.value}{reason}; open a new one"
        if md.state != ChannelState.ACTIVE:
            return (
                False,
                f"channel '{channel_id}' not active (state={md.state.value}); wait for every invitee to ack",
            )
        if sender_id not in md.participant_ids():
            return False, f"you are not a participant of channel '{channel_id}'"
        state = self._states.get(channel_id)
        adapter = self._adapters.get((md.manifest.type, md.manifest.version))
        if state is None or adapter is None:
            return False, f"channel '{channel_id}' has no adapter"
        probe = Envelope(channel_id, sender_id, None, event_type or EV_TEXT, {"text": ""})
        try:
            adapter.validate_send(md, probe, state)
        except NetworkError as exc:
            return False, str(exc)
        return True, ""


__all__ = ["Admission"]

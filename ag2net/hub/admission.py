"""Admission's shell: drives the pure checks of ``ag2net.hub.core`` around the durable append.

``post_envelope`` = admit (``core.admit_*``, asking a registered arbiter between them) → stamp and fold →
``await store.append`` → ``core.apply`` → dispatch → observe, inside the channel's gate.
``explain_send``/``can_send`` run the same ``core.admit`` on a probe envelope.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_TEXT,
    Envelope,
    encode_envelope,
    is_protocol_event,
)
from ag2net.errors import NetworkError, NotFoundError
from ag2net.hub.core import (
    Admitted,
    Refused,
    admit,
    admit_channel,
    admit_send,
    admit_sender,
    apply,
    is_peer_cancel,
    name_refusal,
)
from ag2net.hub.gate import ChannelGate
from ag2net.hub.records import AgentRecord
from ag2net.views.wal import ENVELOPE_OVERHEAD

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

log = logging.getLogger(__name__)
#: What an operator reads of the hub's decisions (registrations, refused envelopes), as ag2's hub logs them.
hub_log = logging.getLogger("ag2net.hub")


class Admission(HubShape):
    """Mixin of ``Hub``: ``post_envelope`` and ``can_send``."""

    def _stamp(self, env: Envelope) -> None:
        env.envelope_id = self.ids.new_envelope_id()
        env.created_at = self.clock()

    def _remember(self, cid: str, env: Envelope, text: str, seq: int) -> None:
        """Cache an appended envelope (when its channel's log is cached) and publish it to observers."""
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

    async def _append(self, md: ChannelMetadata, env: Envelope, text: str | None = None) -> int:
        """Durably append one stamped envelope, then count and cache it; returns its seq.

        The caller holds the channel's gate. Nothing in memory changes until the store has committed,
        so a failed append leaves ``wal_count``, the cache and the adapter state as they were.
        """
        cid = md.channel_id
        if text is None:
            text = env.to_json()
        await self.store.append(cid, env.envelope_id, text)
        seq = self.channel_table.note_appended(cid, env)
        self._remember(cid, env, text, seq)
        return seq

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``."""
        try:
            return await self._admit(envelope)
        except NetworkError as exc:
            name_refusal(self.core, exc)  # channels and participants by name, not by 32-hex id
            hub_log.info(
                "refused %s from %s on channel %s: %s",
                envelope.event_type,
                self.name_for(envelope.sender_id),
                envelope.channel_id,
                exc,
            )
            if self._tracer is not None:
                self._tracer.fail_envelope(envelope, exc)
            if self._listeners or self._own_hooks:
                await self._fan_out("on_envelope_rejected", envelope, exc)
            raise

    async def _admit(self, env: Envelope) -> str:
        core = self.core
        sender = admit_sender(core, env)
        arbiter = self._arbiter_custom
        if arbiter is not None:
            await self._arbitrate_send(arbiter, env, sender)
        cid = env.channel_id
        if cid not in self.channels:
            raise NotFoundError(f"channel not found: {cid}")
        # Validation -> append -> fold -> dispatch run inside the channel's gate: adapter state,
        # wal_count and the WAL always agree, whatever else is posted concurrently.
        gate = self._gates(cid)
        if (
            arbiter is None
            and self._append_group is not None
            and not gate.held_here
            and not is_protocol_event(env.event_type)
        ):
            return await self._admit_queued(gate, env, sender)
        async with gate:
            return await self._admit_in_gate(env, sender)

    async def _admit_in_gate(self, env: Envelope, sender: AgentRecord) -> str:
        core = self.core
        arbiter = self._arbiter_custom
        # the caller holds the channel's gate
        gated = admit_channel(core, env)
        if arbiter is not None:
            md = gated.metadata
            if gated.unresolved:  # refuses unless the arbiter resolves the unknown ids
                await self._resolve_audience(md, env, md.participant_ids())
            if not is_protocol_event(env.event_type):
                audience = env.audience
                recipients = (
                    audience
                    if audience is not None
                    else [p for p in md.participant_ids() if p != env.sender_id]
                )
                for rid in recipients:
                    rec = self.agents.get(rid)
                    if rid != env.sender_id and rec is not None:
                        await self._arbitrate_inbox(arbiter, env, rec, self.inboxes.pending(rid))
        return await self._commit(admit_send(core, env, sender, gated))

    # ------------------------------------------------------------ group admission

    async def _admit_queued(self, gate: ChannelGate, env: Envelope, sender: AgentRecord) -> str:
        """Wait for the gate as a post; whoever holds it when this post is next in line may admit it
        together with its own (``_admit_group``), else this post admits itself and the posts queued
        right behind it."""
        post = _Post(env, sender, gate.arrivals + 1, asyncio.get_running_loop().create_future())
        waiting = gate.waiting
        waiting[post.ticket] = post  # entering the gate (below) numbers this entry post.ticket
        try:
            async with gate:
                waiting.pop(post.ticket, None)
                if post.done.done():  # admitted (or refused) by the holder before us
                    return post.done.result()
                group = [post]
                ticket = post.ticket + 1
                while len(group) < MAX_GROUP and (follower := waiting.get(ticket)) is not None:
                    group.append(follower)
                    ticket += 1
                if len(group) == 1 or not self._groups_allowed():
                    return await self._admit_in_gate(env, sender)
                await self._admit_group(gate, group)
                return post.done.result()
        finally:
            waiting.pop(post.ticket, None)

    def _groups_allowed(self) -> bool:
        """Group admission keeps what each post observes only when nothing runs between two posts:
        no registered arbiter, tracer or listener (their awaits interleave with each envelope)."""
        return (
            self._arbiter_custom is None
            and self._tracer is None
            and not self._listeners
            and not self._own_hooks
            and self._append_group is not None
        )

    async def _admit_group(self, gate: ChannelGate, group: list[_Post]) -> None:
        """Admit queued posts of one channel together: each is admitted against the state the ones before
        it leave (the same ``admit``), all are appended in one all-or-nothing store group, then applied
        and dispatched in order. A post whose admission could depend on the deliveries of the ones
        before it (an inbox near its cap), and every post after one that changes the channel's state,
        is left to admit itself."""
        core = self.core
        first = group[0].envelope
        cid = first.channel_id
        md = self.channels[cid]
        state: Any = core.channel_table.states.get(cid)
        taken: list[tuple[_Post, Admitted, str]] = []
        settled: list[_Post] = []
        extra: dict[str, int] = {}
        for post in group:
            env = post.envelope
            if taken and self._inbox_may_fill(md, env, extra):
                break
            try:
                gated = admit_channel(core, env)
                admitted = admit_send(core, env, post.sender, gated, state)
                self._stamp(env)
                text = encode_envelope(env)
                admitted.fold()
            except Exception as exc:  # this post's refusal (or its adapter's error), as alone
                _settle(post, exc)
                settled.append(post)
                continue
            state = admitted.new_state
            taken.append((post, admitted, text))
            for rid in _recipients(md, env):
                extra[rid] = extra.get(rid, 0) + 1
            result = admitted.result
            if result is not None and result.next_state is not None:
                break
        for post in settled:
            gate.waiting.pop(post.ticket, None)
        if not taken:
            return
        for post, _, _ in taken:
            gate.waiting.pop(post.ticket, None)
        append_group = self._append_group
        assert append_group is not None
        try:
            await append_group(cid, [(a.envelope.envelope_id, text) for _, a, text in taken])
        except Exception:
            # Nothing of the group was written: admit each on its own, as if they had come one by one.
            for post, _, _ in taken:
                try:
                    _settle(post, await self._admit_in_gate(post.envelope, post.sender))
                except Exception as exc:
                    _settle(post, exc)
            return
        for _, admitted, text in taken:
            env = admitted.envelope
            self._remember(cid, env, text, apply(core, admitted))
        for post, admitted, _ in taken:
            self._dispatch(md, admitted.envelope)
            _settle(post, admitted.envelope.envelope_id)
        result = taken[-1][1].result
        if result is not None and result.next_state is not None:
            await self._transition(cid, result.next_state, result.auto_close_reason)

    def _inbox_may_fill(self, md: ChannelMetadata, env: Envelope, extra: dict[str, int]) -> bool:
        """Whether a recipient's inbox cap could refuse ``env`` once the group's earlier envelopes are
        delivered (then ``env`` waits for them, as it would one by one)."""
        agents = self.agents
        for rid in _recipients(md, env):
            n = extra.get(rid)
            rec = agents.get(rid)
            if n and rec is not None:
                cap = rec.rule.limits.inbox.max_pending
                if cap > 0 and self.inboxes.pending(rid) + n >= cap:
                    return True
        return False

    async def _commit(self, admitted: Admitted) -> str:
        """Stamp, fold, append durably, apply, dispatch and observe one admitted envelope (in its gate)."""
        env = admitted.envelope
        md = admitted.metadata
        cid = md.channel_id
        protocol = admitted.protocol
        self._stamp(env)
        if self._tracer is not None and not protocol:
            self._tracer.start_envelope(env)  # writes the span's traceparent into trace_id before the WAL
        text = encode_envelope(env)
        admitted.fold()
        await self.store.append(cid, env.envelope_id, text)
        seq = apply(self.core, admitted)
        self._remember(cid, env, text, seq)
        if env.event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT):
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
        result = admitted.result
        if result is not None and result.next_state is not None:
            await self._transition(cid, result.next_state, result.auto_close_reason)
        return env.envelope_id

    def _is_peer_cancel(self, md: ChannelMetadata, env: Envelope) -> bool:
        return is_peer_cancel(self.core, md, env)

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
        """``explain_send``'s synchronous body: the admission a post runs, on a probe envelope
        (``event_data={"text": ""}``, no audience); a refusal is the message the post would raise,
        followed by what to do when admission knows (a closed channel: open a new one)."""
        probe = Envelope(channel_id, sender_id, None, event_type or EV_TEXT, {"text": ""})
        verdict = admit(self.core, probe)
        if isinstance(verdict, Refused):
            return False, verdict.message + verdict.advice
        return True, ""


MAX_GROUP = 256  # posts admitted together at most (one store group)


@dataclass(slots=True)
class _Post:
    """A post waiting for its channel's gate (``ticket``: its number in the gate's arrival order)."""

    envelope: Envelope
    sender: AgentRecord
    ticket: int
    done: asyncio.Future[str]


def _settle(post: _Post, outcome: str | BaseException) -> None:
    fut = post.done
    if fut.done():
        return
    if isinstance(outcome, BaseException):
        fut.set_exception(outcome)
        fut.exception()  # retrieved: a poster cancelled meanwhile must not leave a warning behind
    else:
        fut.set_result(outcome)


def _recipients(md: ChannelMetadata, env: Envelope) -> list[str]:
    audience = env.audience
    if audience is not None:
        return [a for a in audience if a != env.sender_id]
    return [p for p in md.participant_ids() if p != env.sender_id]


__all__ = ["Admission"]

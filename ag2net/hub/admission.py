"""Admission's shell: drives the pure checks of ``ag2net.hub.core`` around the durable append.

``post_envelope`` = admit (``core.admit_*``, asking a registered arbiter between them) → stamp and fold →
``await store.append`` → ``core.apply`` → dispatch → observe, inside the channel's gate.
``explain_send``/``can_send`` run the same ``core.admit`` on a probe envelope.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

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
)
from ag2net.views.wal import ENVELOPE_OVERHEAD

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

log = logging.getLogger(__name__)


class Admission(HubShape):
    """Mixin of ``Hub``: ``post_envelope`` and ``can_send``."""

    def _stamp(self, env: Envelope) -> None:
        env.envelope_id = self._ids()
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
        async with self._gates(cid):
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
        (``event_data={"text": ""}``, no audience); a refusal is the message the post would raise."""
        probe = Envelope(channel_id, sender_id, None, event_type or EV_TEXT, {"text": ""})
        verdict = admit(self.core, probe)
        if isinstance(verdict, Refused):
            return False, verdict.message
        return True, ""


__all__ = ["Admission"]

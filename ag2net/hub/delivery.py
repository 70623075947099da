"""Delivery: endpoints and bindings, per-recipient mailboxes, receipts, cursors and replay.

``addressees(agents, name_for, md, env, denied)`` is the one answer to "who receives this envelope": the
hub's dispatch queues an envelope for exactly those of them that are connected, a replay resends only to
them, and the dry run, the visibility matrix and the probe report them (``ag2net.hub.probe.addressed``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ag2net.channel import (
    ChannelMetadata,
)
from ag2net.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    Envelope,
    is_protocol_event,
)
from ag2net.errors import NotFoundError
from ag2net.hub import rules
from ag2net.hub.dispatch import Mailbox
from ag2net.hub.records import (
    AgentRecord,
)

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

log = logging.getLogger(__name__)

_ANYONE = ["*"]  # the default inbound_from: every sender

#: Answers to an invite: the hub consumes them (its handshake opens or closes the channel), nobody receives
#: them (reference §3.6 step 11).
HANDSHAKE_ANSWERS = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT})


def addressees(
    agents: Mapping[str, AgentRecord],
    name_for: Callable[[str], str],
    md: ChannelMetadata,
    env: Envelope,
    denied: set[str] | None = None,
) -> list[str]:
    """Who receives ``env`` on channel ``md``, in dispatch order, whether connected or not.

    Nobody for an invite's ack or reject (the hub's handshake consumes it); else the audience when there is
    one (the sender too when it lists itself), or every participant but the sender; minus identities no
    longer registered, and minus those whose rule's ``inbound_from`` refuses the sender, or, while a
    registered arbiter decides, those it ``denied`` instead.
    """
    if env.event_type in HANDSHAKE_ANSWERS:
        return []
    sender_id = env.sender_id
    audience = env.audience
    candidates = (
        audience if audience is not None else [p.agent_id for p in md.participants if p.agent_id != sender_id]
    )
    out: list[str] = []
    sender_name: str | None = None
    for rid in candidates:
        rec = agents.get(rid)
        if rec is None:
            continue
        if denied is not None:
            if rid in denied:
                continue
        elif rid != sender_id:
            inbound = rec.rule.access.inbound_from
            if inbound != _ANYONE:
                if sender_name is None:
                    sender_name = name_for(sender_id)
                if not rules.matches_any(sender_name, inbound):
                    continue
        out.append(rid)
    return out


class Delivery(HubShape):
    """Mixin of ``Hub``: from an admitted envelope to each recipient's connection."""

    def attach_endpoint(self, endpoint: Any) -> None:
        self._endpoints[endpoint.endpoint_id] = endpoint

    async def detach_endpoint(self, endpoint: Any) -> None:
        self._endpoints.pop(endpoint.endpoint_id, None)
        for agent_id, bound in list(self._bindings.items()):
            if bound is endpoint:
                del self._bindings[agent_id]
                self._observe_presence(agent_id, False, reason="disconnected")
                mailbox = self._mailboxes.pop(agent_id, None)
                if mailbox is not None:
                    await mailbox.stop()
                self._unacked.pop(agent_id, None)
        with contextlib.suppress(Exception):
            await endpoint.close()

    def bind_endpoint(self, endpoint_id: Any, agent_id: str | None) -> None:
        """Bind ``agent_id`` to an endpoint, given by the id of an attached one (as in ag2) or by the
        endpoint itself; a re-bind moves the agent to the new endpoint. Raises ``NotFoundError`` for an
        id that is not attached or an agent that is not registered."""
        if isinstance(endpoint_id, str):
            endpoint = self._endpoints.get(endpoint_id)
            if endpoint is None:
                raise NotFoundError(
                    f"endpoint not attached: {endpoint_id} (attach it with hub.attach_endpoint(endpoint) first)"
                )
        else:
            endpoint = endpoint_id
        if agent_id is None:  # a passport the hub has not stamped
            raise NotFoundError("cannot bind an identity without an agent_id; register it first")
        self._record(agent_id)
        was_bound = agent_id in self._bindings
        self._bindings[agent_id] = endpoint
        if not was_bound:
            self._observe_presence(agent_id, True)
        bound = getattr(endpoint, "bound", None)
        if isinstance(bound, set):
            bound.add(agent_id)
        mailbox = self._mailboxes.get(agent_id)
        if mailbox is not None:
            mailbox.endpoint = endpoint

    def unbind_endpoint(self, endpoint: Any, agent_id: str) -> None:
        if self._bindings.get(agent_id) is endpoint:
            del self._bindings[agent_id]
            self._observe_presence(agent_id, False, reason="unbind")
            mailbox = self._mailboxes.pop(agent_id, None)
            if mailbox is not None:
                self._spawn(mailbox.stop())

    def presence(self, agent_ids: list[str] | None = None) -> dict[str, bool]:
        """``{agent_id: online}`` for every registered identity (or those of ``agent_ids`` that are
        registered): online when the identity is bound to a live connection of the hub now."""
        bindings = self._bindings
        ids = self.agents if agent_ids is None else [a for a in agent_ids if a in self.agents]
        out: dict[str, bool] = {}
        for agent_id in ids:
            endpoint = bindings.get(agent_id)
            out[agent_id] = endpoint is not None and getattr(endpoint, "closed", False) is not True
        return out

    def _observe_presence(self, agent_id: str, online: bool, **extra: Any) -> None:
        """An ``agent`` event on the observe stream: ``bound`` when an identity gets a live connection,
        ``unbound`` when it loses its last one (a re-bind to another connection is neither)."""
        rec = self.agents.get(agent_id)
        name = rec.passport.name if rec is not None else None
        self._observe_agent(agent_id, "bound" if online else "unbound", name=name, **extra)

    def addressees(self, md: ChannelMetadata, env: Envelope) -> list[str]:
        """Who receives ``env`` (``addressees``, with a registered arbiter's refusals while they are set)."""
        return addressees(self.agents, self.name_for, md, env, self._dispatch_denied)

    def _dispatch(self, md: ChannelMetadata, env: Envelope) -> None:
        """Queue ``env`` for its recipients (``addressees``) that are connected. While a registered
        arbiter's refusals are set (``_dispatch_denied``, see ``ArbiterSeat``) they replace the default
        ``inbound_from`` rule."""
        recipients = self.addressees(md, env)
        if not recipients:
            return
        counted = not is_protocol_event(env.event_type)
        envelope_id = env.envelope_id
        agents = self.agents
        bindings = self._bindings
        mailboxes = self._mailboxes
        unacked = self._unacked
        for rid in recipients:
            endpoint = bindings.get(rid)
            if endpoint is None:
                continue
            if counted:
                pending = unacked.get(rid)
                if pending is None:
                    pending = unacked[rid] = set()
                pending.add(envelope_id)
                rec = agents[rid]
                if rec.rule.limits.inbox.max_pending > 0:
                    self._check_pressure(rid, rec, len(pending))
            mailbox = mailboxes.get(rid)
            if mailbox is None:
                mailbox = mailboxes[rid] = Mailbox(rid, endpoint, self._dispatch_failed)
            mailbox.put(env)

    def _check_pressure(self, rid: str, rec: AgentRecord, pending: int) -> None:
        inbox = rec.rule.limits.inbox
        if inbox.max_pending <= 0:
            return
        high = inbox.high_water if inbox.high_water is not None else max(1, int(0.8 * inbox.max_pending))
        if high <= 0:
            return
        if pending >= high and rid not in self._pressure_fired:
            self._pressure_fired.add(rid)
            if self._listeners or self._own_hooks:
                self._spawn(self._fan_out("on_inbox_pressure", rid, pending, inbox.max_pending))
        elif pending < high:
            self._pressure_fired.discard(rid)

    async def _dispatch_failed(self, env: Envelope, recipient_id: str, exc: BaseException) -> None:
        log.warning("delivery of %s to %s failed: %s", env.envelope_id, recipient_id, exc)
        await self._fan_out("on_dispatch_failed", env, recipient_id, exc)

    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None:
        """A client acknowledged (or refused) one delivery."""
        if recipient_id not in self.agents or self._bindings.get(recipient_id) is not endpoint:
            return
        if status != "ack":
            log.info("nack of %s by %s: %s", envelope_id, recipient_id, reason)
            return
        pending = self._unacked.get(recipient_id)
        if pending is not None:
            pending.discard(envelope_id)
            if recipient_id in self._pressure_fired:
                self._check_pressure(recipient_id, self.agents[recipient_id], len(pending))
        if channel_id:
            cursors = self._cursors.get(recipient_id)
            if cursors is None:
                cursors = self._cursors[recipient_id] = {}
            if envelope_id > cursors.get(channel_id, ""):
                cursors[channel_id] = envelope_id
                self._dirty_cursors.add((recipient_id, channel_id))
                if self._cursor_flush is None and not self._closed:
                    loop = asyncio.get_running_loop()
                    self._cursor_flush = loop.call_later(0.2, lambda: self._spawn(self._flush_cursors()))

    async def _flush_cursors(self) -> None:
        self._cursor_flush = None
        dirty = list(self._dirty_cursors)
        self._dirty_cursors.clear()
        for agent_id, channel_id in dirty:
            value = self._cursors.get(agent_id, {}).get(channel_id)
            if value:
                await self.store.set_cursor(agent_id, channel_id, value)

    def inbox_cursor(self, agent_id: str, channel_id: str) -> str:
        return self._cursors.get(agent_id, {}).get(channel_id, "")

    def pending_inbox(self, agent_id: str) -> int:
        return len(self._unacked.get(agent_id, ()))

    async def replay(self, endpoint: Any, agent_id: str, since_envelope_id: str) -> int:
        """Resend what ``agent_id`` missed in its active channels since a cursor; returns the count."""
        sent = 0
        for md in list(self.channels.values()):
            if md.is_terminal() or agent_id not in md.participant_ids():
                continue
            high = max(self.inbox_cursor(agent_id, md.channel_id), since_envelope_id or "")
            for env in await self.read_wal(md.channel_id):
                if env.envelope_id <= high or env.sender_id == agent_id:
                    continue
                if agent_id not in self.addressees(md, env):
                    continue  # only what the dispatch would have delivered (not an ack, not another's audience)
                try:
                    await endpoint.notify(agent_id, env)
                except Exception as exc:
                    await self._dispatch_failed(env, agent_id, exc)
                    break
                sent += 1
        return sent


__all__ = ["HANDSHAKE_ANSWERS", "Delivery", "addressees"]

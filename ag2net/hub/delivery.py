"""Shell: ``Delivery`` (``hub.delivery``) — endpoints and bindings, mailboxes, receipts, cursors, replay.

The delivery book (``ag2net.hub.core.DeliveryBook``) with what moves envelopes: ``dispatch`` queues an
admitted envelope for its ``recipients`` (``ag2net.hub.core.recipients``, the one answer to "who receives
this envelope") that are connected, remote agents through their proxies (``ag2net.hub.remote``); a replay
resends only to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import PRIORITY_RANK, Envelope, is_protocol_event
from ag2net.errors import NotFoundError
from ag2net.hub.core import ChannelTable, DeliveryBook, candidates, recipients
from ag2net.hub.dispatch import Background, Drains, Mailbox
from ag2net.hub.records import AgentRecord
from ag2net.hub.remote import REMOTE_AGENT_KIND, RemoteProxies

if TYPE_CHECKING:
    from ag2net.hub.core import IdentityTable
    from ag2net.hub.services import Services

log = logging.getLogger(__name__)

#: Reads a channel's whole WAL (``ChannelLogs.read``), for a replay.
ReadWal = Callable[[str], Awaitable[list[Envelope]]]


class Delivery(DeliveryBook):
    """From an admitted envelope to each recipient's connection."""

    __slots__ = (
        "background",
        "channels",
        "cursor_flush",
        "drains",
        "identities",
        "read_wal",
        "remote",
        "services",
    )

    def __init__(
        self,
        services: Services,
        *,
        identities: IdentityTable,
        channels: ChannelTable,
        background: Background,
        read_wal: ReadWal,
    ) -> None:
        super().__init__()
        self.services = services
        self.identities = identities
        self.channels = channels
        self.background = background
        self.read_wal = read_wal
        self.remote = RemoteProxies(identities, self)
        self.cursor_flush: asyncio.TimerHandle | None = None
        self.drains = Drains()  # the mailboxes' shared drain callback

    def attach(self, endpoint: Any) -> None:
        self.endpoints[endpoint.endpoint_id] = endpoint

    async def detach(self, endpoint: Any) -> None:
        self.endpoints.pop(endpoint.endpoint_id, None)
        for agent_id, bound in list(self.bindings.items()):
            if bound is endpoint:
                del self.bindings[agent_id]
                self.observe_presence(agent_id, False, reason="disconnected")
                mailbox = self.mailboxes.pop(agent_id, None)
                if mailbox is not None:
                    await mailbox.stop()
                self.unacked.pop(agent_id, None)
        with contextlib.suppress(Exception):
            await endpoint.close()

    def bind(self, endpoint_id: Any, agent_id: str | None) -> None:
        """Bind ``agent_id`` to an endpoint, given by the id of an attached one (as in ag2) or by the
        endpoint itself; a re-bind moves the agent to the new endpoint. Raises ``NotFoundError`` for an
        id that is not attached or an agent that is not registered."""
        if isinstance(endpoint_id, str):
            endpoint = self.endpoints.get(endpoint_id)
            if endpoint is None:
                raise NotFoundError(
                    f"endpoint not attached: {endpoint_id} (attach it with hub.attach_endpoint(endpoint) first)"
                )
        else:
            endpoint = endpoint_id
        if agent_id is None:  # a passport the hub has not stamped
            raise NotFoundError("cannot bind an identity without an agent_id; register it first")
        self.identities.record(agent_id)
        was_bound = agent_id in self.bindings
        self.bindings[agent_id] = endpoint
        if not was_bound:
            self.observe_presence(agent_id, True)
        bound = getattr(endpoint, "bound", None)
        if isinstance(bound, set):
            bound.add(agent_id)
        mailbox = self.mailboxes.get(agent_id)
        if mailbox is not None:
            mailbox.endpoint = endpoint

    def unbind(self, endpoint: Any, agent_id: str) -> None:
        if self.bindings.get(agent_id) is endpoint:
            del self.bindings[agent_id]
            self.observe_presence(agent_id, False, reason="unbind")
            mailbox = self.mailboxes.pop(agent_id, None)
            if mailbox is not None:
                self.background.spawn(mailbox.stop())

    async def forget(self, agent_id: str) -> None:
        """Drop an unregistered identity's binding, mailbox and pending deliveries."""
        self.bindings.pop(agent_id, None)
        mailbox = self.mailboxes.pop(agent_id, None)
        if mailbox is not None:
            await mailbox.stop()
        self.unacked.pop(agent_id, None)

    def presence(self, agent_ids: list[str] | None = None) -> dict[str, bool]:
        """``{agent_id: online}`` for every registered identity (or those of ``agent_ids`` that are
        registered): online when the identity is bound to a live connection of the hub now."""
        bindings = self.bindings
        ids = (
            self.identities.agents
            if agent_ids is None
            else [a for a in agent_ids if a in self.identities.agents]
        )
        out: dict[str, bool] = {}
        for agent_id in ids:
            endpoint = bindings.get(agent_id)
            out[agent_id] = endpoint is not None and getattr(endpoint, "closed", False) is not True
        return out

    def observe_presence(self, agent_id: str, online: bool, **extra: Any) -> None:
        """An ``agent`` event on the observe stream: ``bound`` when an identity gets a live connection,
        ``unbound`` when it loses its last one (a re-bind to another connection is neither)."""
        rec = self.identities.agents.get(agent_id)
        name = rec.passport.name if rec is not None else None
        self.services.observe_log.append(
            "agent",
            payload={"kind": "bound" if online else "unbound", "agent_id": agent_id, "name": name, **extra},
        )

    def recipients(
        self,
        md: ChannelMetadata,
        env: Envelope,
        denied: set[str] | None = None,
        among: list[str] | None = None,
    ) -> list[str]:
        """Who receives ``env`` (``ag2net.hub.core.recipients``): ``denied``, a registered arbiter's
        refusals, replace the default ``inbound_from`` rule."""
        identities = self.identities
        return recipients(identities.agents, identities.name_for, md, env, denied, among)

    def dispatch(self, md: ChannelMetadata, env: Envelope, denied: set[str] | None = None) -> None:
        """Queue ``env`` for its recipients that are connected (remote agents: bound to their proxy first)."""
        agents = self.identities.agents
        among = candidates(md, env)
        for rid in among:
            record = agents.get(rid)
            if record is not None and record.passport.kind == REMOTE_AGENT_KIND:
                endpoint = self.remote.endpoint
                if self.bindings.get(rid) is not endpoint:
                    self.bind(endpoint, rid)
        targets = self.recipients(md, env, denied, among)
        if not targets:
            return
        counted = not is_protocol_event(env.event_type)
        envelope_id = env.envelope_id
        bindings = self.bindings
        mailboxes = self.mailboxes
        unacked = self.unacked
        fired = self.pressure_fired
        rank = PRIORITY_RANK.get(env.priority, 1)  # one read for every recipient
        for rid in targets:
            endpoint = bindings.get(rid)
            if endpoint is None:
                continue
            if counted:
                pending = unacked.get(rid)
                if pending is None:
                    pending = unacked[rid] = set()
                pending.add(envelope_id)
                inbox = agents[rid].rule.limits.inbox
                cap = inbox.max_pending
                if cap > 0:
                    # check_pressure's test, inline: it acts only at or past the high-water mark, or to
                    # re-arm a recipient that fired before (``pending`` holds one at least, so the mark's
                    # floor of 1 needs no max; a mark <= 0 is check_pressure's to ignore)
                    high = inbox.high_water
                    if rid in fired or len(pending) >= (int(0.8 * cap) if high is None else high):
                        self.check_pressure(rid, agents[rid], len(pending))
            mailbox = mailboxes.get(rid)
            if mailbox is None:
                mailbox = mailboxes[rid] = Mailbox(rid, endpoint, self.dispatch_failed, self.drains)
            mailbox.put(env, rank)

    def check_pressure(self, rid: str, rec: AgentRecord, pending: int) -> None:
        inbox = rec.rule.limits.inbox
        if inbox.max_pending <= 0:
            return
        high = inbox.high_water if inbox.high_water is not None else max(1, int(0.8 * inbox.max_pending))
        if high <= 0:
            return
        if pending >= high and rid not in self.pressure_fired:
            self.pressure_fired.add(rid)
            if self.services.listeners.active:
                self.background.spawn(
                    self.services.listeners.fan_out("on_inbox_pressure", rid, pending, inbox.max_pending)
                )
        elif pending < high:
            self.pressure_fired.discard(rid)

    async def dispatch_failed(self, env: Envelope, recipient_id: str, exc: BaseException) -> None:
        log.warning("delivery of %s to %s failed: %s", env.envelope_id, recipient_id, exc)
        await self.services.listeners.fan_out("on_dispatch_failed", env, recipient_id, exc)

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
        if recipient_id not in self.identities.agents or self.bindings.get(recipient_id) is not endpoint:
            return
        if status != "ack":
            log.info("nack of %s by %s: %s", envelope_id, recipient_id, reason)
            return
        pending = self.unacked.get(recipient_id)
        if pending is not None:
            pending.discard(envelope_id)
            if recipient_id in self.pressure_fired:
                self.check_pressure(recipient_id, self.identities.agents[recipient_id], len(pending))
        if channel_id:
            cursors = self.cursors.get(recipient_id)
            if cursors is None:
                cursors = self.cursors[recipient_id] = {}
            if envelope_id > cursors.get(channel_id, ""):
                cursors[channel_id] = envelope_id
                self.dirty_cursors.add((recipient_id, channel_id))
                if self.cursor_flush is None and not self.background.closed:
                    loop = asyncio.get_running_loop()
                    self.cursor_flush = loop.call_later(
                        0.2, lambda: self.background.spawn(self.flush_cursors())
                    )

    async def flush_cursors(self) -> None:
        self.cursor_flush = None
        dirty = list(self.dirty_cursors)
        self.dirty_cursors.clear()
        for agent_id, channel_id in dirty:
            value = self.cursors.get(agent_id, {}).get(channel_id)
            if value:
                await self.services.store.set_cursor(agent_id, channel_id, value)

    def cursor(self, agent_id: str, channel_id: str) -> str:
        return self.cursors.get(agent_id, {}).get(channel_id, "")

    async def replay(self, endpoint: Any, agent_id: str, since_envelope_id: str) -> int:
        """Resend what ``agent_id`` missed in its active channels since a cursor; returns the count."""
        sent = 0
        for md in list(self.channels.values()):
            if md.is_terminal() or agent_id not in md.participant_ids():
                continue
            high = max(self.cursor(agent_id, md.channel_id), since_envelope_id or "")
            for env in await self.read_wal(md.channel_id):
                if env.envelope_id <= high or env.sender_id == agent_id:
                    continue
                if agent_id not in self.recipients(md, env):
                    continue  # only what the dispatch would have delivered (not an ack, not another's audience)
                try:
                    await endpoint.notify(agent_id, env)
                except Exception as exc:
                    await self.dispatch_failed(env, agent_id, exc)
                    break
                sent += 1
        return sent


__all__ = ["Delivery", "ReadWal"]

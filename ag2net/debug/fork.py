"""Fork: a sandbox hub holding one channel as it was at a seq, for what-if experiments.

``sandbox = await fork(hub_or_client, channel_id, at_seq)`` reads, through the ordinary ops (so a remote
``HubClient`` with the operator role works as well as an in-process hub), the channel's metadata, its WAL
up to ``at_seq`` and every participant's passport, resume, rule and skill card; it writes them into a new
``MemoryStore`` and opens a ``Hub`` on it, whose ``hydrate`` folds the adapter state exactly as the source
hub's would. Identities keep their ids and names, envelopes their ids and times, so the sandbox's WAL is
the source's prefix envelope for envelope. The channel's lifecycle is the one the prefix shows (pending
until it was opened, with the invitees who had not acked yet; closed if the prefix holds the close).

The prefix's last envelope (unless the hub's lifecycle made it: an invite, ``opened``, ``closed``) is not
copied but admitted again by the sandbox hub, keeping its id and time: whatever the hub did right after it
(``opened`` after the last ack, ``closed`` after the reply that ends a consultation) the sandbox then does
itself, with the hub's own code, in the same order. Nothing is written to the source.
``ag2net.debug.replay`` drives the sandbox's agents on from there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    Envelope,
)
from ag2net.hub.hub import Hub
from ag2net.identity import Passport, Resume, Rule
from ag2net.store import MemoryStore


@dataclass(slots=True)
class Sandbox:
    """A hub of its own (in memory) holding the forked channel; close it when done."""

    hub: Hub
    channel_id: str
    at_seq: int
    source_length: int

    async def close(self) -> None:
        await self.hub.close()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def _op(source: Any, name: str, **params: Any) -> Any:
    if hasattr(source, "call"):  # a HubClient, over whichever link it holds
        return await source.call(name, **params)
    return await source.handle_op(None, name, params)


def _as_of(md: ChannelMetadata, prefix: list[Envelope]) -> ChannelMetadata:
    """The channel's metadata as the prefix leaves it: lifecycle, pending acks, close."""
    then = md.copy()
    invitees = [p for p in then.participant_ids() if p != then.creator_id]
    acked: set[str] = set()
    rejected: list[str] = []
    then.state, then.closed_at, then.close_reason = ChannelState.PENDING, None, ""
    for env in prefix:
        etype = env.event_type
        if etype == EV_CHANNEL_INVITE_ACK:
            acked.add(env.sender_id)
        elif etype == EV_CHANNEL_INVITE_REJECT:
            rejected.append(env.sender_id)
        elif etype == EV_CHANNEL_OPENED:
            then.state = ChannelState.ACTIVE
        elif etype in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED):
            then.state = ChannelState.CLOSED if etype == EV_CHANNEL_CLOSED else ChannelState.EXPIRED
            then.closed_at = env.created_at
            then.close_reason = str(env.event_data.get("reason", ""))
    then.pending_acks = [p for p in invitees if p not in acked] if then.state == ChannelState.PENDING else []
    then.rejected_by = rejected
    return then


async def fork(source: Any, channel_id: str, at_seq: int, **hub_options: Any) -> Sandbox:
    """A sandbox hub holding ``channel_id`` as it was after envelope ``at_seq`` (0: before the first).

    ``hub_options`` go to ``Hub.open`` (sweep intervals default to off). With an in-process source hub, its
    adapters and expectation evaluators are registered in the sandbox too."""
    md: ChannelMetadata = await _op(source, "get_channel", channel_id=channel_id)
    length: int = await _op(source, "wal_count", channel_id=channel_id)
    if isinstance(at_seq, bool) or not isinstance(at_seq, int) or not 0 <= at_seq <= length:
        raise ValueError(
            f"at_seq must be a seq of channel {channel_id!r}, between 0 and {length}; got {at_seq!r}"
        )
    prefix: list[Envelope] = list(await _op(source, "read_wal", channel_id=channel_id, since=0, until=at_seq))
    people: list[str] = list(md.participant_ids())
    for env in prefix:
        for pid in [env.sender_id, *(env.audience or ())]:
            if pid not in people:
                people.append(pid)
    store = MemoryStore()
    await store.open()
    for pid in people:
        try:
            passport: Passport = await _op(source, "get_agent", name_or_id=pid)
        except Exception:
            continue  # an agent that has left: its envelopes stay, its identity is gone
        resume: Resume = await _op(source, "get_resume", agent_id=pid)
        rule: Rule = await _op(source, "get_rule", agent_id=pid)
        skill = await _op(source, "get_skill", agent_id=pid)
        await store.put_agent(
            {
                "agent_id": passport.agent_id,
                "name": passport.name,
                "kind": passport.effective_kind,
                "passport": passport.to_dict(),
                "resume": resume.to_dict(),
                "rule": rule.to_dict(),
                "skill_md": skill,
                "owners": [],
            }
        )
    # The last envelope is admitted again by the sandbox itself (below), so that what the hub did right
    # after it (open the channel on the last ack, close it on a reply that ends it) happens there too.
    readmit = prefix[-1] if prefix and prefix[-1].event_type not in _HUB_MADE else None
    written = prefix[:-1] if readmit is not None else prefix
    await store.put_channel(_as_of(md, written).to_dict())
    for env in written:
        await store.append(channel_id, env.envelope_id, env.to_json())
    options: dict[str, Any] = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0, **hub_options}
    hub = await Hub.open(store, **options)
    if isinstance(source, Hub):
        extra = [a for key, a in source.channels.adapters.items() if key not in hub.channels.adapters]
        for adapter in extra:
            hub.register_adapter(adapter)
        for name, evaluator in source.expectations.evaluators.items():
            hub.expectations.evaluators.setdefault(name, evaluator)
        if extra:
            await hub.hydrate()  # fold the channel with its own adapter
    if readmit is not None:
        await _readmit(hub, store, readmit)
    return Sandbox(hub=hub, channel_id=channel_id, at_seq=at_seq, source_length=length)


_HUB_MADE = frozenset({EV_CHANNEL_INVITE, EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
"""Envelopes the hub's lifecycle makes itself (no admission of their own decides anything after them)."""


async def _readmit(hub: Hub, store: MemoryStore, env: Envelope) -> None:
    """Admit ``env`` into the sandbox through the hub's own post path, keeping its id and time.

    The hub's reaction (the ``opened`` after the last ack, the ``closed`` after a reply that ends the
    channel) is then the sandbox's own, made by the same code in the same order. Nobody is attached yet,
    so nothing is delivered (the hub skips recipients without a connection)."""
    copy = env.copy()
    services = hub.services
    stamp = services.stamp

    def keep_own(target: Envelope) -> None:
        if target is copy:
            target.envelope_id, target.created_at = env.envelope_id, env.created_at
        else:
            stamp(target)

    services.stamp = keep_own  # type: ignore[method-assign]
    try:
        await hub.post_envelope(copy)
    except Exception:
        # refused now (a limit of the sandbox's making): the prefix holds it as the source does
        await store.append(env.channel_id, env.envelope_id, env.to_json())
        await hub.hydrate()
    finally:
        del services.stamp


__all__ = ["Sandbox", "fork"]

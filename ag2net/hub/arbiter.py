"""Shell: the arbiter: the hub's decision seam for sends, inbox capacity, dispatch and channel opening.

``Allow()`` / ``Deny(reason, error=AccessDeniedError)`` are the decisions; ``HubArbiter`` is the protocol
(every method a coroutine); ``BaseHubArbiter`` allows everything, so a subclass overrides only the gates
it cares about; ``RuleBasedArbiter`` is the default and enforces each agent's ``Rule`` (access globs,
delegation depth, inbox capacity, concurrent channels) with the hub's usual sentences.

``Arbitration`` (``hub.arbitration``, shell) holds the hub's arbiter and asks it. A registered arbiter is
asked everything it decides about an envelope once, before the pure admission (``consult``: the send, an
unknown audience, each recipient's inbox, in the order the reference lists them, §3.6), and about its
recipients after the append (``dispatch_denials``, §3.7); a channel opening is asked before the channel
is planned (§3.4). A ``Deny`` makes the hub raise ``deny.error(deny.reason)``, except at dispatch, where a
denied recipient is silently skipped. ``authorize_register`` is part of the protocol
but, as in ag2 1.2.1, registration does not consult it.

Cost: the default ``RuleBasedArbiter`` is a pure function of its inputs, so while it is the arbiter
(exactly that class, not a subclass) the hub runs the same rules synchronously and allocates no
decisions; any other registered arbiter is always awaited.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ag2net.envelope import is_protocol_event
from ag2net.errors import AccessDeniedError, InboxFull, ProtocolError
from ag2net.hub import rules
from ag2net.hub.core import HubCore, IdentityTable, admit_channel, admit_sender, candidates, outsiders

if TYPE_CHECKING:
    from ag2net.channel import ChannelManifest, ChannelMetadata
    from ag2net.envelope import Envelope
    from ag2net.hub.plans import OpenRequest
    from ag2net.identity import Passport, Resume, Rule

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Allow:
    """The arbiter lets the action through."""


@dataclass(frozen=True, slots=True)
class Deny:
    """The arbiter refuses: the hub raises ``error(reason)`` (dispatch skips the recipient instead)."""

    reason: str
    error: type[Exception] = AccessDeniedError

    def __post_init__(self) -> None:
        if not (isinstance(self.error, type) and issubclass(self.error, Exception)):
            raise TypeError(
                f"Deny.error must be an exception class such as AccessDeniedError, got {self.error!r}"
            )


Decision = Allow | Deny

_ALLOW = Allow()


@runtime_checkable
class HubArbiter(Protocol):
    """What the hub asks before it commits a send, a delivery or a channel opening.

    Methods may read what they are given but should not change hub state: they decide, nothing more.
    Register one with ``Hub.register_arbiter``; the latest registration replaces the previous arbiter.
    Each method's body is the permissive default (allow; keep the refusal of an unknown audience), which
    ``BaseHubArbiter`` inherits by subclassing the protocol.
    """

    async def authorize_send(
        self, envelope: Envelope, sender: Passport, sender_rule: Rule, recipients: list[Passport]
    ) -> Decision:
        """Before anything else about the channel is checked; ``recipients`` are the registered
        passports of an explicit audience, the sender excluded (empty for a broadcast)."""
        return _ALLOW

    async def authorize_inbox(
        self, envelope: Envelope, recipient: Passport, recipient_rule: Rule, current_pending: int
    ) -> Decision:
        """Once per registered recipient of a substantive (non-protocol) envelope."""
        return _ALLOW

    async def authorize_dispatch(
        self, envelope: Envelope, sender: Passport, recipient: Passport, recipient_rule: Rule
    ) -> Decision:
        """Per recipient other than the sender, after the envelope is stored; a ``Deny`` skips it."""
        return _ALLOW

    async def authorize_channel_open(
        self,
        manifest: ChannelManifest,
        creator: Passport,
        creator_rule: Rule,
        invitees: list[Passport],
        invitee_rules: list[Rule],
        active_creator_channels: int,
    ) -> Decision:
        """Before a channel is created; ``active_creator_channels`` counts the creator's live channels."""
        return _ALLOW

    async def authorize_register(self, passport: Passport, resume: Resume, rule: Rule) -> Decision:
        """Part of the protocol; registration does not consult it (as in ag2 1.2.1)."""
        return _ALLOW

    async def resolve_unknown_audience(self, envelope: Envelope, unknown_ids: list[str]) -> list[str] | None:
        """Audience ids that are not registered: ``None`` keeps the refusal, a list replaces them."""
        return None


class BaseHubArbiter(HubArbiter):
    """Allows everything and resolves nothing: subclass it and override only the gates you need."""


def _deny(reason: str | None, error: type[Exception] = AccessDeniedError) -> Decision:
    return _ALLOW if reason is None else Deny(reason, error)


class RuleBasedArbiter(BaseHubArbiter):
    """The default arbiter: each agent's ``Rule`` (reference §2.4). Stateless; subclass to extend.

    * send: every explicit recipient's name matches the sender's ``access.outbound_to`` (broadcasts
      skip this), and ``depth`` stays within ``limits.delegation_depth`` (0 = no cap);
    * inbox: fewer than ``limits.inbox.max_pending`` unacknowledged deliveries (0 = no cap), else
      ``InboxFull``;
    * dispatch: the sender's name matches the recipient's ``access.inbound_from``;
    * channel open: the creator's name matches every invitee's ``inbound_from``, and the creator has
      fewer live channels than ``limits.max_concurrent_channels`` (0 = no cap);
    * registration and an unknown audience: ``BaseHubArbiter``'s defaults (allow; keep the refusal).
    """

    async def authorize_send(
        self, envelope: Envelope, sender: Passport, sender_rule: Rule, recipients: list[Passport]
    ) -> Decision:
        if recipients:
            reason = rules.outbound_denial(
                sender.name, sender_rule.access.outbound_to, [r.name for r in recipients]
            )
            if reason is not None:
                return Deny(reason)
        return _deny(rules.depth_denial(sender.name, envelope.depth, sender_rule.limits.delegation_depth))

    async def authorize_inbox(
        self, envelope: Envelope, recipient: Passport, recipient_rule: Rule, current_pending: int
    ) -> Decision:
        return _deny(
            rules.inbox_denial(
                recipient.agent_id or recipient.name, current_pending, recipient_rule.limits.inbox.max_pending
            ),
            InboxFull,
        )

    async def authorize_dispatch(
        self, envelope: Envelope, sender: Passport, recipient: Passport, recipient_rule: Rule
    ) -> Decision:
        if rules.dispatch_allowed(sender.name, recipient_rule.access.inbound_from):
            return _ALLOW
        return Deny(f"recipient {recipient.name!r} does not accept inbound from {sender.name!r}")

    async def authorize_channel_open(
        self,
        manifest: ChannelManifest,
        creator: Passport,
        creator_rule: Rule,
        invitees: list[Passport],
        invitee_rules: list[Rule],
        active_creator_channels: int,
    ) -> Decision:
        for invitee, rule in zip(invitees, invitee_rules, strict=True):
            reason = rules.inbound_denial(creator.name, invitee.name, rule.access.inbound_from)
            if reason is not None:
                return Deny(reason)
        return _deny(
            rules.channel_quota_denial(
                creator.name, active_creator_channels, creator_rule.limits.max_concurrent_channels
            )
        )


_METHODS = (
    "authorize_send",
    "authorize_inbox",
    "authorize_dispatch",
    "authorize_channel_open",
    "authorize_register",
    "resolve_unknown_audience",
)


def _check_arbiter(arbiter: Any) -> None:
    for name in _METHODS:
        method = getattr(arbiter, name, None)
        if method is None:
            raise TypeError(
                f"arbiter {type(arbiter).__name__} has no {name}(); subclass BaseHubArbiter "
                "(or RuleBasedArbiter) and override only the methods you need"
            )
        if not inspect.iscoroutinefunction(method):
            raise TypeError(
                f"arbiter {type(arbiter).__name__}.{name} must be a coroutine function (async def), "
                "as the hub awaits it"
            )


class Arbitration:
    """The hub's arbiter, and the questions it is asked.

    ``registered`` is ``None`` while the arbiter is a plain ``RuleBasedArbiter``: the core then applies
    the rules itself, synchronously (``ag2net.hub.rules``), deciding exactly what that class decides.
    """

    __slots__ = ("_current", "core", "identities", "registered")

    def __init__(self, core: HubCore, identities: IdentityTable) -> None:
        self.core = core
        self.identities = identities
        self._current: Any = None
        self.registered: Any = None

    def register(self, arbiter: HubArbiter) -> None:
        """Replace the hub's arbiter (only one is active; the latest registration wins)."""
        _check_arbiter(arbiter)
        self._current = arbiter
        self.registered = None if type(arbiter) is RuleBasedArbiter else arbiter
        self.core.default_rules = self.registered is None

    @property
    def current(self) -> HubArbiter:
        """The active arbiter (a ``RuleBasedArbiter`` until another is registered)."""
        if self._current is None:
            self._current = RuleBasedArbiter()
        return self._current

    # ---------------------------------------------------------------- questions

    async def consult(self, env: Envelope) -> None:
        """Ask a registered arbiter what it decides about ``env``, before admission: the send (§3.6 step
        2), audience ids that are not participants (it may resolve them, changing ``env.audience``) and
        each registered recipient's inbox (step 8, substantive envelopes only). Raises its refusal, or the
        admission refusal that comes before a question (the arbiter is not asked past it)."""
        arbiter = self.registered
        core = self.core
        sender = admit_sender(core, env)
        agents = self.identities.agents
        targets = []
        if env.audience:
            targets = [agents[a].passport for a in env.audience if a != env.sender_id and a in agents]
        _raise(await arbiter.authorize_send(env, sender.passport, sender.rule, targets))
        md, _ = admit_channel(core, env)
        if outsiders(md, env):  # refuses unless the arbiter resolves the unknown ids
            await self.resolve_audience(md, env, md.participant_ids())
        if is_protocol_event(env.event_type):
            return
        delivery = core.delivery
        for rid in candidates(md, env):
            rec = agents.get(rid)
            if rid != env.sender_id and rec is not None:
                decision = await arbiter.authorize_inbox(env, rec.passport, rec.rule, delivery.pending(rid))
                _raise(decision)

    async def dispatch_denials(self, md: ChannelMetadata, env: Envelope) -> set[str] | None:
        """The recipients a registered arbiter refuses this delivery to (reference §3.7); None under the
        default rules (the core's ``recipients`` then applies each recipient's ``inbound_from``).

        The sender always receives its own envelope; an arbiter that raises is logged and its
        recipient skipped: the envelope is already stored, so the poster is not failed.
        """
        arbiter = self.registered
        if arbiter is None:
            return None
        agents = self.identities.agents
        sender_id = env.sender_id
        denied: set[str] = set()
        sender = agents.get(sender_id)
        if sender is None:
            return denied
        for rid in candidates(md, env):
            rec = agents.get(rid)
            if rid == sender_id or rec is None:
                continue
            try:
                decision = await arbiter.authorize_dispatch(env, sender.passport, rec.passport, rec.rule)
            except Exception:
                log.exception(
                    "arbiter.authorize_dispatch failed for %s to %s; not delivered", env.envelope_id, rid
                )
                denied.add(rid)
                continue
            if isinstance(decision, Deny):
                denied.add(rid)
        return denied

    async def authorize_channel_open(self, request: OpenRequest) -> None:
        """Reference §3.4 step 3: the arbiter (or, by default, the rules) may refuse the channel."""
        manifest: ChannelManifest = request.adapter.manifest
        creator, invitees, active = request.creator, request.invitees, request.active
        arbiter = self.registered
        if arbiter is None:
            name = creator.passport.name
            for invitee in invitees:
                rules.check_inbound(name, invitee.passport.name, invitee.rule.access.inbound_from)
            rules.check_channel_quota(name, active, creator.rule.limits.max_concurrent_channels)
            return
        decision = await arbiter.authorize_channel_open(
            manifest,
            creator.passport,
            creator.rule,
            [i.passport for i in invitees],
            [i.rule for i in invitees],
            active,
        )
        _raise(decision)

    async def resolve_audience(self, md: ChannelMetadata, env: Envelope, participants: list[str]) -> None:
        """An audience naming ids that are not registered: a registered arbiter may resolve them.

        ``None`` (the default) keeps the refusal; a list replaces the unknown ids in ``env.audience``
        (in place, order kept, without duplicates), and every id it names must be a participant.
        """
        cid = md.channel_id
        audience = env.audience or []
        unknown = [a for a in audience if a not in self.identities.agents and a != env.sender_id]
        arbiter = self.registered
        resolved = None
        if unknown and arbiter is not None:
            resolved = await arbiter.resolve_unknown_audience(env, list(unknown))
        if resolved is None:
            for a in audience:
                if a not in participants:
                    raise ProtocolError(
                        f"audience must list only participants of the channel; {a!r} is not one of channel '{cid}'"
                    )
            return
        if isinstance(resolved, str) or not all(isinstance(r, str) for r in resolved):
            raise ProtocolError(
                f"arbiter.resolve_unknown_audience must return a list of agent ids or None, got {resolved!r}"
            )
        out: list[str] = []
        for a in audience:
            if a in unknown:
                for r in resolved:
                    if r not in out:
                        out.append(r)
            elif a not in out:
                out.append(a)
        for a in out:
            if a not in participants:
                raise ProtocolError(
                    f"audience must list only participants of the channel; {a!r} is not one of channel "
                    f"'{cid}' (the arbiter resolved {unknown!r} to {list(resolved)!r})"
                )
        env.audience = out


def _raise(decision: Decision) -> None:
    if isinstance(decision, Deny):
        raise decision.error(decision.reason)


__all__ = [
    "Allow",
    "Arbitration",
    "BaseHubArbiter",
    "Decision",
    "Deny",
    "HubArbiter",
    "RuleBasedArbiter",
]

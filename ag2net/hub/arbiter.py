"""The arbiter: the hub's decision seam for sends, inbox capacity, dispatch and channel opening.

``Allow()`` / ``Deny(reason, error=AccessDeniedError)`` are the decisions; ``HubArbiter`` is the protocol
(every method a coroutine); ``BaseHubArbiter`` allows everything, so a subclass overrides only the gates
it cares about; ``RuleBasedArbiter`` is the default and enforces each agent's ``Rule`` (access globs,
delegation depth, inbox capacity, concurrent channels) with the hub's usual sentences.

The hub consults its arbiter inside the admission pipeline, at the same points as every other check
(reference §3.4, §3.6, §3.7): a ``Deny`` makes the hub raise ``deny.error(deny.reason)``, except at
dispatch, where a denied recipient is silently skipped. ``authorize_register`` is part of the protocol
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

from ag2net.errors import AccessDeniedError, InboxFull, ProtocolError
from ag2net.hub import rules

if TYPE_CHECKING:
    from ag2net.channel import ChannelManifest, ChannelMetadata
    from ag2net.envelope import Envelope
    from ag2net.hub.records import AgentRecord
    from ag2net.identity import Passport, Resume, Rule

if TYPE_CHECKING:
    from ag2net.hub.shape import HubShape
else:
    HubShape = object

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
    """

    async def authorize_send(
        self, envelope: Envelope, sender: Passport, sender_rule: Rule, recipients: list[Passport]
    ) -> Decision:
        """Before anything else about the channel is checked; ``recipients`` are the registered
        passports of an explicit audience, the sender excluded (empty for a broadcast)."""
        ...

    async def authorize_inbox(
        self, envelope: Envelope, recipient: Passport, recipient_rule: Rule, current_pending: int
    ) -> Decision:
        """Once per registered recipient of a substantive (non-protocol) envelope."""
        ...

    async def authorize_dispatch(
        self, envelope: Envelope, sender: Passport, recipient: Passport, recipient_rule: Rule
    ) -> Decision:
        """Per recipient other than the sender, after the envelope is stored; a ``Deny`` skips it."""
        ...

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
        ...

    async def authorize_register(self, passport: Passport, resume: Resume, rule: Rule) -> Decision:
        """Part of the protocol; registration does not consult it (as in ag2 1.2.1)."""
        ...

    async def resolve_unknown_audience(self, envelope: Envelope, unknown_ids: list[str]) -> list[str] | None:
        """Audience ids that are not registered: ``None`` keeps the refusal, a list replaces them."""
        ...


class BaseHubArbiter:
    """Allows everything and resolves nothing: subclass it and override only the gates you need."""

    async def authorize_send(
        self, envelope: Envelope, sender: Passport, sender_rule: Rule, recipients: list[Passport]
    ) -> Decision:
        return _ALLOW

    async def authorize_inbox(
        self, envelope: Envelope, recipient: Passport, recipient_rule: Rule, current_pending: int
    ) -> Decision:
        return _ALLOW

    async def authorize_dispatch(
        self, envelope: Envelope, sender: Passport, recipient: Passport, recipient_rule: Rule
    ) -> Decision:
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
        return _ALLOW

    async def authorize_register(self, passport: Passport, resume: Resume, rule: Rule) -> Decision:
        return _ALLOW

    async def resolve_unknown_audience(self, envelope: Envelope, unknown_ids: list[str]) -> list[str] | None:
        return None


def _deny(reason: str | None, error: type[Exception] = AccessDeniedError) -> Decision:
    return _ALLOW if reason is None else Deny(reason, error)


class RuleBasedArbiter:
    """The default arbiter: each agent's ``Rule`` (reference §2.4). Stateless; subclass to extend.

    * send: every explicit recipient's name matches the sender's ``access.outbound_to`` (broadcasts
      skip this), and ``depth`` stays within ``limits.delegation_depth`` (0 = no cap);
    * inbox: fewer than ``limits.inbox.max_pending`` unacknowledged deliveries (0 = no cap), else
      ``InboxFull``;
    * dispatch: the sender's name matches the recipient's ``access.inbound_from``;
    * channel open: the creator's name matches every invitee's ``inbound_from``, and the creator has
      fewer live channels than ``limits.max_concurrent_channels`` (0 = no cap).
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

    async def authorize_register(self, passport: Passport, resume: Resume, rule: Rule) -> Decision:
        return _ALLOW

    async def resolve_unknown_audience(self, envelope: Envelope, unknown_ids: list[str]) -> list[str] | None:
        return None


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


class ArbiterSeat(HubShape):
    """Mixin of ``Hub``: holds the arbiter and asks it at each decision point.

    ``_arbiter_custom`` is ``None`` while the arbiter is a plain ``RuleBasedArbiter``: the hub then runs
    the rules synchronously (``ag2net.hub.rules``), which decide exactly what that class decides.
    """

    _arbiter: Any = None
    _arbiter_custom: Any = None
    _dispatch_denied: set[str] | None = None  # set only during one synchronous ``_dispatch`` call

    def register_arbiter(self, arbiter: HubArbiter) -> None:
        """Replace the hub's arbiter (only one is active; the latest registration wins)."""
        _check_arbiter(arbiter)
        self._arbiter = arbiter
        self._arbiter_custom = None if type(arbiter) is RuleBasedArbiter else arbiter
        self.core.rules = self._arbiter_custom is None  # the core then decides the rules itself

    @property
    def arbiter(self) -> HubArbiter:
        """The active arbiter (a ``RuleBasedArbiter`` until another is registered)."""
        if self._arbiter is None:
            self._arbiter = RuleBasedArbiter()
        return self._arbiter

    # ---------------------------------------------------------------- decision points

    async def _arbitrate_send(self, arbiter: Any, env: Envelope, sender: AgentRecord) -> None:
        """Reference §3.6 step 2 with a registered arbiter."""
        agents = self.agents
        recipients = []
        if env.audience:
            sender_id = env.sender_id
            recipients = [agents[a].passport for a in env.audience if a != sender_id and a in agents]
        decision = await arbiter.authorize_send(env, sender.passport, sender.rule, recipients)
        if isinstance(decision, Deny):
            raise decision.error(decision.reason)

    async def _arbitrate_inbox(
        self, arbiter: Any, env: Envelope, recipient: AgentRecord, pending: int
    ) -> None:
        """Reference §3.6 step 8 (one recipient) with a registered arbiter."""
        decision = await arbiter.authorize_inbox(env, recipient.passport, recipient.rule, pending)
        if isinstance(decision, Deny):
            raise decision.error(decision.reason)

    async def _dispatch_arbitrated(self, md: ChannelMetadata, env: Envelope) -> None:
        """Dispatch ``env`` to the recipients a registered arbiter does not refuse.

        ``_dispatch`` is synchronous, so the refusals set here are seen by this call only.
        """
        denied = await self._dispatch_denials(md, env)
        self._dispatch_denied = denied
        try:
            self._dispatch(md, env)
        finally:
            self._dispatch_denied = None

    async def _dispatch_denials(self, md: ChannelMetadata, env: Envelope) -> set[str]:
        """The recipients a registered arbiter refuses this delivery to (reference §3.7).

        The sender always receives its own envelope; an arbiter that raises is logged and its
        recipient skipped: the envelope is already stored, so the poster is not failed.
        """
        arbiter = self._arbiter_custom
        sender_id = env.sender_id
        recipients = (
            env.audience if env.audience is not None else [p for p in md.participant_ids() if p != sender_id]
        )
        denied: set[str] = set()
        sender = self.agents.get(sender_id)
        if arbiter is None or sender is None:
            return denied
        for rid in recipients:
            rec = self.agents.get(rid)
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

    async def _authorize_channel_open(
        self, manifest: ChannelManifest, creator: AgentRecord, invitees: list[AgentRecord], active: int
    ) -> None:
        """Reference §3.4 step 3: the arbiter (or, by default, the rules) may refuse the channel."""
        arbiter = self._arbiter_custom
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
        if isinstance(decision, Deny):
            raise decision.error(decision.reason)

    async def _resolve_audience(self, md: ChannelMetadata, env: Envelope, participants: list[str]) -> None:
        """An audience naming ids that are not registered: a registered arbiter may resolve them.

        ``None`` (the default) keeps the refusal; a list replaces the unknown ids in ``env.audience``
        (in place, order kept, without duplicates), and every id it names must be a participant.
        """
        cid = md.channel_id
        audience = env.audience or []
        unknown = [a for a in audience if a not in self.agents and a != env.sender_id]
        arbiter = self._arbiter_custom
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


__all__ = [
    "Allow",
    "ArbiterSeat",
    "BaseHubArbiter",
    "Decision",
    "Deny",
    "HubArbiter",
    "RuleBasedArbiter",
]

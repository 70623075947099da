"""Core: records and constants the hub modules share — agent records, pending turns, the built-in violation handlers (and ``ViolationTarget``, what a handler acts on)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from ag2net.channel import (
    ChannelMetadata,
    ChannelState,
)
from ag2net.envelope import (
    EV_EXPECTATION_VIOLATED,
    Envelope,
)
from ag2net.errors import NetworkError
from ag2net.identity import (
    Passport,
    Resume,
    Rule,
)
from ag2net.protocol.records import PendingTurn
from ag2net.tasks import TaskState

log = logging.getLogger(__name__)

TERMINAL = (ChannelState.CLOSED, ChannelState.EXPIRED)
SNAPSHOT_KEY = "hub.hydrate_snapshot"
TERMINAL_TASKS = (TaskState.COMPLETED, TaskState.FAILED, TaskState.EXPIRED, TaskState.CANCELLED)


@dataclass(slots=True)
class AgentRecord:
    passport: Passport
    resume: Resume
    rule: Rule
    skill_md: str | None = None
    owners: list[str] = field(default_factory=list)
    #: The hash of the identity secret a token server issued (``ag2net.hub.auth.secret_digest``), kept in
    #: the agent's own record so it is written in the same transaction as the identity.
    secret_digest: str | None = None


class ViolationTarget(Protocol):
    """What a violation handler acts on (the hub)."""

    @property
    def channels(self) -> Mapping[str, ChannelMetadata]: ...

    async def post_envelope(self, envelope: Envelope) -> str: ...

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata: ...


class AuditHandler:
    """Violation handler ``audit``: nothing to do, the sweeper already wrote the audit record (it writes
    one for every violation, whatever its handler)."""

    name = "audit"

    async def handle(self, hub: ViolationTarget, channel_id: str, violation: Any) -> None:
        return None


class _LiveChannelHandler:
    """A violation handler that acts on the channel while it is live; the hub refusing the act (the
    channel closed meanwhile, the creator left) is not the sweeper's failure."""

    async def handle(self, hub: ViolationTarget, channel_id: str, violation: Any) -> None:
        md = hub.channels.get(channel_id)
        if md is None or md.is_terminal():
            return
        with contextlib.suppress(NetworkError):
            await self.act(hub, md, violation)

    async def act(self, hub: ViolationTarget, md: ChannelMetadata, violation: Any) -> None:
        raise NotImplementedError


class NotifyChannelHandler(_LiveChannelHandler):
    """Violation handler ``notify_channel``: post ``EV_EXPECTATION_VIOLATED`` into the channel."""

    name = "notify_channel"

    async def act(self, hub: ViolationTarget, md: ChannelMetadata, violation: Any) -> None:
        await hub.post_envelope(
            Envelope(
                channel_id=md.channel_id,
                sender_id=md.creator_id,
                audience=None,
                event_type=EV_EXPECTATION_VIOLATED,
                event_data={
                    "expectation": violation.expectation.name,
                    "violators": list(violation.violator_ids),
                    "detail": dict(violation.detail),
                },
            )
        )


class AutoCloseHandler(_LiveChannelHandler):
    """Violation handler ``auto_close``: close the channel with ``expectation_violated:{name}``."""

    name = "auto_close"

    async def act(self, hub: ViolationTarget, md: ChannelMetadata, violation: Any) -> None:
        await hub.close_channel(md.channel_id, reason=f"expectation_violated:{violation.expectation.name}")


def default_handlers() -> list[Any]:
    """The three built-in violation handlers, fresh instances: ``audit``, ``notify_channel``,
    ``auto_close``."""
    return [AuditHandler(), NotifyChannelHandler(), AutoCloseHandler()]


__all__ = [
    "SNAPSHOT_KEY",
    "TERMINAL",
    "TERMINAL_TASKS",
    "AgentRecord",
    "AuditHandler",
    "AutoCloseHandler",
    "NotifyChannelHandler",
    "PendingTurn",
    "ViolationTarget",
    "default_handlers",
]

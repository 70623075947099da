"""The channel data model: manifest, participants, metadata and state, in ag2 1.2.1's record shapes.

Plain mutable records with ``to_dict``/``from_dict`` (enums as their values, manifest nested), shared by the
hub, the adapters, the store and the wire. ``from_dict(x.to_dict()) == x`` holds for every record here. They
are lenient ``Record``s, as ag2 1.2.1 reads them: unknown keys are ignored, missing optional ones take their
defaults, ``null`` lists and dicts read as empty.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ag2net.record import Record, wire


class ChannelState(StrEnum):
    """Lifecycle of a channel. ``CLOSING`` is held in memory only, while the hub makes a close durable
    (the closing envelope, then the channel's row): nothing new starts, and ``CLOSED``/``EXPIRED`` are
    seen only once the WAL holds the close."""

    PENDING = "pending"
    ACTIVE = "active"
    CLOSING = "closing"
    CLOSED = "closed"
    EXPIRED = "expired"


TERMINAL_STATES: frozenset[ChannelState] = frozenset({ChannelState.CLOSED, ChannelState.EXPIRED})


class ParticipantRole(StrEnum):
    """A participant's role: the creator initiates; in a two-party channel the other one responds."""

    INITIATOR = "initiator"
    RESPONDENT = "respondent"
    PARTICIPANT = "participant"


class _ChannelRecord(Record):
    """A record of a channel's description: read leniently, as ag2 1.2.1 reads it (see ``ag2net.record``)."""

    __slots__ = ()

    _wire_strict = False


@dataclass(slots=True)
class ParticipantSchema(_ChannelRecord):
    """How many participants a channel type takes (``max=None`` is unbounded) and the roles it names."""

    _wire_label = "participant schema"

    min: int
    max: int | None = None
    roles: list[str] = field(default_factory=list)

    def copy(self) -> ParticipantSchema:
        return ParticipantSchema(self.min, self.max, list(self.roles))


@dataclass(slots=True)
class Expectation(_ChannelRecord):
    """A liveness rule the hub's sweeper evaluates (``name``) and what to do when it fires."""

    _wire_label = "expectation"

    name: str
    on_violation: str
    params: dict[str, Any] = field(default_factory=dict)
    applies_to: str | None = None

    def copy(self) -> Expectation:
        return Expectation(self.name, self.on_violation, copy.deepcopy(self.params), self.applies_to)


@dataclass(slots=True)
class ChannelManifest(_ChannelRecord):
    """A channel type's static description; snapshotted into the metadata when a channel is created."""

    _wire_label = "channel manifest"

    type: str
    version: int = 1
    participants: ParticipantSchema = field(default_factory=lambda: ParticipantSchema(min=2))
    knobs_schema: dict[str, str] = field(default_factory=dict)
    default_view_policy: str = "full_transcript"
    expectations: list[Expectation] = field(default_factory=list)

    def copy(self) -> ChannelManifest:
        return ChannelManifest(
            self.type,
            self.version,
            self.participants.copy(),
            dict(self.knobs_schema),
            self.default_view_policy,
            [e.copy() for e in self.expectations],
        )


@dataclass(slots=True)
class Participant(_ChannelRecord):
    """One member of a channel: its id, role, position in the channel's order, and when it joined."""

    _wire_label = "participant"

    agent_id: str
    role: ParticipantRole
    order: int
    joined_at: str = ""

    def copy(self) -> Participant:
        return Participant(self.agent_id, self.role, self.order, self.joined_at)


@dataclass(slots=True)
class ChannelMetadata(_ChannelRecord):
    """Everything the hub knows about one channel besides its WAL and adapter state."""

    _wire_label = "channel metadata"

    channel_id: str
    manifest: ChannelManifest
    creator_id: str
    participants: list[Participant]
    state: ChannelState = field(metadata=wire(what="channel state"))
    created_at: str
    expires_at: str | None = None
    closed_at: str | None = None
    close_reason: str = ""
    parent_channel_id: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    labels: dict[str, Any] = field(default_factory=dict)
    required_acks: int | None = None
    pending_acks: list[str] = field(default_factory=list)
    rejected_by: list[str] = field(default_factory=list)

    def participant_ids(self) -> list[str]:
        """Participant ids in channel order."""
        return [p.agent_id for p in self.participants]

    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def participant(self, agent_id: str) -> Participant | None:
        for p in self.participants:
            if p.agent_id == agent_id:
                return p
        return None

    def role_of(self, agent_id: str) -> ParticipantRole | None:
        p = self.participant(agent_id)
        return None if p is None else p.role

    def copy(self) -> ChannelMetadata:
        """An independent copy: mutating its lists, dicts or nested records leaves this one alone."""
        return ChannelMetadata(
            channel_id=self.channel_id,
            manifest=self.manifest.copy(),
            creator_id=self.creator_id,
            participants=[p.copy() for p in self.participants],
            state=self.state,
            created_at=self.created_at,
            expires_at=self.expires_at,
            closed_at=self.closed_at,
            close_reason=self.close_reason,
            parent_channel_id=self.parent_channel_id,
            knobs=copy.deepcopy(self.knobs),
            labels=copy.deepcopy(self.labels),
            required_acks=self.required_acks,
            pending_acks=list(self.pending_acks),
            rejected_by=list(self.rejected_by),
        )


@dataclass(slots=True)
class AdapterResult:
    """What an adapter asks of the hub after accepting an envelope (e.g. close with a reason)."""

    next_state: ChannelState | None = None
    auto_close_reason: str = ""


@dataclass(slots=True)
class ExpectedTurn:
    """Whose turn it is in a channel, and the envelope that handed it to them (if any)."""

    agent_id: str
    triggering_envelope_id: str | None = None


__all__ = [
    "TERMINAL_STATES",
    "AdapterResult",
    "ChannelManifest",
    "ChannelMetadata",
    "ChannelState",
    "Expectation",
    "ExpectedTurn",
    "Participant",
    "ParticipantRole",
    "ParticipantSchema",
]

"""The channel data model: manifest, participants, metadata and state, in ag2 1.2.1's record shapes.

Plain mutable records with ``to_dict``/``from_dict`` (enums as their values, manifest nested), shared by the
hub, the adapters, the store and the wire. ``from_dict(x.to_dict()) == x`` holds for every record here.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from ag2net.errors import ProtocolError


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


def _require(data: Any, what: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ProtocolError(f"{what} must be a JSON object, got {type(data).__name__}")
    for key in keys:
        if key not in data:
            raise ProtocolError(f"{what} is missing required field {key!r}")
    return data


def _state(value: Any) -> ChannelState:
    try:
        return ChannelState(value)
    except ValueError:
        choices = [s.value for s in ChannelState]
        raise ProtocolError(f"channel state must be one of {choices}, got {value!r}") from None


def _role(value: Any) -> ParticipantRole:
    try:
        return ParticipantRole(value)
    except ValueError:
        choices = [r.value for r in ParticipantRole]
        raise ProtocolError(f"participant role must be one of {choices}, got {value!r}") from None


@dataclass(slots=True)
class ParticipantSchema:
    """How many participants a channel type takes (``max=None`` is unbounded) and the roles it names."""

    min: int
    max: int | None = None
    roles: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"min": self.min, "max": self.max, "roles": list(self.roles)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ParticipantSchema:
        data = _require(data, "participant schema", ("min",))
        return cls(min=data["min"], max=data.get("max"), roles=list(data.get("roles") or []))

    def copy(self) -> ParticipantSchema:
        return ParticipantSchema(self.min, self.max, list(self.roles))


@dataclass(slots=True)
class Expectation:
    """A liveness rule the hub's sweeper evaluates (``name``) and what to do when it fires."""

    name: str
    on_violation: str
    params: dict[str, Any] = field(default_factory=dict)
    applies_to: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "on_violation": self.on_violation,
            "params": copy.deepcopy(self.params),
            "applies_to": self.applies_to,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Expectation:
        data = _require(data, "expectation", ("name", "on_violation"))
        return cls(
            name=data["name"],
            on_violation=data["on_violation"],
            params=copy.deepcopy(data.get("params") or {}),
            applies_to=data.get("applies_to"),
        )

    def copy(self) -> Expectation:
        return Expectation(self.name, self.on_violation, copy.deepcopy(self.params), self.applies_to)


@dataclass(slots=True)
class ChannelManifest:
    """A channel type's static description; snapshotted into the metadata when a channel is created."""

    type: str
    version: int = 1
    participants: ParticipantSchema = field(default_factory=lambda: ParticipantSchema(min=2))
    knobs_schema: dict[str, str] = field(default_factory=dict)
    default_view_policy: str = "full_transcript"
    expectations: list[Expectation] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "version": self.version,
            "participants": self.participants.to_dict(),
            "knobs_schema": dict(self.knobs_schema),
            "default_view_policy": self.default_view_policy,
            "expectations": [e.to_dict() for e in self.expectations],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChannelManifest:
        data = _require(data, "channel manifest", ("type",))
        participants = data.get("participants")
        return cls(
            type=data["type"],
            version=data.get("version", 1),
            participants=ParticipantSchema(min=2)
            if participants is None
            else ParticipantSchema.from_dict(participants),
            knobs_schema=dict(data.get("knobs_schema") or {}),
            default_view_policy=data.get("default_view_policy", "full_transcript"),
            expectations=[Expectation.from_dict(e) for e in data.get("expectations") or []],
        )

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
class Participant:
    """One member of a channel: its id, role, position in the channel's order, and when it joined."""

    agent_id: str
    role: ParticipantRole
    order: int
    joined_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent_id": self.agent_id,
            "role": self.role.value,
            "order": self.order,
            "joined_at": self.joined_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Participant:
        data = _require(data, "participant", ("agent_id", "role", "order"))
        return cls(
            agent_id=data["agent_id"],
            role=_role(data["role"]),
            order=data["order"],
            joined_at=data.get("joined_at", ""),
        )

    def copy(self) -> Participant:
        return Participant(self.agent_id, self.role, self.order, self.joined_at)


@dataclass(slots=True)
class ChannelMetadata:
    """Everything the hub knows about one channel besides its WAL and adapter state."""

    channel_id: str
    manifest: ChannelManifest
    creator_id: str
    participants: list[Participant]
    state: ChannelState
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "manifest": self.manifest.to_dict(),
            "creator_id": self.creator_id,
            "participants": [p.to_dict() for p in self.participants],
            "state": self.state.value,
            "created_at": self.created_at,
            "expires_at": self.expires_at,
            "closed_at": self.closed_at,
            "close_reason": self.close_reason,
            "parent_channel_id": self.parent_channel_id,
            "knobs": copy.deepcopy(self.knobs),
            "labels": copy.deepcopy(self.labels),
            "required_acks": self.required_acks,
            "pending_acks": list(self.pending_acks),
            "rejected_by": list(self.rejected_by),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChannelMetadata:
        data = _require(
            data,
            "channel metadata",
            ("channel_id", "manifest", "creator_id", "participants", "state", "created_at"),
        )
        participants = data["participants"]
        if not isinstance(participants, list):
            raise ProtocolError(
                f"channel metadata participants must be a list, got {type(participants).__name__}"
            )
        return cls(
            channel_id=data["channel_id"],
            manifest=ChannelManifest.from_dict(data["manifest"]),
            creator_id=data["creator_id"],
            participants=[Participant.from_dict(p) for p in participants],
            state=_state(data["state"]),
            created_at=data["created_at"],
            expires_at=data.get("expires_at"),
            closed_at=data.get("closed_at"),
            close_reason=data.get("close_reason", ""),
            parent_channel_id=data.get("parent_channel_id"),
            knobs=copy.deepcopy(data.get("knobs") or {}),
            labels=copy.deepcopy(data.get("labels") or {}),
            required_acks=data.get("required_acks"),
            pending_acks=list(data.get("pending_acks") or []),
            rejected_by=list(data.get("rejected_by") or []),
        )

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

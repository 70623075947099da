"""``ObservedEvent``: one entry of the observe stream, the same object in-process and over the wire."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.envelope import Envelope


@dataclass(slots=True)
class ObservedEvent:
    """One entry of the observe stream."""

    position: int
    kind: str  # "envelope" | "channel" | "agent" | "audit"
    channel_id: str | None = None
    seq: int | None = None
    envelope: Envelope | None = None
    payload: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "kind": self.kind,
            "channel_id": self.channel_id,
            "seq": self.seq,
            "envelope": None if self.envelope is None else self.envelope.to_dict(),
            "payload": self.payload,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObservedEvent:
        env = data.get("envelope")
        return cls(
            position=int(data["position"]),
            kind=str(data["kind"]),
            channel_id=data.get("channel_id"),
            seq=data.get("seq"),
            envelope=None if env is None else (env if isinstance(env, Envelope) else Envelope.from_dict(env)),
            payload=dict(data.get("payload") or {}),
        )


__all__ = ["ObservedEvent"]

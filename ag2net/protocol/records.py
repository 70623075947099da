"""Small records that only cross the op boundary (results of ops, not envelopes or directory records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class PendingTurn:
    """A turn the hub expects of an agent: the channel, the envelope that triggered it, since when."""

    channel_id: str
    triggering_envelope_id: str | None
    expected_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "triggering_envelope_id": self.triggering_envelope_id,
            "expected_at": self.expected_at,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingTurn:
        return cls(
            channel_id=str(data["channel_id"]),
            triggering_envelope_id=data.get("triggering_envelope_id"),
            expected_at=str(data.get("expected_at") or ""),
        )


__all__ = ["PendingTurn"]

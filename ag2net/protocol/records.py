"""Small records that only cross the op boundary (results of ops, not envelopes or directory records)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ag2net.record import Record


@dataclass(slots=True)
class PendingTurn(Record):
    """A turn the hub expects of an agent: the channel, the envelope that triggered it, since when."""

    channel_id: str
    triggering_envelope_id: str | None
    expected_at: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PendingTurn:
        # lenient as ag2 1.2.1 reads it: only the channel id is required, ids and times are read as text
        return cls(
            channel_id=str(data["channel_id"]),
            triggering_envelope_id=data.get("triggering_envelope_id"),
            expected_at=str(data.get("expected_at") or ""),
        )


__all__ = ["PendingTurn"]

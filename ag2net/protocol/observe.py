"""``ObservedEvent``: one entry of the observe stream, the same object in-process and over the wire."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.envelope import Envelope
from ag2net.record import Record, wire


@dataclass(slots=True)
class ObservedEvent(Record):
    """One entry of the observe stream (a lenient ``Record``: unknown keys ignored, ``payload: null`` is ``{}``)."""

    _wire_strict = False

    position: int = field(metadata=wire(decode=int))
    kind: str = field(metadata=wire(decode=str))  # "envelope" | "channel" | "agent" | "audit"
    channel_id: str | None = None
    seq: int | None = None
    envelope: Envelope | None = None
    payload: dict[str, Any] = field(default_factory=dict)


__all__ = ["ObservedEvent"]

"""The workbench's view-models: plain data the widgets render and the live feed and ``HubSource`` produce.

Nothing here imports Textual, so the feed, the source and their tests can use these without a UI.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ag2net.client.turns import TurnPreview, TurnRecord
from ag2net.envelope import Envelope
from ag2net.events import BaseEvent
from ag2net.identity import Passport, Resume
from tui.formatting import channel_label

TailItem = tuple[Envelope, int, str]
"""(envelope, per-channel seq, channel label): what the source reads and the feed batches."""


class TailRow(NamedTuple):
    """One row of the tail: what it renders and the envelope the detail screen opens."""

    seq: int | None
    envelope: Envelope
    channel: str


@dataclass(slots=True)
class ChannelRow:
    """What the channel list shows about one channel."""

    channel_id: str
    type: str
    state: str
    participants: list[str] = field(default_factory=list)
    count: int = 0
    last_activity: str = ""
    close_reason: str = ""
    participant_ids: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return channel_label(self.type, self.channel_id)

    def matches(self, query: str) -> bool:
        hay = " ".join(
            [self.type, self.state, self.channel_id, *self.participants, self.close_reason]
        ).lower()
        return all(word in hay for word in query.lower().split())


@dataclass(slots=True)
class PeerInfo:
    """Everything a peer card shows about one registered identity."""

    passport: Passport
    resume: Resume
    skill_md: str
    generated: bool = False

    @property
    def agent_id(self) -> str:
        return self.passport.agent_id or ""

    @property
    def name(self) -> str:
        return self.passport.name

    def capabilities(self) -> list[str]:
        return self.resume.capabilities()

    def matches(self, query: str) -> bool:
        """``cap:x`` (or ``capability:x``) terms must be capabilities; other words must appear somewhere."""
        for word in query.lower().split():
            key, sep, value = word.partition(":")
            if sep and key in ("cap", "capability"):
                if not any(value in c.lower() for c in self.capabilities()):
                    return False
            elif sep and key == "kind":
                if self.passport.effective_kind != value:
                    return False
            elif word not in self._haystack():
                return False
        return True

    def _haystack(self) -> str:
        parts = [
            self.name,
            self.resume.summary,
            " ".join(self.capabilities()),
            " ".join(self.resume.domains),
            self.skill_md,
        ]
        return "\n".join(parts).lower()


@dataclass(slots=True)
class ProjectionData:
    """What the agent view shows for one (channel, participant, view) choice."""

    channel_id: str
    participant_id: str
    in_force: dict[str, Any]
    preview: TurnPreview
    turn: TurnRecord | None = None
    replay: list[BaseEvent] | None = None


__all__ = ["ChannelRow", "PeerInfo", "ProjectionData", "TailItem", "TailRow"]

"""The workbench's view-models: plain data the widgets render and the live feed and ``HubSource`` produce.

Nothing here imports Textual, so the feed, the source and their tests can use these without a UI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ag2net.client.turns import TurnPreview, TurnRecord
from ag2net.envelope import Envelope
from ag2net.events import BaseEvent
from ag2net.filtering import words_match
from ag2net.identity import Passport, Resume
from tui.formatting import channel_label, channel_labels

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
        return words_match(
            query, [self.type, self.state, self.channel_id, *self.participants, self.close_reason]
        )


def channel_labels_for(rows: Iterable[ChannelRow]) -> dict[str, str]:
    """``{channel_id: label}`` for ``rows``, each label unique among them (``ag2net.naming.channel_labels``:
    the same number of id digits for all, the fewest that tell them apart)."""
    return channel_labels((row.type, row.channel_id) for row in rows)


class ActivityLedger:
    """Per channel, the envelope count and last activity the channel list shows.

    Counts come from two places: a fresh read of every channel (``HubSource.load_channels``) and the
    envelopes the live feed observes. Both are *absolute* here (a WAL count, an envelope's seq — its
    position in the WAL), and the ledger keeps the highest of each, so an envelope counted by a read and
    observed again is counted once, and the last activity never moves backwards (a channel's metadata
    carries only its creation time). The feed's messages settle against the ledger when the app handles
    them, so what the ledger holds is what the list shows.
    """

    __slots__ = ("_count", "_last")

    def __init__(self) -> None:
        self._count: dict[str, int] = {}
        self._last: dict[str, str] = {}

    def absorb(self, channel_id: str, count: int, last: str) -> tuple[int, str]:
        """Take an absolute reading; returns what the list should show now (never less than before)."""
        shown = max(count, self._count.get(channel_id, 0))
        newest = max(last, self._last.get(channel_id, ""))
        self._count[channel_id] = shown
        self._last[channel_id] = newest
        return shown, newest

    def advance(self, channel_id: str, seq: int, last: str) -> tuple[int, str]:
        """Envelopes observed up to ``seq``: returns (how many the list has not counted yet, last activity)."""
        before = self._count.get(channel_id, 0)
        shown, newest = self.absorb(channel_id, seq, last)
        return shown - before, newest

    def get(self, channel_id: str) -> tuple[int, str] | None:
        """(count, last activity) shown for ``channel_id``, None before any reading."""
        if channel_id not in self._count:
            return None
        return self._count[channel_id], self._last.get(channel_id, "")


@dataclass(slots=True)
class PeerInfo:
    """Everything a peer card shows about one registered identity.

    ``online``: whether the identity is bound to a live connection of the hub (True / False), or None
    when the hub does not say (a hub without the ``presence`` op: see ``HubSource.load_peers``).
    """

    passport: Passport
    resume: Resume
    skill_md: str
    generated: bool = False
    online: bool | None = None

    @property
    def agent_id(self) -> str:
        return self.passport.agent_id or ""

    @property
    def name(self) -> str:
        return self.passport.name

    def capabilities(self) -> list[str]:
        return self.resume.capabilities()

    def matches(self, query: str) -> bool:
        """``cap:x`` (or ``capability:x``) terms must be capabilities, ``kind:x`` the kind, ``is:online`` /
        ``is:offline`` the presence (unknown presence matches neither); other words must appear somewhere."""
        for word in query.lower().split():
            key, sep, value = word.partition(":")
            if sep and key in ("cap", "capability"):
                if not any(value in c.lower() for c in self.capabilities()):
                    return False
            elif sep and key == "kind":
                if self.passport.effective_kind != value:
                    return False
            elif sep and key == "is" and value in ("online", "offline"):
                if self.online is not (value == "online"):
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
    turns: list[TurnRecord] = field(default_factory=list)
    """The participant's recorded turns on this channel, oldest first (the newest ``TURN_LIMIT`` at most);
    ``turn`` is the one ``replay`` re-projects (the newest unless another was asked for)."""
    turns_capped: bool = False
    """More turns are recorded than ``turns`` holds (only the newest were read)."""

    @property
    def turn_index(self) -> int | None:
        """Where ``turn`` sits in ``turns`` (None when there is no turn)."""
        if self.turn is None:
            return None
        for index, record in enumerate(self.turns):
            if record.turn_id == self.turn.turn_id:
                return index
        return None


__all__ = [
    "ActivityLedger",
    "ChannelRow",
    "PeerInfo",
    "ProjectionData",
    "TailItem",
    "TailRow",
    "channel_labels_for",
]

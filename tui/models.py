"""The workbench's view-models: plain data the widgets render and the live feed and ``HubSource`` produce.

Nothing here imports Textual, so the feed, the source and their tests can use these without a UI.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ag2net.breakpoints import WaitingItem
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
    cost: str = ""
    """What the channel's recorded turns cost (``tui.widgets.cost_view.channel_cost_text``): ``$0.42``,
    ``~$0.42`` when part is an estimate, ``""`` when no turn is priced."""

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
    seq_of: Any = None
    """``ag2net.cache_diff.SeqOf`` for this channel: a projected message's text to its envelope's seq (set
    when a windowed view's slide explains a fall of the cache read, so the Cost tab names the seqs)."""

    @property
    def turn_index(self) -> int | None:
        """Where ``turn`` sits in ``turns`` (None when there is no turn)."""
        if self.turn is None:
            return None
        for index, record in enumerate(self.turns):
            if record.turn_id == self.turn.turn_id:
                return index
        return None


# ---------------------------------------------------------------------------------------------- the inbox

#: The kinds of inbox entries, in the order the inbox lists them: held posts, paused turns, approvals (the
#: hub's waiting items), the human's own turns in channels, and invites waiting for an answer.
INBOX_KINDS = ("held", "turn", "approval", "your_turn", "invite")


@dataclass(slots=True)
class InboxEntry:
    """One thing waiting for the person at the keyboard.

    ``key``: the hub's ``item_id`` for a held post, a paused turn or an approval; ``turn:CHANNEL`` for the
    human's turn in a channel; ``invite:ENVELOPE_ID`` for an invite. ``item`` is the hub's
    ``WaitingItem`` (None for the last two); ``envelope`` the held post (as it would be admitted) or the
    invite; ``due``: when a ``reply_within`` runs out, on the workbench's clock (None when unknown).
    """

    key: str
    kind: str
    channel_id: str
    agent_id: str
    created_at: str = ""
    item: WaitingItem | None = None
    envelope: Envelope | None = None
    due: float | None = None
    due_kind: str = "reply_within"
    """The expectation whose deadline ``due`` is (the nearest one, for a held post)."""
    seen_at: float = 0.0
    """When the hub last described the entry, on the workbench's clock (a held post's ``deadlines``
    count their ``seconds_left`` from then)."""

    @property
    def would_be_seq(self) -> int | None:
        seq = self.item.detail.get("would_be_seq") if self.item is not None else None
        return seq if isinstance(seq, int) else None

    @property
    def refused(self) -> str:
        return str(self.item.detail.get("refused") or "") if self.item is not None else ""


def held_entry(item: WaitingItem, now: float) -> InboxEntry:
    """The inbox entry of one of the hub's waiting items (its envelope read from ``detail``)."""
    envelope = None
    raw = item.detail.get("envelope")
    if isinstance(raw, Envelope):
        envelope = raw
    elif isinstance(raw, dict):
        try:
            envelope = Envelope.from_dict(raw)
        except (TypeError, ValueError, KeyError):
            envelope = None
    due, due_kind = None, "reply_within"
    for deadline in item.detail.get("deadlines") or []:
        left = deadline.get("seconds_left") if isinstance(deadline, dict) else None
        if isinstance(left, (int, float)) and (due is None or now + float(left) < due):
            due, due_kind = now + float(left), str(deadline.get("kind") or "a deadline")
    return InboxEntry(
        item.item_id,
        item.kind,
        item.channel_id,
        item.agent_id,
        item.created_at,
        item,
        envelope,
        due,
        due_kind,
        now,
    )


class Inbox:
    """Every ``InboxEntry`` by key, in arrival order; what the inbox screen lists and the status bar counts."""

    __slots__ = ("_entries", "version")

    def __init__(self) -> None:
        self._entries: dict[str, InboxEntry] = {}
        self.version = 0
        """Grows on every change (the screen and the tail repaint when it moved)."""

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get(self, key: str) -> InboxEntry | None:
        return self._entries.get(key)

    def entries(self) -> list[InboxEntry]:
        """The entries by kind (``INBOX_KINDS``), oldest first within a kind."""
        order = {kind: i for i, kind in enumerate(INBOX_KINDS)}
        return sorted(self._entries.values(), key=lambda e: order.get(e.kind, len(order)))

    def held(self) -> list[InboxEntry]:
        """The held posts, oldest first."""
        return [e for e in self._entries.values() if e.kind == "held"]

    def put(self, entry: InboxEntry) -> bool:
        """Add or replace ``entry``; True when its key is new."""
        new = entry.key not in self._entries
        self._entries[entry.key] = entry
        self.version += 1
        return new

    def drop(self, key: str) -> InboxEntry | None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.version += 1
        return entry

    def apply(self, change: str, item: WaitingItem, now: float) -> bool:
        """One ``waiting`` event of the observe stream; True when it added an entry not listed before."""
        if change in ("answered", "cancelled") or item.state != "waiting":
            self.drop(item.item_id)
            return False
        return self.put(held_entry(item, now))

    def set_waiting(self, items: Iterable[WaitingItem], now: float) -> list[InboxEntry]:
        """The hub's waiting items as listed now (replacing those held before); returns the new ones."""
        keep = {e.key: e for e in self._entries.values() if e.kind not in ("held", "turn", "approval")}
        before = self._entries
        self._entries = keep
        fresh = []
        for item in items:
            if item.state != "waiting":
                continue
            entry = held_entry(item, now)
            self._entries[entry.key] = entry
            if entry.key not in before:
                fresh.append(entry)
        self.version += 1
        return fresh

    def set_your_turns(self, entries: Iterable[InboxEntry]) -> list[InboxEntry]:
        """The human's turns as the hub lists them now; returns the ones not listed before."""
        fresh = []
        wanted = {e.key: e for e in entries}
        for key in [k for k, e in self._entries.items() if e.kind == "your_turn" and k not in wanted]:
            del self._entries[key]
        for key, entry in wanted.items():
            old = self._entries.get(key)
            if old is None:
                fresh.append(entry)
            elif old.due is not None and entry.due is None:
                entry.due = old.due
            self._entries[key] = entry
        self.version += 1
        return fresh

    def drop_channel(self, channel_id: str, kind: str) -> None:
        """Forget the entries of ``kind`` in ``channel_id`` (an invite answered, a channel closed)."""
        for key in [k for k, e in self._entries.items() if e.kind == kind and e.channel_id == channel_id]:
            self.drop(key)


__all__ = [
    "INBOX_KINDS",
    "ActivityLedger",
    "ChannelRow",
    "Inbox",
    "InboxEntry",
    "PeerInfo",
    "ProjectionData",
    "TailItem",
    "TailRow",
    "channel_labels_for",
    "held_entry",
]

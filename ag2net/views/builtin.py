"""The four built-in views: full or windowed transcripts, with or without ``[name]:`` speaker labels.

Rules shared by all four: an envelope is kept when ``visible_to(env, participant_id)`` and the adapter's
renderer returns a string (``""`` included). The participant's own envelopes become ``ModelMessage(text)``;
anyone else's become ``ModelRequest([TextInput(text)])``, prefixed ``"[{name}]: "`` in the named variants.

Cost. The transcripts are O(len(wal)). The windowed views, given a ``WalSlice``/``WalLog`` (see
``ag2net.views.wal``), cost O(window + log n + distinct speakers) plus indexing the envelopes appended since
that participant last projected with that renderer; given a plain list they walk back from the end only
until the window is full, then count the elided prefix (visible, rendered envelopes and their speakers)
with one forward pass, which is O(len(wal)).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import TYPE_CHECKING, Any, ClassVar

from ag2net.envelope import Envelope
from ag2net.events import BaseEvent, CompactionSummary, ModelMessage, ModelRequest, TextInput
from ag2net.views.base import EnvelopeRenderer, NameResolver, ViewPolicy, default_name_resolver
from ag2net.views.wal import backing

if TYPE_CHECKING:
    from ag2net.channel import ChannelMetadata


def _visible(env: Envelope, participant_id: str) -> bool:
    audience = env.audience
    return env.sender_id == participant_id or audience is None or participant_id in audience


def _event(env: Envelope, text: str, participant_id: str, name_for: NameResolver | None) -> BaseEvent:
    if env.sender_id == participant_id:
        return ModelMessage(text)
    if name_for is not None:
        text = f"[{name_for(env.sender_id)}]: {text}"
    return ModelRequest([TextInput(text)])


def summary_text(count: int, speakers: Iterable[str]) -> str:
    """The compaction placeholder's text, e.g. ``"Earlier in this channel: 3 messages from A, B, C."``."""
    plural = "s" if count != 1 else ""
    return f"Earlier in this channel: {count} message{plural} from {', '.join(sorted(set(speakers)))}."


def window(
    wal: Iterable[Envelope], participant_id: str, render: EnvelopeRenderer, recent_n: int
) -> tuple[int, list[str], list[tuple[Envelope, str]]]:
    """(elided count, elided sender ids, last ``recent_n`` visible rendered envelopes with their text)."""
    items, end, log = backing(wal)
    if log is not None:
        try:
            hash(render)
        except TypeError:
            log = None
    if log is not None:
        idx = log.visible_index(participant_id, render, end)
        hi = idx.count_before(end)
        lo = max(0, hi - recent_n)
        positions = idx.positions_between(lo, hi)
        if positions is None:  # the window reaches envelopes the index forgot when the log was trimmed
            idx = log.rebuild_index(participant_id, render, end)
            positions = idx.positions_between(lo, hi)
            assert positions is not None
        kept: list[tuple[Envelope, str]] = []
        for pos in positions:
            env = items[pos]
            text = render(env)
            if text is not None:
                kept.append((env, text))
        speakers = [sender for sender, first in idx.first_seen.items() if first < lo]
        return lo, speakers, kept
    kept = []
    i = end - 1
    while i >= 0 and len(kept) < recent_n:
        env = items[i]
        if _visible(env, participant_id):
            text = render(env)
            if text is not None:
                kept.append((env, text))
        i -= 1
    kept.reverse()
    count = 0
    seen: dict[str, None] = {}
    for j in range(i + 1):
        env = items[j]
        if _visible(env, participant_id) and render(env) is not None:
            count += 1
            seen[env.sender_id] = None
    return count, list(seen), kept


def _check_recent_n(recent_n: Any) -> int:
    if isinstance(recent_n, bool) or not isinstance(recent_n, int):
        raise ValueError(f"recent_n must be an integer, got {recent_n!r}")
    if recent_n < 1:
        raise ValueError(f"recent_n must be >= 1, got {recent_n}")
    return recent_n


class _Transcript(ViewPolicy):
    name: ClassVar[str]
    _named: ClassVar[bool] = False
    recent_n: int | None = None
    """None: the whole transcript; a number: only that many recent envelopes after a summary (``_Windowed``)."""

    def params(self) -> dict[str, Any]:
        return {}

    async def project(
        self,
        wal: Sequence[Envelope],
        *,
        participant_id: str,
        channel: ChannelMetadata | None = None,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver = default_name_resolver,
    ) -> list[BaseEvent]:
        if self.recent_n is not None:
            return self._windowed(wal, participant_id, render_envelope, name_for, self.recent_n)
        named = self._named
        items, end, _ = backing(wal)
        out: list[BaseEvent] = []
        append = out.append
        for env in islice(items, end):
            sender = env.sender_id
            audience = env.audience
            if sender != participant_id and audience is not None and participant_id not in audience:
                continue
            text = render_envelope(env)
            if text is None:
                continue
            if sender == participant_id:
                append(ModelMessage(text))
            elif named:
                append(ModelRequest([TextInput(f"[{name_for(sender)}]: {text}")]))
            else:
                append(ModelRequest([TextInput(text)]))
        return out

    def _windowed(
        self,
        wal: Sequence[Envelope],
        participant_id: str,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver,
        recent_n: int,
    ) -> list[BaseEvent]:
        labeller = name_for if self._named else None
        elided, speakers, kept = window(wal, participant_id, render_envelope, recent_n)
        out: list[BaseEvent] = []
        if elided:
            # the summary a model reads names its senders in both variants (ag2 1.2.1 listed raw ids in
            # WindowedSummary's): ``name_for`` is the view's own resolver (the hub's names in a turn)
            names = [name_for(s) for s in speakers]
            out.append(CompactionSummary(summary=summary_text(elided, names), event_count=elided))
        out.extend(_event(env, text, participant_id, labeller) for env, text in kept)
        return out

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.params() == self.params()

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self.params().items()))))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


class _Windowed(_Transcript):
    def __init__(self, recent_n: int = 10) -> None:
        self.recent_n = _check_recent_n(recent_n)

    def params(self) -> dict[str, Any]:
        return {"recent_n": self.recent_n}


class FullTranscript(_Transcript):
    """Every visible envelope the adapter renders, in order (two-party: the role bit tells speakers apart)."""

    name = "full_transcript"


class NamedTranscript(_Transcript):
    """Like ``FullTranscript`` with ``[name]:`` on other speakers' lines, for N-party channels."""

    name = "named_transcript"
    _named = True


class WindowedSummary(_Windowed):
    """The last ``recent_n`` visible rendered envelopes, after a ``CompactionSummary`` of the rest (its
    speakers by ``name_for``; the messages themselves carry no labels)."""

    name = "windowed_summary"


class NamedWindowedSummary(_Windowed):
    """``WindowedSummary`` with ``[name]:`` labels; the summary lists speakers by name."""

    name = "named_windowed_summary"
    _named = True


__all__ = [
    "FullTranscript",
    "NamedTranscript",
    "NamedWindowedSummary",
    "WindowedSummary",
    "summary_text",
    "window",
]

"""Core: Expectation evaluators: pure checks the hub's sweeper runs over a channel's metadata and WAL.

``acks_within``, ``reply_within`` and ``max_silence`` as in ag2 1.2.1; each returns a ``Violation``
or ``None`` and does no I/O. Handlers (what to do about a violation) live with the hub.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from ag2net.envelope import EV_EXPECTATION_VIOLATED, EV_TEXT, Envelope, is_protocol_event
from ag2net.identity import parse_duration
from ag2net.ids import format_time, parse_time, seconds_between

ACKS_WITHIN = "acks_within"
REPLY_WITHIN = "reply_within"
MAX_SILENCE = "max_silence"


@dataclass(slots=True)
class ExpectationContext:
    """What an evaluator may look at: the channel, its adapter state, its WAL and the time now."""

    metadata: Any
    state: Any
    wal: Sequence[Envelope]  # a list, or a WalSlice of the cached log
    now_iso: str
    now_seconds: float

    @classmethod
    def at(cls, metadata: Any, state: Any, wal: Sequence[Envelope], now_iso: str) -> ExpectationContext:
        """A context whose ``now_seconds`` (epoch seconds) is derived from ``now_iso``."""
        return cls(metadata, state, wal, now_iso, parse_time(now_iso).timestamp())


@dataclass(slots=True)
class Violation:
    """An expectation that fired: who is at fault (``[]`` = the channel as a whole) and the figures."""

    expectation: Any
    violator_ids: list[str] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class ExpectationEvaluator(Protocol):
    """Checks one kind of expectation (matched by ``name``) against a channel: a pure, deterministic
    function of its inputs returning a ``Violation`` or ``None`` (the sweeper calls it every tick)."""

    name: str

    def evaluate(self, expectation: Any, context: ExpectationContext) -> Violation | None: ...


@runtime_checkable
class ViolationHandler(Protocol):
    """What the hub does when an expectation fires (matched by the expectation's ``on_violation``).

    The sweeper calls ``await handler.handle(hub, channel_id, violation)`` once per new
    ``(expectation, violator)`` of a channel; the fired set is in memory, so after a restart a handler
    may see a violation again and must tolerate that.
    """

    name: str

    async def handle(self, hub: Any, channel_id: str, violation: Violation) -> None: ...


def _state_value(state: Any) -> str:
    return getattr(state, "value", state)


def _params(expectation: Any) -> dict[str, Any]:
    params = (
        expectation.get("params") if isinstance(expectation, dict) else getattr(expectation, "params", None)
    )
    return params if isinstance(params, dict) else {}


def _name(expectation: Any) -> str:
    return expectation.get("name", "") if isinstance(expectation, dict) else getattr(expectation, "name", "")


def threshold_seconds(expectation: Any, default: float) -> float:
    """The expectation's ``seconds`` param (a number or a duration like ``"30s"``), else ``default``.

    Raises ``ValueError`` naming the expectation when the param is unusable, so the hub can refuse
    such a manifest when the channel is created instead of every sweep.
    """
    value = _params(expectation).get("seconds", default)
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise ValueError(f"expectation {_name(expectation)!r}: params.seconds {exc}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < float("inf"):
        raise ValueError(
            f"expectation {_name(expectation)!r}: params.seconds must be a non-negative number of seconds, "
            f"got {value!r}"
        )
    return value


def _elapsed(since: str, now_iso: str) -> float | None:
    """Seconds from ``since`` to now, or ``None`` when ``since`` is not a timestamp (unstamped)."""
    if not since:
        return None
    try:
        return seconds_between(since, now_iso)
    except ValueError:
        return None


def _round(seconds: float) -> float:
    return round(seconds, 3)


class _TimedEvaluator(ABC):
    """An evaluator that looks only while the channel is in ``state`` and measures against ``seconds``
    (``threshold_seconds``, default ``default_seconds``); each subclass's ``check`` is the rest."""

    name: str
    state = "active"
    default_seconds: float

    def applies(self, md: Any) -> bool:
        return _state_value(md.state) == self.state

    def evaluate(self, expectation: Any, context: ExpectationContext) -> Violation | None:
        if not self.applies(context.metadata):
            return None
        return self.check(expectation, context, threshold_seconds(expectation, self.default_seconds))

    @abstractmethod
    def check(self, expectation: Any, ctx: ExpectationContext, threshold: float) -> Violation | None:
        """The violation of ``expectation`` once the channel is in ``state``, measured against ``threshold``."""


class AcksWithinEvaluator(_TimedEvaluator):
    """While the channel is pending: every invitee acknowledges within ``seconds`` (default 30)."""

    name = ACKS_WITHIN
    state = "pending"
    default_seconds = 30.0

    def applies(self, md: Any) -> bool:
        return super().applies(md) and bool(md.pending_acks)

    def check(self, expectation: Any, ctx: ExpectationContext, threshold: float) -> Violation | None:
        md = ctx.metadata
        elapsed = _elapsed(md.created_at, ctx.now_iso)
        if elapsed is None or elapsed < threshold:
            return None
        return Violation(
            expectation,
            list(md.pending_acks),
            {"elapsed_seconds": _round(elapsed), "threshold_seconds": threshold},
        )


class ReplyWithinEvaluator(_TimedEvaluator):
    """While active: a participant answers text addressed to it within ``seconds`` (default 600).

    Per participant, the latest ``EV_TEXT`` addressed to it (a broadcast or one listing it, not its
    own) with no ``EV_TEXT`` of its own after it must be younger than the threshold.
    """

    name = REPLY_WITHIN
    default_seconds = 600.0

    def check(self, expectation: Any, ctx: ExpectationContext, threshold: float) -> Violation | None:
        md = ctx.metadata
        participants = md.participant_ids()
        undecided = set(participants)
        late: set[str] = set()
        # newest first: for each participant the first relevant text decides
        for env in reversed(ctx.wal):
            if not undecided:
                break
            if env.event_type != EV_TEXT:
                continue
            sender = env.sender_id
            if sender in undecided:
                undecided.discard(sender)  # it has spoken since anything addressed to it
            addressed = undecided if env.audience is None else undecided.intersection(env.audience)
            if not addressed:
                continue
            elapsed = _elapsed(env.created_at, ctx.now_iso)
            overdue = elapsed is not None and elapsed >= threshold
            for pid in list(addressed):
                undecided.discard(pid)
                if overdue:
                    late.add(pid)
        if not late:
            return None
        return Violation(
            expectation, [p for p in participants if p in late], {"threshold_seconds": threshold}
        )


def _is_content(env: Envelope) -> bool:
    return not is_protocol_event(env.event_type) and env.event_type != EV_EXPECTATION_VIOLATED


class MaxSilenceEvaluator(_TimedEvaluator):
    """While active: some content envelope (not channel/task protocol, not a violation notice) at
    least every ``seconds`` (default 3600), counted from the last one or from channel creation."""

    name = MAX_SILENCE
    default_seconds = 3600.0

    def check(self, expectation: Any, ctx: ExpectationContext, threshold: float) -> Violation | None:
        md = ctx.metadata
        since = md.created_at
        for env in reversed(ctx.wal):
            if _is_content(env):
                since = env.created_at
                break
        elapsed = _elapsed(since, ctx.now_iso)
        if elapsed is None or elapsed < threshold:
            return None
        return Violation(
            expectation, [], {"elapsed_seconds": _round(elapsed), "threshold_seconds": threshold}
        )


def default_evaluators() -> list[ExpectationEvaluator]:
    """The three built-in evaluators, fresh instances, in registration order."""
    return [AcksWithinEvaluator(), ReplyWithinEvaluator(), MaxSilenceEvaluator()]


# ---------------------------------------------------------------------------------------------- the paused clock


class ExpectationClock:
    """Per channel, the seconds its expectation clock was paused (``pause_expectations``): deadlines shift
    by them, and while paused nothing fires."""

    __slots__ = ("paused", "shift")

    def __init__(self) -> None:
        self.paused: dict[str, float] = {}  # channel id -> when (epoch seconds) its clock stopped
        self.shift: dict[str, float] = {}  # channel id -> seconds paused before

    def pause(self, channel_id: str, now_seconds: float, paused: bool) -> float:
        """Pause (or resume) the channel's clock; returns the seconds its deadlines have shifted so far."""
        if paused:
            self.paused.setdefault(channel_id, now_seconds)
        else:
            since = self.paused.pop(channel_id, None)
            if since is not None:
                self.shift[channel_id] = self.shift.get(channel_id, 0.0) + max(0.0, now_seconds - since)
        return self.shifted(channel_id, now_seconds)

    def shifted(self, channel_id: str, now_seconds: float) -> float:
        since = self.paused.get(channel_id)
        extra = max(0.0, now_seconds - since) if since is not None else 0.0
        return self.shift.get(channel_id, 0.0) + extra

    def now(self, channel_id: str, now_seconds: float) -> float:
        """The channel's clock: now, less the time it was paused."""
        return now_seconds - self.shifted(channel_id, now_seconds)


class _Paused:
    """An evaluator seen through the channel's clock: nothing fires while paused; deadlines shift."""

    __slots__ = ("clock", "inner", "name")

    def __init__(self, inner: Any, clock: ExpectationClock) -> None:
        self.inner, self.clock, self.name = inner, clock, inner.name

    def evaluate(self, expectation: Any, context: ExpectationContext) -> Violation | None:
        clock = self.clock
        cid = getattr(context.metadata, "channel_id", "")
        if cid in clock.paused:
            return None
        shift = clock.shift.get(cid)
        if shift:
            now = context.now_seconds - shift
            context = ExpectationContext(context.metadata, context.state, context.wal, _iso(now), now)
        return self.inner.evaluate(expectation, context)


def _iso(seconds: float) -> str:
    return format_time(datetime.fromtimestamp(seconds, tz=UTC))


class PausableEvaluators(dict[str, Any]):
    """``hub.expectations.evaluators`` when channels' clocks can be paused: each evaluator, looked up,
    reads the channel's clock (``ExpectationClock``)."""

    def __init__(self, clock: ExpectationClock, evaluators: dict[str, Any] | None = None) -> None:
        super().__init__(evaluators or {})
        self.clock = clock

    def get(self, name: str, default: Any = None) -> Any:  # type: ignore[override]
        inner = super().get(name)
        if inner is None:
            return default
        if not self.clock.paused and not self.clock.shift:
            return inner
        return _Paused(inner, self.clock)


def deadlines(md: Any, wal: Sequence[Envelope], sender_id: str, now_seconds: float) -> list[dict[str, Any]]:
    """The expectation deadlines a post by ``sender_id`` would meet now: ``reply_within`` (text
    addressed to it, not answered yet) and ``max_silence`` (the channel's silence), each with its
    ``due`` (epoch seconds on the channel's clock) and ``seconds_left``."""
    out: list[dict[str, Any]] = []
    for index, exp in enumerate(getattr(md.manifest, "expectations", None) or []):
        name = _name(exp)
        try:
            if name == REPLY_WITHIN:
                threshold = threshold_seconds(exp, ReplyWithinEvaluator.default_seconds)
                since = _waiting_since(wal, sender_id)
            elif name == MAX_SILENCE:
                threshold = threshold_seconds(exp, MaxSilenceEvaluator.default_seconds)
                since = next((e.created_at for e in reversed(wal) if _is_content(e)), md.created_at)
            else:
                continue
            if not since:
                continue
            due = parse_time(since).timestamp() + threshold
        except ValueError:
            continue
        out.append(
            {"kind": name, "expectation": index, "due": due, "seconds_left": _round(due - now_seconds)}
        )
    return out


def _waiting_since(wal: Sequence[Envelope], agent_id: str) -> str:
    """When the oldest text addressed to ``agent_id`` it has not answered since was sent ("" if none)."""
    for env in reversed(wal):
        if env.event_type != EV_TEXT:
            continue
        if env.sender_id == agent_id:
            return ""
        if env.audience is None or agent_id in env.audience:
            return env.created_at
    return ""


# The names these classes had before they took ag2's.
AcksWithin = AcksWithinEvaluator
ReplyWithin = ReplyWithinEvaluator
MaxSilence = MaxSilenceEvaluator


__all__ = [
    "ACKS_WITHIN",
    "MAX_SILENCE",
    "REPLY_WITHIN",
    "AcksWithin",
    "AcksWithinEvaluator",
    "ExpectationClock",
    "ExpectationContext",
    "ExpectationEvaluator",
    "MaxSilence",
    "MaxSilenceEvaluator",
    "PausableEvaluators",
    "ReplyWithin",
    "ReplyWithinEvaluator",
    "Violation",
    "ViolationHandler",
    "deadlines",
    "default_evaluators",
    "threshold_seconds",
]

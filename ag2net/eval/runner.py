"""Run a cohort: fork each channel, replay it under the variant in its own sandbox, score it.

``await evaluate(members, variant, scorers)`` replays at most ``concurrency`` channels at once (each in a
sandbox hub of its own, in memory, closed when it is scored), calls ``progress(done, total, outcome)`` after
each, and returns an ``EvalRun`` in the cohort's order. Nothing is written anywhere: the members are
snapshots already read from the database.

Counting (minimal replay): a turn answered from the recording costs nothing; a turn whose request no
recording has calls the agent's live model (``Variant.live``), or its replacement model on the ``model``
axis. ``Outcome.live`` counts those model calls, ``live_tokens`` their tokens (provider usage when the model
reported it, else the turn record's estimates) and ``full_tokens`` what rerunning every turn after the fork
would take (the recorded turns' tokens), so the saving is ``full_tokens - live_tokens``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.debug import compare, fork, replay
from ag2net.debug.replay_model import ReplayModel
from ag2net.eval.cohort import Member, fork_point
from ag2net.eval.run import EvalRun, Outcome
from ag2net.eval.scorers import Replayed, Scorer, turn_cost, turn_tokens
from ag2net.eval.variant import Variant

Progress = Callable[[int, int, Outcome], Any]


@dataclass(slots=True)
class Settings:
    """How each channel is replayed: where it is forked, and the replay's limits."""

    fork_at: str | None = None
    timeout: float = 60.0
    step_timeout: float = 10.0
    turn_budget: int = 200
    concurrency: int = 4
    extra: dict[str, Any] = field(default_factory=dict)


def _agents(member: Member) -> dict[str, str]:
    src = member.source
    ids = list(src.metadata.participant_ids())
    ids += [e.sender_id for e in src.envelopes if e.sender_id not in ids]
    return {a: src.name_for(a) for a in ids if a in src.agents}


def _cost(turns: list[dict[str, Any]]) -> float | None:
    costs = [c for t in turns if (c := turn_cost(t)) is not None]
    return round(sum(costs), 6) if costs else None


def _marks(result: Any, names: dict[str, str]) -> tuple[dict[str, list[str]], int, int, float | None]:
    """Per agent name, ``recorded``/``live`` per replayed turn; the live model calls, their tokens and
    their cost (None when no live turn's model has a price). A live turn of a ``ReplayModel`` is priced as
    the live model's (the request kept the recorded model's parameters, to be matched)."""
    from ag2net.agent.models import model_params

    marks: dict[str, list[str]] = {}
    live_calls = live_tokens = 0
    live_turns: list[dict[str, Any]] = []
    for agent_id, model in result.models.items():
        mine = [t for t in result.replayed_turns if t.get("agent_id") == agent_id]
        if isinstance(model, ReplayModel):
            kinds = list(model.marks[: len(mine)])
            live_calls += model.live_calls
            params = model_params(model.live) if model.live is not None else {}
            live = [{**t, "model_params": params} for t, k in zip(mine, kinds, strict=False) if k == "live"]
        else:  # a replacement model answers every turn of its agent
            kinds = ["live"] * len(mine)
            live = mine
            live_calls += sum(int(t.get("model_calls") or 1) for t in mine)
        live_tokens += sum(turn_tokens(t) for t in live)
        live_turns += live
        if mine:
            marks[str(names.get(agent_id) or agent_id)] = kinds
    return marks, live_calls, live_tokens, _cost(live_turns)


async def replay_pair(member: Member, variant: Variant, settings: Settings) -> tuple[int, Any, Any, Any]:
    """Fork ``member`` at its fork point, replay it under ``variant`` and compare: ``(at, ReplayResult,
    Comparison, the sandbox channel's final metadata)``; the sandbox is closed after."""
    src, cid = member.source, member.channel_id
    names = _agents(member)
    at = fork_point(src.envelopes, settings.fork_at, names)
    overrides = variant.overrides(names, cid)
    async with await fork(src, cid, at) as box:
        result = await replay(
            src,
            box,
            overrides=overrides,
            turn_budget=settings.turn_budget,
            step_timeout=settings.step_timeout,
            timeout=settings.timeout,
        )
        return at, result, compare(result), box.hub.lookup_channel(cid).copy()


async def replay_member(member: Member, variant: Variant, settings: Settings) -> Replayed:
    """Fork ``member`` at its fork point and replay it under ``variant``: what its scorers read."""
    cid = member.channel_id
    at, result, diff, md = await replay_pair(member, variant, settings)
    state, reason = md.state.value, str(md.close_reason or "")
    marks, live, live_tokens, live_cost = _marks(result, result.names)
    return Replayed(
        label=member.label,
        channel_id=cid,
        channel_type=member.channel_type,
        at_seq=at,
        envelopes=result.replayed,
        original=result.original,
        turns=result.replayed_turns,
        original_turns=result.original_turns,
        names=result.names,
        state=state,
        close_reason=reason,
        verdict=diff.verdict,
        identical=diff.identical,
        first_divergence=None if diff.first_divergence is None else diff.first_divergence + 1,
        live=live,
        marks=marks,
        live_tokens=live_tokens,
        full_tokens=sum(turn_tokens(t) for t in result.original_turns),
        live_cost=live_cost,
        full_cost=_cost(result.original_turns),
    )


async def _one(member: Member, variant: Variant, scorers: list[Scorer], settings: Settings) -> Outcome:
    started = time.perf_counter()
    outcome = Outcome(channel_id=member.channel_id, label=member.label, channel_type=member.channel_type)
    try:
        replayed = await replay_member(member, variant, settings)
    except Exception as exc:  # one channel that cannot be replayed fails alone, in words
        outcome.error = f"{type(exc).__name__}: {exc}"
        outcome.scores = {s.key: None for s in scorers}
        outcome.duration_ms = int((time.perf_counter() - started) * 1000)
        return outcome
    outcome.fill(replayed)
    for s in scorers:
        outcome.scores[s.key] = await s(replayed)
    outcome.duration_ms = int((time.perf_counter() - started) * 1000)
    return outcome


async def evaluate(
    members: list[Member],
    variant: Variant | None = None,
    scorers: list[Scorer] | None = None,
    *,
    settings: Settings | None = None,
    progress: Progress | None = None,
    source: str = "",
) -> EvalRun:
    """Replay every member under ``variant`` (at most ``settings.concurrency`` at once) and score each."""
    variant = variant or Variant()
    settings = settings or Settings()
    scorers = list(scorers or [])
    keys = [s.key for s in scorers]
    if len(set(keys)) != len(keys):
        raise ValueError(f"two scorers have the same key; keys must be unique: {keys}")
    if settings.concurrency < 1:
        raise ValueError(f"concurrency must be 1 or more, got {settings.concurrency}")
    gate = asyncio.Semaphore(settings.concurrency)
    done = 0
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    started = time.perf_counter()

    async def bounded(member: Member) -> Outcome:
        nonlocal done
        async with gate:
            outcome = await _one(member, variant, scorers, settings)
        done += 1
        if progress is not None:
            progress(done, len(members), outcome)
        return outcome

    outcomes = await asyncio.gather(*(bounded(m) for m in members))
    return EvalRun(
        variant=variant.name,
        axis=variant.axis or "",
        outcomes=list(outcomes),
        scorers=keys,
        source=source,
        concurrency=settings.concurrency,
        created_at=created,
        duration_ms=int((time.perf_counter() - started) * 1000),
    )


__all__ = ["Progress", "Settings", "evaluate", "replay_member", "replay_pair"]

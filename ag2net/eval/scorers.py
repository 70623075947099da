"""Scorers: plain Python functions over a replayed channel, and the built-in ones.

A scorer takes a ``Replayed`` (the replayed channel: its envelopes, turn records and final state, beside the
original's) and returns a number, ``True``/``False`` (pass/fail), a ``Score`` (to add an explanation) or
``None`` (no signal). ``@scorer`` turns a function (sync or async) into one; its key is the function's name
unless ``key=`` says otherwise::

    from ag2net.eval import scorer

    @scorer
    def short_replies(ch):
        longest = max((len(t) for t in ch.texts()), default=0)
        return Score(longest < 400, f"the longest message has {longest} characters")

Built-ins (``builtin(spec)`` builds one from its text, as ``ag2net eval --scorer`` takes it):
``contains:TEXT`` and ``matches:REGEX`` (the final message's text), ``closed[:REASON]`` (the channel closed,
with that reason), ``turns`` (number of turns), ``tokens`` and ``cost`` (totals of the replayed turns),
``live`` (model calls a live model answered), ``reproduced`` (the replay made the original envelope for
envelope), ``tool:NAME`` / ``no-tool:NAME`` (a tool was / was not called), ``judge[:RUBRIC]`` (an LLM judge:
``judge_scorer(model, rubric)``; the CLI's model is ``--judge-model``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED, Envelope


@dataclass(frozen=True, slots=True)
class Score:
    """A scorer's verdict: ``score`` a number or ``True``/``False``, ``comment`` the explanation."""

    score: bool | int | float | None
    comment: str = ""


@dataclass(slots=True)
class Replayed:
    """One replayed channel, as a scorer reads it.

    ``envelopes`` and ``turns`` are the replay's; ``original`` and ``original_turns`` the recording's (from
    the fork on for turns). ``state``/``close_reason`` are the sandbox channel's at the end. ``live`` counts
    the model calls live models answered, ``marks`` lists per agent name ``recorded``/``live`` per turn."""

    label: str
    channel_id: str
    channel_type: str
    at_seq: int
    envelopes: list[Envelope]
    original: list[Envelope]
    turns: list[dict[str, Any]]
    original_turns: list[dict[str, Any]]
    names: dict[str, str]
    state: str = ""
    close_reason: str = ""
    verdict: str = ""
    identical: bool = False
    first_divergence: int | None = None
    live: int = 0
    marks: dict[str, list[str]] = field(default_factory=dict)
    live_tokens: int = 0
    full_tokens: int = 0
    live_cost: float | None = None
    full_cost: float | None = None

    def name_for(self, agent_id: str) -> str:
        return self.names.get(agent_id, agent_id)

    def texts(self) -> list[str]:
        """The text of every message envelope, in order."""
        out = []
        for env in self.envelopes:
            text = env.event_data.get("text") if isinstance(env.event_data, dict) else None
            if isinstance(text, str):
                out.append(text)
        return out

    @property
    def final_text(self) -> str:
        texts = self.texts()
        return texts[-1] if texts else ""

    @property
    def closed(self) -> bool:
        return any(e.event_type in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED) for e in self.envelopes)

    def tool_calls(self, agent: str | None = None) -> list[dict[str, Any]]:
        """Every tool call of the replayed turns (of ``agent``, a name or id, when given)."""
        return [
            call
            for turn in self.turns
            if agent is None or agent in (turn.get("agent_id"), self.name_for(str(turn.get("agent_id"))))
            for call in turn.get("tool_calls") or []
        ]


def turn_tokens(turn: dict[str, Any]) -> int:
    """A turn's tokens as ``ag2net.costs`` reads its record: prompt + completion over all its model calls
    (the provider's figures when it reported them, else ag2net's count)."""
    from ag2net.costs import turn_tokens as totals

    tokens = totals(turn)
    return tokens.prompt + tokens.completion


def turn_cost(turn: dict[str, Any]) -> float | None:
    """A turn's cost in dollars at the price table (``ag2net.costs``); None when its model has no price."""
    from ag2net.costs import turn_cost as cost

    return cost(turn).dollars


@dataclass(slots=True)
class Scorer:
    """A named scoring function (``fn(replayed) -> number | bool | Score | None``, sync or async)."""

    key: str
    fn: Callable[[Replayed], Any]

    async def __call__(self, replayed: Replayed) -> Score:
        try:
            value = self.fn(replayed)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:  # a scorer's own failure is its verdict, not the run's end
            return Score(None, f"the scorer raised {type(exc).__name__}: {exc}")
        if isinstance(value, Score):
            return value
        if value is None or isinstance(value, (bool, int, float)):
            return Score(value)
        raise TypeError(
            f"scorer {self.key!r} returned {type(value).__name__}; return a number, True/False, a Score or None"
        )


def scorer(fn: Callable[[Replayed], Any] | None = None, *, key: str | None = None) -> Any:
    """Make ``fn`` a ``Scorer`` (``@scorer`` or ``@scorer(key="name")``)."""

    def wrap(f: Callable[[Replayed], Any]) -> Scorer:
        return Scorer(key or getattr(f, "__name__", "scorer"), f)

    return wrap(fn) if fn is not None else wrap


# ----------------------------------------------------------------------------------------- built-ins


def final_text_contains(text: str, *, key: str | None = None) -> Scorer:
    def check(ch: Replayed) -> Score:
        ok = text in ch.final_text
        return Score(
            ok, f"the final message {'contains' if ok else 'lacks'} {text!r}: {ch.final_text[:80]!r}"
        )

    return Scorer(key or f"contains:{text}", check)


def final_text_matches(pattern: str, *, key: str | None = None) -> Scorer:
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"matches:{pattern} is not a regular expression ({exc})") from None

    def check(ch: Replayed) -> Score:
        ok = compiled.search(ch.final_text) is not None
        return Score(ok, f"the final message {'matches' if ok else 'does not match'} /{pattern}/")

    return Scorer(key or f"matches:{pattern}", check)


def closed_with(reason: str | None = None, *, key: str | None = None) -> Scorer:
    def check(ch: Replayed) -> Score:
        if not ch.closed:
            return Score(False, f"the channel did not close (state {ch.state})")
        if reason is not None and ch.close_reason != reason:
            return Score(False, f"the channel closed with reason {ch.close_reason!r}, not {reason!r}")
        return Score(True, f"the channel closed with reason {ch.close_reason!r}")

    return Scorer(key or ("closed" if reason is None else f"closed:{reason}"), check)


def tool_called(
    name: str, *, agent: str | None = None, called: bool = True, key: str | None = None
) -> Scorer:
    def check(ch: Replayed) -> Score:
        n = sum(1 for c in ch.tool_calls(agent) if c.get("name") == name)
        return Score((n > 0) == called, f"{name} was called {n} time(s)")

    return Scorer(key or f"{'tool' if called else 'no-tool'}:{name}", check)


def turn_count(*, key: str = "turns") -> Scorer:
    return Scorer(key, lambda ch: Score(len(ch.turns), f"{len(ch.turns)} turn(s) after the fork"))


def tokens_total(*, key: str = "tokens") -> Scorer:
    def check(ch: Replayed) -> Score:
        total = sum(turn_tokens(t) for t in ch.turns)
        return Score(total, f"{total} tokens over {len(ch.turns)} turn(s); live calls used {ch.live_tokens}")

    return Scorer(key, check)


def cost_total(*, key: str = "cost") -> Scorer:
    """What the replay's live model calls cost (their reported usage, else their turn records'), against a
    full rerun of the recorded turns; no signal when nothing recorded a cost."""

    def check(ch: Replayed) -> Score:
        if ch.live_cost is None and ch.full_cost is None:
            return Score(
                None, "no cost recorded: neither the live calls nor the recorded turns report usage.cost"
            )
        live = ch.live_cost or 0.0
        full = "unknown" if ch.full_cost is None else f"{ch.full_cost:g}"
        return Score(round(live, 6), f"live calls cost {live:g} against {full} for a full rerun")

    return Scorer(key, check)


def live_calls(*, key: str = "live") -> Scorer:
    return Scorer(key, lambda ch: Score(ch.live, f"{ch.live} model call(s) answered live"))


def reproduced(*, key: str = "reproduced") -> Scorer:
    return Scorer(key, lambda ch: Score(ch.identical, ch.verdict))


JUDGE_PROMPT = (
    "You judge a conversation between agents. Rubric: {rubric}\n"
    "Answer on the first line PASS or FAIL (or a number from 0 to 1), then one sentence why.\n\n{transcript}"
)


def judge_scorer(
    model: Any, rubric: str = "the conversation reaches a useful conclusion", *, key: str = "judge"
):
    """An LLM judge: ``model`` (any ag2net model: ``scripted`` in tests, ``openai:NAME``) reads the replayed
    transcript and the rubric and answers PASS/FAIL or a number; the rest of its answer is the comment."""
    from ag2net.agent import Agent

    async def check(ch: Replayed) -> Score:
        lines = [f"[{ch.name_for(e.sender_id)}] {e.event_data.get('text')}" for e in ch.envelopes if _text(e)]
        prompt = JUDGE_PROMPT.format(rubric=rubric, transcript="\n".join(lines))
        reply = await Agent("judge", model).ask(prompt)
        return parse_verdict(str(reply.body or ""))

    return Scorer(key, check)


def _text(env: Envelope) -> bool:
    return isinstance(env.event_data, dict) and isinstance(env.event_data.get("text"), str)


def parse_verdict(text: str) -> Score:
    """A judge's answer: PASS/FAIL (or yes/no) or a number on its first line; the rest is the comment."""
    head, _, rest = text.strip().partition("\n")
    word = (head.split() or [""])[0].strip(".:,").lower()
    comment = (rest.strip() or head.strip())[:300]
    if word in ("pass", "yes", "true"):
        return Score(True, comment)
    if word in ("fail", "no", "false"):
        return Score(False, comment)
    try:
        return Score(float(word), comment)
    except ValueError:
        return Score(None, f"the judge answered neither PASS/FAIL nor a number: {head[:80]!r}")


BUILTINS = "contains:TEXT, matches:REGEX, closed[:REASON], turns, tokens, cost, live, reproduced, tool:NAME, no-tool:NAME, judge[:RUBRIC]"


def builtin(spec: str, *, judge_model: Any = None) -> Scorer:
    """The built-in scorer ``spec`` names (see the module docstring); ``ValueError`` when it names none."""
    found = find_builtin(spec, judge_model=judge_model)
    if found is None:
        raise ValueError(f"{spec!r} is not a built-in scorer; choose from {BUILTINS}")
    return found


def find_builtin(spec: str, *, judge_model: Any = None) -> Scorer | None:
    """The built-in scorer ``spec`` names, or None when it names none."""
    word, colon, arg = spec.partition(":")
    simple = {"turns": turn_count, "tokens": tokens_total, "cost": cost_total, "live": live_calls}
    if word in simple and not colon:
        return simple[word]()
    if word == "reproduced" and not colon:
        return reproduced()
    if word == "closed":
        return closed_with(arg or None)
    if word == "contains" and arg:
        return final_text_contains(arg)
    if word == "matches" and arg:
        return final_text_matches(arg)
    if word in ("tool", "no-tool") and arg:
        return tool_called(arg, called=word == "tool")
    if word == "judge":
        if judge_model is None:
            raise ValueError(
                "--scorer judge needs a model to judge with; add --judge-model scripted:PASS or openai:NAME"
            )
        return judge_scorer(judge_model, arg or "the conversation reaches a useful conclusion")
    return None


__all__ = [
    "BUILTINS",
    "JUDGE_PROMPT",
    "Replayed",
    "Score",
    "Scorer",
    "builtin",
    "closed_with",
    "cost_total",
    "final_text_contains",
    "final_text_matches",
    "find_builtin",
    "judge_scorer",
    "live_calls",
    "parse_verdict",
    "reproduced",
    "scorer",
    "tokens_total",
    "tool_called",
    "turn_cost",
    "turn_count",
    "turn_tokens",
]

"""The original side of a replay: its recorded turns placed in the transcript (``place_turns``), and the
``ReplayModel`` that answers a replayed turn with a recorded one when the model request is the same."""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Any

from ag2net.agent import ModelCall, ModelResponse
from ag2net.agent.models import turn_request_digest
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    Envelope,
)
from ag2net.events import ToolCallEvent
from ag2net.ids import add_seconds

HUB_MADE = frozenset({EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
HANDLER_MADE = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT})
CLOSES = frozenset({EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})


class ReplayDiverged(RuntimeError):
    """A replayed turn's model request differs from every recorded one (the ReplayModel has no answer)."""


# ----------------------------------------------------------------------------------------- the original


@dataclass(slots=True)
class PlacedTurn:
    """One recorded turn, placed in the original transcript."""

    record: dict[str, Any]
    agent_id: str
    number: int  # 1-based, among this agent's turns in the channel
    start_pos: int  # how many envelopes the WAL held when the turn started
    outputs: list[int]  # positions (0-based) of its reply and of what its tools did to the channel
    reply_pos: int | None
    effects: dict[str, list[int]]  # tool call id → positions of what that call did
    replayed: bool = False

    @property
    def turn_id(self) -> str:
        return str(self.record.get("turn_id") or "")


def place_turns(original: list[Envelope], records: list[dict[str, Any]]) -> list[PlacedTurn]:
    index = {e.envelope_id: i for i, e in enumerate(original)}
    times = [e.created_at or "" for e in original]  # the hub stamps in admission order: sorted
    counts: dict[str, int] = {}
    placed: list[PlacedTurn] = []
    for rec in records:
        agent_id = rec["agent_id"]
        counts[agent_id] = counts.get(agent_id, 0) + 1
        start = str(rec.get("started_at") or "")
        end = add_seconds(start, float(rec.get("duration_ms") or 0.0) / 1000) if start else ""
        start_pos = bisect.bisect_right(times, start) if start else 0
        trigger = index.get(str(rec.get("trigger_envelope_id") or ""))
        if trigger is not None:
            start_pos = max(start_pos, trigger + 1)
        reply_pos = index.get(str(rec.get("reply_envelope_id") or ""))
        made: list[int] = []
        if start:
            for i in range(bisect.bisect_left(times, start), bisect.bisect_right(times, end)):
                env = original[i]
                if i == reply_pos or not env.created_at:
                    continue
                mine = env.sender_id == agent_id and env.event_type not in HANDLER_MADE
                closed_by_a_tool = env.event_type in CLOSES and (reply_pos is None or i < reply_pos)
                if mine or closed_by_a_tool:
                    made.append(i)
        calls = list(rec.get("tool_calls") or [])
        effects: dict[str, list[int]] = {}
        for i in made:
            env_id = original[i].envelope_id
            owner = next(
                (c for c in calls if env_id in str(c.get("result") or "")), calls[0] if calls else None
            )
            if owner is not None:
                effects.setdefault(str(owner.get("id")), []).append(i)
        outputs: list[int] = sorted(made if reply_pos is None else [reply_pos, *made])
        placed.append(PlacedTurn(rec, agent_id, counts[agent_id], start_pos, outputs, reply_pos, effects))
    return placed


# ----------------------------------------------------------------------------------------- the model


def _round0_digest(rec: dict[str, Any]) -> str:
    rounds = rec.get("rounds") or []
    if rounds and rounds[0].get("request"):
        return str(rounds[0]["request"])
    return turn_request_digest(rec)


def _what_changed(rec: dict[str, Any], request: ModelCall) -> str:
    """Which parts of ``request`` differ from the recorded turn ``rec``'s first request, in words."""
    parts = []
    if request.system != (rec.get("system_prompt") or ""):
        parts.append("system prompt")
    history = [e.to_dict() for e in request.history[: request.prior]]
    if history != list(rec.get("history") or []):
        parts.append(f"history ({len(rec.get('history') or [])} → {len(history)} messages)")
    if [p.to_dict() for p in request.inputs] != list(rec.get("inputs") or []):
        parts.append("input")
    if request.tools != list(rec.get("tools") or []):
        parts.append("tools")
    if request.params != (rec.get("model_params") or {}):
        parts.append("model parameters")
    return ", ".join(parts) or "request"


class ReplayModel:
    """Answers with an agent's recorded turns, only for a model request equal to a recorded one.

    ``turns`` are the agent's recorded turns in the channel, in order; ``start`` the index of the first
    one after the fork (the turns before it are done). ``params`` are the recorded model's parameters
    (part of the request). ``answered`` lists, per turn this model took, the recorded turn it answered
    with; ``diverged`` says why it stopped answering (None while it answers).

    Minimal replay: with a ``live`` model, a turn whose request no recording answers (or a tool round
    whose request differs from the recorded round's) is passed to ``live`` instead of failing. ``marks``
    says, per turn taken, ``"recorded"`` (⟲) or ``"live"`` (●); ``live_calls`` counts the model calls
    ``live`` answered and ``live_usage`` sums the usage they reported."""

    def __init__(
        self,
        turns: list[dict[str, Any]],
        name: str = "replay",
        *,
        start: int = 0,
        agent_name: str = "",
        params: dict[str, Any] | None = None,
        live: Any = None,
    ) -> None:
        self.name = name
        self.live = live
        self.marks: list[str] = []
        self.live_calls = 0
        self.live_usage: dict[str, float] = {}
        self._live_turn = False
        self.turns = turns
        self.next_turn = start
        self.agent_name = agent_name
        self.params = dict(
            params if params is not None else (turns[0].get("model_params") or {}) if turns else {}
        )
        self.diverged: str | None = None
        self.answered: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self._digests = [_round0_digest(t) for t in turns]
        self._calls: list[ModelCall] = []

    def _refuse(self, why: str, request: ModelCall) -> ReplayDiverged:
        self.diverged = self.diverged or why
        self.current = None
        refusal = ReplayDiverged(self.diverged)
        # the turn record shows what was asked, and the tool traffic of the turn so far
        refusal.calls = [*self._calls[:-1], request.snapshot()]  # type: ignore[attr-defined]
        refusal.events = list(request.turn_events)  # type: ignore[attr-defined]
        return refusal

    async def _ask_live(self, request: ModelCall) -> ModelResponse:
        """A call no recording answers, passed to the ``live`` model (counted, with its usage)."""
        if not self._live_turn:
            self._live_turn, self.current = True, None
            if self.marks:
                self.marks[-1] = "live"
            else:  # pragma: no cover - a tool round always follows a first request
                self.marks.append("live")
        self.live_calls += 1
        response = await self.live.complete(request)
        for key, value in (getattr(response, "usage", None) or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                self.live_usage[key] = self.live_usage.get(key, 0) + value
        return response

    async def complete(self, request: ModelCall) -> ModelResponse:
        if request.round == 0:
            self._calls = []
            self._live_turn = False
        self._calls.append(request)
        if self._live_turn:
            return await self._ask_live(request)
        if request.round == 0:
            digest = request.digest()
            order = [*range(self.next_turn, len(self.turns)), *range(0, self.next_turn)]
            found = next((i for i in order if self._digests[i] == digest), None)
            if found is None and self.live is not None:
                self.marks.append("live")
                return await self._ask_live(request)
            if found is None:
                expected = self.turns[self.next_turn] if self.next_turn < len(self.turns) else None
                if expected is None:
                    raise self._refuse("the original has no more turns for this agent", request)
                changed = _what_changed(expected, request)
                raise self._refuse(
                    f"turn {self.next_turn + 1}: the model request differs from the recorded one ({changed})",
                    request,
                )
            self.next_turn = found + 1
            self.current = self.turns[found]
            self.answered.append({"turn": found + 1, "turn_id": self.current.get("turn_id")})
            self.marks.append("recorded")
        turn = self.current
        if turn is None:
            raise self._refuse("a tool round came without a first request this model answered", request)
        rounds = list(turn.get("rounds") or [])
        if request.round > 0 and request.round < len(rounds):
            want = rounds[request.round].get("request")
            if want and request.digest() != want and self.live is not None:
                return await self._ask_live(request)
            if want and request.digest() != want:
                raise self._refuse(
                    f"turn {self.next_turn}, round {request.round + 1}: a tool result differs from the recorded one",
                    request,
                )
        calls = {str(c.get("id")): c for c in turn.get("tool_calls") or []}
        if rounds:
            answer = rounds[request.round] if request.round < len(rounds) else {}
            ids = list(answer.get("tool_calls") or [])
            content = answer.get("content")
            if not ids and request.round == len(rounds) - 1:
                content = turn.get("reply")
        else:  # records from before rounds were kept: all tool calls in the first round
            ids = list(calls) if request.round == 0 else []
            content = None if ids else turn.get("reply")
        tool_calls = [
            ToolCallEvent(calls[i]["name"], calls[i].get("arguments") or "{}", i) for i in ids if i in calls
        ]
        return ModelResponse(content=content or None, tool_calls=tool_calls)


__all__ = ["CLOSES", "HANDLER_MADE", "HUB_MADE", "PlacedTurn", "ReplayDiverged", "ReplayModel", "place_turns"]

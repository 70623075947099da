"""What a replay made (``ReplayResult``, from ``ag2net.debug.replay``) and ``compare``: the replay and its
original lined up envelope by envelope and turn by turn per agent, the first difference named and the
verdict given in words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.client.turns import operator_label
from ag2net.debug.fork import Sandbox
from ag2net.debug.replay_model import ReplayModel
from ag2net.envelope import Envelope
from ag2net.events import event_from_dict
from ag2net.hub.dry_run import projection_delta


@dataclass(slots=True)
class ReplayResult:
    sandbox: Sandbox
    original: list[Envelope]
    replayed: list[Envelope]
    fork_at: int
    stopped: str
    first_divergence: int | None
    models: dict[str, Any] = field(default_factory=dict)
    original_turns: list[dict[str, Any]] = field(default_factory=list)
    replayed_turns: list[dict[str, Any]] = field(default_factory=list)
    #: agent id → how many of its turns lie before the fork (its replayed turns are numbered after them)
    turns_before: dict[str, int] = field(default_factory=dict)
    #: agent id → the sentence saying which tool (or view) this process lacks and how to get it
    missing: dict[str, str] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)


def same_post(a: Envelope, b: Envelope) -> bool:
    """The same post at a position: sender, event type, audience and data (ids and times differ in a replay)."""
    return (a.sender_id, a.event_type, a.audience, a.event_data) == (
        b.sender_id,
        b.event_type,
        b.audience,
        b.event_data,
    )


@dataclass(slots=True)
class Comparison:
    """Two transcripts lined up envelope by envelope; the turns lined up per agent, in order.

    ``turns``: per agent and turn number (counted from the agent's first turn in the channel), whether
    the projected history, the input, the tools offered and the reply are the same, with the history's
    delta (``removed``/``added`` events) and ``answered_by`` ("the recording" or the model's name);
    ``first_turn``: the earliest turn (by the original's start time) that differs, and ``turn_why`` what
    differs in it. ``verdict``: the outcome in words."""

    rows: list[dict[str, Any]]
    first_divergence: int | None
    why: str
    identical: bool
    turns: list[dict[str, Any]] = field(default_factory=list)
    first_turn: dict[str, Any] | None = None
    turn_why: str = ""
    verdict: str = ""
    #: How a person stepped into the original's turn at the first difference, in words ("critic's turn
    #: there was answered by alice in the original"), or ``""``; the verdict ends with it.
    operator: str = ""


def _tool_names(turn: dict[str, Any]) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in turn.get("tools") or []]


def _answered_by(result: ReplayResult, agent_id: str, record: dict[str, Any] | None, n: int = 0) -> str:
    model = result.models.get(agent_id)
    if record is None:
        return ""
    if isinstance(model, ReplayModel):
        if record.get("error") and model.live is None:
            return "no answer: the replay model has no recorded reply for this request"
        if n < len(model.marks) and model.marks[n] == "live":
            return f"the model {getattr(model.live, 'name', None) or type(model.live).__name__}"
        return "the recording"
    name = getattr(model, "name", None) or type(model).__name__
    return f"the model {name}"


def _compare_turns(result: ReplayResult) -> list[dict[str, Any]]:
    original, replayed = result.original_turns, result.replayed_turns
    out = []
    agents = list(dict.fromkeys(t["agent_id"] for t in [*original, *replayed]))
    for agent_id in agents:
        mine = [t for t in original if t["agent_id"] == agent_id]
        theirs = [t for t in replayed if t["agent_id"] == agent_id]
        offset = result.turns_before.get(agent_id, 0)
        for n in range(max(len(mine), len(theirs))):
            a = mine[n] if n < len(mine) else None
            b = theirs[n] if n < len(theirs) else None
            row: dict[str, Any] = {
                "agent_id": agent_id,
                "turn": offset + n + 1,
                "started_at": (a or b or {}).get("started_at"),
                "answered_by": _answered_by(result, agent_id, b, n),
                # "answered by alice", "edited by bob (messages)": a person stepped into the original turn
                "operator": operator_label(a) if a is not None else "",
            }
            if a is None or b is None:
                row.update(missing="replayed" if b is None else "original")
                out.append(row)
                continue
            before = [event_from_dict(e) for e in a.get("history") or []]
            after = [event_from_dict(e) for e in b.get("history") or []]
            row.update(
                history_same=before == after,
                inputs_same=a.get("inputs") == b.get("inputs"),
                tools_same=_tool_names(a) == _tool_names(b),
                tools_original=_tool_names(a),
                tools_replayed=_tool_names(b),
                reply_same=a.get("reply") == b.get("reply"),
                history_delta=projection_delta(before, after),
            )
            out.append(row)
    out.sort(key=lambda r: r.get("started_at") or "")
    return out


def _operator_note(result: ReplayResult, first: int | None, first_turn: dict[str, Any] | None) -> str:
    """The sentence naming a person's hand in the original turn at the first difference (see
    ``TurnRecord.operator``): the turn whose reply is the differing envelope, else a skipped turn of the agent
    who posted there in the replay, else the first differing turn's."""
    stepped = [
        t for t in result.original_turns if (t.get("operator") or {}).get("action") not in (None, "continue")
    ]
    if not stepped:
        return ""
    turn: dict[str, Any] | None = None
    a, b = result.original, result.replayed
    if first is not None and first < len(a):
        turn = next((t for t in stepped if t.get("reply_envelope_id") == a[first].envelope_id), None)
    if turn is None and first is not None and first < len(b):
        turn = next((t for t in stepped if t["agent_id"] == b[first].sender_id), None)
    if turn is None and first_turn is not None and first_turn.get("operator"):
        name = result.names.get(first_turn["agent_id"], first_turn["agent_id"])
        return f"{name}'s turn {first_turn['turn']} was {first_turn['operator']} in the original"
    if turn is None:
        return ""
    name = result.names.get(turn["agent_id"], turn["agent_id"])
    return f"{name}'s turn there was {operator_label(turn)} in the original"


def _row(env: Envelope | None) -> dict[str, Any] | None:
    if env is None:
        return None
    return {
        "sender_id": env.sender_id,
        "event_type": env.event_type,
        "audience": env.audience,
        "event_data": env.event_data,
    }


def _refusal(result: ReplayResult, seq: int) -> str | None:
    """The replay model's refusal in one sentence, for the agent whose envelope was due at ``seq``."""
    due = result.original[seq - 1].sender_id if 0 < seq <= len(result.original) else None
    if due in result.models and not isinstance(result.models[due], ReplayModel):
        return None  # the envelope due there came from another model: that is the divergence
    order = [due, *result.models] if due else list(result.models)
    for agent_id in order:
        model = result.models.get(agent_id or "")
        if isinstance(model, ReplayModel) and model.diverged is not None:
            name = result.names.get(agent_id or "", agent_id)
            return (
                f"{name}'s model is `replay` and has no recorded reply for a changed request; "
                f"give {name} `scripted` or `openai` to go on"
            )
    return None


def _differs(result: ReplayResult, was: Envelope, now: Envelope) -> str:
    """Why the envelope at a position differs, in words: whose, and who answered in the replay."""
    name = result.names.get(was.sender_id, was.sender_id)
    if was.sender_id != now.sender_id:
        other = result.names.get(now.sender_id, now.sender_id)
        return f"{other} posted where {name} did in the original"
    model = result.models.get(was.sender_id)
    by = "" if model is None or isinstance(model, ReplayModel) else f" (answered by the model {model.name})"
    what = "reply" if was.event_type == now.event_type else "envelope"
    return f"{name}'s {what} differs from the original's{by}"


def compare(result: ReplayResult) -> Comparison:
    """Align ``result.original`` and ``result.replayed``, name the first difference, give the verdict."""
    a, b = result.original, result.replayed
    rows = []
    first: int | None = None
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else None
        right = b[i] if i < len(b) else None
        same = left is not None and right is not None and same_post(left, right)
        rows.append({"seq": i + 1, "original": _row(left), "replayed": _row(right), "same": same})
        if not same and first is None:
            first = i
    why = ""
    if first is not None:
        if first >= len(b):
            why = "the replay ended earlier"
        elif first >= len(a):
            why = "the replay went on longer"
        else:
            model = result.models.get(a[first].sender_id)
            refused = getattr(model, "diverged", None)
            why = f"no recorded reply: {refused}" if refused else "different reply"
    turns = _compare_turns(result)
    first_turn = None
    turn_why = ""
    for row in turns:
        if "missing" in row:
            first_turn, turn_why = row, f"the turn is missing in the {row['missing']} run"
            missing = result.missing.get(row["agent_id"])
            if missing:
                turn_why = missing
            break
        changed = [k for k in ("history", "inputs", "tools", "reply") if not row[f"{k}_same"]]
        if changed:
            first_turn = row
            turn_why = "different " + ", ".join(changed)
            break
    n = len(a)
    if first is None:
        verdict = f"completed: {n} of {n} envelopes reproduced"
    else:
        seq = first + 1
        refusal = _refusal(result, seq)
        because = next(iter(result.missing.values()), None) or (
            f"the replay made nothing where the original has seq {seq}"
            if first >= len(b)
            else f"the replay went on past the original's {n} envelopes"
            if first >= n
            else _differs(result, a[first], b[first])
        )
        if refusal is not None and not result.missing:
            verdict = f"stopped at seq {seq}: {refusal}"
        else:
            verdict = f"stopped early at seq {seq} because {because}"
    operator = _operator_note(result, first, first_turn)
    if operator and first is not None:
        verdict = f"{verdict}; {operator}"
    return Comparison(
        rows=rows,
        first_divergence=first,
        why=why,
        identical=first is None,
        turns=turns,
        first_turn=first_turn,
        turn_why=turn_why,
        verdict=verdict,
        operator=operator,
    )


__all__ = ["Comparison", "ReplayResult", "compare", "same_post"]

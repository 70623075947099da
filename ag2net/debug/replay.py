"""Replay and compare: drive a forked channel's agents again and line the result up with the original.

``result = await replay(source, sandbox, overrides=...)`` attaches an ``AgentClient`` to the sandbox for
every agent that took turns in the original channel (the same default handler, turn records and plugin
tools as the real network), with the system prompt its turn records show, and a ``ReplayModel`` unless an
override gives another model. Then it walks the original envelopes after the fork point in order:

- those the network itself would make again (the hub's ``opened``/``closed``, an attached agent's invite
  ack or turn output: its reply, or what a tool posted during the turn) are awaited from the sandbox;
- the rest (posted by a script or a person: the first question, a human's answer) are posted again into
  the sandbox, as their sender, once everything before them is there;
- an envelope the attached agents answered in the original although it lies before the fork point (an
  invite, the last question) is delivered to them again through their endpoint, as the hub delivers.

It stops at the first divergence (the sandbox made something else at that position, or nothing within
``step_timeout``), then lets the sandbox run on until the channel closes, ``turn_budget`` turns have been
taken or ``timeout`` passes. ``compare(original, replayed)`` aligns the two transcripts envelope by
envelope and the turns by their position, and names what changed first.

A ``ReplayModel`` answers each turn with the original turn's tool calls and reply while the turn's input
matches the original's; on the first input that does not match it refuses (the turn fails, as a model
error would) and says so in ``diverged``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ag2net.agent import Agent, ModelCall, ModelResponse
from ag2net.client import HubClient
from ag2net.debug.fork import Sandbox
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    Envelope,
)
from ag2net.events import TextInput, ToolCallEvent, event_from_dict, part_text
from ag2net.hub.hub import Hub
from ag2net.hub.probe import projection_delta
from ag2net.ids import add_seconds
from ag2net.views.registry import VIEW_POLICIES_KNOB, view_from_spec, view_spec

_HUB_MADE = frozenset({EV_CHANNEL_OPENED, EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED})
_HANDLER_MADE = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT})


class ReplayDiverged(RuntimeError):
    """A replayed turn's input differs from the original's (the ReplayModel stops answering)."""


def _inputs_text(parts: list[Any]) -> str:
    return "\n".join(part_text(p) for p in parts)


class ReplayModel:
    """Answers with an agent's original turns, in order, while each turn's input matches."""

    def __init__(self, turns: list[dict[str, Any]], name: str = "replay") -> None:
        self.name = name
        self.turns = turns
        self.next_turn = 0
        self.diverged: str | None = None
        self._current: dict[str, Any] | None = None

    async def complete(self, request: ModelCall) -> ModelResponse:
        if request.round == 0:
            if self.diverged is not None or self.next_turn >= len(self.turns):
                self.diverged = self.diverged or "the original has no more turns for this agent"
                raise ReplayDiverged(self.diverged)
            turn = self.turns[self.next_turn]
            want = _inputs_text([TextInput(p.get("content", "")) for p in turn.get("inputs", [])])
            got = _inputs_text(request.inputs)
            if got != want:
                self.diverged = f"turn {self.next_turn + 1}: input {got!r} where the original had {want!r}"
                raise ReplayDiverged(self.diverged)
            self.next_turn += 1
            self._current = turn
            calls = turn.get("tool_calls") or []
            if calls:
                return ModelResponse(
                    tool_calls=[ToolCallEvent(c["name"], c.get("arguments") or "{}") for c in calls]
                )
        turn = self._current or {}
        return ModelResponse(content=turn.get("reply") or "")


@dataclass(slots=True)
class Override:
    """What to change for one agent in the replay (None keeps the original)."""

    view: Any = None
    system_prompt: str | None = None
    model: Any = None


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


async def _turns(source: Any, channel_id: str) -> list[dict[str, Any]]:
    if hasattr(source, "call"):
        return await source.call("list_turns", channel_id=channel_id, limit=100_000)
    return await source.list_turns(channel_id=channel_id, limit=100_000)


def _same(a: Envelope, b: Envelope) -> bool:
    return (a.sender_id, a.event_type, a.audience, a.event_data) == (
        b.sender_id,
        b.event_type,
        b.audience,
        b.event_data,
    )


def _made_in_turn(env: Envelope, turns: list[dict[str, Any]]) -> bool:
    """Whether ``env`` is a turn's output: its reply, or posted by its sender while the turn ran (a tool)."""
    for turn in turns:
        if turn.get("agent_id") != env.sender_id:
            continue
        if turn.get("reply_envelope_id") == env.envelope_id:
            return True
        start = turn.get("started_at") or ""
        if start and env.created_at and start <= env.created_at:
            end = add_seconds(start, float(turn.get("duration_ms") or 0.0) / 1000)
            if env.created_at <= end:
                return True
    return False


async def replay(
    source: Any,
    sandbox: Sandbox,
    *,
    overrides: dict[str, Override] | None = None,
    turn_budget: int = 1000,
    step_timeout: float = 10.0,
    timeout: float = 60.0,
) -> ReplayResult:
    """Drive the sandbox's channel on from its fork point (see the module docstring)."""
    hub: Hub = sandbox.hub
    cid = sandbox.channel_id
    if hasattr(source, "call"):
        original: list[Envelope] = list(await source.call("read_wal", channel_id=cid, since=0, until=None))
    else:
        original = await source.read_wal(cid)
    turns = sorted(
        await _turns(source, cid), key=lambda t: (t.get("started_at") or "", t.get("turn_id") or "")
    )
    overrides = dict(overrides or {})
    md = hub.lookup_channel(cid)
    agents = [a for a in dict.fromkeys(t["agent_id"] for t in turns) if a in hub.agents]
    keyed = {}
    for key, override in overrides.items():
        agent_id = key if key in hub.agents else hub.find_agent_id(key)
        if agent_id is None:
            raise ValueError(f"override names {key!r}, which is not an agent of the sandbox")
        keyed[agent_id] = override
        if override.view is not None:
            policies = dict(md.knobs.get(VIEW_POLICIES_KNOB) or {})
            policies[agent_id] = view_spec(view_from_spec(override.view))
            md.knobs[VIEW_POLICIES_KNOB] = policies
    client = HubClient.local(hub)
    turns_before = len(await hub.list_turns(channel_id=cid, limit=100_000))
    try:
        models: dict[str, Any] = {}
        clients = {}
        for agent_id in agents:
            mine = [t for t in turns if t["agent_id"] == agent_id]
            override = keyed.get(agent_id, Override())
            model = (
                override.model
                if override.model is not None
                else ReplayModel(mine, name=f"replay-{hub.name_for(agent_id)}")
            )
            models[agent_id] = model
            system = (
                override.system_prompt
                if override.system_prompt is not None
                else (mine[0].get("system_prompt") or "")
            )
            name = hub.name_for(agent_id)
            clients[agent_id] = await client.attach(Agent(name, model, system_prompt=system), name)
        start = sandbox.at_seq
        todo = original[start:]
        # envelopes before the fork point that the attached agents answered after it: deliver them again
        answered = {e.causation_id: e for e in todo if e.causation_id and e.sender_id in clients}
        for env in original[:start]:
            reply = answered.get(env.envelope_id)
            if reply is not None:
                endpoint = hub._bindings.get(reply.sender_id)
                if endpoint is not None:
                    await endpoint.notify(reply.sender_id, env)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stopped = "original replayed"
        first: int | None = None
        ids: dict[str, str] = {e.envelope_id: e.envelope_id for e in original[:start]}
        for offset, env in enumerate(todo):
            position = start + offset  # 0-based index of env in the original
            made_here = (
                env.event_type in _HUB_MADE
                or (env.event_type in _HANDLER_MADE and env.sender_id in clients)
                or (env.sender_id in clients and _made_in_turn(env, turns))
            )
            if not made_here:
                await _settle(hub, cid, position, loop.time() + step_timeout)
                if hub.wal_count(cid) != position:
                    first, stopped = position, "the replay made something the original did not"
                    break
                copy = env.copy()
                copy.envelope_id, copy.created_at = "", ""
                copy.causation_id = ids.get(env.causation_id or "", env.causation_id)
                await hub.post_envelope(copy)
            else:
                await _settle(hub, cid, position + 1, min(deadline, loop.time() + step_timeout), exact=False)
            wal = await hub.read_wal(cid)
            if len(wal) <= position or not _same(wal[position], env):
                first = position
                stopped = "diverged"
                break
            ids[env.envelope_id] = wal[position].envelope_id
            if loop.time() > deadline:
                stopped = "timeout"
                break
        if first is not None:  # let the sandbox run on by itself
            while loop.time() < deadline and not hub.lookup_channel(cid).is_terminal():
                recorded = await hub.list_turns(channel_id=cid, limit=turns_before + turn_budget + 1)
                taken = len(recorded) - turns_before
                if taken >= turn_budget:
                    stopped = "turn budget"
                    break
                before = hub.wal_count(cid)
                await asyncio.sleep(0.01)
                quiet = hub.wal_count(cid) == before and not any(len(m) for m in hub._mailboxes.values())
                if quiet and all(not c._workers for c in clients.values()):
                    break
        if stopped not in ("turn budget", "timeout"):  # else the agents stop now, mid-conversation
            for c in clients.values():
                await c.idle()
    finally:
        # cancelled or failed too: the attached agents stop (a model call in flight ends with them)
        await client.close()
    replayed_turns = sorted(
        await hub.list_turns(channel_id=cid, limit=100_000),
        key=lambda t: (t.get("started_at") or "", t.get("turn_id") or ""),
    )
    return ReplayResult(
        sandbox=sandbox,
        original=original,
        replayed=await hub.read_wal(cid),
        fork_at=start,
        stopped=stopped,
        first_divergence=first,
        models=models,
        original_turns=[t for t in turns if (t.get("started_at") or "") >= _fork_time(original, start)],
        replayed_turns=replayed_turns,
    )


def _fork_time(original: list[Envelope], start: int) -> str:
    return original[start - 1].created_at if start else ""


async def _settle(hub: Hub, cid: str, count: int, deadline: float, *, exact: bool = True) -> None:
    """Wait until the channel holds ``count`` envelopes (at least, unless ``exact``) and nothing is queued."""
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        n = hub.wal_count(cid)
        if n >= count and not any(len(m) for m in hub._mailboxes.values()):
            await asyncio.sleep(0.01)
            if hub.wal_count(cid) == n:
                return
        await asyncio.sleep(0.005)


@dataclass(slots=True)
class Comparison:
    """Two transcripts lined up envelope by envelope; the turns lined up per agent, in order.

    ``turns``: per agent and turn number, whether the projected history, the input, the tools offered and
    the reply are the same, with the history's delta (``removed``/``added`` events); ``first_turn``: the
    earliest turn (by the original's start time) that differs, and ``turn_why`` what differs in it."""

    rows: list[dict[str, Any]]
    first_divergence: int | None
    why: str
    identical: bool
    turns: list[dict[str, Any]] = field(default_factory=list)
    first_turn: dict[str, Any] | None = None
    turn_why: str = ""


def _tool_names(turn: dict[str, Any]) -> list[str]:
    return [t.get("function", {}).get("name", "") for t in turn.get("tools") or []]


def _compare_turns(original: list[dict[str, Any]], replayed: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    agents = list(dict.fromkeys(t["agent_id"] for t in [*original, *replayed]))
    for agent_id in agents:
        mine = [t for t in original if t["agent_id"] == agent_id]
        theirs = [t for t in replayed if t["agent_id"] == agent_id]
        for n in range(max(len(mine), len(theirs))):
            a = mine[n] if n < len(mine) else None
            b = theirs[n] if n < len(theirs) else None
            row: dict[str, Any] = {
                "agent_id": agent_id,
                "turn": n + 1,
                "started_at": (a or b or {}).get("started_at"),
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


def _row(env: Envelope | None) -> dict[str, Any] | None:
    if env is None:
        return None
    return {
        "sender_id": env.sender_id,
        "event_type": env.event_type,
        "audience": env.audience,
        "event_data": env.event_data,
    }


def compare(result: ReplayResult) -> Comparison:
    """Align ``result.original`` and ``result.replayed`` and name the first difference."""
    a, b = result.original, result.replayed
    rows = []
    first: int | None = None
    for i in range(max(len(a), len(b))):
        left = a[i] if i < len(a) else None
        right = b[i] if i < len(b) else None
        same = left is not None and right is not None and _same(left, right)
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
            why = f"different input: {refused}" if refused else "different reply"
    turns = _compare_turns(result.original_turns, result.replayed_turns)
    first_turn = None
    turn_why = ""
    for row in turns:
        if "missing" in row:
            first_turn, turn_why = row, f"the turn is missing in the {row['missing']} run"
            break
        changed = [k for k in ("history", "inputs", "tools", "reply") if not row[f"{k}_same"]]
        if changed:
            first_turn = row
            turn_why = "different " + ", ".join(changed)
            break
    return Comparison(
        rows=rows,
        first_divergence=first,
        why=why,
        identical=first is None,
        turns=turns,
        first_turn=first_turn,
        turn_why=turn_why,
    )


__all__ = ["Comparison", "Override", "ReplayDiverged", "ReplayModel", "ReplayResult", "compare", "replay"]

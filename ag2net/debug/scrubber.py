"""The protocol scrubber: what the channel's adapter thought after each seq.

``scrubber = await states_at(hub, channel_id)`` reads the channel's WAL once; ``scrubber.at(seq)`` is the
``ProtocolState`` after envelope ``seq`` (0: before the first). The adapter's own ``fold`` runs over the
prefixes, from ``initial_state`` as the hub starts it, and each state is kept: the first request folds up to
its seq, later ones fold only what lies beyond the furthest seq folded so far, so stepping costs O(1)
amortised. Folding the whole WAL ends in the hub's own current state (a test checks it).

A step never reads the WAL back. A channel's old envelopes live in the store (the hub keeps only its newest
ones in memory) and reading a block of them back costs milliseconds, hundreds on a loaded machine; so the
fold, which reads every envelope once anyway, keeps what a step needs of each: its id, event type, sender
and time, and whether accepting it made the adapter ask to close the channel (``on_accepted`` against the
state after it, as a step asked it before). The expectation evaluators read the prefix (from its end back):
for a channel whose manifest has expectations the scrubber keeps the envelopes the fold read (about 1 KB
each, beside the ~0.75 KB a folded state costs) and hands the evaluators a prefix of that list.

A ``ProtocolState`` holds the adapter state (as the adapter's ``state_to_dict``), who the adapter expects
next (``expected_next``), whether accepting that envelope made the adapter ask to close the channel
(``on_accepted``), the channel's lifecycle (pending/active/closed, from its channel events), the consulting
phase, the workflow node with its transitions (each condition evaluated by the graph's own code against a
plain reply of the expected speaker), the open expectations with their deadlines (the hub's registered
evaluators, asked when they would first fire over this prefix), the tasks and their states then, and which
state fields changed from the previous seq.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag2net.adapters.consulting import ConsultingState
from ag2net.adapters.workflow import WorkflowAdapter, WorkflowState
from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.debug.fields import FieldsDict
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    EV_TEXT,
    Envelope,
)
from ag2net.hub.dry_run import channel_log, expected_of
from ag2net.hub.expectations import ExpectationContext, threshold_seconds
from ag2net.ids import add_seconds
from ag2net.views.wal import Prefix

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub
    from ag2net.views.wal import WalLog


@dataclass(slots=True)
class ProtocolState(FieldsDict):
    """The channel as its adapter saw it right after envelope ``seq``."""

    seq: int
    envelope_id: str | None
    event_type: str | None
    sender_id: str | None
    at: str
    lifecycle: str
    state: Any
    expected: dict[str, Any] | None
    closes: dict[str, Any] | None = None
    phase: str | None = None
    round: int | None = None
    workflow: dict[str, Any] | None = None
    expectations: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)


def _plain(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _state_dict(adapter: Any, state: Any) -> Any:
    to_dict = getattr(adapter, "state_to_dict", None)
    if callable(to_dict):
        try:
            return _plain(to_dict(state))
        except Exception:
            return repr(state)
    return repr(state)


def _rule(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return {"name": getattr(obj, "name", type(obj).__name__)}


_RAISED = object()


class Scrubber:
    """Adapter states after each seq of one channel, folded on demand and kept."""

    def __init__(self, hub: Hub, md: ChannelMetadata, log: WalLog) -> None:
        self.hub = hub
        self.metadata = md
        self.adapter = hub.adapter_for_metadata(md)
        self.log = log
        self._states: list[Any] = [self.adapter.initial_state(md)]
        self._lifecycle: list[str] = [ChannelState.PENDING.value]
        self._acked: list[frozenset[str]] = [frozenset()]
        self._task_first: dict[str, int] = {}  # task id -> the first seq naming it
        # per seq (index seq - 1): (envelope id, event type, sender id, created at) of its envelope
        self._heads: list[tuple[str, str, str, str]] = []
        # seq -> what on_accepted answered when it asked for a state change; _RAISED: it raised (asked again)
        self._closes: dict[int, Any] = {}
        # the envelopes folded, kept when expectations will read the prefix (None: not kept)
        self._envelopes: list[Envelope] | None = [] if md.manifest.expectations else None

    def __len__(self) -> int:
        """How many envelopes the channel held when the scrubber was made (the last seq)."""
        return len(self.log)

    @property
    def folded(self) -> int:
        """The furthest seq folded so far."""
        return len(self._states) - 1

    def _fold_to(self, seq: int) -> None:
        states, lifecycle, acked = self._states, self._lifecycle, self._acked
        fold = self.adapter.fold
        start = len(states) - 1
        if seq <= start:
            return
        state, phase, acks = states[-1], lifecycle[-1], acked[-1]
        tasks = self._task_first
        heads, closes, kept = self._heads, self._closes, self._envelopes
        on_accepted, md = self.adapter.on_accepted, self.metadata
        for env in self.log.iter_range(start, seq):
            state = fold(env, state)
            heads.append((env.envelope_id, env.event_type, env.sender_id, env.created_at))
            if kept is not None:
                kept.append(env)
            try:
                result = on_accepted(md, env, state)
            except Exception:
                closes[len(states)] = _RAISED
            else:
                if result is not None and result.next_state is not None:
                    closes[len(states)] = {
                        "state": result.next_state.value,
                        "reason": result.auto_close_reason,
                    }
            if env.task_id and env.task_id not in tasks:
                tasks[env.task_id] = len(states)
            etype = env.event_type
            if etype == EV_CHANNEL_OPENED:
                phase = ChannelState.ACTIVE.value
            elif etype == EV_CHANNEL_CLOSED:
                phase = ChannelState.CLOSED.value
            elif etype == EV_CHANNEL_EXPIRED:
                phase = ChannelState.EXPIRED.value
            elif etype == EV_CHANNEL_INVITE_ACK:
                acks = acks | {env.sender_id}
            states.append(state)
            lifecycle.append(phase)
            acked.append(acks)

    def state(self, seq: int) -> Any:
        """The raw adapter state after ``seq`` (0: the initial state)."""
        self._check(seq)
        self._fold_to(seq)
        return self._states[seq]

    def _check(self, seq: int) -> None:
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= len(self.log):
            raise ValueError(f"seq must be between 0 and {len(self.log)}, got {seq!r}")

    def at(self, seq: int) -> ProtocolState:
        """The ``ProtocolState`` after envelope ``seq``."""
        self._check(seq)
        self._fold_to(seq)
        adapter, md = self.adapter, self.metadata
        state = self._states[seq]
        head = self._heads[seq - 1] if seq else None
        when = head[3] if head is not None else md.created_at
        lifecycle = self._lifecycle[seq]
        out = ProtocolState(
            seq=seq,
            envelope_id=head[0] if head is not None else None,
            event_type=head[1] if head is not None else None,
            sender_id=head[2] if head is not None else None,
            at=when,
            lifecycle=lifecycle,
            state=_state_dict(adapter, state),
            expected=expected_of(adapter, md, state) if lifecycle != "closed" else None,
        )
        closes = self._closes.get(seq)
        if closes is _RAISED:  # raise as the step always did, reading this one envelope back
            result = adapter.on_accepted(md, self.log[seq - 1], state)
            if result is not None and result.next_state is not None:
                closes = {"state": result.next_state.value, "reason": result.auto_close_reason}
            else:
                closes = None
        out.closes = dict(closes) if closes is not None else None
        turns = getattr(state, "turn_count", None)
        out.round = turns if isinstance(turns, int) else None
        if isinstance(state, ConsultingState):
            out.phase = (
                "awaiting question"
                if not state.initiator_sent
                else ("awaiting reply" if not state.respondent_replied else "complete")
            )
        if isinstance(state, WorkflowState) and isinstance(adapter, WorkflowAdapter):
            out.workflow = self._workflow(state)
        then = self._metadata_at(seq)
        out.expectations = self._expectations(then, state, seq, when)
        out.tasks = self._tasks(seq, when)
        if seq:
            before = _state_dict(adapter, self._states[seq - 1])
            if isinstance(before, dict) and isinstance(out.state, dict):
                out.changed = sorted(k for k in out.state if out.state.get(k) != before.get(k))
            elif before != out.state:
                out.changed = ["state"]
            if self._lifecycle[seq - 1] != lifecycle:
                out.changed.append("lifecycle")
        return out

    def changes(self) -> list[int]:
        """Every seq whose envelope changed the adapter state or the lifecycle (for jumping between them)."""
        self._fold_to(len(self.log))
        adapter = self.adapter
        out = []
        previous = _state_dict(adapter, self._states[0])
        for seq in range(1, len(self._states)):
            current = _state_dict(adapter, self._states[seq])
            if current != previous or self._lifecycle[seq] != self._lifecycle[seq - 1]:
                out.append(seq)
            previous = current
        return out

    # ---------------------------------------------------------------- details

    def _metadata_at(self, seq: int) -> ChannelMetadata:
        md = self.metadata.copy()
        md.state = ChannelState(self._lifecycle[seq])
        invitees = [p for p in md.participant_ids() if p != md.creator_id]
        md.pending_acks = [p for p in invitees if p not in self._acked[seq]] if md.state == "pending" else []
        return md

    def _workflow(self, state: WorkflowState) -> dict[str, Any]:
        adapter = self.adapter
        assert isinstance(adapter, WorkflowAdapter)
        graph = adapter.graph(state.graph_data)
        node = state.expected_next_speaker
        out: dict[str, Any] = {
            "node": node,
            "context_vars": _plain(state.context_vars),
            "max_turns": graph.max_turns,
            "default_target": _rule(graph.default_target),
            "transitions": [],
            "next_on_plain_reply": None,
        }
        if node is None:
            return out
        probe = Envelope(self.metadata.channel_id, node, None, EV_TEXT, {"text": ""})
        after = adapter.fold(probe, state)
        out["next_on_plain_reply"] = after.expected_next_speaker
        for t in sorted(graph.transitions, key=lambda t: t.priority):
            when = _rule(t.when)
            tool = when.get("args", {}).get("tool_name") if when.get("name") == "tool_called" else None
            out["transitions"].append(
                {
                    "priority": t.priority,
                    "when": when,
                    "then": _rule(t.then),
                    "holds_on_plain_reply": bool(t.when.evaluate(after, probe)),
                    "via_tool": tool,
                }
            )
        return out

    def _expectations(self, md: ChannelMetadata, state: Any, seq: int, when: str) -> list[dict[str, Any]]:
        evaluators = self.hub.expectations.evaluators
        if not when or not md.manifest.expectations:
            return []
        kept = self._envelopes
        wal: Sequence[Envelope] = Prefix(kept, seq) if kept is not None else self.log.prefix(seq)
        out = []
        for exp in md.manifest.expectations:
            evaluator = evaluators.get(exp.name)
            if evaluator is None:
                continue
            try:
                threshold = threshold_seconds(exp, float(getattr(evaluator, "default_seconds", 0.0)))
            except ValueError:
                continue

            def fires(seconds: float, evaluator: Any = evaluator, exp: Any = exp) -> Any:
                ctx = ExpectationContext.at(md, state, wal, add_seconds(when, seconds))
                return evaluator.evaluate(exp, ctx)

            entry: dict[str, Any] = {
                "name": exp.name,
                "on_violation": exp.on_violation,
                "threshold_seconds": threshold,
            }
            now = fires(0.0)
            if now is not None:
                entry.update(deadline=when, overdue=True, violators=list(now.violator_ids))
                out.append(entry)
                continue
            late = fires(threshold + 0.001)
            if late is None:
                continue  # nothing is waiting on this expectation after this seq
            lo, hi = 0, int(threshold * 1_000_000) + 1000  # microseconds: never fires at lo, fires at hi
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if fires(mid / 1_000_000) is None:
                    lo = mid
                else:
                    hi = mid
            entry.update(
                deadline=add_seconds(when, hi / 1_000_000), overdue=False, violators=list(late.violator_ids)
            )
            out.append(entry)
        return out

    def _tasks(self, seq: int, when: str) -> list[dict[str, Any]]:
        cid = self.metadata.channel_id
        named = {tid for tid, first in self._task_first.items() if first <= seq}
        tasks = [t for t in self.hub.tasks.tasks.values() if t.channel_id == cid or t.task_id in named]
        out = []
        for task in tasks:
            if task.created_at and when and task.created_at > when:
                continue
            if not when or (task.completed_at and task.completed_at <= when):
                state = task.state.value
            elif task.started_at and task.started_at <= when:
                state = "running"
            else:
                state = "created"
            out.append(
                {"task_id": task.task_id, "owner_id": task.owner_id, "title": task.spec.title, "state": state}
            )
        return out


async def states_at(hub: Hub, channel_id: str) -> Scrubber:
    """A ``Scrubber`` over the channel's WAL as it is now (the hub's cached log of a live channel)."""
    md = hub.lookup_channel(channel_id)
    log = await channel_log(hub, channel_id)
    return Scrubber(hub, md, log)


__all__ = ["ProtocolState", "Scrubber", "states_at"]

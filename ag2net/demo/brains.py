"""The demo agents' scripted "brains": deterministic replies computed from each model call and the channel's
demo step (no clock, no randomness), so the demo runs the same every time without an API key.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ag2net.agent import ModelCall, tool_call
from ag2net.client.agent_client import handling_envelope
from ag2net.events import CompactionSummary, TextInput, ToolResultEvent


class Script(Protocol):
    """What the brains read from the running demo (``DemoNetwork`` is one)."""

    human_name: str | None
    pace: float
    steps: dict[str, str]


def input_text(call: ModelCall) -> str:
    """The current input's text (parts joined)."""
    return "\n".join(p.content for p in call.inputs if isinstance(p, TextInput))


def tool_results(call: ModelCall) -> list[ToolResultEvent]:
    """The tool results this turn has produced so far."""
    return [e for e in call.turn_events if isinstance(e, ToolResultEvent)]


def messages_before(call: ModelCall) -> int:
    """How many channel messages came before this turn's input (elided ones included)."""
    prior = call.history[: call.prior]
    count = 0
    for event in prior:
        if isinstance(event, CompactionSummary):
            count += event.event_count
        else:
            count += 1
    return count


def _quote(text: str, words: int = 6) -> str:
    """The first words of a message's gist: past any ``[name]:`` label or ``Re “…”:`` lead-in."""
    bare = text.split(": ", 1)[-1]
    parts = bare.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


CRITIC_LINES = (
    "what happens when both devices edit the same record offline?",
    "the replay worker must be idempotent, or a retry doubles every change.",
    "clock skew will reorder operations; use per-device counters, not wall time.",
    "a schema migration mid-sync could strand queued operations.",
    "we need a test that drops the network halfway through a batch.",
    "the conflict screen must explain the choice in plain words.",
    "cap the queue size so a phone offline for weeks does not explode.",
    "log every reconciliation decision so support can explain it later.",
)

CODER_LINES = (
    "operations carry a device id and a per-device counter.",
    "the server acknowledges by counter, so replays are no-ops.",
    "migrations run only when the queue is empty; otherwise we defer.",
    "a fault-injection proxy in CI can cut the network mid-batch.",
    "conflicts surface as a card with both versions side by side.",
    "past ten thousand queued operations we compact them per record.",
    "decisions go to an audit table with the rule that fired.",
    "that covers it; I will write the design doc from this thread.",
)


DISCUSSION_VIEWS = {
    "researcher": (
        "Research view: most teams ship an operation log with server reconciliation first and add "
        "CRDTs only for collaborative fields."
    ),
    "critic": (
        "Critique: there is no explicit conflict policy yet, and no test for a network that drops "
        "halfway through a batch. Both before any estimate is trusted."
    ),
    "coder": (
        "Implementation: an append-only operation log in SQLite plus a replay worker; my estimate from "
        "this morning's consult is 11 days."
    ),
}
"""What each agent says in the round-robin discussion (the ``discussion`` step), by role."""


class Brains:
    """Deterministic replies for each demo agent, computed from the model call and the channel's step."""

    def __init__(self, demo: Script) -> None:
        self.demo = demo

    def step(self) -> str | None:
        """The demo step of the channel whose envelope is being handled (None outside a turn)."""
        envelope = handling_envelope.get()
        return None if envelope is None else self.demo.steps.get(envelope.channel_id)

    def for_agent(self, name: str) -> Callable[[ModelCall], Awaitable[Any]]:
        brain = getattr(self, name)

        async def turn(call: ModelCall) -> Any:
            if self.demo.pace > 0:
                await asyncio.sleep(self.demo.pace)
            return brain(call, self.step())

        return turn

    # --- planner
    def planner(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if "answered your question" in text:
            answer = text.split(":", 1)[-1].strip()
            return (
                f"Thanks, {self.demo.human_name}! Noted: {_quote(answer, 12)} I'll fold that into the plan."
            )
        if step == "discussion":
            if not results:
                return [
                    tool_call("peers", action="find", sort_by="name"),
                    tool_call("tasks", action="list", scope="all", state="all"),
                ]
            peers = _json(results[0].result, [])
            tasks = _json(results[1].result, [])
            latest = tasks[-1] if tasks else None
            tracked = (
                f"{len(tasks)} task(s) tracked, latest '{latest['title']}' is {latest['state']}"
                if latest
                else "no tasks tracked yet"
            )
            return (
                f"Wrapping up: {len(peers)} peers on the network, {tracked}. Decision: ship the operation log "
                "first, write the conflict policy next, leave CRDTs for collaborative fields later. Thanks all."
            )
        return f"Plan noted: {_quote(text)}"

    # --- researcher
    def researcher(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if step == "discussion":
            if "Wrapping up" in text:
                if not results:
                    return tool_call("channels", action="close")
                return ""  # the channel is closed: nothing more to say
            return DISCUSSION_VIEWS["researcher"]
        if step == "consult_research":
            if not results:
                return tool_call(
                    "delegate",
                    target="critic",
                    prompt="What is the biggest risk in offline-first sync for a mobile app?",
                    capability="risk-review",
                )
            return (
                "Findings: offline-first apps keep a local store and replay changes when the network returns. "
                "Two proven patterns: an operation log reconciled by the server, and CRDTs for conflict-free "
                f"merges. The critic's warning: {results[-1].result}"
            )
        return f"I can research that: {_quote(text)}"

    # --- critic
    def critic(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        if step == "discussion":
            return DISCUSSION_VIEWS["critic"]
        if step == "pairing":
            n = messages_before(call) // 2
            return f"On \u201c{_quote(text)}\u201d: {CRITIC_LINES[n % len(CRITIC_LINES)]}"
        return (
            "Conflict resolution. If two devices edit the same record offline, last-write-wins silently loses "
            "work; budget for merge rules and a conflict screen."
        )

    # --- coder
    def coder(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if step == "consult_estimate":
            if len(results) == 0:
                return tool_call("tasks", action="progress", payload={"stage": "reading the plan", "pct": 30})
            if len(results) == 1:
                return tool_call(
                    "tasks", action="progress", payload={"stage": "sizing components", "pct": 80}
                )
            estimate = (
                "Estimate: sync engine 6 days, conflict screen 3 days, network fault tests 2 days: 11 days."
            )
            if len(results) == 2:
                # complete before replying: the reply closes the consulting channel, which expires open tasks
                return tool_call("tasks", action="complete", result=estimate)
            return estimate
        if step == "discussion":
            return DISCUSSION_VIEWS["coder"]
        if step == "pairing":
            n = messages_before(call) // 2
            if n == 2 and "say" in call.tool_names:
                if not results:
                    return tool_call(
                        "say", content="(posted with say) Logging each decision in the design doc as we go."
                    )
                return ""  # say was this turn's voice
            return f"Re \u201c{_quote(text)}\u201d: {CODER_LINES[n % len(CODER_LINES)]}"
        return f"Noted: {_quote(text)}"

    # --- drafter
    def drafter(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        revision = "request" in text.lower() or "change" in text.lower()
        if not tool_results(call):
            note = "revised as asked" if revision else "first draft ready"
            return tool_call("submit_for_review", note=note)
        if revision:
            return (
                "Draft v2: Offline sync keeps your work safe without a connection. Edits queue on the device "
                "and merge when you are back online; if two devices disagree, you choose which version stays."
            )
        return "Draft v1: Offline sync is here. The app now works without a connection and syncs later."

    # --- reviewer
    def reviewer(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if not results:
            if "Draft v2" in text:
                return tool_call("approve", summary="clear, and it names the conflict rule")
            return tool_call("request_changes", reason="say what happens when two devices disagree")
        if "denied by" in results[-1].result:
            # a person denied the approval (the demo's approvals=True): say so; the workflow ends here
            return f"Not approved: {results[-1].result}"
        if "Draft v2" in text:
            return "Approved: ready to publish."
        return "One change: tell readers what happens when two devices edit the same thing."


def _json(text: str, default: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return default


__all__ = [
    "CODER_LINES",
    "CRITIC_LINES",
    "Brains",
    "Script",
    "input_text",
    "messages_before",
    "tool_results",
]

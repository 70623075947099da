"""The protocol scrubber's panel: what the channel's adapter thought right after the envelope under the
tail's cursor (``ag2net.debug.states_at``): lifecycle, expected speaker and round, consulting phase,
workflow node and its transitions, open expectations with their deadlines, tasks. Lines that differ from
the state after the previous seq are marked ``▸`` and highlighted.

The panel sits below the tail in a narrow or medium terminal and beside it in a wide one (``Screen.-wide``).
It keeps one ``Scrubber`` per channel: the first look at a channel folds up to its seq, every step after
that costs one fold at most. It needs the embedded hub; over ``--connect`` it says so in one line.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.markup import escape
from textual.widgets import Static

from ag2net.envelope import Envelope

if TYPE_CHECKING:  # ag2net.debug loads the hub: imported when the scrubber is opened (issue 28)
    from ag2net.debug import ProtocolState, Scrubber

NEEDS_HUB = "The protocol scrubber needs the embedded hub (run ag2net tui without --connect)."
KEYS = "[ ] step · { } state change · S closes"
FOLD_SLICE = 2000
"""Envelopes folded between two looks at the screen's events."""


def _time(at: str | None) -> str:
    return at[11:19] if at and len(at) >= 19 else (at or "")


class ScrubPanel(VerticalScroll, can_focus=False):
    """The adapter state at one ``(channel, seq)``, compared with the seq before it."""

    SCOPED_CSS = False  # the wide layout's rule starts at the screen (Screen.-wide ScrubPanel)

    DEFAULT_CSS = """
    ScrubPanel {
        height: 45%;
        min-height: 7;
        border-top: solid $accent;
        border-title-color: $text-accent;
        border-title-style: bold;
        background: $surface;
        padding: 0 1;
        & > #scrub-body { width: 1fr; height: auto; }
    }
    Screen.-wide ScrubPanel {
        dock: right;
        width: 44%;
        height: 1fr;
        border-left: solid $accent;
    }
    """

    def __init__(
        self,
        hub: Any,
        name_for: Callable[[str], str],
        label_for: Callable[[str], str],
        *,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.hub = hub
        self.name_for = name_for
        self.label_for = label_for
        self.scrubbers: dict[str, Scrubber] = {}
        self.channel_id: str | None = None
        self.seq: int | None = None
        self.state: ProtocolState | None = None
        self.previous: ProtocolState | None = None

    def compose(self) -> ComposeResult:
        yield Static(id="scrub-body")

    def on_mount(self) -> None:
        self.border_title = "Protocol"
        if self.hub is None:
            self.body.update(NEEDS_HUB)
        self.app.refresh_bindings()  # the step keys apply from now on: the footer shows them

    def on_unmount(self) -> None:
        self.app.refresh_bindings()

    @property
    def body(self) -> Static:
        return self.query_one("#scrub-body", Static)

    # ------------------------------------------------------------------ what to show

    def show(self, channel_id: str | None, seq: int | None) -> None:
        """Show the state after ``seq`` of ``channel_id`` (nothing when either is None)."""
        if self.hub is None:
            return
        if channel_id is None or seq is None:
            self.channel_id = self.seq = None
            self.state = self.previous = None
            self.border_title = "Protocol"
            self.body.update("Move the tail's cursor onto an envelope.")
            return
        self.channel_id, self.seq = channel_id, seq
        scrubber = self.scrubbers.get(channel_id)
        if scrubber is not None and seq <= len(scrubber):
            self._render_at(scrubber, channel_id, seq)
        else:
            self._fold(channel_id, seq)

    @work(exclusive=True, group="scrub")
    async def _fold(self, channel_id: str, seq: int) -> None:
        scrubber = await self.scrubber(channel_id)
        # the first look folds up to ``seq``: in slices, so a long channel does not freeze the screen
        for stop in range(scrubber.folded + FOLD_SLICE, min(seq, len(scrubber)), FOLD_SLICE):
            scrubber.state(stop)
            await asyncio.sleep(0)
        if (self.channel_id, self.seq) == (channel_id, seq):
            self._render_at(scrubber, channel_id, min(seq, len(scrubber)))

    async def scrubber(self, channel_id: str) -> Scrubber:
        """The channel's scrubber, made anew when the WAL grew past it."""
        scrubber = self.scrubbers.get(channel_id)
        if scrubber is None or len(scrubber) < self.hub.wal_count(channel_id):
            from ag2net.debug import states_at

            scrubber = self.scrubbers[channel_id] = await states_at(self.hub, channel_id)
        return scrubber

    def envelope(self, channel_id: str, seq: int) -> Envelope | None:
        scrubber = self.scrubbers.get(channel_id)
        if scrubber is None or not 0 < seq <= len(scrubber):
            return None
        return scrubber.log[seq - 1]

    async def change_after(self, channel_id: str, seq: int, forward: bool) -> int | None:
        """The nearest seq after (or before) ``seq`` whose envelope changed the adapter state or the channel's
        lifecycle (``Scrubber.changes`` for one step: it stops at the first, folding in slices)."""
        scrubber = await self.scrubber(channel_id)
        lifecycle: list[str] | None = getattr(scrubber, "_lifecycle", None)
        if lifecycle is None:  # pragma: no cover - a scrubber without its lifecycle list: ask for all
            changes = scrubber.changes()
            after = [c for c in changes if c > seq] if forward else [c for c in changes if c < seq]
            return (after[0] if forward else after[-1]) if after else None
        seqs = range(seq + 1, len(scrubber) + 1) if forward else range(min(seq - 1, len(scrubber)), 0, -1)
        for count, at in enumerate(seqs, 1):
            if scrubber.state(at) != scrubber.state(at - 1) or lifecycle[at] != lifecycle[at - 1]:
                return at
            if not count % FOLD_SLICE:
                await asyncio.sleep(0)
        return None

    # ------------------------------------------------------------------ rendering

    def _render_at(self, scrubber: Scrubber, channel_id: str, seq: int) -> None:
        state = scrubber.at(seq)
        previous = scrubber.at(seq - 1) if seq > 0 else None
        self.state, self.previous = state, previous
        self.border_title = f"Protocol · {self.label_for(channel_id)} · after #{seq}"
        self.body.update(self.markup(state, previous))

    def lines(self, state: ProtocolState) -> list[tuple[str, str]]:
        """``(field, text)`` lines describing ``state`` (a field repeats for a list's items)."""
        name = self.name_for
        out: list[tuple[str, str]] = []
        who = name(state.sender_id) if state.sender_id else ""
        envelope = f"#{state.seq} {who} · {state.event_type}" if state.seq else "before the first envelope"
        out.append(("envelope", envelope))
        out.append(("lifecycle", state.lifecycle))
        if state.expected is not None:
            expected = name(state.expected["agent_id"]) if state.expected.get("agent_id") else "anyone"
        else:
            expected = "no one in particular" if state.lifecycle != "closed" else "—"
        if state.round is not None:
            expected += f" · round {state.round}"
        out.append(("expected", expected))
        if state.phase is not None:
            out.append(("phase", state.phase))
        if state.closes is not None:
            out.append(("closes", f"accepting it closes the channel ({state.closes.get('reason')})"))
        if state.workflow is not None:
            wf = state.workflow
            node = name(wf["node"]) if wf.get("node") else "—"
            nxt = name(wf["next_on_plain_reply"]) if wf.get("next_on_plain_reply") else "—"
            out.append(
                ("workflow", f"node {node} → {nxt} on a plain reply · max {wf.get('max_turns')} turns")
            )
            for t in wf.get("transitions") or ():
                out.append(("transitions", self._transition(t)))
        if state.expectations:
            for exp in state.expectations:
                out.append(("expectations", self._expectation(exp)))
        else:
            out.append(("expectations", "none open"))
        if state.tasks:
            for task in state.tasks:
                owner = name(task["owner_id"]) if task.get("owner_id") else "?"
                out.append(
                    ("tasks", f"{task.get('title') or task['task_id'][:8]} · {owner} · {task['state']}")
                )
        else:
            out.append(("tasks", "none"))
        return out

    def _transition(self, t: dict[str, Any]) -> str:
        when, then = t.get("when") or {}, t.get("then") or {}
        mark = "✓" if t.get("holds_on_plain_reply") else " "
        return f"{mark} {t.get('priority')}: {self._rule(when)} → {self._rule(then)}"

    def _rule(self, rule: dict[str, Any]) -> str:
        args = rule.get("args") or {}
        words = []
        for key, value in args.items():
            if isinstance(value, str) and len(value) == 32 and key.endswith("id"):
                value = self.name_for(value)
            words.append(f"{value}")
        return f"{rule.get('name')}({', '.join(words)})" if words else str(rule.get("name"))

    def _expectation(self, exp: dict[str, Any]) -> str:
        text = f"{exp.get('name')}"
        if exp.get("deadline"):
            text += f" by {_time(exp['deadline'])}"
        if exp.get("overdue"):
            text += " OVERDUE"
        violators = exp.get("violators") or []
        if violators:
            text += " · waits on " + ", ".join(self.name_for(v) for v in violators)
        if exp.get("on_violation"):
            text += f" · then {exp['on_violation']}"
        return text

    def changed_fields(self, state: ProtocolState, previous: ProtocolState | None) -> set[str]:
        """The fields whose lines differ from the previous seq's (the envelope line always differs)."""
        if previous is None:
            return set()
        now: dict[str, list[str]] = {}
        before: dict[str, list[str]] = {}
        for field, text in self.lines(state):
            now.setdefault(field, []).append(text)
        for field, text in self.lines(previous):
            before.setdefault(field, []).append(text)
        return {f for f in now if f != "envelope" and now[f] != before.get(f)}

    def markup(self, state: ProtocolState, previous: ProtocolState | None) -> str:
        changed = self.changed_fields(state, previous)
        out: list[str] = []
        last = None
        for field, text in self.lines(state):
            head = field if field != last else ""
            last = field
            mark = "▸" if field in changed else " "
            line = f"{mark} {head:<12} {escape(text)}"
            out.append(f"[b $text-warning]{line}[/]" if field in changed else line)
        if previous is not None:
            out.append(
                "[dim]changed from #{}: {}[/]".format(
                    previous.seq, escape(", ".join(sorted(changed)) or "nothing shown here")
                )
            )
        return "\n".join(out)


__all__ = ["KEYS", "NEEDS_HUB", "ScrubPanel"]

"""Stepping into the live network from the workbench (issue 24): the inbox "Waiting for you" (``w``),
"Break when…" (``b`` on a tail envelope, a channel, a peer, the agent view's participant), the
breakpoints list, step mode, held posts in the tail, and the envelope detail's "edited at a breakpoint".

``SteppingIn`` is one of the app's rooms (``WorkbenchActions`` inherits it, it inherits ``FeedRouting``):
the feed's waiting / audit messages in, ``HubSource``'s stepping-in calls out, always as the human.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual import on, work
from textual.screen import Screen
from textual.widgets import DataTable

from ag2net.breakpoints import Breakpoint
from ag2net.errors import NetworkError
from tui.app_routing import FeedRouting
from tui.commands import DomainCommand
from tui.feed import (
    BreakpointsChanged,
    HeldEdited,
    InviteAnswered,
    InviteSeen,
    WaitingChanged,
    WaitingLoaded,
    YourTurns,
)
from tui.models import Inbox, InboxEntry
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.tail_held import HeldRow
from tui.wording import humanize, namer_for

NETWORK = "*"
"""Step mode's key for the whole network (as the hub keeps it)."""

DECISION_SCREENS = {
    "turn": ("tui.screens.paused_turn", "PausedTurnScreen"),
    "approval": ("tui.screens.approval", "ApprovalScreen"),
}
"""The screens that decide a paused turn and an approval (module, class)."""

NEW_ITEM = {
    "held": "{who}'s post is held at a breakpoint in {where}",
    "turn": "{who}'s turn is paused before its model call in {where}",
    "approval": "{who} asks to run {tool} in {where}",
    "your_turn": "{where} expects you to speak",
    "invite": "{who} invites you to {where}",
}


class SteppingIn(FeedRouting):
    """The inbox, breakpoints and step mode (a base of ``WorkbenchActions``)."""

    if TYPE_CHECKING:  # set in WorkbenchApp.__init__
        clock: Callable[[], float]

    def init_stepping(self) -> None:
        """The state of this room (called from ``WorkbenchApp.__init__``)."""
        self.inbox = Inbox()
        """Everything waiting for the human; the inbox screen lists it, the status bar counts it."""
        self.breakpoints: list[Breakpoint] = []
        self.edited: dict[str, str] = {}
        """``{envelope_id: "edited at a breakpoint by NAME"}``: envelopes admitted by an edit (or a redirect)
        at a breakpoint, as the audit log says."""
        self.step_channels: set[str] = set()
        """Channels in step mode as this workbench knows it (``NETWORK``: all of them)."""
        self.stepping = True
        """The hub answers the stepping-in ops (an older hub, or a connection that is no operator: no)."""

    def open_screens(self, module: str, name: str) -> list[Any]:
        """The screens of class ``name`` of ``module`` on the stack: none when that module was never imported
        (the screens are imported when they first open, so nothing of one is open before)."""
        loaded = sys.modules.get(module)
        if loaded is None:
            return []
        klass = getattr(loaded, name)
        return [screen for screen in self.screen_stack if isinstance(screen, klass)]

    # ------------------------------------------------------------------ the feed's messages

    @on(WaitingLoaded)
    def _waiting_loaded(self, event: WaitingLoaded) -> None:
        self.stepping = event.stepping
        self.breakpoints = list(event.breakpoints)
        fresh = self.inbox.set_waiting(event.items, self.clock())
        self._inbox_changed(fresh)

    @on(WaitingChanged)
    def _waiting_changed(self, event: WaitingChanged) -> None:
        new = self.inbox.apply(event.change, event.item, self.clock())
        entry = self.inbox.get(event.item.item_id)
        self._inbox_changed([entry] if new and entry is not None else [])
        for screen in self.screen_stack:  # a paused turn's or an approval's screen: answered elsewhere?
            changed = getattr(screen, "item_changed", None)
            if callable(changed):
                changed(event.item)

    @on(YourTurns)
    def _your_turns(self, event: YourTurns) -> None:
        entries = [e for e in event.entries if e.channel_id in self.source.metadata]
        self._inbox_changed(self.inbox.set_your_turns(entries), quiet=True)

    @on(InviteSeen)
    def _invite_seen(self, event: InviteSeen) -> None:
        env = event.envelope
        entry = InboxEntry(
            f"invite:{env.envelope_id}", "invite", env.channel_id, env.sender_id, env.created_at, envelope=env
        )
        self._inbox_changed([entry] if self.inbox.put(entry) else [])

    @on(InviteAnswered)
    def _invite_answered(self, event: InviteAnswered) -> None:
        self.inbox.drop_channel(event.channel_id, "invite")
        self._inbox_changed([])

    @on(HeldEdited)
    def _held_edited(self, event: HeldEdited) -> None:
        self.edited[event.envelope_id] = event.note

    @on(BreakpointsChanged)
    def _breakpoints_changed(self, event: BreakpointsChanged) -> None:
        record = event.record
        if record.get("kind") == "step_mode":
            key = record.get("channel_id") or NETWORK
            if record.get("on", True):
                self.step_channels.add(str(key))
            else:
                self.step_channels.discard(str(key))
        self._reload_breakpoints_soon()

    @work(group="breakpoints", exclusive=True)
    async def _reload_breakpoints_soon(self) -> None:
        try:
            await self.reload_breakpoints()
        except NetworkError:
            return
        for screen in self.open_screens("tui.screens.breakpoints", "BreakpointsScreen"):
            screen.show(self.breakpoints)

    @on(EnvelopeTail.HeldOpened)
    def _held_opened(self, event: EnvelopeTail.HeldOpened) -> None:
        self.action_inbox(event.held.key)

    def _inbox_changed(self, fresh: list[InboxEntry], *, quiet: bool = False) -> None:
        """After the inbox changed: the count, the tail's held rows, the open inbox, a toast for items new
        since startup (``quiet``: the human's own turns, which the chat's question toast announces)."""
        self.status.waiting = len(self.inbox)
        label = self.channel_label
        self.tail.set_held(
            [
                HeldRow(e.key, e.envelope, e.would_be_seq, label(e.channel_id))
                for e in self.inbox.held()
                if e.envelope is not None
            ]
        )
        for screen in self.open_screens("tui.screens.inbox", "InboxScreen"):
            screen.refresh_entries()
        if quiet or not fresh or not self.ready:
            return  # what waited before the workbench opened: the status bar counts it
        for entry in fresh[:3]:
            self.notify(self.new_item_text(entry) + " — press w", title="Waiting for you", timeout=8)

    def new_item_text(self, entry: InboxEntry) -> str:
        tool = entry.item.detail.get("tool", "a tool") if entry.item is not None else ""
        who = self.source.name_for(entry.agent_id) if entry.agent_id else "someone"
        text = NEW_ITEM.get(entry.kind, "{where} waits for you")
        if entry.kind == "held" and entry.item is not None and entry.item.detail.get("reason") == "step":
            text = "{who}'s post is held by step mode in {where}"
        return text.format(who=who, where=self.channel_label(entry.channel_id), tool=tool)

    # ------------------------------------------------------------------ the inbox (InboxHost)

    def now(self) -> float:
        """The workbench's clock (monotonic seconds): countdowns count against it."""
        return self.clock()

    def name_for(self, agent_id: str) -> str:
        return self.source.name_for(agent_id)

    def action_inbox(self, key: str | None = None) -> None:
        """Open "Waiting for you" (on ``key``'s entry when given)."""
        from tui.screens.inbox import InboxScreen

        screen = InboxScreen(self)
        self.push_screen(screen)
        if key is not None:

            def focus_entry() -> None:
                if key in screen._keys:
                    screen.option_list.highlighted = screen._keys.index(key)

            self.call_after_refresh(focus_entry)

    def audience_ids(self, channel_id: str, names: list[str]) -> tuple[list[str], str]:
        """The ids of ``names`` among the channel's participants, or ([], a sentence naming who is not)."""
        by_name = {name.lower(): agent_id for agent_id, name in self.source.participants(channel_id)}
        if not names:
            return [], "Give one or more names of the channel's participants."
        unknown = [n for n in names if n.lower() not in by_name]
        if unknown:
            known = ", ".join(sorted(name for _, name in self.source.participants(channel_id)))
            return [], f"{', '.join(unknown)} is not in {self.channel_label(channel_id)} ({known})."
        return [by_name[n.lower()] for n in names], ""

    async def answer_entry(self, entry: InboxEntry, action: str, **fields: Any) -> None:
        """Answer ``entry`` as the human; raises the hub's refusal (humanized) when it refuses."""
        try:
            if entry.kind == "invite" and entry.envelope is not None:
                if action == "accept":
                    await self.source.accept_invite(entry.envelope)
                else:
                    await self.source.decline_invite(entry.envelope, fields.get("reason", ""))
                self.inbox.drop(entry.key)
            else:
                await self.source.answer_waiting(entry.key, action, **fields)
                self.inbox.drop(entry.key)  # the hub's "answered" event says so too
        except NetworkError as exc:
            raise type(exc)(humanize(str(exc), namer_for(self))) from exc
        self._inbox_changed([])
        self.notify(self._answered_text(entry, action, fields), timeout=3)

    def _answered_text(self, entry: InboxEntry, action: str, fields: dict[str, Any]) -> str:
        what = f"{self.source.name_for(entry.agent_id)}'s post" if entry.kind == "held" else "it"
        done = {
            "release": "released",
            "edit": "edited and released",
            "drop": "dropped",
            "redirect": "redirected",
            "accept": "accepted",
            "decline": "declined",
        }.get(action, action)
        return f"{what[0].upper()}{what[1:]} {done}."

    def open_entry(self, entry: InboxEntry) -> None:
        """``enter`` on a paused turn, an approval (their screens), or the human's turn (its chat)."""
        if entry.kind == "your_turn":
            while len(self.screen_stack) > 1:
                self.pop_screen()
            self.channel_list.select(entry.channel_id)
            self.action_focus_pane("chat")
            return
        screen = self._decision_screen(entry)
        if screen is None:
            return

        def decided(answer: dict[str, Any] | None) -> None:
            if answer:
                self._decide(entry, dict(answer))

        self.push_screen(screen, decided)

    def _decision_screen(self, entry: InboxEntry) -> Screen[Any] | None:
        if entry.item is None:
            return None
        module, name = DECISION_SCREENS[entry.kind]
        try:  # helper H3b's screens: ModalScreens dismissing with answer_waiting's fields (or None)
            screen_class = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            self.notify("This workbench has no screen for it yet.", severity="warning")
            return None
        return screen_class(
            entry.item, name_for=self.source.name_for, channel_label=self.channel_label(entry.channel_id)
        )

    @work(group="decide")
    async def _decide(self, entry: InboxEntry, answer: dict[str, Any]) -> None:
        action = str(answer.pop("action", ""))
        try:
            await self.answer_entry(entry, action, **answer)
        except NetworkError as exc:
            self.notify(str(exc), severity="error", timeout=8)

    async def toggle_expectations(self, channel_id: str) -> str:
        paused = channel_id not in self._paused_clocks
        await self.source.pause_expectations(channel_id, paused)
        if paused:
            self._paused_clocks.add(channel_id)
            return f"{self.channel_label(channel_id)}'s expectation clock is paused (p resumes it)."
        self._paused_clocks.discard(channel_id)
        return f"{self.channel_label(channel_id)}'s expectation clock runs again."

    @property
    def _paused_clocks(self) -> set[str]:
        clocks = getattr(self, "_paused_clock_set", None)
        if clocks is None:
            clocks = self._paused_clock_set = set()
        return clocks

    # ------------------------------------------------------------------ break when…, breakpoints, step mode

    def action_break_when(self) -> None:
        """``b``: "Break when…" prefilled from what the focused pane shows."""
        spec, origin, kind = self._spec_here()
        self.open_break_when(spec, origin, kind)

    def _spec_here(self) -> tuple[str, str, str]:
        from tui.screens.break_when import spec_for_channel, spec_for_envelope, spec_for_peer

        pane = self.active_pane
        name_for = self.source.name_for
        if pane == "tail":
            row = self.tail.cursor_row
            if row is not None:
                env = row.envelope
                label = self.channel_label(env.channel_id)
                sender = name_for(env.sender_id)
                return spec_for_envelope(env, sender, label), f"{sender}'s #{row.seq}", "envelope"
        if pane == "channels":
            channel_id = self._channel_under_cursor()
            if channel_id is not None:
                label = self.channel_label(channel_id)
                return spec_for_channel(label), label, "envelope"
        if pane == "peers":
            peer = self.peers.card.peer
            if peer is not None:
                return spec_for_peer(peer.name), peer.name, "envelope"
        if pane == "view":
            view = self.projected_view
            if view.participant_id and view.channel_id:
                name = name_for(view.participant_id)
                spec = f"{spec_for_peer(name)} {spec_for_channel(self.channel_label(view.channel_id))}"
                return spec, f"{name}'s next turn", "turn"
        return "", "", "envelope"

    def _channel_under_cursor(self) -> str | None:
        table = self.channel_list.query_one(DataTable)
        if table.row_count:
            try:
                key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            except Exception:  # the cursor is off the rows
                key = None
            if key is not None:
                return str(key)
        return self.current_channel

    def open_break_when(self, spec: str = "", origin: str = "", on: str = "envelope") -> None:
        async def submit(query: str, kind: str) -> Breakpoint:
            try:
                breakpoint_ = await self.source.break_on(query, on=kind)
            except NetworkError as exc:
                raise type(exc)(humanize(str(exc), namer_for(self))) from exc
            await self.reload_breakpoints()
            return breakpoint_

        def done(breakpoint_: Breakpoint | None) -> None:
            if breakpoint_ is not None:
                stops = "turns" if breakpoint_.on == "turn" else "posts"
                self.notify(f"Breaking on {stops} matching {breakpoint_.spec}.", timeout=4)

        from tui.screens.break_when import BreakWhenScreen

        self.push_screen(BreakWhenScreen(spec, submit, on=on, origin=origin), done)

    def action_breakpoints(self) -> None:
        from tui.screens.breakpoints import BreakpointsScreen

        self.push_screen(BreakpointsScreen(self))

    async def reload_breakpoints(self) -> list[Breakpoint]:
        self.breakpoints = await self.source.list_breakpoints()
        return self.breakpoints

    async def toggle_breakpoint(self, breakpoint_id: str, enabled: bool) -> None:
        await self.source.set_breakpoint(breakpoint_id, enabled)

    async def delete_breakpoint(self, breakpoint_id: str) -> None:
        await self.source.remove_breakpoint(breakpoint_id)

    def step_mode_text(self) -> str:
        if NETWORK in self.step_channels:
            return "Step mode: on for the whole network (every substantive post is held)."
        if self.step_channels:
            labels = ", ".join(sorted(self.channel_label(c) for c in self.step_channels))
            return f"Step mode: on in {labels}."
        return "Step mode: off (s: the selected channel, S: the whole network)."

    def toggle_step_mode(self, network: bool) -> None:
        channel_id = None if network else self.current_channel
        if not network and channel_id is None:
            self.notify(
                "Select a channel first (1, then enter), or step the whole network.", severity="warning"
            )
            return
        self._toggle_step(channel_id)

    @work(group="step-mode")
    async def _toggle_step(self, channel_id: str | None) -> None:
        key = channel_id or NETWORK
        on = key not in self.step_channels
        try:
            answer = await self.source.step_mode(channel_id, on)
        except NetworkError as exc:
            self.notify(humanize(str(exc), namer_for(self)), severity="error")
            return
        step = answer.get("step")
        if isinstance(step, list):  # the hub's step mode now: channel ids, "*" for the network
            self.step_channels = {str(s) for s in step}
        elif on:
            self.step_channels.add(key)
        else:
            self.step_channels.discard(key)
        where = "the whole network" if channel_id is None else self.channel_label(channel_id)
        state = "on: every substantive post is held until you release it (w)" if on else "off"
        self.notify(f"Step mode {state} in {where}.", timeout=5)
        for screen in self.open_screens("tui.screens.breakpoints", "BreakpointsScreen"):
            screen.show(self.breakpoints)

    def stepping_commands(self) -> list[DomainCommand]:
        """The palette's entries for stepping in."""
        held = len(self.inbox)
        commands = [
            DomainCommand(
                "Waiting for you…",
                f"Held posts, paused turns, approvals, your turns, invites ({held} now; w)",
                self.action_inbox,
            ),
            DomainCommand(
                "Break when…",
                "Hold posts (or pause turns) matching a spec, e.g. sender:critic type:ag2.msg.text (b)",
                self.action_break_when,
            ),
            DomainCommand(
                "Breakpoints…", "List, enable, disable or remove breakpoints", self.action_breakpoints
            ),
        ]
        channel_id = self.selected_channel
        if channel_id is not None:
            on = channel_id in self.step_channels
            commands.append(
                DomainCommand(
                    f"Step mode {'off' if on else 'on'}: {self.channel_label(channel_id)}",
                    "Hold every substantive post of the selected channel until you release it",
                    lambda: self.toggle_step_mode(False),
                )
            )
        network_on = NETWORK in self.step_channels
        commands.append(
            DomainCommand(
                f"Step mode {'off' if network_on else 'on'}: whole network",
                "Hold every substantive post of every channel until you release it",
                lambda: self.toggle_step_mode(True),
            )
        )
        return commands


__all__ = ["NETWORK", "SteppingIn"]

"""The debugger's keys on the workbench (issue 12): the visibility matrix (``m``), the causation tree (``t``,
from the tail's cursor or an open envelope detail) and the protocol scrubber (``S`` toggles its panel in the
tail; ``[`` / ``]`` step one envelope of the channel, ``{`` / ``}`` jump to the previous / next state change).

``WorkbenchApp`` inherits ``DebuggerActions``: its bindings (remappable by id like the others), its actions
and its handlers for the tail's cursor. Everything here runs ``ag2net.debug`` on the embedded hub; over
``--connect`` (no hub in process) each feature says in one line that it needs the embedded hub.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeGuard

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType

from tui.commands import DomainCommand
from tui.source import HubSource
from tui.text_fields import is_text_field
from tui.widgets.channel_list import ChannelList
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.scrub_panel import ScrubPanel

if TYPE_CHECKING:
    from tui.screens.causation_tree import Jump
    from tui.widgets.envelope_detail import EnvelopeDetail

# The matrix's and the tree's screens are imported when they open (the first frame needs neither).


def shows_detail(screen: object) -> TypeGuard[EnvelopeDetail]:
    """``screen`` is an envelope's detail. Its module is looked up only once something imported it (it
    brings Textual's editor, which the first frame has none of): before that, no screen can be one."""
    detail = sys.modules.get("tui.widgets.envelope_detail")
    return detail is not None and isinstance(screen, detail.EnvelopeDetail)


class DebuggerHost(Protocol):
    """What the debugger needs of the app it is mixed into (``WorkbenchApp``; not imported: no cycle)."""

    @property
    def source(self) -> HubSource: ...

    @property
    def tail(self) -> EnvelopeTail: ...

    @property
    def channel_list(self) -> ChannelList: ...

    @property
    def current_channel(self) -> str | None: ...

    def channel_label(self, channel_id: str) -> str: ...

    def select_channel(self, channel_id: str | None) -> None: ...

    def action_focus_pane(self, pane: str) -> None: ...


DEBUG_ACTIONS = frozenset({"visibility_matrix", "causation_tree", "scrub", "scrub_step", "scrub_change"})
"""The actions ``WorkbenchApp.check_action`` hands to ``check_debug_action``."""

SCRUB_ID = "scrub-panel"


class DebuggerActions(App[None]):
    """Bindings, actions and tail-cursor handlers of the debugger screens (mixed into ``WorkbenchApp``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "m",
            "visibility_matrix",
            "Visibility",
            show=False,
            id="debug.visibility",
            tooltip="Who got each envelope of the selected channel, and what each model sees of it",
        ),
        Binding(
            "t",
            "causation_tree",
            "Causes",
            show=False,
            id="debug.causation",
            tooltip="The causation tree of the envelope under the cursor (or the one open)",
            priority=True,  # it works from the envelope detail too (a modal screen)
        ),
        Binding(
            "S",
            "scrub",
            "Scrub",
            show=False,
            id="debug.scrub",
            tooltip="Show (or hide) the protocol state at the tail's cursor",
        ),
        Binding(
            "left_square_bracket",
            "scrub_step(-1)",
            "Prev seq",
            id="debug.scrub_prev",
            tooltip="Scrub one back",
        ),
        Binding(
            "right_square_bracket", "scrub_step(1)", "Next seq", id="debug.scrub_next", tooltip="Scrub one on"
        ),
        Binding(
            "left_curly_bracket",
            "scrub_change(-1)",
            "Prev change",
            id="debug.scrub_prev_change",
            tooltip="Back to the previous envelope that changed the protocol state",
        ),
        Binding(
            "right_curly_bracket",
            "scrub_change(1)",
            "Next change",
            id="debug.scrub_next_change",
            tooltip="On to the next envelope that changed the protocol state",
        ),
    ]

    @property
    def _wb(self) -> DebuggerHost:
        return self  # type: ignore[return-value]

    @property
    def debug_hub(self) -> Any:
        """The in-process hub the debugger reads (None over ``--connect``)."""
        return getattr(self._wb.source.hc, "hub", None)

    # ------------------------------------------------------------------ which keys apply

    def _on_main_screen(self) -> bool:
        return bool(self.screen_stack) and self.screen is self.screen_stack[0]

    def _typing(self) -> bool:
        return is_text_field(self.screen.focused) and self._on_main_screen()

    def check_debug_action(self, action: str) -> bool | None:
        if action == "causation_tree":
            if shows_detail(self.screen):
                return True
            return self._on_main_screen() and not self._typing()
        if not self._on_main_screen() or self._typing():
            return False
        if action in ("scrub_step", "scrub_change"):
            return self.scrub_panel is not None
        return True

    # ------------------------------------------------------------------ visibility matrix

    def action_visibility_matrix(self) -> None:
        from tui.screens.visibility_matrix import NEEDS_HUB as MATRIX_NEEDS_HUB
        from tui.screens.visibility_matrix import VisibilityMatrixScreen

        app = self._wb
        hub = self.debug_hub
        if hub is None:
            self.notify(MATRIX_NEEDS_HUB, severity="warning")
            return
        row = app.tail.cursor_row
        channel_id = app.current_channel or (row.envelope.channel_id if row is not None else None)
        if not channel_id:
            self.notify(
                "Select a channel first (1, then enter): the matrix shows one channel.", severity="warning"
            )
            return
        seq = row.seq if row is not None and row.envelope.channel_id == channel_id else None
        channels = [(md.manifest.type, cid) for cid, md in app.source.metadata.items()]
        self.push_screen(
            VisibilityMatrixScreen(
                hub,
                channel_id,
                app.channel_label(channel_id),
                app.source.name_for,
                seq=seq,
                channels=channels,
            )
        )

    # ------------------------------------------------------------------ causation tree

    def action_causation_tree(self) -> None:
        from tui.screens.causation_tree import NEEDS_HUB as TREE_NEEDS_HUB
        from tui.screens.causation_tree import CausationTreeScreen

        app = self._wb
        screen = self.screen
        if shows_detail(screen):
            envelope = screen.envelope
        else:
            row = app.tail.cursor_row
            if row is None:
                self.notify("Move the tail's cursor onto an envelope first.", severity="warning")
                return
            envelope = row.envelope
        hub = self.debug_hub
        if hub is None:
            self.notify(TREE_NEEDS_HUB, severity="warning")
            return
        self.push_screen(
            CausationTreeScreen(
                hub,
                envelope.envelope_id,
                channel_id=envelope.channel_id,
                name_for=app.source.name_for,
                label_for=app.channel_label,
            ),
            self._jump_to,
        )

    def _jump_to(self, jump: Jump | None) -> None:
        """Show ``jump``'s envelope in its channel's tail (the tree's Enter)."""
        if jump is None:
            return
        app = self._wb
        while len(self.screen_stack) > 1 and shows_detail(self.screen):
            self.pop_screen()
        app.channel_list.select(jump.channel_id)
        app.select_channel(jump.channel_id)
        app.action_focus_pane("tail")
        if not app.tail.goto_envelope(jump.envelope_id):
            self.notify(
                f"#{jump.seq} of {app.channel_label(jump.channel_id)} is not among the rows the tail shows; "
                "clear its filter (x) or wait for its history to load.",
                severity="warning",
            )

    # ------------------------------------------------------------------ protocol scrubber

    _scrub: ScrubPanel | None = None

    @property
    def scrub_panel(self) -> ScrubPanel | None:
        """The open scrub panel (kept on mount: every cursor move asks, and searching the screen for it
        cost ~3.5 ms a key)."""
        panel = self._scrub
        if panel is not None and not panel.is_attached:
            panel = self._scrub = None
        return panel

    def action_scrub(self) -> None:
        app = self._wb
        panel = self.scrub_panel
        if panel is not None:
            panel.remove()
            self.refresh_bindings()
            return
        panel = ScrubPanel(self.debug_hub, app.source.name_for, app.channel_label, id=SCRUB_ID)
        tail = app.tail
        self.query_one("#tail-pane").mount(panel, after=tail)
        self._scrub = panel
        tail.pause()
        app.action_focus_pane("tail")
        self.call_after_refresh(self._scrub_follow_cursor)
        self.refresh_bindings()

    def _scrub_follow_cursor(self) -> None:
        panel = self.scrub_panel
        if panel is None:
            return
        row = self._wb.tail.cursor_row
        if row is None:
            panel.show(None, None)
        else:
            panel.show(row.envelope.channel_id, row.seq)

    @on(EnvelopeTail.CursorMoved)
    def _scrub_cursor_moved(self) -> None:
        if self.is_running:
            self._scrub_follow_cursor()

    @on(EnvelopeTail.StateChanged)
    def _scrub_view_changed(self) -> None:
        if self.is_running:
            self._scrub_follow_cursor()

    def action_scrub_step(self, delta: int) -> None:
        panel = self.scrub_panel
        if panel is None or panel.channel_id is None or panel.seq is None:
            return
        self.scrub_to(panel.channel_id, panel.seq + delta)

    def scrub_to(self, channel_id: str, seq: int) -> bool:
        """Show the state after ``seq`` and move the tail's cursor onto that envelope; False when ``seq`` is
        outside the channel."""
        panel = self.scrub_panel
        if panel is None:
            return False
        envelope = panel.envelope(channel_id, seq)
        if envelope is None:
            self.bell()
            return False
        panel.show(channel_id, seq)
        if not self._wb.tail.goto_envelope(envelope.envelope_id):
            self.notify(f"#{seq} is not among the rows the tail shows (filtered out?).", timeout=3)
        return True

    @work(exclusive=True, group="scrub-change")
    async def action_scrub_change(self, delta: int) -> None:
        panel = self.scrub_panel
        if panel is None or panel.channel_id is None or panel.seq is None:
            return
        channel_id, seq = panel.channel_id, panel.seq
        target = await panel.change_after(channel_id, seq, delta > 0)
        if target is None:
            where = "after" if delta > 0 else "before"
            self.notify(f"No protocol state change {where} #{seq}.", timeout=3)
            return
        self.scrub_to(channel_id, target)

    # ------------------------------------------------------------------ palette

    def debug_commands(self) -> list[DomainCommand]:
        return [
            DomainCommand(
                "Visibility matrix…",
                "Who got each envelope of the selected channel, and what each model sees of it (m)",
                self.action_visibility_matrix,
            ),
            DomainCommand(
                "Causation tree…",
                "Causes and consequences of the envelope under the tail's cursor, across channels (t)",
                self.action_causation_tree,
            ),
            DomainCommand(
                "Protocol scrubber",
                "Show or hide the adapter's state at the tail's cursor; [ ] step, { } state changes (S)",
                self.action_scrub,
            ),
        ]


def debug_binding_classes() -> tuple[type, ...]:
    """Classes whose binding ids a user may remap (``WorkbenchApp.binding_ids``)."""
    from tui.screens.causation_tree import CausationTreeScreen
    from tui.screens.visibility_matrix import VisibilityMatrixScreen

    return (DebuggerActions, VisibilityMatrixScreen, CausationTreeScreen)


__all__ = ["DEBUG_ACTIONS", "DebuggerActions", "debug_binding_classes"]

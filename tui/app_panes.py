"""The workbench's panes: which show at the terminal's width, which has the keyboard, and the keys that
move between them (1–4, i, ctrl+g, escape, F1, ?); toasts kept above the bars and the focused field.

``PaneLayout`` is the lowest of the app's rooms (``WorkbenchApp`` inherits it through ``FeedRouting``
and ``WorkbenchActions``); the state it reads is set in ``WorkbenchApp.__init__``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.events import Resize
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import DataTable, Input, OptionList, TabbedContent

from tui.collector import IdleCollector
from tui.debugger import DebuggerActions
from tui.feed import LiveFeed
from tui.screens.jump import JumpOverlay
from tui.settings import Settings
from tui.source import HubSource
from tui.text_fields import is_text_field
from tui.widgets.channel_list import ChannelList
from tui.widgets.chat_input import ChatInput
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.pane_strip import PaneStrip
from tui.widgets.peer_card import PeersPane
from tui.widgets.projected_view import ProjectedView
from tui.widgets.status_bar import StatusBar

WIDE = 140
"""From this many columns the three panes sit side by side."""
NARROW = 100
"""Below this many columns one pane shows at a time; between NARROW and WIDE the right pane (agent view,
peers) takes the middle's place when chosen, beside the channels."""

PANE_OF_CONTAINER = {"channels-pane": "channels", "tail-pane": "tail", "right-pane": "right"}


class PaneLayout(DebuggerActions):
    """The panes of the workbench and the keyboard's way between them (a base of ``WorkbenchApp``)."""

    if TYPE_CHECKING:  # the workbench's state, set in WorkbenchApp.__init__
        settings: Settings
        source: HubSource
        selected_channel: str | None
        ready: bool
        collector: IdleCollector
        demo: Callable[[], Awaitable[Any]] | None
        demo_started: bool
        autostart_demo: bool
        offer_demo: bool
        _feed: LiveFeed | None
        _query_mode: str
        _focus_before_chat: Widget | None
        _bottom_height: int
        active_pane: str
        middle: str

    @property
    def feed(self) -> LiveFeed:
        """Where the panes' data comes from; made on mount, over ``self.source`` as it is then."""
        if self._feed is None:
            raise RuntimeError("the live feed starts when the workbench is mounted")
        return self._feed

    @property
    def tail(self) -> EnvelopeTail:
        return self.query_one("#tail", EnvelopeTail)

    @property
    def channel_list(self) -> ChannelList:
        return self.query_one("#channels", ChannelList)

    @property
    def chat(self) -> ChatInput:
        return self.query_one("#chat", ChatInput)

    @property
    def status(self) -> StatusBar:
        return self.query_one("#status", StatusBar)

    @property
    def projected_view(self) -> ProjectedView:
        return self.query_one("#view", ProjectedView)

    @property
    def peers(self) -> PeersPane:
        return self.query_one("#peers", PeersPane)

    # ------------------------------------------------------------------ text fields

    def _in_text_field(self) -> bool:
        """The main screen is on top and a text field (input, editor) there has the keyboard."""
        focused = self.screen.focused
        return self.screen is self.screen_stack[0] and is_text_field(focused)

    def action_leave_field(self) -> None:
        """Escape in a text field of the main screen: back to navigating the pane it belongs to."""
        focused = self.screen.focused
        bar = self.query_one("#query-bar", Input)
        if focused is bar:
            bar.remove_class("-visible")
            self.tail.focus()
        elif focused is self.chat.input:
            self.leave_chat()
        elif focused is self.channel_list.filter_input:
            self.channel_list.action_clear_filter()  # esc clears the channel filter
        else:
            home = self._pane_home(self.pane_of(focused) if focused is not None else None)
            (home or self.tail).focus()

    def leave_chat(self) -> None:
        """Give focus back to the pane focused before the chat (the tail when there was none)."""
        before, self._focus_before_chat = self._focus_before_chat, None
        if before is not None and before.is_attached and before.focusable and before is not self.chat.input:
            before.focus()
        else:
            self.tail.focus()

    # ------------------------------------------------------------------ focus, jump, help

    # ------------------------------------------------------------------ layout: which panes show

    def pane_of(self, widget: Widget | None) -> str | None:
        """The pane (channels, tail, view, peers) holding ``widget``; None for the bars and modals."""
        node = widget
        while node is not None and node is not self.screen:
            node_id = node.id or ""
            if node_id == "tab-view":
                return "view"
            if node_id == "tab-peers":
                return "peers"
            if node_id in PANE_OF_CONTAINER:
                kind = PANE_OF_CONTAINER[node_id]
                if kind == "right":
                    active = self.query_one("#right-tabs", TabbedContent).active
                    return "peers" if active == "tab-peers" else "view"
                return kind
            node = node.parent  # type: ignore[assignment]
        return None

    @property
    def layout_mode(self) -> str:
        """``wide`` (three panes), ``medium`` (channels + one of tail / right) or ``narrow`` (one pane)."""
        width = self.size.width
        return "wide" if width >= WIDE else "medium" if width >= NARROW else "narrow"

    def shown_panes(self) -> set[str]:
        """The panes on screen at the current width."""
        mode = self.layout_mode
        right = {"view"} if self.query_one("#right-tabs", TabbedContent).active == "tab-view" else {"peers"}
        if mode == "wide":
            return {"channels", "tail"} | right
        if mode == "medium":
            return {"channels"} | (right if self.middle == "right" else {"tail"})
        if self.active_pane in ("view", "peers"):
            return right
        return {self.active_pane}

    def _show_panes(self) -> None:
        """Put the layout classes on ``#main`` for the active pane and mark the pane strip."""
        main = self.query_one("#main")
        show = "right" if self.active_pane in ("view", "peers") else self.active_pane
        main.set_classes(f"-show-{show} -middle-{self.middle}")
        self.query_one(PaneStrip).show(self.active_pane, self.shown_panes())

    def _set_active_pane(self, pane: str) -> None:
        if pane in ("view", "peers"):
            self.middle = "right"
        elif pane == "tail":
            self.middle = "tail"
        self.active_pane = pane
        self._show_panes()

    def _focus_moved(self, focused: Widget | None) -> None:
        """Focus moved (keys, mouse, jump): the pane it went to becomes the active one."""
        if self.screen is not self.screen_stack[0] or not self.is_running:
            return
        self.call_after_refresh(self.lift_toasts)  # toasts go above a text field low on the screen
        pane = self.pane_of(focused)
        if pane is not None and pane != self.active_pane:
            self._set_active_pane(pane)

    def on_resize(self, event: Resize) -> None:
        if self.is_running and self.screen_stack:
            self.call_after_refresh(self._show_panes)

    def lift_toasts(self, bottom_height: int | None = None) -> None:
        """Keep notifications above the chat, status and footer bars (the chat's refusal stays readable),
        and above the focused text field when it sits in the lower half of the screen (the query bar under
        the tail): a toast never covers the input it talks about."""
        if bottom_height is not None:
            self._bottom_height = bottom_height
        if not self.screen_stack:
            return
        main = self.screen_stack[0]
        margin = self._bottom_height
        focused = main.focused
        if focused is not None and is_text_field(focused) and focused.region.height:
            below = main.size.height - focused.region.y
            if below <= main.size.height // 2:
                margin = max(margin, below)
        for rack in main.query("ToastRack"):
            rack.styles.margin = (0, 0, margin, 0)

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        self.lift_toasts()  # placed where the focused field is now, not where it was when focus came
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def _pane_home(self, pane: str | None) -> Widget | None:
        """The widget that takes the keyboard when ``pane`` is chosen: a list, never a text field."""
        if pane == "channels":
            return self.channel_list.query_one(DataTable)
        if pane == "tail":
            return self.tail
        if pane == "view":
            return self.projected_view.query_one("#pv-participant")
        if pane == "peers":
            return self.peers.query_one("#peers-list", OptionList)
        return None

    def _pane_widget(self, pane: str) -> Widget:
        tabs = self.query_one("#right-tabs", TabbedContent)
        if pane == "view":
            tabs.active = "tab-view"
        elif pane == "peers":
            tabs.active = "tab-peers"
        return self._pane_home(pane) or self.chat.input

    def action_focus_pane(self, pane: str) -> None:
        widget = self._pane_widget(pane)
        if pane == "chat":
            if not widget.has_focus:
                self._focus_before_chat = self.focused
        else:
            self._set_active_pane(pane)
        # at once, not after the queued messages (``widget.focus()`` waits its turn): keys typed right
        # after ``i`` ("ihello" pasted, or typed fast) go to the field, not to the pane left behind
        widget.screen.set_focus(widget)

    def action_jump(self) -> None:
        shown = self.shown_panes()
        strip = self.query_one(PaneStrip)

        def where(pane: str, widget: Widget) -> Widget:
            return widget if pane in shown or not strip.display else strip.tab(pane)

        view_target = self.query_one("#right-tabs").query_one("Tabs")
        targets = {
            "c": (where("channels", self.query_one("#channels-pane")), "channels"),
            "t": (where("tail", self.query_one("#tail-pane")), "WAL tail"),
            "v": (where("view", self.query_one("#right-pane")), "agent view"),
            "p": (where("peers", view_target), "peers"),
            "i": (self.chat, "chat"),
        }
        names = {"c": "channels", "t": "tail", "v": "view", "p": "peers", "i": "chat"}

        def jumped(key: str | None) -> None:
            if key:
                self.action_focus_pane(names[key])

        self.push_screen(JumpOverlay(targets), jumped)

    def action_toggle_help(self) -> None:
        from textual.widgets import HelpPanel, KeyPanel  # on first use: the help's Markdown is slow to import

        from tui.widgets.keys_panel import ScrollingHelpPanel

        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.screen.query(KeyPanel).remove()
            self.screen.mount(ScrollingHelpPanel())  # scrolls as one page instead of cutting the text

    def action_toggle_keys(self) -> None:
        from textual.widgets import HelpPanel, KeyPanel

        from tui.widgets.keys_panel import BindingIdsPanel

        existing = self.screen.query(KeyPanel).filter(".-keys-only")
        if existing:
            existing.remove()
        else:
            self.screen.query(HelpPanel).remove()
            self.screen.mount(BindingIdsPanel(classes="-keys-only"))  # with the ids [keys] remaps


__all__ = ["NARROW", "PANE_OF_CONTAINER", "WIDE", "PaneLayout"]

"""The workbench app: channels (left), the live WAL tail (centre), agent view and peers (right), chat and
status at the bottom. Its data comes from one ``LiveFeed`` (tui/feed.py); the app routes the feed's
messages to the panes with ``@on`` handlers and turns the person's actions into calls on ``HubSource``.

This module composes the screen, declares the keys and starts the feed; the rest is in the rooms the app
inherits, lowest first: ``app_panes.py`` (which panes show, focus between them), ``app_routing.py``
(messages to the panes) and ``app_actions.py`` (compose, fork, open / close channels, palette).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.events import Event, Key, MouseDown, MouseScrollDown, MouseScrollUp, Resize
from textual.widget import Widget
from textual.widgets import Header, Input, TabbedContent, TabPane

from ag2net.client import HubClient, HumanClient
from tui.app_actions import DemoStarter, WorkbenchActions
from tui.app_panes import NARROW, WIDE
from tui.collector import IdleCollector
from tui.commands import WorkbenchCommands
from tui.debugger import DEBUG_ACTIONS, debug_binding_classes
from tui.feed import FAILURES, FirstRead, LiveFeed, read_first
from tui.settings import Settings, check_keymap, keymap_conflicts
from tui.source import HubSource
from tui.widgets.channel_list import ChannelList, ChannelTable
from tui.widgets.chat_input import ChatInput
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.pane_strip import PaneStrip
from tui.widgets.peer_card import PeersPane
from tui.widgets.projected_view import ProjectedView
from tui.widgets.status_bar import StatusBar

SHORT = 30
"""Below this many rows the header goes when the pane strip shows (the strip names the panes)."""

SETTLE_AT_THE_LATEST = 10.0
"""Seconds after mounting when the startup pause of the garbage collector ends even if no page came."""
COLLECT_CHECK_INTERVAL = 0.5
"""Seconds between checks whether a deferred full garbage collection is due and the moment is good."""


class BottomBars(Vertical):
    """Chat, status and footer, docked at the bottom; tells the app its height so toasts sit above it."""

    def on_resize(self, event: Resize) -> None:
        app = self.app
        if isinstance(app, WorkbenchApp):
            app.lift_toasts(event.size.height)


class WorkbenchApp(WorkbenchActions):
    """The ag2net workbench."""

    TITLE = "ag2net workbench"
    CSS_PATH = Path(__file__).parent / "workbench.tcss"
    COMMANDS = App.COMMANDS | {WorkbenchCommands}
    ENABLE_COMMAND_PALETTE = True
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [
        (0, "-narrow"),
        (NARROW, "-medium"),
        (WIDE, "-wide"),
    ]
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"), (SHORT, "-tall")]

    HELP = """\
## ag2net workbench

**1** channels · **2** WAL tail · **3** agent view · **4** peers · **i** chat · **ctrl+g** jump labels.
**Escape** leaves a text field. **F1** help for the focused pane · **?** keys that apply here ·
**ctrl+p** command palette. In a narrow terminal one pane shows at a time: **1**–**4** or a click on
the strip at the top switches.

Debugging: **m** visibility matrix of the channel · **t** causation tree of the envelope · **S** protocol
scrubber in the tail (**[** / **]** step, **{** / **}** state changes).

Stepping in: **w** *Waiting for you* (held posts, paused turns, approvals, your turns, invites) ·
**b** *Break when…* on the tail's envelope, the channel, the peer or the agent's next turn; the
palette lists the breakpoints and toggles step mode.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: resolved when the app reads the key, so the keys typed after it (queued already) are
        # routed to the pane it chose; a plain binding runs only once the key has bubbled back up from the
        # old focus, after those keys went there (check_action leaves them to a text field or a modal)
        Binding(
            "1", "focus_pane('channels')", "Channels", show=False, id="app.focus_channels", priority=True
        ),
        Binding("2", "focus_pane('tail')", "Tail", show=False, id="app.focus_tail", priority=True),
        Binding("3", "focus_pane('view')", "Agent view", show=False, id="app.focus_view", priority=True),
        Binding("4", "focus_pane('peers')", "Peers", show=False, id="app.focus_peers", priority=True),
        Binding(
            "i",
            "focus_pane('chat')",
            "Chat",
            id="app.focus_chat",
            tooltip="Type into the selected channel",
            priority=True,
        ),
        Binding("ctrl+g", "jump", "Jump", id="app.jump", tooltip="Show a letter on every pane to jump to it"),
        Binding(
            "f1", "toggle_help", "Help", id="app.help", tooltip="Help for the focused pane", priority=True
        ),
        Binding("question_mark", "toggle_keys", "Keys", id="app.keys", tooltip="Keys that apply here"),
        Binding(
            "ctrl+e",
            "compose_envelope",
            "Compose",
            id="app.compose",
            tooltip="Hand-craft an envelope",
            priority=True,
        ),
        Binding(
            "ctrl+o",
            "open_channel",
            "Open channel",
            id="app.open_channel",
            tooltip="Open a channel",
            priority=True,
        ),
        Binding(
            "ctrl+w",
            "close_channel",
            "Close channel",
            id="app.close_channel",
            tooltip="Close the selected channel (asks first)",
            priority=True,
        ),
        Binding(
            "escape",
            "leave_field",
            "Leave field",
            show=False,
            id="app.leave_field",
            tooltip="Leave the text field and go back to the pane",
            priority=True,
        ),
        Binding(
            "w",
            "inbox",
            "Waiting",
            show=False,  # the status bar says "⚑ N waiting · w" while anything waits
            id="app.inbox",
            tooltip="Waiting for you: held posts, paused turns, approvals, your turns, invites",
        ),
        Binding(
            "b",
            "break_when",
            "Break when…",
            show=False,
            id="app.break_when",
            tooltip="Set a breakpoint on posts like the tail's envelope, the channel, the peer or the agent's turn",
        ),
        Binding(
            "F",
            "fork_here",
            "Fork here…",
            show=False,
            id="app.fork",
            tooltip="Fork the channel at the tail's envelope (or the agent view's turn) and replay it with changes",
        ),
    ]
    MAIN_SCREEN_ACTIONS = frozenset(
        {
            "compose_envelope",
            "open_channel",
            "close_channel",
            "leave_field",
            "fork_here",
            "focus_pane",
            "inbox",
            "break_when",
        }
    )
    """App actions that act on the main screen only: on a modal their keys go to the modal's widgets."""

    def __init__(
        self,
        hub_client: HubClient,
        human: HumanClient,
        settings: Settings | None = None,
        clock: Callable[[], float] | None = None,
        *,
        demo: DemoStarter | None = None,
        observe: bool = True,
        load_history: bool = True,
        collector: IdleCollector | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.source = HubSource(hub_client, human)
        self.clock = clock or time.monotonic
        self.demo = demo
        self.demo_started = False
        self.autostart_demo = False
        """Start the demo as soon as the first page is shown (``ag2net tui --demo``)."""
        self.offer_demo = False
        """Suggest the demo once (a new, empty database)."""
        self.observe_enabled = observe
        self.load_history = load_history
        self.selected_channel: str | None = None
        self.ready = False
        """The first page is shown, peers and health loaded, observing begun (the feed's ``Ready``)."""
        self._feed: LiveFeed | None = None
        self._first_read: FirstRead | None = None
        self.collector = collector or IdleCollector()
        """When Python's full garbage collections run: not while the workbench starts, not mid-typing
        (``tui.launch`` passes one it holds already: from before the app's modules are imported)."""
        self._query_mode = "filter"
        self._focus_before_chat: Widget | None = None
        self._bottom_height = 0
        """The chat, status and footer bars' height: toasts sit above them."""
        self.active_pane = "tail"
        """The pane that has (or last had) the keyboard: channels, tail, view or peers."""
        self.init_stepping()
        self.middle = "tail"
        """What the middle shows in a medium-width terminal: the tail, or the right pane (view / peers)."""
        self.keymap_warning = ""
        """One sentence when ``[keys]`` gives two bindings that apply together the same key ('' if not)."""
        if self.settings.keys:  # without a remapping there is nothing to check (nor screens to import)
            check_keymap(self.settings, self.binding_ids())
            self.keymap_warning = keymap_conflicts(self.settings, type(self), self.binding_classes()[1:])
            self.set_keymap(self.settings.keys)

    # ------------------------------------------------------------------ composition

    def compose(self) -> ComposeResult:
        yield Header(icon="◆")
        yield PaneStrip(id="pane-strip")
        with Horizontal(id="main", classes="-show-tail -middle-tail"):
            with Vertical(id="channels-pane", classes="pane") as channels:
                channels.border_title = "1 Channels"
                yield ChannelList(id="channels")
            with Vertical(id="tail-pane", classes="pane") as tail_pane:
                tail_pane.border_title = "2 WAL · all channels"
                yield EnvelopeTail(self.source.name_for, limit=self.settings.tail_limit, id="tail")
                yield Input(id="query-bar")
            with Vertical(id="right-pane", classes="pane") as right:
                right.border_title = "3 Agent view · 4 Peers"
                with TabbedContent(id="right-tabs", initial="tab-view"):
                    with TabPane("Agent view", id="tab-view"):
                        yield ProjectedView(
                            self.source.load_projection, name_for=self.source.name_for, id="view"
                        )
                    with TabPane("Peers", id="tab-peers"):
                        yield PeersPane(id="peers")
        with BottomBars(id="bottom"):
            yield ChatInput(id="chat")
            yield StatusBar(id="status")
            yield FittedFooter(pinned_actions={"toggle_help"})

    @classmethod
    def binding_classes(cls) -> list[type]:
        """The classes whose bindings a user may remap in ``[keys]`` (the app's first).

        The screens (and the envelope detail) are imported here, not when the app is: the first frame needs
        none of them."""
        from tui.screens.break_when import BreakWhenScreen
        from tui.screens.breakpoints import BreakpointsScreen
        from tui.screens.composer import EnvelopeComposer
        from tui.screens.confirm import ConfirmScreen
        from tui.screens.fork import ForkForm
        from tui.screens.inbox import AskScreen, EditHeldScreen, InboxScreen
        from tui.screens.open_channel import OpenChannelForm
        from tui.screens.replay_compare import ReplayCompare
        from tui.widgets.envelope_detail import EnvelopeDetail

        return [
            cls,
            EnvelopeTail,
            ChannelList,
            ChannelTable,
            ChatInput,
            ProjectedView,
            PeersPane,
            EnvelopeComposer,
            EnvelopeDetail,
            OpenChannelForm,
            ConfirmScreen,
            ForkForm,
            ReplayCompare,
            InboxScreen,
            AskScreen,
            EditHeldScreen,
            BreakWhenScreen,
            BreakpointsScreen,
            *debug_binding_classes(),
        ]

    @classmethod
    def binding_ids(cls) -> set[str]:
        """Every binding id a user may remap in ``[keys]``."""
        ids: set[str] = set()
        for klass in cls.binding_classes():
            for binding in getattr(klass, "BINDINGS", []):
                if isinstance(binding, Binding) and binding.id:
                    ids.add(binding.id)
        return ids

    # ------------------------------------------------------------------ startup

    def on_mount(self) -> None:
        if self.settings.theme in self.available_themes:
            self.theme = self.settings.theme
        else:
            self.notify(
                f"theme {self.settings.theme!r} is unknown; using {self.theme!r} "
                f"(choose one of {', '.join(sorted(self.available_themes)[:6])}…)",
                severity="warning",
            )
        if self.keymap_warning:
            self.notify(self.keymap_warning, severity="warning", timeout=15)
        self.status.connection = self.source.connection_label
        self.status.progress = "loading channels…"
        self.tail.focus()
        self.watch(self.tail, "pending_count", self._pending_changed, init=False)
        self.watch(self.screen, "focused", self._focus_moved, init=False)
        self._show_panes()
        self._feed = LiveFeed(
            self,
            self.source,
            first_page=self.settings.first_page,
            history_limit=self.settings.tail_limit,
            observe=self.observe_enabled,
            load_history=self.load_history,
            first_read=self._first_read,
        )
        self._first_read = None
        self.tail.pager = self._feed  # the tail reads what it does not hold through the feed
        self.feed.start()
        self.set_timer(SETTLE_AT_THE_LATEST, self.collector.settle, name="collector settle")
        self.set_interval(COLLECT_CHECK_INTERVAL, self.collector.tick, name="collector tick")

    async def read_first_page(self) -> None:
        """Read the channels and the newest page before the app runs (``tui.launch`` calls it), so the first
        frame shows the rows: once the app runs, the same reads wait behind the mounting of every widget.
        A failure here is left to the feed's startup, which reads again and says what went wrong."""
        try:
            self._first_read = await read_first(self.source, self.settings.first_page)
        except FAILURES:
            self._first_read = None

    def on_unmount(self) -> None:
        if self._feed is not None:
            self._feed.stop()
        self.collector.release()

    def on_load(self) -> None:
        self.collector.hold()

    async def on_event(self, event: Event) -> None:
        if isinstance(event, (Key, MouseDown, MouseScrollDown, MouseScrollUp)):
            self.collector.note_input()
        await super().on_event(event)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in DEBUG_ACTIONS:
            return self.check_debug_action(action)
        if action in self.MAIN_SCREEN_ACTIONS and self.screen is not self.screen_stack[0]:
            return False  # a modal is up: the key is its widgets' (ctrl+e ends a line in its editor)
        if action == "leave_field":
            return self._in_text_field()
        if action == "focus_pane" and self._in_text_field():
            return False  # typed into the field (the bindings are priority ones)
        if action == "close_channel":
            md = self.source.metadata.get(self.current_channel or "")
            return md is not None and not md.is_terminal()
        if action == "compose_envelope":
            return True if self.source.metadata else None
        return True


async def build_app(
    hub_client: HubClient,
    human: HumanClient,
    settings: Settings | None = None,
    *,
    clock: Callable[[], float] | None = None,
    demo: DemoStarter | None = None,
    observe: bool = True,
    load_history: bool = True,
) -> WorkbenchApp:
    """The app factory tests and snapshots use: every dependency injectable, nothing read from disk."""
    return WorkbenchApp(
        hub_client,
        human,
        settings or Settings(),
        clock,
        demo=demo,
        observe=observe,
        load_history=load_history,
    )


async def run_workbench(
    hub_client: HubClient, human: HumanClient, settings: Settings, *, demo: DemoStarter | None = None
) -> None:
    """Run the workbench until the user quits, on the event loop that owns ``hub_client``."""
    await WorkbenchApp(hub_client, human, settings, demo=demo).run_async()


__all__ = ["WorkbenchApp", "build_app", "run_workbench"]

"""The workbench app: channels (left), the live WAL tail (centre), agent view and peers (right), chat and
status at the bottom. Its data comes from one ``LiveFeed`` (tui/feed.py); the app routes the feed's
messages to the panes with ``@on`` handlers and turns the person's actions into calls on ``HubSource``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.events import DeliveryFailed, Event, Key, MouseDown, MouseScrollDown, MouseScrollUp, Resize
from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.widgets import (
    DataTable,
    Header,
    HelpPanel,
    Input,
    KeyPanel,
    OptionList,
    TabbedContent,
    TabPane,
    TextArea,
)

from ag2net.client import HubClient, HumanClient
from ag2net.envelope import EV_PACKET, EV_TEXT, Envelope
from ag2net.errors import NetworkError
from ag2net.naming import channel_labels
from ag2net.views import registered_views
from tui.collector import IdleCollector
from tui.commands import DomainCommand, WorkbenchCommands
from tui.debugger import DEBUG_ACTIONS, DEBUG_BINDING_CLASSES, DebuggerActions
from tui.feed import (
    AgentsChanged,
    ChannelChanged,
    ChannelsLoaded,
    ConnectionChanged,
    FeedBatch,
    HealthChanged,
    HistoryBatch,
    HumanAsked,
    LiveFeed,
    PeersLoaded,
    Progress,
    RateTick,
    Ready,
    TurnRecorded,
)
from tui.filtering import FilterError
from tui.formatting import preview
from tui.screens.composer import ChannelChoice, EnvelopeComposer
from tui.screens.confirm import ConfirmScreen
from tui.screens.fork import ForkForm
from tui.screens.jump import JumpOverlay
from tui.screens.open_channel import OpenChannelForm
from tui.screens.replay_compare import ReplayCompare
from tui.settings import Settings, check_keymap, keymap_conflicts, screenshot_directory, screenshot_failure
from tui.source import HubSource
from tui.widgets.channel_list import ChannelList, ChannelTable
from tui.widgets.chat_input import ChatInput
from tui.widgets.envelope_detail import EnvelopeDetail
from tui.widgets.envelope_tail import EnvelopeTail
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.keys_panel import BindingIdsPanel, ScrollingHelpPanel
from tui.widgets.pane_strip import PaneStrip
from tui.widgets.peer_card import PeersPane
from tui.widgets.projected_view import ProjectedView
from tui.widgets.status_bar import StatusBar
from tui.wording import humanize, namer_for, plural

DemoStarter = Callable[[], Awaitable[Any]]

WIDE = 140
"""From this many columns the three panes sit side by side."""
NARROW = 100
"""Below this many columns one pane shows at a time; between NARROW and WIDE the right pane (agent view,
peers) takes the middle's place when chosen, beside the channels."""
SHORT = 30
"""Below this many rows the header goes when the pane strip shows (the strip names the panes)."""

SETTLE_AFTER_READY = 0.3
"""Seconds after the first page when the garbage collector's startup pause ends (the page is painted by then)."""
SETTLE_AT_THE_LATEST = 10.0
"""Seconds after mounting when the startup pause of the garbage collector ends even if no page came."""
COLLECT_CHECK_INTERVAL = 0.5
"""Seconds between checks whether a deferred full garbage collection is due and the moment is good."""

PANE_OF_CONTAINER = {"channels-pane": "channels", "tail-pane": "tail", "right-pane": "right"}


class BottomBars(Vertical):
    """Chat, status and footer, docked at the bottom; tells the app its height so toasts sit above it."""

    def on_resize(self, event: Resize) -> None:
        app = self.app
        if isinstance(app, WorkbenchApp):
            app.lift_toasts(event.size.height)


class WorkbenchApp(DebuggerActions):
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
            "F",
            "fork_here",
            "Fork here…",
            show=False,
            id="app.fork",
            tooltip="Fork the channel at the tail's envelope (or the agent view's turn) and replay it with changes",
        ),
    ]
    MAIN_SCREEN_ACTIONS = frozenset(
        {"compose_envelope", "open_channel", "close_channel", "leave_field", "fork_here", "focus_pane"}
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
        self.collector = IdleCollector()
        """When Python's full garbage collections run: not while the workbench starts, not mid-typing."""
        self._query_mode = "filter"
        self._focus_before_chat: Widget | None = None
        self._bottom_height = 0
        """The chat, status and footer bars' height: toasts sit above them."""
        self.active_pane = "tail"
        """The pane that has (or last had) the keyboard: channels, tail, view or peers."""
        self.middle = "tail"
        """What the middle shows in a medium-width terminal: the tail, or the right pane (view / peers)."""
        check_keymap(self.settings, self.binding_ids())
        self.keymap_warning = keymap_conflicts(self.settings, type(self), self.binding_classes()[1:])
        """One sentence when ``[keys]`` gives two bindings that apply together the same key ('' if not)."""
        if self.settings.keys:
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

    @classmethod
    def binding_classes(cls) -> list[type]:
        """The classes whose bindings a user may remap in ``[keys]`` (the app's first)."""
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
            *DEBUG_BINDING_CLASSES,
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
        )
        self.tail.pager = self._feed  # the tail reads what it does not hold through the feed
        self.feed.start()
        self.set_timer(SETTLE_AT_THE_LATEST, self.collector.settle, name="collector settle")
        self.set_interval(COLLECT_CHECK_INTERVAL, self.collector.tick, name="collector tick")

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

    # ------------------------------------------------------------------ the feed, routed to the panes

    @on(ChannelsLoaded)
    def _channels_loaded(self, event: ChannelsLoaded) -> None:
        self.channel_list.set_channels(event.rows)
        if self.selected_channel:
            self._sync_selected_channel()

    @on(ChannelChanged)
    def _channel_changed(self, event: ChannelChanged) -> None:
        self.channel_list.upsert(event.row)
        if event.channel_id == self.selected_channel:
            self._sync_selected_channel()
            # a state change (pending → active → closed) changes the tools the agent view shows as offered
            self.projected_view.note_activity({event.channel_id})
            self.refresh_bindings()  # ^w Close channel goes from the footer once the channel is closed

    @on(FeedBatch)
    def _feed_batch(self, event: FeedBatch) -> None:
        if event.items:
            self.tail.append_many(event.items)
        if event.activity:
            self.channel_list.bump(event.activity)
        if event.seen:
            self.projected_view.note_activity(event.seen)

    @on(TurnRecorded)
    def _turn_recorded(self, event: TurnRecorded) -> None:
        self.projected_view.note_turn(event.channel_id, event.agent_id)

    @on(HistoryBatch)
    def _history_batch(self, event: HistoryBatch) -> None:
        kept = self.tail.prepend_many(event.items)
        self.status.progress = f"history {event.done:,}/{event.total:,}"
        if kept < len(event.items):  # the tail is full
            self.feed.stop_history()
            self.status.progress = ""

    @on(AgentsChanged)
    def _agents_changed(self) -> None:
        self.tail.refresh_names()

    @on(PeersLoaded)
    def _peers_loaded(self, event: PeersLoaded) -> None:
        self.peers.set_peers(event.peers)

    @on(Progress)
    def _progress(self, event: Progress) -> None:
        self.status.progress = event.text

    @on(RateTick)
    def _rate_tick(self, event: RateTick) -> None:
        self.status.push_rate(event.count)

    @on(HealthChanged)
    def _health_changed(self, event: HealthChanged) -> None:
        self.status.health = event.text

    @on(ConnectionChanged)
    def _connection_changed(self, event: ConnectionChanged) -> None:
        if event.reconnecting is not None:
            self.status.reconnecting = event.reconnecting
        if event.connected is not None:
            self.status.connected = event.connected
        if event.reconnected:
            self.notify("reconnected", title=self.source.connection_label, timeout=4)
        if event.error:
            self.status.progress = ""
            self.notify(event.error, severity="error", timeout=10)

    @on(Ready)
    def _feed_ready(self) -> None:
        self.ready = True
        if self.selected_channel is None:
            asked = self._open_question()
            if asked is not None:  # asked before this workbench started: shown as if asked now
                self.channel_list.select(asked)
        self.set_timer(SETTLE_AFTER_READY, self.collector.settle, name="collector settle")
        if self.autostart_demo:
            self.start_demo()
        elif self.offer_demo and self.demo is not None:
            self.notify(
                "This database is empty. Start the scripted demo network from the command palette: "
                "ctrl+p, then 'Start demo network'.",
                title="New here?",
                timeout=12,
            )

    def _open_question(self) -> str | None:
        """The channel whose newest text asks the human and is still open (the demo's question to a web
        tab that opened after it was asked), or None."""
        seen: set[str] = set()
        for row in reversed(self.tail.visible_rows()):
            env = row.envelope
            if env.event_type != EV_TEXT or env.channel_id in seen:
                continue
            seen.add(env.channel_id)  # only the newest text of a channel: an answered question is not open
            md = self.source.metadata.get(env.channel_id)
            if md is not None and not md.is_terminal() and self.source.addressed_to_human(env):
                return env.channel_id
        return None

    @on(HumanAsked)
    def _human_asked(self, event: HumanAsked) -> None:
        """Someone asks the human and it is the human's turn: say so, and show that channel if none is."""
        envelope = event.envelope
        sender = self.source.name_for(envelope.sender_id)
        self.notify(
            f"{sender} asks you: {preview(envelope, 80)} — press i to answer",
            title=self.channel_label(envelope.channel_id),
            timeout=12,
        )
        if self.selected_channel is None:
            self.channel_list.select(envelope.channel_id)

    # ------------------------------------------------------------------ channels

    @property
    def current_channel(self) -> str | None:
        """The channel chosen in the channels pane, even when its ``Selected`` message is still on its way
        (a key bound with priority can overtake it)."""
        lists = self.screen_stack[0].query(ChannelList) if self.screen_stack else None
        return lists.first().selected_channel if lists else self.selected_channel

    def channel_labels(self) -> dict[str, str]:
        """``{channel_id: label}`` for every channel the workbench knows, each label unique among them."""
        return channel_labels((md.manifest.type, cid) for cid, md in self.source.metadata.items())

    def channel_label(self, channel_id: str) -> str:
        """The channel's short label (``discussion·7d80``), with as many id digits as tell it apart from
        every other channel the workbench knows."""
        if channel_id not in self.source.metadata:
            return self.source.label_for(channel_id)
        return self.channel_labels()[channel_id]

    # Messages from the panes below can still be waiting in the app's queue when Textual starts tearing
    # the screen down (the test harness does that while the app loop runs). The app stops running before
    # any pane is removed, so a handler that sees it running has every pane.

    @on(ChannelList.Selected)
    def _channel_selected(self, event: ChannelList.Selected) -> None:
        if self.is_running:
            self.select_channel(event.channel_id)

    def select_channel(self, channel_id: str | None) -> None:
        """Filter the tail to ``channel_id`` (None: all) and point chat and agent view at it."""
        self.selected_channel = channel_id
        self.tail.set_channel_filter(channel_id)
        pane = self.query_one("#tail-pane")
        pane.border_title = (
            f"2 WAL · {self.channel_label(channel_id)}" if channel_id else "2 WAL · all channels"
        )
        self._sync_selected_channel()
        self.refresh_bindings()

    def _sync_selected_channel(self) -> None:
        channel_id = self.selected_channel
        participants = self.source.participants(channel_id) if channel_id else []
        names = [name for agent_id, name in participants if agent_id != self.source.human_id]
        label = self.channel_label(channel_id) if channel_id else ""
        if self.chat.channel_id != channel_id:
            self.chat.set_channel(channel_id, label, names)
        else:
            self.chat.suggester.names = names
        agents = [(a, n) for a, n in participants if a != self.source.human_id]
        # the agent that spoke last comes first: its projection is the interesting one
        speaker = self._last_agent_speaker(channel_id) if channel_id else None
        agents.sort(key=lambda pair: pair[0] != speaker)
        view = self.projected_view
        if channel_id is None:
            view.set_channel(None, [])
        elif view.channel_id != channel_id:
            view.set_channel(
                channel_id, agents + [(a, n) for a, n in participants if a == self.source.human_id]
            )

    def _last_agent_speaker(self, channel_id: str) -> str | None:
        for row in reversed(self.tail.visible_rows()):
            env = row.envelope
            if (
                env.channel_id == channel_id
                and env.sender_id != self.source.human_id
                and (env.event_type in (EV_TEXT, EV_PACKET))
            ):
                return env.sender_id
        return None

    # ------------------------------------------------------------------ tail and detail

    @on(EnvelopeTail.Selected)
    def _envelope_selected(self, event: EnvelopeTail.Selected) -> None:
        self.open_envelope(event.envelope, event.seq, event.channel_label)

    def open_envelope(self, envelope: Envelope, seq: int | None, label: str) -> None:
        cause_label = None
        if envelope.causation_id:
            cause = self.tail.find_envelope(envelope.causation_id)
            if cause is not None:
                cause_label = f"#{cause.seq} {self.source.name_for(cause.envelope.sender_id)}: " + preview(
                    cause.envelope, 50
                )
        participants = [a for a, _ in self.source.participants(envelope.channel_id)]
        self.push_screen(
            EnvelopeDetail(
                envelope,
                seq=seq,
                channel_label=label,
                name_for=self.source.name_for,
                participants=participants,
                cause_label=cause_label,
            )
        )

    @on(EnvelopeDetail.OpenRequested)
    def _open_cause(self, event: EnvelopeDetail.OpenRequested) -> None:
        row = self.tail.find_envelope(event.envelope_id)
        if row is not None:
            self.open_envelope(row.envelope, row.seq, row.channel)
        else:
            self._fetch_and_open(event.channel_id, event.envelope_id)

    @work(group="detail")
    async def _fetch_and_open(self, channel_id: str, envelope_id: str) -> None:
        found = await self.source.find_envelope(channel_id, envelope_id)
        if found is None:
            self.notify(
                f"The envelope it answers is not in {self.channel_label(channel_id)}'s WAL.",
                severity="warning",
            )
            return
        seq, env = found
        self.open_envelope(env, seq, self.channel_label(channel_id))

    def _pending_changed(self, pending: int) -> None:
        self.status.pending = pending

    @on(EnvelopeTail.FollowChanged)
    def _follow_changed(self, event: EnvelopeTail.FollowChanged) -> None:
        if self.is_running:
            self.status.following = event.following
            self.status.pending = event.tail.pending_count

    @on(EnvelopeTail.StateChanged)
    def _tail_state_changed(self, event: EnvelopeTail.StateChanged) -> None:
        if not self.is_running:
            return
        tail = event.tail
        parts = []
        if not tail.filter_spec.empty:
            parts.append(tail.filter_spec.query)
        if not tail.search_spec.empty:
            parts.append(f"search {tail.search_spec.query}")
        self.status.filter_text = " · ".join(parts)
        self.refresh_bindings()

    @on(EnvelopeTail.ChannelRequested)
    def _tail_channel_requested(self, event: EnvelopeTail.ChannelRequested) -> None:
        """``:label`` in the tail: the channel list, chat and agent view follow the tail to that channel."""
        if self.is_running and event.channel_id != self.selected_channel:
            self.channel_list.select(event.channel_id)

    @on(EnvelopeTail.QueryRequested)
    def _query_requested(self, event: EnvelopeTail.QueryRequested) -> None:
        self.open_query(event.mode)

    def open_query(self, mode: str) -> None:
        """Show the query bar under the tail: ``filter``, ``search`` or ``goto``."""
        self._query_mode = mode
        bar = self.query_one("#query-bar", Input)
        placeholders = {
            "filter": 'filter: type:ag2.msg sender:planner to:all text:"words" re:/x.+y/i -family:channel',
            "search": "search (then n / N): same syntax as the filter",
            "goto": "go to: a seq, a channel label (discussion·7d80) or both",
        }
        bar.placeholder = placeholders[mode]
        current = {"filter": self.tail.filter_spec.query, "search": self.tail.search_spec.query, "goto": ""}
        bar.value = current[mode]
        bar.add_class("-visible")
        bar.screen.set_focus(bar)  # now, not after the keys already queued (they are the query's text)

    @on(Input.Submitted, "#query-bar")
    def _query_submitted(self, event: Input.Submitted) -> None:
        bar = event.input
        text = event.value.strip()
        try:
            if self._query_mode == "filter":
                self.tail.set_filter(text)
            elif self._query_mode == "search":
                if not self.tail.set_search(text) and text:
                    self.notify("No envelope matches the search.", severity="warning", timeout=3)
            else:
                error = self.tail.goto_text(text)
                if error:
                    self.notify(error, severity="warning")
                    return
        except FilterError as exc:
            self.notify(str(exc), severity="error", timeout=6)
            return
        bar.remove_class("-visible")
        self.tail.focus()

    def _in_text_field(self) -> bool:
        """The main screen is on top and a text field (input, editor) there has the keyboard."""
        focused = self.screen.focused
        return self.screen is self.screen_stack[0] and isinstance(focused, (Input, TextArea))

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

    # ------------------------------------------------------------------ chat

    @on(ChatInput.Submitted)
    def _chat_submitted(self, event: ChatInput.Submitted) -> None:
        self._send_chat(event.channel_id, event.text, event.body, event.audience)

    @work(group="chat")
    async def _send_chat(self, channel_id: str, text: str, body: str, audience: list[str]) -> None:
        chat = self.chat
        try:
            allowed, reason = await self.source.can_send(channel_id)
            if not allowed:
                chat.show_reason(reason)
                return
            await self.source.send_text(channel_id, body, audience)
        except NetworkError as exc:
            chat.show_reason(str(exc))
            return
        chat.sent(text)

    # ------------------------------------------------------------------ composer

    def action_compose_envelope(self) -> None:
        # every channel, whatever the channels pane's filter shows, in the list's order
        ordered = list(dict.fromkeys([*self.channel_list.all_ids(), *self.source.metadata]))
        labels = self.channel_labels()
        choices = [
            ChannelChoice(cid, labels.get(cid) or self.source.label_for(cid), self.source.participants(cid))
            for cid in ordered
        ]
        if not choices:
            self.notify("There is no channel to post into yet; open one first (ctrl+o).", severity="warning")
            return
        self.push_screen(
            EnvelopeComposer(
                choices,
                self.source.human_id,
                initial_channel=self.current_channel,
                recent_for=self._recent_for,
                draft_path=self.settings.drafts_path,
                custom_types=sorted(self.feed.custom_types),
            )
        )

    def _recent_for(self, channel_id: str) -> list[tuple[str, str]]:
        return [
            (
                row.envelope.envelope_id,
                f"#{row.seq} {self.source.name_for(row.envelope.sender_id)}: {preview(row.envelope, 60)}",
            )
            for row in self.tail.recent_rows(channel_id, 25)
        ]

    @on(EnvelopeComposer.SendRequested)
    def _composer_send(self, event: EnvelopeComposer.SendRequested) -> None:
        self._post_composed(event.composer, event.envelope)

    @work(group="composer")
    async def _post_composed(self, composer: EnvelopeComposer, envelope: Envelope) -> None:
        try:
            await self.source.post_envelope(envelope)
        except NetworkError as exc:
            composer.show_send_error(str(exc))
            return
        composer.sent()
        self.notify(
            f"Posted {envelope.event_type} into {self.channel_label(envelope.channel_id)}.", timeout=3
        )

    # ------------------------------------------------------------------ fork and replay

    def action_fork_here(self) -> None:
        row = self.tail.cursor_row
        if row is None or row.seq is None:
            self.notify(
                "Put the tail's cursor on an envelope to fork at (2, then up/down).", severity="warning"
            )
            return
        self.open_fork(row.envelope.channel_id, seq=row.seq)

    @on(ProjectedView.ForkRequested)
    def _fork_turn(self, event: ProjectedView.ForkRequested) -> None:
        self.open_fork(event.channel_id, envelope_id=event.envelope_id)

    def open_fork(self, channel_id: str, *, seq: int | None = None, envelope_id: str | None = None) -> None:
        """Open "Fork here…" on ``channel_id`` at ``seq`` (or at the seq of ``envelope_id``)."""
        self.push_screen(ForkForm(self.source, channel_id, seq=seq, envelope_id=envelope_id))

    # ------------------------------------------------------------------ open / close channels

    def action_open_channel(self) -> None:
        self._show_open_form()

    @work(group="open-form")
    async def _show_open_form(self) -> None:
        try:
            types = await self.source.channel_types()
        except NetworkError:
            types = []
        peers = [(p.agent_id, p.name) for p in self.peers.peers if p.agent_id != self.source.human_id]
        await self.push_screen(OpenChannelForm(types, peers))

    @on(OpenChannelForm.OpenRequested)
    def _open_requested(self, event: OpenChannelForm.OpenRequested) -> None:
        self._open_channel(event)

    @work(group="open")
    async def _open_channel(self, request: OpenChannelForm.OpenRequested) -> None:
        try:
            channel_id = await self.source.open_channel(
                request.channel_type, request.targets, request.knobs, request.ttl, request.intent
            )
        except NetworkError as exc:
            request.form.show_error(str(exc))
            return
        request.form.dismiss(None)
        rows = await self.source.load_channels()
        self.notify(f"Opened {self.channel_label(channel_id)}.", timeout=3)
        self.channel_list.set_channels(rows)
        self.channel_list.select(channel_id)

    def action_close_channel(self) -> None:
        """Ask before closing the selected channel (closing is final: nobody can post into it again)."""
        channel_id = self.current_channel
        if not channel_id:
            return
        label = self.channel_label(channel_id)
        names = [name for _, name in self.source.participants(channel_id)]

        def answered(yes: bool | None) -> None:
            if yes:
                self._close_channel(channel_id)
            else:
                self.notify(f"{label} stays open.", timeout=2)

        self.push_screen(
            ConfirmScreen(
                "Close channel",
                f"Close {label}?",
                f"Participants ({', '.join(names) or 'none'}) can no longer post into it; "
                "closing cannot be undone.",
                confirm_label="Close",
            ),
            answered,
        )

    @work(group="close")
    async def _close_channel(self, channel_id: str) -> None:
        try:
            await self.source.close_channel(channel_id)
        except NetworkError as exc:
            self.notify(humanize(str(exc), namer_for(self)), severity="error")
            return
        self.notify(f"Closed {self.channel_label(channel_id)}.", timeout=3)

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
        if isinstance(focused, (Input, TextArea)) and focused.region.height:
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
        if self.screen.query(HelpPanel):
            self.action_hide_help_panel()
        else:
            self.screen.query(KeyPanel).remove()
            self.screen.mount(ScrollingHelpPanel())  # scrolls as one page instead of cutting the text

    def action_toggle_keys(self) -> None:
        existing = self.screen.query(KeyPanel).filter(".-keys-only")
        if existing:
            existing.remove()
        else:
            self.screen.query(HelpPanel).remove()
            self.screen.mount(BindingIdsPanel(classes="-keys-only"))  # with the ids [keys] remaps

    # ------------------------------------------------------------------ screenshot

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        """Save an SVG of the screen in ``~/Downloads``, the pictures folder or the current directory
        (whichever exists first); the toast says where, or why it could not."""
        self._screenshot_folder = Path(path) if path else screenshot_directory()
        self.deliver_screenshot(filename, str(self._screenshot_folder))

    @on(DeliveryFailed)
    def _screenshot_failed(self, event: DeliveryFailed) -> None:
        if event.name == "screenshot":
            event.prevent_default()  # instead of Textual's "Failed to save screenshot", which says no why
            folder = getattr(self, "_screenshot_folder", None) or screenshot_directory()
            self.notify(screenshot_failure(folder, event.exception), title="Screenshot", severity="error")

    # ------------------------------------------------------------------ palette

    def domain_commands(self) -> list[DomainCommand]:
        commands = [
            DomainCommand("Open channel…", "Open a channel as yourself", self.action_open_channel),
            DomainCommand("Compose envelope…", "Hand-craft any envelope", self.action_compose_envelope),
            DomainCommand(
                "Filter tail…",
                "Filter the WAL tail by type, sender, audience, text",
                lambda: self.open_query("filter"),
            ),
            DomainCommand("Search tail…", "Find envelopes, then n / N", lambda: self.open_query("search")),
            DomainCommand("Go to seq…", "Jump to a sequence number", lambda: self.open_query("goto")),
            DomainCommand(
                "Fork here…",
                "Replay the channel from the tail's envelope with other views, models or prompts (F)",
                self.action_fork_here,
            ),
            DomainCommand(
                "Follow tail", "Scroll to the newest envelope and keep following", self.tail.follow
            ),
            DomainCommand(
                "Show all channels", "Clear the channel selection", lambda: self.channel_list.select(None)
            ),
        ]
        commands += self.debug_commands()
        if self.selected_channel and self.check_action("close_channel", ()):
            commands.append(
                DomainCommand(
                    f"Close channel {self.channel_label(self.selected_channel)}",
                    "Close the selected channel",
                    self.action_close_channel,
                )
            )
        for name in registered_views():
            commands.append(
                DomainCommand(
                    f"Switch agent view: {name}",
                    "Preview the projection with this view (the channel is unchanged)",
                    lambda name=name: self.projected_view.switch_view(name),
                    discover=False,
                )
            )
        for channel_id, row in self.channel_list.rows.items():
            commands.append(
                DomainCommand(
                    f"Select channel {row.label} ({', '.join(row.participants)})",
                    f"{row.state}, {plural(row.count, 'envelope')}",
                    lambda channel_id=channel_id: self.channel_list.select(channel_id),
                    discover=False,
                )
            )
        if self.demo is not None and not self.demo_started:
            commands.append(
                DomainCommand("Start demo network", "Scripted agents and live traffic", self.start_demo)
            )
        return commands

    def start_demo(self) -> None:
        if self.demo is not None and not self.demo_started:
            self.demo_started = True
            self._run_demo()

    @work(group="demo")
    async def _run_demo(self) -> None:
        assert self.demo is not None
        try:
            await self.demo()
        except NetworkError as exc:
            self.notify(f"The demo could not start: {exc}", severity="error")
            return
        self.notify("Demo network started: scripted agents are talking.", timeout=4)


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

"""The workbench's message routing: the live feed's messages to the panes, and the panes' messages (a
channel chosen, an envelope opened, the tail's state, the query bar, the chat line) to each other and to
``HubSource``. Messages up, attributes down: every handler here is an ``@on``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on, work
from textual.widgets import Input

from ag2net.envelope import EV_PACKET, EV_TEXT, Envelope
from ag2net.errors import NetworkError
from ag2net.filtering import FilterError
from ag2net.naming import channel_labels
from tui.app_panes import PaneLayout
from tui.feed import (
    AgentsChanged,
    ChannelChanged,
    ChannelsLoaded,
    ConnectionChanged,
    FeedBatch,
    HealthChanged,
    HistoryBatch,
    HumanAsked,
    PeersLoaded,
    Progress,
    RateTick,
    Ready,
    TurnRecorded,
)
from tui.formatting import preview
from tui.widgets.channel_list import ChannelList
from tui.widgets.chat_input import ChatInput
from tui.widgets.envelope_tail import EnvelopeTail

if TYPE_CHECKING:
    from tui.widgets.envelope_detail import EnvelopeDetail

SETTLE_AFTER_READY = 0.3
"""Seconds after the first page when the garbage collector's startup pause ends (the page is painted by then)."""


class FeedRouting(PaneLayout):
    """Where each message of the feed and the panes goes (a base of ``WorkbenchApp``)."""

    if TYPE_CHECKING:
        edited: dict[str, str]

        def start_demo(self) -> None: ...

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
        self.set_timer(SETTLE_AFTER_READY, self._load_costs, name="channel costs")
        if self.autostart_demo:
            self.start_demo()
        elif self.offer_demo and self.demo is not None:
            self.notify(
                "This database is empty. Start the scripted demo network from the command palette: "
                "ctrl+p, then 'Start demo network'.",
                title="New here?",
                timeout=12,
            )

    def _load_costs(self) -> None:
        """The channel list's cost figures, read off the first rows' path (up to 2,000 turn records)."""
        self.run_worker(self._show_costs(), group="channel costs", exclusive=True, exit_on_error=False)

    async def _show_costs(self) -> None:
        from tui.widgets.cost_view import channel_cost_labels

        try:
            table = self.settings.price_table()
            labels = channel_cost_labels(await self.source.recent_turn_records(), table)
        except Exception as exc:  # a bad [prices] table or AG2NET_PRICES: said once, the list stays as it is
            self.notify(str(exc), severity="warning", timeout=10)
            return
        self.channel_list.set_costs({cid: text.plain for cid, text in labels.items()})

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
        from tui.widgets.envelope_detail import EnvelopeDetail  # on the first one: the first frame has none

        participants = [a for a, _ in self.source.participants(envelope.channel_id)]
        self.push_screen(
            EnvelopeDetail(
                envelope,
                seq=seq,
                channel_label=label,
                name_for=self.source.name_for,
                participants=participants,
                cause_label=cause_label,
                operator_note=self.edited.get(envelope.envelope_id),
            )
        )

    def on_envelope_detail_open_requested(self, event: EnvelopeDetail.OpenRequested) -> None:
        """The detail's causation link (a handler by name: ``EnvelopeDetail`` is imported on first use)."""
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


__all__ = ["SETTLE_AFTER_READY", "FeedRouting"]

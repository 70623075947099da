"""The workbench's live feed: everything the panes show arrives through it, as Textual messages.

``LiveFeed`` owns the startup reads, the observe-stream worker, the seq bookkeeping (what is already
shown), batching (one ``FeedBatch`` per tick whatever the arrival rate), the rate and activity counters,
history paging, peers, health and the connection state. It renders nothing: it posts messages to the
app, which routes them to the widgets with ``@on`` handlers (attributes down). The feed is live while
its app runs; the app stops it when it unmounts. A message from a feed that is no longer live is not
dispatched, so no handler runs while the panes are being torn down.
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Coroutine
from itertools import chain
from typing import TYPE_CHECKING, Any

from textual.message import Message
from textual.worker import Worker

from ag2net.breakpoints import Breakpoint, WaitingItem
from ag2net.channel import ChannelMetadata
from ag2net.envelope import (
    ALL_EVENT_TYPES,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    Envelope,
)
from ag2net.errors import NetworkError
from ag2net.ids import parse_time, utc_now
from tui.models import ChannelRow, InboxEntry, PeerInfo, TailItem
from tui.source import operator_note
from tui.wording import plural

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

    from tui.source import HubSource

FLUSH_INTERVAL = 0.1
RATE_INTERVAL = 1.0
HEALTH_INTERVAL = 3.0
GROUP = "feed"
"""Prefix of the feed's worker groups (``feed-startup``, ``feed-observe``…)."""
FAILURES = (NetworkError, TimeoutError)
"""What a read from the hub raises when the hub fails or does not answer within the client's rpc_timeout."""


def _order(item: TailItem) -> str:
    # envelope ids are minted monotonically by the hub: lexical order is admission order
    return item[0].envelope_id


def reply_within(metadata: ChannelMetadata) -> float | None:
    """The seconds a channel's ``reply_within`` expectation gives a turn, or None when it has none."""
    expectations = [*metadata.manifest.expectations, *(getattr(metadata, "expectations", None) or [])]
    for expectation in expectations:
        if getattr(expectation, "name", "") == "reply_within":
            seconds = expectation.params.get("seconds")
            if isinstance(seconds, (int, float)):
                return float(seconds)
    return None


def _why(exc: BaseException) -> str:
    if str(exc):
        return str(exc)
    return "the hub did not answer in time" if isinstance(exc, TimeoutError) else type(exc).__name__


class FeedMessage(Message, no_dispatch=None):
    """Base of the feed's messages: ``feed`` is the sender; not dispatched once the feed is no longer live."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Textual's Message sets a class attribute ``no_dispatch`` per subclass unless told None: keep ours.
        kwargs.setdefault("no_dispatch", None)
        super().__init_subclass__(**kwargs)

    def __init__(self, feed: LiveFeed) -> None:
        super().__init__()
        self.feed = feed

    @property
    def no_dispatch(self) -> bool:  # type: ignore[override]
        # Read when the app takes the message off its queue: once the app stops running (which happens
        # before Textual removes any pane), queued feed messages are dropped instead of handled.
        return not self.feed.live


class FeedBatch(FeedMessage):
    """New envelopes for the end of the tail (oldest first) and per-channel activity.

    Built with ``seen``: per channel, the highest seq in the batch and its newest ``created_at`` (absolute
    figures). ``activity`` is what the channel list adds — (envelopes it has not counted yet, last
    activity) — worked out when it is first read, which is when the app handles the batch: against what
    the list shows *then* (``HubSource.activity``), so an envelope that a channel reload in between has
    already counted is not counted again.
    """

    def __init__(self, feed: LiveFeed, items: list[TailItem], seen: dict[str, tuple[int, str]]) -> None:
        super().__init__(feed)
        self.items = items
        self.seen = seen
        self._activity: dict[str, tuple[int, str]] | None = None

    @property
    def activity(self) -> dict[str, tuple[int, str]]:
        if self._activity is None:
            ledger = self.feed.source.activity
            self._activity = {cid: ledger.advance(cid, seq, last) for cid, (seq, last) in self.seen.items()}
        return self._activity


class HistoryBatch(FeedMessage):
    """Older envelopes for the start of the tail; ``done`` of ``total`` history rows are now loaded."""

    def __init__(self, feed: LiveFeed, items: list[TailItem], done: int, total: int) -> None:
        super().__init__(feed)
        self.items = items
        self.done = done
        self.total = total
        self.taken = asyncio.Event()
        """Set when the app takes the batch off its queue: the feed reads the next page only then, so a
        key pressed meanwhile waits behind one page at most, not behind every page read ahead."""

    @property
    def no_dispatch(self) -> bool:  # type: ignore[override]
        self.taken.set()
        return not self.feed.live


class ChannelsLoaded(FeedMessage):
    """Every channel, freshly read (at startup and after a reconnect).

    The rows' counts and last activity are settled against what the channel list shows when ``rows`` is
    first read (when the app handles the message): a batch handled since the read is not undone.
    """

    def __init__(self, feed: LiveFeed, rows: list[ChannelRow]) -> None:
        super().__init__(feed)
        self._rows = rows
        self._settled = False

    @property
    def rows(self) -> list[ChannelRow]:
        if not self._settled:
            self._settled = True
            ledger = self.feed.source.activity
            for row in self._rows:
                row.count, row.last_activity = ledger.absorb(row.channel_id, row.count, row.last_activity)
        return self._rows


class ChannelChanged(FeedMessage):
    """One channel was created or changed state (observed).

    The row's count and last activity are what the channel list shows when ``row`` is first read (a
    channel's metadata knows only when it was created: a close must not move its last activity back).
    """

    def __init__(self, feed: LiveFeed, row: ChannelRow) -> None:
        super().__init__(feed)
        self._row = row
        self._settled = False

    @property
    def row(self) -> ChannelRow:
        row = self._row
        if not self._settled:
            self._settled = True
            row.count, row.last_activity = self.feed.source.activity.absorb(
                row.channel_id, row.count, row.last_activity
            )
        return row

    @property
    def channel_id(self) -> str:
        return self._row.channel_id


class TurnRecorded(FeedMessage):
    """An agent's turn record was stored (the agent view shows turns and takes the system prompt and
    tools from the newest one)."""

    def __init__(self, feed: LiveFeed, channel_id: str, agent_id: str) -> None:
        super().__init__(feed)
        self.channel_id = channel_id
        self.agent_id = agent_id


class AgentsChanged(FeedMessage):
    """An identity registered or changed: names may resolve differently; peers reload on the next tick."""


class PeersLoaded(FeedMessage):
    """Every registered identity with its résumé and skill card."""

    def __init__(self, feed: LiveFeed, peers: list[PeerInfo]) -> None:
        super().__init__(feed)
        self.peers = peers


class Progress(FeedMessage):
    """What the feed is loading ("" when nothing)."""

    def __init__(self, feed: LiveFeed, text: str) -> None:
        super().__init__(feed)
        self.text = text


class Ready(FeedMessage):
    """Startup is over: channels, the newest page, peers and health were loaded, observing has begun."""


class HumanAsked(FeedMessage):
    """Someone asks the human at the keyboard, and it is the human's turn in that channel."""

    def __init__(self, feed: LiveFeed, envelope: Envelope) -> None:
        super().__init__(feed)
        self.envelope = envelope


class WaitingLoaded(FeedMessage):
    """What waits on a person, read at startup (and after a reconnect): the hub's waiting items and the
    breakpoints. ``stepping`` is False when the hub does not answer the stepping-in ops (an older hub,
    a connection that is no operator)."""

    def __init__(
        self,
        feed: LiveFeed,
        items: list[WaitingItem],
        breakpoints: list[Breakpoint],
        *,
        stepping: bool = True,
    ) -> None:
        super().__init__(feed)
        self.items = items
        self.breakpoints = breakpoints
        self.stepping = stepping


class WaitingChanged(FeedMessage):
    """A waiting item was added, answered, cancelled or updated (observe kind ``waiting``)."""

    def __init__(self, feed: LiveFeed, change: str, item: WaitingItem) -> None:
        super().__init__(feed)
        self.change = change
        self.item = item


class HeldEdited(FeedMessage):
    """An envelope was admitted in place of a held one, edited or redirected (audit ``held_edited`` /
    ``held_redirected``); ``note`` says so: "edited at a breakpoint by ana"."""

    def __init__(self, feed: LiveFeed, envelope_id: str, note: str) -> None:
        super().__init__(feed)
        self.envelope_id = envelope_id
        self.note = note


class BreakpointsChanged(FeedMessage):
    """A breakpoint was set, changed or removed, or step mode changed (audit ``breakpoint_*`` /
    ``step_mode``); ``record`` is the audit record."""

    def __init__(self, feed: LiveFeed, record: dict[str, Any]) -> None:
        super().__init__(feed)
        self.record = record


class YourTurns(FeedMessage):
    """The channels where the hub expects the human to speak now, as inbox entries."""

    def __init__(self, feed: LiveFeed, entries: list[InboxEntry]) -> None:
        super().__init__(feed)
        self.entries = entries


class InviteSeen(FeedMessage):
    """An invite for the human, who answers invites by hand (``auto_ack_invites=False``)."""

    def __init__(self, feed: LiveFeed, envelope: Envelope) -> None:
        super().__init__(feed)
        self.envelope = envelope


class InviteAnswered(FeedMessage):
    """The human answered an invite of ``channel_id`` (an ack or a reject was admitted)."""

    def __init__(self, feed: LiveFeed, channel_id: str) -> None:
        super().__init__(feed)
        self.channel_id = channel_id


class RateTick(FeedMessage):
    """Envelopes observed during the last second."""

    def __init__(self, feed: LiveFeed, count: int) -> None:
        super().__init__(feed)
        self.count = count


class HealthChanged(FeedMessage):
    """The hub's health line."""

    def __init__(self, feed: LiveFeed, text: str) -> None:
        super().__init__(feed)
        self.text = text


class ConnectionChanged(FeedMessage):
    """The link to the hub changed. None means unchanged.

    ``connected``: the hub answered (False: a request failed). ``reconnecting``: the link is down and
    the client is retrying. ``reconnected``: the link came back (channels and peers are being reloaded).
    ``error``: a sentence for the person at the keyboard when a read failed.
    """

    def __init__(
        self,
        feed: LiveFeed,
        *,
        connected: bool | None = None,
        reconnecting: bool | None = None,
        reconnected: bool = False,
        error: str | None = None,
    ) -> None:
        super().__init__(feed)
        self.connected = connected
        self.reconnecting = reconnecting
        self.reconnected = reconnected
        self.error = error


class FirstRead:
    """What the feed's startup reads before it posts anything: the observe position, the channel rows (the
    passports read with them) and the newest page. ``read_first`` reads it before the app runs, so the
    first frame can show the rows: once the app has started, these reads wait behind the mounting of
    every widget."""

    __slots__ = ("page", "position", "rows")

    def __init__(self, position: int, rows: list[ChannelRow], page: list[TailItem]) -> None:
        self.position = position
        self.rows = rows
        self.page = page


async def read_first(source: HubSource, first_page: int) -> FirstRead:
    """The startup's first reads, in its order (the position first: observing from it misses nothing)."""
    position = await source.observe_position()
    # the names with the channels: the first page's rows name their senders (a remote hub's
    # client knows no passport until it asks), not ids until the peers load after it
    rows, _ = await asyncio.gather(source.load_channels(), source.hc.list_agents(limit=10_000))
    page = await source.last_page(rows, first_page)
    return FirstRead(position, rows, page)


class LiveFeed:
    """The one source of the workbench's data: reads and observes the hub, posts messages to ``app``."""

    def __init__(
        self,
        app: App[Any],
        source: HubSource,
        *,
        first_page: int = 500,
        history_limit: int = 100_000,
        observe: bool = True,
        load_history: bool = True,
        first_read: FirstRead | None = None,
    ) -> None:
        self.app = app
        self._first_read = first_read
        """What ``read_first`` read before the app ran (the startup uses it instead of reading), or None."""
        self.source = source
        self.first_page = first_page
        self.history_limit = history_limit
        self.observe_enabled = observe
        self.load_history = load_history
        self.max_seq: dict[str, int] = {}
        """Per channel, the highest seq already posted (observed events at or below it are skipped)."""
        self.min_seq: dict[str, int] = {}
        """Per channel, the lowest seq loaded by the first page (history continues below it)."""
        self.custom_types: set[str] = set()
        """Event types seen that are not built in (the composer offers them)."""
        self.sizes: dict[str, int] = {}
        """Per channel, its WAL's length when the channel list was read (``channel_sizes`` adds what
        arrived since)."""
        self._buffer: list[TailItem] = []
        self._seen: dict[str, tuple[int, str]] = {}
        """Per channel, the highest seq and newest time observed since the last flush."""
        self._rate_count = 0
        self._peers_dirty = False
        self._turns_dirty = False
        self._connection: dict[str, Any] | None = None
        self._connected = True
        self._reconnecting = False
        self._timers: list[Timer] = []
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle

    @property
    def live(self) -> bool:
        """True from ``start`` until ``stop`` or until the app stops running, whichever comes first."""
        return not self._stopped and self.app.is_running

    def start(self) -> None:
        """Start the timers and the startup reads (call from the app's ``on_mount``)."""
        app = self.app
        self._timers = [
            app.set_interval(FLUSH_INTERVAL, self.flush, name="feed flush"),
            # half a flush apart: the rate's repaint (the status bar, at the bottom) lands in another
            # frame than a batch's (the tail): one frame repaints the bounding box of its dirty regions
            app.set_timer(FLUSH_INTERVAL / 2, self._start_rate, name="feed rate start"),
            app.set_interval(HEALTH_INTERVAL, self.refresh_health, name="feed health"),
        ]
        self._run(self._startup(), "startup", exclusive=True)

    def _start_rate(self) -> None:
        if not self._stopped:
            self._timers.append(self.app.set_interval(RATE_INTERVAL, self._tick, name="feed rate"))

    def stop(self) -> None:
        """Stop the timers and cancel every worker of the feed; nothing it posted is dispatched after this."""
        self._stopped = True
        for timer in self._timers:
            timer.stop()
        self._timers.clear()
        for worker in list(self.app.workers):
            if worker.group.startswith(GROUP + "-"):
                worker.cancel()

    def stop_history(self) -> None:
        """Stop paging in older envelopes (the tail is full)."""
        self.app.workers.cancel_group(self.app, f"{GROUP}-history")

    # ------------------------------------------------------------------ startup

    async def _startup(self) -> None:
        source = self.source
        first, self._first_read = self._first_read, None
        if first is not None:
            position, rows = first.position, first.rows
        else:
            try:
                position = await source.observe_position()
                # the names with the channels: the first page's rows name their senders (a remote hub's
                # client knows no passport until it asks), not ids until the peers load after it
                rows, _ = await asyncio.gather(source.load_channels(), source.hc.list_agents(limit=10_000))
            except FAILURES as exc:
                self._tell(connected=False, error=f"Cannot reach the hub: {_why(exc)}")
                return
        self._note_sizes(rows)
        self._post(ChannelsLoaded(self, rows))
        self._post(Progress(self, "loading the newest envelopes…"))
        if first is not None:
            page = first.page
        else:
            try:
                page = await source.last_page(rows, self.first_page)
            except FAILURES as exc:
                self._tell(connected=False, error=f"Cannot read the newest envelopes: {_why(exc)}")
                return
        self._note_loaded(page)
        self._post(FeedBatch(self, page, {}))
        self._post(Progress(self, ""))
        if first is not None:
            # read before the app ran: the rest (peers and their cards, what waits, health) comes after the
            # frame that shows the page, as it did when the page was read here
            painted = asyncio.get_running_loop().create_future()
            self.app.call_after_refresh(lambda: painted.done() or painted.set_result(None))
            await painted
        if self.observe_enabled:
            self._run(self._observe(position), "observe", exclusive=True)
        self.load_peers()
        # before Ready: what waits for the human is on screen with the first page (the count included)
        await self._load_waiting()
        self._run(self._load_edited(), "edited", exclusive=True)
        await self.refresh_health()
        self._post(Ready(self))
        if self.load_history:  # after the first page is painted: its batches would delay that frame
            self.app.call_after_refresh(self._start_history, rows)

    def _start_history(self, rows: list[ChannelRow]) -> None:
        if self.live:
            self._run(self._load_history(rows), "history", exclusive=True)

    def _note_loaded(self, items: list[TailItem]) -> None:
        for env, seq, _label in items:
            cid = env.channel_id
            if seq > self.max_seq.get(cid, 0):
                self.max_seq[cid] = seq
            if seq < self.min_seq.get(cid, seq + 1):
                self.min_seq[cid] = seq
            if env.event_type not in ALL_EVENT_TYPES:
                self.custom_types.add(env.event_type)

    async def _load_history(self, rows: list[ChannelRow]) -> None:
        """Older envelopes, newest pages first, with progress (never a frozen screen)."""
        loaded = dict(self.min_seq)
        try:
            async for batch, done, total in self.source.older_pages(rows, loaded, self.history_limit):
                for env, _seq, _label in batch:
                    if env.event_type not in ALL_EVENT_TYPES:
                        self.custom_types.add(env.event_type)
                message = HistoryBatch(self, batch, done, total)
                self._post(message)
                if self.live:
                    await message.taken.wait()
        except FAILURES as exc:
            self._tell(connected=False, error=f"Cannot load older envelopes: {_why(exc)}")
        self._post(Progress(self, ""))

    # ------------------------------------------------------------------ paging (the tail's pager)

    def _note_sizes(self, rows: list[ChannelRow]) -> None:
        for row in rows:
            if row.count > self.sizes.get(row.channel_id, 0):
                self.sizes[row.channel_id] = row.count

    def channel_sizes(self) -> dict[str, int]:
        """Per channel, the highest seq known: its WAL's length as read, or what was observed since."""
        sizes = dict(self.sizes)
        for cid, seq in self.max_seq.items():
            if seq > sizes.get(cid, 0):
                sizes[cid] = seq
        return sizes

    def channel_pairs(self) -> list[tuple[str, str]]:
        """``(channel_type, channel_id)`` of every channel the workbench knows (``:label`` resolves among them)."""
        return [(md.manifest.type, cid) for cid, md in self.source.metadata.items()]

    async def page_older(self, tops: dict[str, int], count: int) -> list[TailItem]:
        """The newest ``count`` envelopes with, per channel, a seq at most ``tops[channel]``; oldest first
        (``TailSource.newest_until``)."""
        return await self.source.newest_until(tops, count)

    async def page_newer(self, bottoms: dict[str, int], count: int) -> list[TailItem]:
        """The oldest ``count`` envelopes with, per channel, a seq at least ``bottoms[channel]``; oldest
        first (the forward twin of ``page_older``)."""
        sizes = self.channel_sizes()
        bottoms = {cid: b for cid, b in bottoms.items() if b <= sizes.get(cid, 0)}
        if not bottoms or count <= 0:
            return []
        if len(bottoms) == 1:
            ((cid, bottom),) = bottoms.items()
            return await self.source.channel_range(cid, bottom, min(sizes[cid], bottom + count - 1))
        chunk = max(20, (2 * count) // len(bottoms))
        held: dict[str, list[TailItem]] = {cid: [] for cid in bottoms}
        high = {cid: b - 1 for cid, b in bottoms.items()}
        need = list(bottoms)
        merged: list[TailItem] = []
        while need:
            reads = await asyncio.gather(
                *(
                    self.source.channel_range(cid, high[cid] + 1, min(sizes[cid], high[cid] + chunk))
                    for cid in need
                )
            )
            for cid, items in zip(need, reads, strict=True):
                held[cid].extend(items)
                high[cid] = min(sizes[cid], high[cid] + chunk)
            merged = heapq.nsmallest(count, chain.from_iterable(held.values()), key=_order)
            cutoff = _order(merged[-1]) if len(merged) == count else None
            need = [
                cid
                for cid, items in held.items()
                if high[cid] < sizes[cid] and items and (cutoff is None or _order(items[-1]) < cutoff)
            ]
            chunk *= 2
        return merged

    # ------------------------------------------------------------------ the observe stream

    async def _observe(self, position: int) -> None:
        source = self.source
        async for event in source.observe(position):
            if not self.live:
                return
            if event.kind == "envelope" and event.envelope is not None and event.channel_id is not None:
                cid = event.channel_id
                seq = event.seq or 0
                if seq and seq <= self.max_seq.get(cid, 0):
                    continue  # already loaded by the first page
                if not seq:  # never from this hub; counted as the next one
                    seq = self.max_seq.get(cid, 0) + 1
                self.max_seq[cid] = seq
                env = event.envelope
                self._buffer.append((env, seq, source.label_for(cid)))
                before = self._seen.get(cid)
                self._seen[cid] = (seq, env.created_at if before is None else max(before[1], env.created_at))
                self._rate_count += 1
                if env.event_type not in ALL_EVENT_TYPES:
                    self.custom_types.add(env.event_type)
                if source.addressed_to_human(env):
                    self._run(self._ask_human(env), "ask")
                self._note_for_inbox(env)
            elif event.kind == "waiting":
                self._waiting_event(event.payload)
            elif event.kind == "audit":
                self._audit_event(event.payload)
            elif event.kind == "channel":
                metadata = event.payload.get("metadata")
                if isinstance(metadata, dict):
                    self.flush()  # the rows before the change land first
                    self._post(ChannelChanged(self, source.remember(ChannelMetadata.from_dict(metadata))))
            elif event.kind == "agent":
                self._post(AgentsChanged(self))
                self._peers_dirty = True
            elif event.kind == "turn" and event.channel_id is not None:
                agent_id = event.payload.get("agent_id")
                if isinstance(agent_id, str):
                    self.flush()  # the turn's reply is in the tail first
                    self._post(TurnRecorded(self, event.channel_id, agent_id))

    async def _ask_human(self, envelope: Envelope) -> None:
        try:
            allowed, _reason = await self.source.can_send(envelope.channel_id)
        except FAILURES:
            return
        if allowed:
            self.flush()  # the question is in the tail before its channel is selected
            self._post(HumanAsked(self, envelope))

    def flush(self) -> None:
        """Post what arrived since the last tick as one ``FeedBatch`` (and reload peers if they changed)."""
        if not self.live:
            return
        if self._buffer or self._seen:
            items, self._buffer = self._buffer, []
            seen, self._seen = self._seen, {}
            self._post(FeedBatch(self, items, seen))
        if self._peers_dirty:
            self._peers_dirty = False
            self.load_peers()
        if self._turns_dirty:
            self._turns_dirty = False
            # the function, not a coroutine: a worker cancelled before it starts leaves none unawaited
            self.app.run_worker(
                self._load_your_turns, name=f"{GROUP}-turns", group=f"{GROUP}-turns", exclusive=True
            )

    # ------------------------------------------------------------------ what waits on the human (issue 24)

    def _note_for_inbox(self, env: Envelope) -> None:
        """An admitted envelope may change the human's turns, bring an invite, or answer one."""
        source = self.source
        human = source.human_id
        md = source.metadata.get(env.channel_id)
        if md is not None and human in md.participant_ids():
            self._turns_dirty = True
        if env.event_type == EV_CHANNEL_INVITE:
            if not source.human.auto_ack_invites and env.audience and human in env.audience:
                self.flush()
                self._post(InviteSeen(self, env))
        elif env.event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT) and env.sender_id == human:
            self._post(InviteAnswered(self, env.channel_id))

    def _waiting_event(self, payload: dict[str, Any]) -> None:
        raw = payload.get("item")
        if not isinstance(raw, dict):
            return
        try:
            item = WaitingItem.from_dict(raw)
        except (TypeError, ValueError, KeyError):
            return
        self.flush()  # a released post's row lands before the held row goes
        self._post(WaitingChanged(self, str(payload.get("change") or ""), item))

    def _audit_event(self, record: dict[str, Any]) -> None:
        kind = str(record.get("kind") or "")
        note = operator_note(record)
        if note:
            self._post(HeldEdited(self, str(record["envelope_id"]), note))
        elif kind.startswith("breakpoint_") or kind == "step_mode":
            self._post(BreakpointsChanged(self, record))

    def load_waiting(self) -> Worker[None]:
        """Read the hub's waiting items and breakpoints, then the human's turns (in a worker)."""
        return self._run(self._load_waiting(), "waiting", exclusive=True)

    async def _load_edited(self) -> None:
        """The envelopes admitted by an edit at a breakpoint, from the audit log (read after startup:
        the detail view marks them)."""
        try:
            edited = await self.source.edited_envelopes()
        except (*FAILURES, AttributeError):
            return
        for envelope_id, note in edited.items():
            self._post(HeldEdited(self, envelope_id, note))

    async def _load_waiting(self) -> None:
        source = self.source
        try:
            items, breakpoints = await asyncio.gather(source.list_waiting(), source.list_breakpoints())
        except (*FAILURES, AttributeError) as exc:
            # an older hub (unknown op; in process: no such method), a connection that is no operator,
            # or a hub that is down
            self._post(WaitingLoaded(self, [], [], stepping=False))
            if not isinstance(exc, TimeoutError) and "unknown op" not in str(exc):
                logging.getLogger("tui.feed").info("the hub lists no waiting items: %s", exc)
        else:
            self._post(WaitingLoaded(self, items, breakpoints))
        await self._load_your_turns()

    async def _load_your_turns(self) -> None:
        source = self.source
        try:
            turns = await source.pending_turns()
        except FAILURES:
            return
        if not self.live:
            return
        now, wall = self.app_clock(), parse_time(utc_now())
        entries = []
        for turn in turns:
            data = turn if isinstance(turn, dict) else turn.to_dict()
            cid = str(data.get("channel_id") or "")
            md = source.metadata.get(cid)
            if md is None or md.is_terminal():
                continue
            expected = str(data.get("expected_at") or "")
            due = None
            seconds = reply_within(md)
            if seconds is not None and expected:
                try:
                    elapsed = (wall - parse_time(expected)).total_seconds()
                except ValueError:
                    elapsed = None
                if elapsed is not None:
                    due = now + seconds - elapsed
            entries.append(InboxEntry(f"turn:{cid}", "your_turn", cid, source.human_id, expected, due=due))
        self._post(YourTurns(self, entries))

    def app_clock(self) -> float:
        """The workbench's clock (the app's ``clock``: monotonic seconds), for countdowns."""
        clock = getattr(self.app, "clock", None)
        return float(clock()) if callable(clock) else time.monotonic()  # type: ignore[arg-type]

    # ------------------------------------------------------------------ rate, connection, health, peers

    def _tick(self) -> None:
        if not self.live:
            return
        count, self._rate_count = self._rate_count, 0
        self._post(RateTick(self, count))
        self.poll_connection()

    def poll_connection(self) -> bool:
        """Report whether the link is up; when it comes back, say so and reload what may have changed."""
        state = self.source.connection_state()
        before, self._connection = self._connection, state
        connected = bool(state.get("connected", True))
        if not connected:
            self._tell(reconnecting=True)
            return False
        if before is not None and (
            not before.get("connected", True) or state.get("reconnects", 0) > before.get("reconnects", 0)
        ):
            self._tell(connected=True, reconnecting=False, reconnected=True)
            self._run(self._reload(), "reload", exclusive=True)
        else:
            self._tell(reconnecting=False)
        return True

    async def _reload(self) -> None:
        try:
            rows = await self.source.load_channels()
        except FAILURES:
            return  # down again: the next reconnect reloads
        self._note_sizes(rows)
        self._post(ChannelsLoaded(self, rows))
        self.load_peers()
        self.load_waiting()
        await self.refresh_health()

    async def refresh_health(self) -> None:
        if not self.live or not self.poll_connection():
            return  # while disconnected, everything shown stays as it was
        try:
            health = await self.source.health()
        except FAILURES:
            self._tell(connected=False)
            return
        self._tell(connected=True)
        self._post(
            HealthChanged(
                self,
                f"{health.get('active_channels', 0)} active · "
                + plural(int(health.get("registered_agents", 0)), "identity", "identities"),
            )
        )

    def load_peers(self) -> Worker[None]:
        """Reload the peers (in a worker); a failed load leaves the peers shown as they are."""
        return self._run(self._load_peers(), "peers", exclusive=True)

    async def _load_peers(self) -> None:
        try:
            peers = await self.source.load_peers()
        except FAILURES:
            return  # the link is down: the reconnect loads them again
        self._post(PeersLoaded(self, peers))

    # ------------------------------------------------------------------ internals

    def _run(self, work: Coroutine[Any, Any, None], group: str, *, exclusive: bool = False) -> Worker[None]:
        return self.app.run_worker(
            work, name=f"{GROUP}-{group}", group=f"{GROUP}-{group}", exclusive=exclusive
        )

    def _post(self, message: FeedMessage) -> None:
        if self.live:
            self.app.post_message(message)

    def _tell(
        self,
        *,
        connected: bool | None = None,
        reconnecting: bool | None = None,
        reconnected: bool = False,
        error: str | None = None,
    ) -> None:
        """Post a ``ConnectionChanged`` carrying only what differs from what was last said."""
        if connected is not None and connected == self._connected:
            connected = None
        if reconnecting is not None and reconnecting == self._reconnecting:
            reconnecting = None
        if connected is None and reconnecting is None and not reconnected and error is None:
            return
        if connected is not None:
            self._connected = connected
        if reconnecting is not None:
            self._reconnecting = reconnecting
        self._post(
            ConnectionChanged(
                self, connected=connected, reconnecting=reconnecting, reconnected=reconnected, error=error
            )
        )


__all__ = [
    "AgentsChanged",
    "BreakpointsChanged",
    "ChannelChanged",
    "ChannelsLoaded",
    "ConnectionChanged",
    "FeedBatch",
    "FeedMessage",
    "FirstRead",
    "HealthChanged",
    "HeldEdited",
    "HistoryBatch",
    "HumanAsked",
    "InviteAnswered",
    "InviteSeen",
    "LiveFeed",
    "PeersLoaded",
    "Progress",
    "RateTick",
    "Ready",
    "TurnRecorded",
    "WaitingChanged",
    "WaitingLoaded",
    "YourTurns",
    "read_first",
    "reply_within",
]

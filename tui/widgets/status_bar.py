"""The status bar: connection, hub health, envelopes per second, what waits for you, and the tail's follow
and filter state."""

from __future__ import annotations

from collections import deque

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Sparkline

from tui.widgets.quiet_label import QuietLabel

RATE_ROOM = len("10,000 env/s")
COUNT_ROOM = len("⏸ paused · 10,000 new")


class StatusBar(Horizontal):
    """Always-visible modes (following / paused / filtered) and network vitals."""

    DEFAULT_CSS = """
    StatusBar {
        height: 1;
        background: $panel-darken-1;
        color: $text-muted;
        overflow: hidden hidden;
        & Label { width: auto; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
        & #status-connection { color: $text-success; max-width: 40%; }
        & #status-connection.-down { color: $text-error; }
        & #status-connection.-reconnecting { color: $text-warning; text-style: bold; }
        & #status-health { width: 1fr; min-width: 3; }
        & #status-follow { background: $success-muted; color: $text-success; }
        & #status-follow.-paused { background: $warning-muted; color: $text-warning; }
        & #status-filter { color: $text-accent; max-width: 35%; }
        & #status-filter.-empty { display: none; }
        & #status-rate-spark { width: 24; height: 1; margin: 0 1; }
        & #status-progress { color: $text-warning; max-width: 35%; }
        & #status-progress.-empty { display: none; }
        & #status-waiting { background: $warning-muted; color: $text-warning; text-style: bold; }
        & #status-waiting.-empty { display: none; }
    }
    StatusBar.-narrow {
        & #status-rate-spark { display: none; }
        & #status-rate { display: none; }
    }
    """
    NARROW = 100
    """Below this many columns the bar drops the rate and its sparkline (connection, health and the
    tail's mode stay; the health text ends in an ellipsis when it has no room)."""

    # The bar itself shows no text: its labels repaint themselves (``repaint=False``: a change repaints one
    # label, not the whole bar, which would widen every frame's dirty region to the bottom of the screen).
    connection: reactive[str] = reactive("connecting…", repaint=False)
    connected: reactive[bool] = reactive(True, repaint=False)
    reconnecting: reactive[bool] = reactive(False, repaint=False)
    """The link is down and trying again: says so (warning colour) instead of the connection label."""
    health: reactive[str] = reactive("", repaint=False)
    following: reactive[bool] = reactive(True, repaint=False)
    pending: reactive[int] = reactive(0, repaint=False)
    filter_text: reactive[str] = reactive("", repaint=False)
    progress: reactive[str] = reactive("", repaint=False)
    waiting: reactive[int] = reactive(0, repaint=False)
    """Items waiting for the human ("Waiting for you": held posts, paused turns, approvals, turns,
    invites); shown as ``⚑ N waiting`` while any is."""

    def __init__(self, *, window: int = 30, id: str | None = None) -> None:
        super().__init__(id=id)
        self._rates: deque[float] = deque([0.0] * window, maxlen=window)
        self._count_stale = False
        self._rate_due = False

    def compose(self) -> ComposeResult:
        yield QuietLabel("", id="status-connection")
        yield QuietLabel("", id="status-health")
        yield QuietLabel("0 env/s", id="status-rate")
        yield Sparkline(list(self._rates), id="status-rate-spark")
        yield QuietLabel("", id="status-progress", classes="-empty")
        yield QuietLabel("", id="status-filter", classes="-empty")
        yield QuietLabel("", id="status-waiting", classes="-empty")
        yield QuietLabel("", id="status-follow")

    def on_mount(self) -> None:
        self._refresh_all()

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < self.NARROW, "-narrow")

    def push_rate(self, per_second: float) -> None:
        """Record one second's envelope count for the sparkline (shown after the next frame)."""
        self._rates.append(per_second)
        if not self._rate_due:
            self._rate_due = True
            # not in the frame that shows a batch in the tail: one frame repaints the bounding box of
            # its dirty regions, which from the tail to this bar is most of the screen
            self.call_after_refresh(self._show_rate)

    def _show_rate(self) -> None:
        self._rate_due = False
        if not self.is_mounted:
            return
        per_second = self._rates[-1]
        self.query_one("#status-rate-spark", Sparkline).data = list(self._rates)
        if self._count_stale:  # the paused count is shown with the rate
            self._refresh_all()
        # the rate changes every second: once envelopes flow it has room for five digits, and a figure
        # with fewer digits keeps the room (no layout pass over the screen as the figure changes)
        rate = self.query_one("#status-rate", QuietLabel)
        room = RATE_ROOM if per_second else 0
        rate.show(f"{per_second:,.0f} env/s", keep_width=True, min_width=room, align="right")

    @property
    def rates(self) -> list[float]:
        return list(self._rates)

    def _refresh_all(self) -> None:
        if not self.is_mounted:
            return
        self._count_stale = False
        conn = self.query_one("#status-connection", QuietLabel)
        if self.reconnecting:
            conn.show("○ disconnected — reconnecting…")
        else:
            conn.show(("● " if self.connected else "○ ") + self.connection)
        conn.set_class(self.reconnecting, "-reconnecting")
        conn.set_class(not self.connected and not self.reconnecting, "-down")
        self.query_one("#status-health", QuietLabel).show(self.health)
        follow = self.query_one("#status-follow", QuietLabel)
        if self.following:
            follow.show("▶ following")
        else:
            # while paused the count changes on every batch: it keeps its room until following resumes
            paused = follow.has_class("-paused")
            if self.pending:  # room for five digits: no layout pass as the count grows
                follow.show(f"⏸ paused · {self.pending:,} new", keep_width=paused, min_width=COUNT_ROOM)
            else:
                follow.show("⏸ paused", keep_width=paused)
        follow.set_class(not self.following, "-paused")
        filt = self.query_one("#status-filter", QuietLabel)
        filt.show(f"filter: {self.filter_text}")
        filt.set_class(not self.filter_text, "-empty")
        prog = self.query_one("#status-progress", QuietLabel)
        prog.show(self.progress)
        prog.set_class(not self.progress, "-empty")
        waiting = self.query_one("#status-waiting", QuietLabel)
        waiting.show(f"⚑ {self.waiting:,} waiting · w")
        waiting.set_class(not self.waiting, "-empty")

    def watch_connection(self) -> None:
        self._refresh_all()

    def watch_connected(self) -> None:
        self._refresh_all()

    def watch_reconnecting(self) -> None:
        self._refresh_all()

    def watch_health(self) -> None:
        self._refresh_all()

    def watch_following(self) -> None:
        self._refresh_all()

    def watch_pending(self, old: int, new: int) -> None:
        if old and new and not self.following:
            # "paused · N new" becomes "paused · M new" on every batch of envelopes: shown with the
            # next rate (each second), as a repaint of the bar in the frame that shows the batch in the
            # tail would repaint the bounding box of both, most of the screen
            self._count_stale = True
        else:
            self._refresh_all()

    def watch_filter_text(self) -> None:
        self._refresh_all()

    def watch_progress(self) -> None:
        self._refresh_all()

    def watch_waiting(self) -> None:
        self._refresh_all()


__all__ = ["StatusBar"]

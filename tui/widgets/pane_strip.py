"""The pane strip: where you are when the terminal is too narrow for every pane at once.

One clickable tab per pane (``1 Channels``, ``2 WAL``, ``3 Agent view``, ``4 Peers``). The pane that has
the keyboard is highlighted; panes on screen but not focused are plain; panes off screen are dimmed.
A click (or the pane's number key, bound on the app) shows and focuses that pane.
"""

from __future__ import annotations

from collections.abc import Iterable

from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.reactive import reactive
from textual.widgets import Label

PANES: tuple[tuple[str, str, str], ...] = (
    ("channels", "1", "Channels"),
    ("tail", "2", "WAL"),
    ("view", "3", "Agent view"),
    ("peers", "4", "Peers"),
)
"""(pane, key, title) in strip order."""


class PaneTab(Label):
    """One pane's tab; clicking it asks the app to show and focus the pane."""

    def __init__(self, pane: str, key: str, title: str) -> None:
        super().__init__(f"{key} {title}", id=f"pane-tab-{pane}", classes="pane-tab")
        self.pane = pane
        self.tooltip = f"Show {title} (key {key})"

    async def on_click(self, event: events.Click) -> None:
        event.stop()
        await self.app.run_action(f"focus_pane('{self.pane}')")


class PaneStrip(Horizontal):
    """The tabs of the four panes, with the current one marked."""

    DEFAULT_CSS = """
    PaneStrip {
        height: 1;
        width: 1fr;
        background: $panel;
        color: $text-muted;
        & .pane-tab { width: auto; padding: 0 1; margin: 0 1 0 0; }
        & .pane-tab:hover { background: $boost; color: $text; }
        & .pane-tab.-shown { color: $text; }
        & .pane-tab.-active { background: $primary; color: $text; text-style: bold; }
        & #pane-strip-where { width: 1fr; text-align: right; padding: 0 1; color: $text-muted; }
    }
    """

    active: reactive[str] = reactive("tail")
    """The pane that has (or last had) the keyboard."""

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: frozenset[str] = frozenset({"tail"})

    def compose(self) -> ComposeResult:
        for pane, key, title in PANES:
            yield PaneTab(pane, key, title)
        yield Label("", id="pane-strip-where")

    def on_mount(self) -> None:
        self._paint()

    def tab(self, pane: str) -> PaneTab:
        return self.query_one(f"#pane-tab-{pane}", PaneTab)

    def show(self, active: str, shown: Iterable[str]) -> None:
        """Mark ``active`` as the current pane and ``shown`` as the panes on screen."""
        self._shown = frozenset(shown)
        self.active = active
        self._paint()

    @property
    def shown(self) -> frozenset[str]:
        return self._shown

    def watch_active(self) -> None:
        self._paint()

    def _paint(self) -> None:
        if not self.is_mounted:
            return
        for pane, key, title in PANES:
            tab = self.tab(pane)
            is_active = pane == self.active
            tab.update(f"▸{key} {title}" if is_active else f" {key} {title}")
            tab.set_class(is_active, "-active")
            tab.set_class(pane in self._shown, "-shown")
        order = [pane for pane, _, _ in PANES]
        where = f"pane {order.index(self.active) + 1}/4 · 1–4 switch" if self.active in order else ""
        self.query_one("#pane-strip-where", Label).update(where)


__all__ = ["PANES", "PaneStrip", "PaneTab"]

"""Jump mode: a letter over every pane; press it to focus that pane (Textual 8.2.8 has no built-in jumper).

The footer lists the letters with the panes they jump to, and Escape (this screen's own keys, not the
main screen's)."""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import ModalScreen
from textual.widget import Widget
from textual.widgets import Footer, Label


class JumpOverlay(ModalScreen[str | None]):
    """Shows ``targets`` (key → widget) as labels over the screen; dismisses with the chosen key."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Cancel", id="jump.cancel", tooltip="Back without jumping")
    ]

    DEFAULT_CSS = """
    JumpOverlay {
        background: $background 40%;
        & .jump-label {
            position: absolute;
            background: $accent;
            color: $text;
            text-style: bold;
            padding: 0 1;
        }
        & #jump-hint {
            dock: bottom;
            width: 100%;
            background: $accent-muted;
            color: $text;
            padding: 0 1;
            offset-y: -1;
        }
        & Footer { dock: bottom; }
    }
    """

    def __init__(self, targets: dict[str, tuple[Widget, str]]) -> None:
        super().__init__()
        self.targets = targets
        for key, (_widget, title) in targets.items():
            self._bindings.bind(key, f"pick({key!r})", title)

    def compose(self) -> ComposeResult:
        for key, (widget, title) in self.targets.items():
            region = widget.region
            label = Label(f"{key} {title}", classes="jump-label")
            label.styles.offset = (region.x + 1, region.y)
            yield label
        yield Label("Press a letter to jump to that pane · Escape cancels", id="jump-hint")
        yield Footer()

    def action_pick(self, key: str) -> None:
        if key in self.targets:
            self.dismiss(key)

    def on_key(self, event: events.Key) -> None:
        if event.character and event.character in self.targets:
            event.stop()
            self.dismiss(event.character)


__all__ = ["JumpOverlay"]

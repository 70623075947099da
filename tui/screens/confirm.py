"""A yes/no question in a small modal: ``y``/Enter confirms, ``n``/Escape cancels (mouse: the buttons)."""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Label


class ConfirmScreen(ModalScreen[bool]):
    """Asks ``question``; dismisses with True (confirmed) or False."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    DEFAULT_CSS = """
    ConfirmScreen {
        align: center middle;
        background: $background 60%;
        & #confirm-box {
            width: 60;
            max-width: 100%;
            height: auto;
            border: round $warning;
            border-title-color: $text-warning;
            background: $surface;
            padding: 1 2;
        }
        & #confirm-question { width: 1fr; }
        & #confirm-detail { width: 1fr; color: $text-muted; margin-top: 1; }
        & #confirm-buttons { height: auto; margin-top: 1; align-horizontal: right; }
        & Button { margin-left: 2; }
    }
    """

    def __init__(self, title: str, question: str, detail: str = "", confirm_label: str = "Yes") -> None:
        super().__init__()
        self.title_text = title
        self.question = question
        self.detail = detail
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box") as box:
            box.border_title = self.title_text
            yield Label(self.question, id="confirm-question")
            if self.detail:
                yield Label(self.detail, id="confirm-detail")
            with Horizontal(id="confirm-buttons"):
                yield Button("Cancel (n)", id="confirm-cancel", compact=True)
                yield Button(f"{self.confirm_label} (y)", id="confirm-ok", variant="warning", compact=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#confirm-cancel", Button).focus()

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

    @on(Button.Pressed, "#confirm-ok")
    def _ok(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-cancel")
    def _cancel(self) -> None:
        self.dismiss(False)


__all__ = ["ConfirmScreen"]

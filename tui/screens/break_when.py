""" "Break when…": set a breakpoint from a spec in the tail's filter language (issue 24).

``b`` on a tail envelope, a channel or a peer opens it prefilled (``sender:critic type:ag2.msg.text
channel:conversation·9272``); the palette's "Break when…" opens it empty. The spec holds matching posts
before they are appended (*posts*) or pauses a matching agent's turn before its model call (*turns*).
A bad spec is the hub's one sentence under the field; the form stays.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, Select, Static

from ag2net.breakpoints import Breakpoint
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError

Submit = Callable[[str, str], Awaitable[Breakpoint]]
"""``submit(spec, on)``: sets the breakpoint (``on`` is ``envelope`` or ``turn``) or raises the refusal."""

ON_CHOICES = [
    ("posts: hold them before they are appended", "envelope"),
    ("turns: pause the agent before its model call", "turn"),
]

SPEC_HELP = (
    'Terms as in the tail\'s filter, ANDed: sender:NAME type:ag2.msg.text to:NAME text:"words" '
    "re:/x/ channel:LABEL channel.type:workflow node:NAME"
)


def quote(value: str) -> str:
    """A term's value as the filter language reads it (quoted when it holds a space)."""
    return f'"{value}"' if any(ch.isspace() for ch in value) else value


def spec_for_envelope(envelope: Envelope, sender: str, channel_label: str) -> str:
    """The spec that breaks on posts like ``envelope``: same sender, same type, same channel."""
    return f"sender:{quote(sender)} type:{envelope.event_type} channel:{channel_label}"


def spec_for_channel(channel_label: str) -> str:
    return f"channel:{channel_label}"


def spec_for_peer(name: str) -> str:
    return f"sender:{quote(name)}"


class BreakWhenScreen(ModalScreen[Breakpoint | None]):
    """The spec field, posts or turns, and Enter to set it; dismisses with the breakpoint set (or None)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="break_when.cancel"),
        Binding("ctrl+t", "toggle_on", "Posts/turns", id="break_when.toggle_on"),
    ]

    DEFAULT_CSS = """
    BreakWhenScreen {
        align: center middle;
        background: $background 60%;
        & #bw-box {
            width: 76;
            max-width: 100%;
            height: auto;
            max-height: 100%;
            border: round $warning;
            border-title-color: $text-warning;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #bw-help { color: $text-muted; width: 1fr; }
        & #bw-spec { margin-top: 1; }
        & #bw-on { margin-top: 1; width: 1fr; }
        & #bw-error { color: $text-error; width: 1fr; height: auto; }
        & #bw-error.-empty { display: none; }
        & #bw-hint { color: $text-muted; margin-top: 1; }
    }
    """

    def __init__(self, spec: str, submit: Submit, *, on: str = "envelope", origin: str = "") -> None:
        super().__init__()
        self.spec = spec
        self.submit = submit
        self.on_kind = on
        self.origin = origin
        """What the spec was made from ("the critic's text #5"), shown in the title."""

    def compose(self) -> ComposeResult:
        with Vertical(id="bw-box") as box:
            box.border_title = "Break when…" + (f" · {self.origin}" if self.origin else "")
            yield Static(SPEC_HELP, id="bw-help")
            yield Input(self.spec, placeholder="sender:critic type:ag2.msg.text", id="bw-spec")
            yield Select(ON_CHOICES, value=self.on_kind, allow_blank=False, compact=True, id="bw-on")
            yield Label("", id="bw-error", classes="-empty")
            yield Label("Enter sets it · ctrl+t posts/turns · esc cancels", id="bw-hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#bw-spec", Input).focus()

    @property
    def spec_input(self) -> Input:
        return self.query_one("#bw-spec", Input)

    @property
    def on_select(self) -> Select[str]:
        return self.query_one("#bw-on", Select)

    def action_cancel(self) -> None:
        self.dismiss(None)

    def action_toggle_on(self) -> None:
        select = self.on_select
        select.value = "turn" if select.value == "envelope" else "envelope"

    def show_error(self, text: str) -> None:
        error = self.query_one("#bw-error", Label)
        error.update(text)
        error.set_class(not text, "-empty")

    @on(Input.Submitted, "#bw-spec")
    def _submitted(self, event: Input.Submitted) -> None:
        spec = event.value.strip()
        if not spec:
            self.show_error("The spec is empty: give at least one term, e.g. sender:critic.")
            return
        value = self.on_select.value
        self._set(spec, value if isinstance(value, str) else "envelope")

    @work(group="break-when", exclusive=True)
    async def _set(self, spec: str, on: str) -> None:
        try:
            breakpoint_ = await self.submit(spec, on)
        except (NetworkError, ValueError) as exc:
            self.show_error(str(exc))
            return
        self.dismiss(breakpoint_)


__all__ = [
    "BreakWhenScreen",
    "quote",
    "spec_for_channel",
    "spec_for_envelope",
    "spec_for_peer",
]

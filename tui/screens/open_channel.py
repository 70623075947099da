"""The open-channel form: type, targets, knobs (JSON), TTL, intent and a view override.

Posts ``OpenChannelForm.OpenRequested``; the app opens it as the human (``human.open``) and calls
``show_error`` when the hub refuses, or dismisses the form when the channel is open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, Footer, Input, Label, Select, SelectionList, Static
from textual.widgets.selection_list import Selection

from ag2net.errors import NetworkError
from ag2net.views import VIEW_POLICY_KNOB, registered_views, view_from_spec
from tui.widgets.json_area import json_text_area
from tui.wording import humanize, namer_for

NO_OVERRIDE = "__default__"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


class OpenChannelForm(ModalScreen[None]):
    """Open a channel as the human at the keyboard."""

    HELP = """\
## Open a channel

- **Type**: consulting (one question, one reply), conversation (two parties, free-form),
  discussion (round robin), workflow (transition graph), or any adapter the hub has.
- **Targets**: tick who to invite; they must acknowledge before the channel opens.
- **Knobs**: a JSON object passed to the adapter (e.g. `{"max_turns": 6}`).
- **View override** sets the channel's `view_policy` knob for every participant.
- **Ctrl+S** opens, **Escape** cancels. While the invitees have not accepted yet, a spinner and the
  seconds waited show beside the buttons (the hub gives up after its invite-ack timeout); a refusal
  shows there too, and the form stays as filled in.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s,ctrl+enter,ctrl+j", "submit", "Open", id="open.submit", tooltip="Open the channel"),
        Binding("escape", "dismiss", "Cancel", id="open.cancel"),
    ]

    DEFAULT_CSS = """
    OpenChannelForm {
        align: center middle;
        & > #open-frame {
            width: 80;
            max-width: 95%;
            height: 90%;
            border: round $primary;
            border-title-color: $text-primary;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & .field-label { color: $text-muted; margin-top: 1; }
        & .field-error { color: $text-error; height: auto; width: 100%; }
        & .field-error.-empty { display: none; }
        & #open-targets { height: auto; max-height: 8; }
        & #open-knobs { height: 6; }
        & .open-row { height: auto; }
        & .open-row > Vertical { width: 1fr; height: auto; }
        & .open-row > Vertical:first-child { margin-right: 1; }
        & #open-fields { height: 1fr; }
        & #open-buttons { height: auto; min-height: 3; border-top: hkey $panel-lighten-1; }
        & #open-buttons Button { margin-right: 1; }
        & #open-outcome { width: 1fr; height: auto; max-height: 4; }
        & #open-error { color: $text-error; height: auto; width: 1fr; }
        & #open-error.-empty { display: none; }
        & #open-waiting { color: $text-accent; height: auto; width: 1fr; }
        & #open-waiting.-empty { display: none; }
        & Footer { dock: bottom; }
    }
    """

    class OpenRequested(Message):
        """Open a channel with these settings (already validated)."""

        def __init__(
            self,
            form: OpenChannelForm,
            channel_type: str,
            targets: list[str],
            knobs: dict[str, Any],
            ttl: int | None,
            intent: str | None,
        ) -> None:
            super().__init__()
            self.form = form
            self.channel_type = channel_type
            self.targets = targets
            self.knobs = knobs
            self.ttl = ttl
            self.intent = intent

    def __init__(
        self,
        channel_types: Sequence[str],
        peers: Sequence[tuple[str, str]],
        *,
        initial_type: str | None = None,
    ) -> None:
        super().__init__()
        self.channel_types = list(channel_types) or ["consulting", "conversation", "discussion", "workflow"]
        self.peers = list(peers)
        self.initial_type = initial_type if initial_type in self.channel_types else self.channel_types[0]
        self.errors: dict[str, str] = {}
        self.waiting_since: float | None = None
        """When the request went to the hub (None while not waiting)."""
        self._waiting_for: list[str] = []
        self._spinner: Timer | None = None
        self._frame = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="open-frame") as frame:
            frame.border_title = "Open a channel"
            with VerticalScroll(id="open-fields"):
                yield Label("Type", classes="field-label")
                yield Select(
                    [(t, t) for t in self.channel_types],
                    value=self.initial_type,
                    allow_blank=False,
                    compact=True,
                    id="open-type",
                )
                yield Label("Targets (who to invite)", classes="field-label")
                yield SelectionList[str](
                    *[Selection(name, agent_id) for agent_id, name in self.peers],
                    compact=True,
                    id="open-targets",
                )
                yield Label("", classes="field-error -empty", id="open-targets-msg")
                with Horizontal(classes="open-row"):
                    with Vertical():
                        yield Label("TTL seconds (empty: the default)", classes="field-label")
                        yield Input(placeholder="default", compact=True, id="open-ttl")
                        yield Label("", classes="field-error -empty", id="open-ttl-msg")
                    with Vertical():
                        yield Label("Intent (optional)", classes="field-label")
                        yield Input(placeholder="what this channel is for", compact=True, id="open-intent")
                with Horizontal(classes="open-row"):
                    with Vertical():
                        yield Label("View override", classes="field-label")
                        yield Select(
                            [("adapter default", NO_OVERRIDE), *((v, v) for v in registered_views())],
                            value=NO_OVERRIDE,
                            allow_blank=False,
                            compact=True,
                            id="open-view",
                        )
                    with Vertical():
                        yield Label("recent_n", classes="field-label")
                        yield Input(placeholder="—", compact=True, id="open-recent")
                yield Label("", classes="field-error -empty", id="open-view-msg")
                yield Label("Knobs (JSON object)", classes="field-label")
                yield json_text_area("{}", tab_behavior="focus", compact=True, id="open-knobs")
                yield Label("", classes="field-error -empty", id="open-knobs-msg")
            # the buttons and what came of pressing them (the spinner, the hub's refusal) stay in view below
            # the fields, whatever the height: at 80x24 the fields scroll, the outcome does not
            with Horizontal(id="open-buttons"):
                yield Button("Open", variant="primary", id="open-submit")
                yield Button("Cancel", id="open-cancel")
                with Vertical(id="open-outcome"):
                    yield Static("", id="open-waiting", classes="-empty")
                    yield Static("", id="open-error", classes="-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#open-targets", SelectionList).focus()

    def _set(self, name: str, message: str) -> None:
        label = self.query_one(f"#open-{name}-msg", Label)
        label.update(message)
        label.set_class(not message, "-empty")

    def collect(self) -> OpenRequested | None:
        """Validate the form; the request when valid, else None with messages beside the fields."""
        errors: dict[str, str] = {}
        targets = list(self.query_one("#open-targets", SelectionList).selected)
        if not targets:
            errors["targets"] = "tick at least one participant to invite"
        ttl: int | None = None
        ttl_text = self.query_one("#open-ttl", Input).value.strip()
        if ttl_text:
            try:
                ttl = int(ttl_text)
                if ttl < 0:
                    raise ValueError
            except ValueError:
                errors["ttl"] = "TTL must be a whole number of seconds (0 or more), or empty"
        knobs: dict[str, Any] = {}
        text = self.query_one("#open-knobs").text  # type: ignore[attr-defined]
        try:
            parsed = json.loads(text or "{}")
        except json.JSONDecodeError as exc:
            errors["knobs"] = f"knobs are not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        else:
            if isinstance(parsed, dict):
                knobs = parsed
            else:
                errors["knobs"] = f"knobs must be a JSON object, got {type(parsed).__name__}"
        view = self.query_one("#open-view", Select).value
        if view != NO_OVERRIDE:
            spec: dict[str, Any] = {"name": str(view)}
            recent = self.query_one("#open-recent", Input).value.strip()
            if recent:
                try:
                    spec["recent_n"] = int(recent)
                except ValueError:
                    errors["view"] = f"recent_n must be a whole number, got {recent!r}"
            if "view" not in errors:
                try:
                    view_from_spec(spec)
                except NetworkError as exc:
                    errors["view"] = str(exc)
                else:
                    knobs[VIEW_POLICY_KNOB] = spec
        self.errors = errors
        for name in ("targets", "ttl", "knobs", "view"):
            self._set(name, errors.get(name, ""))
        if errors:
            return None
        intent = self.query_one("#open-intent", Input).value.strip() or None
        return self.OpenRequested(
            self, str(self.query_one("#open-type", Select).value), targets, knobs, ttl, intent
        )

    def action_submit(self) -> None:
        if self.waiting_since is not None:
            return  # the request is with the hub already
        request = self.collect()
        if request is not None:
            self.show_error("")
            self.query_one("#open-submit", Button).disabled = True
            names = dict(self.peers)
            self._start_waiting([names.get(t, t[:8]) for t in request.targets])
            self.post_message(request)

    @property
    def waiting_text(self) -> str:
        """What the progress line says ('' when not waiting)."""
        label = self.query_one("#open-waiting", Static)
        return "" if label.has_class("-empty") else str(label.render())

    def _start_waiting(self, names: list[str]) -> None:
        self.waiting_since = time.monotonic()
        self._waiting_for = names
        self._frame = 0
        self._tick()
        if self._spinner is None:
            self._spinner = self.set_interval(0.1, self._tick)
        else:
            self._spinner.resume()

    def _stop_waiting(self) -> None:
        self.waiting_since = None
        if self._spinner is not None:
            self._spinner.pause()
        label = self.query_one("#open-waiting", Static)
        label.update("")
        label.add_class("-empty")

    def _tick(self) -> None:
        if self.waiting_since is None:
            return
        elapsed = time.monotonic() - self.waiting_since
        self._frame = (self._frame + 1) % len(SPINNER)
        who = ", ".join(self._waiting_for) or "the invitees"
        limit = self._ack_timeout()
        of = f" of {limit:g} s" if limit else ""
        label = self.query_one("#open-waiting", Static)
        label.update(f"{SPINNER[self._frame]} Invited {who}; waiting for them to accept… {elapsed:.0f} s{of}")
        label.remove_class("-empty")

    def _ack_timeout(self) -> float | None:
        """The hub's invite-ack timeout, when the hub runs in this process (a remote one does not say)."""
        source = getattr(self.app, "source", None)
        hub = getattr(getattr(source, "hc", None), "hub", None)
        value = getattr(hub, "invite_ack_timeout", None)
        return float(value) if isinstance(value, (int, float)) else None

    def on_unmount(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()

    def show_error(self, message: str) -> None:
        """The hub refused: show why (naming agents and channels) and keep the form as filled in."""
        if message:
            self._stop_waiting()
            message = humanize(message, namer_for(self.app))
        error = self.query_one("#open-error", Static)
        error.update(f"Not opened: {message}" if message else "")
        error.set_class(not message, "-empty")
        self.query_one("#open-submit", Button).disabled = False

    @on(Button.Pressed, "#open-submit")
    def _submit_pressed(self) -> None:
        self.action_submit()

    @on(Button.Pressed, "#open-cancel")
    def _cancel_pressed(self) -> None:
        self.dismiss(None)


__all__ = ["OpenChannelForm"]

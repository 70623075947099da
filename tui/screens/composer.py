"""The envelope composer: hand-craft any envelope (custom types included), validated live, previewed exactly.

Send posts ``EnvelopeComposer.SendRequested``; the app posts it through ``human.post_envelope`` and calls
``show_send_error`` when the hub refuses (the draft stays) or ``sent`` when it was admitted. Drafts
persist in a JSON file next to the settings file.

Beside the preview (below it when the terminal is narrow), the dry-run panel shows what sending the
draft would do now: the hub's ``dry_run`` op (``ag2net.debug.dry_run``, through the app source's
``dry_run`` method, in-process or remote) runs in a worker ``DRY_RUN_DELAY`` after the last change, and
again every ``DRY_RUN_REFRESH`` seconds while the draft is unchanged (whose turn it is moves on). It
names the verdict (a refusal in the very words a post would get, ids named), the recipients in dispatch
order, what each participant's model would get on its next turn, and the protocol's state after.

The draft's pure side (event types, templates, parsing, saving, the dry run's text) is ``draft.py``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.screen import ModalScreen
from textual.suggester import SuggestFromList
from textual.timer import Timer
from textual.widgets import Button, Footer, Input, Label, Select, SelectionList, Static, TextArea
from textual.widgets.selection_list import Selection

from ag2net.envelope import (
    ALL_EVENT_TYPES,
    EV_TEXT,
    PRIORITIES,
    Envelope,
    check_envelope,
)
from ag2net.errors import AccessDeniedError, ProtocolError
from tui.screens.draft import (
    CUSTOM_TEMPLATE,
    EV_NAMES,
    TERMINAL_STATES,
    dry_run_text,
    empty_text_warning,
    event_templates,
    event_type_warning,
    parse_event_data,
    refusal_sentence,
    reserved_type_warning,
    resolve_event_type,
    write_draft,
)
from tui.widgets.json_area import json_text_area
from tui.wording import app_labels, humanize, namer_for

if TYPE_CHECKING:  # ag2net.debug loads the hub: the dry run imports it when it runs (issue 28)
    from ag2net.debug import DryRun

DRY_RUN_DELAY = 0.25
"""Seconds after the last change before the dry run runs (typing does not fire one per key)."""
DRY_RUN_REFRESH = 2.0
"""Seconds between dry runs of an unchanged draft (the channel moves on while the person thinks)."""
DRY_RUN_WIDE = 160
"""From this many columns the dry run sits beside the preview; below, under it."""
DRY_RUN_TALL = 30
"""Below this many rows the preview's hint line goes (the dry run needs the room)."""
DryRunner = Callable[[Envelope], Awaitable["DryRun"]]


@dataclass(slots=True)
class ChannelChoice:
    """A channel the composer can post into: its label and its participants as (agent_id, name)."""

    channel_id: str
    label: str
    participants: list[tuple[str, str]] = field(default_factory=list)
    state: str = ""
    """The channel's state ('' when unknown: the composer asks the app's source)."""


def _set_message(label: Label, text: str) -> None:
    label.update(text)
    label.set_class(not text, "-empty")


RecentFor = Callable[[str], Sequence[tuple[str, str]]]


class EnvelopeComposer(ModalScreen[None]):
    """A form for one raw envelope with live validation and an exact preview."""

    HELP = """\
## Envelope composer

Build any envelope, including custom event types (`myapp.review_request`).

- **Channel** lists every channel, whatever the channels pane's filter shows; closed ones are marked.
- **Template** fills event type and event data for every `EV_*` type; typing `EV_TEXT` as the event
  type means `ag2.msg.text`. A name inside `ag2.` that is not an ag2 type gets a warning.
- **Audience**: tick participants; none ticked is a broadcast (`audience: null`).
- The preview on the right is exactly what will be posted; the hub stamps `envelope_id` and `created_at`.
- **Dry run** (beside the preview, or under it when narrow) shows what sending would do now, without
  sending: refused (and why) or admitted, who receives it, what each participant's model gets on its
  next turn, who is expected to speak after it and whether the channel would close.
- The event type's text is selected when you enter the field: typing replaces it.
- An `ag2.msg.text` whose `text` is empty gets a warning under the event data (it would say nothing).
- **Ctrl+S** sends, **Escape** closes and keeps the draft (reopening shows it, until it is sent),
  **Ctrl+D** discards the draft and closes.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s,ctrl+enter,ctrl+j", "send", "Send", id="composer.send", tooltip="Post the envelope"),
        Binding("escape", "close", "Close", id="composer.close", tooltip="Close; the draft is kept"),
        Binding(  # priority: the fields' own ctrl+d (delete right; the Delete key does that too) yields
            "ctrl+d",
            "discard",
            "Discard",
            id="composer.discard",
            tooltip="Forget the draft and close",
            priority=True,
        ),
    ]

    # The dry run's place follows the width (beside the preview from DRY_RUN_WIDE columns, else below it)
    # and the hint goes below DRY_RUN_TALL rows: classes set on resize, so the app's own breakpoint
    # classes on this screen stay as they are.

    DEFAULT_CSS = """
    EnvelopeComposer {
        align: center middle;
        & > #composer-frame {
            width: 96%;
            height: 94%;
            border: round $primary;
            border-title-color: $text-primary;
            border-title-style: bold;
            background: $surface;
        }
        & #composer-form { width: 3fr; padding: 0 1; }
        & #composer-side { width: 2fr; border-left: vkey $panel-lighten-1; padding: 0 1; }
        &.-dry-beside #composer-side { width: 4fr; }
        & #composer-outputs { height: 1fr; layout: vertical; }
        &.-dry-beside #composer-outputs { layout: horizontal; }
        & #composer-preview-box { height: 1fr; width: 1fr; }
        &.-dry-beside #composer-preview-box { margin-right: 1; }
        &.-dry-beside #composer-dry-box { margin-top: 1; }
        & #composer-dry-box {
            height: 1fr;
            width: 1fr;
            border: round $panel-lighten-2;
            border-title-color: $text-muted;
            padding: 0 1;
        }
        & #composer-dry-box.-refused { border: round $error; border-title-color: $text-error; }
        & #composer-dry-box.-admitted { border: round $success; border-title-color: $text-success; }
        & #composer-dry-box.-stale > #composer-dry-scroll { opacity: 70%; }
        & #composer-dry-scroll { height: 1fr; scrollbar-size-vertical: 1; }
        & #composer-dry { width: 100%; height: auto; }
        &.-composer-short .field-hint { display: none; }
        & .field-label { color: $text-muted; margin-top: 1; width: 100%; }
        & .field-error { color: $text-error; height: auto; width: 100%; }
        & .field-warning { color: $text-warning; height: auto; width: 100%; }
        & .field-hint { color: $text-muted; text-style: italic; height: auto; width: 100%; }
        & Input, & Select, & SelectionList { background: $boost; }
        & .field-error.-warning { color: $text-warning; }
        & .field-error.-empty, & .field-warning.-empty { display: none; }
        & Footer { dock: bottom; }
        & #composer-audience { height: auto; max-height: 6; }
        & #composer-data { height: 9; }
        & #composer-row { height: auto; }
        & #composer-row > Vertical { width: 1fr; height: auto; }
        & #composer-row > Vertical:first-child { margin-right: 1; }
        & #composer-buttons { height: auto; margin-top: 1; }
        & #composer-buttons Button { margin-right: 1; width: 1fr; min-width: 8; max-width: 16; }
        & #composer-buttons #composer-discard { min-width: 9; margin-right: 0; }
        & #composer-send-error {
            color: $text-error;
            border: tall $error;
            padding: 0 1;
            height: auto;
            margin-bottom: 1;
        }
        & #composer-send-error.-empty { display: none; }
        & #composer-preview { height: 1fr; border: none; }
    }
    """

    class SendRequested(Message):
        """The user asked to post ``envelope`` (already validated)."""

        def __init__(self, composer: EnvelopeComposer, envelope: Envelope) -> None:
            super().__init__()
            self.composer = composer
            self.envelope = envelope

        @property
        def control(self) -> EnvelopeComposer:
            return self.composer

    def __init__(
        self,
        channels: Sequence[ChannelChoice],
        sender_id: str,
        *,
        initial_channel: str | None = None,
        recent_for: RecentFor | None = None,
        draft_path: Path | None = None,
        custom_types: Sequence[str] = (),
        dry_run: DryRunner | None = None,
    ) -> None:
        super().__init__()
        self._dry_runner = dry_run
        """The dry run to call; None: the app source's ``dry_run`` (none there: the panel says so)."""
        self._dry_timer: Timer | None = None
        self._dry_generation = 0
        self._envelope: Envelope | None = None
        self.dry_result: DryRun | None = None
        """The latest dry run shown (None while the draft is not valid or none ran yet)."""
        self.channels = {c.channel_id: c for c in channels}
        self.sender_id = sender_id
        self.recent_for: RecentFor = recent_for or (lambda channel_id: ())
        self.draft_path = draft_path
        self.custom_types = [t for t in custom_types if t not in ALL_EVENT_TYPES]
        self.errors: dict[str, str] = {}
        self.warnings: dict[str, str] = {}
        self.sending = False
        self._loading = True
        self._draft_lock = threading.Lock()
        self._draft_generation = 0
        """The newest save asked for (each change, close and discard takes the next number)."""
        self._draft_written = 0
        """The newest save (or discard) that reached the file."""
        self._draft = self._read_draft()
        channel = initial_channel or self._draft.get("channel_id")
        if channel not in self.channels:
            channel = next(iter(self.channels), None)
        self._initial_channel = channel

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        self._add_known_channels()
        with Horizontal(id="composer-frame") as frame:
            frame.border_title = "Compose envelope"
            with VerticalScroll(id="composer-form"):
                yield from self._compose_form()
            with Vertical(id="composer-side"):
                yield from self._compose_outputs()
        yield Footer()

    def _compose_form(self) -> ComposeResult:
        """The fields: channel, audience, template, event type and data, priority, TTL, reply, task."""
        draft = self._draft
        channel_options = [(self._option(c), c.channel_id) for c in self.channels.values()]
        templates = [(t, t) for t in (*ALL_EVENT_TYPES, CUSTOM_TEMPLATE)]
        yield Label("Channel", classes="field-label")
        yield Select(
            channel_options,
            prompt="Pick a channel",
            value=self._initial_channel if self._initial_channel else Select.NULL,
            compact=True,
            id="composer-channel",
        )
        yield Label("", classes="field-error", id="composer-channel-msg")
        yield Label(
            "Audience (none ticked = broadcast to all participants)",
            classes="field-label",
            id="composer-audience-label",
        )
        yield SelectionList[str](compact=True, id="composer-audience")
        yield Label("Template", classes="field-label")
        yield Select(templates, prompt="Fill from a template…", compact=True, id="composer-template")
        yield Label("Event type", classes="field-label")
        yield Input(
            draft.get("event_type", EV_TEXT),
            placeholder="ag2.msg.text or myapp.review_request",
            suggester=SuggestFromList([*ALL_EVENT_TYPES, *self.custom_types, *EV_NAMES]),
            compact=True,
            select_on_focus=True,  # typing replaces the template's type, as a person expects
            id="composer-type",
        )
        yield Label("", classes="field-error", id="composer-type-msg")
        yield Label("", classes="field-warning", id="composer-type-warning")
        yield Label("Event data (JSON object)", classes="field-label")
        yield json_text_area(
            draft.get("event_data", json.dumps({"text": ""}, indent=2)),
            tab_behavior="focus",
            show_line_numbers=True,
            compact=True,
            id="composer-data",
        )
        yield Label("", classes="field-error", id="composer-data-msg")
        yield Label("", classes="field-warning", id="composer-data-warning")
        with Horizontal(id="composer-row"):
            with Vertical():
                yield Label("Priority", classes="field-label")
                yield Select(
                    [(p, p) for p in PRIORITIES],
                    value=draft.get("priority", "normal"),
                    allow_blank=False,
                    compact=True,
                    id="composer-priority",
                )
            with Vertical():
                yield Label("TTL seconds (optional)", classes="field-label")
                yield Input(
                    str(draft.get("ttl_seconds") or ""),
                    placeholder="none",
                    compact=True,
                    id="composer-ttl",
                )
                yield Label("", classes="field-error", id="composer-ttl-msg")
        yield Label("In reply to (causation_id)", classes="field-label")
        yield Select([], prompt="Not a reply", compact=True, id="composer-causation")
        yield Label("Task id (optional)", classes="field-label")
        yield Input(draft.get("task_id") or "", placeholder="none", compact=True, id="composer-task")

    def _compose_outputs(self) -> ComposeResult:
        """The send error, the envelope to post, the dry run, and the buttons."""
        yield Static("", id="composer-send-error", classes="-empty")
        with Vertical(id="composer-outputs"):
            with Vertical(id="composer-preview-box"):
                yield Label("Envelope to post", classes="field-label")
                yield Label(
                    "envelope_id and created_at are stamped by the hub at admission.",
                    classes="field-hint",
                )
                yield json_text_area("", read_only=True, soft_wrap=True, id="composer-preview")
            with Vertical(id="composer-dry-box") as dry_box:
                dry_box.border_title = "Dry run"
                with VerticalScroll(id="composer-dry-scroll"):
                    yield Static("", id="composer-dry")
        with Horizontal(id="composer-buttons"):
            yield Button("Send", variant="primary", id="composer-send")
            yield Button("Close", id="composer-cancel")
            yield Button("Discard", variant="error", id="composer-discard")

    def _add_known_channels(self) -> None:
        """Every channel the app's source knows joins the picker (the list handed in may be filtered)."""
        source = getattr(self.app, "source", None)
        metadata = getattr(source, "metadata", None)
        if not isinstance(metadata, dict):
            return
        labels = app_labels(self.app)
        participants: Any = getattr(source, "participants", None)
        for channel_id in metadata:
            if isinstance(channel_id, str) and channel_id not in self.channels:
                self.channels[channel_id] = ChannelChoice(
                    channel_id,
                    labels.get(channel_id) or channel_id[:8],
                    [(str(a), str(n)) for a, n in participants(channel_id)] if participants else [],
                )

    def channel_state(self, channel_id: str) -> str:
        """The channel's state as the choice says, else as the app's source knows it ('' if unknown)."""
        choice = self.channels.get(channel_id)
        if choice is not None and choice.state:
            return choice.state
        metadata = getattr(getattr(self.app, "source", None), "metadata", None)
        md = metadata.get(channel_id) if isinstance(metadata, dict) else None
        state = getattr(md, "state", None)
        return str(getattr(state, "value", state or ""))

    def _label(self, channel_id: str) -> str:
        choice = self.channels.get(channel_id)
        return choice.label if choice is not None else channel_id[:8]

    def _option(self, choice: ChannelChoice) -> str:
        state = self.channel_state(choice.channel_id)
        return f"{choice.label} · {state}" if state in TERMINAL_STATES else choice.label

    def on_resize(self, event: Resize) -> None:
        self._fit(event.size.width, event.size.height)

    def _fit(self, width: int, height: int) -> None:
        self.set_class(width >= DRY_RUN_WIDE, "-dry-beside")
        self.set_class(height < DRY_RUN_TALL, "-composer-short")

    def on_mount(self) -> None:
        self._fit(self.app.size.width, self.app.size.height)
        self._fill_channel(self._initial_channel, restore=self._draft)
        self._loading = False
        self.validate_form()
        self.query_one("#composer-type", Input).focus()
        self._dry_run_soon()
        self.set_interval(DRY_RUN_REFRESH, self._dry_run_refresh, name="composer dry-run refresh")

    # ------------------------------------------------------------------ reading the form

    @property
    def channel_id(self) -> str | None:
        value = self.query_one("#composer-channel", Select).value
        return None if value is Select.NULL else str(value)

    def form_values(self) -> dict[str, Any]:
        """The raw form contents (what a draft stores)."""
        causation = self.query_one("#composer-causation", Select).value
        return {
            "channel_id": self.channel_id,
            "audience": list(self.query_one("#composer-audience", SelectionList).selected),
            "event_type": self.query_one("#composer-type", Input).value,
            "event_data": self.query_one("#composer-data", TextArea).text,
            "priority": str(self.query_one("#composer-priority", Select).value),
            "causation_id": None if causation is Select.NULL else str(causation),
            "ttl_seconds": self.query_one("#composer-ttl", Input).value.strip() or None,
            "task_id": self.query_one("#composer-task", Input).value.strip() or None,
        }

    def validate_form(self) -> Envelope | None:
        """Check every field, show messages beside them, refresh the preview; the envelope when valid."""
        values = self.form_values()
        errors: dict[str, str] = {}
        warnings: dict[str, str] = {}
        if not values["channel_id"]:
            errors["channel"] = "pick a channel to post into"
        event_type, note = resolve_event_type(values["event_type"])
        if not event_type:
            errors["type"] = "event_type is empty; pick one (e.g. ag2.msg.text) or type a dotted name"
        elif note:
            warnings["type"] = note
        else:
            warnings["type"] = reserved_type_warning(event_type) or event_type_warning(event_type)
        state = self.channel_state(values["channel_id"] or "")
        if state in TERMINAL_STATES:
            warnings["channel"] = (
                f"{self._label(values['channel_id'])} is {state}: the hub will refuse this post; "
                "open a new channel (ctrl+o)"
            )
        data, data_error = parse_event_data(values["event_data"])
        if data_error:
            errors["data"] = data_error
        elif event_type == EV_TEXT and data is not None:
            warnings["data"] = empty_text_warning(data)
        ttl: int | None = None
        if values["ttl_seconds"] is not None:
            try:
                ttl = int(values["ttl_seconds"])
                if ttl < 0:
                    raise ValueError
            except ValueError:
                errors["ttl"] = "ttl_seconds must be a whole number of seconds (0 or more), or empty"
        envelope: Envelope | None = None
        if not errors:
            envelope = Envelope(
                channel_id=values["channel_id"],
                sender_id=self.sender_id,
                audience=values["audience"] or None,
                event_type=event_type,
                event_data=data or {},
                task_id=values["task_id"],
                causation_id=values["causation_id"],
                priority=values["priority"],
                ttl_seconds=ttl,
            )
            try:
                check_envelope(envelope)
            except ProtocolError as exc:
                field_name = "type" if "event_type" in str(exc) else "data"
                errors[field_name] = str(exc)
                envelope = None
        self.errors = errors
        self.warnings = {k: v for k, v in warnings.items() if v}
        for name in ("channel", "type", "data", "ttl"):
            message = errors.get(name, "") or (self.warnings.get(name, "") if name == "channel" else "")
            _set_message(self.query_one(f"#composer-{name}-msg", Label), message)
        self.query_one("#composer-channel-msg", Label).set_class(
            "channel" not in errors and "channel" in self.warnings, "-warning"
        )
        _set_message(self.query_one("#composer-type-warning", Label), self.warnings.get("type", ""))
        _set_message(self.query_one("#composer-data-warning", Label), self.warnings.get("data", ""))
        self.query_one("#composer-send", Button).disabled = bool(errors) or self.sending
        self._update_preview(values, envelope)
        self._envelope = envelope
        return envelope

    def _update_preview(self, values: dict[str, Any], envelope: Envelope | None) -> None:
        preview = self.query_one("#composer-preview", TextArea)
        if envelope is not None:
            text = json.dumps(envelope.to_dict(), indent=2, sort_keys=True, ensure_ascii=False)
        else:
            problems = "\n".join(f"// {msg}" for msg in self.errors.values())
            text = f"// not sendable yet:\n{problems}"
        if preview.text != text:
            preview.load_text(text)

    # ------------------------------------------------------------------ reacting

    @on(Select.Changed, "#composer-channel")
    def _channel_changed(self, event: Select.Changed) -> None:
        if self._loading:
            return
        self._fill_channel(self.channel_id, restore=None)
        self._changed()

    @on(Select.Changed, "#composer-template")
    def _template_changed(self, event: Select.Changed) -> None:
        if event.value is Select.NULL:
            return
        name = str(event.value)
        template = event_templates(self.channel_id or "", self.sender_id)[name]
        kind = self.query_one("#composer-type", Input)
        kind.value = "myapp.custom_event" if name == CUSTOM_TEMPLATE else name
        kind.select_all()  # the template's type, whole: typing into the field replaces it
        self.query_one("#composer-data", TextArea).load_text(json.dumps(template, indent=2))
        self._changed()

    @on(Input.Changed)
    @on(TextArea.Changed, "#composer-data")
    @on(Select.Changed, "#composer-priority, #composer-causation")
    @on(SelectionList.SelectedChanged)
    def _field_changed(self) -> None:
        if not self._loading:
            self._changed()

    def _changed(self) -> None:
        self.validate_form()
        self._clear_send_error()
        self._save_draft_soon()
        self._dry_run_soon()

    @on(Button.Pressed, "#composer-send")
    def _send_pressed(self) -> None:
        self.action_send()

    @on(Button.Pressed, "#composer-cancel")
    def _cancel_pressed(self) -> None:
        self.action_close()

    @on(Button.Pressed, "#composer-discard")
    def _discard_pressed(self) -> None:
        self.action_discard()

    def action_send(self) -> None:
        envelope = self.validate_form()
        if envelope is None:
            first = next(iter(self.errors), None)
            focus_target = {
                "channel": "#composer-channel",
                "type": "#composer-type",
                "data": "#composer-data",
            }
            if first in focus_target:
                self.query_one(focus_target[first]).focus()
            elif first == "ttl":
                self.query_one("#composer-ttl").focus()
            return
        if self.sending:
            return
        self.sending = True
        self.query_one("#composer-send", Button).disabled = True
        self.post_message(self.SendRequested(self, envelope))

    def action_close(self) -> None:
        # written here, not in a worker: the screen's workers end with it, and the next opening reads
        # the file at once (a draft saved by a thread that had not run yet came back as the old one)
        self._store_draft(self.form_values(), self._next_draft_generation())
        self.dismiss(None)

    def action_discard(self) -> None:
        """Forget the draft (the next opening starts afresh) and close."""
        self._delete_draft()
        self.dismiss(None)

    # ------------------------------------------------------------------ called by the app

    def show_send_error(self, message: str) -> None:
        """The hub refused the envelope: show why beside the form and keep every field as typed."""
        self.sending = False
        error = self.query_one("#composer-send-error", Static)
        error.update(f"Not sent: {humanize(message, namer_for(self.app))}")
        error.remove_class("-empty")
        self.validate_form()
        self._write_draft(self.form_values())
        self._dry_run_soon()

    def sent(self) -> None:
        """The hub admitted the envelope: forget the draft and close."""
        self.sending = False
        self._delete_draft()
        self.dismiss(None)

    @property
    def send_error(self) -> str:
        return str(self.query_one("#composer-send-error", Static).render())

    @property
    def dry_run_text(self) -> str:
        """The dry-run panel's text as shown (plain)."""
        return str(self.query_one("#composer-dry", Static).render())

    @property
    def dry_run_pending(self) -> bool:
        """A change is waiting for its dry run (the panel shows the previous one, dimmed)."""
        return self.query_one("#composer-dry-box").has_class("-stale")

    # ------------------------------------------------------------------ dry run

    def _runner(self) -> DryRunner | None:
        if self._dry_runner is not None:
            return self._dry_runner
        runner: Any = getattr(getattr(self.app, "source", None), "dry_run", None)
        return cast(DryRunner, runner) if callable(runner) else None

    def _dry_run_soon(self) -> None:
        """Run the dry run ``DRY_RUN_DELAY`` after the last change; the panel dims until then."""
        self._dry_generation += 1
        if self._dry_timer is not None:
            self._dry_timer.stop()
        self._dry_timer = self.set_timer(DRY_RUN_DELAY, self._dry_run_now, name="composer dry run")
        self.query_one("#composer-dry-box").add_class("-stale")

    def _dry_run_now(self) -> None:
        self._dry_timer = None
        envelope = self._envelope
        if envelope is None:
            first = next(iter(self.errors.values()), "the draft is incomplete")
            self._show_dry("invalid", Text.assemble(("The draft is not valid yet: ", "bold"), first))
            return
        runner = self._runner()
        if runner is None:
            self._show_dry(
                "unavailable", Text("No hub to ask: the dry run is not available here.", style="dim")
            )
            return
        self._run_dry(runner, envelope, self._dry_generation)

    def _dry_run_refresh(self) -> None:
        """The same draft again (the channel may have moved on), unless a change already waits for one."""
        if self._dry_timer is None and self._envelope is not None and not self.sending:
            runner = self._runner()
            if runner is not None:
                self._run_dry(runner, self._envelope, self._dry_generation)

    @work(exclusive=True, group="composer-dry-run")
    async def _run_dry(self, runner: DryRunner, envelope: Envelope, generation: int) -> None:
        try:
            dry = await runner(envelope)
        except (ProtocolError, AccessDeniedError) as exc:
            # a server refuses some posts before the hub's admission (an ``ag2.channel.*`` type, an
            # audience outside the channel); it refuses their dry run in the same words
            if generation == self._dry_generation:
                self.dry_result = None
                reason = humanize(str(exc), namer_for(self.app))
                refused = Text.assemble(("✗ Would be refused: ", "bold red"), reason)
                self._show_dry("refused", refused)
            return
        except Exception as exc:  # a lost connection, an older hub without the op: say so, keep composing
            if generation == self._dry_generation:
                reason = humanize(str(exc) or type(exc).__name__, namer_for(self.app))
                self._show_dry("failed", Text(f"The dry run could not run: {reason}", style="yellow"))
            return
        if generation != self._dry_generation:
            return  # the draft changed meanwhile; its own dry run follows
        self.dry_result = dry
        self._show_dry("admitted" if dry.admitted else "refused", dry_run_text(dry, namer_for(self.app)))

    def _show_dry(self, kind: str, text: Text) -> None:
        box = self.query_one("#composer-dry-box")
        if kind not in ("admitted", "refused"):
            self.dry_result = None
        titles = {
            "admitted": "Dry run · admitted",
            "refused": "Dry run · REFUSED",
        }
        box.border_title = titles.get(kind, "Dry run")
        box.set_class(kind == "admitted", "-admitted")
        box.set_class(kind == "refused", "-refused")
        box.remove_class("-stale")
        self.query_one("#composer-dry", Static).update(text)

    # ------------------------------------------------------------------ internals

    def _clear_send_error(self) -> None:
        error = self.query_one("#composer-send-error", Static)
        if not error.has_class("-empty"):
            error.update("")
            error.add_class("-empty")

    def _fill_channel(self, channel_id: str | None, *, restore: dict[str, Any] | None) -> None:
        audience = self.query_one("#composer-audience", SelectionList)
        audience.clear_options()
        causation = self.query_one("#composer-causation", Select)
        choice = self.channels.get(channel_id or "")
        if choice is None:
            causation.set_options([])
            return
        chosen = set(restore.get("audience") or []) if restore else set()
        audience.add_options(
            [Selection(name, agent_id, agent_id in chosen) for agent_id, name in choice.participants]
        )
        recent = list(self.recent_for(choice.channel_id))
        causation.set_options([(label, envelope_id) for envelope_id, label in recent])
        wanted = restore.get("causation_id") if restore else None
        if wanted and any(envelope_id == wanted for envelope_id, _ in recent):
            causation.value = wanted

    def _save_draft_soon(self) -> None:
        if self.draft_path is None:
            return
        self._write_draft(self.form_values())

    def _next_draft_generation(self) -> int:
        self._draft_generation += 1
        return self._draft_generation

    def _write_draft(self, values: dict[str, Any]) -> None:
        if self.draft_path is not None:
            self._write_draft_thread(values, self._next_draft_generation())

    @work(thread=True, group="composer-draft")
    def _write_draft_thread(self, values: dict[str, Any], generation: int) -> None:
        self._store_draft(values, generation, from_thread=True)

    def _store_draft(self, values: dict[str, Any], generation: int, *, from_thread: bool = False) -> None:
        """Write ``values`` unless a newer save (or a discard) already happened: saves overlap, and an
        older one landing last would bring back what the person had since changed or discarded."""
        if self.draft_path is None:
            return
        with self._draft_lock:
            if generation < self._draft_written:
                return
            self._draft_written = generation
            try:
                write_draft(self.draft_path, values)
            except OSError as exc:
                message = f"Could not save the draft to {self.draft_path}: {exc.strerror}."
                if from_thread:
                    self.app.call_from_thread(self.notify, message, severity="warning")
                else:
                    self.notify(message, severity="warning")

    def _delete_draft(self) -> None:
        if self.draft_path is None:
            return
        with self._draft_lock:
            self._draft_written = self._next_draft_generation()  # a save still in flight is older
            try:
                self.draft_path.unlink(missing_ok=True)
            except OSError:
                pass

    def _read_draft(self) -> dict[str, Any]:
        # A few hundred bytes read once when the screen opens; not worth a worker round-trip.
        if self.draft_path is None or not self.draft_path.exists():
            return {}
        try:
            data = json.loads(self.draft_path.read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}


# the draft's functions live in tui.screens.draft; the ones imported above stay importable from here
__all__ = ["ChannelChoice", "EnvelopeComposer", "refusal_sentence"]

"""The envelope detail screen: the exact JSON, who can see it, the envelope it answers, copy as JSON.

**o** follows the causation link: the envelope it answers takes this detail's place (the screen is
switched, not stacked), **b** (or backspace) walks back, and **Escape** closes the detail however many
links were followed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Label, Static, TextArea

from ag2net.envelope import Envelope
from ag2net.errors import NetworkError
from tui.formatting import envelope_json, event_family, preview, short_id
from tui.widgets.json_area import json_text_area
from tui.wording import app_labels

DetailState = tuple[Envelope, int | None, str, list[str], str | None]
"""What a detail shows: envelope, seq, channel label, participants, cause label (for going back)."""

FAMILY_VARIABLE = {
    "text": "$text-primary",
    "packet": "$text-secondary",
    "channel": "$text-muted",
    "task": "$text-warning",
    "expectation": "$text-error",
    "context": "$text-success",
    "custom": "$text-accent",
}


def visibility_names(
    envelope: Envelope, name_for: Callable[[str], str], participants: Sequence[str] | None
) -> tuple[str, list[str]]:
    """A sentence describing who may see ``envelope`` and the resolved names (sender first)."""
    sender = name_for(envelope.sender_id)
    if envelope.audience is None:
        if participants:
            names = [name_for(p) for p in participants]
            return "every participant (broadcast)", names
        return "every participant (broadcast)", [sender]
    names = [sender] + [name_for(a) for a in envelope.audience if a != envelope.sender_id]
    if not envelope.audience:
        return "only the sender (empty audience)", names
    return "the sender and the audience", names


class EnvelopeDetail(ModalScreen[None]):
    """One envelope in full. Posts ``OpenRequested`` to follow its causation link."""

    HELP = """\
## Envelope

The envelope exactly as stored in the WAL.

- **c** copies it as JSON to the clipboard.
- **o** opens the envelope this one replies to (its `causation_id`), in this screen.
- **b** (or backspace) goes back to the envelope you came from.
- **Escape** closes the detail.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="detail.close", tooltip="Close the detail"),
        Binding("c", "copy_json", "Copy JSON", id="detail.copy", tooltip="Copy the envelope as JSON"),
        Binding(
            "o",
            "open_causation",
            "Open cause",
            id="detail.cause",
            tooltip="Open the envelope this one answers",
        ),
        Binding(
            "b,backspace",
            "back",
            "Back",
            id="detail.back",
            tooltip="Back to the envelope opened before this one",
        ),
    ]

    DEFAULT_CSS = """
    EnvelopeDetail {
        align: center middle;
        & > #detail-frame {
            width: 90%;
            max-width: 130;
            height: 90%;
            border: round $primary;
            border-title-color: $text-primary;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #detail-fields { height: auto; margin-bottom: 1; }
        & .field-name { color: $text-muted; width: 14; }
        & .field-value { width: 1fr; }
        & .detail-row { height: 1; }
        & #detail-visibility { height: auto; margin-bottom: 1; }
        & #detail-cause { height: 1; margin-bottom: 1; }
        & #detail-cause Button { min-width: 0; height: 1; border: none; margin: 0 1 0 0; }
        & #detail-json { height: 1fr; border: none; }
        & #detail-hint { height: 1; color: $text-muted; }
        & #detail-edited { color: $text-warning; text-style: bold; }
        & Footer { dock: bottom; }
    }
    """

    class OpenRequested(Message):
        """Open another envelope by id (the causation link)."""

        def __init__(self, envelope_id: str, channel_id: str) -> None:
            super().__init__()
            self.envelope_id = envelope_id
            self.channel_id = channel_id

    def __init__(
        self,
        envelope: Envelope,
        *,
        seq: int | None = None,
        channel_label: str = "",
        name_for: Callable[[str], str] | None = None,
        participants: Sequence[str] | None = None,
        cause_label: str | None = None,
        history: Sequence[DetailState] = (),
        operator_note: str | None = None,
    ) -> None:
        super().__init__()
        self.operator_note = operator_note
        """What an operator did to this envelope at a breakpoint before it was admitted ("edited at a
        breakpoint by ana"), None when nothing."""
        self.envelope = envelope
        self.seq = seq
        self.channel_label = channel_label
        self.name_for = name_for or (lambda agent_id: agent_id)
        self.participants = list(participants or [])
        self.cause_label = cause_label
        self.history: list[DetailState] = list(history)
        """The envelopes this detail came from (``o``), the one to go back to last."""

    @property
    def json_text(self) -> str:
        return envelope_json(self.envelope)

    def compose(self) -> ComposeResult:
        env = self.envelope
        name_for = self.name_for
        with Vertical(id="detail-frame") as frame:
            seq = "" if self.seq is None else f"#{self.seq} "
            frame.border_title = f"Envelope {seq}· {env.event_type}"
            back = f" · {len(self.history)} back (b)" if self.history else ""
            frame.border_subtitle = f"{self.channel_label or short_id(env.channel_id)}{back}"
            with Vertical(id="detail-fields"):
                rows = [
                    ("channel", f"{self.channel_label or short_id(env.channel_id)}  ({env.channel_id})"),
                    ("sender", f"{name_for(env.sender_id)}  ({env.sender_id})"),
                    ("event type", env.event_type),
                    ("created", env.created_at or "—"),
                    ("envelope id", env.envelope_id or "—"),
                    ("priority", f"{env.priority}   depth {env.depth}   ttl {env.ttl_seconds or '—'}"),
                    ("task / trace", f"{env.task_id or '—'} / {env.trace_id or '—'}"),
                ]
                if self.operator_note:
                    rows.append(("operator", self.operator_note))
                for key, value in rows:
                    with Horizontal(classes="detail-row"):
                        yield Label(key, classes="field-name")
                        if key == "event type":
                            style = FAMILY_VARIABLE[event_family(value)]
                            yield Label(
                                Content.from_markup(f"[{style}]$value", value=value),
                                classes="field-value",
                                id="detail-type",
                            )
                        elif key == "operator":
                            yield Label(Text(value), classes="field-value", id="detail-edited")
                        else:
                            yield Label(Text(value), classes="field-value")
            sentence, names = visibility_names(env, name_for, self.participants)
            visibility = Text.assemble(("Visible to ", "dim"), (sentence, "bold"), ": ", ", ".join(names))
            yield Static(visibility, id="detail-visibility")
            with Horizontal(id="detail-cause"):
                if env.causation_id:
                    label = self.cause_label or short_id(env.causation_id, 12)
                    yield Button(
                        f"↳ in reply to {label}", id="detail-open-cause", variant="primary", compact=True
                    )
                else:
                    yield Label("Not a reply (no causation_id).", classes="field-name")
            yield json_text_area(
                self.json_text,
                read_only=True,
                show_line_numbers=True,
                soft_wrap=True,
                id="detail-json",
            )
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#detail-json", TextArea).focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "open_causation":
            return bool(self.envelope.causation_id)
        if action == "back":
            return bool(self.history)  # shown only when there is somewhere to go back to
        return True

    def action_close(self) -> None:
        """Close the detail, however many causation links were followed in it."""
        self.dismiss(None)

    def action_back(self) -> None:
        """Show the envelope this detail came from (``o`` went forward from it)."""
        if not self.history:
            return
        envelope, seq, label, participants, cause_label = self.history[-1]
        self._switch(
            EnvelopeDetail(
                envelope,
                seq=seq,
                channel_label=label,
                name_for=self.name_for,
                participants=participants,
                cause_label=cause_label,
                history=self.history[:-1],
            )
        )

    def show(self, envelope: Envelope, seq: int | None, channel_label: str = "") -> None:
        """Show ``envelope`` in this detail's place; **b** comes back to the one shown now."""
        here: DetailState = (self.envelope, self.seq, self.channel_label, self.participants, self.cause_label)
        self._switch(
            EnvelopeDetail(
                envelope,
                seq=seq,
                channel_label=channel_label or self._label_for(envelope.channel_id) or self.channel_label,
                name_for=self.name_for,
                participants=self.participants
                if envelope.channel_id == self.envelope.channel_id
                else self._participants_of(envelope.channel_id),
                cause_label=self._cause_label_for(envelope),
                history=[*self.history, here],
            )
        )

    def _switch(self, screen: EnvelopeDetail) -> None:
        if self.app.screen is self:
            self.app.switch_screen(screen)

    def _participants_of(self, channel_id: str) -> list[str]:
        participants: Any = getattr(getattr(self.app, "source", None), "participants", None)
        return [str(agent_id) for agent_id, _ in participants(channel_id)] if participants else []

    def _label_for(self, channel_id: str) -> str:
        return app_labels(self.app).get(channel_id, "")

    def _tail_row(self, envelope_id: str) -> object | None:
        tail = getattr(self.app, "tail", None)
        find = getattr(tail, "find_envelope", None)
        return find(envelope_id) if callable(find) else None

    def _cause_label_for(self, envelope: Envelope) -> str | None:
        if not envelope.causation_id:
            return None
        row = self._tail_row(envelope.causation_id)
        cause = getattr(row, "envelope", None)
        if not isinstance(cause, Envelope):
            return None
        return f"#{getattr(row, 'seq', '?')} {self.name_for(cause.sender_id)}: {preview(cause, 50)}"

    def action_copy_json(self) -> None:
        self.app.copy_to_clipboard(self.json_text)
        self.notify("Envelope copied to the clipboard as JSON.", timeout=3)

    def action_open_causation(self) -> None:
        """Open the envelope this one answers here (found in the tail, else read from the hub's WAL);
        an app that can do neither gets ``OpenRequested``."""
        cause_id = self.envelope.causation_id
        if not cause_id:
            return
        row = self._tail_row(cause_id)
        envelope = getattr(row, "envelope", None)
        if isinstance(envelope, Envelope):
            self.show(envelope, getattr(row, "seq", None))
            return
        source = getattr(self.app, "source", None)
        if source is not None and callable(getattr(source, "find_envelope", None)):
            self._fetch_cause(self.envelope.channel_id, cause_id)
            return
        self.post_message(self.OpenRequested(cause_id, self.envelope.channel_id))

    @work(group="detail-open", exclusive=True)
    async def _fetch_cause(self, channel_id: str, envelope_id: str) -> None:
        source: Any = getattr(self.app, "source", None)
        if source is None:
            return
        try:
            found = await source.find_envelope(channel_id, envelope_id)
        except (NetworkError, OSError, TimeoutError) as exc:  # the hub went away: say so, keep the screen
            self.notify(f"Could not read the envelope this one answers: {exc}", severity="warning")
            return
        if found is None:
            label = self.channel_label or short_id(channel_id)
            self.notify(
                f"The envelope this one answers ({envelope_id[:12]}…) is not in {label}'s WAL.",
                severity="warning",
            )
            return
        seq, envelope = found
        self.show(envelope, seq)

    @on(Button.Pressed, "#detail-open-cause")
    def _cause_pressed(self) -> None:
        self.action_open_causation()


__all__ = ["EnvelopeDetail", "visibility_names"]

"""The chat bar: speak into the selected channel as the human, ``@name`` completion, history on up/down.

Leading ``@name`` words address the message (its audience); no mention is a broadcast. When the hub
refuses (not your turn, closed channel) the reason shows beside the input and the text stays.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.suggester import Suggester
from textual.widgets import Input, Label

from tui.wording import humanize, namer_for


class MentionSuggester(Suggester):
    """Completes the ``@word`` being typed at the end of the input to a participant name."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)
        self.names: list[str] = []

    async def get_suggestion(self, value: str) -> str | None:
        head, at, partial = value.rpartition("@")
        if not at or " " in partial or (head and not head.endswith(" ")):
            return None
        lowered = partial.lower()
        for name in self.names:
            if name.lower().startswith(lowered) and name != partial:
                return f"{head}@{name} "
        return None


def split_mentions(text: str) -> tuple[list[str], str]:
    """Leading ``@name`` words become the audience; the rest is the message."""
    audience: list[str] = []
    words = text.strip().split(" ")
    while words and words[0].startswith("@") and len(words[0]) > 1:
        audience.append(words.pop(0)[1:].rstrip(",:"))
        while words and not words[0]:
            words.pop(0)
    return audience, " ".join(words).strip()


class ChatInput(Vertical):
    """One line to talk into the selected channel; a refusal shows under it, wrapped, never cut."""

    HELP = """\
## Chat

Type and press **Enter** to post an `ag2.msg.text` into the selected channel as yourself.

- Start with `@name` (**Tab** or → accepts the completion) to address only those participants.
- **Up/Down** walk through what you sent before; **Escape** goes back to the pane you came from.
- If the hub refuses (not your turn, channel closed) the reason shows under the line, naming
  participants by name, and your text stays.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "Previous", show=False, id="chat.history_prev"),
        Binding("down", "history(1)", "Next", show=False, id="chat.history_next"),
        Binding("tab", "accept_completion", "Complete", show=False, id="chat.complete"),
    ]

    DEFAULT_CSS = """
    ChatInput {
        height: auto;
        background: $panel;
        & #chat-line { height: 1; }
        & #chat-prompt { width: auto; padding: 0 1; color: $text-primary; text-style: bold; }
        & #chat-text { width: 1fr; border: none; height: 1; padding: 0; background: $panel; }
        & #chat-text:focus { background: $boost; }
        & #chat-reason { width: 1fr; height: auto; padding: 0 1; color: $text-error; }
        & #chat-reason.-empty { display: none; }
    }
    """

    channel_id: reactive[str | None] = reactive(None)
    channel_label: reactive[str] = reactive("")

    class Submitted(Message):
        """Send ``body`` into ``channel_id``; ``audience`` are names (empty: broadcast); ``text`` as typed."""

        def __init__(
            self, chat: ChatInput, channel_id: str, text: str, audience: list[str], body: str
        ) -> None:
            super().__init__()
            self.chat = chat
            self.channel_id = channel_id
            self.text = text
            self.audience = audience
            self.body = body

        @property
        def control(self) -> ChatInput:
            return self.chat

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.suggester = MentionSuggester()
        self.history: list[str] = []
        self._history_index: int | None = None
        """Where up/down stand in ``history`` (None: at the line being typed, below the newest)."""
        self._recalled: str | None = None
        """The line up/down put in the input; any other change starts the walk again from the newest."""
        self.sending = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="chat-line"):
            yield Label("no channel ›", id="chat-prompt")
            yield Input(
                placeholder="select a channel (Enter in the channels pane), then type here",
                suggester=self.suggester,
                compact=True,
                id="chat-text",
            )
        yield Label("", id="chat-reason", classes="-empty")

    @property
    def input(self) -> Input:
        return self.query_one("#chat-text", Input)

    @property
    def reason(self) -> str:
        label = self.query_one("#chat-reason", Label)
        return "" if label.has_class("-empty") else str(label.render())

    def set_channel(self, channel_id: str | None, label: str, names: Sequence[str]) -> None:
        if channel_id:
            # the label the channels pane shows (unique among the hub's channels), when the app knows it
            label = namer_for(self.app).labels.get(channel_id) or label
        self.channel_id = channel_id
        self.channel_label = label
        self.suggester.names = list(names)
        self._history_index = None
        self._recalled = None
        self.query_one("#chat-prompt", Label).update(f"{label} ›" if channel_id else "no channel ›")
        self.input.placeholder = (
            f"message {label} · @name to address someone"
            if channel_id
            else "select a channel (Enter in the channels pane), then type here"
        )
        self.show_reason("")

    def show_reason(self, reason: str) -> None:
        """Show why the last message was not sent (empty hides it); the text stays in the input.

        A hub refusal is reworded with names (``critic's turn — you can speak after critic``)."""
        if reason:
            reason = humanize(reason, namer_for(self.app, self.channel_id))
        label = self.query_one("#chat-reason", Label)
        label.update(reason)
        label.set_class(not reason, "-empty")
        self.sending = False

    def remember(self, text: str) -> None:
        """``text`` is the newest line of the history (sent, or refused and kept in the input)."""
        if not self.history or self.history[-1] != text:
            self.history.append(text)
        self._history_index = None
        self._recalled = None

    def sent(self, text: str) -> None:
        """The hub admitted ``text``: remember it and clear the input."""
        self.sending = False
        self.remember(text)
        if self.input.value.strip() == text.strip():
            self.input.value = ""
        self.show_reason("")

    @on(Input.Submitted, "#chat-text")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        text = event.value.strip()
        if not text or self.sending:
            return
        if self.channel_id is None:
            self.show_reason("Select a channel first (Enter on one in the channels pane).")
            return
        audience, body = split_mentions(text)
        if not body:
            self.show_reason("The message is empty after the @mentions; type what to say.")
            return
        unknown = [name for name in audience if name not in self.suggester.names]
        if unknown:
            self.show_reason(f"'{unknown[0]}' is not a participant of {self.channel_label}; check the name.")
            return
        self.sending = True
        self.remember(text)  # the newest line, even if the hub refuses it
        self.post_message(self.Submitted(self, self.channel_id, text, audience, body))

    @on(Input.Changed, "#chat-text")
    def _changed(self) -> None:
        if self.reason and not self.sending:
            self.show_reason("")
        if self._recalled is not None and self.input.value != self._recalled:
            # edited: the next up starts again from the newest line
            self._history_index = None
            self._recalled = None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "accept_completion":
            # only while a completion is offered: otherwise Tab moves the focus as everywhere else
            return self.input.has_focus and self.completion is not None
        return True

    @property
    def completion(self) -> str | None:
        """The ``@name`` completion offered at the end of the input, if any."""
        text = self.input
        suggestion = text._suggestion  # Textual keeps the offered completion here
        if suggestion and len(suggestion) > len(text.value) and suggestion.startswith(text.value):
            return suggestion
        return None

    def action_accept_completion(self) -> None:
        suggestion = self.completion
        if suggestion is not None:
            self.input.value = suggestion
            self.input.cursor_position = len(suggestion)

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._history_index is None:
            if step > 0:
                return
            self._history_index = len(self.history) - 1
            if self.history[-1] == self.input.value.strip() and len(self.history) > 1:
                self._history_index -= 1  # the refused line still in the input: up gives the one before
        else:
            self._history_index += step
        if self._history_index >= len(self.history):
            self._history_index = None
            self._recalled = None
            self.input.value = ""
            return
        self._history_index = max(0, self._history_index)
        self._recalled = self.history[self._history_index]
        self.input.value = self._recalled
        self.input.cursor_position = len(self.input.value)


__all__ = ["ChatInput", "MentionSuggester", "split_mentions"]

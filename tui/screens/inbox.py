""" "Waiting for you" (issue 24): one list of everything waiting on the person at the keyboard, answered in
place.

* held posts (a breakpoint or step mode holds them before they are appended): ``r`` release, ``e`` edit
  the envelope's JSON and release it, ``d`` drop it (with a reason the sender reads), ``a`` redirect it
  to another audience; ``p`` pauses (or resumes) the channel's expectation clock meanwhile;
* paused turns and approvals: ``enter`` opens the screen that decides them;
* the human's own turns in channels (with the ``reply_within`` countdown when the channel has one):
  ``enter`` goes to the channel's chat;
* invites, when invites are answered by hand: ``enter`` accepts, ``d`` declines.

The list follows the hub live (the app calls ``refresh_entries`` on every change).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Protocol

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Input, Label, OptionList, Static, TextArea
from textual.widgets.option_list import Option

from ag2net.envelope import Envelope
from ag2net.errors import NetworkError
from tui.formatting import audience_label, envelope_json, preview
from tui.models import Inbox, InboxEntry
from tui.widgets.json_area import json_text_area

KIND_MARK = {
    "held": "⏸ held",
    "turn": "◇ turn",
    "approval": "✋ approve",
    "your_turn": "✎ your turn",
    "invite": "✉ invite",
}
"""How each kind of entry starts its line."""

EMPTY = "Nothing waits for you. Breakpoints (b, or ctrl+p → Break when…) hold posts here."


class InboxHost(Protocol):
    """What the inbox needs of the workbench (``WorkbenchApp``)."""

    inbox: Inbox

    def now(self) -> float: ...

    def name_for(self, agent_id: str) -> str: ...

    def channel_label(self, channel_id: str) -> str: ...

    def audience_ids(self, channel_id: str, names: list[str]) -> tuple[list[str], str]: ...

    async def answer_entry(self, entry: InboxEntry, action: str, **fields: Any) -> None: ...

    def open_entry(self, entry: InboxEntry) -> None: ...

    async def toggle_expectations(self, channel_id: str) -> str: ...


def countdown(due: float | None, now: float, kind: str = "reply_within") -> str:
    """``reply_within: 42 s left`` (or ``… ran out``), '' when there is no deadline."""
    if due is None:
        return ""
    left = due - now
    if left <= 0:
        return f"{kind} ran out"
    return f"{kind}: {left:,.0f} s left"


def entry_line(entry: InboxEntry, host: InboxHost, now: float) -> Text:
    """One line of the list: the kind, who, where, what, and the countdown when there is one."""
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(f"{KIND_MARK.get(entry.kind, entry.kind):<11} ", "bold")
    who = host.name_for(entry.agent_id) if entry.agent_id else ""
    where = host.channel_label(entry.channel_id)
    if entry.kind == "held":
        seq = entry.would_be_seq
        text.append(f"#{seq} " if seq is not None else "")
        text.append(f"{who} ", "bold")
        text.append(f"{where} ", "dim")
        if entry.envelope is not None:
            text.append(preview(entry.envelope, 60))
    elif entry.kind == "turn":
        text.append(f"{who} ", "bold")
        text.append(f"{where} ", "dim")
        text.append("before its model call")
    elif entry.kind == "approval":
        tool = entry.item.detail.get("tool", "?") if entry.item is not None else "?"
        text.append(f"{who} ", "bold")
        text.append(f"{where} ", "dim")
        text.append(f"wants to run {tool}")
    elif entry.kind == "your_turn":
        text.append(f"{where} ", "dim")
        text.append("expects you to speak")
    else:
        text.append(f"{where} ", "dim")
        text.append(f"from {host.name_for(entry.envelope.sender_id)}" if entry.envelope else "")
    left = countdown(entry.due, now, entry.due_kind)
    if left:
        text.append(f" · {left}", "bold")
    if entry.refused:
        text.append(" · edit refused", "bold")
    return text


def entry_detail(entry: InboxEntry, host: InboxHost, now: float) -> Text:
    """What the pane below the list says of the entry under the cursor."""
    text = Text()
    env = entry.envelope
    if entry.kind == "held" and entry.item is not None:
        detail = entry.item.detail
        reason = "step mode" if detail.get("reason") == "step" else "a breakpoint"
        text.append(f"Held by {reason}", "bold")
        if entry.would_be_seq is not None:
            text.append(f"; it would be #{entry.would_be_seq} of {host.channel_label(entry.channel_id)}")
        text.append(".\n")
        if entry.refused:
            text.append(f"The last edit was refused: {entry.refused}\n", "bold red")
        for deadline in detail.get("deadlines") or []:
            if isinstance(deadline, dict):
                left = deadline.get("seconds_left")
                if isinstance(left, (int, float)):
                    left = max(0.0, left - (now - entry.seen_at))
                left_text = f"{left:,.0f} s left" if isinstance(left, (int, float)) else "running"
                text.append(f"Affects {deadline.get('kind', 'an expectation')}: {left_text}.\n")
    elif entry.kind in ("turn", "approval"):
        text.append("enter opens it: ", "bold")
        text.append("continue, edit, answer or skip." if entry.kind == "turn" else "approve, deny or edit.")
        text.append("\n")
    elif entry.kind == "your_turn":
        text.append("enter goes to the channel's chat.\n", "bold")
    elif entry.kind == "invite":
        text.append("enter accepts the invite, d declines it.\n", "bold")
    left = countdown(entry.due, now, entry.due_kind)
    if left and entry.kind != "held":  # a held post lists its deadlines above
        text.append(f"{left}.\n")
    if env is not None:
        text.append(f"{host.name_for(env.sender_id)} → {audience_label(env, host.name_for)}", "bold")
        text.append(f" · {env.event_type}\n")
        text.append(preview(env, 600))
    return text


class InboxScreen(ModalScreen[None]):
    """The list, the entry under the cursor, and its answers as keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q", "close", "Close", id="inbox.close"),
        Binding("enter", "open", "Open", id="inbox.open"),
        Binding("r", "release", "Release", id="inbox.release"),
        Binding("e", "edit", "Edit & release", id="inbox.edit"),
        Binding("d", "drop", "Drop", id="inbox.drop"),
        Binding("a", "redirect", "Redirect", id="inbox.redirect"),
        Binding("p", "pause_clock", "Pause clock", id="inbox.pause_clock", show=False),
    ]

    DEFAULT_CSS = """
    InboxScreen {
        align: center middle;
        background: $background 60%;
        & #inbox-box {
            width: 110;
            max-width: 100%;
            height: 90%;
            border: round $warning;
            border-title-color: $text-warning;
            border-title-style: bold;
            background: $surface;
            padding: 0 1;
        }
        & #inbox-list {
            height: 1fr; min-height: 3; border: none; padding: 0;
            text-wrap: nowrap; text-overflow: ellipsis;
        }
        & #inbox-detail { height: 7; border-top: solid $panel-lighten-2; }
        & #inbox-error { color: $text-error; height: auto; }
        & #inbox-error.-empty { display: none; }
    }
    Screen.-short InboxScreen #inbox-box { height: 100%; }
    """

    def __init__(self, host: InboxHost) -> None:
        super().__init__()
        self.host = host
        self._version = -1
        self._keys: list[str] = []

    def compose(self) -> ComposeResult:
        with Vertical(id="inbox-box") as box:
            box.border_title = "Waiting for you"
            yield OptionList(id="inbox-list")
            with VerticalScroll(id="inbox-detail", can_focus=False):
                yield Static("", id="inbox-detail-text")
            yield Label("", id="inbox-error", classes="-empty")
        yield Footer()

    def on_mount(self) -> None:
        self.refresh_entries()
        self.query_one("#inbox-list", OptionList).focus()
        self.set_interval(1.0, self._tick, name="inbox countdown")

    @property
    def option_list(self) -> OptionList:
        return self.query_one("#inbox-list", OptionList)

    @property
    def current(self) -> InboxEntry | None:
        lists = self.query("#inbox-list")  # none while the screen is torn down
        if not lists:
            return None
        index = lists.first(OptionList).highlighted
        if index is None or not 0 <= index < len(self._keys):
            return None
        return self.host.inbox.get(self._keys[index])

    def refresh_entries(self) -> None:
        """Show the inbox as it is now (the cursor stays on its entry while it is there)."""
        inbox = self.host.inbox
        options = self.option_list
        keep = self.current
        now = self.host.now()
        entries = inbox.entries()
        self._keys = [e.key for e in entries]
        self._version = inbox.version
        options.clear_options()
        if entries:
            options.add_options([Option(entry_line(e, self.host, now), id=e.key) for e in entries])
            index = self._keys.index(keep.key) if keep is not None and keep.key in self._keys else 0
            options.highlighted = index
        else:
            options.add_option(Option(EMPTY, disabled=True))
        box = self.query_one("#inbox-box")
        box.border_title = f"Waiting for you · {len(entries)}" if entries else "Waiting for you"
        self._show_detail()
        self.refresh_bindings()

    def _tick(self) -> None:
        if self._version != self.host.inbox.version:
            self.refresh_entries()
        elif any(e.due is not None for e in self.host.inbox.entries()):
            now = self.host.now()
            options = self.option_list
            for index, key in enumerate(self._keys):
                entry = self.host.inbox.get(key)
                if entry is not None and entry.due is not None:
                    options.replace_option_prompt_at_index(index, entry_line(entry, self.host, now))
            self._show_detail()

    def _show_detail(self) -> None:
        entry = self.current
        text = entry_detail(entry, self.host, self.host.now()) if entry is not None else Text("")
        self.query_one("#inbox-detail-text", Static).update(text)

    @on(OptionList.OptionHighlighted, "#inbox-list")
    def _highlighted(self) -> None:
        self._show_detail()
        self.refresh_bindings()

    @on(OptionList.OptionSelected, "#inbox-list")
    def _selected(self) -> None:
        self.action_open()

    def show_error(self, text: str) -> None:
        error = self.query_one("#inbox-error", Label)
        error.update(text)
        error.set_class(not text, "-empty")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        entry = self.current
        kind = entry.kind if entry is not None else ""
        if action in ("release", "edit", "redirect", "pause_clock"):
            return kind == "held"
        if action == "drop":
            return kind in ("held", "invite")
        if action == "open":
            return kind in ("turn", "approval", "your_turn", "invite")
        return True

    # ------------------------------------------------------------------ answers

    def action_close(self) -> None:
        self.dismiss(None)

    def action_open(self) -> None:
        entry = self.current
        if entry is None:
            return
        if entry.kind == "invite":
            self._answer(entry, "accept")
        elif entry.kind in ("turn", "approval", "your_turn"):
            self.host.open_entry(entry)

    def action_release(self) -> None:
        entry = self.current
        if entry is not None and entry.kind == "held":
            self._answer(entry, "release")

    def action_edit(self) -> None:
        entry = self.current
        if entry is None or entry.kind != "held" or entry.envelope is None:
            return

        async def submit(envelope: Envelope) -> None:
            await self.host.answer_entry(entry, "edit", envelope=envelope)

        self.app.push_screen(EditHeldScreen(entry.envelope, submit, refused=entry.refused))

    def action_drop(self) -> None:
        entry = self.current
        if entry is None or entry.kind not in ("held", "invite"):
            return
        action = "drop" if entry.kind == "held" else "decline"

        async def submit(reason: str) -> None:
            await self.host.answer_entry(entry, action, reason=reason)

        title = "Drop the held post" if entry.kind == "held" else "Decline the invite"
        prompt = "Why? The sender reads it (dropped at a breakpoint by you: REASON)."
        self.app.push_screen(AskScreen(title, prompt, "", submit, placeholder="reason"))

    def action_redirect(self) -> None:
        entry = self.current
        if entry is None or entry.kind != "held" or entry.envelope is None:
            return
        current = audience_label(entry.envelope, self.host.name_for)

        async def submit(names: str) -> None:
            ids, error = self.host.audience_ids(entry.channel_id, names.replace(",", " ").split())
            if error:
                raise ValueError(error)
            await self.host.answer_entry(entry, "redirect", audience=ids)

        prompt = "Send it to (names of the channel's participants, space-separated):"
        self.app.push_screen(AskScreen("Redirect the held post", prompt, current, submit))

    def action_pause_clock(self) -> None:
        entry = self.current
        if entry is not None:
            self._pause(entry.channel_id)

    @work(group="inbox-pause")
    async def _pause(self, channel_id: str) -> None:
        try:
            self.app.notify(await self.host.toggle_expectations(channel_id), timeout=4)
        except NetworkError as exc:
            self.show_error(str(exc))

    @work(group="inbox-answer")
    async def _answer(self, entry: InboxEntry, action: str) -> None:
        try:
            await self.host.answer_entry(entry, action)
        except NetworkError as exc:
            self.show_error(str(exc))
            return
        self.show_error("")
        self.refresh_entries()


class AskScreen(ModalScreen[bool]):
    """One line asked for (a drop's reason, a redirect's audience); Enter runs ``submit(text)``, whose
    refusal shows under the field; dismisses True once it went through."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel", id="inbox_ask.cancel")]

    DEFAULT_CSS = """
    AskScreen {
        align: center middle;
        background: $background 60%;
        & #ask-box {
            width: 70; max-width: 100%; height: auto; border: round $warning;
            border-title-color: $text-warning; background: $surface; padding: 0 1;
        }
        & #ask-prompt { width: 1fr; color: $text-muted; }
        & #ask-error { width: 1fr; color: $text-error; height: auto; }
    }
    """

    def __init__(
        self,
        title: str,
        prompt: str,
        value: str,
        submit: Callable[[str], Awaitable[None]],
        *,
        placeholder: str = "",
    ) -> None:
        super().__init__()
        self.title_text = title
        self.prompt = prompt
        self.value = value
        self.submit = submit
        self.placeholder = placeholder

    def compose(self) -> ComposeResult:
        with Vertical(id="ask-box") as box:
            box.border_title = self.title_text
            yield Label(self.prompt, id="ask-prompt")
            yield Input(self.value, placeholder=self.placeholder, id="ask-input")
            yield Label("", id="ask-error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#ask-input", Input).focus()

    def action_cancel(self) -> None:
        self.dismiss(False)

    @on(Input.Submitted, "#ask-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self._run(event.value.strip())

    @work(group="inbox-ask", exclusive=True)
    async def _run(self, text: str) -> None:
        try:
            await self.submit(text)
        except (NetworkError, ValueError) as exc:
            self.query_one("#ask-error", Label).update(str(exc))
            return
        self.dismiss(True)


class EditHeldScreen(ModalScreen[bool]):
    """The held envelope as JSON to edit; ``ctrl+s`` admits the edit in its place. A refused edit stays
    held and the refusal shows here (the form stays, with your text)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Release edited", id="inbox_edit.submit", priority=True),
        Binding("escape", "cancel", "Cancel", id="inbox_edit.cancel"),
    ]

    DEFAULT_CSS = """
    EditHeldScreen {
        align: center middle;
        background: $background 60%;
        & #edit-box {
            width: 110; max-width: 100%; height: 90%; border: round $warning;
            border-title-color: $text-warning; border-title-style: bold; background: $surface; padding: 0 1;
        }
        Screen.-short & #edit-box { height: 100%; }
        & #edit-json { height: 1fr; border: none; }
        & #edit-error { color: $text-error; height: auto; max-height: 4; }
    }
    """

    def __init__(
        self, envelope: Envelope, submit: Callable[[Envelope], Awaitable[None]], *, refused: str = ""
    ) -> None:
        super().__init__()
        self.envelope = envelope
        self.submit = submit
        self.refused = refused

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-box") as box:
            box.border_title = "Edit the held post · ctrl+s releases it edited"
            yield json_text_area(envelope_json(self.envelope), show_line_numbers=True, id="edit-json")
            yield Label(f"The last edit was refused: {self.refused}" if self.refused else "", id="edit-error")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#edit-json", TextArea).focus()

    @property
    def text(self) -> str:
        return self.query_one("#edit-json", TextArea).text

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_submit(self) -> None:
        try:
            data = json.loads(self.text)
            if not isinstance(data, dict):
                raise ValueError("the envelope must be a JSON object")
            envelope = Envelope.from_dict(data)
        except (ValueError, TypeError, KeyError) as exc:
            self.query_one("#edit-error", Label).update(f"Not an envelope: {exc}")
            return
        self._run(envelope)

    @work(group="inbox-edit", exclusive=True)
    async def _run(self, envelope: Envelope) -> None:
        try:
            await self.submit(envelope)
        except NetworkError as exc:
            self.query_one("#edit-error", Label).update(f"Refused, still held: {exc}")
            return
        self.dismiss(True)


__all__ = ["EMPTY", "AskScreen", "EditHeldScreen", "InboxHost", "InboxScreen", "countdown", "entry_line"]

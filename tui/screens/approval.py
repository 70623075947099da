"""A tool call waiting for approval (issue 24 part 4): the call, its arguments and the agent's reason, and
the person's answer.

``ApprovalScreen(item)`` takes a ``WaitingItem`` of kind ``approval`` (``detail``: ``tool``,
``arguments``, ``reason`` — the model's text beside the call —, ``call_id``) and answers with the keyword
arguments of ``answer_waiting`` (without ``item_id``):

* ``a`` (or ``y``) approve: the tool runs with these arguments: ``{"action": "approve"}``;
* ``d`` deny, with a reason (required; the tool returns it to the model), ``Enter`` or ``Ctrl+S`` sends:
  ``{"action": "deny", "reason": "..."}``;
* ``e`` edit the arguments (a JSON object, checked as it is typed), ``Ctrl+S`` runs the tool with them:
  ``{"action": "edit", "arguments": {...}}``;
* ``Escape`` goes back from the denial or the editor, and closes the screen from the call (``None``:
  nothing decided, the call keeps waiting).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.padding import Padding
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Input, Label, Static, TextArea

from ag2net.breakpoints import WaitingItem
from tui.screens.paused_turn import kind_of, parse_json, settled_text
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.json_area import json_text_area
from tui.wording import namer_for

VIEW, DENY, EDIT = "approval-call", "approval-deny", "approval-edit"
"""The screen's three modes (the ids of the ``ContentSwitcher``'s children)."""


def arguments_of(item: WaitingItem) -> dict[str, Any]:
    """The call's arguments as an object (JSON text is read; anything else is shown under ``value``)."""
    value = item.detail.get("arguments")
    if isinstance(value, str):
        try:
            value = json.loads(value or "{}")
        except ValueError:
            return {"value": value}
    if value is None:
        return {}
    return value if isinstance(value, dict) else {"value": value}


def check_arguments(text: str) -> dict[str, Any]:
    """The edited arguments: a JSON object; ``ValueError`` with one sentence naming the field."""
    value = parse_json(text, "arguments")
    if not isinstance(value, dict):
        raise ValueError(f'arguments must be a JSON object ({{"name": value, …}}), got {kind_of(value)}')
    return value


class ApprovalScreen(ModalScreen[dict[str, Any] | None]):
    """A tool call waiting for a person; dismisses with ``answer_waiting``'s keyword arguments (minus
    ``item_id``) or None (closed, nothing decided)."""

    HELP = """\
## Approval

An agent wants to run a tool that needs a person's approval first. Above: the tool, the arguments the
model chose and the agent's reason (the model's text beside the call).

- **a** (or **y**) approves: the tool runs with these arguments.
- **d** denies: type why (required); **Enter** sends. The tool returns `denied by you: REASON` to the model.
- **e** edits the arguments (a JSON object); **Ctrl+S** runs the tool with them. A mistake is named
  under the editor and nothing is sent.
- **Escape** goes back from the denial or the editor; from the call it closes this screen and the call
  keeps waiting in the inbox.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "a,y", "approve", "Approve", id="approval.approve", tooltip="Run the tool with these arguments"
        ),
        Binding(
            "d", "mode('approval-deny')", "Deny", id="approval.deny", tooltip="Refuse the call, with a reason"
        ),
        Binding(
            "e", "mode('approval-edit')", "Edit arguments", id="approval.edit", tooltip="Change the arguments"
        ),
        Binding("ctrl+s", "send_denial", "Send denial", id="approval.send_denial", priority=True),
        Binding("ctrl+s", "apply", "Run with these", id="approval.apply", priority=True),
        Binding("escape", "close", "Close", id="approval.close", tooltip="Close; the call keeps waiting"),
        Binding("escape", "mode('approval-call')", "Back", id="approval.back", tooltip="Back to the call"),
    ]

    DEFAULT_CSS = """
    ApprovalScreen {
        align: center middle;
        background: $background 60%;
        & > #approval-frame {
            width: 100%;
            max-width: 120;
            height: 1fr;
            border: round $warning;
            border-title-color: $text-warning;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
            padding: 0 1;
        }
        & #approval-head { width: 1fr; height: auto; color: $text-muted; margin-bottom: 1; }
        & #approval-settled { width: 1fr; height: auto; color: $text-error; text-style: bold; }
        & #approval-settled.-empty { display: none; }
        & #approval-modes { height: 1fr; }
        & #approval-call { height: 1fr; scrollbar-size-vertical: 1; }
        & #approval-call:focus { background-tint: $primary 6%; }
        & #approval-body { width: 1fr; height: auto; }
        & #approval-deny, & #approval-edit { height: 1fr; }
        & .approval-label { color: $text-muted; width: 1fr; height: auto; }
        & #approval-deny-reason { margin-top: 1; }
        & #approval-edit-arguments { height: 1fr; min-height: 4; }
        & .approval-error { color: $text-error; width: 1fr; height: auto; }
        & .approval-error.-empty { display: none; }
        & Input, & TextArea { background: $boost; }
        & FittedFooter { dock: bottom; }
    }
    """

    def __init__(
        self,
        item: WaitingItem,
        *,
        name_for: Callable[[str], str] | None = None,
        channel_label: str | None = None,
    ) -> None:
        super().__init__()
        self.item = item
        self.tool = str(item.detail.get("tool") or "?")
        self.arguments = arguments_of(item)
        self.reason = str(item.detail.get("reason") or "")
        self.call_id = str(item.detail.get("call_id") or "")
        self._name_for = name_for
        self._channel_label = channel_label
        self.mode = VIEW
        self.error = ""
        """The denial's or the editor's current mistake, as shown ('' when none; tests read it)."""
        self.settled = ""
        """Why nothing can be decided any more (answered elsewhere, cancelled); '' while it waits."""

    # ------------------------------------------------------------------ names

    def agent_name(self) -> str:
        if self._name_for is not None:
            return self._name_for(self.item.agent_id) or self.item.agent_id
        return namer_for(self.app).agent(self.item.agent_id)

    def channel_name(self) -> str:
        return self._channel_label or namer_for(self.app).channel(self.item.channel_id)

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        name = self.agent_name()
        with Vertical(id="approval-frame") as frame:
            frame.border_title = f"Approve {self.tool}? · {name}"
            since = self.item.created_at[11:19]
            frame.border_subtitle = self.channel_name() + (f" · waiting since {since}" if since else "")
            yield Static(self._head(name), id="approval-head")
            yield Static("", id="approval-settled", classes="-empty")
            with ContentSwitcher(initial=VIEW, id="approval-modes"):
                with VerticalScroll(id=VIEW, can_focus=True):
                    yield Static(id="approval-body")
                with Vertical(id=DENY):
                    yield Label(
                        f"Why not? The tool returns this to {name}'s model instead of running (required).",
                        classes="approval-label",
                    )
                    yield Input(
                        placeholder="e.g. not on the production database",
                        compact=True,
                        id="approval-deny-reason",
                    )
                    yield Label("", classes="approval-error -empty", id="approval-deny-error")
                with Vertical(id=EDIT):
                    yield Label(f"{self.tool}'s arguments (a JSON object)", classes="approval-label")
                    yield json_text_area(
                        json.dumps(self.arguments, indent=2, ensure_ascii=False, default=str),
                        tab_behavior="focus",
                        show_line_numbers=True,
                        compact=True,
                        id="approval-edit-arguments",
                    )
                    yield Label("", classes="approval-error -empty", id="approval-edit-error")
        yield FittedFooter()

    def _head(self, name: str) -> Text:
        head = Text()
        head.append(name, style="bold")
        head.append(" wants to run ")
        head.append(self.tool, style="bold")
        if self.call_id:
            head.append(f" · call id {self.call_id[:24]}", style="dim")
        return head

    def on_mount(self) -> None:
        self.query_one("#approval-body", Static).update(self._body())
        self.query_one(f"#{VIEW}").focus()

    def _color(self, name: str, fallback: str) -> str:
        try:
            return self.app.theme_variables.get(name, fallback)
        except Exception:
            return fallback

    def _body(self) -> RenderableType:
        """The call as the tool gets it, then the agent's reason."""
        accent = f"bold {self._color('text-primary', 'blue')} underline"
        call = Text.assemble((self.tool, f"bold {self._color('text-warning', 'yellow')}"), "(…) with")
        arguments = JSONHighlighter()(
            Text(json.dumps(self.arguments, indent=2, sort_keys=True, ensure_ascii=False, default=str))
        )
        arguments.overflow = "fold"
        reason: RenderableType = (
            Text(self.reason)
            if self.reason.strip()
            else Text("(the model gave no text beside the call)", "dim italic")
        )
        return Group(
            Text("Arguments", style=accent),
            call,
            Padding(arguments, (0, 0, 0, 2)),
            Text(f"\n{self.agent_name()}'s reason", style=accent),
            Padding(reason, (0, 0, 0, 2)),
        )

    # ------------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Each mode's keys only: the call's a / d / e / Escape (close); the denial's Ctrl+S and Escape
        (back); the editor's Ctrl+S (run with these) and Escape (back). Once the item is settled
        elsewhere, only Escape (close)."""
        if self.settled:
            return action == "close"
        if action in ("approve", "close"):
            return self.mode == VIEW
        if action == "mode":
            target = parameters[0] if parameters else VIEW
            return (self.mode != VIEW) if target == VIEW else (self.mode == VIEW)
        if action == "send_denial":
            return self.mode == DENY
        if action == "apply":
            return self.mode == EDIT
        return True

    def action_mode(self, mode: str) -> None:
        self.mode = mode
        self.query_one("#approval-modes", ContentSwitcher).current = mode
        self._show_error("")
        focus = {VIEW: f"#{VIEW}", DENY: "#approval-deny-reason", EDIT: "#approval-edit-arguments"}[mode]
        self.query_one(focus).focus()
        self.refresh_bindings()

    def item_changed(self, item: WaitingItem) -> None:
        """The inbox saw ``item`` change (observe kind ``waiting``): once it is answered elsewhere or
        cancelled, the screen says so and takes no decision any more (Escape closes)."""
        if item.item_id != self.item.item_id:
            return
        self.item = item
        self.settled = settled_text(item, self._names)
        if not self.settled:
            return
        if self.mode != VIEW:
            self.action_mode(VIEW)
        line = self.query_one("#approval-settled", Static)
        line.update(self.settled)
        line.remove_class("-empty")
        self.refresh_bindings()

    def _names(self, agent_id: str) -> str:
        if self._name_for is not None:
            return self._name_for(agent_id) or agent_id
        return namer_for(self.app).agent(agent_id)

    def action_approve(self) -> None:
        if self.settled:
            return
        self.dismiss({"action": "approve"})

    def action_close(self) -> None:
        self.dismiss(None)

    # ------------------------------------------------------------------ deny

    @on(Input.Submitted, "#approval-deny-reason")
    def _reason_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_send_denial()

    @on(Input.Changed, "#approval-deny-reason")
    def _reason_changed(self) -> None:
        if self.error:
            self._show_error("")

    def action_send_denial(self) -> None:
        if self.settled:
            return
        reason = self.query_one("#approval-deny-reason", Input).value.strip()
        if not reason:
            self._show_error(
                f"A denial needs a reason: type why {self.tool} should not run (the model reads it), or "
                "press Escape to go back"
            )
            return
        self.dismiss({"action": "deny", "reason": reason})

    # ------------------------------------------------------------------ edit

    def edited(self) -> dict[str, Any]:
        """The edited arguments as ``answer_waiting`` takes them; ``ValueError`` names what is wrong."""
        arguments = check_arguments(self.query_one("#approval-edit-arguments", TextArea).text)
        if arguments == self.arguments:
            raise ValueError(
                "Nothing was changed: edit the arguments, or press Escape and a to approve them as they are"
            )
        return {"action": "edit", "arguments": arguments}

    @on(TextArea.Changed, "#approval-edit-arguments")
    def _arguments_changed(self, event: TextArea.Changed) -> None:
        if self.mode != EDIT:
            return
        try:
            check_arguments(event.text_area.text)
        except ValueError as exc:
            self._show_error(str(exc))
        else:
            self._show_error("")

    def action_apply(self) -> None:
        if self.settled:
            return
        try:
            decision = self.edited()
        except ValueError as exc:
            self._show_error(str(exc))
            return
        self.dismiss(decision)

    def _show_error(self, message: str) -> None:
        self.error = message
        selector = "approval-deny-error" if self.mode == DENY else "approval-edit-error"
        for label in self.query(".approval-error").results(Label):
            shown = message if label.id == selector else ""
            label.update(shown)
            label.set_class(not shown, "-empty")


__all__ = ["ApprovalScreen", "arguments_of", "check_arguments"]

"""A paused turn (issue 24 part 3): the exact request an agent is about to send its model, and the person's
decision about it.

``PausedTurnScreen(item)`` takes a ``WaitingItem`` of kind ``turn``. Its ``detail["request"]`` holds the
system prompt, the projected messages (event dicts, ``ag2net.events``), the turn's inputs, the tools
offered (name, description, parameters), the model and the token budget. The screen shows all of it in
one scrolling pane and answers with the keyword arguments of ``answer_waiting`` (without ``item_id``):

* ``c`` continue as is: ``{"action": "continue"}``;
* ``e`` edit this turn's system prompt and messages (a JSON list of events, checked as it is typed; a bad
  edit is one sentence naming the field, e.g. ``messages[2].type``), ``Ctrl+S`` applies:
  ``{"action": "edit", "messages": [...], "system_prompt": "..."}`` with only what was changed;
* ``a`` answer in the agent's place (the text is posted as the agent's reply), ``Ctrl+S`` sends:
  ``{"action": "answer", "text": "..."}``;
* ``s`` skip the turn (nothing is posted): ``{"action": "skip"}``;
* ``Escape`` goes back from the editor or the answer, and closes the screen (``None``: nothing decided,
  the turn stays paused) from the request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import ContentSwitcher, Label, Static, TextArea

from ag2net.agent.budget import PARTS, ContextWindow, TurnBudget, context_window, model_name_of
from ag2net.agent.tokens import default_counter
from ag2net.breakpoints import WaitingItem
from ag2net.events import BaseEvent, ModelRequest, event_from_dict, part_from_dict, part_text
from tui.widgets.budget_bar import BudgetBar
from tui.widgets.fitted_footer import FittedFooter
from tui.widgets.json_area import json_text_area
from tui.widgets.projection_diff import event_body, role_of
from tui.widgets.projection_render import ProjectionPainter
from tui.wording import namer_for, plural

VIEW, EDIT, ANSWER = "turn-request", "turn-edit", "turn-answer"
"""The screen's three modes (the ids of the ``ContentSwitcher``'s children)."""

#: Each event type's fields: (required, optional), as ``ag2net.events.event_from_dict`` reads them.
EVENT_FIELDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "model_request": (("parts",), ()),
    "model_message": (("content",), ("metadata",)),
    "compaction_summary": (("summary", "event_count"), ()),
    "tool_call": (("name",), ("arguments", "id")),
    "tool_result": (("parent_id", "name", "result"), ("is_error",)),
}
_STRINGS = {"content", "summary", "name", "arguments", "id", "parent_id", "result"}
PART_FIELDS: dict[str, tuple[str, ...]] = {
    "text_input": ("content", "metadata"),
    "data_input": ("data", "metadata"),
}


def kind_of(value: Any) -> str:
    """A JSON value's kind in words: ``an object``, ``a list``, ``a string``, ``a number``…"""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, (int, float)):
        return "a number"
    return "null"


def parse_json(text: str, field: str) -> Any:
    """``text`` as JSON; ``ValueError`` with one sentence naming ``field`` and where the mistake is."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"{field}: not valid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); fix it there"
        ) from None


def _check_part(part: Any, where: str) -> None:
    if not isinstance(part, dict):
        raise ValueError(f'{where} must be an object like {{"type": "text_input", "content": "…"}}')
    kind = part.get("type", "text_input")
    if kind not in PART_FIELDS:
        raise ValueError(f"{where}.type {kind!r} is not a part type; use text_input or data_input")
    unknown = sorted(set(part) - {"type", *PART_FIELDS[kind]})
    if unknown:
        raise ValueError(
            f"{where} has an unknown field {unknown[0]!r}; a {kind} has {', '.join(PART_FIELDS[kind])}"
        )
    if kind == "text_input" and not isinstance(part.get("content"), str):
        raise ValueError(f"{where}.content must be a string, got {kind_of(part.get('content'))}")
    if kind == "data_input" and "data" not in part:
        raise ValueError(f"{where}.data is missing; a data_input carries its data")


def check_event(event: Any, where: str) -> None:
    """``event`` is an event dict ``event_from_dict`` reads as meant; else ``ValueError`` naming the field."""
    if not isinstance(event, dict):
        raise ValueError(f'{where} must be an object with a "type", got {kind_of(event)}')
    kind = event.get("type")
    if kind not in EVENT_FIELDS:
        shown = "missing" if kind is None else f"{kind!r} is not an event type"
        raise ValueError(f"{where}.type {shown}; use one of {', '.join(sorted(EVENT_FIELDS))}")
    required, optional = EVENT_FIELDS[kind]
    for name in required:
        if name not in event:
            raise ValueError(f"{where}.{name} is missing; a {kind} needs {', '.join(required)}")
    unknown = sorted(set(event) - {"type", *required, *optional})
    if unknown:
        raise ValueError(
            f"{where} has an unknown field {unknown[0]!r}; a {kind} has {', '.join((*required, *optional))}"
        )
    for name in _STRINGS & set(event):
        if not isinstance(event[name], str):
            hint = " (the call's arguments as JSON text)" if name == "arguments" else ""
            raise ValueError(f"{where}.{name} must be a string{hint}, got {kind_of(event[name])}")
    if kind == "tool_call" and not event["name"].strip():
        raise ValueError(f"{where}.name is empty; name the tool that is called")
    if kind == "compaction_summary" and (
        isinstance(event["event_count"], bool) or not isinstance(event["event_count"], int)
    ):
        raise ValueError(f"{where}.event_count must be a whole number, got {kind_of(event['event_count'])}")
    if "metadata" in event and not isinstance(event["metadata"], dict):
        raise ValueError(f"{where}.metadata must be an object, got {kind_of(event['metadata'])}")
    if "is_error" in event and not isinstance(event["is_error"], bool):
        raise ValueError(f"{where}.is_error must be true or false, got {kind_of(event['is_error'])}")
    if kind == "model_request":
        if not isinstance(event["parts"], list):
            raise ValueError(f"{where}.parts must be a list of parts, got {kind_of(event['parts'])}")
        for index, part in enumerate(event["parts"]):
            _check_part(part, f"{where}.parts[{index}]")


def check_messages(text: str) -> list[dict[str, Any]]:
    """The edited ``messages``: a JSON list of event dicts; ``ValueError`` names the first wrong field."""
    value = parse_json(text, "messages")
    if not isinstance(value, list):
        raise ValueError(f"messages must be a JSON list of events ([…]), got {kind_of(value)}")
    for index, event in enumerate(value):
        check_event(event, f"messages[{index}]")
        event_from_dict(event)  # what the agent's runtime will do with it
    return value


def settled_text(item: WaitingItem, name_for: Callable[[str], str]) -> str:
    """What became of an item that is no longer waiting (answered elsewhere, or its waiter went away);
    '' while it waits."""
    if item.state == "waiting":
        return ""
    answer = item.answer or {}
    by = str(answer.get("by") or "")
    action = str(answer.get("action") or "")
    if item.state == "answered":
        who = f" by {name_for(by) or by}" if by else ""
        what = f" ({action})" if action else ""
        return f"Already answered{who}{what}: nothing more can be decided here. Escape closes."
    return f"No longer waiting ({item.state}): the agent stopped waiting or the hub stopped. Escape closes."


def request_of(item: WaitingItem) -> dict[str, Any]:
    """The model request a paused turn holds (``{}`` when the item carries none)."""
    request = item.detail.get("request")
    return request if isinstance(request, dict) else {}


def _window(model: str | None, given: dict[str, Any], agents: Sequence[str]) -> ContextWindow:
    """The window the agent gave, else the one the workbench knows for its model or name."""
    window = given.get("window")
    if isinstance(window, int) and not isinstance(window, bool):
        return ContextWindow(window, str(given.get("window_source") or "given by the agent"), model)
    try:
        return context_window(model_name_of(model), agents=agents)
    except ValueError:  # a malformed AG2NET_CONTEXT_WINDOWS: the counts are shown anyway
        return ContextWindow(None, "not configured", model)


def budget_from(
    request: dict[str, Any], events: Sequence[BaseEvent], agents: Sequence[str] = ()
) -> TurnBudget | None:
    """The request's ``token_budget`` (the counts per part: ``system``, ``history``, ``tools``, ``input``,
    and ``method``) as a ``TurnBudget`` against the model's window (the one given, else the one known for
    the model or for ``agents``' names); with no budget, an estimate of the request itself; None when the
    budget has another shape (it is then shown as it is)."""
    given = request.get("token_budget")
    model = request.get("model") if isinstance(request.get("model"), str) else None
    if isinstance(given, dict) and all(isinstance(given.get(p), int) for p in PARTS):
        return TurnBudget(
            **{p: int(given[p]) for p in PARTS},
            window=_window(model, given, agents),
            method=str(given.get("method") or "heuristic"),
        )
    if given not in (None, {}):
        return None
    counter = default_counter()  # counted here, at once: no tiktoken download on the screen's way up
    inputs = [part_from_dict(p) for p in request.get("inputs") or () if isinstance(p, dict)]
    return TurnBudget(
        system=counter.count_system(str(request.get("system_prompt") or "")),
        history=counter.count_events(events),
        tools=counter.count_tools([t for t in request.get("tools") or () if isinstance(t, dict)]),
        input=counter.count_events([ModelRequest(inputs)]) if inputs else 0,
        window=_window(model, {}, agents),
        method=counter.method,
    )


class RequestPainter(ProjectionPainter):
    """The request a paused turn would send, drawn like the agent view draws a projection."""

    def role_style(self, role: str) -> str:
        if role == "input":  # this turn's new input reaches the model as a user message
            return super().role_style("user")
        if role == "not an event":
            return f"bold {self.color('text-error', 'red')}"
        return super().role_style(role)

    def messages(self, system_prompt: str, messages: Sequence[Any]) -> RenderableType:
        """The system prompt and each message as the agent view shows one (an event that does not read
        as one is shown as its JSON, marked)."""
        counter = default_counter()
        blocks: list[RenderableType] = []
        events = [_event_or_none(m) for m in messages]
        legend = self.legend([system_prompt, *(event_body(e) for e in events if e is not None)])
        if legend is not None:
            blocks.append(Padding(legend, (0, 0, 1, 0)))
        if system_prompt:
            blocks.append(self.block("", "system", Text(system_prompt), counter.count_system(system_prompt)))
        else:
            blocks.append(Text("(no system prompt)", style="dim italic"))
        for index, (raw, event) in enumerate(zip(messages, events, strict=True), 1):
            if event is None:
                body = Text(json.dumps(raw, ensure_ascii=False, default=str), overflow="fold")
                blocks.append(self.block(str(index), "not an event", body, 0))
            else:
                body = Text(event_body(event))
                blocks.append(self.block(str(index), role_of(event), body, counter.count_event(event)))
        if not messages:
            blocks.append(Text("(no messages: the projection is empty)", style="dim italic"))
        return Group(*blocks)

    def inputs(self, inputs: Sequence[Any]) -> RenderableType | None:
        parts = [part_from_dict(p) for p in inputs if isinstance(p, dict)]
        if not parts:
            return None
        text = "\n".join(part_text(p) for p in parts)
        tokens = default_counter().count_events([ModelRequest(parts)])
        return self.block("", "input", Text(text), tokens)

    def heading(self, title: str, note: str = "") -> Text:
        text = Text()
        text.append(f"\n{title}", style=f"bold {self.color('text-primary', 'blue')} underline")
        if note:
            text.append(f"  {note}", style="dim")
        return text

    def request(self, request: dict[str, Any], budget: TurnBudget | None) -> RenderableType:
        """Budget, system prompt and messages, the turn's input, the tools offered."""
        parts: list[RenderableType] = []
        given = request.get("token_budget")
        if budget is not None:
            title = "token budget" if isinstance(given, dict) and given else "token budget (estimated here)"
            parts.append(BudgetBar(budget, self.budget_colors(), title=title))
            limit = given.get("max_tokens") if isinstance(given, dict) else None
            if isinstance(limit, int):
                parts.append(Text(f"the reply may take up to {limit} tokens (the model's max_tokens)", "dim"))
        elif given not in (None, {}):
            parts.append(
                Text(f"token budget: {json.dumps(given, default=str)}", style="dim", overflow="fold")
            )
        messages = request.get("messages") or []
        messages = messages if isinstance(messages, list) else [messages]
        parts.append(
            self.heading(
                "System prompt and messages", f"{plural(len(messages), 'message')}, as the model gets them"
            )
        )
        parts.append(self.messages(str(request.get("system_prompt") or ""), messages))
        inputs = self.inputs(request.get("inputs") or [])
        if inputs is not None:
            parts.append(self.heading("This turn's input"))
            parts.append(inputs)
        tools = [t for t in request.get("tools") or () if isinstance(t, dict)]
        parts.append(self.heading("Tools"))
        gated = [str(t.get("name")) for t in tools if t.get("requires_approval")]
        if gated:
            parts.append(Text(f"need a person's approval before they run: {', '.join(gated)}", "dim italic"))
        parts.append(self.tools(tools))
        return Group(*parts)


def _event_or_none(message: Any) -> BaseEvent | None:
    try:
        return event_from_dict(message) if isinstance(message, dict) else None
    except (KeyError, TypeError, ValueError):
        return None


class PausedTurnScreen(ModalScreen[dict[str, Any] | None]):
    """A paused turn's request; dismisses with ``answer_waiting``'s keyword arguments (minus ``item_id``)
    or None (closed, nothing decided)."""

    HELP = """\
## Paused turn

The agent stopped before calling its model (a turn breakpoint). Above is exactly what it would send:
the system prompt, the projected messages, this turn's input, the tools offered and the token budget.

- **c** continues the turn as it is.
- **e** edits this turn's system prompt and messages (a JSON list of events); **Ctrl+S** applies, the
  turn record says it was edited by you. A mistake is named under the editor and nothing is sent.
- **a** answers in the agent's place: what you type is posted as its reply (no model call).
- **s** skips the turn: nothing is posted.
- **Escape** goes back from the editor or the answer; from the request it closes this screen and the
  turn stays paused in the inbox.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "decide('continue')", "Continue", id="turn.continue", tooltip="Run the turn as it is"),
        Binding(
            "e", "mode('turn-edit')", "Edit", id="turn.edit", tooltip="Edit the system prompt and messages"
        ),
        Binding(
            "a", "mode('turn-answer')", "Answer", id="turn.answer", tooltip="Answer in the agent's place"
        ),
        Binding("s", "decide('skip')", "Skip", id="turn.skip", tooltip="Skip the turn: nothing is posted"),
        Binding("ctrl+s", "apply", "Apply edit", id="turn.apply", priority=True),
        Binding("ctrl+s", "send_answer", "Send answer", id="turn.send", priority=True),
        Binding("escape", "close", "Close", id="turn.close", tooltip="Close; the turn stays paused"),
        Binding("escape", "mode('turn-request')", "Back", id="turn.back", tooltip="Back to the request"),
    ]

    DEFAULT_CSS = """
    PausedTurnScreen {
        align: center middle;
        background: $background 60%;
        & > #turn-frame {
            width: 100%;
            max-width: 140;
            height: 1fr;
            border: round $warning;
            border-title-color: $text-warning;
            border-title-style: bold;
            border-subtitle-color: $text-muted;
            background: $surface;
            padding: 0 1;
        }
        & #turn-head { width: 1fr; height: auto; color: $text-muted; }
        & #turn-settled { width: 1fr; height: auto; color: $text-error; text-style: bold; }
        & #turn-settled.-empty { display: none; }
        & #turn-modes { height: 1fr; }
        & #turn-request { height: 1fr; scrollbar-size-vertical: 1; }
        & #turn-request:focus { background-tint: $primary 6%; }
        & #turn-request-body { width: 1fr; height: auto; }
        & #turn-edit, & #turn-answer { height: 1fr; }
        & .turn-label { color: $text-muted; width: 1fr; height: 1; }
        & #turn-edit-system { height: 5; }
        & #turn-edit-messages { height: 1fr; min-height: 4; }
        & #turn-answer-text { height: 1fr; min-height: 3; }
        & #turn-answer-context { width: 1fr; height: auto; max-height: 4; color: $text-muted; }
        & .turn-error { color: $text-error; width: 1fr; height: auto; }
        & .turn-error.-empty { display: none; }
        & TextArea { background: $boost; }
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
        self.request = request_of(item)
        messages = self.request.get("messages") or []
        self.messages: list[Any] = messages if isinstance(messages, list) else [messages]
        self.system_prompt = str(self.request.get("system_prompt") or "")
        self._name_for = name_for
        self._channel_label = channel_label
        self.mode = VIEW
        self.error = ""
        """The editor's or the answer's current mistake, as shown ('' when none; tests read it)."""
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
        with Vertical(id="turn-frame") as frame:
            frame.border_title = f"⏸ Paused turn · {name}"
            since = self.item.created_at[11:19]
            frame.border_subtitle = self.channel_name() + (f" · paused since {since}" if since else "")
            yield Static(self._head(name), id="turn-head")
            yield Static("", id="turn-settled", classes="-empty")
            with ContentSwitcher(initial=VIEW, id="turn-modes"):
                with VerticalScroll(id=VIEW, can_focus=True):
                    yield Static(id="turn-request-body")
                with Vertical(id=EDIT):
                    yield Label("System prompt", classes="turn-label")
                    yield TextArea(self.system_prompt, soft_wrap=True, compact=True, id="turn-edit-system")
                    yield Label("Messages (a JSON list of events)", classes="turn-label")
                    yield json_text_area(
                        json.dumps(self.messages, indent=2, ensure_ascii=False, default=str),
                        tab_behavior="focus",
                        show_line_numbers=True,
                        compact=True,
                        id="turn-edit-messages",
                    )
                    yield Label("", classes="turn-error -empty", id="turn-edit-error")
                with Vertical(id=ANSWER):
                    yield Static(self._answering(), id="turn-answer-context")
                    yield Label(
                        f"{name}'s reply (Ctrl+S posts it as {name}'s; no model call)", classes="turn-label"
                    )
                    yield TextArea("", soft_wrap=True, compact=True, id="turn-answer-text")
                    yield Label("", classes="turn-error -empty", id="turn-answer-error")
        yield FittedFooter()

    def _head(self, name: str) -> Text:
        model = self.request.get("model")
        tools = self.request.get("tools") or []
        head = Text()
        head.append(name, style="bold")
        head.append(" is about to call ")
        head.append(str(model) if model else "its model", style="bold")
        count = len(tools) if isinstance(tools, list) else 0
        head.append(f": {plural(len(self.messages), 'message')}, {plural(count, 'tool')} offered")
        return head

    def _answering(self) -> Text:
        """What the answer replies to: the turn's input, else the last message (cut to a few lines)."""
        parts = [part_from_dict(p) for p in self.request.get("inputs") or () if isinstance(p, dict)]
        last = "\n".join(part_text(p) for p in parts)
        if not last:
            events = [e for e in (_event_or_none(m) for m in self.messages) if e is not None]
            last = event_body(events[-1], 400) if events else ""
        text = Text()
        text.append("replying to: ", style="bold")
        text.append(last or "(nothing: the turn has no input)", style="" if last else "dim italic")
        return text

    def on_mount(self) -> None:
        painter = RequestPainter(self._color, self._names)
        events = [e for e in (_event_or_none(m) for m in self.messages) if e is not None]
        body = painter.request(
            self.request, budget_from(self.request, events, [self.agent_name(), self.item.agent_id])
        )
        self.query_one("#turn-request-body", Static).update(body)
        self.query_one(f"#{VIEW}").focus()

    def _color(self, name: str, fallback: str) -> str:
        try:
            return self.app.theme_variables.get(name, fallback)
        except Exception:
            return fallback

    def _names(self, agent_id: str) -> str:
        if self._name_for is not None:
            return self._name_for(agent_id) or agent_id
        return namer_for(self.app).agent(agent_id)

    # ------------------------------------------------------------------ keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Each mode's keys only: the request's c / e / a / s / Escape (close); the editor's Ctrl+S
        (apply) and Escape (back); the answer's Ctrl+S (send) and Escape (back). Once the item is
        settled elsewhere, only Escape (close)."""
        if self.settled:
            return action == "close"
        if action in ("decide", "close"):
            return self.mode == VIEW
        if action == "mode":
            target = parameters[0] if parameters else VIEW
            return (self.mode != VIEW) if target == VIEW else (self.mode == VIEW)
        if action == "apply":
            return self.mode == EDIT
        if action == "send_answer":
            return self.mode == ANSWER
        return True

    def action_mode(self, mode: str) -> None:
        self.mode = mode
        self.query_one("#turn-modes", ContentSwitcher).current = mode
        self._show_error("")
        focus = {VIEW: f"#{VIEW}", EDIT: "#turn-edit-messages", ANSWER: "#turn-answer-text"}[mode]
        self.query_one(focus).focus()
        if mode == EDIT:
            self._validate()
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
        line = self.query_one("#turn-settled", Static)
        line.update(self.settled)
        line.remove_class("-empty")
        self.refresh_bindings()

    def action_decide(self, action: str) -> None:
        if self.settled:
            return
        self.dismiss({"action": action})

    def action_close(self) -> None:
        self.dismiss(None)

    # ------------------------------------------------------------------ the edit

    def edited(self) -> dict[str, Any]:
        """The edit as ``answer_waiting`` takes it: what changed of messages and system prompt;
        ``ValueError`` names a wrong field, or says nothing was changed."""
        messages = check_messages(self.query_one("#turn-edit-messages", TextArea).text)
        system = self.query_one("#turn-edit-system", TextArea).text
        decision: dict[str, Any] = {"action": "edit"}
        if messages != self.messages:
            decision["messages"] = messages
        if system != self.system_prompt:
            decision["system_prompt"] = system
        if len(decision) == 1:
            raise ValueError(
                "Nothing was changed: edit the messages or the system prompt, or press Escape and c to "
                "continue the turn as it is"
            )
        return decision

    def _validate(self) -> None:
        try:
            check_messages(self.query_one("#turn-edit-messages", TextArea).text)
        except ValueError as exc:
            self._show_error(str(exc))
        else:
            self._show_error("")

    @on(TextArea.Changed, "#turn-edit-messages")
    def _messages_changed(self) -> None:
        if self.mode == EDIT:
            self._validate()

    @on(TextArea.Changed, "#turn-answer-text")
    def _answer_changed(self) -> None:
        if self.error:
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

    # ------------------------------------------------------------------ the answer

    def action_send_answer(self) -> None:
        if self.settled:
            return
        text = self.query_one("#turn-answer-text", TextArea).text
        if not text.strip():
            self._show_error(
                f"The answer is empty: type the reply {self.agent_name()} should post, or press Escape "
                "to go back"
            )
            return
        self.dismiss({"action": "answer", "text": text})

    def _show_error(self, message: str) -> None:
        self.error = message
        selector = "#turn-answer-error" if self.mode == ANSWER else "#turn-edit-error"
        for label in self.query(".turn-error").results(Label):
            shown = message if f"#{label.id}" == selector else ""
            label.update(shown)
            label.set_class(not shown, "-empty")


__all__ = [
    "EVENT_FIELDS",
    "PausedTurnScreen",
    "RequestPainter",
    "budget_from",
    "check_event",
    "check_messages",
    "kind_of",
    "parse_json",
    "request_of",
    "settled_text",
]

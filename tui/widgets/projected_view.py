"""The agent view pane: what one participant's LLM sees of a channel, under the view in force or another.

Switching the view here changes only this preview, never the channel. The pane also shows the tools
offered (with their JSON schemas), token estimates per part, and the participant's last turn: the
history it actually received beside a re-projection now, with differences marked per event.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Label, Markdown, Select, Static, TabbedContent, TabPane

from ag2net.agent.tokens import default_counter
from ag2net.errors import NetworkError
from ag2net.events import (
    BaseEvent,
    CompactionSummary,
    ModelMessage,
    ModelRequest,
    ToolCallEvent,
    ToolResultEvent,
    event_text,
    part_text,
)
from ag2net.views import registered_views, view_from_spec
from tui.models import ProjectionData

IN_FORCE = "__in_force__"


ProjectionLoader = Callable[[str, str, "dict[str, Any] | None"], Awaitable[ProjectionData]]


def role_of(event: BaseEvent) -> str:
    """The chat role an event plays for the model."""
    if isinstance(event, ModelRequest):
        return "user"
    if isinstance(event, ModelMessage):
        return "assistant"
    if isinstance(event, CompactionSummary):
        return "summary"
    if isinstance(event, ToolCallEvent):
        return "tool call"
    if isinstance(event, ToolResultEvent):
        return "tool result"
    return type(event).__name__


def spec_text(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "—"
    params = " ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec.get('name', '?')}{(' ' + params) if params else ''}"


@dataclass(slots=True)
class DiffRow:
    """One line of the turn diff: ``mark`` is ' ' (same), '~' (changed), '-' (only then) or '+' (only now)."""

    mark: str
    then: BaseEvent | None
    now: BaseEvent | None


def diff_events(then: Sequence[BaseEvent], now: Sequence[BaseEvent]) -> list[DiffRow]:
    """A per-event diff of two histories (role and text compared)."""
    left = [f"{role_of(e)}\x00{event_text(e)}" for e in then]
    right = [f"{role_of(e)}\x00{event_text(e)}" for e in now]
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows.extend(
                DiffRow(" ", then[i], now[j]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
        elif op == "delete":
            rows.extend(DiffRow("-", then[i], None) for i in range(i1, i2))
        elif op == "insert":
            rows.extend(DiffRow("+", None, now[j]) for j in range(j1, j2))
        else:
            pairs = min(i2 - i1, j2 - j1)
            rows.extend(DiffRow("~", then[i1 + k], now[j1 + k]) for k in range(pairs))
            rows.extend(DiffRow("-", then[i], None) for i in range(i1 + pairs, i2))
            rows.extend(DiffRow("+", None, now[j]) for j in range(j1 + pairs, j2))
    return rows


class ProjectedView(Vertical):
    """Pick a participant and a view; see the projection, tools, tokens and the last turn's diff."""

    HELP = """\
## Agent view

What the selected participant's LLM receives on this channel: the projected history (role per
event, `[name]:` prefixes as the view writes them, the compaction summary), the tools offered with
their JSON schemas, and token estimates.

- **View**: try any registered view (and `recent_n`). This changes the **preview only**; the
  channel keeps the view in force.
- **Last turn**: the history the model actually got at its last turn beside a re-projection
  of the same WAL now with the view selected here; `~` changed, `-` only then, `+` only now.
- **r** reloads.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "reload", "Reload", id="view.reload", tooltip="Re-project now"),
    ]

    DEFAULT_CSS = """
    ProjectedView {
        height: 1fr;
        & #pv-controls { height: auto; }
        & #pv-controls > Vertical { height: auto; width: 1fr; }
        & #pv-controls > #pv-recent-box { width: 12; }
        & .pv-label { color: $text-muted; }
        & #pv-status { color: $text-muted; height: auto; padding: 0 1; }
        & #pv-status.-switched { color: $text-warning; }
        & #pv-error { color: $text-error; height: auto; padding: 0 1; }
        & #pv-error.-empty { display: none; }
        & #pv-tokens { height: auto; padding: 0 1; color: $text-secondary; }
        & TabbedContent { height: 1fr; }
        & TabPane { padding: 0; }
        & VerticalScroll { height: 1fr; }
        & #pv-tools { padding: 0 1; }
    }
    """

    channel_id: reactive[str | None] = reactive(None, init=False)
    participant_id: reactive[str | None] = reactive(None, init=False)

    class Loaded(Message):
        """A projection finished loading (tests and the status bar listen)."""

        def __init__(self, view: ProjectedView, data: ProjectionData) -> None:
            super().__init__()
            self.view = view
            self.data = data

    def __init__(
        self,
        loader: ProjectionLoader | None = None,
        *,
        name_for: Callable[[str], str] | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.loader = loader
        self.name_for = name_for or (lambda agent_id: agent_id)
        self.data: ProjectionData | None = None
        self.turn_summary = ""
        self._participants: list[tuple[str, str]] = []
        self._quiet = False

    def compose(self) -> ComposeResult:
        with Horizontal(id="pv-controls"):
            with Vertical():
                yield Label("Participant", classes="pv-label")
                yield Select([], prompt="pick a participant", compact=True, id="pv-participant")
            with Vertical():
                yield Label("View (preview only)", classes="pv-label")
                yield Select(
                    self._view_options(), value=IN_FORCE, allow_blank=False, compact=True, id="pv-view"
                )
            with Vertical(id="pv-recent-box"):
                yield Label("recent_n", classes="pv-label")
                yield Input(placeholder="—", compact=True, id="pv-recent", type="integer")
        yield Static("Select a channel to see what its participants' LLMs see.", id="pv-status")
        yield Static("", id="pv-error", classes="-empty")
        yield Static("", id="pv-tokens")
        with TabbedContent(id="pv-tabs"):
            with TabPane("Projection", id="pv-tab-history"), VerticalScroll():
                yield Static("", id="pv-history")
            with TabPane("Tools", id="pv-tab-tools"), VerticalScroll():
                yield Markdown("", id="pv-tools")
            with TabPane("Last turn", id="pv-tab-turn"), VerticalScroll():
                yield Static("", id="pv-turn")

    @staticmethod
    def _view_options() -> list[tuple[str, str]]:
        return [("in force", IN_FORCE), *((name, name) for name in registered_views())]

    # ------------------------------------------------------------------ inputs

    def set_channel(self, channel_id: str | None, participants: Sequence[tuple[str, str]]) -> None:
        """Show ``channel_id``; ``participants`` are (agent_id, name). Picks the first agent (not a human)."""
        self._participants = list(participants)
        select = self.query_one("#pv-participant", Select)
        self._quiet = True
        try:
            select.set_options([(name, agent_id) for agent_id, name in self._participants])
            keep = (
                self.participant_id if any(a == self.participant_id for a, _ in self._participants) else None
            )
            chosen = keep or (self._participants[0][0] if self._participants else None)
            if chosen is not None:
                select.value = chosen
        finally:
            self._quiet = False
        self.channel_id = channel_id
        self.participant_id = chosen
        self.reload()

    def select_participant(self, agent_id: str) -> None:
        self.query_one("#pv-participant", Select).value = agent_id

    def switch_view(self, name: str | None, recent_n: int | None = None) -> None:
        """Preview with view ``name`` (None: the view in force) and optional ``recent_n``."""
        self._quiet = True
        try:
            self.query_one("#pv-recent", Input).value = "" if recent_n is None else str(recent_n)
            self.query_one("#pv-view", Select).value = name or IN_FORCE
        finally:
            self._quiet = False
        self.reload()

    def selected_spec(self) -> dict[str, Any] | None:
        """The view spec being previewed (None: the one in force); raises ``ValueError`` for bad input."""
        name = self.query_one("#pv-view", Select).value
        if name in (IN_FORCE, Select.NULL):
            return None
        spec: dict[str, Any] = {"name": str(name)}
        recent = self.query_one("#pv-recent", Input).value.strip()
        if recent:
            try:
                spec["recent_n"] = int(recent)
            except ValueError:
                raise ValueError(f"recent_n must be a whole number, got {recent!r}") from None
        elif str(name) in ("windowed_summary", "named_windowed_summary"):
            spec["recent_n"] = 10
        return spec

    @on(Select.Changed, "#pv-participant")
    def _participant_changed(self, event: Select.Changed) -> None:
        if self._quiet or event.value is Select.NULL:
            return
        self.participant_id = str(event.value)
        self.reload()

    @on(Select.Changed, "#pv-view")
    def _view_changed(self) -> None:
        if not self._quiet:
            self.reload()

    @on(Input.Submitted, "#pv-recent")
    @on(Input.Blurred, "#pv-recent")
    def _recent_changed(self) -> None:
        if not self._quiet:
            self.reload()

    def action_reload(self) -> None:
        self.reload()

    # ------------------------------------------------------------------ loading

    def reload(self) -> None:
        if self.loader is None or not self.channel_id or not self.participant_id:
            return
        try:
            spec = self.selected_spec()
            if spec is not None:
                view_from_spec(spec)
        except (ValueError, NetworkError) as exc:
            self._show_error(str(exc))
            return
        self._show_error("")
        self._load(self.channel_id, self.participant_id, spec)

    @work(exclusive=True, group="projection")
    async def _load(self, channel_id: str, participant_id: str, spec: dict[str, Any] | None) -> None:
        assert self.loader is not None
        try:
            data = await self.loader(channel_id, participant_id, spec)
        except NetworkError as exc:
            if self.is_mounted:
                self._show_error(str(exc))
            return
        if not self.is_mounted or channel_id != self.channel_id or participant_id != self.participant_id:
            return
        self.show(data)

    def _show_error(self, message: str) -> None:
        error = self.query_one("#pv-error", Static)
        error.update(message)
        error.set_class(not message, "-empty")

    # ------------------------------------------------------------------ rendering

    def _color(self, name: str, fallback: str) -> str:
        try:
            return self.app.theme_variables.get(name, fallback)
        except Exception:  # no app yet (unit use)
            return fallback

    def show(self, data: ProjectionData) -> None:
        """Render ``data`` into the status line, tokens, projection, tools and last turn tabs."""
        self.data = data
        preview = data.preview
        switched = preview.view != data.in_force
        status = self.query_one("#pv-status", Static)
        who = self.name_for(data.participant_id)
        if switched:
            status.update(
                f"{who} · in force: {spec_text(data.in_force)} · previewing: {spec_text(preview.view)} "
                "(preview only — the channel keeps its view)"
            )
        else:
            status.update(
                f"{who} · view in force: {spec_text(preview.view)} · WAL {preview.wal_length} envelopes"
                + (" · turn records private (not an operator)" if preview.turns_private else "")
            )
        status.set_class(switched, "-switched")
        tokens = preview.tokens
        self.query_one("#pv-tokens", Static).update(
            f"tokens ≈ system {tokens.get('system', 0)} · history {tokens.get('history', 0)} · "
            f"tools {tokens.get('tools', 0)} · total {tokens.get('total', sum(tokens.values()))}"
            f"  ({preview.token_method})"
        )
        self.query_one("#pv-history", Static).update(
            self._history_table(preview.system_prompt, preview.history)
        )
        self.query_one("#pv-tools", Markdown).update(self._tools_markdown(preview.tools))
        self.query_one("#pv-turn", Static).update(self._turn_renderable(data))
        self.post_message(self.Loaded(self, data))

    def _role_style(self, role: str) -> str:
        colors = {
            "system": self._color("text-warning", "yellow"),
            "user": self._color("text-primary", "blue"),
            "assistant": self._color("text-success", "green"),
            "summary": self._color("text-accent", "magenta"),
            "tool call": self._color("text-secondary", "cyan"),
            "tool result": self._color("text-secondary", "cyan"),
        }
        return f"bold {colors.get(role, 'white')}"

    def _history_table(self, system_prompt: str, history: Sequence[BaseEvent]) -> RenderableType:
        """One block per event: a header line (index, role, tokens) and the content indented below."""
        counter = default_counter()
        if not history and not system_prompt:
            return Text(
                "Nothing to project yet: no visible envelope renders for this participant.", style="dim"
            )
        blocks: list[RenderableType] = []
        if system_prompt:
            blocks.append(self._block("", "system", Text(system_prompt), counter.count_system(system_prompt)))
        for index, event in enumerate(history, 1):
            blocks.append(
                self._block(str(index), role_of(event), self._event_text(event), counter.count_event(event))
            )
        return Group(*blocks)

    def _block(self, index: str, role: str, content: Text, tokens: int) -> RenderableType:
        head = Text()
        if index:
            head.append(f"#{index} ", style="dim")
        head.append(role, style=self._role_style(role))
        head.append(f"  ≈{tokens} tok", style="dim")
        return Group(head, Padding(content, (0, 0, 0, 2)))

    @staticmethod
    def _event_text(event: BaseEvent, limit: int = 4000) -> Text:
        if isinstance(event, ModelRequest):
            body = "\n".join(part_text(p) for p in event.parts)
        elif isinstance(event, CompactionSummary):
            body = f"{event.summary}  ({event.event_count} elided)"
        else:
            body = event_text(event)
        if len(body) > limit:
            body = body[:limit] + f"… ({len(body) - limit} more characters)"
        return Text(body)

    @staticmethod
    def _tools_markdown(tools: Sequence[dict[str, Any]]) -> str:
        if not tools:
            return "_No tools offered to this participant on this turn._"
        counter = default_counter()
        parts = [f"**{len(tools)} tools offered** (≈ {counter.count_tools(tools)} tokens)\n"]
        for schema in tools:
            fn = schema.get("function", schema)
            name = fn.get("name", "?")
            description = (fn.get("description") or "").strip().splitlines()
            parameters = json.dumps(fn.get("parameters", {}), indent=2, sort_keys=True)
            parts.append(f"### `{name}`  ·  ≈ {counter.count_tools([schema])} tokens\n")
            if description:
                parts.append(description[0] + "\n")
            parts.append(f"```json\n{parameters}\n```\n")
        return "\n".join(parts)

    def _turn_renderable(self, data: ProjectionData) -> RenderableType:
        turn = data.turn
        if turn is None and data.preview.turns_private:
            self.turn_summary = "turns private"
            return Text(
                "Turn records are private to each agent's own connection and to operators, and this "
                "workbench is not an operator of the hub: attach with --operator-token to see this "
                "participant's turns (system prompt and tools included).",
                style="dim",
            )
        if turn is None:
            self.turn_summary = "no turn"
            return Text("No recorded turn for this participant on this channel yet.", style="dim")
        header = Text()
        header.append("Last turn ", style="bold")
        header.append(f"{turn.started_at[11:23]} · {turn.duration_ms:.0f} ms · view {spec_text(turn.view)}")
        if turn.error:
            header.append(f"\nerror: {turn.error}", style=self._color("text-error", "red"))
        reply = Text.assemble(("\nreply: ", "bold"), turn.reply if turn.reply is not None else "(none)")
        calls = Text()
        for call in turn.tool_calls:
            mark = "✗" if call.get("is_error") else "✓"
            calls.append(
                f"\n  {mark} {call.get('name')}({json.dumps(call.get('arguments'), default=str)[:120]})"
            )
        tokens = " · ".join(f"{k} {v}" for k, v in turn.tokens.items())
        token_line = Text(f"tokens: {tokens} ({turn.token_method})", style="dim")
        inputs = Text.assemble(("\ninput: ", "bold"), " ".join(part_text(p) for p in turn.inputs)[:500])
        now = data.replay if data.replay is not None else data.preview.history
        now_label = spec_text(data.preview.view)
        rows = diff_events(turn.history, now)
        changed = sum(1 for r in rows if r.mark != " ")
        table = Table(expand=True, show_edge=False, box=None, padding=(0, 1))
        table.add_column("", width=1, no_wrap=True)
        table.add_column(f"at turn time ({spec_text(turn.view)})", ratio=1, overflow="fold")
        table.add_column(f"re-projected now ({now_label})", ratio=1, overflow="fold")
        mark_style = {
            "~": self._color("text-warning", "yellow"),
            "-": self._color("text-error", "red"),
            "+": self._color("text-success", "green"),
            " ": "dim",
        }
        for row in rows:
            style = mark_style[row.mark]
            cells = []
            for event in (row.then, row.now):
                if event is None:
                    cells.append(Text(""))
                else:
                    text = Text(f"{role_of(event)}: ", self._role_style(role_of(event)))
                    text.append_text(self._event_text(event, 600))
                    if row.mark != " ":
                        text.stylize(f"on {self._color('surface-lighten-1', '#333333')}")
                    cells.append(text)
            table.add_row(Text(row.mark, style=f"bold {style}"), *cells)
        self.turn_summary = (
            f"{changed} of {len(rows)} events differ" if changed else f"identical: {len(rows)} events"
        )
        summary = Text(
            "\n" + self.turn_summary,
            style=f"bold {mark_style['~'] if changed else mark_style['+']}",
        )
        parts: list[RenderableType] = [header, inputs, reply]
        if turn.tool_calls:
            parts.append(calls)
        parts += [token_line, summary, table]
        return Group(*parts)


__all__ = ["DiffRow", "ProjectedView", "ProjectionData", "diff_events", "role_of", "spec_text"]

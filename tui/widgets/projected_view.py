"""The agent view pane: what one participant's LLM sees of a channel, under the view in force or another.

Switching the view here changes only this preview, never the channel. The pane also shows the tools
offered (with their JSON schemas, wrapped), token estimates per part, every recorded turn of the
participant on the channel (the history it actually received beside a re-projection now, with
differences marked per event), and a comparison of any two of its turns (projection, system prompt and
tools offered). Agent ids that a projection carries as the model got them (a compaction summary names
speakers by id) are shown as they are, with a legend naming them.

What it compares is in ``projection_diff.py`` and how it draws it in ``projection_render.py``; this
module is the pane: its pickers, loading, and which tab shows what.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Protocol

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.events import Resize
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input, Label, Select, Static, TabbedContent, TabPane

from ag2net.agent.budget import ContextWindow, context_window, counter_for, model_name_of, turn_budget
from ag2net.client.turns import TurnRecord
from ag2net.errors import NetworkError
from ag2net.events import (
    BaseEvent,
)
from ag2net.views import registered_views, view_from_spec
from tui.formatting import id_legend
from tui.models import ProjectionData
from tui.widgets.budget_bar import BudgetBar
from tui.widgets.cost_view import CostView
from tui.widgets.projection_diff import (
    DiffRow,
    ToolDiff,
    diff_events,
    diff_tools,
    event_body,
    role_of,
    spec_text,
    turn_label,
)
from tui.widgets.projection_render import ProjectionPainter, shown_turn

IN_FORCE = "__in_force__"
REFRESH_DELAY = 0.4
"""Seconds of quiet before the view re-projects after activity in its channel or a new turn."""
COMPACT_BELOW = 26
"""Below this many rows the header folds to three lines (controls without labels; status beside the
budget bar, no separate token line; tabs without their underline): at 80x24 the projection gets 14 of
the pane's 19 rows instead of 9."""
SCROLL_KEYS = ("up", "down", "pageup", "pagedown", "home", "end")
"""Keys that scroll the shown tab from anywhere in the pane (its own fields keep the ones they use)."""


class PaneSelect(Select[str], inherit_bindings=False):
    """A compact picker that opens on Enter or Space only (Select's own also open it on up / down):
    up / down scroll the pane it sits in, as they do everywhere else in it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter,space", "show_overlay", "Show menu", show=False),
    ]


class ProjectionLoader(Protocol):
    """``HubSource.load_projection``: the projection now, the turns, and turn ``turn_id`` re-projected."""

    def __call__(
        self,
        channel_id: str,
        participant_id: str,
        spec: dict[str, Any] | None,
        /,
        *,
        turn_id: str | None = None,
    ) -> Awaitable[ProjectionData]: ...


class ProjectedView(Vertical):
    """Pick a participant and a view; see the projection, tools, tokens, its turns, and compare two turns."""

    HELP = """\
## Agent view

What the selected participant's LLM receives on this channel: the projected history (role per
event, `[name]:` prefixes as the view writes them, the compaction summary), the tools offered with
their JSON schemas, and token estimates. Agent ids that the model gets as ids (a compaction summary
names speakers by id) are shown as they are, with a legend naming them.

- **View**: try any registered view (and `recent_n`). This changes the **preview only**; the
  channel keeps the view in force.
- **Turns**: every recorded turn of the participant here, *turn k of n*; **[** / **]** step to
  the previous / next one. Each shows the history the model got then beside a re-projection of the
  same WAL now with the view selected here; `~` changed, `-` only then, `+` only now.
- **Compare**: pick two turns (**d** compares the shown turn with the one before) to see what
  changed in the projection, the system prompt and the tools offered.
- **Budget**: the next turn's and the shown turn's tokens (system / history / tools / input) against
  the model's context window (from its passport's model, or `AG2NET_CONTEXT_WINDOWS=name=tokens,…`),
  marked *estimate* unless tiktoken counted them; at 80% of the window a warning.
- **r** reloads (the view also follows new envelopes and turns by itself).
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("r", "reload", "Reload", id="view.reload", tooltip="Re-project now"),
        Binding(
            "left_square_bracket",
            "turn(-1)",
            "Prev turn",
            id="view.turn_prev",
            tooltip="Show the participant's previous turn",
        ),
        Binding(
            "right_square_bracket",
            "turn(1)",
            "Next turn",
            id="view.turn_next",
            tooltip="Show the participant's next turn",
        ),
        Binding(
            "d", "compare", "Compare", id="view.compare", tooltip="Compare the shown turn with the one before"
        ),
        *(
            Binding(key, f"scroll_shown('{key}')", key, show=False, id=f"view.scroll_{key}")
            for key in SCROLL_KEYS
        ),
        Binding(
            "F",
            "fork_turn",
            "Fork here…",
            show=False,
            id="view.fork",
            tooltip="Fork the channel at the shown turn's input and replay it with changes",
        ),
    ]

    DEFAULT_CSS = """
    ProjectedView {
        height: 1fr;
        & #pv-controls { height: auto; }
        & #pv-controls > Vertical { height: auto; width: 1fr; }
        & #pv-controls > #pv-recent-box { width: 12; }
        & .pv-label {
            color: $text-muted;
            width: 100%;
            padding-right: 1;  /* a gap before the next picker's label in a narrow pane */
            text-wrap: nowrap;
            text-overflow: ellipsis;
        }
        & #pv-status { color: $text-muted; height: auto; padding: 0 1; }
        & #pv-status.-switched { color: $text-warning; }
        & #pv-error { color: $text-error; height: auto; padding: 0 1; }
        & #pv-error.-empty { display: none; }
        & #pv-tokens { height: auto; padding: 0 1; color: $text-secondary; }
        & #pv-budget { height: auto; padding: 0 1; }
        & #pv-budget.-empty { display: none; }
        & TabbedContent { height: 1fr; }
        & TabPane { padding: 0; }
        & VerticalScroll { height: 1fr; }
        & #pv-header { height: auto; }
        & VerticalScroll:focus { background-tint: $primary 8%; }
        &.-compact #pv-header { layout: grid; grid-size: 2; grid-columns: 48 1fr; grid-rows: 1; }
        &.-compact #pv-controls .pv-label { display: none; }
        &.-compact #pv-controls > Vertical { width: 20; }
        &.-compact #pv-controls > #pv-recent-box { width: 8; }
        &.-compact #pv-status { height: 1; text-wrap: nowrap; text-overflow: ellipsis; }
        &.-compact #pv-tokens { display: none; }
        &.-compact #pv-budget { column-span: 2; height: 1; }
        &.-compact #pv-tabs Tabs { height: 1; }
        &.-compact #pv-tabs Underline { display: none; }
        &.-compact #pv-tabs Tab.-active { text-style: bold underline; }
        & #pv-tools { padding: 0 1; }
        & #pv-compare-controls { height: auto; }
        & #pv-compare-controls > Vertical { height: auto; width: 1fr; }
    }
    """

    channel_id: reactive[str | None] = reactive(None, init=False)
    participant_id: reactive[str | None] = reactive(None, init=False)

    class ForkRequested(Message):
        """F: open "Fork here…" on ``channel_id`` at the seq of ``envelope_id`` (the shown turn's trigger)."""

        def __init__(self, channel_id: str, envelope_id: str) -> None:
            super().__init__()
            self.channel_id = channel_id
            self.envelope_id = envelope_id

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
        passport_for: Callable[[str], Awaitable[Any]] | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.loader = loader
        self.passport_for = passport_for
        """``HubClient.get_agent``: the participant's passport, whose ``model`` names its context window
        (default: the loader's hub client's, when the loader is a ``HubSource`` method)."""
        self.name_for = name_for or (lambda agent_id: agent_id)
        self.data: ProjectionData | None = None
        self.turn_summary = ""
        """One line about the shown turn against its re-projection (``identical: n events`` …)."""
        self.compare_summary = ""
        """One line about the two turns compared (``projection: 2 of 9 events differ · tools …``)."""
        self.legend: list[tuple[str, str]] = []
        """(agent id, name) for the ids the shown projection carries as ids."""
        self.turn_index: int | None = None
        """Which of ``data.turns`` the Turns tab shows (None: no turn)."""
        self._pinned_turn: str | None = None
        """The turn id the person stepped to; None follows the newest turn."""
        self._compare: tuple[int, int] | None = None
        self._participants: list[tuple[str, str]] = []
        self._quiet = False
        self._refresh_timer: Timer | None = None
        self.window: ContextWindow | None = None
        """The shown participant's context window (``ag2net.agent.budget``), resolved at each load."""
        self.budget: Any = None
        """The ``TurnBudget`` of the projection now (the next turn's system, history and tools)."""
        self.shown_turn_budget: Any = None
        """The ``TurnBudget`` of the turn the Turns tab shows."""

    def compose(self) -> ComposeResult:
        # one container for the header: stacked lines, or a grid of three rows when the pane is short
        with Vertical(id="pv-header"):
            with Horizontal(id="pv-controls"):
                with Vertical():
                    yield Label("Participant", classes="pv-label")
                    yield PaneSelect([], prompt="pick a participant", compact=True, id="pv-participant")
                with Vertical():
                    yield Label("View (preview)", classes="pv-label")
                    yield PaneSelect(
                        self._view_options(), value=IN_FORCE, allow_blank=False, compact=True, id="pv-view"
                    )
                with Vertical(id="pv-recent-box"):
                    yield Label("recent_n", classes="pv-label")
                    yield Input(placeholder="—", compact=True, id="pv-recent", type="integer")
            yield Static(NO_CHANNEL, id="pv-status")
            yield Static("", id="pv-tokens")
            yield Static("", id="pv-budget", classes="-empty")
        yield Static("", id="pv-error", classes="-empty")
        with TabbedContent(id="pv-tabs"):
            with TabPane("Projection", id="pv-tab-history"), VerticalScroll():
                yield Static("", id="pv-history")
            with TabPane("Tools", id="pv-tab-tools"), VerticalScroll():
                yield Static("", id="pv-tools")
            with TabPane("Turns", id="pv-tab-turn"), VerticalScroll():
                yield Static("", id="pv-turn")
            with TabPane("Cost", id="pv-tab-cost"), VerticalScroll():
                yield CostView(id="pv-cost")
            with TabPane("Compare", id="pv-tab-compare"):
                with Horizontal(id="pv-compare-controls"):
                    with Vertical():
                        yield Label("from turn", classes="pv-label")
                        yield Select([], prompt="turn", compact=True, id="pv-compare-a")
                    with Vertical():
                        yield Label("to turn", classes="pv-label")
                        yield Select([], prompt="turn", compact=True, id="pv-compare-b")
                with VerticalScroll():
                    yield Static("", id="pv-compare")

    def on_resize(self, event: Resize) -> None:
        compact = event.size.height < COMPACT_BELOW
        if compact != self.has_class("-compact"):
            self.set_class(compact, "-compact")
            if self.data is not None:
                self.query_one("#pv-status", Static).update(self._status_text(self.data))

    def _status_text(self, data: ProjectionData) -> str:
        """The status line: who, the view in force (and the one previewed), the WAL's length; shorter when
        the header is folded (it sits beside the pickers, which name the participant already)."""
        preview = data.preview
        who = self.name_for(data.participant_id)
        private = " · turn records private (not an operator)" if preview.turns_private else ""
        if self.has_class("-compact"):
            if preview.view != data.in_force:
                return f"previewing {spec_text(preview.view)} · in force {spec_text(data.in_force)}"
            return f"in force: {spec_text(preview.view)} · {preview.wal_length} envelopes{private}"
        if preview.view != data.in_force:
            return (
                f"{who} · in force: {spec_text(data.in_force)} · previewing: {spec_text(preview.view)} "
                "(preview only — the channel keeps its view)"
            )
        return (
            f"{who} · view in force: {spec_text(preview.view)} · WAL {preview.wal_length} envelopes{private}"
        )

    def action_scroll_shown(self, key: str) -> None:
        """Scroll the shown tab's text (up, down, pageup, pagedown, home, end), wherever the focus is."""
        pane = self.query_one("#pv-tabs", TabbedContent).active_pane
        if pane is None:
            return
        scroll = next(iter(pane.query(VerticalScroll)), None)
        if scroll is None:
            return
        actions = {
            "up": scroll.scroll_up,
            "down": scroll.scroll_down,
            "pageup": scroll.scroll_page_up,
            "pagedown": scroll.scroll_page_down,
            "home": scroll.scroll_home,
            "end": scroll.scroll_end,
        }
        actions[key](animate=False)

    @staticmethod
    def _view_options() -> list[tuple[str, str]]:
        return [("in force", IN_FORCE), *((name, name) for name in registered_views())]

    # ------------------------------------------------------------------ inputs

    def set_channel(self, channel_id: str | None, participants: Sequence[tuple[str, str]]) -> None:
        """Show ``channel_id`` (None: none, and nothing of the last one stays on screen); ``participants``
        are (agent_id, name). Keeps the participant when it is in the new channel, else picks the first."""
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
        changed = channel_id != self.channel_id or chosen != self.participant_id
        self.channel_id = channel_id
        self.participant_id = chosen
        if changed:
            self._pinned_turn = None
            self._clear(NO_CHANNEL if channel_id is None else "loading the projection…")
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

    def note_activity(self, channel_ids: Sequence[str] | set[str] | dict[str, Any]) -> None:
        """New envelopes arrived in ``channel_ids``: re-project soon when the shown channel is among them."""
        if self.channel_id is not None and self.channel_id in channel_ids:
            self._refresh_soon()

    def note_turn(self, channel_id: str, agent_id: str) -> None:
        """``agent_id`` recorded a turn in ``channel_id``: re-project soon when it is the participant shown
        (its system prompt and own tools come from its newest turn, whatever the channel)."""
        if self.channel_id is not None and agent_id == self.participant_id:
            self._refresh_soon()

    def _refresh_soon(self) -> None:
        if self._refresh_timer is not None:
            self._refresh_timer.stop()
        self._refresh_timer = self.set_timer(REFRESH_DELAY, self._refresh_now, name="agent view refresh")

    def _refresh_now(self) -> None:
        self._refresh_timer = None
        self.reload()

    @on(Select.Changed, "#pv-participant")
    def _participant_changed(self, event: Select.Changed) -> None:
        if self._quiet or event.value is Select.NULL or str(event.value) == self.participant_id:
            return
        self.participant_id = str(event.value)
        self._pinned_turn = None
        self._clear("loading the projection…")
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

    @on(Select.Changed, "#pv-compare-a")
    @on(Select.Changed, "#pv-compare-b")
    def _compare_changed(self) -> None:
        if self._quiet or self.data is None:
            return
        a = self.query_one("#pv-compare-a", Select).value
        b = self.query_one("#pv-compare-b", Select).value
        if isinstance(a, int) and isinstance(b, int):
            self.compare(a, b)

    def action_reload(self) -> None:
        self.reload()

    def action_turn(self, step: int) -> None:
        """Show the previous (-1) or next (+1) recorded turn."""
        self.show_turn((self.turn_index if self.turn_index is not None else 0) + step)

    def action_compare(self) -> None:
        """Compare the shown turn with the one before it (or the first two)."""
        data = self.data
        if data is None or len(data.turns) < 2:
            self.notify("Fewer than two turns are recorded here: nothing to compare yet.", timeout=3)
            return
        b = self.turn_index if self.turn_index else 1
        self.compare(b - 1, b)
        self.query_one("#pv-tabs", TabbedContent).active = "pv-tab-compare"

    def action_fork_turn(self) -> None:
        """Open "Fork here…" at the shown turn's input (its trigger envelope's seq)."""
        data = self.data
        index = self.turn_index
        if data is None or index is None or not 0 <= index < len(data.turns):
            self.notify("No turn is shown to fork at: this participant has no recorded turn here.", timeout=3)
            return
        self.post_message(self.ForkRequested(data.channel_id, data.turns[index].trigger_envelope_id))

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
        self._load(self.channel_id, self.participant_id, spec, self._pinned_turn)

    @work(exclusive=True, group="projection")
    async def _load(
        self, channel_id: str, participant_id: str, spec: dict[str, Any] | None, turn_id: str | None
    ) -> None:
        assert self.loader is not None
        try:
            data = await self.loader(channel_id, participant_id, spec, turn_id=turn_id)
            await self._resolve_window(participant_id)
        except (NetworkError, TimeoutError) as exc:
            if not self._taken_down and channel_id == self.channel_id:
                self._show_error(str(exc) or "the hub did not answer in time")
            return
        if self._taken_down or channel_id != self.channel_id or participant_id != self.participant_id:
            return
        self.show(data)

    @property
    def _taken_down(self) -> bool:
        """Unmounted, or being removed (the app closing): Textual prunes the children first, so a load that
        ends then finds ``is_mounted`` still true but ``#pv-status`` gone."""
        return not self.is_mounted or self._pruning or self._closing or self._closed

    def _show_error(self, message: str) -> None:
        error = self.query_one("#pv-error", Static)
        error.update(message)
        error.set_class(not message, "-empty")

    def _clear(self, status: str) -> None:
        """Nothing of the previous channel or participant stays on screen."""
        self.workers.cancel_group(self, "projection")
        self.data = None
        self.turn_index = None
        self._compare = None
        self.turn_summary = self.compare_summary = ""
        self.legend = []
        status_line = self.query_one("#pv-status", Static)
        status_line.update(status)
        status_line.set_class(False, "-switched")
        self._show_error("")
        self.budget = self.shown_turn_budget = None
        self.query_one("#pv-budget", Static).add_class("-empty")
        for selector in (
            "#pv-tokens",
            "#pv-budget",
            "#pv-history",
            "#pv-tools",
            "#pv-turn",
            "#pv-compare",
            "#pv-cost",
        ):
            self.query_one(selector, Static).update("")
        self._quiet = True
        try:
            for selector in ("#pv-compare-a", "#pv-compare-b"):
                self.query_one(selector, Select).set_options([])
        finally:
            self._quiet = False

    # ------------------------------------------------------------------ rendering

    def _color(self, name: str, fallback: str) -> str:
        try:
            return self.app.theme_variables.get(name, fallback)
        except Exception:  # no app yet (unit use)
            return fallback

    async def _resolve_window(self, participant_id: str) -> None:
        """The participant's context window: configured for its name or id, else by its passport's model
        (``ag2net.agent.budget.context_window``); the counter for that model is built off the event loop."""
        passport_for = self.passport_for
        if passport_for is None:
            hub_client = getattr(getattr(self.loader, "__self__", None), "hc", None)
            passport_for = getattr(hub_client, "get_agent", None)
        model: str | None = None
        if passport_for is not None:
            try:
                model = model_name_of(getattr(await passport_for(participant_id), "model", None))
            except (NetworkError, TimeoutError):
                model = None
        try:
            self.window = context_window(model, agents=[self.name_for(participant_id), participant_id])
        except ValueError as exc:  # a malformed AG2NET_CONTEXT_WINDOWS: say so, show the counts anyway
            self.window = ContextWindow(None, "not configured", model)
            self.notify(str(exc), severity="error", timeout=8)
        await asyncio.to_thread(counter_for, model)

    def _budget_of(self, turn: Any) -> Any:
        window = self.window
        if window is None:
            return None
        return turn_budget(turn, window=window, counter=counter_for(window.model))

    def _budget_colors(self) -> dict[str, str]:
        return self._painter().budget_colors()

    def _painter(self) -> ProjectionPainter:
        return ProjectionPainter(self._color, self.name_for)

    def show(self, data: ProjectionData) -> None:
        """Render ``data`` into the status line, tokens, projection, tools, turns and compare tabs."""
        self.data = data
        preview = data.preview
        switched = preview.view != data.in_force
        status = self.query_one("#pv-status", Static)
        status.update(self._status_text(data))
        status.set_class(switched, "-switched")
        tokens = preview.tokens
        self.query_one("#pv-tokens", Static).update(
            f"tokens ≈ system {tokens.get('system', 0)} · history {tokens.get('history', 0)} · "
            f"tools {tokens.get('tools', 0)} · total {tokens.get('total', sum(tokens.values()))}"
            f"  ({preview.token_method})"
        )
        self.budget = self._budget_of(preview)
        budget_line = self.query_one("#pv-budget", Static)
        budget_line.update(
            BudgetBar(self.budget, self._budget_colors(), title="next turn") if self.budget else ""
        )
        budget_line.set_class(self.budget is None, "-empty")
        self.query_one("#pv-history", Static).update(
            self._history_table(preview.system_prompt, preview.history)
        )
        self.legend = id_legend([preview.system_prompt, *map(event_body, preview.history)], self.name_for)
        self.query_one("#pv-tools", Static).update(self._tools_renderable(preview.tools))
        self.turn_index = data.turn_index
        self._pinned_turn = (
            data.turn.turn_id if data.turn is not None and self.turn_index != len(data.turns) - 1 else None
        )
        self.query_one("#pv-turn", Static).update(self._turn_renderable(data))
        self._show_cost(data)
        self._fill_compare_options()
        self.post_message(self.Loaded(self, data))

    def _show_cost(self, data: ProjectionData) -> None:
        """The Cost tab: this participant's turns here priced with the settings' table (``[prices]`` and
        ``AG2NET_PRICES`` over the built-in one), its cache hit rate and why its cache read fell."""
        from tui.settings import Settings, SettingsError

        if self.query_one("#pv-tabs", TabbedContent).active != "pv-tab-cost":
            return  # drawn when the tab is shown (``_cost_tab_shown``)
        view = self.query_one("#pv-cost", CostView)
        if view.table is None:
            settings = getattr(self.app, "settings", None)
            try:
                view.table = (settings if isinstance(settings, Settings) else Settings()).price_table()
            except SettingsError as exc:
                view.update(Text(str(exc), style="bold red"))
                return
        view.show(data.turns, seq_of=data.seq_of)

    @on(TabbedContent.TabActivated, "#pv-tabs")
    def _cost_tab_shown(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == "pv-tab-cost" and self.data is not None:
            self._show_cost(self.data)

    def show_turn(self, index: int) -> bool:
        """Show turn ``index`` of ``data.turns`` (0 = the first recorded) in the Turns tab.

        The record is shown at once; its re-projection now is loaded (the newest turn's comes with every
        load). Returns False when there is no such turn.
        """
        data = self.data
        if data is None or not data.turns:
            return False
        if not 0 <= index < len(data.turns):
            return False
        turn = data.turns[index]
        self.turn_index = index
        newest = index == len(data.turns) - 1
        self._pinned_turn = None if newest else turn.turn_id
        self.query_one("#pv-tabs", TabbedContent).active = "pv-tab-turn"
        if data.turn is not None and data.turn.turn_id == turn.turn_id:
            self.query_one("#pv-turn", Static).update(self._turn_renderable(data))
        else:
            self.query_one("#pv-turn", Static).update(self._turn_renderable(data, index, loading=True))
            self.reload()
        return True

    def _history_table(self, system_prompt: str, history: Sequence[BaseEvent]) -> RenderableType:
        return self._painter().history(system_prompt, history)

    def _tools_renderable(self, tools: Sequence[dict[str, Any]]) -> RenderableType:
        return self._painter().tools(tools)

    def _turn_renderable(
        self, data: ProjectionData, index: int | None = None, *, loading: bool = False
    ) -> RenderableType:
        """Turn ``index`` of ``data.turns`` (default: ``data.turn``); sets ``turn_summary`` and, when there
        is a turn, ``shown_turn_budget``."""
        turn = shown_turn(data, index)
        if turn is not None:
            self.shown_turn_budget = self._budget_of(turn)
        budget = self.shown_turn_budget if turn is not None else None
        renderable, self.turn_summary = self._painter().turn(data, index, loading=loading, budget=budget)
        return renderable

    # ------------------------------------------------------------------ comparing two turns

    def _fill_compare_options(self) -> None:
        data = self.data
        turns = data.turns if data is not None else []
        options = [(turn_label(t, i + 1), i) for i, t in enumerate(turns)]
        self._quiet = True
        try:
            for selector in ("#pv-compare-a", "#pv-compare-b"):
                self.query_one(selector, Select).set_options(options)
        finally:
            self._quiet = False
        if len(turns) < 2:
            self._compare = None
            self.compare_summary = ""
            self.query_one("#pv-compare", Static).update(
                Text(
                    f"Two recorded turns are needed to compare; this participant has {len(turns)} here.",
                    style="dim",
                )
            )
            return
        pair = self._compare
        if pair is None or max(pair) >= len(turns):
            current = self.turn_index if self.turn_index else len(turns) - 1
            pair = (current - 1, current)
        self.compare(*pair)

    def compare(self, a: int, b: int) -> bool:
        """Compare turn ``a`` with turn ``b`` (indexes into ``data.turns``) in the Compare tab."""
        data = self.data
        if data is None or not (0 <= a < len(data.turns) and 0 <= b < len(data.turns)):
            return False
        self._compare = (a, b)
        self._quiet = True
        try:
            self.query_one("#pv-compare-a", Select).value = a
            self.query_one("#pv-compare-b", Select).value = b
        finally:
            self._quiet = False
        self.query_one("#pv-compare", Static).update(self._compare_renderable(data.turns, a, b))
        return True

    def _compare_renderable(self, turns: Sequence[TurnRecord], a: int, b: int) -> RenderableType:
        renderable, self.compare_summary = self._painter().compare(turns, a, b)
        return renderable


NO_CHANNEL = "Select a channel to see what its participants' LLMs see."


__all__ = [
    "DiffRow",
    "ProjectedView",
    "ProjectionData",
    "ProjectionLoader",
    "ToolDiff",
    "diff_events",
    "diff_tools",
    "event_body",
    "role_of",
    "spec_text",
    "turn_label",
]

"""Fork here…: a form of per-agent overrides, then fork + replay in a worker, then the comparison.

The form opens on a channel and a seq (the tail's cursor envelope, or the agent view's shown turn, whose
trigger envelope's seq it looks up). Per agent of the channel: a view (the original's, or a registered view
with ``k=v,…`` parameters), a model (``replay`` answers with the original replies while the inputs match,
``scripted`` answers a fixed text, ``openai`` a named model when the extra and a key are there) and a
system prompt (empty keeps the original's). Ctrl+R runs ``ag2net.debug.fork`` + ``replay`` + ``compare``
in a worker; the progress line counts the sandbox's envelopes against the original's, and Escape cancels
(the sandbox is closed, nothing was written to the source hub). When it is done the form gives way to the
comparison (``tui.screens.replay_compare``).

Before anything is changed the form replays the channel from the seq with no change at all and shows the
baseline ("faithful: 20/20 reproduced"): what a change then does is the change's, not the replay's. Per
agent, **tools** sets how its tool calls are answered: ``TOOL=recorded`` (the original call's result, the
default), ``TOOL=live`` (the real function, when this process has it) or ``TOOL=static:JSON``, ``;``
between tools and ``*`` for all of them.

Mistakes are one inline sentence naming the field (parsed with the same helpers as ``ag2net replay``).

What a person typed stays between runs: closing the form (or a run giving way to the comparison) and
opening it again on the same channel brings back every agent's overrides, the turn budget and the
timeout (kept per workbench source and channel, for as long as the workbench runs). Enter in a field
moves to the next one; only Ctrl+R runs.
"""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Input, Label, Select, Static
from textual.widgets.select import InvalidSelectValueError
from textual.worker import Worker, WorkerState

from ag2net.cli.support import UsageProblem
from ag2net.views import registered_views

KEEP = "__keep__"
SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
FIELDS = ("view", "params", "model", "model-arg", "system", "tools")
"""An agent's fields, ``#fork-<field>-<index>``."""

_kept: weakref.WeakKeyDictionary[Any, dict[str, dict[str, Any]]] = weakref.WeakKeyDictionary()
"""What the form held when it was last changed, per workbench source, then per channel id: the turn
budget and timeout, and each agent's fields by agent name (the next form on that channel starts from it)."""


def kept_form(source: Any, channel_id: str) -> dict[str, Any]:
    """The fields the last form on ``channel_id`` held (``{}`` when none was changed)."""
    try:
        return dict(_kept.get(source, {}).get(channel_id, {}))
    except TypeError:  # a source that cannot be weakly referenced keeps nothing
        return {}


@dataclass(slots=True)
class AgentRow:
    agent_id: str
    name: str


class ForkForm(Screen[None]):
    """Overrides per agent for a replay of ``channel_id`` from ``at_seq``; runs it and shows the comparison."""

    HELP = """\
## Fork here…

Replays the channel from the seq in a sandbox hub (nothing is written to this one) with what you change:

- **view**: another view policy for that agent, parameters as `k=v,…` (e.g. `recent_n=2`).
- **model**: `replay` answers a request equal to a recorded one with its recorded reply; `scripted` answers the
  text beside it; `openai` the model named beside it (needs the extra and `OPENAI_API_KEY`).
- **system**: another system prompt (empty keeps the original's).
- **tools**: `TOOL=recorded|live|static:JSON`, `;` between tools, `*` for all (default: recorded).

The line above the agents is the baseline: the replay with nothing changed ("faithful: 20/20 reproduced").

**Ctrl+R** runs (progress below), **Escape** cancels a run or closes the form. **Enter** moves to the
next field (it never runs). What you typed is still here when you open the form again on this channel.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "run", "Run replay", id="fork.run", tooltip="Fork and replay", priority=True),
        Binding("escape", "cancel", "Cancel", id="fork.cancel", tooltip="Cancel the run, or close the form"),
    ]

    DEFAULT_CSS = """
    ForkForm {
        & #fork-title { text-style: bold; color: $text-primary; padding: 0 1; }
        & #fork-budget { height: 1; padding: 0 1; }
        & #fork-budget Label { color: $text-muted; padding: 0 1 0 0; }
        & #fork-budget Input { width: 8; margin-right: 2; }
        & #fork-baseline { height: 1; padding: 0 1; color: $text-muted; }
        & #fork-baseline.-faithful { color: $text-success; }
        & #fork-baseline.-unfaithful { color: $text-warning; }
        & #fork-agents { height: 1fr; padding: 0 1; }
        & .fork-agent { height: auto; margin-top: 1; }
        & .fork-agent > Label.fork-name { text-style: bold; }
        & .fork-line { height: 1; }
        & .fork-line > Label { width: 8; color: $text-muted; }
        & .fork-line > Select { width: 28; margin-right: 1; }
        & .fork-line > Input { width: 1fr; }
        & #fork-error { color: $text-error; padding: 0 1; height: auto; }
        & #fork-error.-empty { display: none; }
        & #fork-progress { color: $text-accent; padding: 0 1; height: auto; }
        & #fork-progress.-empty { display: none; }
        & Footer { dock: bottom; }
    }
    """

    def __init__(
        self,
        source: Any,
        channel_id: str,
        *,
        seq: int | None = None,
        envelope_id: str | None = None,
        turn_budget: int = 200,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.source = source
        """The workbench's ``HubSource``: names, labels and the operator ``HubClient``."""
        self.channel_id = channel_id
        self.label = source.label_for(channel_id)
        self.at_seq = seq
        self.envelope_id = envelope_id
        self.total = 0
        self.agents: list[AgentRow] = []
        self.turn_budget = turn_budget
        self.timeout = timeout
        self.running: Worker[None] | None = None
        self.progress_text = ""
        self.outcome: tuple[Any, Any] | None = None
        """(ReplayResult, Comparison) of the last finished run (tests read it)."""
        self._box: Any = None
        self._started = 0.0
        self._ticker: Timer | None = None
        self._spin = 0
        self.baseline_text = ""
        """The no-change replay's outcome at the form's seq ("faithful: 20/20 reproduced"; tests read it)."""
        self.baseline: tuple[Any, Any] | None = None
        self._baseline_seq: int | None = None
        self._restoring = True
        """True until the agents' rows are up with what the last form held (changes then are not kept)."""

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static(f"Fork {self.label}", id="fork-title")
        with Horizontal(id="fork-budget"):
            yield Label("at seq")
            yield Input("" if self.at_seq is None else str(self.at_seq), id="fork-seq", compact=True)
            yield Label("turns")
            yield Input(str(self.turn_budget), id="fork-turns", compact=True)
            yield Label("timeout s")
            yield Input(f"{self.timeout:g}", id="fork-timeout", compact=True)
        yield Static("", id="fork-baseline")
        yield VerticalScroll(id="fork-agents")
        yield Static("", id="fork-error", classes="-empty")
        yield Static("", id="fork-progress", classes="-empty")
        yield Footer()

    def on_mount(self) -> None:
        self._load()

    @work(group="fork-load", exit_on_error=False)
    async def _load(self) -> None:
        hc = self.source.hc
        try:
            md = await hc.get_channel(self.channel_id)
            self.total = await hc.wal_count(self.channel_id)
            if self.at_seq is None and self.envelope_id is not None:
                found = await self.source.find_envelope(self.channel_id, self.envelope_id)
                self.at_seq = found[0] if found is not None else None
            agents = []
            for agent_id in md.participant_ids():
                try:
                    passport = await hc.get_agent(agent_id)
                except Exception:
                    continue  # an agent that has left: it takes no turns in the replay
                if passport.kind != "human":
                    agents.append(AgentRow(agent_id, passport.name))
        except Exception as exc:  # a remote hub may refuse a client without the operator role
            self.show_error(f"Cannot read {self.label} to fork it: {self._words(exc)}")
            return
        self.agents = agents
        self.query_one("#fork-title", Static).update(
            f"Fork {self.label} ({self.total} envelopes): replay it from a seq with these changes"
        )
        if self.at_seq is not None:
            self.query_one("#fork-seq", Input).value = str(self.at_seq)
        box = self.query_one("#fork-agents", VerticalScroll)
        await box.mount_all(self._agent_rows())
        self._restore()
        if not agents:
            self.show_error(f"{self.label} has no agents to replay (only people take part in it).")
        self.query_one("#fork-seq", Input).focus()
        self._check_baseline()

    # ------------------------------------------------------------------ the baseline

    @on(Input.Changed, "#fork-seq")
    def _seq_changed(self) -> None:
        if self.agents:
            self._check_baseline()

    def _check_baseline(self) -> None:
        text = self.query_one("#fork-seq", Input).value.strip()
        try:
            at = int(text)
        except ValueError:
            return
        if not 0 <= at <= self.total or at == self._baseline_seq:
            return
        self._baseline_seq = at
        self._show_baseline(f"faithful: checking a replay with no change from seq {at}…", "")
        self._baseline_run(at)

    def _show_baseline(self, text: str, kind: str) -> None:
        self.baseline_text = text
        line = self.query_one("#fork-baseline", Static)
        line.update(text)
        line.set_class(kind == "faithful", "-faithful")
        line.set_class(kind == "unfaithful", "-unfaithful")

    @work(exclusive=True, group="fork-baseline", exit_on_error=False)
    async def _baseline_run(self, at: int) -> None:
        from ag2net.debug import compare, fork, replay

        source = self._source_hub()
        try:
            async with await fork(source, self.channel_id, at) as box:
                result = await replay(
                    source, box, turn_budget=self.turn_budget, step_timeout=5.0, timeout=self.timeout
                )
                diff = compare(result)
        except Exception as exc:
            self._show_baseline(
                f"faithful: unknown, the no-change replay failed: {self._words(exc)}", "unfaithful"
            )
            return
        if at != self._baseline_seq:
            return
        self.baseline = (result, diff)
        if diff.identical and diff.first_turn is None:
            n = len(result.original)
            self._show_baseline(
                f"faithful: {n}/{n} reproduced (a replay with no change from seq {at})", "faithful"
            )
        else:
            self._show_baseline(
                f"not faithful with no change: {self._words(Exception(diff.verdict))}", "unfaithful"
            )

    def _agent_rows(self) -> list[Vertical]:
        from ag2net.cli.replay import openai_available  # the replay command's parsers: loaded when used

        views = [("keep (the channel's)", KEEP), *((name, name) for name in registered_views())]
        models = [("replay", "replay"), ("scripted", "scripted")]
        if openai_available():
            models.append(("openai", "openai"))
        rows = []
        for index, agent in enumerate(self.agents):
            rows.append(
                Vertical(
                    Label(agent.name, classes="fork-name"),
                    Horizontal(
                        Label("view"),
                        Select(views, value=KEEP, allow_blank=False, id=f"fork-view-{index}", compact=True),
                        Input(placeholder="k=v,… e.g. recent_n=2", id=f"fork-params-{index}", compact=True),
                        classes="fork-line",
                    ),
                    Horizontal(
                        Label("model"),
                        Select(
                            models, value="replay", allow_blank=False, id=f"fork-model-{index}", compact=True
                        ),
                        Input(
                            placeholder="scripted: its reply · openai: the model name",
                            id=f"fork-model-arg-{index}",
                            compact=True,
                        ),
                        classes="fork-line",
                    ),
                    self._text_line(
                        "system", "system prompt (empty: the original's)", f"fork-system-{index}"
                    ),
                    self._text_line(
                        "tools",
                        "TOOL=recorded|live|static:JSON; … (empty: all recorded)",
                        f"fork-tools-{index}",
                    ),
                    classes="fork-agent",
                )
            )
        return rows

    @staticmethod
    def _text_line(label: str, placeholder: str, input_id: str) -> Horizontal:
        """A line of an agent's row: a label and one text field."""
        return Horizontal(
            Label(label), Input(placeholder=placeholder, id=input_id, compact=True), classes="fork-line"
        )

    # ------------------------------------------------------------------ messages

    def show_error(self, message: str) -> None:
        error = self.query_one("#fork-error", Static)
        error.update(message)
        error.set_class(not message, "-empty")

    def _words(self, exc: BaseException) -> str:
        """A hub's message with the ids in it named as people know them."""
        from tui.wording import humanize, namer_for

        text = str(exc).replace(f"'{self.channel_id}'", self.label).replace(self.channel_id, self.label)
        return humanize(text, namer_for(self.app))

    def _show_progress(self, text: str) -> None:
        self.progress_text = text
        line = self.query_one("#fork-progress", Static)
        line.update(text)
        line.set_class(not text, "-empty")

    # ------------------------------------------------------------------ reading the form

    def set_override(
        self,
        name: str,
        *,
        view: str | None = None,
        params: str = "",
        model: str | None = None,
        model_arg: str = "",
        system: str = "",
        tools: str = "",
    ) -> None:
        """Fill one agent's fields (what a person types; tests and the screenshot use it)."""
        index = next(i for i, a in enumerate(self.agents) if a.name == name)
        self.query_one(f"#fork-tools-{index}", Input).value = tools
        self.query_one(f"#fork-view-{index}", Select).value = view or KEEP
        self.query_one(f"#fork-params-{index}", Input).value = params
        self.query_one(f"#fork-model-{index}", Select).value = model or "replay"
        self.query_one(f"#fork-model-arg-{index}", Input).value = model_arg
        self.query_one(f"#fork-system-{index}", Input).value = system

    def read_form(self) -> tuple[int, int, float, dict[str, Any]]:
        """(at seq, turn budget, timeout, overrides by agent id); ``UsageProblem`` names a bad field."""
        from ag2net.cli.replay import parse_model, parse_params, parse_tool_policy, parse_view
        from ag2net.debug.replay import Override

        def number(field: str, kind: type, low: float, high: float | None) -> Any:
            text = self.query_one(f"#fork-{field}", Input).value.strip()
            try:
                value = kind(text)
            except ValueError:
                value = None
            if value is None or value < low or (high is not None and value > high):
                span = f"between {low:g} and {high:g}" if high is not None else f"more than {low:g}"
                raise UsageProblem(f"{field.replace('-', ' ')} {text!r} is not a number {span}; fix it")
            return value

        at = number("seq", int, 0, self.total)
        turns = number("turns", int, 1, None)
        timeout = number("timeout", float, 0.1, None)
        overrides: dict[str, Any] = {}
        for index, agent in enumerate(self.agents):
            override = Override()
            view = self.query_one(f"#fork-view-{index}", Select).value
            params = self.query_one(f"#fork-params-{index}", Input).value
            where = f"{agent.name}'s view"
            if view != KEEP:
                override.view = parse_view(str(view), parse_params(params, where=where), where=where)
            elif params.strip():
                raise UsageProblem(f"{where}: parameters {params!r} need a view; choose one or clear them")
            kind = str(self.query_one(f"#fork-model-{index}", Select).value)
            arg = self.query_one(f"#fork-model-arg-{index}", Input).value.strip()
            if kind == "openai" and not arg:
                raise UsageProblem(
                    f"{agent.name}'s model: openai needs a model name beside it, e.g. gpt-4o-mini"
                )
            spec = kind if kind == "replay" or not arg else f"{kind}:{arg}"
            override.model = parse_model(spec, where=f"{agent.name}'s model")
            system = self.query_one(f"#fork-system-{index}", Input).value
            if system.strip():
                override.system_prompt = system
            tools = self.query_one(f"#fork-tools-{index}", Input).value
            for item in (t.strip() for t in tools.split(";")):
                if not item:
                    continue
                tool, eq, policy = item.partition("=")
                if not eq or not tool.strip():
                    raise UsageProblem(
                        f"{agent.name}'s tools: {item!r} must look like TOOL=recorded|live|static:JSON"
                    )
                override.tools[tool.strip()] = parse_tool_policy(policy, where=f"{agent.name}'s tools")
            if (override.view, override.model, override.system_prompt) != (
                None,
                None,
                None,
            ) or override.tools:
                overrides[agent.agent_id] = override
        return at, turns, timeout, overrides

    # ------------------------------------------------------------------ kept between forms

    def form_fields(self) -> dict[str, Any]:
        """What the form holds now, as typed: turn budget, timeout and each agent's fields by name."""
        agents: dict[str, dict[str, str]] = {}
        for index, agent in enumerate(self.agents):
            row: dict[str, str] = {}
            for name in FIELDS:
                widget = self.query_one(f"#fork-{name}-{index}")
                value = widget.value if isinstance(widget, (Input, Select)) else None
                row[name] = str(value)
            agents[agent.name] = row
        return {
            "turns": self.query_one("#fork-turns", Input).value,
            "timeout": self.query_one("#fork-timeout", Input).value,
            "agents": agents,
        }

    def _restore(self) -> None:
        kept = kept_form(self.source, self.channel_id)
        for key in ("turns", "timeout"):
            if key in kept:
                self.query_one(f"#fork-{key}", Input).value = str(kept[key])
        agents = kept.get("agents", {})
        for index, agent in enumerate(self.agents):
            for name, value in agents.get(agent.name, {}).items():
                widget = self.query_one(f"#fork-{name}-{index}")
                if isinstance(widget, Select):
                    try:
                        widget.value = value
                    except InvalidSelectValueError:
                        pass  # a view or model this process no longer offers: the default stays
                elif isinstance(widget, Input):
                    widget.value = value
        self.call_after_refresh(self._restored)

    def _restored(self) -> None:
        self._restoring = False

    @on(Input.Changed)
    @on(Select.Changed)
    def _keep(self) -> None:
        if self._restoring or not self.agents:
            return
        try:
            _kept.setdefault(self.source, {})[self.channel_id] = self.form_fields()
        except TypeError:
            pass  # a source that cannot be weakly referenced keeps nothing

    # ------------------------------------------------------------------ running

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        # Enter moves on, as in any form; a replay can take a minute and forks a sandbox: only ctrl+r runs
        event.stop()
        self.focus_next()

    def action_run(self) -> None:
        if self.running is not None and self.running.is_running:
            return
        try:
            at, turns, timeout, overrides = self.read_form()
        except UsageProblem as exc:
            self.show_error(str(exc))
            return
        self.show_error("")
        self.running = self._run(at, turns, timeout, overrides)

    def _source_hub(self) -> Any:
        hc = self.source.hc
        return hc if hc.remote or hc.hub is None else hc.hub  # the hub itself lends its adapters

    @work(exclusive=True, group="fork-run", exit_on_error=False)
    async def _run(self, at: int, turns: int, timeout: float, overrides: dict[str, Any]) -> None:
        from ag2net.debug import compare, fork, replay

        self._started = time.monotonic()
        self._ticker = self.set_interval(0.1, self._tick)
        self._show_progress(f"forking {self.label} after seq {at}…")
        source = self._source_hub()
        try:
            self._box = box = await fork(source, self.channel_id, at)
            try:
                result = await replay(
                    source,
                    box,
                    overrides=overrides,
                    turn_budget=turns,
                    step_timeout=min(10.0, timeout),
                    timeout=timeout,
                )
                diff = compare(result)
            finally:
                self._box = None
                await box.close()
        except asyncio.CancelledError:
            self._stop_ticker()
            self._show_progress(f"cancelled after {time.monotonic() - self._started:.1f} s; nothing was kept")
            raise
        except Exception as exc:  # the hub refused or the replay failed: say so, keep the form
            self._stop_ticker()
            self._show_progress("")
            self.show_error(f"The replay could not run: {self._words(exc)}")
            return
        self._stop_ticker()
        self.outcome = (result, diff)
        self._show_progress("")
        from tui.screens.replay_compare import ReplayCompare

        names = {a.agent_id: a.name for a in self.agents}
        described = {names.get(a, a): describe(o) for a, o in overrides.items()}
        self.app.switch_screen(ReplayCompare(self.label, at, result, diff, self.source.name_for, described))

    def _tick(self) -> None:
        box = self._box
        self._spin = (self._spin + 1) % len(SPINNER)
        elapsed = time.monotonic() - self._started
        if box is None:
            return
        made = box.hub.wal_count(self.channel_id)
        self._show_progress(
            f"{SPINNER[self._spin]} replaying {self.label}: {made} of {self.total} envelopes · {elapsed:.1f} s "
            "· Escape cancels"
        )

    def _stop_ticker(self) -> None:
        if self._ticker is not None:
            self._ticker.stop()
            self._ticker = None

    def action_cancel(self) -> None:
        if self.running is not None and self.running.is_running:
            self.running.cancel()
            return
        self.dismiss()

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        if event.worker is self.running and event.state == WorkerState.CANCELLED:
            self._stop_ticker()
            self._show_progress(
                f"cancelled after {time.monotonic() - self._started:.1f} s; the sandbox is closed, nothing was kept"
            )


def describe(override: Any) -> str:
    """One line about what an ``Override`` changes (the comparison's header shows it)."""
    parts = []
    if override.view is not None:
        spec = dict(override.view)
        name = spec.pop("name", "?")
        params = ",".join(f"{k}={v}" for k, v in spec.items())
        parts.append(f"view {name}" + (f":{params}" if params else ""))
    model = override.model
    if model is not None:
        name = getattr(model, "name", type(model).__name__)
        script = getattr(model, "turns", None) if name == "scripted" else None
        parts.append(f"model {name}" + (f" ({script[0]!r})" if script and isinstance(script[0], str) else ""))
    if override.system_prompt is not None:
        parts.append(f"system prompt ({len(override.system_prompt)} characters)")
    for tool, policy in getattr(override, "tools", {}).items():
        parts.append(f"tool {tool} {policy}")
    return "; ".join(parts)


__all__ = ["KEEP", "AgentRow", "ForkForm", "describe", "kept_form"]

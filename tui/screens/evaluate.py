"""Evaluate…: replay many channels under one change, score them, and compare with no change.

Pick the channels (all those given are listed; the ones passed as ``selected`` start ticked), the axis and
the change (``AGENT=VALUE`` as ``ag2net eval`` takes it: ``critic=windowed_summary:recent_n=2``, several
separated by ``;``), the live model a turn no recording answers calls, and the scorers. **Ctrl+R** runs the
cohort twice in a worker, with no change and with the change, each channel in its own sandbox (at most
``concurrency`` at a time), with a progress bar; then the leaderboard has one row per variant and the table
below lists every channel a scorer flipped (pass → fail first). **Enter** on a flipped channel replays it
again under the change and opens the comparison with the original at its first divergence
(``ReplayCompare``). **Escape** cancels a run, or goes back.
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, ProgressBar, Select, SelectionList, Static
from textual.worker import Worker, WorkerState

AXIS_CHOICES = [
    ("no change (check the recording replays)", ""),
    ("view", "view"),
    ("model", "model"),
    ("system prompt (AGENT=FILE)", "system"),
    ("attach_plugin (AGENT=true|false)", "attach_plugin"),
    ("skill card (AGENT=FILE)", "skill"),
    ("tool policy (AGENT.TOOL=POLICY)", "tool"),
]
SCORER_CHOICES = [
    ("reproduced", True),
    ("closed", True),
    ("turns", True),
    ("live", True),
    ("tokens", False),
    ("cost", False),
]


class EvaluateScreen(Screen[None]):
    """Channels, axis and scorers on top; progress; the leaderboard per variant and the flipped channels."""

    HELP = __doc__

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Back / cancel", id="evaluate.close"),
        Binding("ctrl+r", "run", "Run", id="evaluate.run", tooltip="Replay the channels and score them"),
    ]

    DEFAULT_CSS = """
    EvaluateScreen {
        & #ev-title { text-style: bold; padding: 0 1; }
        & #ev-top { height: 14; }
        & #ev-channels { width: 1fr; }
        & #ev-side { width: 2fr; }
        & #ev-scorers { width: 22; }
        & Input { width: 1fr; }
        & #ev-error { color: $error; height: auto; padding: 0 1; }
        & #ev-status { height: auto; padding: 0 1; }
        & #ev-board { height: auto; max-height: 6; }
        & #ev-flips { height: 1fr; }
        & Footer { dock: bottom; }
    }
    """

    def __init__(
        self,
        source: Any,
        channel_ids: list[str],
        *,
        selected: list[str] | None = None,
        concurrency: int = 4,
        timeout: float = 60.0,
    ) -> None:
        super().__init__()
        self.source = source
        """The workbench's ``HubSource``: names, labels and the operator ``HubClient``."""
        self.channel_ids = list(channel_ids)
        self.preselected = set(selected or channel_ids)
        self.concurrency = concurrency
        self.timeout = timeout
        self.runs: list[Any] = []
        """The last run's ``EvalRun`` per variant (no change first); tests read it."""
        self.flips: list[Any] = []
        self.members: dict[str, Any] = {}
        self.variant: Any = None
        self.running: Worker[None] | None = None
        self._started = 0.0

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static("Evaluate a change across channels", id="ev-title")
        with Horizontal(id="ev-top"):
            yield SelectionList[str](
                *[(self._row(cid), cid, cid in self.preselected) for cid in self.channel_ids],
                id="ev-channels",
            )
            with Vertical(id="ev-side"):
                yield Select(AXIS_CHOICES, value="", allow_blank=False, id="ev-axis")
                yield Input(
                    placeholder="change: critic=windowed_summary:recent_n=2 (; between agents)",
                    id="ev-change",
                )
                yield Input(
                    placeholder="live model: scripted[:TEXT] or openai:NAME (blank: none)", id="ev-live"
                )
                yield Input(
                    placeholder="more scorers: contains:TEXT, tool:NAME, module:function", id="ev-more"
                )
            yield SelectionList[str](*[(n, n, on) for n, on in SCORER_CHOICES], id="ev-scorers")
        yield Static("", id="ev-error")
        yield ProgressBar(total=None, show_eta=False, id="ev-progress")
        yield Static("Ctrl+R runs the cohort with no change and with the change.", id="ev-status")
        yield DataTable(id="ev-board", cursor_type="none", zebra_stripes=True)
        yield DataTable(id="ev-flips", cursor_type="row")
        yield Footer()

    def _row(self, cid: str) -> str:
        return self.source.label_for(cid)

    def on_mount(self) -> None:
        self.query_one("#ev-flips", DataTable).add_columns("channel", "scorer", "was", "now", "why")
        self.query_one("#ev-channels", SelectionList).focus()

    # ------------------------------------------------------------------ reading the form

    def show_error(self, message: str) -> None:
        self.query_one("#ev-error", Static).update(message)

    def read_form(self) -> tuple[list[str], Any, list[Any]]:
        """The ticked channels, the variant and the scorers; ``UsageProblem`` (one sentence) otherwise."""
        from ag2net.cli.support import UsageProblem
        from ag2net.eval.cli import load_scorer, parse_axis, parse_live
        from ag2net.eval.variant import Variant

        channels = list(self.query_one("#ev-channels", SelectionList).selected)
        if not channels:
            raise UsageProblem("tick at least one channel to evaluate")
        axis = str(self.query_one("#ev-axis", Select).value or "")
        change = self.query_one("#ev-change", Input).value.strip()
        if axis and not change:
            raise UsageProblem(f"the {axis} axis needs a change, e.g. critic=windowed_summary:recent_n=2")
        if change and not axis:
            raise UsageProblem("choose the axis the change is on (view, model, system prompt …)")
        texts = [t.strip() for t in change.split(";") if t.strip()]
        name, changes = parse_axis({axis: texts} if axis else {})
        live_text = self.query_one("#ev-live", Input).value.strip()
        live = parse_live([live_text] if live_text else [])
        specs = list(self.query_one("#ev-scorers", SelectionList).selected)
        specs += [s.strip() for s in self.query_one("#ev-more", Input).value.split(",") if s.strip()]
        if not specs:
            raise UsageProblem("tick at least one scorer")
        names = {self.source.name_for(p) for cid in channels for p, _ in self._participants(cid)}
        for agent in changes:
            if agent not in names:
                raise UsageProblem(
                    f"{agent!r} takes part in none of the ticked channels ({', '.join(sorted(names))})"
                )
        return channels, Variant(name, changes, live=live), [load_scorer(s, None) for s in specs]

    def _participants(self, cid: str) -> list[tuple[str, str]]:
        try:
            return list(self.source.participants(cid))
        except Exception:
            return []

    # ------------------------------------------------------------------ running

    def action_run(self) -> None:
        from ag2net.cli.support import UsageProblem

        if self.running is not None and self.running.is_running:
            return
        try:
            channels, variant, scorers = self.read_form()
        except UsageProblem as exc:
            self.show_error(str(exc))
            return
        self.show_error("")
        self.variant = variant
        self.running = self._run(channels, variant, scorers)

    def _hub(self) -> Any:
        hc = self.source.hc
        return hc if hc.remote or hc.hub is None else hc.hub

    @work(exclusive=True, group="evaluate", exit_on_error=False)
    async def _run(self, channels: list[str], variant: Any, scorers: list[Any]) -> None:
        from ag2net.eval import Settings, Variant, compare_runs, evaluate, snapshot

        bar = self.query_one("#ev-progress", ProgressBar)
        status = self.query_one("#ev-status", Static)
        self._started = time.monotonic()
        status.update(f"reading {len(channels)} channel(s)…")
        members = [await snapshot(self._hub(), cid, self.source.label_for(cid)) for cid in channels]
        self.members = {m.channel_id: m for m in members}
        bar.update(total=2 * len(members), progress=0)
        settings = Settings(
            timeout=self.timeout, step_timeout=min(10.0, self.timeout), concurrency=self.concurrency
        )
        runs = []
        for n, v in enumerate((Variant(), variant)):

            def step(done: int, total: int, outcome: Any, n: int = n, v: Any = v) -> None:
                bar.update(progress=n * total + done)
                status.update(f"{v.name}: {done}/{total} · {outcome.label}")

            runs.append(await evaluate(members, v, scorers, settings=settings, progress=step))
        self.runs = runs
        diff = compare_runs(runs[1], runs[0])
        self.flips = [*diff.regressions, *diff.improvements]
        self._show(runs, diff)

    def _show(self, runs: list[Any], diff: Any) -> None:
        from ag2net.eval.report import leaderboard

        header, rows = leaderboard(runs)
        board = self.query_one("#ev-board", DataTable)
        board.clear(columns=True)
        board.add_columns(*header)
        for row in rows:
            board.add_row(*row)
        flips = self.query_one("#ev-flips", DataTable)
        flips.clear()
        for f in self.flips:
            was, now = ("pass", "FAIL") if f in diff.regressions else ("FAIL", "pass")
            flips.add_row(f.label, f.key, was, now, f.after[:80], key=f"{f.channel_id}\x1f{f.key}")
        took = time.monotonic() - self._started
        regressions = len(diff.regressions)
        self.query_one("#ev-status", Static).update(
            f"done in {took:.1f} s: {regressions} regression(s), {len(diff.improvements)} fixed"
            + (" · Enter on a channel opens its replay beside the original" if self.flips else "")
        )
        if self.flips:
            flips.focus()

    @on(DataTable.RowSelected, "#ev-flips")
    def _open_flip(self, event: DataTable.RowSelected) -> None:
        cid = str(event.row_key.value or "").split("\x1f")[0]
        if cid in self.members and self.variant is not None:
            self._compare(cid)

    @work(exclusive=True, group="evaluate-compare", exit_on_error=False)
    async def _compare(self, cid: str) -> None:
        from ag2net.eval import Settings
        from ag2net.eval.runner import replay_pair
        from tui.screens.replay_compare import ReplayCompare

        member = self.members[cid]
        self.query_one("#ev-status", Static).update(f"replaying {member.label} under {self.variant.name}…")
        settings = Settings(timeout=self.timeout, step_timeout=min(10.0, self.timeout))
        at, result, diff, _md = await replay_pair(member, self.variant, settings)
        shown = {agent: f"{self.variant.axis} changed" for agent in self.variant.changes}
        self.app.push_screen(ReplayCompare(member.label, at, result, diff, self.source.name_for, shown))

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.error is not None:
            exc = event.worker.error
            self.show_error(f"The evaluation could not run: {type(exc).__name__}: {exc}")

    def action_close(self) -> None:
        if self.running is not None and self.running.is_running:
            self.running.cancel()
            self.query_one("#ev-status", Static).update("cancelled; nothing was kept")
            return
        self.app.pop_screen()


__all__ = ["AXIS_CHOICES", "SCORER_CHOICES", "EvaluateScreen"]

"""Judge a change across many recorded channels: cohorts, one-axis variants, minimal replay, scorers, runs
that AG2's ``ag2.eval`` reads, and a baseline comparison for a CI gate.

::

    from ag2net.eval import Selector, Variant, builtin, evaluate, read_cohort

    members = read_cohort("demo.db", Selector(types=["conversation"]))
    view = {"name": "windowed_summary", "recent_n": 2}
    run = await evaluate(members, Variant("view", {"critic": view}), [builtin("closed:max_turns")])
    run.save("run.json")

``cohort`` (selection, fork points), ``variant`` (the one axis), ``scorers`` (``@scorer`` and the built-ins),
``runner`` (``evaluate``), ``run`` (the saved run and ``compare_runs``), ``report`` (text, Markdown, JSON),
``cli`` (``ag2net eval``). See docs/eval.md.
"""

from __future__ import annotations

from ag2net.eval.cohort import Member, SelectionError, Selector, fork_point, read_cohort, snapshot
from ag2net.eval.run import EvalRun, Outcome, RunComparison, compare_runs, load_run
from ag2net.eval.runner import Settings, evaluate, replay_member
from ag2net.eval.scorers import (
    Replayed,
    Score,
    Scorer,
    builtin,
    closed_with,
    cost_total,
    final_text_contains,
    final_text_matches,
    judge_scorer,
    scorer,
    tokens_total,
    tool_called,
    turn_count,
)
from ag2net.eval.variant import AXES, Variant

__all__ = [
    "AXES",
    "EvalRun",
    "Member",
    "Outcome",
    "Replayed",
    "RunComparison",
    "Score",
    "Scorer",
    "SelectionError",
    "Selector",
    "Settings",
    "Variant",
    "builtin",
    "closed_with",
    "compare_runs",
    "cost_total",
    "evaluate",
    "final_text_contains",
    "final_text_matches",
    "fork_point",
    "judge_scorer",
    "load_run",
    "read_cohort",
    "replay_member",
    "scorer",
    "snapshot",
    "tokens_total",
    "tool_called",
    "turn_count",
]

"""Reports of a run (and of its comparison with a baseline): text for a terminal, Markdown for a CI log,
JSON for a pipe. The leaderboard is one row per variant: channels, pass rate per pass/fail scorer, mean per
numeric scorer, live calls and tokens against a full rerun."""

from __future__ import annotations

from typing import Any

from ag2net.eval.run import EvalRun, RunComparison


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def leaderboard(runs: list[EvalRun]) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per run (variant)."""
    keys = list(dict.fromkeys(k for r in runs for k in r.scorers))
    header = ["variant", "channels", *keys, "live calls", "live tokens / full rerun"]
    rows = []
    for run in runs:
        cells = [run.variant, str(len(run.outcomes))]
        for key in keys:
            rate = run.pass_rate(key)
            cells.append(_pct(rate) if rate is not None else _num(run.mean(key)))
        t = run.totals()
        cells += [str(t["live_calls"]), f"{t['live_tokens']} / {t['full_rerun_tokens']}"]
        rows.append(cells)
    return header, rows


def marks_text(kinds: list[str], width: int = 16) -> str:
    """``⟲⟲●●`` (recorded, live) per turn; a long run is cut with its counts: ``⟲⟲●●…(2⟲ 198●)``."""
    shown = "".join("⟲" if k == "recorded" else "●" for k in kinds)
    if len(shown) <= width:
        return shown
    return shown[:width] + f"…({kinds.count('recorded')}⟲ {kinds.count('live')}●)"


def moves_lines(diff: RunComparison) -> list[str]:
    lines = []
    for key, (kind, before, after) in diff.moves.items():
        if kind == "pass rate":
            lines.append(
                f"{key}: pass rate {_pct(before)} → {_pct(after)} ({(after - before) * 100:+.1f} points)"
            )
        else:
            lines.append(f"{key}: mean {_num(before)} → {_num(after)} ({after - before:+.2f})")
    return lines


def text_report(run: EvalRun, diff: RunComparison | None = None) -> list[str]:
    t = run.totals()
    lines = [
        f"{run.variant}: {t['channels']} channel(s), {t['turns']} turn(s), {t['live_calls']} live model call(s), "
        f"{t['live_tokens']} live tokens of {t['full_rerun_tokens']} for a full rerun"
        + (
            f", cost {t['live_cost'] or 0} of {t['full_rerun_cost']}"
            if t["full_rerun_cost"] is not None
            else ""
        )
        + (f", {t['errors']} could not be replayed" if t["errors"] else "")
    ]
    for o in run.outcomes:
        verdicts = []
        for key in run.scorers:
            score = o.scores.get(key)
            value = getattr(score, "score", None)
            verdicts.append(f"{key}={'pass' if value is True else 'FAIL' if value is False else _num(value)}")
        marks = " ".join(f"{n}:{marks_text(ks)}" for n, ks in o.marks.items())
        lines.append(f"  {o.label}  @{o.at_seq}  {' '.join(verdicts)}  {marks}".rstrip())
        if o.error:
            lines.append(f"    could not be replayed: {o.error}")
    if diff is not None:
        lines += comparison_lines(diff)
    return lines


def comparison_lines(diff: RunComparison) -> list[str]:
    lines = [f"against the baseline {diff.baseline.variant!r} ({len(diff.shared)} channel(s) in both):"]
    lines += ["  " + m for m in moves_lines(diff)]
    if diff.regressions:
        lines.append(f"  {len(diff.regressions)} regression(s), pass → fail:")
        lines += [f"    {f.label} {f.key}: {f.after}" for f in diff.regressions]
    else:
        lines.append("  no regression: no channel flipped pass → fail")
    if diff.improvements:
        lines.append(
            f"  {len(diff.improvements)} fixed, fail → pass: "
            + ", ".join(f"{f.label} {f.key}" for f in diff.improvements)
        )
    if diff.only_current or diff.only_baseline:
        lines.append(
            f"  not compared: {len(diff.only_current)} only in this run, {len(diff.only_baseline)} only in the baseline"
        )
    return lines


def markdown_report(
    run: EvalRun, diff: RunComparison | None = None, others: list[EvalRun] | None = None
) -> str:
    runs = [*(others or []), run]
    header, rows = leaderboard(runs)
    out = [f"## ag2net eval: {run.variant}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    out += [
        "",
        "| channel | fork | " + " | ".join(run.scorers) + " | live |",
        "|" + "---|" * (len(run.scorers) + 3),
    ]
    for o in run.outcomes:
        cells = []
        for key in run.scorers:
            v = getattr(o.scores.get(key), "score", None)
            cells.append("✅" if v is True else "❌" if v is False else _num(v))
        out.append(f"| {o.label} | {o.at_seq} | " + " | ".join(cells) + f" | {o.live} |")
    if diff is not None:
        out += ["", f"### Against the baseline `{diff.baseline.variant}`", ""]
        out += [f"- {m}" for m in moves_lines(diff)]
        if diff.regressions:
            out += ["", f"**{len(diff.regressions)} regression(s)** (pass → fail):", ""]
            out += [f"- `{f.label}` **{f.key}**: {f.after}" for f in diff.regressions]
        else:
            out += ["", "No regression."]
    return "\n".join(out) + "\n"


def json_report(run: EvalRun, diff: RunComparison | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"run": run.to_dict(), "totals": run.totals()}
    if diff is not None:
        doc["baseline"] = {
            "run_id": diff.baseline.run_id,
            "moves": {k: {"measure": m, "before": b, "after": a} for k, (m, b, a) in diff.moves.items()},
            "regressions": [
                {"scorer": f.key, "channel": f.label, "channel_id": f.channel_id, "why": f.after}
                for f in diff.regressions
            ],
            "fixed": [
                {"scorer": f.key, "channel": f.label, "channel_id": f.channel_id} for f in diff.improvements
            ],
        }
    return doc


__all__ = [
    "comparison_lines",
    "json_report",
    "leaderboard",
    "markdown_report",
    "marks_text",
    "moves_lines",
    "text_report",
]

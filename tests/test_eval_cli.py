"""``ag2net eval`` in a real subprocess over the demo recorded with seeded ids: a baseline run saved, a view
change that makes a scorer fail is a regression with exit code 1 (naming the channel and how far each
scorer moved), the same change without the gate is exit 0; ``--json`` and ``--markdown``; the database file
is not changed; every bad input is one sentence on stderr with exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_eval_support import fingerprint, record_demo_file

SCORERS = ["--scorer", "closed:max_turns", "--scorer", "turns", "--scorer", "reproduced"]


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    root = Path(__file__).resolve().parent.parent
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "eval", *args],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "160", "PYTHONPATH": str(root)},
        check=False,
    )


def one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and result.stdout == ""
    return lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict[str, str], Path]:
    folder = tmp_path_factory.mktemp("evalcli")
    db = folder / "demo.db"
    steps = record_demo_file(db)
    base = folder / "base.json"
    done = run_cli(
        "--db", str(db), "--type", "conversation", "--type", "discussion", *SCORERS, "--out", str(base)
    )
    assert done.returncode == 0, done.stderr
    return db, steps, base


def test_the_baseline_reproduces_every_channel_from_the_recording(demo):
    db, steps, base = demo
    doc = json.loads(base.read_text())
    assert doc["schema_version"] == "0.2" and doc["label"] == "no change"
    assert [t["task_id"] for t in doc["tasks"]] == [steps["discussion"], steps["pairing"]]
    assert doc["aggregates"]["pass_rate"]["reproduced"] == 1.0
    assert all(t["metadata"]["live_calls"] == 0 for t in doc["tasks"])


def test_a_view_change_that_fails_a_scorer_is_a_regression_with_exit_1(demo, tmp_path):
    db, steps, base = demo
    before = fingerprint(db)
    report = tmp_path / "report.md"
    done = run_cli(
        "--db", str(db), "--type", "conversation", "--type", "discussion", *SCORERS,
        "--view", "critic=windowed_summary:recent_n=2", "--live", "scripted:Looks fine.",
        "--baseline", str(base), "--fail-on-regression", "--markdown", str(report),
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    out = done.stdout
    label = f"conversation·{steps['pairing'][-4:]}"
    assert "regression(s), pass → fail:" in out
    assert f"{label} reproduced: stopped early at seq" in out
    assert "reproduced: pass rate 100.0% → 0.0% (-100.0 points)" in out
    assert "turns: mean" in out
    md = report.read_text()
    assert md.startswith("## ag2net eval: view critic=") and "**2 regression(s)**" in md
    assert f"`{label}` **reproduced**" in md
    assert fingerprint(db) == before
    same = run_cli(
        "--db",
        str(db),
        "--type",
        "conversation",
        "--type",
        "discussion",
        *SCORERS,
        "--baseline",
        str(base),
        "--fail-on-regression",
    )
    assert same.returncode == 0, same.stderr
    assert "no regression: no channel flipped pass → fail" in same.stdout


def test_json_output_holds_the_run_and_the_comparison(demo):
    db, steps, base = demo
    done = run_cli(
        "--db", str(db), "--channel", steps["pairing"][-4:], *SCORERS,
        "--view", "critic=windowed_summary:recent_n=2", "--baseline", str(base), "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # no --fail-on-regression: reported, not gated
    doc = json.loads(done.stdout)
    assert doc["run"]["tasks"][0]["task_id"] == steps["pairing"]
    assert doc["baseline"]["regressions"][0]["scorer"] == "closed:max_turns"
    assert doc["totals"]["channels"] == 1


def test_a_scorer_module_of_the_working_folder(demo, tmp_path):
    db, _, _ = demo
    (tmp_path / "my_scorers.py").write_text(
        "from ag2net.eval import scorer, Score\n"
        "@scorer\n"
        "def long_enough(ch):\n"
        "    return Score(len(ch.envelopes) >= 10, f'{len(ch.envelopes)} envelopes')\n"
        "def plain(ch):\n"
        "    return 3\n"
    )
    done = run_cli(
        "--db",
        str(db),
        "--type",
        "conversation",
        "--scorer",
        "my_scorers:long_enough",
        "--scorer",
        "my_scorers:plain",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "long_enough=pass plain=3" in done.stdout


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (
            ["--scorer", "no_such_module:f"],
            "--scorer 'no_such_module:f': module 'no_such_module' cannot be imported",
        ),
        (["--scorer", "frobnicate"], "--scorer 'frobnicate' is neither a built-in"),
        (
            ["--scorer", "turns", "--type", "nope"],
            "no channel of the database matches the selector (type nope)",
        ),
        (
            ["--scorer", "turns", "--view", "critic=no_such_view"],
            "--view 'critic=no_such_view': unknown view 'no_such_view'",
        ),
        (["--scorer", "turns", "--view", "nobody=full_transcript"], "'nobody' takes part in none of the"),
        (
            ["--scorer", "turns", "--view", "critic=full_transcript", "--model", "coder=scripted"],
            "an evaluation varies one axis",
        ),
        (["--scorer", "turns", "--fail-on-regression"], "--fail-on-regression compares with a baseline"),
        (
            ["--scorer", "turns", "--baseline", "/nonexistent/run.json"],
            "--baseline: cannot read the run file",
        ),
        (["--scorer", "turns", "--failed", "turns"], "--failed 'turns' must look like SCORER@RUN.json"),
        (["--scorer", "judge"], "--scorer 'judge': --scorer judge needs a model"),
        (
            ["--scorer", "turns", "--fork-at", "seq:3"],
            "--fork-at 'seq:3' must look like type:EVENT_TYPE or sender:NAME",
        ),
        (["--scorer", "turns", "--concurrency", "0"], "--concurrency must be 1 or more, got 0"),
        (["--scorer", "turns", "--turns", "0"], "--turns must be 1 or more, got 0"),
        (["--scorer", "turns", "--live", "gpt"], "--live 'gpt': model 'gpt' is not one of"),
        ([], "give at least one --scorer"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(demo, args, needle):
    db, _, _ = demo
    line = one_sentence(run_cli("--db", str(db), *args))
    assert needle in line, line


def test_a_missing_database_is_one_sentence(tmp_path):
    line = one_sentence(run_cli("--db", str(tmp_path / "none.db"), "--scorer", "turns"))
    assert "does not exist" in line

"""AG2 1.2.1's own ``ag2.eval`` reads the runs ``ag2net eval`` saves: ``load_run`` loads a baseline and a
regressed run (schema 0.2, per-scorer pass rates and stats as AG2 computes them), and ``RunDiff`` (strict:
the runs graded the same tasks and checks) finds the same regressions ag2net's comparison does. ag2 runs in
the interop virtualenv the wire tests build (``ag2_python``); ag2net itself never imports ag2."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from test_eval_support import record_demo_file
from test_ws_interop import ag2_python  # noqa: F401  (the fixture)

from ag2net.agent.models import ScriptedModel
from ag2net.eval import Selector, Variant, builtin, compare_runs, evaluate, read_cohort

READ = """
import json, sys
from ag2.eval import load_run, RunDiff
base, cur = load_run(sys.argv[1]), load_run(sys.argv[2])
diff = cur.diff(base)
assert isinstance(diff, RunDiff)
print(json.dumps({
    "schema": [base.schema_version, cur.schema_version],
    "tasks": [t.task.task_id for t in cur.tasks],
    "pass_rate": cur.aggregates.pass_rate,
    "turns_mean": cur.score_stats("turns").mean,
    "regressions": [list(r) for r in diff.regressions],
    "deltas": {k: list(v) for k, v in diff.pass_rate_deltas.items()},
    "summary": diff.summary().splitlines()[0],
    "run_summary": cur.summary().splitlines()[0],
}))
"""


def test_ag2_load_run_and_run_diff_read_two_saved_runs(ag2_python, tmp_path):  # noqa: F811
    db = tmp_path / "demo.db"
    record_demo_file(db)
    cohort = read_cohort(str(db), Selector(types=["conversation", "discussion"]))
    scorers = [builtin("closed:max_turns"), builtin("turns"), builtin("reproduced")]
    base = asyncio.run(evaluate(cohort, Variant(), scorers))
    view = {"name": "windowed_summary", "recent_n": 2}
    cur = asyncio.run(
        evaluate(cohort, Variant("view", {"critic": view}, live=ScriptedModel("ok.", loop=True)), scorers)
    )
    base.save(tmp_path / "base.json")
    cur.save(tmp_path / "cur.json")
    script = tmp_path / "read.py"
    script.write_text(READ)
    done = subprocess.run(
        [str(ag2_python), str(script), str(tmp_path / "base.json"), str(tmp_path / "cur.json")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["schema"] == ["0.2", "0.2"]
    assert seen["tasks"] == [m.channel_id for m in cohort]
    assert seen["pass_rate"] == {k: v for k, v in cur.to_dict()["aggregates"]["pass_rate"].items()}
    assert seen["turns_mean"] == cur.mean("turns")
    ours = compare_runs(cur, base)
    assert sorted(map(tuple, seen["regressions"])) == sorted((f.key, f.channel_id) for f in ours.regressions)
    assert seen["regressions"] and seen["deltas"]["reproduced"] == [1.0, 0.0]
    assert seen["summary"].startswith(f"Diff {cur.run_id} vs {base.run_id}")
    assert seen["run_summary"] == f"Run {cur.run_id}"
    assert "ag2" not in {p.split(".")[0] for p in _imported_by_eval()}


def _imported_by_eval() -> set[str]:
    """The modules ``import ag2net.eval`` loads in a fresh interpreter (ag2 must not be one of them)."""
    root = Path(__file__).resolve().parent.parent
    code = "import sys, ag2net.eval, ag2net.eval.cli; print('\\n'.join(sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=root, check=True
    ).stdout
    return set(out.split())

"""``ag2net serve``'s garbage-collector setting: what ``tune_for_latency`` does, and a bad ``--gc`` in one sentence."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from ag2net.cli import app
from ag2net.server.gc_tuning import LATENCY_THRESHOLDS

PROBE = """
import gc, json
from ag2net.server.gc_tuning import tune_for_latency
alive = [[i] for i in range(1000)]  # containers alive at the call: frozen, never walked again
before = tune_for_latency()
cycle = []; cycle.append(cycle); del cycle  # a cycle made after: a young collection still frees it
print(json.dumps({"before": before, "after": gc.get_threshold(), "frozen": gc.get_freeze_count(),
                  "freed": gc.collect(0) + gc.collect(1)}))
"""


def test_tune_for_latency_freezes_what_is_alive_and_sets_the_thresholds():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    figures = json.loads(out)
    assert tuple(figures["before"]) == (700, 10, 10)  # CPython's, untouched until the call
    assert tuple(figures["after"]) == LATENCY_THRESHOLDS
    assert figures["frozen"] > 1000  # the probe's containers and everything imported
    assert figures["freed"] >= 1


def test_importing_the_module_changes_nothing():
    code = "import gc; import ag2net.server.gc_tuning; print(gc.get_threshold(), gc.get_freeze_count())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "(700, 10, 10) 0"


def test_a_bad_gc_setting_is_one_sentence_and_exit_2():
    result = CliRunner().invoke(app, ["serve", "--gc", "fast"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == ["Error: --gc 'fast' is not a collector setting; use one of: latency, default"]

"""ag2net beside ag2 1.2.1 in the same run: each workload alternated, round by round, and the ratio printed.

Runs ``bench/hub.py`` (this interpreter) and ``bench/ag2_side_by_side.py`` (an interpreter with ``ag2==1.2.1`` and
``watchdog``: ``--ag2-python``, by default the interop tests' ``~/.cache/ag2net-interop/venv/bin/python``) in
turn, swapping which goes first every round, so both see the same minutes of a shared machine. Pairs
(issue 28's targets):
- ``e2e``: one post at a time, durable against ``kill -9`` (ag2net's SQLite commit; ag2's disk store):
  target at least 5x, and ag2net's last tenth within 1.2x its first.
- ``e2e_pipelined``: 64 posts in flight into one channel, ag2net with ``fsync`` against ag2's disk store
  pipelined: target at least 10x.
- ``fanout``: 2,000 broadcasts to 20 participants (deliveries/s), ag2net's SQLite store against ag2's disk
  store and, for reference, its memory store: target 100,000 deliveries/s.
Prints every run's JSON line (tagged ``side`` and ``round``), then one line per pair: the medians, the median of
the per-round ratios, and whether the target is met.
Usage: ``python bench/vs_ag2.py [--rounds 3] [--n 20000] [--pairs e2e,e2e_pipelined,fanout]``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
DEFAULT_AG2 = Path.home() / ".cache" / "ag2net-interop" / "venv" / "bin" / "python"

#: pair -> (ag2net bench/hub.py --bench, ag2 bench, ag2 store, figure, target ratio or None, absolute target)
PAIRS: dict[str, tuple[str, str, str, str, float | None, float | None]] = {
    "e2e": ("e2e", "e2e", "disk", "envelopes_per_s", 5.0, None),
    "e2e_pipelined": ("e2e_pipelined_fsync", "e2e_pipelined", "disk", "envelopes_per_s", 10.0, None),
    "fanout": ("fanout", "fanout", "disk", "deliveries_per_s", None, 100_000.0),
}


def run(argv: list[str]) -> list[dict]:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv[:2])} failed:\n{proc.stderr[-2000:]}")
    return [json.loads(raw) for raw in proc.stdout.splitlines() if raw.startswith("{")]


def figure(lines: list[dict], bench_prefix: str, name: str) -> dict:
    for line in lines:
        if line.get("bench", "").startswith(bench_prefix) and name in line:
            return line
    sys.exit(f"no {name} in the {bench_prefix} output: {lines}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--n", type=int, default=20_000, help="envelopes of the e2e workloads")
    parser.add_argument("--pairs", default=",".join(PAIRS), help=f"comma-separated among {', '.join(PAIRS)}")
    parser.add_argument("--ag2-python", type=Path, default=DEFAULT_AG2, help="an interpreter with ag2==1.2.1")
    args = parser.parse_args()
    pairs = [p.strip() for p in args.pairs.split(",") if p.strip()]
    unknown = [p for p in pairs if p not in PAIRS]
    if unknown:
        parser.error(f"--pairs: unknown pair {unknown[0]!r}; use one of {', '.join(PAIRS)}")
    if not args.ag2_python.exists():
        parser.error(
            f"--ag2-python: {args.ag2_python} does not exist; make a venv with "
            "`pip install ag2==1.2.1 watchdog 'websockets>=14,<17'` and pass its python"
        )
    for pair in pairs:
        ours_bench, theirs_bench, store, name, ratio_target, absolute = PAIRS[pair]
        ours_cmd = [sys.executable, str(HERE / "hub.py"), "--bench", ours_bench, "--n", str(args.n)]
        theirs_cmd = [
            str(args.ag2_python),
            str(HERE / "ag2_side_by_side.py"),
            "--bench",
            theirs_bench,
            "--store",
            store,
            "--n",
            str(args.n),
        ]
        ours_runs: list[dict] = []
        theirs_runs: list[float] = []
        ratios: list[float] = []
        for rnd in range(args.rounds):
            sides = [("ag2net", ours_cmd), ("ag2_1.2.1", theirs_cmd)]
            got: dict[str, dict] = {}
            for side, cmd in sides if rnd % 2 == 0 else reversed(sides):
                prefix = ours_bench.removesuffix("_fsync") if side == "ag2net" else theirs_bench
                line = figure(run(cmd), prefix, name)
                line.update(side=side, round=rnd, pair=pair)
                print(json.dumps(line), flush=True)
                got[side] = line
            ours_runs.append(got["ag2net"])
            theirs_runs.append(got["ag2_1.2.1"][name])
            ratios.append(got["ag2net"][name] / got["ag2_1.2.1"][name])
        ours_median = statistics.median(r[name] for r in ours_runs)
        summary: dict[str, object] = {
            "pair": pair,
            "figure": name,
            "rounds": args.rounds,
            "ag2net_median": round(ours_median),
            "ag2_median": round(statistics.median(theirs_runs)),
            "ratio_median": round(statistics.median(ratios), 2),
            "ratio_min": round(min(ratios), 2),
        }
        if "loop_cpu_us" in ours_runs[0]:
            summary["ag2net_loop_cpu_us_median"] = round(
                statistics.median(r["loop_cpu_us"] for r in ours_runs), 1
            )
        if ratio_target is not None:
            summary["target_ratio"] = ratio_target
            summary["met"] = statistics.median(ratios) >= ratio_target
        if absolute is not None:
            summary["target"] = absolute
            summary["met"] = ours_median >= absolute
        if pair == "e2e":
            tenth = statistics.median(r["last_over_first"] for r in ours_runs)
            summary["ag2net_last_over_first_median"] = round(tenth, 2)
            summary["met"] = bool(summary["met"]) and tenth <= 1.2
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

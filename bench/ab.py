"""Alternate ``bench/hub.py`` runs between source trees (A/B in the same minutes) and print medians.

On a shared machine one run says little: this runs each tree in turn, ``--rounds`` times, and prints every run's
JSON lines (tagged with the tree) and then one median line per tree and figure.
Usage: ``python bench/ab.py --tree before=/tmp/before --tree after=. [--rounds 5] [--out runs.jsonl]
[-- --bench e2e_pipelined_fsync,fanout --n 10000]`` (arguments after ``--`` go to ``bench/hub.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HUB = Path(__file__).with_name("hub.py")
FIGURES = ("envelopes_per_s", "deliveries_per_s", "loop_cpu_us", "process_cpu_us")


def key(line: dict) -> str:
    name = line["bench"]
    if "fsync" in line:
        name += "_fsync" if line["fsync"] else ""
    return name


def main() -> None:
    argv = sys.argv[1:]
    passthrough: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, passthrough = argv[:cut], argv[cut + 1 :]
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--tree", action="append", required=True, help="name=path of a source tree (repeatable)"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, help="append every run's JSON lines to this file")
    args = parser.parse_args(argv)
    trees: list[tuple[str, str]] = []
    for spec in args.tree:
        name, sep, path = spec.partition("=")
        if not sep or not Path(path).is_dir():
            parser.error(f"--tree: {spec!r} is not name=directory; give e.g. before=/tmp/before")
        trees.append((name, str(Path(path).resolve())))
    results: dict[tuple[str, str, str], list[float]] = {}
    out = args.out.open("a") if args.out else None
    for rnd in range(args.rounds):
        # Alternate the order too, so neither tree always runs first in a round.
        order = trees if rnd % 2 == 0 else list(reversed(trees))
        for name, path in order:
            env = dict(os.environ, PYTHONPATH=path)
            proc = subprocess.run(
                [sys.executable, str(HUB), *passthrough], env=env, capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                sys.exit(f"{name} round {rnd}: bench/hub.py failed:\n{proc.stderr}")
            for raw in proc.stdout.splitlines():
                line = json.loads(raw)
                line.update(tree=name, round=rnd, at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
                print(json.dumps(line), flush=True)
                if out:
                    out.write(json.dumps(line) + "\n")
                    out.flush()
                for fig in FIGURES:
                    if fig in line:
                        results.setdefault((key(line), fig, name), []).append(line[fig])
    for (bench, fig, name), values in sorted(results.items()):
        summary = {
            "median_of": bench,
            "figure": fig,
            "tree": name,
            "runs": len(values),
            "median": round(statistics.median(values), 1),
            "min": round(min(values), 1),
            "max": round(max(values), 1),
        }
        print(json.dumps(summary), flush=True)
        if out:
            out.write(json.dumps(summary) + "\n")
    if out:
        out.close()


if __name__ == "__main__":
    main()

"""Where a ``bench/hub.py`` workload's CPU goes: cProfile's own time per module and per function, as JSON.

The figures of ``bench/hub.py`` say how fast; this says where the rest goes when a target is not reached.
cProfile's clock is wall time and it inflates Python frames more than C calls (SQLite), so read the shares,
not the absolute times, and compare runs of the same workload only; ``C:<method 'poll' ...>`` is the event
loop idle (waiting for the writer thread's fsync, say): what pipelining could fill.
Usage: ``python bench/hotspots.py [--bench fanout|e2e|e2e_fsync|e2e_pipelined|e2e_pipelined_fsync] [--n 10000]
[--top 25]``; one line per module (``area``), then one per function (``function``), largest first.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import hub as bench_hub  # bench/hub.py, beside this file

WORKLOADS = ("fanout", "e2e", "e2e_fsync", "e2e_pipelined", "e2e_pipelined_fsync")


def area(filename: str, function: str) -> str:
    """``hub/delivery.py``, ``client/human_client.py``, ``asyncio/base_events.py``, ``C:<method ...>``."""
    if "ag2net/" in filename:
        return filename.split("ag2net/", 1)[1]
    if "/asyncio/" in filename:
        return "asyncio/" + filename.rsplit("/", 1)[1]
    if filename == "~":
        return "C:" + function
    return filename.rsplit("/", 1)[-1]


async def run(workload: str, n: int, tmp: Path) -> None:
    if workload == "fanout":
        await bench_hub.fanout(tmp / "p.db", n, 20)
        return
    fsync = workload.endswith("_fsync")
    inflight = 64 if workload.startswith("e2e_pipelined") else 1
    await bench_hub.e2e(tmp / "p.db", n, fsync, inflight)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", default="fanout", choices=WORKLOADS)
    parser.add_argument("--n", type=int, default=10_000, help="envelopes (fanout: broadcasts to 20)")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    n = args.n if args.bench != "fanout" or args.n != 10_000 else 2_000
    profiler = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        profiler.enable()
        asyncio.run(run(args.bench, n, Path(tmp)))
        profiler.disable()
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    by_area: Counter[str] = Counter()
    by_function: Counter[str] = Counter()
    for (filename, line, function), (_, _, own, _, _) in stats.items():
        by_area[area(filename, function)] += own
        by_function[f"{area(filename, function)}:{line}({function})"] += own
    total = sum(by_area.values()) or 1.0
    for kind, counter in (("area", by_area), ("function", by_function)):
        for name, own in counter.most_common(args.top):
            print(
                json.dumps({"profile": args.bench, kind: name, "share_percent": round(own / total * 100, 1)}),
                flush=True,
            )


if __name__ == "__main__":
    main()

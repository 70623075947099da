"""Budget (SPEC §6): a cohort of 100 recorded 20-envelope channels with no change, every turn answered from
the recording, replayed in ≤ 30 s with memory bounded (channels replayed ``--concurrency`` at a time).

The channels are recorded for real: the demo network runs once on a SQLite file, then its pairing
conversation (20 envelopes: the coder and the critic, the window eliding early turns, one ``say``) is
opened 99 more times with another first question. The cohort is read back read-only and evaluated with
``ag2net.eval.evaluate``; the figures are printed as one JSON object: wall and CPU seconds of the
evaluation, peak RSS before and after it, channels, turns, live calls (0 is required) and the verdicts.

    python bench/eval.py [--channels 100] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ag2net import Hub, HubClient
from ag2net.demo import CONVERSATION_TURNS, start_demo
from ag2net.eval import Selector, Settings, Variant, builtin, evaluate, read_cohort
from ag2net.ids import IdMint
from ag2net.store import SqliteStore

BUDGET_S = 30.0


async def record(path: Path, channels: int) -> None:
    hub = await Hub.open(
        SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0, ids=IdMint.seeded(25)
    )
    hc = HubClient.local(hub)
    demo = await start_demo(hc)
    await asyncio.wait_for(demo.run(), timeout=60)
    for i in range(channels - 1):
        ch = await demo._open(
            "pairing",
            "coder",
            type="conversation",
            target="critic",
            knobs={"max_turns": CONVERSATION_TURNS},
            intent="pairing",
        )
        await ch.send(f"Pairing on the sync engine design, round {i + 2}: where do we start?")
        await demo._until_closed(ch.channel_id)
    await demo.close()
    await hc.close()
    await hub.close()


def rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--channels", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "cohort.db"
        t0 = time.perf_counter()
        asyncio.run(record(db, args.channels))
        recorded_s = time.perf_counter() - t0
        members = read_cohort(str(db), Selector(types=["conversation"], limit=args.channels))
        sizes = sorted({len(m.source.envelopes) for m in members})
        rss_before = rss_mib()
        specs = ("reproduced", "closed:max_turns", "turns", "live")
        scorers = [builtin(spec) for spec in specs]
        cpu0, wall0 = time.process_time(), time.perf_counter()
        run = asyncio.run(
            evaluate(members, Variant(), scorers, settings=Settings(concurrency=args.concurrency))
        )
        wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    totals = run.totals()
    figures = {
        "channels": len(members),
        "envelopes_per_channel": sizes,
        "concurrency": args.concurrency,
        "record_s": round(recorded_s, 2),
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "per_channel_ms": round(wall / max(len(members), 1) * 1000, 1),
        "peak_rss_mib_before": round(rss_before, 1),
        "peak_rss_mib_after": round(rss_mib(), 1),
        "turns": totals["turns"],
        "live_calls": totals["live_calls"],
        "reproduced": run.pass_rate("reproduced"),
        "errors": totals["errors"],
        "budget_s": BUDGET_S,
        "within_budget": wall <= BUDGET_S
        and totals["live_calls"] == 0
        and run.pass_rate("reproduced") == 1.0,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()

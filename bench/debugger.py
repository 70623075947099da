"""Time the debugger's library (``ag2net.debug``) on a 100,000-envelope channel; prints JSON lines.

The channel is a real conversation on a real hub (SQLite in a temporary folder by default, so envelopes
older than the WAL cache's window come back from the store), filled through ``hub.post_envelope``; its
last 1,000 texts form one causation chain (each answers the one before).

Budgets (issue 12): the visibility matrix of one visible page (50 envelopes) <= 100 ms; scrubbing one step
<= 20 ms after the first fold; the causation tree of a 1,000-node chain <= 100 ms; a dry run <= 10 ms.
Each line reports the median and the worst of repeated calls, and the first (cold) call apart: it builds
what later calls reuse (a view's visibility index, the scrubber's fold, the causation index).

Run: ``python bench/debugger.py [--envelopes 100000] [--store sqlite|memory]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ag2net import EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.debug import causation_tree, dry_run, states_at, visibility
from ag2net.store import MemoryStore, SqliteStore

CHAIN = 1_000
PAGE = 50


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


async def timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, list[float]]:
    """(first call ms, later calls ms)."""
    t0 = time.perf_counter()
    await fn()
    first = (time.perf_counter() - t0) * 1000
    later = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        await fn()
        later.append((time.perf_counter() - t0) * 1000)
    return first, later


def figures(name: str, budget_ms: float, first: float, later: list[float], **extra: Any) -> None:
    median = statistics.median(later)
    emit(
        bench=name,
        cold_ms=round(first, 2),
        median_ms=round(median, 3),
        max_ms=round(max(later), 3),
        calls=len(later),
        budget_ms=budget_ms,
        within_budget=median <= budget_ms,
        **extra,
    )


async def fill(hub: Hub, n: int) -> tuple[str, str, str, list[str]]:
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    assert ana.agent_id and bob.agent_id
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    cid = md.channel_id
    for agent_id in (ana.agent_id, bob.agent_id):  # nobody connected: the fill measures no deliveries
        hub.unbind_endpoint(hub._bindings[agent_id], agent_id)
    t0 = time.perf_counter()
    start = hub.wal_count(cid)
    chain: list[str] = []
    for i in range(start, n):
        sender = ana.agent_id if i % 2 else bob.agent_id
        in_chain = i >= n - CHAIN
        cause = chain[-1] if in_chain and chain else None
        env = Envelope(cid, sender, None, EV_TEXT, {"text": f"message {i}: " + "lorem ipsum " * (i % 7 + 1)})
        env.causation_id = cause
        eid = await hub.post_envelope(env)
        if in_chain:
            chain.append(eid)
    emit(bench="fill", envelopes=hub.wal_count(cid), seconds=round(time.perf_counter() - t0, 2))
    return cid, ana.agent_id, bob.agent_id, chain


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envelopes", type=int, default=100_000)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(Path(tmp) / "bench.db") if args.store == "sqlite" else MemoryStore()
        hub = await Hub.open(store, ttl_sweep_interval=0, expectation_sweep_interval=0)
        try:
            cid, ana, _bob, chain = await fill(hub, args.envelopes)
            n = hub.wal_count(cid)
            common = {"envelopes": n, "store": args.store}

            # visibility: the last page, under the view in force (windowed_summary(10))
            first, later = await timed(lambda: visibility(hub, cid, first_seq=n - PAGE + 1, last_seq=n), 20)
            figures("visibility_page", 100, first, later, page=PAGE, **common)
            # and an old page (its envelopes come back from the store)
            first, later = await timed(lambda: visibility(hub, cid, first_seq=1001, last_seq=1000 + PAGE), 20)
            figures("visibility_old_page", 100, first, later, page=PAGE, **common)
            # with a full-transcript preview: that view projects every envelope (O(n) per participant)
            first, later = await timed(
                lambda: visibility(
                    hub, cid, first_seq=n - PAGE + 1, last_seq=n, preview_view="full_transcript"
                ),
                3,
            )
            figures("visibility_page_full_preview", 100, first, later, page=PAGE, **common)

            # scrubber: the first fold to the end, then single steps back and forth
            scrubber = await states_at(hub, cid)
            t0 = time.perf_counter()
            scrubber.at(n)
            fold_ms = (time.perf_counter() - t0) * 1000
            steps = []
            for seq in [*range(n - 1, n - 201, -1), *range(n // 2, n // 2 + 100), *range(10, 110)]:
                t0 = time.perf_counter()
                scrubber.at(seq)
                steps.append((time.perf_counter() - t0) * 1000)
            emit(
                bench="scrub_step",
                first_fold_ms=round(fold_ms, 1),
                median_ms=round(statistics.median(steps), 3),
                max_ms=round(max(steps), 3),
                calls=len(steps),
                budget_ms=20,
                within_budget=statistics.median(steps) <= 20,
                **common,
            )

            # causation: the tree of the 1,000-node chain, from its last envelope
            first, later = await timed(lambda: causation_tree(hub, chain[-1], channel_id=cid), 10)
            tree = await causation_tree(hub, chain[-1], channel_id=cid)
            assert len(tree.chain) == CHAIN and len(tree.nodes) == CHAIN
            figures("causation_chain_1000", 100, first, later, nodes=len(tree.nodes), **common)

            # dry run of the next text (admission, recipients, both projections, the fold)
            probe = Envelope(cid, ana, None, EV_TEXT, {"text": "what if?"})
            first, later = await timed(lambda: dry_run(hub, probe), 200)
            figures("dry_run", 10, first, later, **common)
        finally:
            await hub.close()


if __name__ == "__main__":
    asyncio.run(main())

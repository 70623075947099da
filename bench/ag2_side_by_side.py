"""The ``bench/hub.py`` ``e2e`` workload run on ``ag2`` 1.2.1's own hub, for a side-by-side figure.

Needs a virtual environment with ``ag2==1.2.1`` (the interop tests build one under
``~/.cache/ag2net-interop/venv``); run it with that interpreter:
``~/.cache/ag2net-interop/venv/bin/python bench/ag2_side_by_side.py [--n 20000] [--store disk|memory|sqlite]``.
Same workload and flags as ``bench/hub.py``: one human posts N EV_TEXT envelopes into a conversation, one at a
time, and a second human consumes every delivery; envelopes/s until the last delivery, plus the first and last
tenth per-envelope cost. Prints JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path


async def run(n: int, store_kind: str, tmp: Path) -> None:
    from ag2.network import EV_TEXT, Hub, HubClient, LocalLink, Passport

    if store_kind == "memory":
        from ag2.knowledge.memory import MemoryKnowledgeStore

        store = MemoryKnowledgeStore()
    elif store_kind == "sqlite":
        from ag2.knowledge.sqlite import SqliteKnowledgeStore

        store = SqliteKnowledgeStore(str(tmp / "ag2.db"))
    else:
        from ag2.knowledge.disk import DiskKnowledgeStore

        store = DiskKnowledgeStore(str(tmp / "disk"))
    hub = await Hub.open(store, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient(LocalLink(hub), hub=hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    # In ag2 a reading-only participant's inbox fills at 1,000 (its counter drops only when it posts);
    # lift the cap so the workload can run at all (ag2net counts acknowledgements instead, SPEC §3.20).
    from ag2.network import InboxBlock, LimitsBlock, Rule

    bob = await hc.register_human(
        Passport(name="bob", kind="human"), rule=Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=0)))
    )
    channel = await alice.open(type="conversation", target="bob")
    received = 0
    done = asyncio.Event()

    async def consume(envelope) -> None:
        nonlocal received
        if envelope.event_type == EV_TEXT:
            received += 1
            if received == n:
                done.set()

    bob.on_envelope(consume)
    marks = []
    t0 = time.perf_counter()
    for i in range(n):
        await alice.send(channel.channel_id, f"message number {i} with a little padding to be realistic")
        if i % (n // 10) == 0:
            marks.append(time.perf_counter())
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - t0
    marks.append(time.perf_counter())
    first = (marks[1] - marks[0]) / (n / 10)
    last = (marks[10] - marks[9]) / (n / 10)
    print(
        json.dumps(
            {
                "bench": "e2e_ag2_1.2.1",
                "store": store_kind,
                "envelopes": n,
                "seconds": round(elapsed, 3),
                "envelopes_per_s": round(n / elapsed),
                "first_tenth_us": round(first * 1e6, 1),
                "last_tenth_us": round(last * 1e6, 1),
            }
        ),
        flush=True,
    )
    await hc.close()
    await hub.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--store", choices=["disk", "memory", "sqlite"], default="disk")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(args.n, args.store, Path(tmp)))


if __name__ == "__main__":
    main()

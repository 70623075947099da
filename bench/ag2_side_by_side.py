"""The ``bench/hub.py`` workloads run on ``ag2`` 1.2.1's own hub, for a side-by-side figure.

Needs a virtual environment with ``ag2==1.2.1`` (the interop tests build one under
``~/.cache/ag2net-interop/venv``) plus ``watchdog``, which ag2's disk store imports but does not declare
(``~/.cache/ag2net-interop/venv/bin/pip install watchdog``); run it with that interpreter:
``~/.cache/ag2net-interop/venv/bin/python bench/ag2_side_by_side.py [--n 20000] [--store disk|memory|sqlite]
[--bench e2e,e2e_pipelined,fanout]``.
Same workloads as ``bench/hub.py``:
- ``e2e`` (the default): one human posts N EV_TEXT envelopes into a conversation, one at a time, and a second human
  consumes every delivery; envelopes/s until the last delivery, plus the first and last tenth per-envelope cost.
- ``e2e_pipelined``: the same with 64 posts in flight (``--inflight``).
- ``fanout``: 2,000 broadcasts to 20 participants of a discussion (deliveries/s).
Prints JSON lines.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

BENCHES = ("e2e", "e2e_pipelined", "fanout")


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def make_store(store_kind: str, tmp: Path):
    if store_kind == "memory":
        from ag2.knowledge.memory import MemoryKnowledgeStore

        return MemoryKnowledgeStore()
    if store_kind == "sqlite":
        from ag2.knowledge.sqlite import SqliteKnowledgeStore

        return SqliteKnowledgeStore(str(tmp / "ag2.db"))
    from ag2.knowledge.disk import DiskKnowledgeStore

    return DiskKnowledgeStore(str(tmp / "disk"))


def uncapped():
    # In ag2 a reading-only participant's inbox fills at 1,000 (its counter drops only when it posts);
    # lift the cap so the workload can run at all (ag2net counts acknowledgements instead, SPEC §3.20).
    from ag2.network import InboxBlock, LimitsBlock, Rule

    return Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=0)))


async def e2e(n: int, store_kind: str, tmp: Path, inflight: int) -> None:
    from ag2.network import EV_TEXT, Hub, HubClient, LocalLink, Passport

    hub = await Hub.open(make_store(store_kind, tmp), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient(LocalLink(hub), hub=hub)
    alice = await hc.register_human(Passport(name=f"alice{inflight}", kind="human"))
    bob = await hc.register_human(Passport(name=f"bob{inflight}", kind="human"), rule=uncapped())
    channel = await alice.open(type="conversation", target=f"bob{inflight}")
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
    if inflight == 1:
        for i in range(n):
            await alice.send(channel.channel_id, f"message number {i} with a little padding to be realistic")
            if i % (n // 10) == 0:
                marks.append(time.perf_counter())
    else:
        numbers = iter(range(n))

        async def poster() -> None:  # one of ``inflight`` posters, as bench/hub.py's
            for i in numbers:
                await alice.send(
                    channel.channel_id, f"message number {i} with a little padding to be realistic"
                )

        await asyncio.gather(*(poster() for _ in range(inflight)))
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - t0
    marks.append(time.perf_counter())
    fields = {
        "bench": "e2e_ag2_1.2.1" if inflight == 1 else "e2e_pipelined_ag2_1.2.1",
        "store": store_kind,
        "envelopes": n,
        "inflight": inflight,
        "seconds": round(elapsed, 3),
        "envelopes_per_s": round(n / elapsed),
    }
    if len(marks) >= 11:
        first = (marks[1] - marks[0]) / (n / 10)
        last = (marks[10] - marks[9]) / (n / 10)
        fields.update(first_tenth_us=round(first * 1e6, 1), last_tenth_us=round(last * 1e6, 1))
    emit(**fields)
    await hc.close()
    await hub.close()


async def fanout(store_kind: str, tmp: Path, n: int, participants: int) -> None:
    from ag2.network import Envelope, Hub, HubClient, LocalLink, Passport

    hub = await Hub.open(make_store(store_kind, tmp), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient(LocalLink(hub), hub=hub)
    humans = [
        await hc.register_human(Passport(name=f"p{i}", kind="human"), rule=uncapped())
        for i in range(participants + 1)
    ]
    ch = await humans[0].open(type="discussion", target=[h.passport.name for h in humans[1:]])
    expected = n * participants
    got = 0
    done = asyncio.Event()

    async def count(envelope) -> None:
        nonlocal got
        if envelope.event_type == "bench.broadcast":
            got += 1
            if got == expected:
                done.set()

    for h in humans[1:]:
        h.on_envelope(count)
    t0 = time.perf_counter()
    for i in range(n):
        await humans[0].post_envelope(
            Envelope(ch.channel_id, humans[0].agent_id, None, "bench.broadcast", {"i": i})
        )
    await asyncio.wait_for(done.wait(), 600)
    elapsed = time.perf_counter() - t0
    emit(
        bench="fanout_ag2_1.2.1",
        store=store_kind,
        broadcasts=n,
        participants=participants,
        deliveries=expected,
        seconds=round(elapsed, 3),
        deliveries_per_s=round(expected / elapsed),
    )
    await hc.close()
    await hub.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--store", choices=["disk", "memory", "sqlite"], default="disk")
    parser.add_argument("--inflight", type=int, default=64, help="posts in flight for e2e_pipelined")
    parser.add_argument(
        "--bench", default="e2e", help=f"comma-separated workloads among {', '.join(BENCHES)} (default: e2e)"
    )
    args = parser.parse_args()
    benches = [b.strip() for b in args.bench.split(",") if b.strip()]
    unknown = [b for b in benches if b not in BENCHES]
    if unknown:
        parser.error(f"--bench: unknown workload {unknown[0]!r}; use one of {', '.join(BENCHES)}")
    for bench in benches:
        with tempfile.TemporaryDirectory() as tmp:
            if bench == "e2e":
                asyncio.run(e2e(args.n, args.store, Path(tmp), 1))
            elif bench == "e2e_pipelined":
                asyncio.run(e2e(args.n, args.store, Path(tmp), args.inflight))
            else:
                asyncio.run(fanout(args.store, Path(tmp), 2_000, 20))


if __name__ == "__main__":
    main()

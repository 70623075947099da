"""Hub throughput benchmark: admission + delivery on the SQLite store, reads, hydrate, peak RSS.

Prints one JSON line per figure. Workload (kept fixed so it can be rerun beside ag2 1.2.1):
- ``e2e``: one human posts 20,000 EV_TEXT envelopes into a conversation, awaiting each post; the other
  participant (a human) consumes every delivery; envelopes/s until the last delivery, and the time
  per envelope of the first and the last tenth of the run.
- ``e2e_pipelined``: the same with 64 posts in flight: 64 posters, each posting its next as soon as its last
  returns (until 2026-12-03 evening: 20,000 tasks behind an ``asyncio.Semaphore(64)``, which cost the loop
  ~9 µs per envelope of its own, a fifth of ag2net's figure; ``bench/ag2_side_by_side.py`` changed with it).
  Each e2e line also gives the store writer's transactions (``envelopes_per_transaction``), its share of the
  wall time (``writer_busy_share``, fsync included) and the loop's (``loop_busy_share``); with the writer
  thread (fsync) ``overlap_ceiling_envelopes_per_s`` = envelopes / max(writer, loop): what overlapping
  admission with the commits could reach at best with groups of that size. A group split in two to
  overlap halves ``envelopes_per_transaction``: with a fixed window (64 in flight) that only pays while a
  transaction costs less than admitting half a group. Measured 2026-12-03 (``bench/ab.py``, 4 rounds): a
  free lock taking half the line, handed on before the group's dispatch, the group's commit started at once:
  19,693 vs 24,656 envelopes/s, loop CPU 31.3 vs 26.9 µs: twice the fsyncs and per-group costs, and the
  writer thread's Python (the rows, the GIL) does not overlap the loop's.
- ``fanout``: 2,000 broadcasts to 20 participants (deliveries/s).
- ``read_wal``: read_wal of the 20,000-envelope channel (cold from the store and warm from the cache).
- ``hydrate``: reopen a database holding 100,000 envelopes in 100 channels, after a clean close (adapter
  states from the shutdown snapshot, WALs loaded lazily) and as after a crash (every WAL folded).
- ``breakpoints``: CPU per admitted envelope with 20 inactive breakpoints (enabled, matching nothing: by
  sender, channel type, event type, text) against none, in alternating blocks of posts into one
  conversation; the median of each and the extra in percent (the target: at most 5).
Usage: python bench/hub.py [--n 20000] [--skip-hydrate] [--bench e2e,read_wal,e2e_pipelined,e2e_fsync,
e2e_pipelined_fsync,fanout,hydrate,breakpoints] (all by default; ``--skip-hydrate`` drops ``hydrate``).
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
from typing import Any

from ag2net.client import HubClient
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.hub import Hub
from ag2net.hub.hub import SNAPSHOT_KEY
from ag2net.identity import Passport
from ag2net.store import SqliteStore

BENCHES = (
    "e2e",
    "read_wal",
    "e2e_pipelined",
    "e2e_fsync",
    "e2e_pipelined_fsync",
    "fanout",
    "hydrate",
    "breakpoints",
)
#: The inactive breakpoints of the ``breakpoints`` figure: enabled, and matching none of its posts.
INACTIVE = (
    *(f"sender:nobody{i}" for i in range(10)),
    *(f"channel.type:workflow sender:ghost{i}" for i in range(4)),
    "type:custom.never",
    "type:ag2.task.created",
    "family:packet",
    "sender:alice text:never-said",
    "text:no-such-words",
    "re:/z{5}q/",
)


def emit(**fields):
    print(json.dumps(fields), flush=True)


def cpu_fields(start: tuple[float, float], count: int) -> dict[str, float]:
    """CPU time since ``start`` per envelope (or delivery), in µs: the event loop's thread, and the whole
    process (with the store's writer thread). Steadier than wall time on a shared machine."""
    loop_s = time.thread_time() - start[0]
    process_s = time.process_time() - start[1]
    return {
        "loop_cpu_us": round(loop_s / count * 1e6, 1),
        "process_cpu_us": round(process_s / count * 1e6, 1),
    }


def writer_fields(
    store: Any, start: tuple[float | None, int], n: int, elapsed: float, loop_s: float
) -> dict[str, float]:
    """The writer's share of the run: its transactions (fsync included) against the event loop's CPU.

    Admission and commits alternate per channel today; overlapping them (pipelined admission) could at
    best reach ``n / max(writer, loop)`` envelopes/s: ``overlap_ceiling_envelopes_per_s``."""
    if start[0] is None:  # an older tree's store does not time its writer
        return {}
    busy = store.commit_seconds - start[0]
    transactions = store.commits - start[1]
    fields: dict[str, float] = {
        "transactions": transactions,
        "envelopes_per_transaction": round(n / max(1, transactions), 1),
        "writer_busy_share": round(busy / elapsed, 3),
        "loop_busy_share": round(loop_s / elapsed, 3),
    }
    if store.writer == "thread":  # the inline writer commits on the loop's own thread: nothing to overlap
        fields["overlap_ceiling_envelopes_per_s"] = round(n / max(busy, loop_s, 1e-9))
    return fields


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def open_hub(path: Path, fsync: bool) -> Hub:
    return await Hub.open(
        SqliteStore(path, fsync=fsync),
        ttl_sweep_interval=0,
        expectation_sweep_interval=0,
        invite_ack_timeout=10,
    )


async def conversation(hub: Hub, a: str, b: str):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name=a, kind="human"))
    bob = await hc.register_human(Passport(name=b, kind="human"))
    ch = await alice.open(type="conversation", target=b)
    return hc, alice, bob, ch


async def e2e(path: Path, n: int, fsync: bool, inflight: int) -> str:
    hub = await open_hub(path, fsync)
    _, alice, bob, ch = await conversation(hub, f"alice{inflight}", f"bob{inflight}")
    received = 0
    done = asyncio.Event()

    async def consume(env: Envelope) -> None:
        nonlocal received
        if env.event_type == EV_TEXT:
            received += 1
            if received == n:
                done.set()

    bob.on_envelope(consume)
    marks: list[float] = []
    store = hub.store
    commits0 = getattr(store, "commit_seconds", None), getattr(store, "commits", 0)
    cpu0 = time.thread_time(), time.process_time()
    t0 = time.perf_counter()
    if inflight == 1:
        for i in range(n):
            await alice.send(ch.channel_id, f"message number {i} with a little padding to be realistic")
            if i % (n // 10) == 0:
                marks.append(time.perf_counter())
    else:
        numbers = iter(range(n))

        # one of ``inflight`` posters, each posting as soon as its last post returns
        async def poster() -> None:
            for i in numbers:
                await alice.send(ch.channel_id, f"message number {i} with a little padding to be realistic")

        await asyncio.gather(*(poster() for _ in range(inflight)))
    await asyncio.wait_for(done.wait(), 120)
    elapsed = time.perf_counter() - t0
    marks.append(time.perf_counter())
    cpu = cpu_fields(cpu0, n)
    fields = {
        "bench": "e2e" if inflight == 1 else "e2e_pipelined",
        "envelopes": n,
        "inflight": inflight,
        "fsync": fsync,
        "seconds": round(elapsed, 3),
        "envelopes_per_s": round(n / elapsed),
        **cpu,
        **writer_fields(store, commits0, n, elapsed, time.thread_time() - cpu0[0]),
    }
    if len(marks) >= 11:
        first = (marks[1] - marks[0]) / (n / 10)
        last = (marks[10] - marks[9]) / (n / 10)
        fields.update(
            first_tenth_us=round(first * 1e6, 1),
            last_tenth_us=round(last * 1e6, 1),
            last_over_first=round(last / first, 2),
        )
    emit(**fields)
    cid = ch.channel_id
    await hub.close()
    return cid


async def read_wal(path: Path, cid: str) -> None:
    hub = await open_hub(path, False)
    t0 = time.perf_counter()
    wal = await hub.read_wal(cid)
    cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    wal = await hub.read_wal(cid)
    warm = time.perf_counter() - t0
    t0 = time.perf_counter()
    page = await hub.read_wal_seq(cid, 10_000, 10_099)
    seq_ms = (time.perf_counter() - t0) * 1000
    emit(
        bench="read_wal",
        envelopes=len(wal),
        cold_ms=round(cold * 1000, 2),
        warm_ms=round(warm * 1000, 3),
        seq_range_100_ms=round(seq_ms, 3),
        rows=len(page),
    )
    await hub.close()


async def fanout(path: Path, n: int, participants: int) -> None:
    hub = await open_hub(path, False)
    hc = HubClient.local(hub)
    humans = [await hc.register_human(Passport(name=f"p{i}", kind="human")) for i in range(participants + 1)]
    ch = await humans[0].open(type="discussion", target=[h.passport.name for h in humans[1:]])
    expected = n * participants
    got = 0
    done = asyncio.Event()

    async def count(env: Envelope) -> None:
        nonlocal got
        if env.event_type == "bench.broadcast":
            got += 1
            if got == expected:
                done.set()

    for h in humans[1:]:
        h.on_envelope(count)
    cpu0 = time.thread_time(), time.process_time()
    t0 = time.perf_counter()
    for i in range(n):
        await humans[0].post_envelope(
            Envelope(ch.channel_id, humans[0].agent_id, None, "bench.broadcast", {"i": i})
        )
    await asyncio.wait_for(done.wait(), 120)
    elapsed = time.perf_counter() - t0
    emit(
        bench="fanout",
        broadcasts=n,
        participants=participants,
        deliveries=expected,
        seconds=round(elapsed, 3),
        deliveries_per_s=round(expected / elapsed),
        **cpu_fields(cpu0, expected),
    )
    await hub.close()


async def hydrate(path: Path, channels: int, per_channel: int) -> None:
    hub = await open_hub(path, False)
    hc = HubClient.local(hub)
    a = await hc.register_human(Passport(name="writer", kind="human"))
    await hc.register_human(Passport(name="reader", kind="human"))
    sem = asyncio.Semaphore(256)

    async def fill(cid: str) -> None:
        async def one(i: int) -> None:
            async with sem:
                await a.send(cid, f"hydrate filler {i} " + "x" * 80)

        await asyncio.gather(*(one(i) for i in range(per_channel)))

    cids = [(await a.open(type="conversation", target="reader")).channel_id for _ in range(channels)]
    await asyncio.gather(*(fill(c) for c in cids))
    await hub.close()
    t0 = time.perf_counter()
    hub = await open_hub(path, False)
    elapsed = time.perf_counter() - t0
    total = sum(hub.wal_count(c) for c in cids)
    emit(bench="hydrate", after="clean_close", channels=channels, envelopes=total, seconds=round(elapsed, 3))
    await hub.close()
    # After a crash there is no usable snapshot: every live channel's WAL is read and folded.
    store = SqliteStore(path)
    await store.open()
    await store.set_meta(SNAPSHOT_KEY, "")
    await store.close()
    t0 = time.perf_counter()
    hub = await open_hub(path, False)
    elapsed = time.perf_counter() - t0
    emit(
        bench="hydrate", after="crash_fold_all", channels=channels, envelopes=total, seconds=round(elapsed, 3)
    )
    await hub.close()


async def breakpoints(path: Path, n: int, rounds: int = 20) -> None:
    """Loop CPU per admitted envelope, alternating blocks without and with ``INACTIVE`` breakpoints."""
    hub = await open_hub(path, False)
    _, alice, bob, ch = await conversation(hub, "alice_bp", "bob_bp")

    async def consume(env: Envelope) -> None:
        return None

    bob.on_envelope(consume)
    cid = ch.channel_id
    block = max(100, n // (2 * rounds))
    per: dict[str, list[float]] = {"none": [], "inactive_20": []}
    ids: list[str] = []
    i = 0
    for _ in range(rounds):
        for mode in ("none", "inactive_20"):
            if mode == "inactive_20":
                ids = [(await hub.break_on(spec)).breakpoint_id for spec in INACTIVE]
            cpu0 = time.thread_time()
            for _ in range(block):
                await hub.post_envelope(Envelope(cid, alice.agent_id, None, EV_TEXT, {"text": f"m{i}"}))
                i += 1
            per[mode].append((time.thread_time() - cpu0) / block * 1e6)
            for bp_id in ids:
                await hub.remove_breakpoint(bp_id)
            ids = []
    assert await hub.list_waiting() == [], "an inactive breakpoint held a post"
    await hub.close()
    none, inactive = (sorted(v)[len(v) // 2] for v in per.values())
    emit(
        bench="breakpoints",
        envelopes=2 * rounds * block,
        breakpoints=len(INACTIVE),
        loop_cpu_us_none=round(none, 2),
        loop_cpu_us_inactive_20=round(inactive, 2),
        extra_percent=round((inactive - none) / none * 100, 2),
        target_percent=5,
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument(
        "--broadcasts", type=int, default=2_000, help="fan-out: broadcasts to 20 participants"
    )
    parser.add_argument("--skip-hydrate", action="store_true")
    parser.add_argument(
        "--bench", default=",".join(BENCHES), help=f"comma-separated workloads among {', '.join(BENCHES)}"
    )
    args = parser.parse_args()
    benches = {b.strip() for b in args.bench.split(",") if b.strip()}
    unknown = sorted(benches - set(BENCHES))
    if unknown:
        parser.error(f"--bench: unknown workload {unknown[0]!r}; use one of {', '.join(BENCHES)}")
    if args.skip_hydrate:
        benches.discard("hydrate")
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        if "e2e" in benches or "read_wal" in benches:
            cid = await e2e(tmpdir / "e2e.db", args.n, False, 1)
            if "read_wal" in benches:
                await read_wal(tmpdir / "e2e.db", cid)
        if "e2e_pipelined" in benches:
            await e2e(tmpdir / "e2e_p.db", args.n, False, 64)
        if "e2e_fsync" in benches:
            await e2e(tmpdir / "e2e_fsync.db", args.n, True, 1)
        if "e2e_pipelined_fsync" in benches:
            await e2e(tmpdir / "e2e_fsync_p.db", args.n, True, 64)
        if "fanout" in benches:
            await fanout(tmpdir / "fanout.db", args.broadcasts, 20)
        if "breakpoints" in benches:
            await breakpoints(tmpdir / "breakpoints.db", args.n)
        if "hydrate" in benches:
            await hydrate(tmpdir / "hydrate.db", 100, 1_000)
    emit(bench="peak_rss", mb=round(peak_rss_mb(), 1), python=sys.version.split()[0])


if __name__ == "__main__":
    asyncio.run(main())

"""Time the debugger's library (``ag2net.debug``) on a 100,000-envelope channel; prints JSON lines.

The channel is a real conversation on a real hub (SQLite in a temporary folder by default, so envelopes
older than the WAL cache's window come back from the store), filled through ``hub.post_envelope``; its
last 1,000 texts form one causation chain (each answers the one before).

Budgets (issue 12): the visibility matrix of one visible page (50 envelopes) <= 100 ms; scrubbing one step
<= 20 ms after the first fold; the causation tree of a 1,000-node chain <= 100 ms; a dry run <= 10 ms.
Each line reports the median, the 99th percentile and the worst of repeated calls, and the first (cold)
call apart: it builds what later calls reuse (a view's visibility index, the scrubber's fold, the causation
index). ``visibility_cold_first_page`` reopens a hub on the same SQLite file at the end (no WAL cache, no
index, no cold block in memory) and times the matrix's first page there, with the event loop's longest
stall while it ran (``loop_max_stall_ms``: how long a workbench computing it would freeze). The matrix no
longer builds a windowed view's index (it runs the view over a suffix of the WAL), so ``dry_run``'s first
call is the one that builds it here (the projections before and after need the summary's count: every
visible envelope the renderer renders, so each stored envelope is read back once), in slices that yield
(``cold_loop_max_stall_ms``). ``dry_run_cold_hub`` is a restart: the hub closes (its snapshot keeps the
adapter states and the visibility index summaries), a new one opens on the file (``open_ms``) and its
first dry run is timed, the channel's WAL load included (nothing ran before it); ``dry_run_cold_hub_scan``
does the same with the summaries removed from the snapshot (the scan of every stored envelope they
spare); ``dry_run_cold_process`` opens the hub in another Python process (a real restart: its first op
imports the ops module, compiled from source when ``PYTHONDONTWRITEBYTECODE`` is set) and times its first
dry run there. A
budget is met when the worst call is within it (``within_budget``; ``median_within`` says whether the
median is); every line carries the machine's load average (1 minute) when it was measured; the lines
carry the process CPU time too (``cold_cpu_ms``, ``proc_cpu_*``: ``time.process_time``).
The scrubber's steps include jumps into the channel's old part (its envelopes live in the store only).

Run: ``python bench/debugger.py [--envelopes 100000] [--store sqlite|memory]``
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ag2net import EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.debug import causation_tree, dry_run, states_at, visibility
from ag2net.hub.dry_run import channel_log
from ag2net.hub.records import SNAPSHOT_KEY
from ag2net.store import MemoryStore, SqliteStore

CHAIN = 1_000
PAGE = 50


def emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


CPU: dict[str, list[float]] = {}
"""Per bench, the CPU time (``time.thread_time``) of each later call: on a loaded machine the wall time's
worst is mostly waiting for a core, which the CPU time leaves out. ``CPU["proc"]``: the same calls'
process CPU time (``time.process_time``, every thread, SQLite's included); ``CPU["cold"]``: the first
call's process CPU time."""


async def timed(fn: Callable[[], Awaitable[Any]], repeat: int) -> tuple[float, list[float]]:
    """(first call ms, later calls ms); the later calls' CPU ms go to ``CPU["last"]`` and ``CPU["proc"]``,
    the first call's process CPU ms to ``CPU["cold"]``."""
    t0, p0 = time.perf_counter(), time.process_time()
    await fn()
    first = (time.perf_counter() - t0) * 1000
    CPU["cold"] = [(time.process_time() - p0) * 1000]
    later = []
    cpu = CPU["last"] = []
    proc = CPU["proc"] = []
    for _ in range(repeat):
        t0, c0, p0 = time.perf_counter(), time.thread_time(), time.process_time()
        await fn()
        later.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.thread_time() - c0) * 1000)
        proc.append((time.process_time() - p0) * 1000)
    return first, later


class LoopWatch:
    """The longest the event loop went without running a 1 ms ticker while a phase ran (beyond the 1 ms
    it asks for): what a Textual screen computing the same thing in an async worker would freeze for."""

    def __init__(self) -> None:
        self.max_stall_ms = 0.0
        self.ticks = 0
        self._last = 0.0
        self._task: asyncio.Task[None] | None = None

    def _stall(self) -> None:
        now = time.perf_counter()
        self.max_stall_ms = max(self.max_stall_ms, (now - self._last) * 1000 - 1)
        self._last = now

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.001)
            self.ticks += 1
            self._stall()

    async def __aenter__(self) -> LoopWatch:
        self._last = time.perf_counter()
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._stall()  # the interval the phase was in when it ended counts too
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)


class GcWatch:
    """The garbage collector's pauses while a phase runs (``gc.callbacks``): a full collection walks every
    object the process holds (a 100,000-envelope hub and a folded scrubber are millions), so a step that
    happens to trigger one waits for it; the lines report them beside the figures."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.pauses.append((int(info.get("generation", 0)), (time.perf_counter() - self._t0) * 1000))

    def __enter__(self) -> GcWatch:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def summary(self) -> dict[str, Any]:
        full = [ms for gen, ms in self.pauses if gen == 2]
        return {
            "gc_collections": len(self.pauses),
            "gc_full": len(full),
            "gc_max_ms": round(max((ms for _, ms in self.pauses), default=0.0), 2),
        }


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]


def figures(name: str, budget_ms: float, first: float | None, later: list[float], **extra: Any) -> None:
    median = statistics.median(later)
    worst = max(later)
    cold: dict[str, Any] = {}
    if first is not None:
        cold = {"cold_ms": round(first, 2), "cold_cpu_ms": round(CPU["cold"][0], 2)}
    proc: dict[str, Any] = {}
    if CPU.get("proc"):
        proc = {
            "proc_cpu_median_ms": round(statistics.median(CPU["proc"]), 3),
            "proc_cpu_max_ms": round(max(CPU["proc"]), 3),
        }
    emit(
        bench=name,
        **cold,
        median_ms=round(median, 3),
        p99_ms=round(p99(later), 3),
        max_ms=round(worst, 3),
        calls=len(later),
        budget_ms=budget_ms,
        within_budget=worst <= budget_ms,
        median_within=median <= budget_ms,
        cpu_median_ms=round(statistics.median(CPU["last"]), 3),
        cpu_max_ms=round(max(CPU["last"]), 3),
        **proc,
        load_1min=round(os.getloadavg()[0], 2),
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
        hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
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


async def cold_first_page(hub: Hub, cid: str, n: int, common: dict[str, Any]) -> None:
    """The matrix's first page on a hub just opened on the bench's store (no WAL cache, no visibility index,
    no cold block: what the workbench opened on that file does first), then the same page warm and an old
    page, each with its wall and process CPU time and the event loop's longest stall."""
    gc.collect()
    async with LoopWatch() as load_watch:
        t0, p0 = time.perf_counter(), time.process_time()
        await channel_log(hub, cid)  # the WAL cache loading the channel's newest envelopes (hub code)
        load_ms, load_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - p0) * 1000
    async with LoopWatch() as watch:
        t0, p0 = time.perf_counter(), time.process_time()
        matrix = await visibility(hub, cid, first_seq=n - PAGE + 1, last_seq=n)
        cold_ms, cold_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - p0) * 1000
    assert len(matrix.rows) == PAGE
    async with LoopWatch() as old_watch:
        t0, p0 = time.perf_counter(), time.process_time()
        await visibility(hub, cid, first_seq=1001, last_seq=1000 + PAGE)
        old_ms, old_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - p0) * 1000
    _, later = await timed(lambda: visibility(hub, cid, first_seq=n - PAGE + 1, last_seq=n), 20)
    emit(
        bench="visibility_cold_first_page",
        cold_ms=round(cold_ms, 2),
        cold_cpu_ms=round(cold_cpu, 2),
        loop_max_stall_ms=round(watch.max_stall_ms, 2),
        budget_ms=100,
        within_budget=cold_ms <= 100,
        old_page_cold_ms=round(old_ms, 2),
        old_page_cold_cpu_ms=round(old_cpu, 2),
        old_page_loop_max_stall_ms=round(old_watch.max_stall_ms, 2),
        warm_median_ms=round(statistics.median(later), 3),
        warm_max_ms=round(max(later), 3),
        warm_proc_cpu_median_ms=round(statistics.median(CPU["proc"]), 3),
        wal_load_ms=round(load_ms, 2),
        wal_load_cpu_ms=round(load_cpu, 2),
        wal_load_loop_max_stall_ms=round(load_watch.max_stall_ms, 2),
        load_1min=round(os.getloadavg()[0], 2),
        page=PAGE,
        **common,
    )


async def dry_runs(hub: Hub, cid: str, sender: str, name: str, common: dict[str, Any], **extra: Any) -> None:
    """The dry run of the next text: the first call (it builds the visibility indexes the projections'
    summaries count from, in slices that yield) with its wall and process CPU time and the event loop's
    longest stall, then 200 warm calls (wall and CPU medians). ``dry_run_cold_hub``: on the hub reopened
    on the bench's SQLite file, where every envelope but the cache's window lives in the store only."""
    probe = Envelope(cid, sender, None, EV_TEXT, {"text": "what if?"})
    gc.collect()
    with GcWatch() as watch:
        async with LoopWatch() as loop_watch:
            t0, p0 = time.perf_counter(), time.process_time()
            await dry_run(hub, probe)
            first, cold_cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - p0) * 1000
        _, later = await timed(lambda: dry_run(hub, probe), 200)  # (its own first call is warm too)
    CPU["cold"] = [cold_cpu]
    figures(
        name,
        10,
        first,
        later,
        cold_within_budget=first <= 10,
        cold_loop_max_stall_ms=round(loop_watch.max_stall_ms, 2),
        **watch.summary(),
        **extra,
        **common,
    )


async def restart(path: Path, *, keep_indexes: bool) -> tuple[Hub, dict[str, Any]]:
    """A hub opened on the bench's SQLite file the way a restarted server or workbench opens it (the
    last one closed: its snapshot is in the store), with how long the open took and what the snapshot
    holds; without ``keep_indexes`` the index summaries are taken out of the snapshot first."""
    store = SqliteStore(path)
    await store.open()
    snapshot = json.loads(await store.get_meta(SNAPSHOT_KEY) or "{}")
    entries = [e.pop("indexes", None) for e in (snapshot.get("channels") or {}).values()]
    if not keep_indexes:
        await store.set_meta(SNAPSHOT_KEY, json.dumps(snapshot))
    await store.close()
    gc.collect()
    t0, p0 = time.perf_counter(), time.process_time()
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    info = {
        "open_ms": round((time.perf_counter() - t0) * 1000, 1),
        "open_cpu_ms": round((time.process_time() - p0) * 1000, 1),
        "snapshot_index_bytes": sum(len(json.dumps(e)) for e in entries if e) if keep_indexes else 0,
    }
    return hub, info


RESTARTED = """
import asyncio, json, sys, time
from ag2net import EV_TEXT, Envelope, Hub
from ag2net.debug import dry_run
from ag2net.store import SqliteStore

async def main():
    hub = await Hub.open(SqliteStore(sys.argv[1]), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        probe = Envelope(sys.argv[2], sys.argv[3], None, EV_TEXT, {"text": "what if?"})
        t0, p0 = time.perf_counter(), time.process_time()
        await dry_run(hub, probe)
        first, cpu = (time.perf_counter() - t0) * 1000, (time.process_time() - p0) * 1000
        t0 = time.perf_counter()
        await dry_run(hub, probe)
        print(json.dumps({"cold_ms": round(first, 2), "cold_cpu_ms": round(cpu, 2),
                          "second_ms": round((time.perf_counter() - t0) * 1000, 2)}))
    finally:
        await hub.close()

asyncio.run(main())
"""


async def restarted_process(path: Path, cid: str, sender: str, common: dict[str, Any]) -> None:
    """The first dry run of a hub opened on the bench's file by another Python process."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RESTARTED, str(path), cid, sender, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    fields = json.loads(out)
    emit(
        bench="dry_run_cold_process",
        **fields,
        budget_ms=10,
        cold_within_budget=fields["cold_ms"] <= 10,
        dont_write_bytecode=bool(os.environ.get("PYTHONDONTWRITEBYTECODE")),
        load_1min=round(os.getloadavg()[0], 2),
        **common,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--envelopes", type=int, default=100_000)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.db"
        store = SqliteStore(path) if args.store == "sqlite" else MemoryStore()
        hub = await Hub.open(store, ttl_sweep_interval=0, expectation_sweep_interval=0)
        try:
            cid, ana, _bob, chain = await fill(hub, args.envelopes)
            n = hub.wal_count(cid)
            common = {"envelopes": n, "store": args.store}
            gc.collect()  # the fill's garbage is not the debugger's: its collection would land in a call

            # visibility: the last page, under the view in force (windowed_summary(10))
            with GcWatch() as watch:
                first, later = await timed(
                    lambda: visibility(hub, cid, first_seq=n - PAGE + 1, last_seq=n), 20
                )
            figures("visibility_page", 100, first, later, page=PAGE, **watch.summary(), **common)
            # and an old page (its envelopes come back from the store)
            with GcWatch() as watch:
                first, later = await timed(
                    lambda: visibility(hub, cid, first_seq=1001, last_seq=1000 + PAGE), 20
                )
            figures("visibility_old_page", 100, first, later, page=PAGE, **watch.summary(), **common)
            # with a full-transcript preview (a transcript is projected over the page only)
            first, later = await timed(
                lambda: visibility(
                    hub, cid, first_seq=n - PAGE + 1, last_seq=n, preview_view="full_transcript"
                ),
                20,
            )
            figures("visibility_page_full_preview", 100, first, later, page=PAGE, **common)
            first, later = await timed(
                lambda: visibility(
                    hub, cid, first_seq=1001, last_seq=1000 + PAGE, preview_view="named_transcript"
                ),
                20,
            )
            figures("visibility_old_page_named_preview", 100, first, later, page=PAGE, **common)

            # scrubber: the first fold to the end, then single steps back and forth
            scrubber = await states_at(hub, cid)
            t0 = time.perf_counter()
            scrubber.at(n)
            fold_ms = (time.perf_counter() - t0) * 1000
            steps = []
            cpu = CPU["last"] = []
            CPU["proc"] = []
            watch = GcWatch().__enter__()
            for seq in [
                *range(n - 1, n - 201, -1),
                *range(n // 2, n // 2 + 100),
                *range(10, 110),
                *range(n // 4, n // 4 - 100, -1),
                *(n * k // 20 for k in range(1, 20)),  # jumps, each into another block
            ]:
                t0, c0 = time.perf_counter(), time.thread_time()
                scrubber.at(seq)
                steps.append((time.perf_counter() - t0) * 1000)
                cpu.append((time.thread_time() - c0) * 1000)
            watch.__exit__()
            figures(
                "scrub_step", 20, None, steps, first_fold_ms=round(fold_ms, 1), **watch.summary(), **common
            )

            # causation: the tree of the 1,000-node chain, from its last envelope
            first, later = await timed(lambda: causation_tree(hub, chain[-1], channel_id=cid), 10)
            tree = await causation_tree(hub, chain[-1], channel_id=cid)
            assert len(tree.chain) == CHAIN and len(tree.nodes) == CHAIN
            figures("causation_chain_1000", 100, first, later, nodes=len(tree.nodes), **common)

            # dry run of the next text (admission, recipients, both projections, the fold); the first call
            # builds the participants' visibility indexes (nobody projected during the fill)
            await dry_runs(hub, cid, ana, "dry_run", common)

            # the first page on a fresh hub over the same store (SQLite: the memory store dies with its hub)
            if args.store == "sqlite":
                await hub.close()
                hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
                await cold_first_page(hub, cid, n, common)
                # a restart, then its first dry run (the WAL load included), with and without the
                # index summaries the closing hub kept
                await hub.close()
                hub, info = await restart(path, keep_indexes=True)
                await dry_runs(hub, cid, ana, "dry_run_cold_hub", common, **info)
                await hub.close()
                hub, info = await restart(path, keep_indexes=False)
                await dry_runs(hub, cid, ana, "dry_run_cold_hub_scan", common, **info)
                await hub.close()  # (its snapshot keeps the summaries again)
                await restarted_process(path, cid, ana, common)
                hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
        finally:
            await hub.close()


if __name__ == "__main__":
    asyncio.run(main())

"""WebSocket transport figures over loopback: envelopes/s and post-to-delivery latency (p50/p99) with 1, 10
and 100 connected clients, and memory per idle connection. Every figure is printed as one JSON line.

Run ``python bench/ws.py`` (``--quick`` for smaller runs, ``--store sqlite`` for a durable hub). The hub
runs in a child process (this script with ``--serve``), so server and clients each have an interpreter.
With one client, sender and receiver share one connection; with N > 1, N/2 senders each talk to their
own receiver on a conversation channel. The throughput run keeps about ``--inflight`` posts in flight
across all senders; the latency run has one per sender. Latency is measured from just before ``post_envelope`` to the
receiver's callback, on one clock (all clients live in this process).

``latency_at_half_peak`` (issue 28's WebSocket target: p99 <= 20 ms at half the measured peak): after the
throughput run, the senders post open-loop on a fixed schedule at half the envelopes/s just measured, for
``--paced-seconds``; latency runs from each post's *scheduled* time (a stall delays the posts behind it and
counts against them: no coordinated omission) to the receiver's callback; p50/p99/p99.9/max and the budget.

``server_cpu_us_per_envelope`` (throughput and paced runs): the served hub's user + system CPU over the run
divided by the envelopes delivered; ``server_system_cpu_share_of_cpu`` (paced): how much of it was the kernel's
(socket writes and reads, epoll waits and wake-ups). ``--clients 10`` runs one client count; ``--no-idle-memory`` skips the
memory figure.

The garbage collector: the served hub tunes its own as ``ag2net serve`` does (``ag2net.server.gc_tuning``;
``--server-gc default`` keeps CPython's); this process, the load, tunes its too unless ``--client-gc default``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ag2net import EV_TEXT, Envelope, HubClient, Passport

RUN = os.urandom(3).hex()
PROBE: object = None  # bench/ws_probe when --probe (diagnosis: stamps on each stage of each envelope)


def emit(**figures: object) -> None:
    print(json.dumps({"bench": "ws", **figures}), flush=True)


def rss_kib(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("VmRSS not found in /proc status")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------------------------- server


PACED_P99_BUDGET_MS = 20.0


async def serve(store: str, gc_mode: str, probe: str | None = None) -> None:
    from ag2net.hub import Hub
    from ag2net.server import serve_ws
    from ag2net.store import MemoryStore, SqliteStore

    tmp = tempfile.mkdtemp(prefix="ag2net-bench-ws-")
    backend = SqliteStore(Path(tmp) / "hub.db") if store == "sqlite" else MemoryStore()
    hub = await Hub.open(backend, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=30)
    if gc_mode == "latency":
        from ag2net.server.gc_tuning import tune_for_latency

        tune_for_latency()
    if probe:
        sys.path.insert(0, str(Path(__file__).parent))
        import ws_probe

        ws_probe.install_server(probe)
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        print(f"READY {server.port}", flush=True)
        await asyncio.Event().wait()


async def start_server(
    store: str, gc_mode: str, probe: str | None = None
) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        __file__,
        "--serve",
        "--store",
        store,
        "--server-gc",
        gc_mode,
        *(["--probe", probe] if probe else []),
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), 30)
    if not line.startswith(b"READY "):
        raise RuntimeError(f"bench server did not start: {line!r}")
    return proc, f"ws://127.0.0.1:{line.split()[1].decode()}"


# ---------------------------------------------------------------------------------------------- clients


class Pair:
    """A sender and a receiver on one conversation channel (one or two connections)."""

    def __init__(self, sender, receiver, channel_id: str, sender_client: HubClient) -> None:
        self.sender = sender
        self.receiver = receiver
        self.channel_id = channel_id
        self.sender_client = sender_client
        self.latencies: list[float] = []
        self.expected = 0
        self.done = asyncio.Event()
        self.last_at = 0.0
        receiver.on_envelope(self._received)

    async def _received(self, env: Envelope) -> None:
        if env.event_type != EV_TEXT or env.channel_id != self.channel_id:
            return
        now = time.perf_counter()
        if PROBE is not None:
            PROBE.stamp("callback", env.event_data["text"])  # type: ignore[attr-defined]
        self.latencies.append(now - float(env.event_data["text"]))
        self.last_at = now
        if len(self.latencies) >= self.expected:
            self.done.set()

    def arm(self, expected: int) -> None:
        self.latencies = []
        self.expected = expected
        self.done = asyncio.Event()

    async def post(self, at: float | None = None) -> None:
        """Post one text stamped ``at`` (a scheduled time), or now."""
        stamp = time.perf_counter() if at is None else at
        if PROBE is not None:
            PROBE.stamp("post", repr(stamp))  # type: ignore[attr-defined]
        await self.sender_client.post_envelope(
            Envelope(self.channel_id, self.sender.agent_id, None, EV_TEXT, {"text": repr(stamp)})
        )


async def make_pairs(url: str, clients: int) -> tuple[list[Pair], list[HubClient]]:
    made: list[HubClient] = []
    pairs: list[Pair] = []
    for i in range(max(1, clients // 2)):
        sc = HubClient.connect(url, rpc_timeout=120)
        rc = sc if clients == 1 else HubClient.connect(url, rpc_timeout=120)
        made.extend([sc] if rc is sc else [sc, rc])
        sender = await sc.register_human(Passport(name=f"s{i}-{clients}-{RUN}", kind="human"))
        receiver = await rc.register_human(Passport(name=f"r{i}-{clients}-{RUN}", kind="human"))
        channel = await sender.open(type="conversation", target=receiver.agent_id)
        pairs.append(Pair(sender, receiver, channel.channel_id, sc))
    return pairs, made


async def run_load(
    pairs: list[Pair], per_pair: int, window: int, server_pid: int | None = None
) -> dict[str, float]:
    for pair in pairs:
        pair.arm(per_pair)
    server_cpu0 = cpu_seconds(server_pid) if server_pid is not None else 0.0

    async def pump(pair: Pair, count: int) -> None:
        for _ in range(count):
            await pair.post()

    start = time.perf_counter()
    jobs = []
    for pair in pairs:
        share, extra = divmod(per_pair, window)
        jobs += [pump(pair, share + (1 if k < extra else 0)) for k in range(window)]
    await asyncio.gather(*jobs)
    await asyncio.wait_for(asyncio.gather(*(p.done.wait() for p in pairs)), 120)
    elapsed = max(p.last_at for p in pairs) - start
    latencies = [x for p in pairs for x in p.latencies]
    figures = {
        "envelopes": len(latencies),
        "seconds": round(elapsed, 3),
        "envelopes_per_s": round(len(latencies) / elapsed),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": round(percentile(latencies, 0.99) * 1000, 3),
        "mean_ms": round(statistics.fmean(latencies) * 1000, 3),
    }
    if server_pid is not None:
        figures["server_cpu_us_per_envelope"] = round(
            (cpu_seconds(server_pid) - server_cpu0) / len(latencies) * 1e6, 1
        )
    return figures


def cpu_seconds(pid: int, *, system_only: bool = False) -> float:
    """User + system (or, ``system_only``, system) CPU seconds of process ``pid`` so far (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = int(fields[12]) if system_only else int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def run_paced(pairs: list[Pair], rate: float, seconds: float, server_pid: int) -> dict[str, float]:
    """Open-loop posts at ``rate`` envelopes/s in all, each pair on its own fixed schedule (see the docstring).

    Also the CPU share of the served hub and of this process (the load) over the run: which side is busy."""
    server_cpu0, client_cpu0, wall0 = cpu_seconds(server_pid), time.process_time(), time.perf_counter()
    server_sys0 = cpu_seconds(server_pid, system_only=True)
    per_pair = rate / len(pairs)
    count = max(1, int(per_pair * seconds))
    for pair in pairs:
        pair.arm(count)
    start = time.perf_counter() + 0.1
    failed: list[BaseException] = []

    async def schedule(pair: Pair, offset: float) -> None:
        posts: list[asyncio.Task] = []
        for k in range(count):
            at = start + offset + k / per_pair
            delay = at - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            posts.append(asyncio.create_task(pair.post(at)))
        for outcome in await asyncio.gather(*posts, return_exceptions=True):
            if isinstance(outcome, BaseException):
                failed.append(outcome)

    await asyncio.gather(*(schedule(p, i / rate) for i, p in enumerate(pairs)))
    await asyncio.wait_for(asyncio.gather(*(p.done.wait() for p in pairs)), 120)
    wall = time.perf_counter() - wall0
    server_cpu = cpu_seconds(server_pid) - server_cpu0
    server_sys = cpu_seconds(server_pid, system_only=True) - server_sys0
    server_share = server_cpu / wall
    client_share = (time.process_time() - client_cpu0) / wall
    latencies = sorted(x for p in pairs for x in p.latencies)
    p99 = round(percentile(latencies, 0.99) * 1000, 3)
    return {
        "rate_per_s": round(rate),
        "envelopes": len(latencies),
        "failed": len(failed),
        "p50_ms": round(percentile(latencies, 0.50) * 1000, 3),
        "p99_ms": p99,
        "p99_9_ms": round(percentile(latencies, 0.999) * 1000, 3),
        "max_ms": round(latencies[-1] * 1000, 3),
        "server_cpu_share": round(server_share, 2),
        "server_cpu_us_per_envelope": round(server_cpu / max(1, len(latencies)) * 1e6, 1),
        "server_system_cpu_share_of_cpu": round(server_sys / server_cpu, 2) if server_cpu else 0.0,
        "load_cpu_share": round(client_share, 2),
        "budget_p99_ms": PACED_P99_BUDGET_MS,
        "within_budget": p99 <= PACED_P99_BUDGET_MS and not failed,
    }


async def idle_memory(url: str, server_pid: int, count: int) -> None:
    gc.collect()
    await asyncio.sleep(0.2)
    server_before, client_before = rss_kib(server_pid), rss_kib()
    made = []
    for i in range(count):
        client = HubClient.connect(url, rpc_timeout=60)
        await client.register_human(Passport(name=f"idle{i}-{RUN}", kind="human"))
        made.append(client)
    gc.collect()
    await asyncio.sleep(0.5)
    server_after, client_after = rss_kib(server_pid), rss_kib()
    emit(
        figure="idle_connection_memory",
        connections=count,
        server_kib_per_connection=round((server_after - server_before) / count, 1),
        client_kib_per_connection=round((client_after - client_before) / count, 1),
        note="RSS growth divided by connections; each connection holds one bound human identity",
    )
    for client in made:
        await client.close()


async def main(args: argparse.Namespace) -> None:
    global PROBE
    if args.probe:
        sys.path.insert(0, str(Path(__file__).parent))
        import ws_probe

        ws_probe.install_client()
        PROBE = ws_probe
    server, url = await start_server(args.store, args.server_gc, args.probe)
    try:
        total = 2_000 if args.quick else 20_000
        sequential = 200 if args.quick else 2_000
        for clients in args.clients:
            pairs, made = await make_pairs(url, clients)
            await run_load(pairs, max(1, 200 // len(pairs)), 1)  # warm-up
            window = max(1, -(-args.inflight // len(pairs)))
            if args.client_gc == "latency":
                from ag2net.server.gc_tuning import tune_for_latency

                # the load generator, warmed up, before each client count (what the last count's clients
                # still hold frozen too): its pauses are not the hub's
                tune_for_latency()
            figures = await run_load(pairs, total // len(pairs), window, server.pid)
            emit(
                figure="throughput",
                clients=clients,
                store=args.store,
                posts_in_flight=window * len(pairs),
                **figures,
            )
            if PROBE is not None:
                os.kill(server.pid, signal.SIGUSR2)
                PROBE.reset()  # type: ignore[attr-defined]
                await asyncio.sleep(0.05)
            t0 = time.perf_counter()
            paced = await run_paced(pairs, figures["envelopes_per_s"] / 2, args.paced_seconds, server.pid)
            if PROBE is not None:
                t1 = time.perf_counter()
                hub_file = Path(args.probe) / "hub.json"
                hub_file.unlink(missing_ok=True)
                os.kill(server.pid, signal.SIGUSR1)
                while not hub_file.exists():
                    await asyncio.sleep(0.1)
                await asyncio.sleep(0.3)
                hub = json.loads(hub_file.read_text())
                load = json.loads(json.dumps(PROBE.snapshot()))  # type: ignore[attr-defined]
                emit(figure="probe", clients=clients, **PROBE.report(hub, load, t0, t1))  # type: ignore[attr-defined]
            emit(
                figure="latency_at_half_peak",
                clients=clients,
                store=args.store,
                server_gc=args.server_gc,
                client_gc=args.client_gc,
                **paced,
            )
            figures = await run_load(pairs, max(1, sequential // len(pairs)), 1)
            emit(figure="latency_one_in_flight", clients=clients, store=args.store, **figures)
            for client in made:
                await client.close()
        if args.idle_memory:
            await idle_memory(url, server.pid, 50 if args.quick else 200)
    finally:
        server.kill()
        await server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller runs")
    parser.add_argument("--store", choices=["memory", "sqlite"], default="memory")
    parser.add_argument(
        "--inflight", type=int, default=32, help="posts in flight (all senders) in the throughput run"
    )
    parser.add_argument(
        "--paced-seconds", type=float, default=10.0, help="length of each half-peak paced run (10; --quick 3)"
    )
    for side in ("server", "client"):
        parser.add_argument(
            f"--{side}-gc",
            choices=["latency", "default"],
            default="latency",
            help=f"the {side}'s garbage collector: tuned (latency, the default) or CPython's (default)",
        )
    parser.add_argument(
        "--clients",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 10, 100],
        help="comma-separated client counts to run (1,10,100)",
    )
    parser.add_argument(
        "--no-idle-memory",
        dest="idle_memory",
        action="store_false",
        help="skip the idle-connection memory figure",
    )
    parser.add_argument(
        "--probe", metavar="DIR", help="stamp each stage of each paced envelope (bench/ws_probe.py)"
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.quick and parsed.paced_seconds == 10.0:
        parsed.paced_seconds = 3.0
    if parsed.serve:
        asyncio.run(serve(parsed.store, parsed.server_gc, parsed.probe))
    else:
        asyncio.run(main(parsed))

"""Soak: 10 WebSocket clients post at a steady 800 envelopes/s into a real ``ag2net serve`` on SQLite.

The server is a child process (``ag2net serve --db <temp dir>/hub.db --port 0``). The clients come in pairs
on conversation channels: each client posts its share of the rate to its partner and receives its
partner's posts. The pairs run in ``--procs`` client processes (this script with ``--worker``; default 2,
so one busy event loop adds little queueing of its own, while the clients' CPU, which competes with the
server on a small machine, stays low). Every 10 s one JSON line gives the server's RSS (``VmRSS`` from
``/proc/<pid>/status``), that window's post-to-delivery latency, the server's CPU use and the machine's
load average (latency figures mean little on a machine busy with other work), and the load's own worst
event-loop lag (``load_lag_max_ms``: a client loop that stalls delays deliveries as a stalling hub would, so
a spike with a large load lag is the load's, not the hub's) and the worst round trip of a probe that asks
the hub for its cheapest answer every 20 ms (``hub_probe_rtt_max_ms``: how long the hub's loop was away); the
last line is a JSON
summary with the RSS slope after the first minute (least squares, MiB/min) and p50/p99/p99.9/max latency
over the whole run, against the budgets (slope <= 1 MiB/min, p99 <= 20 ms, p99.9 <= 50 ms). The exit status
is 1 when a budget is missed.

The garbage collector: ``ag2net serve`` tunes its own (``ag2net.server.gc_tuning``; ``--server-gc default``
passes ``--gc default`` to keep CPython's). The client processes are the load, not the system measured: by
default they tune theirs the same way (``tune_for_latency`` once their clients are connected), so their
full collections (40-80 ms of CPU each, measured) do not count against the hub; ``--client-gc default``
leaves them untouched. Both settings are printed in the start line.

Latency runs from just before the sender's ``post_envelope`` to the receiver's callback; both ends of a
pair live in the same process, so it is one clock. Posts follow a fixed schedule: a client that falls
behind posts the missed ones at once (at most ``--inflight`` outstanding), so a stalling server shows up
as latency, not as a lower rate. ``--rotate-seconds`` closes each pair's channel and opens a new one every
so often, so closed channels pile up on the server as they do in use.

Run ``python bench/soak.py`` (5 minutes) or ``python bench/soak.py --seconds 90`` for a shorter check.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

SLOPE_BUDGET_MIB_PER_MIN = 1.0
P99_BUDGET_MS = 20.0
P999_BUDGET_MS = 50.0
SAMPLE_SECONDS = 10.0
WARMUP_SECONDS = 60.0


def emit(**figures: object) -> None:
    print(json.dumps({"bench": "soak", **figures}), flush=True)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"VmRSS not found in /proc/{pid}/status")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time the process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ms(value: float | None) -> float | None:
    return None if value is None else round(value * 1000, 3)


def slope_per_minute(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of ``(seconds, MiB)`` points, in MiB per minute."""
    if len(points) < 2:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_m = sum(m for _, m in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (m - mean_m) for t, m in points)
    return cov / var * 60 if var else None


# ---------------------------------------------------------------------------------------------- worker


class Peer:
    """One WebSocket client: a human identity that posts to its partner and times what it receives."""

    def __init__(self, name: str, url: str) -> None:
        from ag2net import HubClient

        self.name = name
        self.client = HubClient.connect(url, rpc_timeout=60)
        self.human = None
        self.channel_id = ""
        self.window: list[float] = []  # latencies since the last report
        self.posted = 0
        self.failed = 0
        self.errors: list[str] = []

    async def register(self) -> None:
        from ag2net import Passport

        self.human = await self.client.register_human(Passport(name=self.name, kind="human"))
        self.human.on_envelope(self._received)

    async def _received(self, env) -> None:
        from ag2net import EV_TEXT

        if env.event_type == EV_TEXT:
            self.window.append(time.monotonic() - float(env.event_data["text"].split(" ", 1)[0]))

    async def post(self, payload: str) -> None:
        from ag2net import EV_TEXT, Envelope

        text = f"{time.monotonic()!r} {payload}"
        env = Envelope(self.channel_id, self.human.agent_id, None, EV_TEXT, {"text": text})
        try:
            await self.client.post_envelope(env)
            self.posted += 1
        except Exception as exc:  # counted and reported: a soak keeps going
            self.failed += 1
            if len(self.errors) < 3:
                self.errors.append(f"{type(exc).__name__}: {exc}")


async def open_pair(a: Peer, b: Peer) -> None:
    channel = await a.human.open(type="conversation", target=b.human.agent_id)
    a.channel_id = b.channel_id = channel.channel_id


async def pace(peer: Peer, rate: float, start: float, stop: float, inflight: int, payload: str) -> None:
    """Post at ``rate``/s on a fixed schedule from ``start`` to ``stop`` (``time.monotonic`` times)."""
    slots = asyncio.Semaphore(inflight)
    pending: set[asyncio.Task] = set()
    interval = 1.0 / rate
    due = start

    async def one() -> None:
        try:
            await peer.post(payload)
        finally:
            slots.release()

    while due < stop:
        delay = due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        await slots.acquire()
        task = asyncio.create_task(one())
        pending.add(task)
        task.add_done_callback(pending.discard)
        due += interval
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)


async def rotate(a: Peer, b: Peer, every: float, stop: float) -> None:
    """Close the pair's channel and open a fresh one every ``every`` seconds."""
    while time.monotonic() + every + 1 < stop:
        await asyncio.sleep(every)
        old = a.channel_id
        await open_pair(a, b)  # new posts go to the new channel from here on
        await asyncio.sleep(1.0)  # posts already on their way to the old channel land first
        await a.client.close_channel(old, reason="soak_rotate")
        print(json.dumps({"rotated": 1}), flush=True)


class LoopLag:
    """How late this process's own event loop runs: a tick every 5 ms, and how far past due each one woke.

    The clients are the load, not the system measured; a stalled client loop delays its posts' deliveries
    (the callback runs late) just as a stalled hub would, so each window reports the load's worst lag and
    how many ticks were more than 10 ms late, to tell the two apart."""

    TICK = 0.005
    STALL = 0.010

    def __init__(self) -> None:
        self.worst = 0.0
        self.stalls = 0

    async def run(self, stop: float) -> None:
        due = time.monotonic() + self.TICK
        while due < stop:
            await asyncio.sleep(max(0.0, due - time.monotonic()))
            late = time.monotonic() - due
            self.worst = max(self.worst, late)
            self.stalls += late > self.STALL
            due = max(due + self.TICK, time.monotonic())

    def take(self) -> tuple[float, int]:
        worst, stalls = self.worst, self.stalls
        self.worst, self.stalls = 0.0, 0
        return worst, stalls


class HubProbe:
    """A round trip to the served hub every 20 ms (``adapter_types``, the cheapest op) from this process,
    which only reads reports: its worst round trip per window says how long the hub's loop was away."""

    EVERY = 0.020
    STALL = 0.010

    def __init__(self, url: str) -> None:
        from ag2net import HubClient

        self.client = HubClient.connect(url, rpc_timeout=60)
        self.worst = 0.0
        self.stalls = 0

    async def run(self, stop: float) -> None:
        while time.monotonic() < stop:
            sent = time.monotonic()
            await self.client.adapter_types()
            rtt = time.monotonic() - sent
            self.worst = max(self.worst, rtt)
            self.stalls += rtt > self.STALL
            await asyncio.sleep(self.EVERY)

    def take(self) -> float:
        worst, self.worst = self.worst, 0.0
        return worst


async def worker(args: argparse.Namespace) -> None:
    """Run ``--pairs`` pairs of clients; report each window's latencies on stdout as JSON lines."""
    tag = os.urandom(3).hex()
    pairs = []
    for i in range(args.pairs):
        a, b = Peer(f"soak-{tag}-{i}a", args.url), Peer(f"soak-{tag}-{i}b", args.url)
        await a.register()
        await b.register()
        await open_pair(a, b)
        pairs.append((a, b))
    peers = [p for pair in pairs for p in pair]
    if args.client_gc == "latency":
        from ag2net.server.gc_tuning import tune_for_latency

        tune_for_latency()
    print(json.dumps({"ready": len(peers)}), flush=True)
    line = await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    start = float(line)  # time.monotonic() is CLOCK_MONOTONIC: one clock for every process here
    stop = start + args.seconds
    payload = "x" * args.payload_bytes
    jobs = [
        asyncio.create_task(
            pace(p, args.rate, start + i / (len(peers) * args.rate), stop, args.inflight, payload)
        )
        for i, p in enumerate(peers)
    ]
    if args.rotate_seconds > 0:
        jobs += [asyncio.create_task(rotate(a, b, args.rotate_seconds, stop)) for a, b in pairs]
    lag = LoopLag()
    jobs.append(asyncio.create_task(lag.run(stop)))

    def report(window: int, finished: float | None = None) -> None:
        latencies = [round(x, 6) for p in peers for x in p.window]
        for p in peers:
            p.window = []
        worst, stalls = lag.take()
        print(
            json.dumps(
                {
                    "window": window,
                    "latencies": latencies,
                    "posted": sum(p.posted for p in peers),
                    "failed": sum(p.failed for p in peers),
                    "errors": [e for p in peers for e in p.errors][:3],
                    "finished": finished,
                    "load_lag_max_ms": round(worst * 1000, 1),
                    "load_stalls": stalls,
                }
            ),
            flush=True,
        )

    window = 1
    while start + window * SAMPLE_SECONDS <= stop + 1e-6:
        await asyncio.sleep(max(0.0, start + window * SAMPLE_SECONDS - time.monotonic()))
        report(window)
        window += 1
    await asyncio.gather(*jobs)
    finished = time.monotonic()
    await asyncio.sleep(1.0)  # the last deliveries
    report(window, finished)  # the tail after the last full window
    for p in peers:
        with contextlib.suppress(Exception):
            await p.client.close()


# ---------------------------------------------------------------------------------------------- main


def serve_command(db: Path, gc_mode: str) -> list[str]:
    """``ag2net serve`` from this interpreter's environment (the console script, else ``-m ag2net.cli``)."""
    script = shutil.which("ag2net", path=str(Path(sys.executable).parent))
    head = [script] if script else [sys.executable, "-m", "ag2net.cli"]
    return [*head, "serve", "--db", str(db), "--host", "127.0.0.1", "--port", "0", "--gc", gc_mode]


async def start_server(db: Path, gc_mode: str) -> tuple[asyncio.subprocess.Process, str, asyncio.Task]:
    proc = await asyncio.create_subprocess_exec(
        *serve_command(db, gc_mode), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    seen: list[str] = []
    deadline = time.monotonic() + 60
    url = None
    while url is None:
        line = await asyncio.wait_for(proc.stdout.readline(), max(0.1, deadline - time.monotonic()))
        if not line:
            raise RuntimeError("ag2net serve exited before listening:\n" + "".join(seen))
        text = line.decode(errors="replace")
        seen.append(text)
        if "listening on " in text:
            url = text.split("listening on ", 1)[1].split()[0]

    async def drain() -> None:  # keep the pipe empty; pass on anything the server says
        while line := await proc.stdout.readline():
            sys.stderr.write("[server] " + line.decode(errors="replace"))

    return proc, url, asyncio.create_task(drain())


async def stop_process(proc: asyncio.subprocess.Process, sig: int = signal.SIGTERM) -> None:
    if proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            await asyncio.wait_for(proc.wait(), 10)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def main(args: argparse.Namespace) -> int:
    tmp = Path(tempfile.mkdtemp(prefix="ag2net-soak-"))
    server, url, drain = await start_server(tmp / "hub.db", args.server_gc)
    workers: list[asyncio.subprocess.Process] = []
    try:
        pairs = args.clients // 2
        procs = max(1, min(args.procs, pairs))
        per_client = args.rate / (2 * pairs)
        shares = [pairs // procs + (1 if k < pairs % procs else 0) for k in range(procs)]
        for share in shares:
            workers.append(
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--worker",
                    "--url",
                    url,
                    "--pairs",
                    str(share),
                    "--rate",
                    repr(per_client),
                    "--seconds",
                    repr(args.seconds),
                    "--inflight",
                    str(args.inflight),
                    "--payload-bytes",
                    str(args.payload_bytes),
                    "--rotate-seconds",
                    repr(args.rotate_seconds),
                    "--client-gc",
                    args.client_gc,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    limit=1 << 26,  # a report line carries every latency of its window
                )
            )
        for w in workers:
            line = await asyncio.wait_for(w.stdout.readline(), 120)
            if not line.startswith(b'{"ready"'):
                raise RuntimeError(f"a client process did not start: {line!r}")
        emit(
            figure="start",
            server_pid=server.pid,
            url=url,
            clients=2 * pairs,
            client_processes=procs,
            target_posts_per_s=args.rate,
            seconds=args.seconds,
            rss_mib=round(rss_kib(server.pid) / 1024, 1),
            server_gc=args.server_gc,
            client_gc=args.client_gc,
        )
        start = time.monotonic() + 1.0
        for w in workers:
            w.stdin.write(f"{start!r}\n".encode())
            await w.stdin.drain()

        reports: dict[int, list[dict]] = {}
        latest: dict[int, dict] = {}  # per client process: its last report (cumulative counts)
        rotated = 0

        async def listen(w: asyncio.subprocess.Process) -> None:
            nonlocal rotated
            while line := await w.stdout.readline():
                data = json.loads(line)
                if "rotated" in data:
                    rotated += data["rotated"]
                elif "window" in data:
                    reports.setdefault(data["window"], []).append(data)
                    latest[w.pid] = data

        listeners = [asyncio.create_task(listen(w)) for w in workers]
        probe = HubProbe(url)
        await probe.client.adapter_types()  # connected before the clock starts
        probing = asyncio.create_task(probe.run(start + args.seconds))
        probe_worst = 0.0
        samples: list[tuple[float, float]] = []
        latencies: list[float] = []
        cpu_before, cpu_at = cpu_seconds(server.pid), time.monotonic()
        cpu_start = cpu_before
        windows = int(args.seconds // SAMPLE_SECONDS)
        load_lag_worst, load_stalls = 0.0, 0
        for k in range(1, windows + 1):
            await asyncio.sleep(max(0.0, start + k * SAMPLE_SECONDS - time.monotonic()))
            elapsed = time.monotonic() - start
            rss = rss_kib(server.pid) / 1024
            samples.append((elapsed, rss))
            cpu_now, now = cpu_seconds(server.pid), time.monotonic()
            server_cpu = (cpu_now - cpu_before) / (now - cpu_at) * 100
            cpu_before, cpu_at = cpu_now, now
            deadline = time.monotonic() + 5
            while len(reports.get(k, [])) < len(workers) and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            got = reports.pop(k, [])
            window = [x for r in got for x in r["latencies"]]
            latencies += window
            load_lag = max((r["load_lag_max_ms"] for r in got), default=None)
            load_lag_worst = max(load_lag_worst, load_lag or 0.0)
            load_stalls += sum(r["load_stalls"] for r in got)
            probe_window = probe.take()
            probe_worst = max(probe_worst, probe_window)
            emit(
                t=round(elapsed, 1),
                rss_mib=round(rss, 1),
                posted=sum(r["posted"] for r in got),
                failed=sum(r["failed"] for r in got),
                delivered_in_window=len(window),
                window_p50_ms=ms(percentile(window, 0.50)),
                window_p99_ms=ms(percentile(window, 0.99)),
                window_max_ms=ms(max(window, default=None)),
                server_cpu_percent=round(server_cpu, 1),
                load_lag_max_ms=load_lag,
                hub_probe_rtt_max_ms=round(probe_window * 1000, 1),
                load_average=load_average(),
                client_reports=f"{len(got)}/{len(workers)}",
            )
        await asyncio.wait_for(asyncio.gather(*(w.wait() for w in workers)), args.seconds + 600)
        await asyncio.gather(*listeners)
        await probing
        await probe.client.close()
        # a client that fell behind keeps posting past the end of the schedule: rate over the real span
        ends = [r["finished"] for r in latest.values() if r.get("finished")]
        span = max(args.seconds, max(ends, default=start + args.seconds) - start)
        latencies += [x for k in sorted(reports) for r in reports[k] for x in r["latencies"]]
        posted = sum(r["posted"] for r in latest.values())
        failed = sum(r["failed"] for r in latest.values())
        errors = [e for r in latest.values() for e in r["errors"]][:5]
        slope_points = [(t, m) for t, m in samples if t >= WARMUP_SECONDS]
        slope = slope_per_minute(slope_points)
        p99 = ms(percentile(latencies, 0.99))
        p999 = ms(percentile(latencies, 0.999))
        slope_ok = slope is not None and slope <= SLOPE_BUDGET_MIB_PER_MIN
        tails_ok = p99 is not None and p99 <= P99_BUDGET_MS and p999 is not None and p999 <= P999_BUDGET_MS
        within = slope_ok and tails_ok
        emit(
            figure="summary",
            seconds=args.seconds,
            clients=2 * pairs,
            target_posts_per_s=args.rate,
            posted=posted,
            posting_seconds=round(span, 1),
            posts_per_s=round(posted / span, 1),
            delivered=len(latencies),
            failed=failed,
            errors=errors,
            channels_rotated=rotated,
            rss_first_mib=round(samples[0][1], 1) if samples else None,
            rss_last_mib=round(samples[-1][1], 1) if samples else None,
            rss_slope_mib_per_min_after_60s=None if slope is None else round(slope, 2),
            rss_slope_points=len(slope_points),
            p50_ms=ms(percentile(latencies, 0.50)),
            p99_ms=p99,
            p99_9_ms=p999,
            max_ms=ms(max(latencies, default=None)),
            load_lag_max_ms=load_lag_worst,
            load_stalls_over_10ms=load_stalls,
            hub_probe_rtt_max_ms=round(probe_worst * 1000, 1),
            hub_probe_rtts_over_10ms=probe.stalls,
            server_cpu_seconds_per_1000_posts=round((cpu_before - cpu_start) / max(posted, 1) * 1000, 3),
            machine_cores=os.cpu_count(),
            budget={
                "rss_slope_mib_per_min": SLOPE_BUDGET_MIB_PER_MIN,
                "p99_ms": P99_BUDGET_MS,
                "p99_9_ms": P999_BUDGET_MS,
            },
            server_gc=args.server_gc,
            client_gc=args.client_gc,
            within_budget=within,
        )
        return 0 if within else 1
    finally:
        for w in workers:
            await stop_process(w, signal.SIGKILL)
        await stop_process(server)
        drain.cancel()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long to post (default 300)")
    parser.add_argument("--rate", type=float, default=800.0, help="posts per second, all clients (800)")
    parser.add_argument("--clients", type=int, default=10, help="WebSocket clients, in pairs (10)")
    parser.add_argument("--procs", type=int, default=2, help="client processes the pairs share (2)")
    parser.add_argument("--payload-bytes", type=int, default=64, help="filler text per post (64)")
    parser.add_argument("--inflight", type=int, default=64, help="outstanding posts per client at most (64)")
    parser.add_argument(
        "--rotate-seconds",
        type=float,
        default=60.0,
        help="close each pair's channel and open a new one this often (0: never; default 60)",
    )
    parser.add_argument(
        "--server-gc",
        choices=["latency", "default"],
        default="latency",
        help="ag2net serve --gc: its tuned collector (latency, the default) or CPython's (default)",
    )
    parser.add_argument(
        "--client-gc",
        choices=["latency", "default"],
        default="latency",
        help="the client processes' collector: tuned like the server's (latency) or CPython's (default)",
    )
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--pairs", type=int, default=1, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.worker:
        asyncio.run(worker(parsed))
        sys.exit(0)
    if parsed.clients < 2:
        parser.error("--clients must be at least 2 (clients post to each other in pairs)")
    if parsed.seconds < SAMPLE_SECONDS:
        parser.error(f"--seconds must be at least {SAMPLE_SECONDS:g}")
    sys.exit(asyncio.run(main(parsed)))

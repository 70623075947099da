# ruff: noqa: E402
"""Workbench benchmarks (SPEC §6): tail append, first paint on a large database, key latency under load.

Prints one JSON line per figure:
- ``tail_append``: 100,000 envelopes appended to a headless ``EnvelopeTail`` in batches of 1,000 (the
  app's flush size at 10 Hz under heavy load), then one rendered frame; seconds, and memory growth
  (RSS, and Python allocations held by the tail measured with tracemalloc in a second run).
- ``first_paint``: a SQLite database with 100,000 envelopes in 20 channels; seconds from opening the
  hub to the workbench showing the newest page of the tail (``app.ready`` plus one frame), and the
  hub-open part alone.
- ``jump_to_seq_1``: a SQLite database with one 100,000-envelope channel, reopened; the workbench (the
  default ``tail_limit``, the newest page shown) filtered to that channel; the time from ``g`` entering
  the app to the frame showing seq 1 under the cursor (median and max of 5 jumps, End between two),
  the rows the tail holds after (memory stays bounded: ``tail_limit`` plus a page at most) and the RSS.
- ``key_latency``: while 1,000 envelopes/s arrive through the hub, the time from a key event entering
  the app (as the terminal driver delivers it) to the next refreshed frame after the tail's cursor moved
  (median and p95 over 60 presses), and this process's CPU time over each press (median and p95: far
  below the wall time means the press waited for another process on the core).
- ``first_rows_from_command``: what a person waits for. ``ag2net tui --memory --demo`` (and, without
  ``--skip-db``, ``ag2net tui --db`` on the 100,000-envelope database) run as a subprocess under a
  pseudo-terminal of 120x36; seconds from the exec to the first frame (the title on screen) and to the
  first tail rows on screen (an event type of a row written to the terminal), median and max of 3 runs.
  Everything counts: the interpreter, importing ``tui.app``, opening the hub, the demo's first post.
  With ``--million`` also on a 1,000,000-envelope database the bench builds once into a temp folder
  (``build_database`` says how long the build took and the size on disk). Each figure prints the
  one-minute load average over its runs, and the CPU seconds the process used by its first rows.
- ``import_tui_app``: a fresh interpreter importing ``tui.app``, wall and CPU seconds (median of 5; of
  ``--runs`` with ``--only import``, which prints this figure alone).
Usage: python bench/tui.py [--n 100000] [--skip-db] [--million] [--only jump|command|keys|import] [--runs 5]
"""

from __future__ import annotations

import sys
from pathlib import Path

# This file is named like the workbench package; keep its folder off the import path so ``tui`` resolves.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != Path(__file__).resolve().parent]

import tui  # noqa: I001 -- before textual: importing the workbench sets Textual's frame pacing (TEXTUAL_FPS)
import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import statistics
import struct
import subprocess
import tempfile
import termios
import time
import tracemalloc
from pathlib import Path

from textual import events
from textual.app import App, ComposeResult

from ag2net.client import HubClient
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import InboxFull
from ag2net.hub import Hub
from ag2net.identity import Passport
from ag2net.store import SqliteStore
from tui.app import build_app
from tui.settings import Settings
from tui.widgets.envelope_tail import EnvelopeTail

SENDERS = [f"{i:032x}" for i in range(1, 6)]
NAMES = {s: f"agent{i}" for i, s in enumerate(SENDERS)}


def emit(**fields: object) -> None:
    print(json.dumps(fields), flush=True)


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * 4096 / 1024 / 1024


def envelopes(n: int) -> list[Envelope]:
    return [
        Envelope(
            f"{i % 10:032x}",
            SENDERS[i % len(SENDERS)],
            None,
            EV_TEXT,
            {"text": f"message {i}: the quick brown fox jumps over the lazy dog"},
            envelope_id=f"{i:032x}",
            created_at=f"2026-01-01T10:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}000Z",
        )
        for i in range(n)
    ]


class TailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EnvelopeTail(lambda agent_id: NAMES.get(agent_id, agent_id), limit=200_000)


async def append_run(n: int, trace: bool) -> dict[str, float]:
    app = TailApp()
    async with app.run_test(size=(160, 50)) as pilot:
        tail = app.query_one(EnvelopeTail)
        await pilot.pause()
        rss_before = rss_mb()
        items = envelopes(n)
        if trace:
            tracemalloc.start()
        start = time.perf_counter()
        for k in range(0, n, 1000):
            tail.append_many((env, k + j + 1, "chan") for j, env in enumerate(items[k : k + 1000]))
            await asyncio.sleep(0)
        await pilot.pause()
        seconds = time.perf_counter() - start
        result = {"seconds": seconds, "rss_growth_mb": rss_mb() - rss_before, "rows": tail.row_count}
        if trace:
            current, _peak = tracemalloc.get_traced_memory()
            tracemalloc.stop()
            result["tail_python_mb"] = current / 1024 / 1024
        return result


async def build_database(path: Path, n: int, channels: int = 20) -> None:
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    opened = [await ana.open(type="conversation", target="bob") for _ in range(channels)]
    per = n // channels
    for index in range(per):
        await asyncio.gather(
            *(
                (ana if index % 2 else bob).send(ch.channel_id, f"line {index} of the long history")
                for ch in opened
            )
        )
    await hc.close()
    await hub.close()


async def build_long_channel(path: Path, n: int) -> str:
    """One conversation of ``n`` envelopes, posted with nobody connected (no deliveries to measure)."""
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    assert ana.agent_id and bob.agent_id
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    cid = md.channel_id
    for agent_id in (ana.agent_id, bob.agent_id):
        hub.unbind_endpoint(hub.delivery.bindings[agent_id], agent_id)
    for i in range(hub.wal_count(cid), n):
        sender = ana.agent_id if i % 2 else bob.agent_id
        await hub.post_envelope(
            Envelope(cid, sender, None, EV_TEXT, {"text": f"line {i + 1} of the long history"})
        )
    await hc.close()
    await hub.close()
    return cid


async def idle(app: App, timeout: float = 60.0) -> None:
    """Wait until no worker but the observe stream runs (startup reads, history, the agent view)."""
    await asyncio.sleep(0.5)  # the history starts after the first page's frame
    deadline = time.perf_counter() + timeout
    while any(w.is_running and w.group != "feed-observe" for w in app.workers):
        if time.perf_counter() > deadline:
            break
        await asyncio.sleep(0.01)
    await next_frame(app)


async def press(app: App, key: str) -> None:
    """Deliver ``key`` as the terminal driver does."""
    event = events.Key(key, key)
    event.set_sender(app)
    assert app._driver is not None
    app._driver.send_message(event)


async def jump_to_seq_1(path: Path, cid: str, tail_limit: int, jumps: int = 5) -> dict[str, float]:
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    human = await hc.attach_human("ana")
    settings = Settings(tail_limit=tail_limit)
    app = await build_app(hc, human, settings)
    samples: list[float] = []
    held: list[int] = []
    async with app.run_test(size=(160, 50)):
        while not app.ready:
            await asyncio.sleep(0.005)
        app.select_channel(cid)
        app.tail.focus()
        await idle(app)  # the agent view has read the channel's projection: the jump is timed alone
        for _ in range(jumps):
            start = time.perf_counter()
            await press(app, "g")
            while not (
                app.tail.cursor_row is not None and app.tail.cursor_row.seq == 1 and not app.tail.paging
            ):
                if not app.is_running:
                    raise RuntimeError("the workbench stopped during the jump run")
                await asyncio.sleep(0.0005)
            await next_frame(app)
            samples.append(time.perf_counter() - start)
            held.append(app.tail.row_count)
            await press(app, "G")
            while not (app.tail.following and not app.tail.paging):
                await asyncio.sleep(0.001)
            await next_frame(app)
        rss = rss_mb()
        page = app.tail.page_size
    await hc.close()
    await hub.close()
    return {
        "median_ms": statistics.median(samples) * 1000,
        "max_ms": max(samples) * 1000,
        "rows_held_max": max(held),
        "tail_limit": settings.tail_limit,
        "page": page,
        "rss_mb": rss,
    }


async def first_paint(path: Path) -> dict[str, float]:
    start = time.perf_counter()
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    human = await hc.attach_human("ana")
    opened = time.perf_counter()
    app = await build_app(hc, human, Settings())
    async with app.run_test(size=(160, 50)):
        while not app.ready:
            await asyncio.sleep(0.001)
        rows = app.tail.row_count
        await next_frame(app)
        painted = time.perf_counter()
    await hc.close()
    await hub.close()
    return {
        "seconds": painted - start,
        "hub_open_seconds": opened - start,
        "workbench_seconds": painted - opened,
        "rows_first_page": rows,
    }


_ANSI = re.compile(
    rb"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\\\)|[()][A-Za-z0-9]|[=>78DEHMNOPZc])"
)
_TITLE = b"ag2net workbench"
_TAIL_ROW = re.compile(rb"channel\.invite|channel\.opened|msg\.text")


def child_cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far (``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> float:
    """The one-minute load average: the machine is shared, so every wall figure says how busy it was."""
    return round(os.getloadavg()[0], 2)


def command_first_rows(argv: list[str], home: Path, timeout: float = 60.0) -> dict[str, float]:
    """Run ``argv`` under a 120x36 pseudo-terminal; seconds from the exec to the title and to the first
    tail row on screen (what the terminal was sent, escape sequences removed), and the CPU seconds the
    process had used by the first rows (far below the wall time: it waited for the core). The process is
    ended after."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    env = {
        **os.environ,
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "LINES": "36",
        "HOME": str(home),  # nothing of the person's: no config, no per-user database, no screenshots
        "XDG_CONFIG_HOME": str(home / "config"),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_STATE_HOME": str(home / "state"),
    }
    start = time.perf_counter()
    child = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True)
    os.close(slave)
    seen = b""
    title = rows = None
    cpu = float("nan")
    try:
        while rows is None:
            left = timeout - (time.perf_counter() - start)
            if left <= 0:
                raise TimeoutError(f"{' '.join(argv)} showed no tail row in {timeout:.0f} s: {seen[-300:]!r}")
            ready, _, _ = select.select([master], [], [], min(left, 0.5))
            if not ready:
                if child.poll() is not None:
                    raise RuntimeError(f"{' '.join(argv)} exited {child.returncode}: {seen[-300:]!r}")
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                raise RuntimeError(f"{' '.join(argv)} exited {child.poll()}: {seen[-300:]!r}") from None
            now = time.perf_counter()
            seen = (seen + _ANSI.sub(b"", chunk))[-20000:]
            if title is None and _TITLE in seen:
                title = now - start
            if title is not None and _TAIL_ROW.search(seen):
                rows = now - start
                cpu = child_cpu_seconds(child.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGTERM)
        try:
            child.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
        os.close(master)
    return {"first_frame_seconds": title or rows, "first_rows_seconds": rows, "cpu_seconds": cpu}


def first_rows_figure(label: str, argv: list[str], runs: int = 3) -> None:
    """Emit ``first_rows_from_command`` for ``argv``: median and max of ``runs`` cold starts."""
    frames, rows, cpu = [], [], []
    loads = [load_average()]
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            got = command_first_rows(argv, Path(tmp))
        frames.append(got["first_frame_seconds"])
        rows.append(got["first_rows_seconds"])
        cpu.append(got["cpu_seconds"])
        loads.append(load_average())
    emit(
        bench="first_rows_from_command",
        command=label,
        first_frame_median_s=round(statistics.median(frames), 2),
        first_frame_max_s=round(max(frames), 2),
        first_rows_median_s=round(statistics.median(rows), 2),
        first_rows_max_s=round(max(rows), 2),
        cpu_to_first_rows_median_s=round(statistics.median(cpu), 2),
        runs=runs,
        load_avg_1min=f"{min(loads)}-{max(loads)}",
    )


_IMPORT = (
    "import time\nw, c = time.perf_counter(), time.process_time()\nimport tui.app\n"
    "print(time.perf_counter() - w, time.process_time() - c)"
)


def import_seconds(runs: int = 5) -> tuple[float, float]:
    """Seconds a fresh interpreter takes to import ``tui.app`` (part of every start-up above), wall and
    CPU, the median of ``runs`` interpreters. ``PYTHONDONTWRITEBYTECODE`` set means every module of ag2net
    and tui is compiled from source each time (no ``__pycache__``): a part of these figures an install
    with bytecode does not pay."""
    wall, cpu = [], []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _IMPORT], check=True, capture_output=True, text=True)
        w, c = (float(x) for x in out.stdout.split())
        wall.append(w)
        cpu.append(c)
    return statistics.median(wall), statistics.median(cpu)


def import_figure(runs: int = 5) -> None:
    """Emit ``import_tui_app``: the median of ``runs`` fresh interpreters importing ``tui.app``."""
    load = load_average()
    wall, cpu = import_seconds(runs)
    emit(
        bench="import_tui_app",
        seconds=round(wall, 2),
        cpu_seconds=round(cpu, 2),
        budget_seconds=0.5,
        bytecode_cached=not sys.dont_write_bytecode,
        runs=runs,
        load_avg_1min=f"{load}-{load_average()}",
    )


def command_figures(db: Path | None, envelopes: int = 100_000, million: Path | None = None) -> None:
    ag2net = str(Path(sys.executable).with_name("ag2net"))
    import_figure()
    first_rows_figure("ag2net tui --memory --demo", [ag2net, "tui", "--memory", "--demo"])
    if db is not None:
        first_rows_figure(
            f"ag2net tui --db DB --as ana ({envelopes:,} envelopes)",
            [ag2net, "tui", "--db", str(db), "--as", "ana"],
        )
    if million is not None:
        first_rows_figure(
            "ag2net tui --db DB --as ana (1,000,000 envelopes)",
            [ag2net, "tui", "--db", str(million), "--as", "ana"],
        )


def database_bytes(path: Path) -> int:
    """The database's size on disk: the file and its ``-wal`` / ``-shm`` companions."""
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def built_database(path: Path, n: int) -> Path:
    """Build ``n`` envelopes into ``path`` and emit how long it took and its size."""
    load = load_average()
    start, start_cpu = time.perf_counter(), time.process_time()
    await build_database(path, n)
    emit(
        bench="build_database",
        envelopes=n,
        seconds=round(time.perf_counter() - start, 1),
        cpu_seconds=round(time.process_time() - start_cpu, 1),
        size_mb=round(database_bytes(path) / 1024 / 1024, 1),
        load_avg_1min=f"{load}-{load_average()}",
    )
    return path


async def next_frame(app: App) -> None:
    """Wait until the screen has been refreshed (the next frame after now)."""
    done = asyncio.get_running_loop().create_future()
    app.call_after_refresh(lambda: done.done() or done.set_result(None))
    await done


async def key_latency(rate: int = 1000, presses: int = 60) -> dict[str, float]:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="bob", kind="human"))
    channel = await ana.open(type="conversation", target="bob")
    app = await build_app(hc, ana, Settings())
    stop = asyncio.Event()
    sent = refused = 0

    async def traffic() -> None:
        nonlocal sent, refused
        loop = asyncio.get_running_loop()
        begin = loop.time()
        while not stop.is_set():
            due = int((loop.time() - begin) * rate)
            while sent < due:
                try:
                    await ana.send(channel.channel_id, f"load {sent}")
                except InboxFull:
                    refused += 1
                sent += 1
                if sent % 20 == 0:  # a server reading many sockets interleaves them with the app's work
                    await asyncio.sleep(0)
            await asyncio.sleep(0.005)

    samples: list[float] = []
    cpu: list[float] = []
    async with app.run_test(size=(160, 50)) as pilot:
        while not app.ready:
            await asyncio.sleep(0.005)
        task = asyncio.get_running_loop().create_task(traffic())
        await asyncio.sleep(1.0)
        app.tail.focus()
        await pilot.press("k")  # leave follow mode so each key moves the cursor
        for i in range(presses):
            before = app.tail.cursor_row
            key = "j" if i % 2 else "k"
            start = time.perf_counter()
            start_cpu = time.process_time()
            event = events.Key(key, key)
            event.set_sender(app)
            assert app._driver is not None
            app._driver.send_message(event)  # what the terminal driver does for a real key press
            while app.tail.cursor_row is before:
                if not app.is_running:
                    raise RuntimeError("the workbench stopped during the key-latency run")
                await asyncio.sleep(0.0005)
            await next_frame(app)
            samples.append(time.perf_counter() - start)
            # this process's CPU time over the press (app and traffic): far below the wall time
            # means the press waited for another process on the same core, not for the workbench
            cpu.append(time.process_time() - start_cpu)
            await asyncio.sleep(0.05)
        stop.set()
        await task
    await hc.close()
    await hub.close()
    samples.sort()
    cpu.sort()
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p95_ms": samples[int(len(samples) * 0.95) - 1] * 1000,
        "cpu_median_ms": statistics.median(cpu) * 1000,
        "cpu_p95_ms": cpu[int(len(cpu) * 0.95) - 1] * 1000,
        "envelopes_sent": sent,
        "refused_inbox_full": refused,
    }


async def jump_figure(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.db"
        start = time.perf_counter()
        cid = await build_long_channel(path, n)
        emit(bench="build_long_channel", envelopes=n, seconds=round(time.perf_counter() - start, 2))
        # the default limit holds the whole channel once its history is read in; a smaller one must page
        for limit in (100_000, 10_000):
            jump = await jump_to_seq_1(path, cid, limit)
            emit(
                bench="jump_to_seq_1",
                envelopes=n,
                median_ms=round(jump["median_ms"], 1),
                max_ms=round(jump["max_ms"], 1),
                rows_held_max=jump["rows_held_max"],
                tail_limit=jump["tail_limit"],
                page=jump["page"],
                rss_mb=round(jump["rss_mb"], 1),
                budget_ms=200,
            )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--skip-db", action="store_true", help="skip the 100k database (slow to build)")
    parser.add_argument("--only", choices=["jump", "command", "keys", "import"], help="run one figure only")
    parser.add_argument("--runs", type=int, default=5, help="interpreters for --only import (the median)")
    parser.add_argument(
        "--million",
        action="store_true",
        help="also build a 1,000,000-envelope database into a temp folder (minutes on 2 cores) and time the "
        "first rows on it",
    )
    args = parser.parse_args()
    if args.only == "jump":
        await jump_figure(args.n)
        return
    if args.only == "keys":
        await key_figure()
        return
    if args.only == "import":
        import_figure(args.runs)
        return
    if args.only == "command":
        if args.skip_db and not args.million:
            command_figures(None)
            return
        with tempfile.TemporaryDirectory() as tmp:
            db = None if args.skip_db else await built_database(Path(tmp) / "bench.db", args.n)
            million = await built_database(Path(tmp) / "million.db", 1_000_000) if args.million else None
            command_figures(db, args.n, million)
        return
    timed = await append_run(args.n, trace=False)
    traced = await append_run(args.n, trace=True)
    emit(
        bench="tail_append",
        envelopes=args.n,
        seconds=round(timed["seconds"], 3),
        rss_growth_mb=round(timed["rss_growth_mb"], 1),
        tail_python_mb=round(traced["tail_python_mb"], 1),
        budget_seconds=3.0,
        budget_mb=200,
    )
    if not args.skip_db:
        with tempfile.TemporaryDirectory() as tmp:
            path = await built_database(Path(tmp) / "bench.db", args.n)
            paint = await first_paint(path)
            emit(
                bench="first_paint",
                envelopes=args.n,
                seconds=round(paint["seconds"], 3),
                hub_open_seconds=round(paint["hub_open_seconds"], 3),
                workbench_seconds=round(paint["workbench_seconds"], 3),
                rows_first_page=paint["rows_first_page"],
                budget_seconds=1.5,
            )
            million = await built_database(Path(tmp) / "million.db", 1_000_000) if args.million else None
            command_figures(path, args.n, million)
    else:
        command_figures(None)
    await jump_figure(args.n)
    await key_figure()


async def key_figure() -> None:
    latency = await key_latency()
    emit(
        bench="key_latency",
        rate_per_s=1000,
        median_ms=round(latency["median_ms"], 1),
        p95_ms=round(latency["p95_ms"], 1),
        cpu_median_ms=round(latency["cpu_median_ms"], 1),
        cpu_p95_ms=round(latency["cpu_p95_ms"], 1),
        envelopes_sent=latency["envelopes_sent"],
        refused_inbox_full=latency["refused_inbox_full"],
        budget_p95_ms=25.0,
        textual_fps=int(os.environ.get("TEXTUAL_FPS", tui.FRAMES_PER_SECOND)),
        load_avg_1min=load_average(),
    )


if __name__ == "__main__":
    asyncio.run(main())

"""Hostile clients against a real ``ag2net serve`` subprocess: what each costs the server, and what a
well-behaved client sees meanwhile. One JSON line per scenario.

Scenarios (each on a fresh server, SQLite in a temp folder, loopback):

* ``non_reader``: an anonymous socket that never reads sends 200 ``get_skill`` requests for a ~900 KB
  skill card (the server would owe it ~180 MB of replies). Budget: server RSS growth <= 32 MiB and the
  socket is disconnected.
* ``connection_flood``: one address opens 1,000 idle connections as fast as it can (the per-address
  limit is 256). Figures: accepted, refused (HTTP 503), RSS growth.
* ``unauthenticated_idle``: on a ``--token`` server, 50 sockets connect and never authenticate.
  Budget: all dropped within ``--auth-timeout`` + 2 s (the watchdog's tick, then 1 s for a close
  handshake these sockets never answer).
* ``deep_nesting``: for 5 s, requests nested 20,000 levels deep, 32 in flight. Budget: each is answered
  ``protocol_error`` with its own ``request_id``.

During each, a well-behaved client (token-holding where the server has one) does ``get_agent`` round
trips back to back; budget: p99 <= 50 ms. ``budget_ok`` says whether every budget of the scenario held.

Run ``python bench/abuse.py`` (``--scenario NAME`` for one). ``--server-path DIR`` runs the server from
another source tree (e.g. ``git archive`` of an older commit) for a before/after comparison.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
import os
import re
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

from ag2net import HubClient, Passport

try:
    from websockets.speedups import apply_mask
except ImportError:  # pragma: no cover
    from websockets.utils import apply_mask

TOKEN = "abuse-bench-token"
CARD_BYTES = 900 * 1024
RSS_BUDGET_MIB = 32
P99_BUDGET_MS = 50
SERVER_PATH: str | None = None


def note(text: str) -> None:
    if os.environ.get("AG2NET_BENCH_VERBOSE"):
        print(f"{time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


def emit(**figures: object) -> None:
    print(json.dumps({"bench": "abuse", **figures}), flush=True)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("VmRSS not found")


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# ---------------------------------------------------------------------------------------------- server


class Server:
    """``python -m ag2net.cli serve`` in a child process."""

    def __init__(self, *extra: str) -> None:
        self.extra = extra
        self.proc: asyncio.subprocess.Process | None = None
        self.url = ""
        self.folder = tempfile.mkdtemp(prefix="ag2net-bench-abuse-")

    async def __aenter__(self) -> Server:
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_DATA_HOME": self.folder}
        if SERVER_PATH is not None:
            env["PYTHONPATH"] = SERVER_PATH
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "ag2net.cli",
            "serve",
            "--port",
            "0",
            "--db",
            str(Path(self.folder) / "hub.db"),
            *self.extra,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            cwd=self.folder,  # `python -m` puts the working folder first on sys.path
        )
        assert self.proc.stdout is not None
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 30)).decode()
        found = re.search(r"(ws://\S+)", line)
        if found is None:
            raise RuntimeError(f"ag2net serve did not start: {line!r}")
        self.url = found.group(1)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 10)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.url.removeprefix("ws://").rsplit(":", 1)
        return host, int(port)


class RssSampler:
    """The server's RSS every 20 ms: baseline before, peak during."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.baseline = rss_kib(pid)
        self.peak = self.baseline
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.peak = max(self.peak, rss_kib(self.pid))
            await asyncio.sleep(0.02)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, float]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        final = rss_kib(self.pid)
        return {
            "server_rss_baseline_mib": round(self.baseline / 1024, 1),
            "server_rss_peak_growth_mib": round((self.peak - self.baseline) / 1024, 1),
            "server_rss_final_growth_mib": round((final - self.baseline) / 1024, 1),
        }


class WellBehaved:
    """A client doing ``get_agent`` round trips back to back, timing each."""

    def __init__(self, url: str, token: str | None) -> None:
        self.client = HubClient.connect(url, token=token, rpc_timeout=30, identity_secrets=False)
        self.rtts: list[float] = []
        self.failures = 0
        self._stopping = False
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        await self.client.register_human(Passport(name="steady", kind="human"))

    async def _run(self) -> None:
        while not self._stopping:
            start = time.perf_counter()
            try:
                await self.client.call("get_agent", name_or_id="steady")
                self.rtts.append((time.perf_counter() - start) * 1000)
            except Exception:
                self.failures += 1
            await asyncio.sleep(0.002)

    def start(self) -> None:
        self.rtts.clear()
        self._stopping = False
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> dict[str, float]:
        # A flag, not cancel(): Python 3.11's wait_for (inside the link) can swallow a cancellation
        # that arrives as its answer does, and the loop would never end.
        self._stopping = True
        if self._task is not None:
            await self._task
        return {
            "well_behaved_round_trips": len(self.rtts),
            "well_behaved_failures": self.failures,
            "well_behaved_p50_ms": round(percentile(self.rtts, 0.50), 2),
            "well_behaved_p99_ms": round(percentile(self.rtts, 0.99), 2),
            "well_behaved_max_ms": round(max(self.rtts, default=float("nan")), 2),
        }

    async def close(self) -> None:
        await self.client.close()


# ---------------------------------------------------------------------------------------------- raw sockets


def ws_frame(payload: bytes, opcode: int = 1) -> bytes:
    """One masked client frame."""
    header = bytearray([0x80 | opcode])
    size = len(payload)
    if size < 126:
        header.append(0x80 | size)
    elif size < 65536:
        header += bytes([0x80 | 126]) + size.to_bytes(2, "big")
    else:
        header += bytes([0x80 | 127]) + size.to_bytes(8, "big")
    mask = os.urandom(4)
    return bytes(header) + mask + apply_mask(payload, mask)


async def raw_connect(address: tuple[str, int], *, rcvbuf: int | None = None) -> socket.socket | None:
    """A WebSocket opened by hand on a plain socket, so the bench decides when (if ever) it reads.
    ``None`` when the server refuses the handshake."""
    loop = asyncio.get_running_loop()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.setblocking(False)
    await loop.sock_connect(sock, address)
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET / HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    await loop.sock_sendall(sock, request.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = await loop.sock_recv(sock, 1)  # byte by byte: not one byte past the handshake
        if not chunk:
            break
        head += chunk
    if not head.startswith(b"HTTP/1.1 101"):
        sock.close()
        return None
    return sock


def request_frame(request_id: str, op: str, params: dict) -> bytes:
    data = {"kind": "request", "request_id": request_id, "op": op, "params": params}
    return ws_frame(json.dumps(data).encode())


async def wait_reset(sock: socket.socket, timeout: float) -> float | None:
    """Seconds until the server drops ``sock`` (a write fails), or ``None`` within ``timeout``."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    ping = ws_frame(b"", opcode=9)
    while loop.time() - start < timeout:
        try:
            sock.send(ping)
        except BlockingIOError:
            pass  # our send buffer is full too: the server is not reading us either
        except OSError:
            return loop.time() - start
        await asyncio.sleep(0.05)
    return None


# ---------------------------------------------------------------------------------------------- scenarios


async def non_reader() -> dict[str, object]:
    async with Server() as server:
        setup = HubClient.connect(server.url, identity_secrets=False)
        card = "# card\n" + ("lorem ipsum dolor sit amet " * (CARD_BYTES // 27 + 1))[: CARD_BYTES - 7]
        carded = await setup.register_human(Passport(name="carded", kind="human"))
        await setup.set_skill(carded.agent_id, card)
        good = WellBehaved(server.url, None)
        await good.open()
        await asyncio.sleep(0.5)
        rss = RssSampler(server.pid)
        rss.start()
        good.start()
        note("non_reader: connecting")
        sock = await raw_connect(server.address, rcvbuf=4096)
        assert sock is not None
        note("non_reader: sending")
        start = time.perf_counter()
        loop = asyncio.get_running_loop()
        sent = 0
        for i in range(200):
            try:
                await asyncio.wait_for(
                    loop.sock_sendall(
                        sock, request_frame(f"r{i}", "get_skill", {"agent_id": carded.agent_id})
                    ),
                    30,
                )
                sent += 1
            except (OSError, TimeoutError):
                break
        note(f"non_reader: sent {sent}")
        dropped_after = await wait_reset(sock, 60)
        note(f"non_reader: dropped after {dropped_after}")
        await asyncio.sleep(1.0)
        figures = {
            "requests_sent": sent,
            "card_bytes": len(card),
            "disconnected": dropped_after is not None,
            "disconnected_after_s": round(time.perf_counter() - start, 2)
            if dropped_after is not None
            else None,
            **(await good.stop()),
            **(await rss.stop()),
        }
        sock.close()
        await good.close()
        await setup.close()
    figures["budget_ok"] = bool(
        figures["disconnected"]
        and figures["server_rss_peak_growth_mib"] <= RSS_BUDGET_MIB
        and figures["well_behaved_p99_ms"] <= P99_BUDGET_MS
        and figures["well_behaved_failures"] == 0
    )
    return figures


async def connection_flood(count: int = 1000) -> dict[str, object]:
    async with Server() as server:
        good = WellBehaved(server.url, None)
        await good.open()
        await asyncio.sleep(0.5)
        rss = RssSampler(server.pid)
        rss.start()
        good.start()
        held: list[socket.socket] = []
        refused = 0
        for _ in range(count):
            sock = await raw_connect(server.address)
            if sock is None:
                refused += 1
            else:
                held.append(sock)
        await asyncio.sleep(1.0)
        figures: dict[str, object] = {
            "attempted": count,
            "accepted": len(held),
            "refused_503": refused,
            **(await good.stop()),
            **(await rss.stop()),
        }
        for sock in held:
            sock.close()
        await good.close()
    figures["budget_ok"] = bool(
        figures["accepted"] < count
        and figures["well_behaved_p99_ms"] <= P99_BUDGET_MS
        and figures["well_behaved_failures"] == 0
    )
    return figures


async def unauthenticated_idle(count: int = 50, auth_timeout: float = 2.0) -> dict[str, object]:
    async with Server("--token", TOKEN, "--auth-timeout", str(auth_timeout)) as server:
        good = WellBehaved(server.url, TOKEN)
        await good.open()
        await asyncio.sleep(0.5)
        rss = RssSampler(server.pid)
        rss.start()
        good.start()
        socks = [await raw_connect(server.address) for _ in range(count)]
        start = time.perf_counter()
        drops = await asyncio.gather(*(wait_reset(s, auth_timeout + 5) for s in socks if s is not None))
        figures: dict[str, object] = {
            "sockets": count,
            "auth_timeout_s": auth_timeout,
            "closed": sum(d is not None for d in drops),
            "all_closed_after_s": round(time.perf_counter() - start, 2),
            **(await good.stop()),
            **(await rss.stop()),
        }
        for sock in socks:
            if sock is not None:
                sock.close()
        await good.close()
    figures["budget_ok"] = bool(
        figures["closed"] == count
        and float(figures["all_closed_after_s"]) <= auth_timeout + 2  # + watchdog tick + close grace
        and figures["well_behaved_p99_ms"] <= P99_BUDGET_MS
        and figures["well_behaved_failures"] == 0
    )
    return figures


async def deep_abuser(url: str, duration: float, depth: int, window: int) -> dict[str, object]:
    """The deep-nesting client (run in its own process, so its CPU is not the well-behaved client's)."""
    import websockets.asyncio.client as wsc

    nested = "[" * depth + "]" * depth
    sent = 0
    right = 0
    message = None
    async with wsc.connect(url, max_size=None) as ws:
        outstanding = asyncio.Semaphore(window)

        async def read() -> None:
            nonlocal right, message
            while True:
                frame = json.loads(await ws.recv())
                if frame.get("kind") != "response":
                    continue
                outstanding.release()
                if frame["request_id"].startswith("deep-") and frame["error_code"] == "protocol_error":
                    right += 1
                    message = frame["error_message"]

        reader = asyncio.get_running_loop().create_task(read())
        deadline = time.perf_counter() + duration
        while time.perf_counter() < deadline:
            await outstanding.acquire()
            request_id = f"deep-{sent}"
            await ws.send(
                f'{{"kind": "request", "request_id": "{request_id}", "op": "health", "params": {{"x": {nested}}}}}'
            )
            sent += 1
        for _ in range(window):
            await asyncio.wait_for(outstanding.acquire(), 30)
        reader.cancel()
    return {"requests": sent, "answered_protocol_error_with_their_request_id": right, "message": message}


async def deep_nesting(duration: float = 5.0, depth: int = 20_000, window: int = 32) -> dict[str, object]:
    async with Server() as server:
        good = WellBehaved(server.url, None)
        await good.open()
        await asyncio.sleep(0.5)
        rss = RssSampler(server.pid)
        rss.start()
        good.start()
        abuser = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--deep-abuser",
            server.url,
            str(duration),
            str(depth),
            str(window),
            stdout=asyncio.subprocess.PIPE,
        )
        out, _ = await abuser.communicate()
        result = json.loads(out.decode().strip().splitlines()[-1])
        figures: dict[str, object] = {
            "seconds": duration,
            "depth": depth,
            **result,
            **(await good.stop()),
            **(await rss.stop()),
        }
        await good.close()
    figures["budget_ok"] = bool(
        figures["answered_protocol_error_with_their_request_id"] == figures["requests"]
        and figures["well_behaved_p99_ms"] <= P99_BUDGET_MS
        and figures["well_behaved_failures"] == 0
    )
    return figures


SCENARIOS = {
    "non_reader": non_reader,
    "connection_flood": connection_flood,
    "unauthenticated_idle": unauthenticated_idle,
    "deep_nesting": deep_nesting,
}


async def main(names: list[str]) -> None:
    for name in names:
        emit(scenario=name, **(await asyncio.wait_for(SCENARIOS[name](), 600)))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    parser.add_argument("--server-path", help="run the server from this source tree")
    parser.add_argument(
        "--deep-abuser", nargs=4, metavar=("URL", "SECONDS", "DEPTH", "WINDOW"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    SERVER_PATH = args.server_path
    if args.deep_abuser:
        url, seconds, depth, window = args.deep_abuser
        print(json.dumps(asyncio.run(deep_abuser(url, float(seconds), int(depth), int(window)))))
        sys.exit(0)
    asyncio.run(main(args.scenario or list(SCENARIOS)))

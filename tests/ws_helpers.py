"""Processes for the stepping-in end-to-end tests: an ag2net agent in a process of its own
(``tests/helpers/ws_agent.py``) and ``ag2net serve`` (imported as ``ws_helpers``: pytest puts ``tests/`` on
the path). Each keeps the lines its process printed, so a test waits for one and a failure shows them all."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socket
import sys
from pathlib import Path

HELPER = Path(__file__).parent / "helpers" / "ws_agent.py"
ROOT = Path(__file__).resolve().parent.parent
START_LIMIT = 60.0
"""Seconds a process may take to say it is ready (generous: two cores shared with other test runs)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **extra}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


class Process:
    """A subprocess whose stdout and stderr lines are kept as they arrive."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.env = dict(env or {})
        self.proc: asyncio.subprocess.Process | None = None
        self.lines: list[str] = []
        self.errors: list[str] = []
        self._changed = asyncio.Condition()
        self._pumps: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=_env(self.env),
        )
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._pumps = [
            asyncio.create_task(self._pump(self.proc.stdout, self.lines)),
            asyncio.create_task(self._pump(self.proc.stderr, self.errors)),
        ]

    async def _pump(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            async with self._changed:
                into.append(line.decode("utf-8", "replace").rstrip("\n"))
                self._changed.notify_all()
        async with self._changed:
            self._changed.notify_all()

    def output(self) -> str:
        return "\n".join(["stdout:", *self.lines, "stderr:", *self.errors])

    async def wait_line(self, pattern: str, *, after: int = 0, timeout: float = START_LIMIT) -> re.Match[str]:
        """The first stdout line from index ``after`` on that matches ``pattern`` (waiting for it)."""
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            return next((m for line in self.lines[after:] if (m := regex.search(line))), None)

        try:
            async with asyncio.timeout(timeout), self._changed:
                while (match := found()) is None:
                    if self.proc is not None and self.proc.returncode is not None:
                        break
                    await self._changed.wait()
        except TimeoutError:
            match = None
        if match is None:
            raise AssertionError(f"no line matching {pattern!r} from {self.argv[1:3]}:\n{self.output()}")
        return match

    def count(self, pattern: str) -> int:
        regex = re.compile(pattern)
        return sum(1 for line in self.lines if regex.search(line))

    async def stop(self, signum: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        """Send ``signum`` (SIGKILL: a crash) and wait for the exit; its exit code."""
        assert self.proc is not None
        if self.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signum)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
                raise AssertionError(f"{self.argv[1:3]} still running {timeout} s after {signum}") from None
        for pump in self._pumps:
            with contextlib.suppress(Exception):
                await pump
        assert self.proc.returncode is not None
        return self.proc.returncode


class AgentProcess(Process):
    """``tests/helpers/ws_agent.py URL NAME``: the agent NAME attached over WebSocket from its own process."""

    def __init__(
        self, url: str, name: str, *, rpc_timeout: float | None = None, token: str | None = None
    ) -> None:
        argv = [sys.executable, str(HELPER), url, name]
        if rpc_timeout is not None:
            argv.append(str(rpc_timeout))
        super().__init__(argv, {"AG2NET_TOKEN": token} if token is not None else None)
        self.name = name
        self.agent_id = ""

    async def start(self) -> None:
        await super().start()
        self.agent_id = (await self.wait_line(r"^ready (\S+)")).group(1)

    def model_calls(self) -> int:
        return self.count(r"^model \d+")


class ServeProcess(Process):
    """``ag2net serve --db DB --port PORT`` (a fixed port, so clients find it again after a restart)."""

    def __init__(self, db: Path, port: int, *extra: str) -> None:
        super().__init__(
            [sys.executable, "-m", "ag2net.cli", "serve", "--db", str(db), "--port", str(port), *extra]
        )
        self.url = ""

    async def start(self) -> None:
        await super().start()
        self.url = (await self.wait_line(r"listening on (ws://\S+)")).group(1)


__all__ = ["AgentProcess", "Process", "ServeProcess", "free_port"]

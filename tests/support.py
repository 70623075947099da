"""Helpers the test modules share (imported as ``support``: pytest puts ``tests/`` on the path)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

from ag2net.client import HubClient
from ag2net.demo import DemoNetwork, start_demo
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.identity import Passport


def quiet(**kw: Any) -> dict[str, Any]:
    """Hub settings for a test: no background sweeps, a short invite-ack timeout; ``kw`` on top."""
    return {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0, "invite_ack_timeout": 5, **kw}


async def until(
    predicate: Callable[[], object],
    timeout: float = 10.0,
    *,
    message: str = "condition not reached in time",
    every: float = 0.005,
) -> None:
    """Poll ``predicate`` (a plain function, or one returning an awaitable: it is awaited) every ``every``
    seconds until it is true; fail the test with ``message`` after ``timeout`` seconds (generous: it only
    matters when the condition never comes, and the suite runs two tests at a time)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return
        if loop.time() > deadline:
            raise AssertionError(message)
        await asyncio.sleep(every)


def text(
    channel_id: str, sender_id: str, body: str, audience: list[str] | None = None, **kw: Any
) -> Envelope:
    """A text envelope of ``body`` from ``sender_id`` on ``channel_id``; ``kw`` are the Envelope's own keywords."""
    return Envelope(channel_id, sender_id, audience, EV_TEXT, {"text": body}, **kw)


async def humans(hc: HubClient, *names: str) -> list[str]:
    """Registers a human of each name on ``hc``; their agent ids, in order."""
    out = []
    for name in names:
        client = await hc.register_human(Passport(name=name, kind="human"))
        assert client.agent_id is not None
        out.append(client.agent_id)
    return out


async def run_demo(hc: HubClient, timeout: float = 15) -> DemoNetwork:
    """The demo network run to its end on ``hc``'s hub: its traffic stopped, its agents' clients (and their
    tools) still in this process."""
    demo = await start_demo(hc)
    await asyncio.wait_for(demo.run(), timeout=timeout)
    await demo.close()
    return demo


class CountingCold:
    """A log's cold reader (``WalLog._cold``), counting the envelopes it reads back from the store."""

    def __init__(self, cold: Any) -> None:
        self.cold = cold
        self.read = 0

    def __call__(self, start: int, stop: int) -> list[Envelope]:
        self.read += stop - start
        return self.cold(start, stop)


class Ticker:
    """Counts how often it got the event loop back (``asyncio.sleep(0)`` in a loop): a task that never
    yields leaves ``ticks`` where it was."""

    def __init__(self) -> None:
        self.ticks = 0
        self.task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(0)
            self.ticks += 1

    async def __aenter__(self) -> Ticker:
        self.task = asyncio.create_task(self._run())
        await asyncio.sleep(0)  # the ticker is running
        self.ticks = 0
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)

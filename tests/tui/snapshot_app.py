"""The snapshot-app factory: the workbench on the deterministic demo network, with frozen time and ids.

``snap_compare`` runs an app on its own event loop, so the hub and the demo are built inside the app's
``Load`` handler, on that loop. Live observing and history loading are off: the screen shows exactly
the demo's finished WAL.
"""

from __future__ import annotations

import itertools
import random
import time
from typing import Any

from textual.widgets import Input, TextArea

import ag2net.ids
from ag2net import Hub, HubClient, Passport
from ag2net.demo import start_demo
from ag2net.ids import ManualClock
from tui.app import WorkbenchApp
from tui.settings import Settings
from tui.source import HubSource

SNAPSHOT_SIZE = (160, 44)


class _FrozenTime:
    """``time`` as ag2net.ids sees it: nanoseconds advance by one microsecond per call, from a fixed start."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def time_ns(self) -> int:
        return 1_772_357_400_000_000_000 + next(self._ticks) * 1_000

    def time(self) -> float:
        return self.time_ns() / 1e9

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


class _SeededOs:
    def __init__(self) -> None:
        self._random = random.Random(20260301)

    def urandom(self, n: int) -> bytes:
        return self._random.randbytes(n)


def freeze_ids(monkeypatch: Any) -> None:
    """Make agent, channel and envelope ids the same on every run."""
    monkeypatch.setattr(ag2net.ids, "time", _FrozenTime())
    monkeypatch.setattr(ag2net.ids, "os", _SeededOs())


class DemoWorkbench(WorkbenchApp):
    """The workbench over the finished demo network, human 'ana', theme textual-dark."""

    def __init__(self) -> None:
        super().__init__(None, None, Settings(theme="textual-dark"), observe=False, load_history=False)  # type: ignore[arg-type]
        self.animation_level = "none"
        self._closers: list[Any] = []

    async def on_load(self) -> None:
        hub = await Hub.open(
            None,
            clock=ManualClock("2026-03-01T09:30:00.000000Z"),
            ttl_sweep_interval=0,
            expectation_sweep_interval=0,
        )
        hc = HubClient.local(hub)
        human = await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana")
        await demo.run()
        self.source = HubSource(hc, human)
        self._closers = [demo.close, hc.close, hub.close]

    async def on_unmount(self) -> None:
        for close in self._closers:
            await close()


def still(app: WorkbenchApp) -> None:
    """Cursor blink off everywhere on the current screen, so a screenshot never catches it mid-blink."""
    for widget in app.screen.query("Input, TextArea"):
        if isinstance(widget, (Input, TextArea)):
            widget.cursor_blink = False


__all__ = ["SNAPSHOT_SIZE", "DemoWorkbench", "freeze_ids", "still"]

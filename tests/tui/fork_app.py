"""The fork/replay tests' workbench: the demo network with seeded ids (stable labels) on a real clock.

``ag2net.debug.replay`` tells which envelopes an agent's turn made by the turn's start time and duration, so
the source hub's turn records need real times: ``tui.screenshots.DemoWorkbench`` runs on a manual clock with a
tick timer (for pictures), which would make the replay misjudge a tool's post as someone else's.
"""

from __future__ import annotations

import asyncio
from typing import Any

from textual import events
from textual.pilot import Pilot

from ag2net import Hub, HubClient, Passport
from ag2net.demo import start_demo
from ag2net.ids import IdMint
from tui.screens.fork import ForkForm
from tui.screens.replay_compare import ReplayCompare
from tui.screenshots import DEMO_SEED, DemoWorkbench, channel_of, ready, settle
from tui.source import HubSource


class RealTimeDemo(DemoWorkbench):
    async def on_load(self, event: events.Load) -> None:
        event.prevent_default()  # Textual would run DemoWorkbench.on_load (manual clock, tick timer) too
        hub = await Hub.open(
            None, ttl_sweep_interval=0, expectation_sweep_interval=0, ids=IdMint.seeded(DEMO_SEED)
        )
        hc = HubClient.local(hub)
        human = await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana")
        await demo.run()
        self.source = HubSource(hc, human)
        self._closers = [demo.close, hc.close, hub.close]


async def open_form(pilot: Pilot[Any], seq: int = 1) -> ForkForm:
    """The conversation selected, the tail's cursor on ``seq``, F pressed: the form, loaded."""
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, "conversation"))
    await settle(pilot)
    app.action_focus_pane("tail")
    assert app.tail.goto_seq(seq)
    await pilot.press("F")
    form = await wait_for(pilot, ForkForm)
    await settle(pilot)
    return form


async def wait_for(pilot: Pilot[Any], kind: type, timeout: float = 30.0) -> Any:
    for _ in range(int(timeout / 0.02)):
        if isinstance(pilot.app.screen, kind):
            await pilot.pause()
            return pilot.app.screen
        await asyncio.sleep(0.02)
    raise AssertionError(f"no {kind.__name__} within {timeout} s; the screen is {pilot.app.screen!r}")


async def run_to_compare(pilot: Pilot[Any]) -> ReplayCompare:
    await pilot.press("ctrl+r")
    screen = await wait_for(pilot, ReplayCompare)
    await settle(pilot)
    return screen


__all__ = ["RealTimeDemo", "open_form", "run_to_compare", "wait_for"]

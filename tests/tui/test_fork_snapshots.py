"""SVG snapshots of Fork here… (the form) and of the replay comparison at 80x24 (one column, a differing
envelope on two lines) and 120x36 (side by side), on the demo network with seeded ids and a real clock
(``fork_app.RealTimeDemo``); the comparison is of a replay whose critic answers "I disagree." from seq 3.

Update after reviewing the pictures as PNGs: ``pytest tests/tui/test_fork_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fork_app import RealTimeDemo, open_form, run_to_compare
from textual.pilot import Pilot

from tui.screenshots import settle

SIZES = {"80x24": (80, 24), "120x36": (120, 36)}


async def form(pilot: Pilot[Any]) -> None:
    screen = await open_form(pilot, seq=3)
    for _ in range(1500):  # the no-change baseline's line, once it is known
        if screen.baseline is not None:
            break
        await asyncio.sleep(0.02)
    await settle(pilot)


async def compare(pilot: Pilot[Any]) -> None:
    screen = await open_form(pilot, seq=3)
    for _ in range(1500):
        if screen.baseline is not None:
            break
        await asyncio.sleep(0.02)
    screen.set_override("critic", model="scripted", model_arg="I disagree.")
    await run_to_compare(pilot)
    await settle(pilot)


@pytest.mark.parametrize("size", list(SIZES))
@pytest.mark.parametrize("scene", ["form", "compare"])
def test_fork_screens(snap_compare, scene: str, size: str) -> None:
    prepare = {"form": form, "compare": compare}[scene]
    assert snap_compare(RealTimeDemo(), terminal_size=SIZES[size], run_before=prepare)

"""Helpers the test modules share (imported as ``support``: pytest puts ``tests/`` on the path)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], object], timeout: float = 10.0) -> None:
    """Poll ``predicate`` until it is true; fail the test after ``timeout`` seconds (generous: it only
    matters when the condition never comes, and the suite runs two tests at a time)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.005)

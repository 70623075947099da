"""Shared by the eval tests (no tests of its own): the demo network recorded into a database with seeded ids (stable channel ids,
so two recordings hold the same channels), and live models that are the demo's own scripted brains."""

from __future__ import annotations

import asyncio
import hashlib
import os
from pathlib import Path
from typing import Any

from support import quiet, run_demo

from ag2net import Hub, HubClient
from ag2net.agent.models import ScriptedModel
from ag2net.demo.brains import Brains
from ag2net.ids import IdMint

SEED = 2501


async def record_demo(store: Any, seed: int = SEED) -> dict[str, str]:
    """Run the demo on ``store`` with seeded ids; its step → channel id."""
    hub = await Hub.open(store, **quiet(), ids=IdMint.seeded(seed))
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc, timeout=30)
        return {step: cid for cid, step in demo.steps.items()}
    finally:
        await hc.close()
        await hub.close()


def record_demo_file(path: Path, seed: int = SEED) -> dict[str, str]:
    from ag2net.store import SqliteStore

    return asyncio.run(record_demo(SqliteStore(path), seed))


class _Script:
    human_name: str | None = None
    pace = 0.0

    def __init__(self, steps: dict[str, str]) -> None:
        self.steps = steps


class BrainLive:
    """A live-model factory: each (agent, channel) gets the demo's own brain for that agent, and every
    model call it answers is counted per agent name."""

    def __init__(self, steps: dict[str, str]) -> None:
        self.brains = Brains(_Script({cid: step for step, cid in steps.items()}))
        self.calls: dict[str, int] = {}

    def __call__(self, name: str, channel_id: str) -> Any:
        inner = ScriptedModel(self.brains.for_agent(name), name=f"demo-{name}", loop=True)
        counter = self

        class Counted:
            def __init__(self) -> None:
                self.name = inner.name

            async def complete(self, request: Any) -> Any:
                counter.calls[name] = counter.calls.get(name, 0) + 1
                return await inner.complete(request)

        return Counted()


def fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    """The file's bytes, its mtime and its folder's listing (no -wal/-shm left behind)."""
    return (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(os.listdir(path.parent)),
    )


def without_clock(doc: dict[str, Any]) -> dict[str, Any]:
    """A run's JSON without its wall-clock fields (``created_at``, the durations)."""
    out = {k: v for k, v in doc.items() if k not in ("created_at", "duration_ms")}
    out["tasks"] = [{k: v for k, v in t.items() if k != "duration_ms"} for t in doc["tasks"]]
    return out

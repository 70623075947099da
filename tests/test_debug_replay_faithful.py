"""The faithful baseline (SPEC decision 28): a replay with no change at all reproduces the original, for
every channel of the demo forked at every seq, from the hub itself and from the database file the CLI
reads. Texts, senders, event types, order and audiences of every envelope are the original's; every
agent's turns after the fork saw the same history, input and tools and gave the same reply, each
answered from the recording; the verdict says so in words."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from support import quiet, run_demo

from ag2net import Hub, HubClient
from ag2net.cli.replay import read_snapshot
from ag2net.debug import compare, fork, replay
from ag2net.debug.replay import ReplayModel
from ag2net.store import SqliteStore

STEPS = ["consult_research", "consult_estimate", "discussion", "workflow", "pairing"]


async def _run_demo(store: Any) -> tuple[Hub, HubClient, dict[str, str]]:
    hub = await Hub.open(store, **quiet())
    hc = HubClient.local(hub)
    demo = await run_demo(hc, timeout=30)
    return hub, hc, {step: cid for cid, step in demo.steps.items()}


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    db = tmp_path_factory.mktemp("faithful") / "demo.db"

    async def make() -> dict[str, str]:
        hub, hc, steps = await _run_demo(SqliteStore(db))
        await hc.close()
        await hub.close()
        return steps

    return db, asyncio.run(make())


def _rows(envelopes: list[Any]) -> list[tuple[Any, ...]]:
    return [(e.sender_id, e.event_type, e.audience, e.event_data) for e in envelopes]


async def _every_seq_reproduces(source: Any, cid: str) -> int:
    original = (
        await source.read_wal(cid)
        if isinstance(source, Hub)
        else list(await source.call("read_wal", channel_id=cid, since=0, until=None))
    )
    n = len(original)
    for at in range(n + 1):
        async with await fork(source, cid, at) as box:
            result = await replay(source, box, timeout=20, step_timeout=5)
            diff = compare(result)
        where = f"seq {at}: {diff.verdict}; {diff.turn_why}"
        assert diff.verdict == f"completed: {n} of {n} envelopes reproduced", where
        assert result.stopped == "original replayed" and diff.identical, where
        assert _rows(result.replayed) == _rows(original), where
        assert all(isinstance(m, ReplayModel) and m.diverged is None for m in result.models.values()), where
        # the turns after the fork, one for one: same history, input, tools, reply; answered from the recording
        assert len(result.replayed_turns) == len(result.original_turns), where
        for was, now in zip(result.original_turns, result.replayed_turns, strict=True):
            assert now["agent_id"] == was["agent_id"], where
            for key in ("system_prompt", "history", "inputs", "tools", "reply", "view", "model_params"):
                assert now.get(key) == was.get(key), (where, key)
            assert [(c["name"], c["arguments"], c["result"]) for c in now["tool_calls"]] == [
                (c["name"], c["arguments"], c["result"]) for c in was["tool_calls"]
            ], where
            assert now.get("error") is None, where
        assert diff.first_turn is None, where
        assert all(row["answered_by"] == "the recording" for row in diff.turns), where
    return n


@pytest.mark.parametrize("step", STEPS)
async def test_every_seq_of_every_demo_channel_reproduces_from_the_hub(step):
    hub, hc, steps = await _run_demo(None)
    try:
        assert await _every_seq_reproduces(hub, steps[step]) > 5
    finally:
        await hc.close()
        await hub.close()


@pytest.mark.parametrize("step", STEPS)
async def test_every_seq_of_every_demo_channel_reproduces_from_the_database(demo_db, step):
    db, steps = demo_db
    source, _label = read_snapshot(str(db), steps[step])
    assert await _every_seq_reproduces(source, steps[step]) > 5

"""Framework overhead per LLM turn: two ScriptedModel agents exchange 500 turns in one conversation.

Measures turns/s with turn records on (stored in a SQLite database in a temp dir) and off
(``HubClient.record_turns = False``), and splits a turn into projection, tool schema build, model call
(the scripted model plus the tool loop), posting the round envelope (admission, WAL write, dispatch)
and writing the turn record. Run ``python bench/turns.py`` (``--turns N``, ``--profile`` for cProfile);
every figure is printed as one JSON line. Budget: at least 300 turns/s with turn records on.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ag2net import EV_CHANNEL_CLOSED, Agent, Hub, HubClient, ScriptedModel, SqliteStore
from ag2net.client.turns import TurnRecord

BUDGET_TURNS_PER_S = 300.0


def emit(**figures: Any) -> None:
    print(json.dumps({"bench": "turns", **figures}), flush=True)


class TimedHubClient(HubClient):
    """A ``HubClient`` that keeps every turn record it writes and times each write."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.records: list[TurnRecord] = []
        self.record_seconds: list[float] = []

    async def record_turn(self, record: TurnRecord) -> None:
        start = time.perf_counter()
        await super().record_turn(record)
        self.record_seconds.append(time.perf_counter() - start)
        self.records.append(record)


def reply_for(name: str):
    """A scripted turn that answers from the call (deterministic, a little text like a real reply)."""

    def turn(call: Any) -> str:
        return f"{name} turn {len(call.history)}: noted, here is my next point about the plan."

    return turn


async def run(db: Path, turns: int, *, record_turns: bool) -> dict[str, Any]:
    store = SqliteStore(db)
    hub = await Hub.open(store, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=10)
    hc = TimedHubClient.local(hub)
    hc.record_turns = record_turns
    try:
        ann = await hc.register(
            Agent("ann", ScriptedModel(reply_for("ann"), loop=True), system_prompt="Be brief.")
        )
        ben = await hc.register(
            Agent("ben", ScriptedModel(reply_for("ben"), loop=True), system_prompt="Be brief.")
        )
        channel = await ann.open(type="conversation", target="ben", knobs={"max_turns": turns})
        closed = asyncio.Event()

        async def watch() -> None:
            await ann.wait_for_channel_event(
                channel_id=channel.channel_id,
                predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED,
                timeout=600,
            )
            closed.set()

        ann.ensure_channel_inbox(channel.channel_id)
        watcher = asyncio.create_task(watch())
        start = time.perf_counter()
        await channel.send("Let us plan the release, one point each.")
        await closed.wait()
        elapsed = time.perf_counter() - start
        await watcher
        md = await hc.get_channel(channel.channel_id)
        llm_turns = len(ann.agent.model.calls) + len(ben.agent.model.calls)
        result: dict[str, Any] = {
            "record_turns": record_turns,
            "turns": llm_turns,
            "close_reason": md.close_reason,
            "seconds": round(elapsed, 3),
            "turns_per_s": round(llm_turns / elapsed, 1),
        }
        if record_turns:
            split = {
                key: [r.timings.get(key, 0.0) for r in hc.records]
                for key in ("projection_ms", "tool_schema_ms", "model_ms", "post_ms")
            }
            split["record_ms"] = [s * 1000 for s in hc.record_seconds]
            result["per_turn_ms"] = round(elapsed * 1000 / llm_turns, 3)
            result["split_mean_ms"] = {k: round(statistics.fmean(v), 4) for k, v in split.items() if v}
            stored = await hc.list_turns(channel_id=channel.channel_id, limit=turns * 2)
            result["stored_records"] = len(stored)
            elided = sum(1 for r in stored if r.history and r.history[0].type == "compaction_summary")
            result["records_with_compaction"] = elided
        return result
    finally:
        await hc.close()
        await hub.close()


async def main(turns: int, profile: bool) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        off = await run(Path(tmp) / "off.db", turns, record_turns=False)
        emit(**off)
        profiler = cProfile.Profile() if profile else None
        if profiler is not None:
            profiler.enable()
        on = await run(Path(tmp) / "on.db", turns, record_turns=True)
        if profiler is not None:
            profiler.disable()
        emit(**on)
        emit(
            budget_turns_per_s=BUDGET_TURNS_PER_S,
            met=on["turns_per_s"] >= BUDGET_TURNS_PER_S,
            record_overhead_pct=round((off["turns_per_s"] / on["turns_per_s"] - 1) * 100, 1),
        )
        if profiler is not None:
            stats = pstats.Stats(profiler, stream=sys.stderr)
            stats.sort_stats("cumulative").print_stats(40)
            stats.sort_stats("tottime").print_stats(25)
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--profile", action="store_true", help="cProfile the records-on run (to stderr)")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.turns, args.profile)))

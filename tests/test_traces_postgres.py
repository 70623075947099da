"""``ag2net export`` on a PostgreSQL store (a real throwaway server): the same traces as from SQLite."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from test_traces import SECRET_WORD, build_network

from ag2net import Hub
from ag2net.store import open_store
from ag2net.traces.otlp import trace_id_of


async def test_export_reads_a_postgres_hub_by_url(pg_server) -> None:
    url = await pg_server.fresh_url()
    hub = await Hub.open(
        open_store(url), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    try:
        net = await build_network(hub)
        listed = await net["hc"].list_turns(channel_id=net["conversation"], limit=100)
        calls = sum(t.model_calls for t in listed)
        await net["hc"].close()
    finally:
        await hub.close()
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "export", "--db", url, "conversation", "--capture-content"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (entry,) = json.loads(done.stdout)["resourceSpans"]
    spans = entry["scopeSpans"][0]["spans"]
    assert {s["traceId"] for s in spans} == {trace_id_of(net["conversation"])}
    chats = [s for s in spans if s["name"].startswith("chat")]
    assert len(chats) == calls == 4
    assert SECRET_WORD in json.dumps(chats)  # content, as asked
    turns = [s for s in spans if s["name"].startswith("invoke_agent")]
    starts = [int(s["startTimeUnixNano"]) for s in turns]
    assert starts == sorted(starts)  # the turns in the order they ran

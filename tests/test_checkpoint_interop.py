"""Task checkpoints with the real ``ag2==1.2.1`` client: ag2's ``HubBackedCheckpointStore`` over its own
WsLink against an ag2net server (the ops ``checkpoint_task`` / ``read_task_checkpoint`` are wire contract).

Uses the interop virtualenv of ``test_ws_interop`` (skipped, saying why, only when it cannot be built).
"""

from __future__ import annotations

import json

from test_ws_interop import _run, ag2_python  # noqa: F401  (ag2_python is a fixture)

from ag2net import HubBackedCheckpointStore
from ag2net.hub import Hub
from ag2net.server import serve_ws


async def test_a_real_ag2_client_checkpoints_a_task_on_an_ag2net_server(ag2_python):  # noqa: F811
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=10)
    try:
        async with serve_ws(hub, "127.0.0.1", 0, operator_token="interop-operator") as server:
            out = await _run(ag2_python, "ag2_checkpoint_client.py", server.url(), "ag2-job-1")
        result = json.loads(out.strip().splitlines()[-1])
        assert result == {
            "before": None,
            "after": {"step": 2, "notes": ["resumable"]},
            "other_read": "AccessDeniedError",
            "other_write": "AccessDeniedError",
        }
        assert await HubBackedCheckpointStore(hub).read("ag2-job-1") == {"step": 2, "notes": ["resumable"]}
    finally:
        await hub.close()

"""A cancelled replay stops the agents it attached (their clients are closed, not left answering)."""

from __future__ import annotations

import asyncio

import pytest
from support import until
from test_debug_replay import demo_hub  # noqa: F401  (a fixture: the demo's pairing conversation)

from ag2net import ScriptedModel
from ag2net.debug.fork import fork
from ag2net.debug.replay import Override, replay


def critic_disagrees() -> dict[str, Override]:
    return {
        "critic": Override(model=ScriptedModel("I disagree.", loop=True)),
        "coder": Override(model=ScriptedModel("Then what?", loop=True)),
    }


async def test_a_cancelled_replay_stops_the_agents_it_attached(demo_hub):  # noqa: F811
    hub, cid, _demo = demo_hub
    async with await fork(hub, cid, 1) as box:
        task = asyncio.create_task(replay(hub, box, overrides=critic_disagrees(), timeout=30))
        await until(lambda: box.hub.list_turns(channel_id=cid, limit=10), timeout=30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        settled = len(await box.hub.list_turns(channel_id=cid, limit=1000))
        count = box.hub.wal_count(cid)
        await asyncio.sleep(0.3)
        assert box.hub.wal_count(cid) == count  # nobody answers any more
        assert len(await box.hub.list_turns(channel_id=cid, limit=1000)) == settled

"""A cancelled replay stops the agents it attached (their clients are closed, not left answering)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from ag2net import Hub, HubClient, ScriptedModel
from ag2net.debug.fork import fork
from ag2net.debug.replay import Override, replay
from ag2net.demo import start_demo


@pytest.fixture
async def demo_hub() -> Any:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5)
    hc = HubClient.local(hub)
    demo = await start_demo(hc)
    await asyncio.wait_for(demo.run(), timeout=15)
    await demo.close()
    cid = next(c for c, step in demo.steps.items() if step == "pairing")
    yield hub, cid
    await hc.close()
    await hub.close()


def critic_disagrees() -> dict[str, Override]:
    return {
        "critic": Override(model=ScriptedModel("I disagree.", loop=True)),
        "coder": Override(model=ScriptedModel("Then what?", loop=True)),
    }


async def test_a_cancelled_replay_stops_the_agents_it_attached(demo_hub):
    hub, cid = demo_hub
    async with await fork(hub, cid, 1) as box:
        task = asyncio.create_task(replay(hub, box, overrides=critic_disagrees(), timeout=30))
        while await box.hub.list_turns(channel_id=cid, limit=10) == []:
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        settled = len(await box.hub.list_turns(channel_id=cid, limit=1000))
        count = box.hub.wal_count(cid)
        await asyncio.sleep(0.3)
        assert box.hub.wal_count(cid) == count  # nobody answers any more
        assert len(await box.hub.list_turns(channel_id=cid, limit=1000)) == settled

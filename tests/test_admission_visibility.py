"""A reader never sees a channel's adapter state ahead of its WAL, even while an append is committing."""

import asyncio

from ag2net import Hub, HubClient, Passport, SqliteStore


async def test_state_moves_only_once_the_wal_holds_the_envelope(tmp_path):
    hub = await Hub.open(SqliteStore(tmp_path / "h.db"), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc = HubClient.local(hub)
        ana, ben, cy = [await hc.register_human(Passport(name=n, kind="human")) for n in ("ana", "ben", "cy")]
        ch = await ana.open(type="discussion", target=["ben", "cy"])
        cid = ch.channel_id
        post = asyncio.ensure_future(ana.send(cid, "topic"))
        checks = 0
        while not post.done():
            state = hub.adapter_state(cid)
            wal = [e.envelope_id for e in await hub.read_wal(cid)]
            if state.last_envelope_id is not None:
                assert state.last_envelope_id in wal, "adapter state names an envelope the WAL does not hold"
            if hub.can_send(cid, ben.agent_id):
                assert state.last_envelope_id in wal
            checks += 1
            await asyncio.sleep(0)
        await post
        assert checks > 0
        assert hub.can_send(cid, ben.agent_id)
        assert hub.adapter_state(cid).last_envelope_id == (await hub.read_wal(cid))[-1].envelope_id
    finally:
        await hub.close()

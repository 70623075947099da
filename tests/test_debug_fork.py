"""Fork (``ag2net.debug.fork``): a sandbox hub holding a channel as it was at a seq: the same identities
(ids, names, resumes, rules, skills), the WAL prefix envelope for envelope, the adapter state folded by the
sandbox's own hydrate, the lifecycle the prefix shows; nothing written to the source, through an in-process
hub or a HubClient over a real socket."""

from __future__ import annotations

import pytest
from support import quiet, run_demo

from ag2net import EV_TEXT, Envelope, Hub, HubClient
from ag2net.debug import fork, states_at
from ag2net.server import serve_ws


async def test_forking_the_demo_conversation():
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        cid = next(c for c, step in demo.steps.items() if step == "pairing")
        source = await hub.read_wal(cid)
        before = (await hub.store.read_wal(cid), hub.wal_count(cid), repr(hub.channels.states[cid]))
        scrubber = await states_at(hub, cid)
        coder, critic = demo["coder"].agent_id, demo["critic"].agent_id
        async with await fork(hub, cid, 10) as box:
            mirror = box.hub
            assert [e.to_dict() for e in await mirror.read_wal(cid)] == [e.to_dict() for e in source[:10]]
            assert mirror.channels.states[cid] == scrubber.state(10)
            md = mirror.lookup_channel(cid)
            assert (md.state, md.participant_ids()) == ("active", [coder, critic])
            for agent_id in (coder, critic):
                assert (await mirror.get_agent(agent_id)).to_dict() == (
                    await hub.get_agent(agent_id)
                ).to_dict()
                assert await mirror.get_resume(agent_id) == await hub.get_resume(agent_id)
                assert await mirror.get_rule(agent_id) == await hub.get_rule(agent_id)
                assert await mirror.get_skill(agent_id) == await hub.get_skill(agent_id)
            # the sandbox runs on: a post there lands there only
            await mirror.post_envelope(Envelope(cid, critic, None, EV_TEXT, {"text": "what if?"}))
            assert mirror.wal_count(cid) == 11
            assert (await mirror.read_wal(cid))[-1].envelope_id > source[9].envelope_id
        assert (await hub.store.read_wal(cid), hub.wal_count(cid), repr(hub.channels.states[cid])) == before
        # the lifecycle the prefix shows: pending with the invitee yet to ack, or closed with its reason
        async with await fork(hub, cid, 1) as box:
            md = box.hub.lookup_channel(cid)
            assert (md.state, md.pending_acks) == ("pending", [critic])
        async with await fork(hub, cid, len(source)) as box:
            md = box.hub.lookup_channel(cid)
            assert (md.state, md.close_reason) == ("closed", "max_turns")
        with pytest.raises(
            ValueError, match=rf"^at_seq must be a seq of channel '{cid}', between 0 and 20; got 21$"
        ):
            await fork(hub, cid, 21)
    finally:
        await hc.close()
        await hub.close()


async def test_forking_through_a_websocket_client(hub, hc):
    from ag2net import Passport

    ana = await hc.register_human(Passport(name="ana", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="discussion", participants=[ana.agent_id, bob.agent_id]
    )
    await hc.post_envelope(Envelope(md.channel_id, ana.agent_id, None, EV_TEXT, {"text": "one"}))
    async with serve_ws(hub, "127.0.0.1", 0, operator_token="op") as server:
        remote = HubClient.connect(server.url(), operator_token="op", rpc_timeout=10, identity_secrets=False)
        try:
            async with await fork(remote, md.channel_id, hub.wal_count(md.channel_id)) as box:
                assert await box.hub.read_wal(md.channel_id) == await hub.read_wal(md.channel_id)
                assert box.hub.channels.states[md.channel_id] == hub.channels.states[md.channel_id]
                assert box.hub.lookup_channel(md.channel_id).state == "active"
        finally:
            await remote.close()

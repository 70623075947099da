"""Who receives an envelope is answered by one function, the one the hub's dispatch asks (issue 22 item 2).

The visibility matrix and the dry run report as recipients exactly the identities the hub delivers an
envelope to: observed here on the real deliveries (the ``HubClient``'s own delivery callback) of the demo
network, every envelope of every channel, and of a three-party channel taken through its invites and acks
with a dry run before each post. Before, an invite's ack was reported as delivered to the other
participants (and a dry run of it listed them), while the hub delivers acks to no one.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from support import quiet

from ag2net import EV_CHANNEL_INVITE_ACK, EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.debug import dry_run
from ag2net.debug.visibility import visibility
from ag2net.demo import start_demo
from ag2net.hub.local import LocalLink
from ag2net.identity import AccessBlock, Rule
from ag2net.protocol.frames import HelloFrame, NotifyFrame, PingFrame, PongFrame


class Recording(HubClient):
    """A real in-process client that notes every delivery the hub makes to its identities."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.deliveries: dict[str, set[str]] = defaultdict(set)

    async def _on_notify(self, recipient_id: str, envelope: Envelope) -> None:
        self.deliveries[envelope.envelope_id].add(recipient_id)
        await super()._on_notify(recipient_id, envelope)


async def open_hub() -> Hub:
    return await Hub.open(None, **quiet())


async def delivered_all(hub: Hub) -> None:
    """Until every mailbox is drained and every counted delivery acknowledged."""
    for _ in range(2000):
        if all(len(m) == 0 for m in hub.delivery.mailboxes.values()) and not any(
            hub.delivery.unacked.values()
        ):
            for _ in range(5):
                await asyncio.sleep(0)
            return
        await asyncio.sleep(0.005)
    raise AssertionError("deliveries still pending")


async def test_visibility_reports_exactly_the_deliveries_of_every_demo_envelope():
    hub = await open_hub()
    hc = Recording(hub.local_link())
    try:
        await hc.register_human(Passport(name="me", kind="human"))
        demo = await start_demo(hc, human_name="me")
        await asyncio.wait_for(demo.run(), timeout=30)
        await delivered_all(hub)
        channels = hub.query_channels(include_terminal=True, limit=None)
        assert {md.manifest.type for md in channels} == {
            "consulting",
            "conversation",
            "discussion",
            "workflow",
        }
        checked = acks = 0
        for md in channels:
            for pid in md.participant_ids():  # everyone connected: dispatch skipped no one for being away
                assert hub.delivery.bindings.get(pid) is not None
            matrix = await visibility(hub, md.channel_id)
            assert len(matrix.rows) == hub.wal_count(md.channel_id)
            for row in matrix.rows:
                reported = {pid for pid, cell in row.cells.items() if cell.delivered}
                assert reported == hc.deliveries.get(row.envelope_id, set()), (
                    md.manifest.type,
                    row.seq,
                    row.event_type,
                )
                checked += 1
                if row.event_type == EV_CHANNEL_INVITE_ACK:
                    acks += 1
                    assert not reported
                    assert {pid: cell.reason for pid, cell in row.cells.items() if pid != row.sender_id} == {
                        pid: "handshake" for pid in row.cells if pid != row.sender_id
                    }
                    assert row.cells[row.sender_id].reason == "sender"  # its own event
        assert checked > 50 and acks > 0
        await demo.close()
    finally:
        await hc.close()
        await hub.close()


async def test_a_dry_run_names_the_recipients_the_post_is_delivered_to():
    """alice opens a channel with bob and carol, who ack by hand: before each post (the acks, then texts
    to all and to one) its dry run's recipients are the ones the hub then delivers it to."""
    hub = await open_hub()
    hc = Recording(hub.local_link())
    try:
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        bob = await hc.register_human(Passport(name="bob", kind="human"), auto_ack_invites=False)
        carol = await hc.register_human(Passport(name="carol", kind="human"), auto_ack_invites=False)
        opening = asyncio.ensure_future(
            hc.create_channel(
                creator_id=alice.agent_id,
                manifest_type="discussion",
                participants=[bob.agent_id, carol.agent_id],
            )
        )
        for _ in range(500):
            pending = [md for md in hub.query_channels(include_terminal=True, limit=None)]
            if pending and len(await hub.read_wal(pending[0].channel_id)) == 2:
                break
            await asyncio.sleep(0.01)
        cid = pending[0].channel_id

        async def post(env: Envelope) -> None:
            planned = await dry_run(hc, env)
            assert planned.admitted, planned.message
            eid = await hc.post_envelope(env)
            await delivered_all(hub)
            assert set(planned.recipient_ids) == hc.deliveries.get(eid, set()), env.event_type

        for who in (bob, carol):
            await post(Envelope(cid, who.agent_id, None, EV_CHANNEL_INVITE_ACK, {"channel_id": cid}))
        await asyncio.wait_for(opening, 5)
        await post(Envelope(cid, alice.agent_id, None, EV_TEXT, {"text": "to all"}))
        await post(Envelope(cid, bob.agent_id, [carol.agent_id], EV_TEXT, {"text": "to carol"}))
        acks = [e for e in await hub.read_wal(cid) if e.event_type == EV_CHANNEL_INVITE_ACK]
        assert len(acks) == 2 and not any(hc.deliveries.get(e.envelope_id) for e in acks)
    finally:
        await hc.close()
        await hub.close()


async def test_a_replay_resends_only_what_the_dispatch_would_have_delivered():
    """carol accepts envelopes from bob only (``inbound_from``): what alice posts while carol is away is
    not replayed to her on ``hello`` either (before, a replay checked the audience alone)."""
    hub = await open_hub()
    hc = Recording(hub.local_link())
    raw = None
    try:
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        bob = await hc.register_human(Passport(name="bob", kind="human"))
        carol = await hc.register_human(
            Passport(name="carol", kind="human"), rule=Rule(access=AccessBlock(inbound_from=["bob"]))
        )
        cid = (await bob.open(type="discussion", target=["alice", "carol"])).channel_id
        await delivered_all(hub)
        hub.unbind_endpoint(hub.delivery.bindings[carol.agent_id], carol.agent_id)
        from_bob = await bob.send(cid, "from bob")
        from_alice = await alice.send(cid, "from alice")
        await delivered_all(hub)
        raw = LocalLink(hub).client()
        await raw.send_frame(HelloFrame(name="carol", since_envelope_id=""))
        await raw.send_frame(PingFrame())  # answered once the hello's replay is out (frames run in order)
        frames = raw.frames()
        replayed: list[str] = []
        while not isinstance(frame := await asyncio.wait_for(anext(frames), 5), PongFrame):
            if isinstance(frame, NotifyFrame):
                replayed.append(frame.envelope.envelope_id)
        assert from_bob in replayed
        assert from_alice not in replayed
    finally:
        if raw is not None:
            await raw.close()
        await hc.close()
        await hub.close()

"""Fan-out delivery keeps its promises however envelopes queue up per recipient (the mailbox drains what
queued while a delivery ran, in one wake): per channel in WAL order, none lost, each acknowledged once
delivered, a slow recipient holding nobody else up, a cursor at the last acknowledged envelope, and a
replay after a reconnect resending exactly what was not acknowledged."""

from __future__ import annotations

import asyncio

from support import until

from ag2net import Envelope, HubClient, Passport
from ag2net.hub.local import LocalLink
from ag2net.protocol.frames import HelloFrame, NotifyFrame, PingFrame, PongFrame, ReceiptFrame

EV = "test.fan"


def delivered(hub) -> bool:
    d = hub.delivery
    return all(len(m) == 0 for m in d.mailboxes.values()) and not any(d.unacked.values())


async def post(sender, cid: str, i: int) -> str:
    return await sender.post_envelope(Envelope(cid, sender.agent_id, None, EV, {"i": i}))


async def test_many_recipients_in_interleaved_channels_get_every_envelope_in_order(hub):
    hc = HubClient.local(hub)
    try:
        poster = await hc.register_human(Passport(name="poster", kind="human"))
        names = [f"r{i}" for i in range(8)]
        recipients = [await hc.register_human(Passport(name=n, kind="human")) for n in names]
        cids = [(await poster.open(type="discussion", target=names)).channel_id for _ in range(3)]
        got: dict[str, dict[str, list[str]]] = {r.agent_id: {c: [] for c in cids} for r in recipients}

        def keep(agent_id: str):
            async def cb(env: Envelope) -> None:
                if env.event_type == EV:
                    got[agent_id][env.channel_id].append(env.envelope_id)
                    if len(got[agent_id][env.channel_id]) % 7 == 0:
                        await asyncio.sleep(0)  # some handlers suspend: envelopes queue behind them

            return cb

        for r in recipients:
            r.on_envelope(keep(r.agent_id))
        # 16 posts in flight at a time, round-robin over the channels: mailboxes fill faster than they drain
        n = 90
        for start in range(0, n, 16):
            await asyncio.gather(*(post(poster, cids[i % 3], i) for i in range(start, min(n, start + 16))))
        await until(lambda: delivered(hub))
        for cid in cids:
            wal = [e.envelope_id for e in await hub.read_wal(cid) if e.event_type == EV]
            assert len(wal) == n // 3
            for r in recipients:
                assert got[r.agent_id][cid] == wal, (r.passport.name, cid)
                assert hub.delivery.cursor(r.agent_id, cid) == wal[-1]
    finally:
        await hc.close()


async def test_a_slow_recipient_holds_up_nobody_and_still_gets_everything_in_order(hub):
    hc = HubClient.local(hub)
    try:
        poster = await hc.register_human(Passport(name="poster", kind="human"))
        fast = await hc.register_human(Passport(name="fast", kind="human"))
        slow = await hc.register_human(Passport(name="slow", kind="human"))
        cid = (await poster.open(type="discussion", target=["fast", "slow"])).channel_id
        gate = asyncio.Event()
        fast_got: list[int] = []
        slow_got: list[int] = []

        async def on_fast(env: Envelope) -> None:
            if env.event_type == EV:
                fast_got.append(env.event_data["i"])

        async def on_slow(env: Envelope) -> None:
            if env.event_type == EV:
                await gate.wait()
                slow_got.append(env.event_data["i"])

        fast.on_envelope(on_fast)
        slow.on_envelope(on_slow)
        n = 40
        await asyncio.gather(*(post(poster, cid, i) for i in range(n)))
        await until(lambda: len(fast_got) == n)
        assert fast_got == list(range(n))
        assert slow_got == []
        assert hub.delivery.pending(slow.agent_id) == n  # nothing acknowledged before it was handled
        gate.set()
        await until(lambda: delivered(hub))
        assert slow_got == list(range(n))
    finally:
        await hc.close()


async def _raw(hub, name: str, since: str | None):
    """A frame-speaking connection for ``name``; returns it and its frame iterator once the hello (and
    its replay) is through, with the replayed deliveries."""
    raw = LocalLink(hub).client()
    await raw.send_frame(HelloFrame(name=name, since_envelope_id=since))
    await raw.send_frame(PingFrame())
    frames = raw.frames()
    replayed: list[Envelope] = []
    while not isinstance(frame := await asyncio.wait_for(anext(frames), 5), PongFrame):
        if isinstance(frame, NotifyFrame):
            replayed.append(frame.envelope)
    return raw, frames, replayed


async def test_an_ack_for_part_of_a_batch_moves_the_cursor_there_and_a_replay_sends_the_rest(hub):
    hc = HubClient.local(hub)
    raw = again = None
    try:
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        carol = await hc.register_human(Passport(name="carol", kind="human"))
        cid = (await alice.open(type="conversation", target="carol")).channel_id
        await until(lambda: delivered(hub))
        hub.unbind_endpoint(hub.delivery.bindings[carol.agent_id], carol.agent_id)
        raw, frames, _ = await _raw(hub, "carol", None)
        ids = [await post(alice, cid, i) for i in range(10)]
        seen: list[str] = []
        while len(seen) < len(ids):
            frame = await asyncio.wait_for(anext(frames), 5)
            if isinstance(frame, NotifyFrame) and frame.envelope.event_type == EV:
                seen.append(frame.envelope.envelope_id)
        assert seen == ids
        for envelope_id in ids[:4]:
            await raw.send_frame(ReceiptFrame(envelope_id, "ack", carol.agent_id, cid))
        await raw.send_frame(PingFrame())  # frames are served in order: the receipts are in
        while not isinstance(await asyncio.wait_for(anext(frames), 5), PongFrame):
            pass
        assert hub.delivery.pending(carol.agent_id) == 6
        assert hub.delivery.cursor(carol.agent_id, cid) == ids[3]
        await raw.close()
        raw = None
        again, _, replayed = await _raw(hub, "carol", "")
        assert [e.envelope_id for e in replayed if e.event_type == EV] == ids[4:]
    finally:
        for conn in (raw, again):
            if conn is not None:
                await conn.close()
        await hc.close()


async def test_a_recipient_that_disconnects_mid_burst_loses_nothing_after_a_replay(hub):
    hc = HubClient.local(hub)
    ben_hc = HubClient.local(hub)
    again = None
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ben = await ben_hc.register_human(Passport(name="ben", kind="human"))
        cid = (await ana.open(type="conversation", target="ben")).channel_id
        await until(lambda: delivered(hub))
        before: list[str] = []
        closing: list[asyncio.Task[None]] = []

        async def on_ben(env: Envelope) -> None:
            if env.event_type == EV:
                before.append(env.envelope_id)
                if len(before) == 7:  # gone with deliveries still queued for it
                    closing.append(asyncio.create_task(ben_hc.close()))

        ben.on_envelope(on_ben)
        ids: list[str] = []
        for start in range(0, 30, 10):
            ids += await asyncio.gather(*(post(ana, cid, i) for i in range(start, start + 10)))
        await until(lambda: bool(closing) and closing[0].done())
        assert before == ids[: len(before)]  # what it got before it went, in order
        again, _, replayed = await _raw(hub, "ben", "")
        replayed_ids = [e.envelope_id for e in replayed if e.event_type == EV]
        assert replayed_ids == sorted(replayed_ids)
        # at least once: everything it did not acknowledge comes again, in order
        merged = before + [i for i in replayed_ids if i not in before]
        assert merged == ids
        assert all(i > hub.delivery.cursor(ben.agent_id, cid) for i in replayed_ids)
    finally:
        if again is not None:
            await again.close()
        await ben_hc.close()
        await hc.close()

"""The in-process receipt path (``HubClient.ack_now`` -> ``LocalLinkClient.receipt_handler`` -> the hub):
every delivery's ack clears its pending entry and advances the recipient's cursor, a ``Hub`` subclass that
overrides ``handle_receipt`` still sees each one, and an ack after the connection closed changes nothing."""

from __future__ import annotations

from support import quiet, until

from ag2net import Envelope, HubClient, Passport
from ag2net.hub import Hub
from ag2net.store import MemoryStore


async def broadcast(hub: Hub, n: int, names: list[str]):
    hc = HubClient.local(hub)
    poster = await hc.register_human(Passport(name="poster", kind="human"))
    humans = [await hc.register_human(Passport(name=name, kind="human")) for name in names]
    ch = await poster.open(type="discussion", target=names)
    ids = [
        await poster.post_envelope(Envelope(ch.channel_id, poster.agent_id, None, "test.b", {"i": i}))
        for i in range(n)
    ]
    return hc, humans, ch.channel_id, ids


async def test_every_delivery_is_acknowledged_and_advances_the_cursor(sqlite_hub):
    hub = sqlite_hub
    hc, humans, cid, ids = await broadcast(hub, 30, ["r0", "r1", "r2"])
    await until(lambda: all(hub.pending_inbox(h.agent_id) == 0 for h in humans))
    for human in humans:
        assert hub.inbox_cursor(human.agent_id, cid) == ids[-1]
    await hc.close()


async def test_a_hub_subclass_that_overrides_handle_receipt_sees_each_in_process_ack():
    seen: list[tuple[str, str]] = []

    class Counting(Hub):
        def handle_receipt(self, endpoint, envelope_id, status, recipient_id, channel_id, reason=""):
            seen.append((recipient_id, envelope_id))
            super().handle_receipt(endpoint, envelope_id, status, recipient_id, channel_id, reason)

    hub = await Counting.open(MemoryStore(), **quiet())
    try:
        hc, humans, _cid, ids = await broadcast(hub, 5, ["r0", "r1"])
        await until(lambda: all(hub.pending_inbox(h.agent_id) == 0 for h in humans))
        for human in humans:
            assert [e for r, e in seen if r == human.agent_id][-5:] == ids
        await hc.close()
    finally:
        await hub.close()


async def test_an_ack_after_the_connection_closed_changes_nothing(sqlite_hub):
    hub = sqlite_hub
    hc, humans, cid, ids = await broadcast(hub, 3, ["r0"])
    await until(lambda: hub.pending_inbox(humans[0].agent_id) == 0)
    late = Envelope(cid, humans[0].agent_id, None, "test.b", {"i": 99})
    late.envelope_id = "zzzz-after-the-last"
    await hc.link.close()
    assert hc.ack_now(late, humans[0].agent_id)  # taken (and dropped: this endpoint holds nobody now)
    assert hub.inbox_cursor(humans[0].agent_id, cid) == ids[-1]
    await hc.close()

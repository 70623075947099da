"""HumanClient's pull buffer serves urgent > normal > background, FIFO within a level (SPEC decision 1).

The hub's mailbox orders by priority, but a human who is not reading takes every delivery at once into
its pull buffer: the order must hold there too, for ``next_envelope`` and ``envelopes()`` alike.
"""

from __future__ import annotations

import asyncio

from support import until

from ag2net import Envelope, HubClient, Passport
from ag2net.client.human_client import HumanClient

SENT = [
    ("bg1", "background"),
    ("n1", "normal"),
    ("u1", "urgent"),
    ("bg2", "background"),
    ("n2", "normal"),
    ("u2", "urgent"),
    ("n3", "normal"),
]
BY_PRIORITY = ["u1", "u2", "n1", "n2", "n3", "bg1", "bg2"]


def is_probe(env: Envelope) -> bool:
    return env.event_type == "test.p"


async def deliver_while_ben_is_not_reading(hub, sent=SENT):
    """ana posts ``sent`` to ben, who reads nothing until every delivery has reached his client."""
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    for n, priority in sent:
        await ana.post_envelope(
            Envelope(ch.channel_id, ana.agent_id, None, "test.p", {"n": n}, priority=priority)
        )
        # A counted delivery is acknowledged once ben's client has taken it into its buffer; waiting
        # for each keeps the arrival order the posting order (the hub's mailbox would reorder a burst).
        await until(lambda: hub.health()["pending_inbox_total"] == 0)
    return hc, ana, ben


async def test_a_human_who_reads_later_gets_urgent_then_normal_then_background(hub):
    hc, _ana, ben = await deliver_while_ben_is_not_reading(hub)
    got = [(await ben.next_envelope(predicate=is_probe, timeout=2)).event_data["n"] for _ in SENT]
    assert got == BY_PRIORITY
    await hc.close()


async def test_the_envelopes_stream_keeps_the_same_order_and_ends_after_disconnect(hub):
    hc, _ana, ben = await deliver_while_ben_is_not_reading(hub)
    await ben.disconnect()  # what is buffered is still served, then the stream ends
    got = [env.event_data["n"] async for env in ben.envelopes() if is_probe(env)]
    assert got == BY_PRIORITY
    await hc.close()


async def test_a_waiting_reader_is_woken_by_each_arrival(hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    waiting = asyncio.ensure_future(ben.next_envelope(predicate=is_probe, timeout=2))
    await asyncio.sleep(0.02)
    await ana.post_envelope(
        Envelope(ch.channel_id, ana.agent_id, None, "test.p", {"n": "bg"}, priority="background")
    )
    assert (await waiting).event_data["n"] == "bg"
    await hc.close()


async def test_the_bound_keeps_the_newest_deliveries_whatever_their_priority(hub, monkeypatch):
    monkeypatch.setattr(HumanClient, "pull_buffer", 4)
    sent = (
        [("u-old", "urgent"), ("bg-old", "background"), ("n-old", "normal")]
        + [(f"bg{i}", "background") for i in range(2)]
        + [("n-new", "normal"), ("u-new", "urgent")]
    )
    hc, _ana, ben = await deliver_while_ben_is_not_reading(hub, sent)
    assert ben.dropped >= 3  # the three oldest probes (and the channel's own protocol envelopes)
    got = []
    while True:
        try:
            got.append((await ben.next_envelope(predicate=is_probe, timeout=0.05)).event_data["n"])
        except TimeoutError:
            break
    assert got == ["u-new", "n-new", "bg0", "bg1"]
    await hc.close()

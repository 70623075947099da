"""The delivery hot path (``hub.dispatch.Mailbox``'s pump, ``Delivery.dispatch``'s inline pressure test)
keeps what the slower path kept: per recipient, urgent before normal before background and FIFO within a
level, however a burst arrives; inbox pressure fires once at the high-water mark and again only after the
recipient fell back below it."""

from __future__ import annotations

import asyncio

from support import until

from ag2net import Envelope, HubClient, Passport
from ag2net.envelope import Priority
from ag2net.identity import InboxBlock, LimitsBlock, Rule

BURST: list[tuple[str, Priority]] = [
    ("n1", "normal"),
    ("b1", "background"),
    ("u1", "urgent"),
    ("n2", "normal"),
    ("u2", "urgent"),
    ("b2", "background"),
    ("n3", "normal"),
    ("n4", "normal"),
    ("u3", "urgent"),
]


class Pressure:
    """A listener that keeps the ``on_inbox_pressure`` calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int, int]] = []

    async def on_inbox_pressure(self, agent_id: str, pending: int, cap: int) -> None:
        self.calls.append((agent_id, pending, cap))


async def stalled_pair(hub, rule: Rule | None = None):
    """ana and ben in a conversation; ben's handler waits on ``gate`` for each ``test.p`` delivery."""
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"), rule=rule)
    ch = await ana.open(type="conversation", target="ben")
    gate = asyncio.Event()
    got: list[str] = []

    async def slow(env: Envelope) -> None:
        if env.event_type == "test.p":
            await gate.wait()
            got.append(env.event_data["n"])

    ben.on_envelope(slow)
    return hc, ana, ben, ch.channel_id, gate, got


async def post(ana, cid: str, n: str, priority: Priority = "normal") -> None:
    await ana.post_envelope(Envelope(cid, ana.agent_id, None, "test.p", {"n": n}, priority=priority))


async def test_a_burst_behind_a_stalled_delivery_comes_out_by_priority_then_in_order(sqlite_hub):
    hub = sqlite_hub
    hc, ana, _ben, cid, gate, got = await stalled_pair(hub)
    await post(ana, cid, "first")
    mailbox = next(iter(hub.delivery.mailboxes.values()))
    await until(lambda: len(mailbox) == 0)  # "first" is in ben's handler, which waits
    for n, priority in BURST:
        await post(ana, cid, n, priority)
    assert len(mailbox) == len(BURST)
    gate.set()
    await until(lambda: len(got) == 1 + len(BURST))
    assert got == ["first", "u1", "u2", "u3", "n1", "n2", "n3", "n4", "b1", "b2"]
    await hc.close()


async def test_posts_one_at_a_time_reach_the_recipient_in_posting_order(sqlite_hub):
    hub = sqlite_hub
    hc, ana, _ben, cid, gate, got = await stalled_pair(hub)
    gate.set()
    sent = [f"m{i}" for i in range(200)]
    for n in sent:
        await post(ana, cid, n)
    await until(lambda: len(got) == len(sent))
    assert got == sent
    wal = [env.event_data["n"] for env in await hub.read_wal(cid) if env.event_type == "test.p"]
    assert wal == sent
    await hc.close()


async def test_inbox_pressure_fires_once_at_high_water_and_again_after_draining(sqlite_hub):
    hub = sqlite_hub
    recorder = Pressure()
    hub.register_listener(recorder)
    rule = Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=10, high_water=3)))
    hc, ana, ben, cid, gate, got = await stalled_pair(hub, rule)
    for i in range(2):
        await post(ana, cid, f"a{i}")
    await asyncio.sleep(0.02)
    assert recorder.calls == []  # 2 pending: below the mark
    for i in range(2, 6):
        await post(ana, cid, f"a{i}")
    await until(lambda: len(recorder.calls) == 1)
    assert recorder.calls == [(ben.agent_id, 3, 10)]  # at the mark, once; not again at 4, 5, 6
    gate.set()
    await until(lambda: hub.pending_inbox(ben.agent_id) == 0)
    gate.clear()
    for i in range(6, 10):
        await post(ana, cid, f"a{i}")
    await until(lambda: len(recorder.calls) == 2)
    assert recorder.calls[1] == (ben.agent_id, 3, 10)  # re-armed by the drain, fired again at the mark
    gate.set()
    await until(lambda: len(got) == 10)
    assert got == [f"a{i}" for i in range(10)]
    await hc.close()

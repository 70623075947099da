"""A channel's inbox exists before anything can be missed (issue 14, defect 4; reference §6.2).

``open()`` creates the creator's inbox and every received envelope is queued, so a waiter that starts
late (``open → send → sleep → wait_for_channel_event``) still finds a close or a fast reply. The inbox
is bounded: the newest ``inbox_limit`` envelopes per channel, ``inbox_channels`` channels.
"""

from __future__ import annotations

import asyncio
import random

from support import until

from ag2net import EV_CHANNEL_CLOSED, EV_TEXT, Agent, HubClient, Passport, ScriptedModel
from ag2net.client.base import ChannelInbox


def closed(e) -> bool:
    return e.event_type == EV_CHANNEL_CLOSED


async def test_a_close_that_came_before_the_wait_is_found(hub, hc):
    asker = await hc.register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    await hc.register(Agent("bob", ScriptedModel("answer", loop=True)), attach_plugin=False)
    seen: list[str] = []

    async def record(envelope):
        seen.append(envelope.event_type)

    asker.on_envelope(record)
    channel = await asker.open(type="consulting", target="bob")
    await channel.send("question?")
    # the reply closes the consulting channel while the asker is busy elsewhere
    await until(lambda: EV_CHANNEL_CLOSED in seen)
    reply = await asker.wait_for_channel_event(
        channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_TEXT, timeout=2
    )
    assert reply.event_data["text"] == "answer"
    close = await asker.wait_for_channel_event(channel_id=channel.channel_id, predicate=closed, timeout=2)
    assert close.event_data.get("reason") == "consulting_complete"


async def test_an_invitee_finds_what_arrived_before_it_waited(hub, hc):
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    seen: list[str] = []

    @bob.on_envelope
    async def record(envelope):
        seen.append(envelope.event_type)

    await channel.send("hello bob")
    await channel.close()
    await until(lambda: EV_CHANNEL_CLOSED in seen)  # delivered before bob starts waiting
    hello = await bob.wait_for_channel_event(
        channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_TEXT, timeout=2
    )
    assert hello.event_data["text"] == "hello bob"
    assert closed(
        await bob.wait_for_channel_event(channel_id=channel.channel_id, predicate=closed, timeout=2)
    )


async def test_inboxes_are_bounded_and_discard_is_final(hub, hc):
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    bob.inbox_limit = 3
    channel = await alice.open(type="conversation", target="bob")
    sent = [await channel.send(f"m{i}") for i in range(6)]
    await until(lambda: bob._inboxes[channel.channel_id].qsize() == 3 and bob.inbox_dropped >= 3)
    got = await bob.wait_for_channel_event(
        channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_TEXT, timeout=2
    )
    assert got.envelope_id == sent[3]  # the oldest were dropped, the newest three kept

    # a discarded inbox is not re-created by later deliveries (the delegate tool relies on it)...
    bob.discard_channel_inbox(channel.channel_id)
    await channel.send("late")
    await channel.close()
    await until(lambda: hub.lookup_channel(channel.channel_id).is_terminal())
    await until(lambda: bob._buffered >= 1)
    assert channel.channel_id not in bob._inboxes

    # ...and at most inbox_channels inboxes are kept, least recently used first out
    alice.inbox_channels = 2
    ids = [(await alice.open(type="conversation", target="bob")).channel_id for _ in range(3)]
    assert len(alice._inboxes) == 2 and ids[-1] in alice._inboxes
    assert channel.channel_id not in alice._inboxes and ids[0] not in alice._inboxes


async def test_two_clients_each_see_their_own_inbox(hub):
    """The inbox lives on the participant, whichever HubClient carries it."""
    a, b = HubClient.local(hub), HubClient.local(hub)
    alice = await a.register_human(Passport(name="alice", kind="human"))
    bob = await b.register_human(Passport(name="bob", kind="human"))
    channel = await alice.open(type="conversation", target="bob")
    await channel.send("hi")
    env = await bob.wait_for_channel_event(
        channel_id=channel.channel_id, predicate=lambda e: e.event_type == EV_TEXT, timeout=2
    )
    assert env.sender_id == alice.agent_id
    await a.close()
    await b.close()


def _task_dones(queue: asyncio.Queue) -> int:
    """How many ``task_done()`` calls the queue takes before it says there were too many."""
    count = 0
    while True:
        try:
            queue.task_done()
        except ValueError:
            return count
        count += 1


async def test_an_inbox_push_does_to_the_queue_what_get_nowait_and_put_nowait_do() -> None:
    """``ChannelInbox.push`` (at the inbox limit a delivery drops the oldest) against the two Queue calls
    it stands for: the same items in order, the same unfinished count, and a waiting getter is woken."""
    rng = random.Random(7)
    for _ in range(100):
        inbox, reference = ChannelInbox(), asyncio.Queue()
        limit = rng.randint(1, 4)
        for i in range(25):
            if rng.random() < 0.7:
                dropped = reference.qsize() >= limit
                if dropped:
                    reference.get_nowait()
                reference.put_nowait(i)
                assert inbox.push(i, limit) is dropped  # type: ignore[arg-type]  # ints stand for envelopes
            elif reference.qsize():
                assert inbox.get_nowait() == reference.get_nowait()
            assert inbox.qsize() == reference.qsize()
        drained = [inbox.get_nowait() for _ in range(inbox.qsize())]
        assert drained == [reference.get_nowait() for _ in range(reference.qsize())]
        assert _task_dones(inbox) == _task_dones(reference) > 0
    inbox = ChannelInbox()
    getter = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)
    inbox.push("x", 3)  # type: ignore[arg-type]
    assert await asyncio.wait_for(getter, 1) == "x"

"""``node:NAME`` breakpoints on a real workflow: a post is held while NAME is the graph's current node (the
speaker it expects), at every node of a round-robin graph, negated, with ``channel.type:``, and after the
hub is reopened on the same database (SQLite)."""

from __future__ import annotations

import asyncio

import pytest
from support import quiet, until

from ag2net import Hub, HubClient, Passport
from ag2net.adapters.transitions import Always, RoundRobinTarget, Transition, TransitionGraph
from ag2net.envelope import EV_TEXT
from ag2net.store import SqliteStore

NAMES = ("ana", "ben", "cy")


async def workflow(hub: Hub, max_turns: int = 12):
    """ana, ben and cy on a round-robin workflow (ana first); the three humans and the channel id."""
    hc = HubClient.local(hub)
    people = [await hc.register_human(Passport(name=n, kind="human")) for n in NAMES]
    graph = TransitionGraph(
        people[0].agent_id, [Transition(Always(), RoundRobinTarget())], max_turns=max_turns
    )
    flow = await people[0].open(type="workflow", target=["ben", "cy"], knobs={"graph": graph.to_dict()})
    return hc, people, flow.channel_id


async def speak(hub: Hub, person, cid: str, words: str) -> str | None:
    """``person`` sends ``words``; the id of the waiting item when the post is held (then released), else None."""
    before = {i.item_id for i in await hub.list_waiting(channel_id=cid)}
    post = asyncio.create_task(person.send(cid, words))
    new: list = []

    async def held_or_done() -> bool:
        new[:] = [i for i in await hub.list_waiting(channel_id=cid) if i.item_id not in before]
        return bool(new) or post.done()

    await until(held_or_done, message=f"{words!r} was neither admitted nor held")
    if not new:
        await post
        return None
    (item,) = new
    assert item.kind == "held" and item.agent_id == person.agent_id
    await hub.answer_waiting(item.item_id, "release", by="ops")
    await post
    return item.item_id


def said(texts: list[str]) -> list[str]:
    return [t for t in texts if t.startswith("turn ")]


async def wal_texts(hub: Hub, cid: str) -> list[str]:
    return [str(e.event_data.get("text", "")) for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]


@pytest.mark.parametrize("node", NAMES)
async def test_node_holds_exactly_the_turns_taken_at_that_node(tmp_path, node):
    hub = await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet(invite_ack_timeout=30))
    try:
        hc, people, cid = await workflow(hub)
        await hub.break_on(f"node:{node}", by="ops")
        held_at = []
        for turn in range(6):  # two rounds: every node comes up twice
            person = people[turn % 3]
            if await speak(hub, person, cid, f"turn {turn} by {person.passport.name}"):
                held_at.append(person.passport.name)
        assert held_at == [node, node]
        # released posts are admitted in order: the workflow went round as if nothing had stopped it
        assert said(await wal_texts(hub, cid)) == [f"turn {t} by {NAMES[t % 3]}" for t in range(6)]
        await hc.close()
    finally:
        await hub.close()


async def test_a_negated_node_and_a_channel_type_term(tmp_path):
    hub = await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet(invite_ack_timeout=30))
    try:
        hc, people, cid = await workflow(hub)
        await hub.break_on("channel.type:workflow and -node:ana", by="ops")
        held_at = [
            people[t % 3].passport.name
            for t in range(3)
            if await speak(hub, people[t % 3], cid, f"turn {t} by {NAMES[t % 3]}")
        ]
        assert held_at == ["ben", "cy"]
        # the same participants in a discussion: no workflow, no node, nothing held
        talk = await people[0].open(type="discussion", target=["ben", "cy"])
        assert await speak(hub, people[0], talk.channel_id, "a discussion text") is None
        await hc.close()
    finally:
        await hub.close()


async def test_a_node_breakpoint_still_holds_after_the_hub_is_reopened(tmp_path):
    db = tmp_path / "hub.db"
    hub = await Hub.open(SqliteStore(db), **quiet(invite_ack_timeout=30))
    hc, people, cid = await workflow(hub)
    await hub.break_on("node:cy", by="ops")
    assert await speak(hub, people[0], cid, "turn 0 by ana") is None
    await hc.close()
    await hub.close()

    hub = await Hub.open(SqliteStore(db), **quiet(invite_ack_timeout=30))
    try:
        hc = HubClient.local(hub)
        people = [await hc.attach_human(n) for n in NAMES]
        assert await speak(hub, people[1], cid, "turn 1 by ben") is None
        assert await speak(hub, people[2], cid, "turn 2 by cy") is not None  # the node survived the restart
        assert said(await wal_texts(hub, cid)) == ["turn 0 by ana", "turn 1 by ben", "turn 2 by cy"]
        await hc.close()
    finally:
        await hub.close()


async def test_hit_counts_are_kept_across_a_reopen(tmp_path):
    db = tmp_path / "hub.db"
    hub = await Hub.open(SqliteStore(db), **quiet(invite_ack_timeout=30))
    hc, people, cid = await workflow(hub)
    bp = await hub.break_on("node:ben", by="ops")
    for turn in range(6):  # ben's two turns are held
        await speak(hub, people[turn % 3], cid, f"turn {turn} by {NAMES[turn % 3]}")
    assert [b.hits for b in await hub.list_breakpoints()] == [2]
    await hc.close()
    await hub.close()

    hub = await Hub.open(SqliteStore(db), **quiet(invite_ack_timeout=30))
    try:
        (kept,) = await hub.list_breakpoints()
        assert (kept.breakpoint_id, kept.hits) == (bp.breakpoint_id, 2)
        hc = HubClient.local(hub)
        people = [await hc.attach_human(n) for n in NAMES]
        await speak(hub, people[0], cid, "turn 6 by ana")
        assert await speak(hub, people[1], cid, "turn 7 by ben") is not None
        assert [b.hits for b in await hub.list_breakpoints()] == [3]  # counting on from the kept count
        await hc.close()
    finally:
        await hub.close()

"""Restart (hydrate), bad input leaving the store unchanged, priority delivery, humans, observe stream."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from support import quiet, until

from ag2net import (
    EV_TEXT,
    Envelope,
    HubClient,
    NotFoundError,
    Passport,
    ProtocolError,
    TransitionGraph,
)
from ag2net.adapters import state_to_dict
from ag2net.channel import ChannelState
from ag2net.hub import Hub
from ag2net.naming import channel_label


async def people(hub, *names):
    hc = HubClient.local(hub)
    return hc, [await hc.register_human(Passport(name=n, kind="human")) for n in names]


async def test_restart_restores_four_channel_types(tmp_path):
    from ag2net.store import SqliteStore

    path = tmp_path / "restart.db"
    hub = await Hub.open(SqliteStore(path), **quiet())
    hc, (ana, ben, cy) = await people(hub, "ana", "ben", "cy")
    consulting = await ana.open(type="consulting", target="ben")
    conversation = await ana.open(type="conversation", target="ben")
    discussion = await ana.open(type="discussion", target=["ben", "cy"])
    graph = TransitionGraph.round_robin([ana.agent_id, ben.agent_id, cy.agent_id])
    workflow = await ana.open(type="workflow", target=["ben", "cy"], knobs={"graph": graph.to_dict()})
    await ana.send(consulting.channel_id, "q?")
    for i in range(3):
        await (ana if i % 2 == 0 else ben).send(conversation.channel_id, f"c{i}")
    await ana.send(discussion.channel_id, "d0")
    await ben.send(discussion.channel_id, "d1")
    await ana.send(workflow.channel_id, "w0")
    ids = [c.channel_id for c in (consulting, conversation, discussion, workflow)]
    before = {cid: [e.to_dict() for e in await hub.read_wal(cid)] for cid in ids}
    states = {cid: state_to_dict(hub.adapter_state(cid)) for cid in ids}
    metas = {cid: hub.lookup_channel(cid).to_dict() for cid in ids}
    await hub.close()

    hub = await Hub.open(SqliteStore(path), **quiet())
    try:
        for cid in ids:
            assert [e.to_dict() for e in await hub.read_wal(cid)] == before[cid]
            assert state_to_dict(hub.adapter_state(cid)) == states[cid]
            assert hub.lookup_channel(cid).to_dict() == metas[cid]
        disc_state = hub.adapter_state(discussion.channel_id)
        assert disc_state.expected_next_speaker == hub.find_agent_id("cy")
        assert disc_state.turn_count == 2
        hc = HubClient.local(hub)
        ana = await hc.attach_human("ana")
        ben = await hc.attach_human("ben")
        cy = await hc.attach_human("cy")
        # each channel accepts its next turn after the restart
        await ben.send(consulting.channel_id, "answer")
        assert hub.lookup_channel(consulting.channel_id).close_reason == "consulting_complete"
        await ben.send(conversation.channel_id, "c3")
        await cy.send(discussion.channel_id, "d2")
        await ben.send(workflow.channel_id, "w1")
        assert hub.adapter_state(discussion.channel_id).turn_count == 3
        assert hub.adapter_state(workflow.channel_id).expected_next_speaker == cy.agent_id
        # the restarted hub mints ids after the stored ones
        wal = await hub.read_wal(conversation.channel_id)
        assert [e.envelope_id for e in wal] == sorted(e.envelope_id for e in wal)
    finally:
        await hub.close()


async def test_attach_human_after_reopen_is_not_a_duplicate(tmp_path):
    from ag2net.store import SqliteStore

    path = tmp_path / "h.db"
    hub = await Hub.open(SqliteStore(path), **quiet())
    hc = HubClient.local(hub)
    first = await hc.register_or_attach_human("me")
    await hub.close()
    hub = await Hub.open(SqliteStore(path), **quiet())
    try:
        hc = HubClient.local(hub)
        again = await hc.register_or_attach_human("me")
        assert again.agent_id == first.agent_id
        assert len(hub.query_agents(kind="human")) == 1
    finally:
        await hub.close()


async def snapshot(hub, cid):
    return (
        [e.to_dict() for e in await hub.read_wal(cid)],
        hub.wal_count(cid),
        state_to_dict(hub.adapter_state(cid)),
    )


async def test_bad_input_leaves_store_unchanged(hub):
    hc, (ana, ben, eve) = await people(hub, "ana", "ben", "eve")
    ch = await ana.open(type="conversation", target="ben")
    await ana.send(ch.channel_id, "kept")
    before = await snapshot(hub, ch.channel_id)
    cid = ch.channel_id
    cases = [
        (
            Envelope("no-such-channel", ana.agent_id, None, EV_TEXT, {"text": "x"}),
            NotFoundError,
            "channel not found: no-such-channel",
        ),
        (
            Envelope(cid, eve.agent_id, None, EV_TEXT, {"text": "x"}),
            ProtocolError,
            "only accepts sends from participants",
        ),
        (
            Envelope(cid, ana.agent_id, None, EV_TEXT, {"blob": "x" * (1024 * 1024 + 10)}),
            ProtocolError,
            "event_data is .* bytes encoded; at most 1048576",
        ),
        (
            Envelope(cid, ana.agent_id, None, EV_TEXT, {"when": object()}),
            ProtocolError,
            "event_data is not JSON-serialisable: object at event_data.when",
        ),
        (
            Envelope(cid, ana.agent_id, ["nobody"], EV_TEXT, {"text": "x"}),
            ProtocolError,
            "audience must list only participants",
        ),
        (
            Envelope(cid, ana.agent_id, None, "", {"text": "x"}),
            ProtocolError,
            "event_type must be a non-empty",
        ),
        (Envelope(cid, "ghost", None, EV_TEXT, {"text": "x"}), NotFoundError, "sender not registered: ghost"),
    ]
    for env, exc, message in cases:
        with pytest.raises(exc, match=message):
            await hub.post_envelope(env)
        assert await snapshot(hub, cid) == before
    with pytest.raises(NotFoundError):
        await ana.send(cid, "hi", audience=["nobody-by-name"])
    # closed and pending channels
    await hub.close_channel(cid)
    closed = await snapshot(hub, cid)
    label = channel_label(hub.lookup_channel(cid).manifest.type, cid)
    with pytest.raises(ProtocolError, match=f"{label} is closed"):
        await ana.send(cid, "late")
    assert await snapshot(hub, cid) == closed


async def test_urgent_delivered_before_queued_normal(hub):
    hc, (ana, ben) = await people(hub, "ana", "ben")
    ch = await ana.open(type="conversation", target="ben")
    gate = asyncio.Event()
    seen: list[str] = []

    async def slow(env: Envelope) -> None:
        if env.event_type == "bench.p":
            if env.event_data["n"] == "first":
                await gate.wait()
            seen.append(env.event_data["n"])

    ben.on_envelope(slow)
    send = ana.post_envelope
    await send(Envelope(ch.channel_id, ana.agent_id, None, "bench.p", {"n": "first"}))
    await asyncio.sleep(0.02)  # ben is now busy with "first"
    for n in ("n1", "n2"):
        await send(Envelope(ch.channel_id, ana.agent_id, None, "bench.p", {"n": n}))
    await send(Envelope(ch.channel_id, ana.agent_id, None, "bench.p", {"n": "bg"}, priority="background"))
    await send(Envelope(ch.channel_id, ana.agent_id, None, "bench.p", {"n": "u1"}, priority="urgent"))
    await send(Envelope(ch.channel_id, ana.agent_id, None, "bench.p", {"n": "u2"}, priority="urgent"))
    gate.set()
    await until(lambda: len(seen) == 6)
    assert seen == ["first", "u1", "u2", "n1", "n2", "bg"]


async def test_human_push_pull_stream(hub):
    """The seed's HumanClient surfaces: push callback, pull with predicate, async stream."""
    hc, (user, analyst) = await people(hub, "user", "analyst")
    pushed: list[str] = []

    async def cb(env: Envelope) -> None:
        pushed.append(env.event_type)

    analyst.on_envelope(cb)
    ch = await user.open(type="conversation", target="analyst")
    await user.send(ch.channel_id, "What's our Q3 exposure?")
    env = await analyst.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=2)
    assert env.event_data == {"text": "What's our Q3 exposure?"}
    assert EV_TEXT in pushed
    analyst.remove_envelope_callback(cb)
    await user.send(ch.channel_id, "second")
    got = []

    async def consume():
        async for e in analyst.envelopes():
            got.append(e)
            if e.event_type == EV_TEXT:
                break

    await asyncio.wait_for(consume(), 2)
    assert got[-1].event_data["text"] == "second"
    assert pushed.count(EV_TEXT) == 1
    with pytest.raises(TimeoutError):
        await analyst.next_envelope(timeout=0.05)
    await analyst.disconnect()
    with pytest.raises(RuntimeError, match="disconnected"):
        await analyst.next_envelope(timeout=0.05)


async def test_raw_custom_envelope_and_read_wal_listing(hub):
    """The seed: a custom event type sent raw with send_envelope, then the read_wal listing."""
    hc, (alice, bob) = await people(hub, "alice", "bob")
    channel = await alice.open(type="conversation", target="bob")
    envelope = Envelope(
        channel_id=channel.channel_id,
        sender_id=alice.agent_id,
        audience=[bob.agent_id],
        event_type="myapp.review_request",
        event_data={"document_id": "doc-123", "kind": "security"},
    )
    await alice.send_envelope(envelope)
    got = await bob.next_envelope(predicate=lambda e: e.event_type == "myapp.review_request", timeout=2)
    assert got.event_data == {"document_id": "doc-123", "kind": "security"}
    wal = await hub.read_wal(channel.channel_id)
    lines = [f"{i:>3}  {env.event_type}  from={env.sender_id[:8]}" for i, env in enumerate(wal)]
    assert lines[-1].endswith(f"myapp.review_request  from={alice.agent_id[:8]}")
    # custom types do not advance turn-taking state
    assert hub.adapter_state(channel.channel_id).turn_count == 0


async def test_observe_catches_up_without_gaps(hub):
    hc, (ana, ben) = await people(hub, "ana", "ben")
    ch = await ana.open(type="conversation", target="ben")
    start = hub.observe_position
    for i in range(5):
        await ana.send(ch.channel_id, f"m{i}")
    seen: list = []

    async def follow():
        async for ev in hc.observe(since=start):
            seen.append(ev)
            if ev.kind == "envelope" and ev.envelope.event_data.get("text") == "m9":
                return

    task = asyncio.create_task(follow())
    await asyncio.sleep(0.01)
    for i in range(5, 10):
        await ana.send(ch.channel_id, f"m{i}")
    await asyncio.wait_for(task, 2)
    positions = [ev.position for ev in seen]
    assert positions == list(range(start + 1, start + 1 + len(seen)))
    texts = [ev.envelope.event_data["text"] for ev in seen if ev.kind == "envelope"]
    assert texts == [f"m{i}" for i in range(10)]
    seqs = [ev.seq for ev in seen if ev.kind == "envelope"]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


async def test_observe_sees_lifecycle_and_audit(hub):
    hc, (ana, ben) = await people(hub, "ana", "ben")
    start = hub.observe_position
    ch = await ana.open(type="conversation", target="ben")
    await hub.close_channel(ch.channel_id, reason="done")
    kinds = []
    async for ev in hc.observe(since=start):
        kinds.append((ev.kind, ev.payload.get("kind")))
        if ev.kind == "channel" and ev.payload.get("kind") == "closed":
            break
    assert ("channel", "created") in kinds and ("channel", "opened") in kinds
    assert ("audit", "channel_created") in kinds


async def test_conversation_max_turns_stops_two_agents(hub):
    from ag2net import Agent, ScriptedModel

    hc = HubClient.local(hub)
    a = await hc.register(Agent("a", ScriptedModel("ping", loop=True)), attach_plugin=False)
    await hc.register(Agent("b", ScriptedModel("pong", loop=True)), attach_plugin=False)
    ch = await a.open(type="conversation", target="b", knobs={"max_turns": 6})
    await ch.send("start")
    await until(lambda: hub.lookup_channel(ch.channel_id).is_terminal())
    md = hub.lookup_channel(ch.channel_id)
    assert md.state == ChannelState.CLOSED and md.close_reason == "max_turns"
    texts = [e for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
    assert len(texts) == 6


def test_state_dataclasses_roundtrip():
    from ag2net.adapters import DiscussionState, state_from_dict

    st = DiscussionState(participant_order=["a", "b"], expected_next_speaker="a")
    assert state_from_dict(DiscussionState, state_to_dict(st)) == st if callable(state_from_dict) else True
    assert dataclasses.is_dataclass(st)


async def test_snapshot_restore_matches_fold_and_stale_snapshot_falls_back():
    """A clean close snapshots adapter states; a later crash leaves a stale snapshot that must be ignored."""
    from ag2net.hub.hub import SNAPSHOT_KEY
    from ag2net.store import MemoryStore

    store = MemoryStore()
    hub = await Hub.open(store, **quiet())
    _hc, (ana, ben, cy) = await people(hub, "ana", "ben", "cy")
    disc = await ana.open(type="discussion", target=["ben", "cy"])
    await ana.send(disc.channel_id, "d0")
    await ben.send(disc.channel_id, "d1")
    folded = state_to_dict(hub.adapter_state(disc.channel_id))
    wal = [e.to_dict() for e in await hub.read_wal(disc.channel_id)]
    await hub.close()
    assert await store.get_meta(SNAPSHOT_KEY)

    hub = await Hub.open(store, **quiet())  # restored from the snapshot, WAL loaded lazily
    assert state_to_dict(hub.adapter_state(disc.channel_id)) == folded
    assert [e.to_dict() for e in await hub.read_wal(disc.channel_id)] == wal
    hc = HubClient.local(hub)
    cy = await hc.attach_human("cy")
    await cy.send(disc.channel_id, "d2")
    after = state_to_dict(hub.adapter_state(disc.channel_id))
    last_id = (await hub.read_wal(disc.channel_id))[-1].envelope_id
    # "crash": this hub is abandoned without close, so the stored snapshot is the stale one from before
    hub._closed = True
    for name in list(hub.sweepers.running):
        await hub.unregister_sweeper(name)

    hub = await Hub.open(store, **quiet())
    try:
        assert state_to_dict(hub.adapter_state(disc.channel_id)) == after
        assert hub.adapter_state(disc.channel_id).turn_count == 3
        hc = HubClient.local(hub)
        ana = await hc.attach_human("ana")
        new_id = await ana.send(disc.channel_id, "d3")
        assert new_id > last_id
    finally:
        await hub.close()


async def test_hydrate_reports_progress_when_it_must_fold():
    from ag2net.hub.hub import SNAPSHOT_KEY
    from ag2net.store import MemoryStore

    store = MemoryStore()
    hub = await Hub.open(store, **quiet())
    _hc, (ana, _ben) = await people(hub, "ana", "ben")
    ch = await ana.open(type="conversation", target="ben")
    for i in range(20):
        await ana.send(ch.channel_id, f"m{i}")
    await hub.close()
    await store.set_meta(SNAPSHOT_KEY, "")  # as after a crash: nothing to restore from
    seen: list[tuple[int, int]] = []
    hub = await Hub.open(store, progress=lambda done, total: seen.append((done, total)), **quiet())
    try:
        assert seen and seen[-1] == (23, 23)
    finally:
        await hub.close()


async def test_unpulled_human_deliveries_are_bounded(hub, monkeypatch):
    from ag2net.client.human_client import HumanClient

    monkeypatch.setattr(HumanClient, "pull_buffer", 5)
    _hc, (ana, ben) = await people(hub, "ana", "ben")
    ch = await ana.open(type="conversation", target="ben")
    for i in range(12):
        await ana.send(ch.channel_id, f"m{i}")
    await asyncio.sleep(0.05)
    assert ben.dropped > 0
    texts = []
    while True:
        try:
            env = await ben.next_envelope(timeout=0.05)
        except TimeoutError:
            break
        texts.append(env.event_data.get("text"))
    assert texts == [f"m{i}" for i in range(7, 12)]  # the newest five, in order

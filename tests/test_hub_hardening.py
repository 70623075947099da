"""Hub hardening: restarts, concurrent admission, failed writes and bounded memory (issue: hardening).

Each test here failed on the hub before the fix it guards: lazy WAL loads raced with posts after a
clean reopen; ``pending_turns_for`` used the reopen time after a clean restart; admission was not
serialised per channel; a failed store write left ghost identities; the WAL cache grew forever.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from support import quiet

from ag2net import EV_TEXT, HubClient, Passport, Resume, TransitionGraph
from ag2net.adapters import state_to_dict
from ag2net.channel import ChannelState
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError, ProtocolError
from ag2net.hub import Hub
from ag2net.hub.hub import SNAPSHOT_KEY
from ag2net.ids import ManualClock
from ag2net.store import MemoryStore, SqliteStore
from ag2net.store.base import StoreError
from ag2net.views import FullTranscript, WindowedSummary


async def people(hub, *names):
    hc = HubClient.local(hub)
    return hc, [await hc.register_human(Passport(name=n, kind="human")) for n in names]


async def stored_ids(store, channel_id):
    return [json.loads(t)["envelope_id"] for t in await store.read_wal(channel_id)]


async def open_four(ana, ben, cy):
    graph = TransitionGraph.round_robin([ana.agent_id, ben.agent_id, cy.agent_id])
    return {
        "consulting": await ana.open(type="consulting", target="ben"),
        "conversation": await ana.open(type="conversation", target="ben"),
        "discussion": await ana.open(type="discussion", target=["ben", "cy"]),
        "workflow": await ana.open(type="workflow", target=["ben", "cy"], knobs={"graph": graph.to_dict()}),
    }


# --- 1. lazy WAL loads after a clean reopen race with posts -------------------------------------


@pytest.mark.parametrize("kind", ["consulting", "conversation", "discussion", "workflow"])
async def test_clean_reopen_then_concurrent_senders_keep_wal_store_and_count_equal(tmp_path, kind):
    path = tmp_path / "race.db"
    hub = await Hub.open(SqliteStore(path), **quiet())
    _hc, (ana, ben, cy) = await people(hub, "ana", "ben", "cy")
    channels = await open_four(ana, ben, cy)
    cid = channels[kind].channel_id
    await ana.send(cid, "first")
    await hub.close()  # clean: adapter states snapshotted, WALs loaded lazily on the next open

    hub = await Hub.open(SqliteStore(path), **quiet())
    try:
        hc = HubClient.local(hub)
        senders = [await hc.attach_human(n) for n in ("ana", "ben", "cy")]
        members = [s for s in senders if s.agent_id in hub.lookup_channel(cid).participant_ids()]
        results = await asyncio.gather(
            *(members[i % len(members)].send(cid, f"m{i}") for i in range(50)), return_exceptions=True
        )
        assert any(isinstance(r, str) for r in results)  # some were admitted
        for r in results:
            assert isinstance(r, (str, NetworkError)), r
        cached = [e.envelope_id for e in await hub.read_wal(cid)]
        assert cached == await stored_ids(hub.store, cid)
        assert hub.wal_count(cid) == len(cached)
        assert [e.envelope_id for _, e in await hub.read_wal_seq(cid, 1, len(cached))] == cached
    finally:
        await hub.close()


# --- 2. pending_turns_for after a clean restart -------------------------------------------------


async def test_pending_turns_for_uses_the_trigger_time_after_clean_and_crash_restarts(tmp_path):
    clock = ManualClock("2026-03-01T10:00:00.000000Z")
    path = tmp_path / "turns.db"
    hub = await Hub.open(SqliteStore(path), clock=clock, **quiet())
    _hc, (ana, ben, _cy) = await people(hub, "ana", "ben", "cy")
    ch = await ana.open(type="discussion", target=["ben", "cy"])
    clock.advance(5)
    trigger_id = await ana.send(ch.channel_id, "your turn, ben")
    trigger_at = clock()
    before = [t.to_dict() for t in await hub.pending_turns_for(ben.agent_id)]
    assert before == [
        {"channel_id": ch.channel_id, "triggering_envelope_id": trigger_id, "expected_at": trigger_at}
    ]
    await hub.close()

    clock.advance(3600)  # the reopen happens an hour later
    clean = await Hub.open(SqliteStore(path), clock=clock, **quiet())
    try:
        after_clean = [t.to_dict() for t in await clean.pending_turns_for(ben.agent_id)]
    finally:
        await clean.close()

    store = SqliteStore(path)
    await store.open()
    await store.set_meta(SNAPSHOT_KEY, "")  # as after a crash: no usable snapshot, every WAL folded
    await store.close()
    crashed = await Hub.open(SqliteStore(path), clock=clock, **quiet())
    try:
        after_crash = [t.to_dict() for t in await crashed.pending_turns_for(ben.agent_id)]
    finally:
        await crashed.close()
    assert after_clean == after_crash == before


async def test_pending_turns_for_finds_a_trigger_older_than_the_cache_window(tmp_path):
    clock = ManualClock("2026-03-01T10:00:00.000000Z")
    hub = await Hub.open(SqliteStore(tmp_path / "w.db"), clock=clock, wal_window=4, **quiet())
    try:
        _hc, (ana, ben, cy) = await people(hub, "ana", "ben", "cy")
        disc = await ana.open(type="discussion", target=["ben", "cy"])
        trigger = await ana.send(disc.channel_id, "ben next")
        at = clock()
        other = await ana.open(type="conversation", target="cy")
        for i in range(20):  # pushes nothing out of disc's log, but trims the other channel's
            clock.advance(1)
            await (ana if i % 2 == 0 else cy).send(other.channel_id, f"x{i}")
        [turn] = [t for t in await hub.pending_turns_for(ben.agent_id) if t.channel_id == disc.channel_id]
        assert (turn.triggering_envelope_id, turn.expected_at) == (trigger, at)
    finally:
        await hub.close()


# --- 3. admission serialised per channel ---------------------------------------------------------


class FaultyAppends(MemoryStore):
    """The real memory store, except that appends of envelopes whose text says "FAIL" raise (a disk
    error stand-in), after yielding so that concurrent posts interleave with the failing one."""

    async def append(self, channel_id: str, envelope_id: str, envelope_json: str) -> int:
        await asyncio.sleep(0)
        if "FAIL" in envelope_json:
            raise StoreError("injected append failure")
        return await super().append(channel_id, envelope_id, envelope_json)


async def fresh_fold(hub, cid):
    md = hub.lookup_channel(cid)
    adapter = hub.adapter_for(cid)
    state = adapter.initial_state(md)
    for text in await hub.store.read_wal(cid):
        state = adapter.fold(Envelope(**json.loads(text)), state)
    return state_to_dict(state)


steps = st.lists(
    st.lists(
        st.tuples(st.sampled_from(["ana", "ben"]), st.sampled_from(["post", "fail", "close"])),
        min_size=1,
        max_size=6,
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=steps)
def test_interleaved_posts_failures_and_closes_keep_state_a_fold_of_the_wal(script):
    async def run() -> None:
        hub = await Hub.open(FaultyAppends(), **quiet())
        try:
            _hc, (ana, ben) = await people(hub, "ana", "ben")
            who = {"ana": ana, "ben": ben}
            ch = await ana.open(type="conversation", target="ben", knobs={"max_turns": 3})
            cid = ch.channel_id
            for burst in script:

                async def one(name: str, action: str, i: int) -> None:
                    if action == "close":
                        await hub.close_channel(cid, reason="test")
                        return
                    text = f"{'FAIL' if action == 'fail' else 'ok'} {name} {i}"
                    await who[name].send(cid, text)

                await asyncio.gather(
                    *(one(n, a, i) for i, (n, a) in enumerate(burst)), return_exceptions=True
                )
                stored = await stored_ids(hub.store, cid)
                assert [e.envelope_id for e in await hub.read_wal(cid)] == stored
                assert hub.wal_count(cid) == len(stored)
                assert state_to_dict(hub.adapter_state(cid)) == await fresh_fold(hub, cid)
                texts = [
                    json.loads(t)
                    for t in await hub.store.read_wal(cid)
                    if json.loads(t)["event_type"] == EV_TEXT
                ]
                assert len(texts) <= 3
                md = hub.lookup_channel(cid)
                if len(texts) == 3:
                    assert md.state == ChannelState.CLOSED
                if md.state == ChannelState.CLOSED and md.close_reason == "max_turns":
                    assert len(texts) == 3
        finally:
            await hub.close()

    asyncio.run(run())


async def test_max_turns_conversation_under_bursts_closes_with_exactly_max_turns(tmp_path):
    for round_ in range(10):
        hub = await Hub.open(FaultyAppends(), **quiet())
        try:
            _hc, (ana, ben) = await people(hub, "ana", "ben")
            ch = await ana.open(type="conversation", target="ben", knobs={"max_turns": 3})
            cid = ch.channel_id
            await asyncio.gather(
                *(
                    (ana if i % 2 == 0 else ben).send(cid, "FAIL" if i % 3 == 1 else f"ok {round_} {i}")
                    for i in range(12)
                ),
                return_exceptions=True,
            )
            texts = [e for e in await hub.read_wal(cid) if e.event_type == EV_TEXT]
            md = hub.lookup_channel(cid)
            assert len(texts) == 3 and md.state == ChannelState.CLOSED, (len(texts), md.state)
            assert hub.wal_count(cid) == len(await hub.store.read_wal(cid))
        finally:
            await hub.close()


# --- 6. no ghosts after a failed write -----------------------------------------------------------


class FailingAgentWrites(SqliteStore):
    """A real SQLite store whose agent writes fail while ``broken`` is set (a full disk stand-in)."""

    broken = False

    async def put_agent(self, record: dict) -> None:
        if self.broken:
            raise StoreError("injected write failure")
        await super().put_agent(record)


async def test_failed_registration_leaves_no_ghost_and_the_name_stays_free(tmp_path):
    store = FailingAgentWrites(tmp_path / "ghost.db")
    hub = await Hub.open(store, **quiet())
    try:
        hc = HubClient.local(hub)
        store.broken = True
        for _ in range(3):
            with pytest.raises(StoreError):
                await hc.register_human(Passport(name="alice", kind="human"))
        assert hub.find_agent_id("alice") is None
        assert hub.health()["registered_agents"] == 0
        store.broken = False
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        assert hub.find_agent_id("alice") == alice.agent_id
    finally:
        await hub.close()


async def test_failed_updates_leave_resume_skill_and_rule_unchanged(tmp_path):
    from ag2net import Rule

    store = FailingAgentWrites(tmp_path / "ghost.db")
    hub = await Hub.open(store, **quiet())
    try:
        hc = HubClient.local(hub)
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        aid = alice.agent_id
        resume, skill, rule = (
            hub.lookup_resume(aid).to_dict(),
            hub.get_skill_info(aid),
            (await hub.get_rule(aid)).to_dict(),
        )
        store.broken = True
        with pytest.raises(StoreError):
            await hub.set_resume(aid, Resume(summary="changed"))
        with pytest.raises(StoreError):
            await hub.set_skill(aid, "---\ntitle: x\n---\n")
        with pytest.raises(StoreError):
            await hub.set_rule(aid, Rule())
        assert hub.lookup_resume(aid).to_dict() == resume
        assert hub.get_skill_info(aid) == skill
        assert (await hub.get_rule(aid)).to_dict() == rule
        store.broken = False
        await hub.close()
        hub = await Hub.open(FailingAgentWrites(tmp_path / "ghost.db"), **quiet())
        assert hub.lookup_resume(aid).to_dict() == resume  # memory and store agree
    finally:
        await hub.close()


async def test_concurrent_registrations_of_one_name_admit_exactly_one(hub):
    hc = HubClient.local(hub)
    results = await asyncio.gather(
        *(hc.register_human(Passport(name="dup", kind="human")) for _ in range(8)), return_exceptions=True
    )
    ok = [r for r in results if not isinstance(r, BaseException)]
    assert len(ok) == 1
    assert all(isinstance(r, ProtocolError) for r in results if isinstance(r, BaseException))
    assert hub.find_agent_id("dup") == ok[0].agent_id


# --- 12. the WAL cache is bounded --------------------------------------------------------------


@pytest.mark.parametrize("store_kind", ["sqlite", "memory"])
async def test_wal_cache_stays_within_its_window_and_budget_and_reads_stay_exact(tmp_path, store_kind):
    store = SqliteStore(tmp_path / "big.db") if store_kind == "sqlite" else MemoryStore()
    hub = await Hub.open(store, cache_mb=0.25, wal_window=40, **quiet())
    try:
        _hc, (ana, ben, cy) = await people(hub, "ana", "ben", "cy")
        conv = await ana.open(type="conversation", target="ben")
        disc = await ana.open(type="discussion", target=["ben", "cy"])
        for i in range(600):
            await (ana if i % 2 == 0 else ben).send(conv.channel_id, f"message {i} " + "x" * 200)
        stats = hub.health()["wal_cache"]
        assert stats["bytes"] <= stats["budget_bytes"]
        assert stats["envelopes"] <= 2 * 40 + 10
        wal = await hub.read_wal(conv.channel_id)
        assert [e.envelope_id for e in wal] == await stored_ids(hub.store, conv.channel_id)
        assert [e.envelope_id for e in await hub.read_wal(conv.channel_id, since=5, until=9)] == [
            e.envelope_id for e in wal[5:9]
        ]
        assert [e for _, e in await hub.read_wal_seq(conv.channel_id, 3, 7)] == wal[2:7]
        # a view over the bounded log projects exactly what it projects over the whole WAL
        render = hub.adapter_for(conv.channel_id).render_envelope
        for at in (wal[10], wal[300], wal[-1]):
            sliced = await hub.read_wal_until(conv.channel_id, at.envelope_id)
            whole = wal[: wal.index(at)]
            for view in (WindowedSummary(5), WindowedSummary(50), FullTranscript()):
                a = await view.project(sliced, participant_id=ben.agent_id, render_envelope=render)
                b = await view.project(whole, participant_id=ben.agent_id, render_envelope=render)
                assert a == b
        # a closed channel leaves the cache and is read from the store
        await ana.send(disc.channel_id, "d0")
        await hub.close_channel(disc.channel_id)
        assert hub.health()["wal_cache"]["channels"] <= 2
        assert [e.envelope_id for e in await hub.read_wal(disc.channel_id)] == await stored_ids(
            hub.store, disc.channel_id
        )
    finally:
        await hub.close()


async def test_many_channels_are_evicted_least_recently_used_first(tmp_path):
    hub = await Hub.open(SqliteStore(tmp_path / "lru.db"), cache_mb=0.1, wal_window=1000, **quiet())
    try:
        _hc, (ana, ben) = await people(hub, "ana", "ben")
        chans = [await ana.open(type="conversation", target="ben") for _ in range(12)]
        for i in range(30):
            for ch in chans:
                await (ana if i % 2 == 0 else ben).send(ch.channel_id, f"{i} " + "y" * 300)
        stats = hub.health()["wal_cache"]
        assert stats["bytes"] <= stats["budget_bytes"] and stats["channels"] < 12
        for ch in chans:
            assert [e.envelope_id for e in await hub.read_wal(ch.channel_id)] == await stored_ids(
                hub.store, ch.channel_id
            )
            assert hub.wal_count(ch.channel_id) == 33  # invite, ack, opened and 30 texts
    finally:
        await hub.close()


async def test_observe_buffer_is_bounded_by_bytes(tmp_path):
    hub = await Hub.open(MemoryStore(), cache_mb=0.4, **quiet())  # observe buffer: a quarter of it
    try:
        _hc, (ana, ben) = await people(hub, "ana", "ben")
        ch = await ana.open(type="conversation", target="ben")
        for i in range(400):
            await ana.send(ch.channel_id, f"{i} " + "z" * 500)
        health = hub.health()
        assert health["observe_buffer_bytes"] <= 0.1 * (1 << 20) + 2000
        with pytest.raises(ProtocolError, match="older than the buffer"):
            async for _ in hub.observe(since=0):
                break
    finally:
        await hub.close()


# --- WalLog: a trimmed log reads back exactly what it gave up --------------------------------------

participants = ["p0", "p1", "p2"]


def _text(env):
    return env.event_data["text"]


envelope_specs = st.lists(
    st.tuples(
        st.sampled_from(participants),
        st.one_of(st.none(), st.lists(st.sampled_from(participants), max_size=2)),
    ),
    max_size=120,
)


@settings(max_examples=60, deadline=None)
@given(specs=envelope_specs, keep=st.integers(0, 30), cut=st.integers(0, 130), recent_n=st.integers(1, 12))
@example(specs=[("p0", None)] * 18, keep=0, cut=0, recent_n=1)  # a cold block read before a later trim
def test_trimmed_wal_log_projects_and_slices_like_the_whole_list(specs, keep, cut, recent_n):
    from ag2net.views.builtin import window
    from ag2net.views.wal import WalLog

    envs = [
        Envelope("c", sender, aud, EV_TEXT, {"text": f"t{i}"}, envelope_id=f"{i:032x}")
        for i, (sender, aud) in enumerate(specs)
    ]
    log = WalLog(cold=lambda a, b: envs[a:b])
    for i, env in enumerate(envs):
        log.append(env)
        if i % 17 == 16:
            log.trim(keep)
            window(log.prefix(), "p1", _text, recent_n)  # this index must survive the trims
    log.trim(keep)
    assert list(log) == envs and len(log) == len(envs)
    end = min(cut, len(envs))
    assert list(log.prefix(end)) == envs[:end]
    assert log[cut % (len(envs) or 1) :] == envs[cut % (len(envs) or 1) :]
    for pid in participants:
        assert window(log.prefix(end), pid, _text, recent_n) == window(envs[:end], pid, _text, recent_n)


# --- 7. size caps hold in-process too --------------------------------------------------------------


async def test_skill_and_resume_caps_apply_to_in_process_callers(hub):
    from ag2net.identity import MAX_RESUME_BYTES, MAX_SKILL_BYTES

    hc = HubClient.local(hub)
    with pytest.raises(ProtocolError, match=r"skill_md is .* bytes; the limit is"):
        await hub.register_identity(Passport(name="big", kind="human"), skill_md="x" * (MAX_SKILL_BYTES + 1))
    assert hub.find_agent_id("big") is None
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    with pytest.raises(ProtocolError, match=r"resume is .* bytes as JSON"):
        await hub.set_resume(alice.agent_id, Resume(summary="y" * MAX_RESUME_BYTES))
    with pytest.raises(ProtocolError, match="the limit is"):
        await hub.set_skill(alice.agent_id, "é" * (MAX_SKILL_BYTES // 2 + 1))
    await hub.set_skill(alice.agent_id, "# fits\n")
    assert hub.get_skill_info(alice.agent_id)["skill_md"] == "# fits\n"


async def test_find_envelope_by_causation_on_a_channel_longer_than_the_cache_window(tmp_path):
    hub = await Hub.open(SqliteStore(tmp_path / "c.db"), wal_window=8, **quiet())
    try:
        _hc, (ana, ben) = await people(hub, "ana", "ben")
        ch = await ana.open(type="conversation", target="ben")
        cause = await ana.send(ch.channel_id, "question")
        answer = await ben.send(ch.channel_id, "answer", causation_id=cause)
        for i in range(40):  # pushes both out of the cached window
            await (ana if i % 2 == 0 else ben).send(ch.channel_id, f"later {i}")
        found = await hub.find_envelope_by_causation(
            ch.channel_id, sender_id=ben.agent_id, causation_id=cause
        )
        assert found is not None and found.envelope_id == answer
        assert (
            await hub.find_envelope_by_causation(ch.channel_id, sender_id=ana.agent_id, causation_id=cause)
            is None
        )
    finally:
        await hub.close()

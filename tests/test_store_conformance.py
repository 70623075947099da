"""One Store conformance suite, run against MemoryStore, SqliteStore and PostgresStore.

Every behaviour the hub relies on (ordering, seqs without gaps, unique envelope ids, all-or-nothing append
groups, read-your-writes under group commit, synchronous block reads, audit/meta/turns/knowledge/cursors),
restart fidelity (close, reopen on the same storage, same WAL and counters), the hub end to end across a
restart, and for the durable stores kill -9 of a process in the middle of a burst of appends: no
acknowledged envelope may be lost.

PostgreSQL runs on a throwaway server this session starts (tests/pg_server.py); each test gets a fresh
schema of its own. Without the server binaries or asyncpg the postgres cases are skipped with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ag2net.errors import NetworkError
from ag2net.ids import ManualClock
from ag2net.store import MemoryStore, PostgresStore, SqliteStore, Store, StoreError, open_store
from ag2net.store.base import BlockReader

# "sqlite" is SqliteStore's default writer (inline, on the event loop), "sqlite-thread" its writer thread
# (the default with fsync=True).
KINDS = ["memory", "sqlite", "sqlite-thread", "postgres"]
DURABLE = ["sqlite", "sqlite-thread", "postgres"]


class Backend:
    """Where a store keeps its data; ``make()`` builds a new store object on that same data.

    The memory store's data lives in the object, so its ``make()`` hands back the one object (a "restart"
    closes and reopens it, which is what a hub restart on a MemoryStore does).
    """

    def __init__(self, kind: str, target: str | None, factory: Callable[..., Store]) -> None:
        self.kind = kind
        self.target = target
        self._factory = factory

    def make(self, **tuning: Any) -> Store:
        return self._factory(**tuning)


async def make_backend(request, kind: str, tmp_path: Path) -> Backend:
    if kind == "memory":
        store = MemoryStore(clock=ManualClock())
        return Backend(kind, None, lambda **_: store)
    if kind in ("sqlite", "sqlite-thread"):
        path = str(tmp_path / "store.db")
        writer = "thread" if kind == "sqlite-thread" else "auto"
        return Backend(
            kind, path, lambda **tuning: SqliteStore(path, clock=ManualClock(), writer=writer, **tuning)
        )
    server = request.getfixturevalue("pg_server")
    url = await server.fresh_url()
    return Backend(kind, url, lambda **tuning: PostgresStore(url, clock=ManualClock(), **tuning))


def small_batches(kind: str) -> dict[str, Any]:
    """Small batches and pages so the chunking and pagination paths run in every test."""
    if kind == "sqlite":
        # Envelope ids also move to their index every few appends.
        return {"batch_limit": 8, "iter_batch": 5, "ids_batch": 5}
    if kind in ("sqlite-thread", "postgres"):
        return {"batch_limit": 8, "iter_batch": 5}
    return {}


@pytest.fixture(params=KINDS)
async def backend(request, tmp_path) -> Backend:
    return await make_backend(request, request.param, tmp_path)


@pytest.fixture(params=DURABLE)
async def durable_backend(request, tmp_path) -> Backend:
    return await make_backend(request, request.param, tmp_path)


@pytest.fixture
async def store(backend):
    s = backend.make(**small_batches(backend.kind))
    await s.open()
    yield s
    await s.close()


def env(n: int, channel_id: str = "c1") -> str:
    return json.dumps({"n": n, "channel_id": channel_id})


async def fill(store, channel_id: str, count: int, prefix: str = "e") -> list[int]:
    return await asyncio.gather(
        *(store.append(channel_id, f"{prefix}-{channel_id}-{i}", env(i, channel_id)) for i in range(count))
    )


# --- the protocol ---


async def test_every_store_satisfies_the_protocol(store, backend):
    assert isinstance(store, Store)
    assert isinstance(store, BlockReader)  # the hub's WAL cache reads older envelopes back through it
    assert store.durable is (backend.kind in DURABLE)
    assert callable(getattr(store, "append_group", None))
    await store.open()  # idempotent


# --- agents, channels, tasks ---


async def test_agents_upsert_keeps_registration_order_and_delete_forgets(store):
    await store.put_agent({"agent_id": "a1", "name": "alice", "kind": "agent", "passport": {"x": 1}})
    await store.put_agent({"agent_id": "a2", "name": "bob", "kind": "human", "skill_md": None})
    await store.put_agent({"agent_id": "a3", "name": "carol", "kind": "agent"})
    await store.put_agent({"agent_id": "a1", "name": "alice2", "kind": "agent", "passport": {"x": 2}})
    agents = await store.load_agents()
    assert [a["agent_id"] for a in agents] == ["a1", "a2", "a3"]
    assert agents[0] == {"agent_id": "a1", "name": "alice2", "kind": "agent", "passport": {"x": 2}}
    assert agents[1]["skill_md"] is None
    await store.delete_agent("a2")
    await store.delete_agent("nobody")
    assert [a["agent_id"] for a in await store.load_agents()] == ["a1", "a3"]
    await store.put_agent({"agent_id": "a2", "name": "bob"})
    assert [a["agent_id"] for a in await store.load_agents()] == ["a1", "a3", "a2"]


async def test_upserts_in_one_group_commit_keep_first_place_and_last_value(store):
    # Issued together, these share one batch: the same key twice, new and known keys interleaved.
    await asyncio.gather(
        store.put_agent({"agent_id": "b", "v": 1}),
        store.put_agent({"agent_id": "a", "v": 1}),
        store.put_agent({"agent_id": "b", "v": 2}),
        store.set_cursor("x", "c1", "e1"),
        store.set_cursor("x", "c1", "e2"),
        store.put_channel({"channel_id": "k", "v": 1}),
        store.put_channel({"channel_id": "k", "v": 2}),
    )
    assert await store.load_agents() == [{"agent_id": "b", "v": 2}, {"agent_id": "a", "v": 1}]
    assert await store.load_cursors() == {"x": {"c1": "e2"}}
    assert await store.load_channels() == [{"channel_id": "k", "v": 2}]


async def test_a_stored_record_is_a_copy(store):
    record = {"agent_id": "a1", "name": "alice", "resume": {"skills": ["x"]}}
    await store.put_agent(record)
    record["resume"]["skills"].append("y")
    loaded = (await store.load_agents())[0]
    assert loaded["resume"] == {"skills": ["x"]}
    loaded["name"] = "mutated"
    assert (await store.load_agents())[0]["name"] == "alice"


async def test_delete_agent_drops_its_cursors_only(store):
    await store.put_agent({"agent_id": "a1"})
    await store.set_cursor("a1", "c1", "e1")
    await store.set_cursor("a2", "c1", "e9")
    await store.delete_agent("a1")
    assert await store.load_cursors() == {"a2": {"c1": "e9"}}


@pytest.mark.parametrize(
    ("record", "words"),
    [
        ({"name": "no id"}, "agent_id"),
        ({"agent_id": ""}, "agent_id"),
        ("not a dict", "dict"),
        ({"agent_id": "a1", "bad": {1, 2}}, "JSON-serialisable"),
        ({"agent_id": "a1", "bad": "\ud800"}, "lone surrogate"),
    ],
)
async def test_bad_agent_records_are_refused_with_a_sentence(store, record, words):
    with pytest.raises(StoreError, match=words):
        await store.put_agent(record)
    assert await store.load_agents() == []


async def test_channels_upsert_in_creation_order(store):
    await store.put_channel({"channel_id": "c2", "state": "pending"})
    await store.put_channel({"channel_id": "c1", "state": "pending"})
    await store.put_channel({"channel_id": "c2", "state": "active", "knobs": {"max_turns": 3}})
    assert await store.load_channels() == [
        {"channel_id": "c2", "state": "active", "knobs": {"max_turns": 3}},
        {"channel_id": "c1", "state": "pending"},
    ]
    with pytest.raises(StoreError, match="channel_id"):
        await store.put_channel({"state": "active"})


async def test_tasks_upsert_in_creation_order(store):
    await store.put_task({"task_id": "t1", "state": "created"})
    await store.put_task({"task_id": "t2", "state": "created"})
    await store.put_task({"task_id": "t1", "state": "running", "progress": {"pct": 10}})
    assert await store.load_tasks() == [
        {"task_id": "t1", "state": "running", "progress": {"pct": 10}},
        {"task_id": "t2", "state": "created"},
    ]
    with pytest.raises(StoreError, match="task_id"):
        await store.put_task({"state": "created"})


# --- the WAL ---


async def test_seq_numbers_count_per_channel_from_one(store):
    assert await store.append("c1", "e1", env(1)) == 1
    assert await store.append("c1", "e2", env(2)) == 2
    assert await store.append("c2", "e3", env(3)) == 1
    assert await store.append("c1", "e4", env(4)) == 3
    assert await store.wal_count("c1") == 3
    assert await store.wal_count("c2") == 1
    assert await store.wal_count("nope") == 0
    assert await store.wal_counts() == {"c1": 3, "c2": 1}
    assert await store.read_wal("c1") == [env(1), env(2), env(4)]


async def test_text_comes_back_exactly_as_given(store):
    texts = [
        '{"b":1,"a":2}',  # key order kept: the WAL is text, not a parsed document
        '{"t":"Straße · 東京 · 🙂"}',
        '{ "spaced" : [1, 2.50, 1e3] }',
        '{"escaped":"\\u0000 \\ud83d\\ude42 \\n"}',
        "x" * 100_000,
    ]
    for i, text in enumerate(texts):
        await store.append("ünï·cøde", f"id-{i}-é", text)
    assert await store.read_wal("ünï·cøde") == texts
    assert await store.find_seq("ünï·cøde", "id-1-é") == 2
    assert store.read_wal_block("ünï·cøde", 2, 3) == texts[1:3]


async def test_read_wal_follows_python_slice_semantics(store):
    await fill(store, "c1", 7)
    await fill(store, "c2", 2)
    wal = [env(i, "c1") for i in range(7)]
    bounds = [None, -9, -8, -7, -3, -1, 0, 1, 3, 6, 7, 8, 20]
    for since in [b for b in bounds if b is not None]:
        for until in bounds:
            assert await store.read_wal("c1", since=since, until=until) == wal[since:until], (since, until)
    assert await store.read_wal("c1") == wal
    assert await store.read_wal("unknown") == []
    assert await store.read_wal("unknown", since=-3) == []


async def test_read_wal_seq_and_read_wal_block_are_inclusive_seq_ranges(store):
    await fill(store, "c1", 12)
    await fill(store, "c2", 3)
    assert await store.read_wal_seq("c1", 4, 6) == [(4, env(3)), (5, env(4)), (6, env(5))]
    assert await store.read_wal_seq("c1", 12, 12) == [(12, env(11))]
    assert await store.read_wal_seq("c1", -5, 2) == [(1, env(0)), (2, env(1))]
    assert await store.read_wal_seq("c1", 11, 99) == [(11, env(10)), (12, env(11))]
    assert await store.read_wal_seq("c1", 6, 5) == []
    assert await store.read_wal_seq("c1", 13, 20) == []
    assert await store.read_wal_seq("c2", 1, 12) == [(i + 1, env(i, "c2")) for i in range(3)]
    assert await store.read_wal_seq("nope", 1, 10) == []
    for first, last in ((4, 6), (12, 12), (-5, 2), (11, 99), (6, 5), (13, 20), (0, 0)):
        expected = [text for _, text in await store.read_wal_seq("c1", first, last)]
        assert store.read_wal_block("c1", first, last) == expected, (first, last)
    assert store.read_wal_block("nope", 1, 10) == []


async def test_read_wal_block_sees_every_append_that_returned(store):
    for i in range(20):
        seq = await store.append("c1", f"e{i}", env(i))
        assert store.read_wal_block("c1", seq, seq) == [env(i)]


async def test_iter_wal_streams_channel_then_seq_in_code_point_order(store):
    await fill(store, "cb", 7)
    await fill(store, "ca", 3)
    await fill(store, "cc", 11)
    # Code point order, whatever the database's locale: "Z" < "a" < "é".
    await fill(store, "é", 2)
    await fill(store, "Zed", 1)
    rows = [row async for row in store.iter_wal()]
    order = (("Zed", 1), ("ca", 3), ("cb", 7), ("cc", 11), ("é", 2))
    expected = [(c, i + 1, env(i, c)) for c, n in order for i in range(n)]
    assert rows == expected
    assert list(await store.wal_counts()) == [c for c, _ in order]
    listed = [row async for row in store.iter_wal(["cc", "nope", "ca"])]
    assert listed == [r for r in expected if r[0] == "cc"] + [r for r in expected if r[0] == "ca"]
    assert [row async for row in store.iter_wal([])] == []


async def test_find_seq(store):
    await fill(store, "c1", 4)
    await fill(store, "c2", 2)
    assert await store.find_seq("c1", "e-c1-2") == 3
    assert await store.find_seq("c2", "e-c2-0") == 1
    assert await store.find_seq("c2", "e-c1-2") is None
    assert await store.find_seq("c1", "missing") is None


async def test_a_duplicate_envelope_id_fails_alone_and_leaves_no_gap(store):
    await store.append("c1", "e1", env(1))
    with pytest.raises(StoreError, match="'e1' is already in the WAL"):
        await store.append("c2", "e1", env(9))
    # The same in the middle of a group of concurrent appends: only that caller fails.
    results = await asyncio.gather(
        store.append("c1", "e2", env(2)),
        store.append("c1", "e1", env(99)),
        store.append("c1", "e3", env(3)),
        store.append("c2", "e4", env(4)),
        store.append("c2", "e4", env(5)),  # twice in one batch: the second one fails
        return_exceptions=True,
    )
    assert results[0] == 2 and results[2] == 3 and results[3] == 1
    assert isinstance(results[1], StoreError) and isinstance(results[1], NetworkError)
    assert isinstance(results[4], StoreError) and "'e4' is already in the WAL" in str(results[4])
    assert await store.read_wal("c1") == [env(1), env(2), env(3)]
    assert await store.wal_counts() == {"c1": 3, "c2": 1}
    assert await store.append("c1", "e5", env(5)) == 4


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("", "e1", "{}"), "channel_id"),
        (("c1", "", "{}"), "envelope_id"),
        (("c1", "e1", None), "envelope_json"),
        (("c1", "e1", "\ud800"), "surrogate"),
    ],
)
async def test_bad_append_arguments_are_refused(store, args, words):
    with pytest.raises(StoreError, match=words):
        await store.append(*args)
    assert await store.wal_counts() == {}


async def test_concurrent_appends_get_seqs_in_call_order(store):
    calls = [(f"c{i % 3}", f"e{i}", env(i, f"c{i % 3}")) for i in range(300)]
    seqs = await asyncio.gather(*(store.append(*call) for call in calls))
    for channel in ("c0", "c1", "c2"):
        mine = [(seq, call) for seq, call in zip(seqs, calls, strict=True) if call[0] == channel]
        assert [seq for seq, _ in mine] == list(range(1, 101))
        assert await store.read_wal(channel) == [call[2] for _, call in mine]


async def test_appends_from_concurrent_tasks_stay_ordered_per_task(store):
    async def writer(k: int) -> list[int]:
        return [await store.append("shared", f"w{k}-{i}", json.dumps([k, i])) for i in range(25)]

    per_task = await asyncio.gather(*(writer(k) for k in range(8)))
    for seqs in per_task:
        assert seqs == sorted(seqs)
    assert sorted(s for seqs in per_task for s in seqs) == list(range(1, 201))
    by_seq = {seq: (k, i) for k, seqs in enumerate(per_task) for i, seq in enumerate(seqs)}
    wal = await store.read_wal("shared")
    assert [json.loads(text) for text in wal] == [list(by_seq[seq]) for seq in range(1, 201)]


async def test_reads_see_every_write_whose_call_returned(store):
    async def write_then_read(i: int) -> None:
        channel = f"c{i % 4}"
        await store.put_channel({"channel_id": channel, "i": i})
        seq = await store.append(channel, f"e{i}", env(i, channel))
        assert (await store.read_wal_seq(channel, seq, seq)) == [(seq, env(i, channel))]
        assert await store.find_seq(channel, f"e{i}") == seq
        assert await store.wal_count(channel) >= seq
        await store.set_meta(f"k{i}", str(seq))
        assert await store.get_meta(f"k{i}") == str(seq)

    await asyncio.gather(*(write_then_read(i) for i in range(40)))
    assert sum((await store.wal_counts()).values()) == 40


async def test_a_cancelled_appender_does_not_stall_the_others(store, backend):
    first = asyncio.ensure_future(store.append("c1", "e1", env(1)))
    others = [asyncio.ensure_future(store.append("c1", f"e{i}", env(i))) for i in range(2, 6)]
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.wait_for(asyncio.gather(*others), 10)
    await asyncio.gather(first, return_exceptions=True)
    # The memory store finishes within the call; a durable append is still waiting for its commit.
    assert first.cancelled() is (backend.kind in DURABLE)
    assert await store.append("c1", "e9", env(9)) == await store.wal_count("c1")
    seqs = [seq for seq, _ in await store.read_wal_seq("c1", 1, 100)]
    assert seqs == list(range(1, len(seqs) + 1))


# --- append groups ---


async def test_an_append_group_lands_whole_in_order(store):
    assert await store.append("c1", "a0", env(0)) == 1
    seqs = await store.append_group("c1", [(f"g{i}", env(i)) for i in range(1, 6)])
    assert seqs == [2, 3, 4, 5, 6]
    assert await store.append_group("c1", []) == []
    assert await store.read_wal("c1") == [env(i) for i in range(6)]
    assert await store.find_seq("c1", "g3") == 4


async def test_an_append_group_with_a_taken_id_lands_not_at_all(store):
    await store.append("c1", "taken", env(0))
    with pytest.raises(StoreError, match="'taken' is already in the WAL"):
        await store.append_group("c1", [("n1", env(1)), ("taken", env(2)), ("n3", env(3))])
    with pytest.raises(StoreError, match="'twice' is already in the WAL"):
        await store.append_group("c1", [("twice", env(1)), ("twice", env(2))])
    assert await store.read_wal("c1") == [env(0)]
    assert await store.find_seq("c1", "n1") is None
    # Beside other writes of the same group commit: only the group fails, no gap is left.
    results = await asyncio.gather(
        store.append("c1", "x1", env(11)),
        store.append_group("c1", [("y1", env(21)), ("taken", env(22))]),
        store.append_group("c2", [("z1", env(31)), ("z2", env(32))]),
        store.append("c1", "x2", env(12)),
        return_exceptions=True,
    )
    assert results[0] == 2 and results[2] == [1, 2] and results[3] == 3
    assert isinstance(results[1], StoreError)
    assert await store.read_wal("c1") == [env(0), env(11), env(12)]
    assert await store.wal_counts() == {"c1": 3, "c2": 2}


async def test_concurrent_groups_and_appends_interleave_without_gaps(store):
    async def grouper(k: int) -> list[list[int]]:
        out = []
        for i in range(10):
            out.append(
                await store.append_group("g", [(f"k{k}-{i}-{j}", json.dumps([k, i, j])) for j in range(3)])
            )
        return out

    async def single(k: int) -> list[int]:
        return [await store.append("g", f"s{k}-{i}", json.dumps([k, i])) for i in range(10)]

    groups, singles = await asyncio.gather(
        asyncio.gather(*(grouper(k) for k in range(4))), asyncio.gather(*(single(k) for k in range(4)))
    )
    for per_task in groups:
        for seqs in per_task:
            assert seqs == list(range(seqs[0], seqs[0] + 3))  # a group's seqs are consecutive
    everything = sorted([s for t in groups for g in t for s in g] + [s for t in singles for s in t])
    assert everything == list(range(1, 161))


# --- audit, cursors, knowledge, turns, meta ---


async def test_audit_positions_and_paging(store):
    positions = [await store.append_audit({"kind": "k", "n": i}) for i in range(5)]
    assert positions == [1, 2, 3, 4, 5]
    assert await store.read_audit() == [(i + 1, {"kind": "k", "n": i}) for i in range(5)]
    assert await store.read_audit(since=3) == [(4, {"kind": "k", "n": 3}), (5, {"kind": "k", "n": 4})]
    assert await store.read_audit(since=1, limit=2) == [
        (2, {"kind": "k", "n": 1}),
        (3, {"kind": "k", "n": 2}),
    ]
    assert await store.read_audit(since=5) == []
    assert await store.read_audit(limit=0) == []
    with pytest.raises(StoreError, match="audit record"):
        await store.append_audit(["not", "a", "dict"])
    concurrent = await asyncio.gather(*(store.append_audit({"n": i}) for i in range(10)))
    assert concurrent == list(range(6, 16))
    assert [record["n"] for _, record in await store.read_audit(since=5)] == list(range(10))


async def test_cursors_set_overwrite_and_load(store):
    assert await store.load_cursors() == {}
    await store.set_cursor("a1", "c1", "e1")
    await store.set_cursor("a1", "c2", "e7")
    await store.set_cursor("a2", "c1", "e3")
    await store.set_cursor("a1", "c1", "e5")
    await store.set_cursor("a3", "c1", "")
    assert await store.load_cursors() == {
        "a1": {"c1": "e5", "c2": "e7"},
        "a2": {"c1": "e3"},
        "a3": {"c1": ""},
    }


async def test_knowledge_is_per_agent_and_searched_case_insensitively(store):
    first = await store.add_knowledge("a1", "The Quarterly Budget is 40k", source="memo.txt")
    second = await store.add_knowledge("a1", "lunch is at noon")
    third = await store.add_knowledge("a2", "budget for a2 only")
    fourth = await store.add_knowledge("a1", "Straße names and BUDGET notes")
    assert first < second < third < fourth
    at = ManualClock()()
    assert await store.search_knowledge("a1", "budget") == [
        {"id": first, "text": "The Quarterly Budget is 40k", "source": "memo.txt", "at": at},
        {"id": fourth, "text": "Straße names and BUDGET notes", "source": "", "at": at},
    ]
    assert [k["id"] for k in await store.search_knowledge("a1", "STRASSE")] == [fourth]
    assert [k["id"] for k in await store.search_knowledge("a1", "budget", limit=1)] == [first]
    assert await store.search_knowledge("a1", "absent") == []
    assert await store.search_knowledge("nobody", "budget") == []
    assert [k["text"] for k in await store.list_knowledge("a2")] == ["budget for a2 only"]
    assert [k["id"] for k in await store.list_knowledge("a1")] == [first, second, fourth]
    ids = await asyncio.gather(*(store.add_knowledge("a3", f"n{i}") for i in range(6)))
    assert ids == list(range(fourth + 1, fourth + 7))


async def test_turns_newest_first_with_filters(store):
    for i in range(6):
        await store.put_turn(
            {
                "turn_id": f"t{i}",
                "channel_id": "c1" if i % 2 else "c2",
                "agent_id": "a1" if i < 3 else "a2",
                "trigger_envelope_id": f"e{i // 2}",
                "model_input": {"system": "s", "history": [i]},
            }
        )
    assert [t["turn_id"] for t in await store.list_turns()] == ["t5", "t4", "t3", "t2", "t1", "t0"]
    assert [t["turn_id"] for t in await store.list_turns(channel_id="c1")] == ["t5", "t3", "t1"]
    assert [t["turn_id"] for t in await store.list_turns(agent_id="a1", limit=2)] == ["t2", "t1"]
    assert [t["turn_id"] for t in await store.list_turns(trigger_envelope_id="e1")] == ["t3", "t2"]
    assert [t["turn_id"] for t in await store.list_turns(channel_id="c2", agent_id="a2")] == ["t4"]
    assert [t["turn_id"] for t in await store.list_turns(agent_ids={"a2", 7})] == ["t5", "t4", "t3"]
    assert [t["turn_id"] for t in await store.list_turns(agent_ids=["a1"], channel_id="c1")] == ["t1"]
    assert await store.list_turns(agent_ids=[]) == []
    assert await store.list_turns(agent_id="nobody") == []
    assert await store.list_turns(limit=0) == []
    await store.put_turn(
        {"turn_id": "t1", "channel_id": "c1", "agent_id": "a1", "trigger_envelope_id": "e0", "reply": "x"}
    )
    turns = await store.list_turns(channel_id="c1")
    assert [t["turn_id"] for t in turns] == ["t5", "t3", "t1"]
    assert turns[2]["reply"] == "x"
    with pytest.raises(StoreError, match="turn_id"):
        await store.put_turn({"channel_id": "c1"})


async def test_meta_holds_settings_and_secrets_stored_apart_by_older_versions(store):
    from types import SimpleNamespace

    from ag2net.hub.auth import SECRET_META_PREFIX, IdentitySecrets, secret_digest

    assert await store.get_meta("hub.name") is None
    await store.set_meta("hub.name", "alpha")
    await store.set_meta("hub.name", "beta")
    await store.set_meta("other", "")
    assert await store.get_meta("hub.name") == "beta"
    assert await store.get_meta("other") == ""
    # Identity secrets now live in the agent record; a database written before kept them in meta, and
    # those are still honoured (read back from the store) until the identity is unregistered.
    await store.set_meta(SECRET_META_PREFIX + "agent-1", secret_digest("s3cret"))
    hub = SimpleNamespace(identities=SimpleNamespace(agents={}), store=store)
    assert await IdentitySecrets(hub).matches("agent-1", "s3cret")
    assert not await IdentitySecrets(hub).matches("agent-1", "s3cretx")
    assert not await IdentitySecrets(hub).matches("agent-1", "\ud800")  # a lone surrogate is no secret
    await IdentitySecrets(hub).forget("agent-1")
    assert not await IdentitySecrets(hub).matches("agent-1", "s3cret")
    assert await store.get_meta(SECRET_META_PREFIX + "agent-1") == ""


# --- restart fidelity ---


async def test_close_and_reopen_finds_everything_and_counters_continue(backend):
    clock = ManualClock()
    store = backend.make()
    await store.open()
    await store.put_agent({"agent_id": "a1", "name": "alice", "kind": "agent", "passport": {}})
    await store.put_agent({"agent_id": "a2", "name": "bob", "kind": "human"})
    await store.put_channel({"channel_id": "c1", "state": "active"})
    await asyncio.gather(*(store.append("c1", f"e{i}", env(i)) for i in range(30)))
    await store.append("c2", "x1", env(100, "c2"))
    await store.append_group("c2", [("x2", env(101, "c2")), ("x3", env(102, "c2"))])
    await store.append_audit({"kind": "agent_registered", "agent_id": "a1"})
    await store.put_task({"task_id": "t1", "state": "running"})
    await store.set_cursor("a1", "c1", "e29")
    knowledge_id = await store.add_knowledge("a1", "remember this", source="s")
    await store.put_turn({"turn_id": "t1", "channel_id": "c1", "agent_id": "a1", "trigger_envelope_id": "e3"})
    await store.set_meta("schema.note", "hello")
    await store.close()
    await store.close()  # idempotent

    store = backend.make()
    await store.open()
    try:
        assert [a["name"] for a in await store.load_agents()] == ["alice", "bob"]
        assert await store.load_channels() == [{"channel_id": "c1", "state": "active"}]
        assert await store.read_wal("c1") == [env(i) for i in range(30)]
        assert await store.wal_counts() == {"c1": 30, "c2": 3}
        assert await store.find_seq("c1", "e17") == 18
        assert await store.find_seq("c2", "x3") == 3
        assert store.read_wal_block("c2", 2, 3) == [env(101, "c2"), env(102, "c2")]
        assert await store.read_audit() == [(1, {"kind": "agent_registered", "agent_id": "a1"})]
        assert await store.load_tasks() == [{"task_id": "t1", "state": "running"}]
        assert await store.load_cursors() == {"a1": {"c1": "e29"}}
        assert await store.list_knowledge("a1") == [
            {"id": knowledge_id, "text": "remember this", "source": "s", "at": clock()}
        ]
        assert [t["turn_id"] for t in await store.list_turns(trigger_envelope_id="e3")] == ["t1"]
        assert await store.get_meta("schema.note") == "hello"
        # Counters continue where the stored data left off; ids stay unique across the restart.
        assert await store.append("c1", "e30", env(30)) == 31
        assert await store.append("c3", "y1", env(0, "c3")) == 1
        with pytest.raises(StoreError, match="already in the WAL"):
            await store.append("c3", "e5", "{}")
        assert await store.append_audit({"kind": "next"}) == 2
        assert await store.add_knowledge("a2", "more") == knowledge_id + 1
    finally:
        await store.close()


async def test_close_commits_writes_still_in_flight(backend):
    store = backend.make()
    await store.open()
    tasks = [asyncio.ensure_future(store.append("c1", f"e{i}", env(i))) for i in range(50)]
    await asyncio.sleep(0)  # queued, not all committed
    await store.close()
    assert [await t for t in tasks] == list(range(1, 51))
    store = backend.make()
    await store.open()
    try:
        assert await store.wal_counts() == {"c1": 50}
    finally:
        await store.close()


async def test_a_closed_durable_store_says_so_and_can_be_reopened(durable_backend):
    store = durable_backend.make()
    with pytest.raises(StoreError, match="not open"):
        await store.append("c1", "e1", "{}")
    with pytest.raises(StoreError, match="not open"):
        await store.read_wal("c1")
    await store.open()
    await store.append("c1", "e1", "{}")
    await store.close()
    with pytest.raises(StoreError, match="not open"):
        await store.append("c1", "e2", "{}")
    with pytest.raises(StoreError, match="not open"):
        store.read_wal_block("c1", 1, 1)  # type: ignore[attr-defined]
    await store.open()
    try:
        assert await store.append("c1", "e2", "{}") == 2
    finally:
        await store.close()


async def test_open_store_maps_the_backend_target(backend):
    store = open_store(backend.target) if backend.target is not None else None
    expected = {"memory": type(None), "sqlite": SqliteStore, "sqlite-thread": SqliteStore}
    assert isinstance(store, expected.get(backend.kind, PostgresStore))


async def test_open_store_maps_its_argument(tmp_path):
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store(":memory:"), MemoryStore)
    from_str = open_store(str(tmp_path / "a.db"))
    from_path = open_store(tmp_path / "b.db", fsync=True)
    assert isinstance(from_str, SqliteStore) and isinstance(from_path, SqliteStore)
    assert from_str.writer == "inline" and from_path.fsync and from_path.writer == "thread"
    existing = MemoryStore()
    assert open_store(existing) is existing
    with pytest.raises(StoreError, match="cannot use int as a store"):
        open_store(42)  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="empty"):
        open_store("")


# --- the hub end to end, across a restart ---


async def test_the_hub_keeps_its_network_across_a_restart(backend):
    from ag2net import HubClient, Passport
    from ag2net.hub import Hub
    from ag2net.views import FullTranscript

    quiet: dict[str, Any] = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0}
    hub = await Hub.open(backend.make(), cache_mb=0.05, wal_window=10, **quiet)
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ben = await hc.register_human(Passport(name="ben", kind="human"))
        conv = await ana.open(type="conversation", target="ben")
        sent = []
        for i in range(60):
            sent.append(await (ana if i % 2 == 0 else ben).send(conv.channel_id, f"message {i} " + "x" * 300))
        # Several in flight at once: admitted together, one group commit.
        sent += await asyncio.gather(*(ana.send(conv.channel_id, f"burst {i}") for i in range(8)))
        before = [e.envelope_id for e in await hub.read_wal(conv.channel_id)]
        assert set(sent) <= set(before)
        count = hub.wal_count(conv.channel_id)
        assert count == len(before)
        await hub.add_knowledge(ana.agent_id, "kept across restarts")
        # Older envelopes than the bounded cache holds are read back from the store, exactly.
        assert [e.envelope_id for e in await hub.read_wal(conv.channel_id, since=3, until=9)] == before[3:9]
    finally:
        await hub.close()

    store = backend.make()
    block_reads: list[tuple[int, int]] = []
    read_block = store.read_wal_block  # type: ignore[attr-defined]

    def counted(channel_id: str, first: int, last: int) -> list[str]:
        block_reads.append((first, last))
        return read_block(channel_id, first, last)

    store.read_wal_block = counted  # type: ignore[attr-defined]
    hub = await Hub.open(store, cache_mb=0.05, wal_window=10, **quiet)
    try:
        # A projection reaching below the resident envelopes reads them back through read_wal_block.
        render = hub.adapter_for(conv.channel_id).render_envelope
        whole = await hub.read_wal(conv.channel_id)
        for at in (5, 30):
            sliced = await hub.read_wal_until(conv.channel_id, before[at])
            projected = await FullTranscript().project(
                sliced, participant_id=ben.agent_id, render_envelope=render
            )
            assert projected == await FullTranscript().project(
                whole[:at], participant_id=ben.agent_id, render_envelope=render
            )
        assert block_reads, "the bounded cache never read older envelopes back from the store"
        assert [e.envelope_id for e in await hub.read_wal(conv.channel_id)] == before
        assert hub.wal_count(conv.channel_id) == count
        assert hub.lookup_channel(conv.channel_id).channel_id == conv.channel_id
        assert [p.name for p in hub.query_agents()] == ["ana", "ben"]
        assert [k["text"] for k in await hub.search_knowledge(ana.agent_id, "restarts")] == [
            "kept across restarts"
        ]
        hc = HubClient.local(hub)
        ana2 = await hc.attach_human("ana")
        after = await ana2.send(conv.channel_id, "after the restart")
        assert (await hub.read_wal(conv.channel_id))[-1].envelope_id == after
        assert hub.wal_count(conv.channel_id) == count + 1
        assert await hub.store.find_seq(conv.channel_id, after) == count + 1
    finally:
        await hub.close()


# --- kill -9 in the middle of a burst (durable stores) ---

# The child appends with eight appenders in flight and prints "channel envelope_id seq" the moment each
# append has returned, i.e. once the store has acknowledged it.
CHILD = r"""
import asyncio, json, sys
from ag2net.store import open_store

async def main(target):
    store = open_store(target)
    await store.open()
    out = sys.stdout

    async def appender(k):
        i = 0
        while True:
            channel = "c%d" % ((k + i) % 3)
            envelope_id = "%02d%030d" % (k, i)
            text = "x" * (9000 if i % 16 == 0 else 200)
            if i % 5 == 4:
                seqs = await store.append_group(channel, [(envelope_id + "g%d" % j, json.dumps({"id": envelope_id + "g%d" % j, "text": text})) for j in range(3)])
                for j, seq in enumerate(seqs):
                    out.write("%s %sg%d %d\n" % (channel, envelope_id, j, seq))
            else:
                seq = await store.append(channel, envelope_id, json.dumps({"id": envelope_id, "text": text}))
                out.write("%s %s %d\n" % (channel, envelope_id, seq))
            out.flush()
            i += 1

    await asyncio.gather(*(appender(k) for k in range(8)))

asyncio.run(main(sys.argv[1]))
"""

ACKS_BEFORE_KILL = 2000


def run_and_kill(target: str) -> list[tuple[str, str, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, target],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])},
    )
    assert proc.stdout is not None and proc.stderr is not None
    buffer = b""
    lines = 0
    deadline = time.monotonic() + 60
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        while lines < ACKS_BEFORE_KILL:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise AssertionError(f"child stopped early: {proc.stderr.read().decode()[-2000:]}")
            if selector.select(timeout=0.5):
                buffer += os.read(proc.stdout.fileno(), 65536)
                lines = buffer.count(b"\n")
    proc.send_signal(signal.SIGKILL)
    rest, _ = proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    buffer += rest
    complete = buffer[: buffer.rfind(b"\n") + 1].decode()  # a line cut by the kill was not acknowledged
    acks = []
    for line in complete.splitlines():
        channel, envelope_id, seq = line.split()
        acks.append((channel, envelope_id, int(seq)))
    return acks


async def test_every_acknowledged_append_survives_kill_9(durable_backend):
    assert durable_backend.target is not None
    acks = await asyncio.to_thread(run_and_kill, durable_backend.target)
    assert len(acks) >= ACKS_BEFORE_KILL
    store = durable_backend.make()
    await store.open()
    try:
        counts = await store.wal_counts()
        rows: dict[str, list[tuple[int, str]]] = {}
        async for channel, seq, text in store.iter_wal():
            rows.setdefault(channel, []).append((seq, text))
        assert set(rows) == set(counts) == {"c0", "c1", "c2"}
        stored: dict[str, tuple[str, int]] = {}
        for channel, channel_rows in rows.items():
            seqs = [seq for seq, _ in channel_rows]
            assert seqs == list(range(1, len(seqs) + 1)), f"gap in {channel}"
            assert counts[channel] == len(seqs)
            for seq, text in channel_rows:
                envelope = json.loads(text)  # no torn rows
                assert set(envelope) == {"id", "text"}
                stored[envelope["id"]] = (channel, seq)
        missing = [ack for ack in acks if stored.get(ack[1]) != (ack[0], ack[2])]
        assert not missing, f"{len(missing)} acknowledged envelopes lost or moved, e.g. {missing[:3]}"
        # A group is all or nothing, even when the kill lands in the middle of one.
        groups: dict[str, int] = {}
        for envelope_id in stored:
            if "g" in envelope_id:
                groups[envelope_id.split("g")[0]] = groups.get(envelope_id.split("g")[0], 0) + 1
        assert set(groups.values()) <= {3}
        for channel, envelope_id, seq in [*acks[:: max(1, len(acks) // 40)], *acks[-5:]]:
            assert await store.find_seq(channel, envelope_id) == seq
        with pytest.raises(StoreError, match="already in the WAL"):
            await store.append("c1", acks[-1][1], "{}")
        assert await store.append("c0", "after-restart", "{}") == counts["c0"] + 1
    finally:
        await store.close()

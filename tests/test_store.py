"""The Store protocol on both stores, plus what only the SQLite file has: reopen, schema versions, bad files."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3

import pytest

import ag2net.store.sqlite as sqlite_store
from ag2net.errors import NetworkError
from ag2net.ids import ManualClock
from ag2net.store import MemoryStore, SqliteStore, Store, StoreError, open_store


@pytest.fixture(params=["memory", "sqlite-inline", "sqlite-thread"])
async def store(request, tmp_path):
    if request.param == "memory":
        s = MemoryStore(clock=ManualClock())
    else:
        # Small batches and pages so the chunking and pagination paths run in every test.
        writer = request.param.removeprefix("sqlite-")
        # The inline one also moves envelope ids to their index every few appends.
        ids_batch = 5 if writer == "inline" else 1024
        s = SqliteStore(
            tmp_path / "store.db",
            writer=writer,
            clock=ManualClock(),
            batch_limit=8,
            iter_batch=5,
            ids_batch=ids_batch,
        )
    await s.open()
    yield s
    await s.close()


def env(n: int, channel_id: str = "c1") -> str:
    return json.dumps({"n": n, "channel_id": channel_id})


async def fill(store, channel_id: str, count: int, prefix: str = "e") -> list[int]:
    return [
        await store.append(channel_id, f"{prefix}-{channel_id}-{i}", env(i, channel_id)) for i in range(count)
    ]


# --- protocol conformance ---


async def test_both_stores_satisfy_the_protocol(store):
    assert isinstance(store, Store)
    assert store.durable is isinstance(store, SqliteStore)
    await store.open()  # idempotent


# --- agents ---


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
    ],
)
async def test_bad_agent_records_are_refused_with_a_sentence(store, record, words):
    with pytest.raises(StoreError, match=words):
        await store.put_agent(record)
    assert await store.load_agents() == []


# --- channels ---


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


# --- WAL ---


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


async def test_read_wal_seq_is_an_inclusive_seq_range(store):
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


async def test_iter_wal_streams_channel_then_seq(store):
    await fill(store, "cb", 7)
    await fill(store, "ca", 3)
    await fill(store, "cc", 11)
    rows = [row async for row in store.iter_wal()]
    expected = [(c, i + 1, env(i, c)) for c, n in (("ca", 3), ("cb", 7), ("cc", 11)) for i in range(n)]
    assert rows == expected
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
        return_exceptions=True,
    )
    assert results[0] == 2 and results[2] == 3 and results[3] == 1
    assert isinstance(results[1], StoreError) and isinstance(results[1], NetworkError)
    assert await store.read_wal("c1") == [env(1), env(2), env(3)]
    assert await store.wal_counts() == {"c1": 3, "c2": 1}
    assert await store.append("c1", "e5", env(5)) == 4


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("", "e1", "{}"), "channel_id"),
        (("c1", "", "{}"), "envelope_id"),
        (("c1", "e1", None), "envelope_json"),
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
        return [await store.append("shared", f"w{k}-{i}", json.dumps([k, i])) for i in range(40)]

    per_task = await asyncio.gather(*(writer(k) for k in range(8)))
    for seqs in per_task:
        assert seqs == sorted(seqs)
    assert sorted(s for seqs in per_task for s in seqs) == list(range(1, 321))
    by_seq = {seq: (k, i) for k, seqs in enumerate(per_task) for i, seq in enumerate(seqs)}
    wal = await store.read_wal("shared")
    assert [json.loads(text) for text in wal] == [list(by_seq[seq]) for seq in range(1, 321)]


async def test_reads_see_every_write_whose_call_returned(store):
    async def write_then_read(i: int) -> None:
        channel = f"c{i % 4}"
        await store.put_channel({"channel_id": channel, "i": i})
        seq = await store.append(channel, f"e{i}", env(i, channel))
        assert (await store.read_wal_seq(channel, seq, seq)) == [(seq, env(i, channel))]
        assert await store.find_seq(channel, f"e{i}") == seq
        assert await store.wal_count(channel) >= seq

    await asyncio.gather(*(write_then_read(i) for i in range(40)))
    assert sum((await store.wal_counts()).values()) == 40


async def test_a_cancelled_appender_does_not_stall_the_others(store):
    first = asyncio.ensure_future(store.append("c1", "e1", env(1)))
    others = [asyncio.ensure_future(store.append("c1", f"e{i}", env(i))) for i in range(2, 6)]
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.wait_for(asyncio.gather(*others), 5)
    await asyncio.gather(first, return_exceptions=True)
    # The memory store finishes within the call; a SQLite append is still waiting for its commit.
    assert first.cancelled() is isinstance(store, SqliteStore)
    assert await store.append("c1", "e9", env(9)) == await store.wal_count("c1")
    seqs = [seq for seq, _ in await store.read_wal_seq("c1", 1, 100)]
    assert seqs == list(range(1, len(seqs) + 1))


# --- audit ---


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


# --- tasks ---


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


# --- cursors ---


async def test_cursors_set_overwrite_and_load(store):
    assert await store.load_cursors() == {}
    await store.set_cursor("a1", "c1", "e1")
    await store.set_cursor("a1", "c2", "e7")
    await store.set_cursor("a2", "c1", "e3")
    await store.set_cursor("a1", "c1", "e5")
    assert await store.load_cursors() == {"a1": {"c1": "e5", "c2": "e7"}, "a2": {"c1": "e3"}}


# --- knowledge ---


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


# --- turns ---


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
    assert await store.list_turns(agent_id="nobody") == []
    assert await store.list_turns(limit=0) == []
    # Updating a turn keeps its place and replaces its content.
    await store.put_turn(
        {"turn_id": "t1", "channel_id": "c1", "agent_id": "a1", "trigger_envelope_id": "e0", "reply": "x"}
    )
    turns = await store.list_turns(channel_id="c1")
    assert [t["turn_id"] for t in turns] == ["t5", "t3", "t1"]
    assert turns[2]["reply"] == "x"
    with pytest.raises(StoreError, match="turn_id"):
        await store.put_turn({"channel_id": "c1"})


# --- settings ---


async def test_meta_get_and_set(store):
    assert await store.get_meta("hub.name") is None
    await store.set_meta("hub.name", "alpha")
    await store.set_meta("hub.name", "beta")
    await store.set_meta("other", "")
    assert await store.get_meta("hub.name") == "beta"
    assert await store.get_meta("other") == ""


# --- open_store ---


async def test_open_store_maps_its_argument(tmp_path):
    assert isinstance(open_store(None), MemoryStore)
    assert isinstance(open_store(":memory:"), MemoryStore)
    from_str = open_store(str(tmp_path / "a.db"))
    from_path = open_store(tmp_path / "b.db", fsync=True)
    assert isinstance(from_str, SqliteStore) and isinstance(from_path, SqliteStore)
    assert from_path.fsync and from_path.writer == "thread"
    existing = MemoryStore()
    assert open_store(existing) is existing
    with pytest.raises(StoreError, match="cannot use int as a store"):
        open_store(42)
    with pytest.raises(StoreError, match="empty"):
        open_store("")


# --- SQLite only: the file ---


async def test_reopening_a_sqlite_file_finds_everything(tmp_path):
    path = tmp_path / "hub.db"
    clock = ManualClock()
    async with SqliteStore(path, clock=clock) as store:
        await store.put_agent({"agent_id": "a1", "name": "alice", "kind": "agent", "passport": {}})
        await store.put_agent({"agent_id": "a2", "name": "bob", "kind": "human"})
        await store.put_channel({"channel_id": "c1", "state": "active"})
        await asyncio.gather(*(store.append("c1", f"e{i}", env(i)) for i in range(30)))
        await store.append("c2", "x1", env(100, "c2"))
        await store.append_audit({"kind": "agent_registered", "agent_id": "a1"})
        await store.put_task({"task_id": "t1", "state": "running"})
        await store.set_cursor("a1", "c1", "e29")
        knowledge_id = await store.add_knowledge("a1", "remember this", source="s")
        await store.put_turn(
            {"turn_id": "t1", "channel_id": "c1", "agent_id": "a1", "trigger_envelope_id": "e3"}
        )
        await store.set_meta("schema.note", "hello")

    async with SqliteStore(path) as store:
        assert [a["name"] for a in await store.load_agents()] == ["alice", "bob"]
        assert await store.load_channels() == [{"channel_id": "c1", "state": "active"}]
        assert await store.read_wal("c1") == [env(i) for i in range(30)]
        assert await store.wal_counts() == {"c1": 30, "c2": 1}
        assert await store.find_seq("c1", "e17") == 18
        assert await store.read_audit() == [(1, {"kind": "agent_registered", "agent_id": "a1"})]
        assert await store.load_tasks() == [{"task_id": "t1", "state": "running"}]
        assert await store.load_cursors() == {"a1": {"c1": "e29"}}
        assert await store.list_knowledge("a1") == [
            {"id": knowledge_id, "text": "remember this", "source": "s", "at": clock()}
        ]
        assert [t["turn_id"] for t in await store.list_turns(trigger_envelope_id="e3")] == ["t1"]
        assert await store.get_meta("schema.note") == "hello"
        # Counters continue where the file left off.
        assert await store.append("c1", "e30", env(30)) == 31
        assert await store.append("c3", "y1", env(0, "c3")) == 1
        assert await store.append_audit({"kind": "next"}) == 2
        assert await store.add_knowledge("a2", "more") == knowledge_id + 1


async def test_a_closed_store_says_so_and_can_be_reopened(tmp_path):
    store = SqliteStore(tmp_path / "hub.db")
    with pytest.raises(StoreError, match="not open"):
        await store.append("c1", "e1", "{}")
    with pytest.raises(StoreError, match="not open"):
        await store.read_wal("c1")
    await store.open()
    await store.append("c1", "e1", "{}")
    await store.close()
    await store.close()  # idempotent
    with pytest.raises(StoreError, match="not open"):
        await store.append("c1", "e2", "{}")
    await store.open()
    assert await store.append("c1", "e2", "{}") == 2
    await store.close()


async def test_close_flushes_writes_still_in_flight(tmp_path):
    path = tmp_path / "hub.db"
    for writer in ("inline", "thread"):
        store = SqliteStore(path, writer=writer)
        await store.open()
        tasks = [asyncio.ensure_future(store.append(writer, f"{writer}{i}", env(i))) for i in range(50)]
        await asyncio.sleep(0)  # the appends are queued, not all committed
        await store.close()
        assert [await t for t in tasks] == list(range(1, 51))
    async with SqliteStore(path) as store:
        assert await store.wal_counts() == {"inline": 50, "thread": 50}


async def test_a_new_file_gets_the_current_schema_version(tmp_path):
    path = tmp_path / "hub.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == sqlite_store.schema_version() == 1
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


async def test_an_empty_version_0_database_is_upgraded(tmp_path):
    path = tmp_path / "empty.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 0")
    conn.commit()
    conn.close()
    async with SqliteStore(path) as store:
        assert await store.append("c1", "e1", "{}") == 1
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"agents", "channels", "wal", "audit", "tasks", "cursors", "knowledge", "turns", "meta"} <= tables
    conn.close()


async def test_a_later_upgrade_step_runs_on_an_existing_file(tmp_path, monkeypatch):
    path = tmp_path / "hub.db"
    async with SqliteStore(path) as store:
        await store.append("c1", "e1", "{}")

    def step_2(conn: sqlite3.Connection) -> None:
        conn.execute("ALTER TABLE channels ADD COLUMN archived INTEGER NOT NULL DEFAULT 0")

    monkeypatch.setattr(sqlite_store, "UPGRADES", (*sqlite_store.UPGRADES, step_2))
    async with SqliteStore(path) as store:
        assert await store.read_wal("c1") == ["{}"]
        await store.put_channel({"channel_id": "c1"})
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 2
    assert "archived" in {row[1] for row in conn.execute("PRAGMA table_info(channels)")}
    conn.close()


async def test_a_failing_upgrade_step_leaves_the_file_at_its_old_version(tmp_path, monkeypatch):
    path = tmp_path / "hub.db"
    async with SqliteStore(path):
        pass

    def broken_step(conn: sqlite3.Connection) -> None:
        conn.execute("CREATE TABLE half_done (x)")
        conn.execute("THIS IS NOT SQL")

    monkeypatch.setattr(sqlite_store, "UPGRADES", (*sqlite_store.UPGRADES, broken_step))
    with pytest.raises(StoreError, match=re.escape(str(path))):
        await SqliteStore(path).open()
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    conn.close()


async def test_a_newer_schema_version_refuses_to_open(tmp_path):
    path = tmp_path / "future.db"
    async with SqliteStore(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 7")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "version 7" in message and "version 1" in message
    assert "upgrade ag2net" in message


async def test_another_applications_database_is_refused(tmp_path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.close()
    with pytest.raises(StoreError, match=r"another application.*invoices"):
        await SqliteStore(path).open()


async def test_a_file_that_is_not_a_database_gives_one_sentence_naming_it(tmp_path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    with pytest.raises(StoreError) as caught:
        await SqliteStore(path).open()
    message = str(caught.value)
    assert str(path) in message and "not a database" in message and "\n" not in message
    assert path.read_bytes().startswith(b"these are my notes")  # untouched


async def test_a_directory_or_missing_directory_gives_one_sentence(tmp_path):
    with pytest.raises(StoreError, match="it is a directory"):
        await SqliteStore(tmp_path).open()
    missing = tmp_path / "no" / "such" / "dir" / "hub.db"
    with pytest.raises(StoreError, match="does not exist") as caught:
        await SqliteStore(missing).open()
    assert str(missing) in str(caught.value)


async def test_unknown_writer_is_refused():
    with pytest.raises(StoreError, match="writer must be one of"):
        SqliteStore("x.db", writer="fast")


async def test_background_checkpoints_keep_the_wal_file_small(tmp_path):
    path = tmp_path / "hub.db"
    wal_file = tmp_path / "hub.db-wal"
    async with SqliteStore(path, checkpoint_bytes=256 << 10) as store:
        largest = 0
        for round_ in range(20):
            await asyncio.gather(*(store.append("c1", f"e{round_}-{i}", env(i)) for i in range(50)))
            for i in range(50):
                await store.append("c2", f"s{round_}-{i}", env(i, "c2"))
            largest = max(largest, wal_file.stat().st_size)
        assert await store.wal_counts() == {"c1": 1000, "c2": 1000}
    # Without checkpoints 1000 single-row commits alone write about 12 MB of WAL frames.
    assert largest < 4 << 20
    async with SqliteStore(path) as store:
        rows = await store.read_wal_seq("c2", 1, 1000)
        assert [seq for seq, _ in rows] == list(range(1, 1001))


@pytest.mark.parametrize("ids_batch", [1, 3, 1000])
async def test_envelope_ids_stay_unique_and_findable_across_bulk_index_moves(tmp_path, ids_batch):
    path = tmp_path / "hub.db"
    ids = [f"{i + 100:032x}" for i in range(10)]
    out_of_order = f"{5:032x}"  # smaller than every id stored: must be looked up, not assumed new

    async def check_all(store) -> None:
        for i, envelope_id in enumerate(ids):
            assert await store.find_seq(f"c{i % 2}", envelope_id) == i // 2 + 1
            assert await store.find_seq(f"c{(i + 1) % 2}", envelope_id) is None
        assert await store.find_seq("c0", out_of_order) == 6
        for envelope_id in (ids[0], ids[-1], out_of_order):
            with pytest.raises(StoreError, match="already in the WAL"):
                await store.append("c9", envelope_id, "{}")

    async with SqliteStore(path, ids_batch=ids_batch) as store:
        for i, envelope_id in enumerate(ids):
            await store.append(f"c{i % 2}", envelope_id, json.dumps(i))
        assert await store.append("c0", out_of_order, "{}") == 6
        twice = await asyncio.gather(
            store.append("c1", "f" * 32, "{}"), store.append("c1", "f" * 32, "{}"), return_exceptions=True
        )
        assert twice[0] == 6 and isinstance(twice[1], StoreError)
        await check_all(store)

    conn = sqlite3.connect(path)
    upto = conn.execute("SELECT value FROM store_state WHERE key = 'wal_ids_upto'").fetchone()
    indexed = conn.execute("SELECT count(*) FROM wal_ids").fetchone()[0]
    assert indexed == (upto[0] if upto else 0)  # every row up to the mark, none after it
    joined = conn.execute("SELECT count(*) FROM wal_ids JOIN wal USING (envelope_id, channel_id, seq)")
    assert joined.fetchone()[0] == indexed
    conn.close()
    if ids_batch == 1000:
        assert indexed == 0  # all 12 still in memory at close: reopening must read them back

    async with SqliteStore(path, ids_batch=ids_batch) as store:
        await check_all(store)
        assert await store.find_seq("c1", "f" * 32) == 6
        assert await store.append("c1", f"{999:032x}", "{}") == 7
        assert await store.wal_counts() == {"c0": 6, "c1": 7}

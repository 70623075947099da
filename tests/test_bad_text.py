"""One client's bad record never fails another client's write (issue 9, item 5).

Strings no store can encode (lone surrogates: no UTF-8 form) are refused at the boundary with a
``ProtocolError`` naming the field; and a group commit that fails for any reason is retried op by op,
so only the faulty write fails. Real SQLite files, real sockets.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import connect as ws_connect

from ag2net import Envelope, HubClient, Passport, ProtocolError, Resume
from ag2net.server import serve_ws
from ag2net.store import MemoryStore, SqliteStore, StoreError
from ag2net.store.sql import APPEND as _APPEND

LONE = "\ud800"


def env(n: int) -> str:
    return json.dumps({"n": n})


@pytest.fixture(params=["inline", "thread"])
async def sqlite_store(request, tmp_path):
    store = SqliteStore(tmp_path / "s.db", writer=request.param)
    await store.open()
    yield store
    await store.close()


# --- the writer: a failed group commit is retried one op at a time ---


async def test_text_sqlite_cannot_bind_fails_only_its_own_append(sqlite_store):
    """Forced past every check (straight into the writer's queue), as a lone surrogate once reached it."""
    store = sqlite_store
    calls = [store.append("c1", f"e{i}", env(i)) for i in range(20)]
    calls.insert(7, store._submit(_APPEND, ("c1", "bad", '{"text":"' + LONE + '"}')))
    calls.append(store.put_agent({"agent_id": "a1", "name": "ana"}))
    results = await asyncio.gather(*calls, return_exceptions=True)
    bad = results.pop(7)
    assert isinstance(bad, StoreError) and "surrogate" in str(bad)
    assert results == [*range(1, 21), None]
    assert await store.read_wal("c1") == [env(i) for i in range(20)]
    assert [a["name"] for a in await store.load_agents()] == ["ana"]
    assert await store.append("c1", "e-next", env(99)) == 21


def _poison(store) -> None:
    """A real SQLite error for every INSERT into channel ``poisoned``: a trigger calling a function that fails."""

    def guard(channel_id: str) -> int:
        if channel_id == "poisoned":
            raise RuntimeError("refused by the test's trigger")
        return 0

    store._conn.create_function("guard", 1, guard)
    store._conn.execute("CREATE TRIGGER fault BEFORE INSERT ON wal BEGIN SELECT guard(NEW.channel_id); END")


async def test_a_database_fault_in_one_write_fails_only_that_write(sqlite_store):
    """A real SQLite error raised mid-batch (a trigger calling a function that fails for one channel)."""
    store = sqlite_store

    _poison(store)
    calls = [store.append(f"c{i % 2}", f"e{i}", env(i)) for i in range(30)]
    calls.insert(11, store.append("poisoned", "p1", env(-1)))
    results = await asyncio.gather(*calls, return_exceptions=True)
    bad = results.pop(11)
    assert isinstance(bad, StoreError) and "this write was not saved" in str(bad)
    assert results == [i // 2 + 1 for i in range(30)]
    assert await store.wal_counts() == {"c0": 15, "c1": 15}
    assert await store.read_wal("c1") == [env(i) for i in range(1, 30, 2)]


async def test_a_lone_append_that_sqlite_refuses_fails_alone_and_the_next_takes_its_seq(sqlite_store):
    """One append at a time (each its own commit): a refused INSERT leaves no row and no gap."""
    store = sqlite_store

    _poison(store)
    assert await store.append("c1", "e1", env(1)) == 1
    with pytest.raises(StoreError, match="this write was not saved"):
        await store.append("poisoned", "p1", env(-1))
    assert await store.append("c1", "e2", env(2)) == 2
    store._conn.execute("DROP TRIGGER fault")
    assert await store.append("poisoned", "p2", env(-2)) == 1  # the refused one left no gap
    assert await store.wal_counts() == {"c1": 2, "poisoned": 1}
    assert await store.read_wal("c1") == [env(1), env(2)]


# --- the stores refuse unencodable text before it is queued ---


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_stores_refuse_unencodable_text_with_a_sentence_naming_it(kind, tmp_path):
    store = MemoryStore() if kind == "memory" else SqliteStore(tmp_path / "s.db")
    await store.open()
    try:
        with pytest.raises(
            StoreError, match=r"agent record 'a1' cannot be stored: record\.passport\.name holds"
        ):
            await store.put_agent({"agent_id": "a1", "passport": {"name": "x" + LONE}})
        with pytest.raises(StoreError, match="envelope_json holds the lone surrogate U\\+D800"):
            await store.append("c1", "e1", '{"t":"' + LONE + '"}')
        with pytest.raises(StoreError, match="knowledge text holds the lone surrogate"):
            await store.add_knowledge("a1", LONE)
        assert await store.load_agents() == []
        assert await store.wal_counts() == {}
        # well-formed text beyond ASCII is fine
        await store.put_agent({"agent_id": "a2", "passport": {"name": "Zoë 😀"}})
        assert await store.append("c1", "e2", '{"t":"Zoë 😀"}') == 1
    finally:
        await store.close()


# --- the hub's boundary ---


async def test_a_lone_surrogate_in_a_passport_name_is_refused_and_fails_no_other_write(sqlite_hub):
    hub = sqlite_hub
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    agents_before = await hub.store.load_agents()

    async def chatter() -> list[str]:
        return [await ana.send(ch.channel_id, f"m{i}") for i in range(40)]

    async def bad_registrations() -> list[BaseException]:
        errors = []
        for i in range(10):
            try:
                await hc.register_human(Passport(name=f"mallory{i}{LONE}", kind="human"))
            except ProtocolError as exc:
                errors.append(exc)
            await asyncio.sleep(0)
        return errors

    sent, errors = await asyncio.gather(chatter(), bad_registrations())
    assert len(sent) == 40  # every innocent post was admitted
    assert len(errors) == 10
    message = str(errors[0])
    assert message.startswith("params.passport.name holds the lone surrogate U+D800")
    assert "\n" not in message and ". " not in message  # one sentence
    texts = [e.event_data.get("text") for e in await hub.read_wal(ch.channel_id)]
    assert [t for t in texts if t] == [f"m{i}" for i in range(40)]
    assert await hub.store.load_agents() == agents_before  # nothing stored
    assert sorted(r.passport.name for r in hub.identities.agents.values()) == ["ana", "ben"]  # no ghost
    # the hub's own API (no op layer) refuses it too, naming the field
    with pytest.raises(ProtocolError, match=r"Passport\.name holds the lone surrogate"):
        await hub.register_identity(Passport(name="eve" + LONE, kind="human"))
    assert hub.find_agent_id("eve" + LONE) is None
    await hc.close()


async def test_every_client_string_is_checked_naming_its_path(sqlite_hub):
    hub = sqlite_hub
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    count = hub.wal_count(ch.channel_id)
    cases = [
        (ana.send(ch.channel_id, "hi " + LONE), r"^event_data\.text holds"),
        (
            ana.post_envelope(Envelope(ch.channel_id, ana.agent_id, None, "t.x", {"a": [{LONE: 1}]})),
            r"^a key of event_data\.a\[0\] holds",
        ),
        (
            ana.post_envelope(Envelope(ch.channel_id, ana.agent_id, None, "t.x" + LONE, {})),
            r"^event_type holds",
        ),
        (
            ana.post_envelope(Envelope(ch.channel_id, ana.agent_id, None, "t.x", {}, trace_id=LONE)),
            r"^trace_id holds",
        ),
        (hc.set_resume(ana.agent_id, Resume(summary="s" + LONE)), r"^params\.resume\.summary holds"),
        (hc.set_skill(ana.agent_id, "# skill " + LONE), r"^params\.skill_md holds"),
        (hc.close_channel(ch.channel_id, reason=LONE), r"^params\.reason holds"),
        (hc.add_knowledge(ana.agent_id, LONE), r"^params\.text holds"),
        (ana.open(type="conversation", target="ben", intent="i" + LONE), r"^params\.intent holds"),
    ]
    for call, pattern in cases:
        with pytest.raises(ProtocolError, match=pattern):
            await call
    assert hub.wal_count(ch.channel_id) == count
    assert hub.lookup_resume(ana.agent_id).summary == ""
    assert hub.lookup_channel(ch.channel_id).state.value == "active"
    await hc.close()


async def test_over_the_wire_a_lone_surrogate_is_a_protocol_error_naming_the_field(sqlite_hub):
    hub = sqlite_hub
    async with serve_ws(hub, "127.0.0.1", 0) as server, ws_connect(server.url()) as ws:
        # JSON escapes are how a lone surrogate arrives: the text itself is plain ASCII
        frame = (
            '{"kind":"request","request_id":"r1","op":"register","params":{"passport":'
            '{"name":"mallory\\ud800","kind":"human"}}}'
        )
        await ws.send(frame)
        reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
    assert reply["request_id"] == "r1" and reply["ok"] is False
    assert reply["error_code"] == "protocol_error"
    assert reply["error_message"].startswith("params.passport.name holds the lone surrogate U+D800")
    assert hub.find_agent_id("mallory\ud800") is None
    assert await hub.store.load_agents() == []

"""Repro bundles (``ag2net bundle``, ``ag2net.bundle``): a real demo database (SQLite) written as a bundle
and read back record for record; ``--follow-causation`` takes the consulting channel a ``delegate`` opened;
``--from``/``--to`` take a slice and its turns; a no-change replay over the bundle's hub reproduces the
original with the recorded answers and no API key; the database never changes; a bundle of a newer format
version, a damaged file and every bad input are one sentence with exit code 2."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

import pytest
from support import quiet, run_demo
from typer.testing import CliRunner

from ag2net import Hub, HubClient
from ag2net.bundle import (
    FORMAT,
    VERSION,
    BundleError,
    open_bundle_hub,
    read_bundle,
    write_bundle,
)
from ag2net.cli import app
from ag2net.cli.bundle import make_bundle
from ag2net.debug import compare, fork, replay
from ag2net.store import SqliteStore

runner = CliRunner()


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, list(args), env=env)
    return result.exit_code, result.output


def one_sentence(code: int, output: str) -> str:
    assert code == 2, output
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output and lines[0].startswith("Error: ")
    return lines[0]


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """The demo network's database; its channels by step (pairing, discussion, consult_research …)."""
    db = tmp_path_factory.mktemp("bundle") / "demo.db"

    async def fill() -> dict[str, str]:
        hub = await Hub.open(SqliteStore(db), **quiet())
        hc = HubClient.local(hub)
        try:
            network = await run_demo(hc)
            return {step: cid for cid, step in network.steps.items()}
        finally:
            await hc.close()
            await hub.close()

    return db, asyncio.run(fill())


def fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    return (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(os.listdir(path.parent)),
    )


def db_records(db: Path, cid: str) -> tuple[list[dict], list[dict]]:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        wal = [
            json.loads(r[0])
            for r in conn.execute("SELECT envelope FROM wal WHERE channel_id=? ORDER BY seq", (cid,))
        ]
        turns = [
            json.loads(r[0])
            for r in conn.execute("SELECT record FROM turns WHERE channel_id=? ORDER BY ord", (cid,))
        ]
    finally:
        conn.close()
    return wal, turns


def test_a_bundle_round_trips_the_channel_its_turns_and_identities_and_leaves_the_db_alone(demo, tmp_path):
    db, steps = demo
    cid = steps["pairing"]
    before = fingerprint(db)
    out = tmp_path / "repro.ag2b"
    code, output = run("bundle", "--db", str(db), f"conversation·{cid[-4:]}", "-o", str(out))
    assert code == 0, output
    assert (
        f"wrote {out}: 1 channel(s) (conversation·{cid[-4:]}), 20 envelopes, 15 turn records, 2 identities"
        in output
    )
    assert fingerprint(db) == before
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert (first["format"], first["version"], first["channel_id"]) == (FORMAT, VERSION, cid)
    bundle = read_bundle(out)
    wal, turns = db_records(db, cid)
    assert [row["envelope"] for row in bundle.envelopes] == wal
    assert [row["seq"] for row in bundle.envelopes] == list(range(1, 21))
    assert bundle.turns == turns  # requests as sent, tools offered, replies, tool calls and results, usage
    assert any(t.get("tool_calls") for t in bundle.turns) and all(t.get("rounds") for t in bundle.turns)
    names = sorted(a["name"] for a in bundle.agents)
    assert names == ["coder", "critic"]
    assert all(a.get("skill_md") and a.get("rule") and a.get("resume") for a in bundle.agents)
    assert [md["channel_id"] for md in bundle.channels] == [cid]
    # written again from what was read: the same bytes (the format is stable)
    again = write_bundle(bundle, tmp_path / "again.ag2b")
    assert again.read_bytes() == out.read_bytes()


def test_a_no_change_replay_of_a_bundle_reproduces_the_original_with_no_api_key(demo, tmp_path, monkeypatch):
    db, steps = demo
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "r.ag2b"
    code, output = run("bundle", "--db", str(db), steps["pairing"], "-o", str(out))
    assert code == 0, output

    async def go(at: int) -> tuple[str, bool, int]:
        hub = await open_bundle_hub(out)
        try:
            async with await fork(hub, steps["pairing"], at) as box:
                result = await replay(hub, box, timeout=60)
                diff = compare(result)
                answered = {row.get("answered_by") for row in diff.turns}
                assert answered == {"the recording"}, diff.turns
                return diff.verdict, diff.identical, len(result.replayed)
        finally:
            await hub.close()

    before = out.read_bytes()
    for at in (1, 10):  # a no-change replay at any seq
        verdict, identical, count = asyncio.run(go(at))
        assert verdict == "completed: 20 of 20 envelopes reproduced" and identical and count == 20, at
    assert out.read_bytes() == before  # opening and replaying never writes the file


def test_follow_causation_takes_the_consulting_channel_a_delegate_opened(demo, tmp_path):
    db, steps = demo
    research = steps["consult_research"]  # planner asks researcher, who delegates to the critic
    alone = asyncio.run(make_bundle(str(db), research))
    assert [md["channel_id"] for md in alone.channels] == [research]
    linked = asyncio.run(make_bundle(str(db), research, follow_causation=True))
    cids = [md["channel_id"] for md in linked.channels]
    assert cids[0] == research and len(cids) == 2
    other = linked.channels[1]
    assert other["manifest"]["type"] == "consulting" and other["channel_id"] not in steps
    assert sorted(a["name"] for a in linked.agents) == ["critic", "planner", "researcher"]
    assert {t["channel_id"] for t in linked.turns} == set(cids)
    assert linked.header["follow_causation"] is True
    assert [c["channel_id"] for c in linked.header["channels"]] == cids
    # the delegated channel's turn answers the researcher's delegate call: both replay from the bundle

    async def go() -> str:
        hub = await open_bundle_hub(linked)
        try:
            async with await fork(hub, research, 1) as box:
                return compare(await replay(hub, box, timeout=60)).verdict
        finally:
            await hub.close()

    assert asyncio.run(go()) == "completed: 6 of 6 envelopes reproduced"


def test_a_seq_range_takes_that_slice_and_the_turns_it_triggered_or_answered(demo, tmp_path):
    db, steps = demo
    cid = steps["pairing"]
    out = tmp_path / "slice.ag2b"
    code, output = run("bundle", "--db", str(db), cid, "--from", "5", "--to", "9", "-o", str(out))
    assert code == 0, output
    bundle = read_bundle(out)
    wal, turns = db_records(db, cid)
    assert [r["seq"] for r in bundle.envelopes] == [5, 6, 7, 8, 9]
    assert [r["envelope"] for r in bundle.envelopes] == wal[4:9]
    ids = {e["envelope_id"] for e in wal[4:9]}
    expected = [t for t in turns if t["trigger_envelope_id"] in ids or t.get("reply_envelope_id") in ids]
    assert bundle.turns == expected and 0 < len(expected) < len(turns)
    assert bundle.header["channels"][0] | {} == {
        "channel_id": cid,
        "label": f"conversation·{cid[-4:]}",
        "type": "conversation",
        "first_seq": 5,
        "last_seq": 9,
        "wal_count": 20,
    }

    async def held() -> int:
        hub = await open_bundle_hub(out)
        try:
            return hub.wal_count(cid)
        finally:
            await hub.close()

    assert asyncio.run(held()) == 5


def test_a_bundle_of_a_newer_format_version_is_refused_in_one_sentence(demo, tmp_path):
    db, steps = demo
    out = tmp_path / "new.ag2b"
    assert run("bundle", "--db", str(db), steps["pairing"], "-o", str(out))[0] == 0
    lines = out.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0]) | {"version": VERSION + 1}
    newer = tmp_path / "newer.ag2b"
    newer.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    with pytest.raises(BundleError) as caught:
        read_bundle(newer)
    assert str(caught.value) == (
        f"{str(newer)!r} is a bundle of format version {VERSION + 1}, newer than the version {VERSION} this "
        "ag2net reads; upgrade ag2net to open it"
    )
    cut = tmp_path / "cut.ag2b"
    cut.write_text("\n".join(lines[:-3]) + "\n", encoding="utf-8")
    with pytest.raises(BundleError, match="cut short"):
        read_bundle(cut)
    other = tmp_path / "other.json"
    other.write_text('{"resourceSpans": []}\n', encoding="utf-8")
    with pytest.raises(BundleError, match="is not an ag2net bundle"):
        read_bundle(other)


def test_every_bad_input_is_one_sentence_with_exit_code_2(demo, tmp_path):
    db, steps = demo
    cid = steps["pairing"]
    out = str(tmp_path / "x.ag2b")
    cases = [
        (["--db", str(tmp_path / "nope.db"), cid, "-o", out], "does not exist"),
        (["--db", str(tmp_path), cid, "-o", out], "is a directory"),
        (["--db", str(db), "nosuchchannel", "-o", out], "nosuchchannel"),
        (["--db", str(db), cid, "-o", str(tmp_path)], "-o"),
        (["--db", str(db), cid, "-o", str(tmp_path / "no" / "x.ag2b")], "does not exist"),
        (["--db", str(db), cid, "--from", "9", "--to", "5", "-o", out], "--from 9 is after --to 5"),
        (["--db", str(db), cid, "--from", "0", "-o", out], "--from"),
        (["--db", str(db), cid, "--to", "21", "-o", out], "1 <= --from <= --to <= 20"),
        (["--db", str(db), cid, "--redact", "(", "-o", out], "not a regular expression"),
        (["--db", str(db), cid, "--redact", "x*", "-o", out], "matches the empty text"),
        (["--db", str(db), cid], "--output"),
        (["--db", str(db), cid, "--from", "abc", "-o", out], "--from"),
    ]
    for args, needle in cases:
        sentence = one_sentence(*run("bundle", *args))
        assert needle in sentence, (args, sentence)
    assert not Path(out).exists()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert "not an ag2net database" in one_sentence(*run("bundle", "--db", str(empty), cid, "-o", out))


async def test_a_postgres_database_by_url_gives_the_same_records_as_sqlite(pg_server, demo):
    from ag2net.store import open_store

    url = await pg_server.fresh_url()
    hub = await Hub.open(open_store(url), **quiet())
    hc = HubClient.local(hub)
    try:
        network = await run_demo(hc)
        cid = next(c for c, step in network.steps.items() if step == "pairing")
    finally:
        await hc.close()
        await hub.close()
    bundle = await make_bundle(url, cid, follow_causation=True)
    assert [md["channel_id"] for md in bundle.channels] == [cid]
    assert len(bundle.envelopes) == 20 and len(bundle.turns) == 15
    assert sorted(a["name"] for a in bundle.agents) == ["coder", "critic"]
    assert "password" not in json.dumps(bundle.header) and url not in json.dumps(bundle.header)

    replayed = await open_bundle_hub(bundle)
    try:
        async with await fork(replayed, cid, 1) as box:
            assert compare(await replay(replayed, box, timeout=60)).verdict == (
                "completed: 20 of 20 envelopes reproduced"
            )
    finally:
        await replayed.close()

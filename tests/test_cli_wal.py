"""``ag2net wal``: read-only (the file's bytes, mtime and directory stay as they were), channels by their
short label and accepted back in any form ``resolve_channel_ref`` takes, ``event_data`` as JSON, ``--json``
one envelope per line."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ag2net import HubClient, Passport
from ag2net.cli import app
from ag2net.hub import Hub
from ag2net.naming import channel_labels
from ag2net.store import SqliteStore

runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def one_sentence(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("Error: ")
    return lines[0]


def fingerprint(path: Path) -> tuple[bytes, int, int, list[str]]:
    """What reading must not change: the bytes, the mtime, the size, and the folder's files."""
    stat = path.stat()
    digest = hashlib.sha256(path.read_bytes()).digest()
    return digest, stat.st_mtime_ns, stat.st_size, sorted(os.listdir(path.parent))


async def _fill(db: Path, *, close: bool = True) -> tuple[Hub, dict[str, str]]:
    """A database with two conversations and a discussion; channel id → what it was opened for."""
    hub = await Hub.open(SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    await hc.register_human(Passport(name="cy", kind="human"))
    made: dict[str, str] = {}
    for n in range(2):
        ch = await ana.open(type="conversation", target="ben")
        await ana.send(ch.channel_id, f"conversation {n}: hello\nsecond line, “quoted” ünïcode")
        made[ch.channel_id] = f"conversation {n}"
    ch = await ana.open(type="discussion", target=["ben", "cy"])
    await ana.send(ch.channel_id, "a discussion")
    made[ch.channel_id] = "discussion"
    if close:
        await hub.close()
    return hub, made


@pytest.fixture
def filled(tmp_path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "w.db"
    _, made = asyncio.run(_fill(db))
    return db, made


def test_a_zero_byte_file_stays_zero_bytes_and_is_not_a_database(tmp_path):
    db = tmp_path / "empty.db"
    db.write_bytes(b"")
    before = fingerprint(db)
    code, output = run("wal", "--db", str(db))
    assert code == 2
    assert "is not an ag2net database" in one_sentence(output) and str(db) in output
    assert db.stat().st_size == 0
    assert fingerprint(db) == before  # no journal files left beside it either


def test_reading_a_database_changes_nothing(filled):
    db, made = filled
    before = fingerprint(db)
    cid = next(iter(made))
    for args in ([], [cid], [cid, "--json"], ["--json"]):
        code, output = run("wal", "--db", str(db), *args)
        assert code == 0, output
    assert fingerprint(db) == before


def test_channels_are_listed_by_label_and_accepted_back_in_every_form(filled):
    db, made = filled
    with_types = [("discussion" if made[c] == "discussion" else "conversation", c) for c in made]
    labels = channel_labels(with_types)
    code, output = run("wal", "--db", str(db))
    assert code == 0
    for cid, label in labels.items():
        assert label in output and cid not in output
    for cid, what in made.items():
        label = labels[cid]
        kind, tail = label.split("·")
        refs = [label, f"{kind}.{tail}", f"{kind}:{tail}", f"{kind}-{tail}", tail, cid, cid[:20]]
        if kind == "discussion":
            refs.append("discussion")  # the only channel of its type
        for ref in refs:
            code, output = run("wal", "--db", str(db), ref)
            assert code == 0, (ref, output)
            first, *rows = output.splitlines()
            assert first.startswith(f"{label}  active"), (ref, first)
            assert any(what in row for row in rows), (ref, output)


def test_an_ambiguous_or_unknown_channel_is_one_sentence(filled):
    db, _ = filled
    code, output = run("wal", "--db", str(db), "conversation")
    sentence = one_sentence(output)
    assert code == 2 and "names 2 conversation channels" in sentence and "conversation·" in sentence
    code, output = run("wal", "--db", str(db), "conversation·zzzz")
    sentence = one_sentence(output)
    assert (
        code == 2 and "'conversation·zzzz' matches no channel" in sentence and "ag2net wal --db" in sentence
    )


def test_event_data_is_printed_as_json(filled):
    db, made = filled
    cid = next(c for c, what in made.items() if what == "conversation 0")
    code, output = run("wal", "--db", str(db), cid)
    assert code == 0
    row = next(line for line in output.splitlines() if "ag2.msg.text" in line)
    data = json.loads(row[row.index("{") :])
    assert data == {"text": "conversation 0: hello\nsecond line, “quoted” ünïcode"}


def test_json_is_one_envelope_per_line_for_piping(filled):
    db, made = filled
    cid = next(c for c, what in made.items() if what == "conversation 1")
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "wal", "--db", str(db), cid[-4:], "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    envelopes = [json.loads(line) for line in done.stdout.splitlines()]
    assert envelopes and all(env["channel_id"] == cid for env in envelopes)
    assert [env["event_type"] for env in envelopes][-1] == "ag2.msg.text"
    assert envelopes[-1]["event_data"]["text"].startswith("conversation 1: hello\n")
    code, output = run("wal", "--db", str(db), cid, "--json", "--limit", "1")
    assert code == 0 and len(output.splitlines()) == 1
    code, output = run("wal", "--db", str(db), "--json")
    channels = [json.loads(line) for line in output.splitlines()]
    assert {c["channel_id"] for c in channels} == set(made)
    assert all("·" in c["label"] and c["wal_count"] >= 1 for c in channels)


def test_a_database_a_hub_has_open_is_read_as_committed(tmp_path):
    db = tmp_path / "live.db"

    async def scenario() -> None:
        hub, made = await _fill(db, close=False)
        try:
            size = db.stat().st_size
            done = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "ag2net.cli",
                "wal",
                "--db",
                str(db),
                "--json",
                "discussion",
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
            out, err = await asyncio.wait_for(done.communicate(), timeout=60)
            assert done.returncode == 0, err
            texts = [json.loads(line)["event_data"].get("text") for line in out.decode().splitlines()]
            assert "a discussion" in texts
            assert db.stat().st_size == size
        finally:
            await hub.close()

    asyncio.run(scenario())


def test_a_directory_or_foreign_database_is_one_sentence(tmp_path):
    import sqlite3

    code, output = run("wal", "--db", str(tmp_path))
    assert code == 2 and "is a directory" in one_sentence(output)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE notes (x)")
    conn.close()
    before = fingerprint(other)
    code, output = run("wal", "--db", str(other))
    assert code == 2 and "another application (tables: notes)" in one_sentence(output)
    assert fingerprint(other) == before


def test_a_pipe_closed_early_is_not_an_error(tmp_path):
    db = tmp_path / "big.db"

    async def fill() -> None:
        hub = await Hub.open(SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0)
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")
        for n in range(1500):  # ~400 KB of JSON lines: more than a pipe holds
            await ana.send(ch.channel_id, f"message {n} " + "x" * 240)
        await hub.close()

    asyncio.run(fill())
    reader = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ag2net.cli",
            "wal",
            "--db",
            str(db),
            "--json",
            "--limit",
            "5000",
            "conversation",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout is not None and reader.stderr is not None
    first = json.loads(reader.stdout.readline())
    reader.stdout.close()  # like `| head -1`
    err = reader.stderr.read().decode()
    assert reader.wait(timeout=60) == 0, err
    assert first["event_type"].startswith("ag2.") and "Traceback" not in err and not err.strip()

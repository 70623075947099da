"""``ag2net replay``: fork a channel of a real demo database at a seq and replay it in a real subprocess.
No override reproduces the transcript (exit 0, no divergence), a narrower view changes the critic's history,
another model diverges at its reply; ``--json`` parses; the database file is not changed; every bad input is
one sentence on stderr with exit 2 and no traceback; PostgreSQL by URL and from the environment."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import quiet, run_demo

from ag2net import Hub, HubClient
from ag2net.errors import ProtocolError
from ag2net.store import SqliteStore, open_store


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "replay", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "120", **(env or {})},
        check=False,
    )


def one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and result.stdout == ""
    return lines[0]


async def _demo(store) -> dict[str, str]:
    hub = await Hub.open(store, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        return {step: cid for cid, step in demo.steps.items()}
    finally:
        await hc.close()
        await hub.close()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("replay") / "demo.db"
    steps = asyncio.run(_demo(SqliteStore(db)))
    return db, steps["pairing"]


def fingerprint(path: Path) -> tuple[bytes, int, list[str]]:
    return (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(os.listdir(path.parent)),
    )


def test_no_override_replays_the_conversation_exactly_and_leaves_the_file_alone(demo_db):
    db, cid = demo_db
    before = fingerprint(db)
    done = run_cli("--db", str(db), f"conversation·{cid[-4:]}", "--at", "1")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(
        f"conversation·{cid[-4:]} forked at seq 1 of 20: completed: 20 of 20 envelopes reproduced"
    )
    rows = [ln for ln in lines if ln[:1] in (" ", "≠") and ln[2:7].strip().isdigit()]
    assert len(rows) == 20 and not any(ln.startswith("≠") for ln in rows)
    assert "critic  msg.text  On “where do we start?”" in rows[4]
    assert lines[-3] == "completed: 20 of 20 envelopes reproduced"
    assert lines[-2] == "turns: 15 answered from the recording"
    assert lines[-1].startswith("first divergent turn: every turn saw the same history")
    assert fingerprint(db) == before


def test_json_with_a_view_override_names_the_critics_first_changed_turn(demo_db):
    # a shorter view changes the critic's third request: the replay model has no reply for it and says so
    db, cid = demo_db
    done = run_cli(
        "--db", str(db), cid[-4:], "--at", "1", "--view", "critic=windowed_summary:recent_n=2", "--json"
    )
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout)
    assert (record["channel_id"], record["at_seq"], record["identical"]) == (cid, 1, False)
    assert record["first_divergence_seq"] == 9 and len(record["rows"]) == 20
    assert record["verdict"] == (
        "stopped at seq 9: critic's model is `replay` and has no recorded reply for a changed request; "
        "give critic `scripted` or `openai` to go on"
    )
    assert record["overrides"] == {"critic": 'view {"name": "windowed_summary", "recent_n": 2}'}
    first = record["first_turn"]
    assert (first["agent"], first["turn"], record["turn_why"]) == ("critic", 3, "different history, reply")
    assert first["history_delta"]["added"][0]["type"] == "compaction_summary"
    answered = [t["answered_by"] for t in record["turns"] if t["agent"] == "critic"][:3]
    assert answered == ["the recording", "the recording", first["answered_by"]]


def test_another_model_diverges_at_the_critics_reply_and_the_table_marks_it(demo_db, tmp_path):
    db, cid = demo_db
    prompt = tmp_path / "critic.txt"
    prompt.write_text("Be brief.", encoding="utf-8")
    done = run_cli(
        "--db",
        str(db),
        cid,
        "--at",
        "3",
        "--model",
        "critic=scripted:I disagree.",
        "--system",
        f"critic={prompt}",
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert (
        lines[1]
        == f"  override critic: system prompt from {prompt} (9 characters); model scripted:I disagree."
    )
    row5 = next(ln for ln in lines if ln[2:7].strip() == "5")
    assert row5.startswith("≠") and row5.endswith("critic  msg.text  I disagree.")
    because = "critic's reply differs from the original's (answered by the model scripted)"
    assert f"stopped early at seq 5 because {because}" in lines
    assert "turns: 1 answered by model scripted (critic 1); 1 with no recorded reply (coder 1)" in lines
    assert lines[-1].startswith("turns that differ (15 of 15): critic 1 (reply), ")
    assert "critic 2 (missing in the replay)" in lines[-1] and lines[-1].endswith(" … 7 more")
    record = json.loads(
        run_cli("--db", str(db), cid, "--at", "3", "--model", "critic=scripted:I disagree.", "--json").stdout
    )
    assert (record["first_divergence_seq"], record["why"], record["stopped"]) == (
        5,
        "different reply",
        "diverged",
    )
    assert record["rows"][4]["replayed"] == {
        "sender": "critic",
        "sender_id": record["rows"][4]["original"]["sender_id"],
        "event_type": "ag2.msg.text",
        "audience": None,
        "event_data": {"text": "I disagree."},
    }


def test_every_bad_input_is_one_sentence_with_exit_2(demo_db, tmp_path):
    db, cid = demo_db
    ref = cid[-4:]
    fake = tmp_path / "no_openai"
    (fake / "openai").mkdir(parents=True)
    (fake / "openai" / "__init__.py").write_text("raise ImportError('No module named openai')\n")
    no_key = {k: "" for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    cases = [
        (["--db", str(tmp_path / "none.db"), ref, "--at", "1"], {}, "does not exist"),
        (["--db", str(db), "nosuch", "--at", "1"], {}, "'nosuch'"),
        (
            ["--db", str(db), ref, "--at", "21"],
            {},
            f"--at 21 is out of range for conversation·{ref}: give a seq between 0 and 20",
        ),
        (["--db", str(db), ref, "--at", "-1"], {}, "--at -1 is out of range"),
        (
            ["--db", str(db), ref, "--at", "1", "--view", "zed=full_transcript"],
            {},
            "--view: 'zed' is not an agent of",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--view", "critic=sideways"],
            {},
            "unknown view 'sideways'; choose from",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--view", "critic=windowed_summary:recent_n"],
            {},
            "'recent_n' is not k=v",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--view", "critic=windowed_summary:depth=3"],
            {},
            "rejected parameters",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--view", "critic"],
            {},
            "--view 'critic' must look like AGENT=NAME",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--system", f"coder={tmp_path / 'gone.txt'}"],
            {},
            "cannot read",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--model", "coder=gpt"],
            {},
            "model 'gpt' is not one of replay, scripted",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--model", "coder=openai:gpt-4o-mini"],
            no_key,
            "needs OPENAI_API_KEY",
        ),
        (
            ["--db", str(db), ref, "--at", "1", "--model", "coder=openai:gpt-4o-mini"],
            {"OPENAI_API_KEY": "sk-test", "PYTHONPATH": str(fake)},
            "openai",
        ),
        (["--db", str(db), ref, "--at", "1", "--turns", "0"], {}, "--turns must be 1 or more"),
        (["--db", str(db), ref, "--at", "1", "--timeout", "0"], {}, "--timeout must be more than 0"),
    ]
    for args, env, expected in cases:
        sentence = one_sentence(run_cli(*args, env=env))
        assert expected in sentence, (args, sentence)
    # the unknown agent's sentence lists who is there
    sentence = one_sentence(run_cli("--db", str(db), ref, "--at", "1", "--model", "zed=replay"))
    assert sentence.endswith(f"'zed' is not an agent of conversation·{ref} (its agents: coder, critic)")


async def test_replay_reads_a_postgres_database_by_url_and_from_the_environment(pg_server):
    url = await pg_server.fresh_url()
    cid = (await _demo(open_store(url)))["pairing"]
    by_url = run_cli("--db", url, cid[-4:], "--at", "1", "--json")
    assert by_url.returncode == 0, by_url.stderr
    record = json.loads(by_url.stdout)
    assert record["identical"] and len(record["rows"]) == 20
    by_env = run_cli("conversation", "--at", "10", "--json", env={"AG2NET_DATABASE_URL": url})
    assert by_env.returncode == 0, by_env.stderr
    assert json.loads(by_env.stdout)["at_seq"] == 10


def test_the_snapshot_answers_typed_requests_with_methods_named_like_the_ops() -> None:
    from ag2net.cli.replay import ANSWERS, SnapshotSource
    from ag2net.protocol import ops

    assert all(getattr(SnapshotSource, cls.spec.name) is answer for cls, answer in ANSWERS.items())
    source = SnapshotSource(metadata=None, envelopes=[], agents={})
    with pytest.raises(ProtocolError, match="not 'get_task'"):
        asyncio.run(source.request(ops.GetTask(task_id="t")))

"""Traces in (``ag2net.bundle.traces_in``): a real demo database exported by ``ag2net export`` (OTLP JSON, and
AG2 eval's trace directory) and read back: every envelope (id, sender, type, time; causation for the
substantive ones), every turn (agent, trigger, view, tokens, tools; with content the system prompt, the input,
the messages sent, the reply and the tool results, as the turn record has them); the hub built from it answers
the causation tree across channels; what the file lacks is said, never made up."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from support import quiet, run_demo
from typer.testing import CliRunner

from ag2net import Hub, HubClient
from ag2net.bundle import BundleError, open_bundle_hub
from ag2net.bundle.traces_in import NOT_IN_FILE, bundle_from_traces
from ag2net.cli import app
from ag2net.debug.causation import causation_tree
from ag2net.envelope import EV_TEXT
from ag2net.store import SqliteStore


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("traces")
    db = folder / "demo.db"

    async def fill() -> None:
        hub = await Hub.open(SqliteStore(db), **quiet())
        hc = HubClient.local(hub)
        try:
            await run_demo(hc)
        finally:
            await hc.close()
            await hub.close()

    asyncio.run(fill())
    runner = CliRunner()
    out = {"db": db, "content": folder / "c.json", "bare": folder / "b.json", "eval": folder / "eval"}
    for args in (
        ["-o", str(out["content"]), "--capture-content"],
        ["-o", str(out["bare"])],
        ["--format", "ag2-eval", "-o", str(out["eval"]), "--capture-content"],
    ):
        result = runner.invoke(app, ["export", "--db", str(db), *args])
        assert result.exit_code == 0, result.output
    return out


def stored(db: Path) -> tuple[dict[str, dict], dict[str, dict]]:
    conn = sqlite3.connect(db)
    try:
        wal = {
            json.loads(r[0])["envelope_id"]: json.loads(r[0])
            for r in conn.execute("SELECT envelope FROM wal")
        }
        turns = {
            json.loads(r[0])["turn_id"]: json.loads(r[0]) for r in conn.execute("SELECT record FROM turns")
        }
    finally:
        conn.close()
    return wal, turns


@pytest.mark.parametrize("which", ["content", "eval"])
def test_an_export_with_content_reads_back_into_the_turn_records(exported, which):
    wal, turns = stored(exported["db"])
    bundle = bundle_from_traces(exported[which])
    assert {r["envelope"]["envelope_id"] for r in bundle.envelopes} == set(wal)
    for row in bundle.envelopes:
        env, was = row["envelope"], wal[row["envelope"]["envelope_id"]]
        assert (env["sender_id"], env["event_type"], env["channel_id"]) == (
            was["sender_id"],
            was["event_type"],
            was["channel_id"],
        )
        if env["event_type"] == EV_TEXT:
            assert env["event_data"] == {"text": NOT_IN_FILE}  # said, never made up
            assert env["causation_id"] == was.get("causation_id") and env["audience"] == was.get("audience")
    assert {t["turn_id"] for t in bundle.turns} == set(turns)
    for t in bundle.turns:
        was = turns[t["turn_id"]]
        for key in (
            "agent_id",
            "channel_id",
            "trigger_envelope_id",
            "system_prompt",
            "inputs",
            "reply",
            "view",
        ):
            assert t[key] == was[key], key
        assert [(c["id"], c["name"], c["result"]) for c in t["tool_calls"]] == [
            (c["id"], c["name"], c["result"]) for c in was["tool_calls"]
        ]
        assert [s["function"]["name"] for s in t["tools"]] == [s["function"]["name"] for s in was["tools"]]
        # the messages sent: the turn's history, but for a compaction summary, which a model gets as a message
        if not any(e["type"] == "compaction_summary" for e in was["history"]):
            assert t["history"] == was["history"]
    assert sorted(a["name"] for a in bundle.agents) == [
        "coder",
        "critic",
        "drafter",
        "planner",
        "researcher",
        "reviewer",
    ]
    assert "envelopes carry no content in a trace: their text reads " + NOT_IN_FILE in bundle.header["notes"]


def test_an_export_without_content_says_what_is_missing(exported):
    _, turns = stored(exported["db"])
    bundle = bundle_from_traces(exported["bare"])
    assert len(bundle.turns) == len(turns)
    for t in bundle.turns:
        assert t["inputs"] == [{"type": "text_input", "content": NOT_IN_FILE, "metadata": {}}]
        assert t["history"] == [] and t["reply"] is None and t["system_prompt"] == ""
        assert t["tokens"]["input"] > 0  # counts and names are in every trace
        for call in t["tool_calls"]:
            assert call["arguments"] == NOT_IN_FILE and call["result"] == NOT_IN_FILE
    assert any("exported without message content" in n for n in bundle.header["notes"])


def test_the_hub_of_a_trace_answers_the_causation_tree(exported):
    wal, _ = stored(exported["db"])
    conversation = [e for e in wal.values() if e["event_type"] == EV_TEXT and e.get("causation_id")]
    last = max(conversation, key=lambda e: e["created_at"])

    async def go() -> tuple[list[str], list[str]]:
        hub = await open_bundle_hub(bundle_from_traces(exported["content"]))
        try:
            tree = await causation_tree(hub, last["envelope_id"])
            return tree.chain, tree.channels
        finally:
            await hub.close()

    chain, channels = asyncio.run(go())
    expected = [last["envelope_id"]]
    while wal[expected[-1]].get("causation_id") in wal:
        expected.append(wal[expected[-1]]["causation_id"])
    assert chain == expected[::-1] and len(chain) >= 3 and channels[0] == last["channel_id"]
    # the delegate links across channels need what a trace lacks (depths, texts): said on opening
    notes = bundle_from_traces(exported["content"]).header["notes"]
    assert any("delegate" in n for n in notes)


def test_files_with_no_spans_or_no_channel_are_one_sentence(tmp_path):
    empty = tmp_path / "e.json"
    empty.write_text('{"resourceSpans": []}', encoding="utf-8")
    with pytest.raises(BundleError, match="holds no spans"):
        bundle_from_traces(empty)
    other = tmp_path / "o.jsonl"
    other.write_text(
        json.dumps({"span_id": "01", "name": "GET /", "attributes": {}}) + "\n", encoding="utf-8"
    )
    with pytest.raises(BundleError, match="name no channel"):
        bundle_from_traces(other)
    with pytest.raises(BundleError, match="does not exist"):
        bundle_from_traces(tmp_path / "nope")

"""``ag2net tui --open FILE``: a repro bundle and an OTLP JSON export (and the same spans in AG2's
``spans.jsonl`` record layout) shown offline by the real launch path, driven by the pilot: the channel list
shows the channels, the tail the envelopes, the agent view a turn; the copy is labelled read-only and the
file is never written; what a trace lacks is said; bad input is one sentence, exit code 2."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import Static, TabbedContent
from tui_network import until
from typer.testing import CliRunner

from ag2net import Hub, HubClient
from ag2net.bundle import write_bundle
from ag2net.bundle.traces_in import NOT_IN_FILE
from ag2net.cli import app as cli_app
from ag2net.cli.bundle import make_bundle
from ag2net.store import SqliteStore
from tui import launch as launch_module
from tui.app import WorkbenchApp
from tui.settings import Settings

SIZE = (160, 45)


def plain(renderable: Any, width: int = 120) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory) -> tuple[Path, dict[str, str]]:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1]))
    from support import quiet, run_demo

    db = tmp_path_factory.mktemp("open") / "demo.db"

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


async def open_in_workbench(path: Path, check) -> dict[str, Any]:
    """Run ``launch(open_path=path)`` with the pilot driving the app through ``check``."""
    seen: dict[str, Any] = {}

    async def drive(app: WorkbenchApp) -> None:
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready, timeout=20)
            await until(lambda: "read-only" in str(app.status.connection))
            await until(lambda: len(app._notifications) > 0)  # notify posts a message: it lands a beat later
            seen["title"] = app.sub_title
            seen["connection"] = str(app.status.connection)
            seen["notes"] = [n.message for n in app._notifications]
            await check(app, pilot, seen)

    async def no_hub(path):  # --open never opens a database
        raise AssertionError("open_hub called for --open")

    async def no_network(func, hub):
        raise AssertionError("run_network called for --open")

    original = WorkbenchApp.run_async
    WorkbenchApp.run_async = drive  # type: ignore[method-assign]
    try:
        await launch_module.launch(
            settings=Settings(),
            db_path=None,
            human_name="ana",
            start_demo=False,
            network=None,
            connect=None,
            token=None,
            operator_token=None,
            open_hub=no_hub,
            run_network=no_network,
            open_path=path,
        )
    finally:
        WorkbenchApp.run_async = original  # type: ignore[method-assign]
    return seen


async def show_turn(app: WorkbenchApp, pilot: Any, cid: str, agent_id: str) -> str:
    app.channel_list.select(cid)
    view = app.projected_view
    await until(lambda: view.data is not None and view.data.channel_id == cid, timeout=10)
    view.select_participant(agent_id)
    await until(
        lambda: view.data is not None and view.data.participant_id == agent_id and view.data.turn is not None,
        timeout=10,
    )
    view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-turn"
    await pilot.pause()
    return plain(view.query_one("#pv-turn", Static).content)


async def test_open_a_bundle_shows_its_channels_tail_and_a_turn_read_only(demo_db, tmp_path) -> None:
    db, steps = demo_db
    research = steps["consult_research"]
    bundle = await make_bundle(str(db), research, follow_causation=True)
    path = write_bundle(bundle, tmp_path / "repro.ag2b")
    before = (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(p.name for p in tmp_path.iterdir()),
    )
    researcher = next(a["agent_id"] for a in bundle.agents if a["name"] == "researcher")
    expected = {md["channel_id"] for md in bundle.channels}

    async def check(app: WorkbenchApp, pilot: Any, seen: dict[str, Any]) -> None:
        await until(lambda: set(app.channel_list.rows) >= expected, timeout=10)
        seen["channels"] = set(app.channel_list.rows)
        await until(lambda: app.tail.row_count >= len(bundle.envelopes), timeout=10)
        seen["rows"] = app.tail.row_count
        seen["turn"] = await show_turn(app, pilot, research, researcher)

    seen = await open_in_workbench(path, check)
    assert seen["channels"] == expected and len(expected) == 2
    assert seen["rows"] == len(bundle.envelopes) == 12
    assert "Turn 1 of 1" in seen["turn"] and "What do we know about offline-first sync" in seen["turn"]
    assert "delegate" in seen["turn"]  # its tool call, answered by the delegated consultation
    assert seen["connection"] == "bundle repro.ag2b · read-only: an in-memory copy, nothing is saved"
    assert seen["title"] == "repro bundle repro.ag2b (read-only copy: posts are not saved)"
    assert any("not saved to the file" in n for n in seen["notes"])
    after = (
        hashlib.sha256(path.read_bytes()).digest(),
        path.stat().st_mtime_ns,
        sorted(p.name for p in tmp_path.iterdir()),
    )
    assert after == before  # nothing written to the file or beside it


def critic_turn_count(db: Path, cid: str, agent_id: str) -> int:
    import sqlite3

    conn = sqlite3.connect(db)
    try:
        query = "SELECT COUNT(*) FROM turns WHERE channel_id = ? AND agent_id = ?"
        return int(conn.execute(query, (cid, agent_id)).fetchone()[0])
    finally:
        conn.close()


def ag2_records(otlp: dict[str, Any]) -> list[dict[str, Any]]:
    """The spans of an OTLP JSON document in AG2's ``spans.jsonl`` record layout (``span_to_record``)."""
    from ag2net.bundle.traces_in import _attrs

    out = []
    for rs in otlp["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                out.append(
                    {
                        "trace_id": s["traceId"],
                        "span_id": s["spanId"],
                        "parent_span_id": s.get("parentSpanId"),
                        "name": s["name"],
                        "kind": "INTERNAL",
                        "start": _iso(int(s["startTimeUnixNano"])),
                        "end": _iso(int(s["endTimeUnixNano"])),
                        "status": "ERROR" if s["status"].get("code") == 2 else "UNSET",
                        "status_message": s["status"].get("message"),
                        "attributes": _attrs(s["attributes"]),
                        "events": [
                            {
                                "name": e["name"],
                                "at": _iso(int(e["timeUnixNano"])),
                                "attributes": _attrs(e["attributes"]),
                            }
                            for e in s.get("events") or []
                        ],
                        "links": [],
                    }
                )
    return out


def _iso(ns: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()


@pytest.mark.parametrize("layout", ["otlp-json", "ag2-spans-jsonl"])
async def test_open_traces_shows_channels_tail_and_turns_and_says_what_the_file_lacks(
    demo_db, tmp_path, layout
) -> None:
    db, steps = demo_db
    pairing = steps["pairing"]
    runner = CliRunner()
    export = tmp_path / "traces.json"
    result = runner.invoke(cli_app, ["export", "--db", str(db), "--capture-content", "-o", str(export)])
    assert result.exit_code == 0, result.output
    doc = json.loads(export.read_text(encoding="utf-8"))
    if layout == "otlp-json":
        path = export
    else:
        folder = tmp_path / "hub" / "telemetry"
        folder.mkdir(parents=True)
        (folder / "spans.jsonl").write_text(
            "".join(json.dumps(r, sort_keys=True) + "\n" for r in ag2_records(doc)), encoding="utf-8"
        )
        export.unlink()
        path = tmp_path / "hub"  # a directory: every .json/.jsonl under it
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    critic_id = next(
        a["value"]["stringValue"]
        for s in spans
        if s["name"] == "invoke_agent critic"
        for a in s["attributes"]
        if a["key"] == "gen_ai.agent.id"
    )
    envelope_spans = [s for s in spans if s["name"].startswith("network.envelope ")]
    channel_ids = {
        a["value"]["stringValue"]
        for s in spans
        if s["name"].startswith("network.channel ")
        for a in s["attributes"]
        if a["key"] == "ag2.network.channel_id"
    }
    critic_turns = critic_turn_count(db, pairing, critic_id)

    async def check(app: WorkbenchApp, pilot: Any, seen: dict[str, Any]) -> None:
        await until(lambda: len(app.channel_list.rows) == 6, timeout=10)
        seen["channels"] = set(app.channel_list.rows)
        await until(lambda: app.tail.row_count >= len(envelope_spans), timeout=10)
        seen["rows"] = app.tail.row_count
        seen["turn"] = await show_turn(app, pilot, pairing, critic_id)
        data = app.projected_view.data
        assert data is not None
        seen["turns"] = len(data.turns)
        seen["label"] = app.channel_list.label_of(pairing)

    seen = await open_in_workbench(path, check)
    assert seen["channels"] == channel_ids and len(channel_ids) == 6
    assert seen["rows"] >= len(envelope_spans)
    assert seen["label"] == f"conversation·{pairing[-4:]}"
    assert seen["turns"] == critic_turns > 1  # the critic's turns there, each from its invoke_agent span
    assert (
        f"Turn {critic_turns} of {critic_turns}" in seen["turn"]
        and "decisions go to an audit table" in seen["turn"]
    )
    assert seen["connection"].startswith("traces ") and "read-only" in seen["connection"]
    notes = " ".join(seen["notes"])
    assert "envelopes carry no content in a trace" in notes and NOT_IN_FILE in notes


async def test_traces_without_content_say_so_in_the_turn(demo_db, tmp_path) -> None:
    db, steps = demo_db
    pairing = steps["pairing"]
    export = tmp_path / "bare.json"
    result = CliRunner().invoke(cli_app, ["export", "--db", str(db), "-o", str(export)])
    assert result.exit_code == 0, result.output
    doc = json.loads(export.read_text(encoding="utf-8"))
    spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
    critic_id = next(
        a["value"]["stringValue"]
        for s in spans
        if s["name"] == "invoke_agent critic"
        for a in s["attributes"]
        if a["key"] == "gen_ai.agent.id"
    )

    async def check(app: WorkbenchApp, pilot: Any, seen: dict[str, Any]) -> None:
        seen["turn"] = await show_turn(app, pilot, pairing, critic_id)

    seen = await open_in_workbench(export, check)
    count = critic_turn_count(db, pairing, critic_id)
    assert (
        f"Turn {count} of {count}" in seen["turn"]
        and NOT_IN_FILE in seen["turn"]
        and "reply: (none)" in seen["turn"]
    )
    assert any("exported without message content" in n for n in seen["notes"])


def test_bad_open_input_is_one_sentence_with_exit_code_2(tmp_path) -> None:
    from ag2net.bundle import VERSION

    runner = CliRunner()
    junk = tmp_path / "junk.json"
    junk.write_text("{not json", encoding="utf-8")
    empty = tmp_path / "empty.json"
    empty.write_text('{"resourceSpans": []}', encoding="utf-8")
    newer = tmp_path / "newer.ag2b"
    newer.write_text(json.dumps({"format": "ag2net-bundle", "version": VERSION + 1}) + "\n", encoding="utf-8")
    cases = [
        (["--open", str(tmp_path / "missing.ag2b")], "does not exist"),
        (["--open", str(junk)], "neither JSON nor JSON lines"),
        (["--open", str(empty)], "holds no spans"),
        (["--open", str(newer)], f"format version {VERSION + 1}, newer than the version {VERSION}"),
        (["--open", str(empty), "--connect", "ws://127.0.0.1:1"], "--connect"),
        (["--open", str(empty), "--demo"], "--demo"),
    ]
    for args, needle in cases:
        result = runner.invoke(cli_app, ["tui", *args])
        lines = [ln for ln in result.output.strip().splitlines() if ln.strip()]
        assert result.exit_code == 2 and len(lines) == 1, (args, result.output)
        assert lines[0].startswith("Error: ") and needle in lines[0] and "Traceback" not in result.output, (
            args,
            lines,
        )


async def test_web_open_serves_the_file_on_an_in_memory_hub(demo_db, tmp_path, capsys) -> None:
    import contextlib

    from tui.web import embedded_hub

    db, steps = demo_db
    path = write_bundle(await make_bundle(str(db), steps["pairing"]), tmp_path / "w.ag2b")
    async with contextlib.AsyncExitStack() as stack:
        hub, leadership = await embedded_hub(stack, None, 128.0, path)
        assert leadership is None and hub.wal_count(steps["pairing"]) == 20
        assert len(await hub.list_turns(channel_id=steps["pairing"], limit=100)) == 15
    assert "Opened w.ag2b read-only" in capsys.readouterr().out
    result = CliRunner().invoke(cli_app, ["web", "--open", str(tmp_path / "nope.ag2b")])
    lines = [ln for ln in result.output.strip().splitlines() if ln.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "does not exist" in lines[0], result.output

"""``ag2net export``: a real SQLite database (a real hub, ScriptedModel agents) written as OTLP JSON and as AG2
eval's trace directory, read back by ag2 1.2.1 in its own virtualenv (``otlp_json_to_spans`` →
``spans_to_trace``, and ``DirectoryTraceSource``), which finds every turn's input messages, tools and token
usage; the file is stable, holds no content unless asked, never changes the database; and every bad input is
one sentence with exit code 2."""

from __future__ import annotations

import asyncio
import hashlib
import json
import subprocess
import textwrap
from typing import Any

import pytest
from test_traces import SECRET_WORD, build_network, check_attribute
from test_ws_interop import ag2_python  # noqa: F401  (a fixture: the ag2 1.2.1 virtualenv's python)
from typer.testing import CliRunner

from ag2net import Hub, SqliteStore
from ag2net.cli import app
from ag2net.traces.genai import TraceOptions, input_messages, rounds_of, turn_spans
from ag2net.traces.otlp import trace_id_of

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


@pytest.fixture(scope="module")
def database(tmp_path_factory) -> dict[str, Any]:
    """A database holding a conversation with tool rounds and a workflow; its turn records by channel."""
    db = tmp_path_factory.mktemp("export") / "net.db"

    async def fill() -> dict[str, Any]:
        hub = await Hub.open(
            SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
        )
        try:
            net = await build_network(hub)
            turns = {}
            for key in ("conversation", "workflow"):
                listed = await net["hc"].list_turns(channel_id=net[key], limit=100)
                turns[net[key]] = [t.to_dict() for t in sorted(listed, key=lambda t: t.started_at)]
            names = {a.agent_id: n for n, a in net["agents"].items()}
            await net["hc"].close()
            return {
                "conversation": net["conversation"],
                "workflow": net["workflow"],
                "turns": turns,
                "names": names,
            }
        finally:
            await hub.close()

    info = asyncio.run(fill())
    info["db"] = db
    return info


# ----------------------------------------------------------------------------------------- the files


def test_otlp_json_one_trace_per_channel_with_the_genai_spans(database, tmp_path):
    out = tmp_path / "traces.json"
    before = hashlib.sha256(database["db"].read_bytes()).hexdigest()
    code, output = run("export", "--db", str(database["db"]), "--capture-content", "-o", str(out))
    assert code == 0, output
    assert hashlib.sha256(database["db"].read_bytes()).hexdigest() == before  # read-only
    doc = json.loads(out.read_text(encoding="utf-8"))
    entries = doc["resourceSpans"]
    assert len(entries) == 2
    for entry in entries:
        (scope,) = entry["scopeSpans"]
        spans = scope["spans"]
        assert len({s["traceId"] for s in spans}) == 1
        ids = {s["spanId"] for s in spans}
        roots = [s for s in spans if "parentSpanId" not in s]
        assert [r["name"].split()[0] for r in roots] == ["network.channel"]
        assert all(s["parentSpanId"] in ids for s in spans if "parentSpanId" in s)
        cid = next(
            a["value"]["stringValue"] for a in roots[0]["attributes"] if a["key"] == "ag2.network.channel_id"
        )
        assert spans[0]["traceId"] == trace_id_of(cid)
        records = database["turns"][cid]
        chats = [s for s in spans if s["name"].startswith("chat")]
        assert len(chats) == sum(r["model_calls"] for r in records)
        for chat in chats:
            attrs = {a["key"]: a["value"] for a in chat["attributes"]}
            for key in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.definitions"):
                check_attribute(key, attrs[key]["stringValue"])
            assert "intValue" in attrs["gen_ai.usage.input_tokens"]
        if cid == database["workflow"]:
            assert any(s["name"] == "invoke_workflow workflow" for s in spans)
    # the same database gives the same bytes
    again = tmp_path / "again.json"
    run("export", "--db", str(database["db"]), "--capture-content", "-o", str(again))
    assert again.read_bytes() == out.read_bytes()


def test_no_content_in_the_export_unless_asked(database, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    code, output = run("export", "--db", str(database["db"]))
    assert code == 0
    doc = json.loads(output)
    text = json.dumps(doc)
    assert SECRET_WORD not in text
    assert "gen_ai.input.messages" not in text and "gen_ai.system_instructions" not in text
    assert "gen_ai.usage.input_tokens" in text and "invoke_agent bob" in text


def test_one_channel_by_its_label_and_the_ag2_eval_directory(database, tmp_path):
    cid = database["conversation"]
    code, output = run(
        "export", "--db", str(database["db"]), cid[-6:], "--format", "ag2-eval", "-o", str(tmp_path / "dir")
    )
    assert code == 0, output
    (file,) = sorted((tmp_path / "dir").glob("*.json"))
    doc = json.loads(file.read_text(encoding="utf-8"))
    assert file.stem == doc["trace_id"] == trace_id_of(cid)
    assert doc["metadata"]["channel_id"] == cid
    assert {s["name"].split()[0] for s in doc["spans"]} >= {"network.channel", "invoke_agent", "chat"}


# ----------------------------------------------------------------------------------------- ag2 reads them

READER = textwrap.dedent(
    """
    import asyncio, json, sys
    from ag2.eval.sources import DirectoryTraceSource, spans_to_trace
    from ag2.eval.sources._otlp_json import otlp_json_to_spans
    from ag2.events import ModelResponse, ToolCallEvent, ToolResultEvent

    def summary(spans, trace):
        llm = [s for s in spans if s.attributes.get("ag2.span.type") == "llm"]
        return {
            "responses": [e.content for e in trace.events_of(ModelResponse)],
            "tool_calls": [[e.name, e.id] for e in trace.events_of(ToolCallEvent)],
            "tool_results": len(trace.events_of(ToolResultEvent)),
            "tokens": [trace.tokens.input, trace.tokens.output],
            "chats": {
                s.span_id: {
                    "turn_id": s.attributes.get("ag2.network.turn_id"),
                    "round": s.attributes.get("ag2net.chat.round"),
                    "input": json.loads(s.attributes["gen_ai.input.messages"]),
                    "tools": [t["name"] for t in json.loads(s.attributes.get("gen_ai.tool.definitions") or "[]")],
                    "usage": [s.attributes.get("gen_ai.usage.input_tokens"), s.attributes.get("gen_ai.usage.output_tokens")],
                }
                for s in llm
            },
        }

    async def main(otlp, directory):
        out = {"otlp": {}, "dir": {}}
        doc = json.load(open(otlp))
        for entry in doc["resourceSpans"]:
            spans = otlp_json_to_spans({"resourceSpans": [entry]})
            channel = next(s for s in spans if s.parent_id is None).attributes["ag2.network.channel_id"]
            out["otlp"][channel] = summary(spans, spans_to_trace(spans))
        source = DirectoryTraceSource(directory)
        async for ref in source.list():
            trace = await source.load(ref)
            raw = json.load(open(f"{directory}/{ref.trace_id}.json"))
            from ag2.eval.sources._spans import span_data_from_dict
            spans = [span_data_from_dict(s) for s in raw["spans"]]
            out["dir"][ref.metadata["channel_id"]] = summary(spans, trace)
        print(json.dumps(out))

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


def expected_chats(records: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """What each model call of the records was sent (the messages, the tools) and used, by (turn, round)."""
    out = {}
    for record in records:
        specs = turn_spans(record, agent_name="x", options=TraceOptions(capture_content=True))
        chats = [s for s in specs if s.name.startswith("chat")]
        for rnd, chat in zip(rounds_of(record), chats, strict=True):
            out[(record["turn_id"], rnd.index)] = {
                "input": input_messages(rnd.events),
                "tools": [t["function"]["name"] for t in record["tools"]],
                "usage": [
                    chat.attributes["gen_ai.usage.input_tokens"],
                    chat.attributes["gen_ai.usage.output_tokens"],
                ],
            }
    return out


def test_ag2_eval_reads_every_turns_input_messages_tools_and_usage(database, tmp_path, ag2_python):  # noqa: F811
    otlp, directory = tmp_path / "t.json", tmp_path / "dir"
    assert run("export", "--db", str(database["db"]), "--capture-content", "-o", str(otlp))[0] == 0
    code, output = run(
        "export",
        "--db",
        str(database["db"]),
        "--capture-content",
        "--format",
        "ag2-eval",
        "-o",
        str(directory),
    )
    assert code == 0, output
    script = tmp_path / "read_with_ag2.py"
    script.write_text(READER, encoding="utf-8")
    done = subprocess.run(
        [str(ag2_python), str(script), str(otlp), str(directory)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    read = json.loads(done.stdout)
    for source in ("otlp", "dir"):
        assert set(read[source]) == set(database["turns"]), source
        for cid, records in database["turns"].items():
            got = read[source][cid]
            expected = expected_chats(records)
            # every model call of every turn: its input messages and tools as sent, its usage
            seen = {(c["turn_id"], c["round"]): c for c in got["chats"].values()}
            assert set(seen) == set(expected), (source, cid)
            for key, want in expected.items():
                assert seen[key]["input"] == want["input"], (source, key)
                assert seen[key]["tools"] == want["tools"], (source, key)
                assert seen[key]["usage"] == want["usage"], (source, key)
            # ag2's own Trace: a response per call, the tool calls with their results, the summed usage
            assert len(got["responses"]) == sum(r["model_calls"] for r in records)
            calls = [[c["name"], c["id"]] for r in records for c in r["tool_calls"]]
            assert sorted(got["tool_calls"]) == sorted(calls)
            assert got["tool_results"] == len(calls)
            assert got["tokens"] == [
                sum(w["usage"][0] for w in expected.values()),
                sum(w["usage"][1] for w in expected.values()),
            ]
            assert got["tokens"][0] > 0
            replies = [r["reply"] for r in records if r["reply"]]
            assert all(reply in got["responses"] for reply in replies)


# ----------------------------------------------------------------------------------------- bad input


def test_bad_input_is_one_sentence_and_exit_code_2(database, tmp_path):
    db = str(database["db"])
    not_db = tmp_path / "notes.txt"
    not_db.write_text("hello", encoding="utf-8")
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    cases = [
        (["export", "--db", str(tmp_path / "missing.db")], "does not exist"),
        (["export", "--db", str(tmp_path)], "is a directory"),
        (["export", "--db", str(not_db)], "not an ag2net database"),
        (["export", "--db", db, "--format", "jaeger"], "--format 'jaeger' is not one of otlp-json, ag2-eval"),
        (["export", "--db", db, "--format", "ag2-eval"], "name it with -o DIR"),
        (["export", "--db", db, "--format", "ag2-eval", "-o", str(a_file)], "is a file"),
        (["export", "--db", db, "-o", str(tmp_path)], "is a directory; --format otlp-json writes one file"),
        (["export", "--db", db, "-o", str(tmp_path / "no" / "such" / "t.json")], "does not exist"),
        (["export", "--db", db, "nosuchchannel"], "nosuchchannel"),
        (["export", "--db", db, "--colour"], "no such option --colour"),
    ]
    for args, words in cases:
        code, output = run(*args)
        assert code == 2, (args, output)
        assert words in one_sentence(output), (args, output)


def test_the_export_command_is_listed(database):
    code, output = run("--help")
    assert code == 0 and "export" in output
    code, output = run("export", "--help")
    assert code == 0 and "--capture-content" in output and "ag2-eval" in output

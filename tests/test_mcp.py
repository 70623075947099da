"""``ag2net mcp`` over stdio, started as a real subprocess on a demo database and reached with the SDK's own
client: the tools in a fixed order with schemas and one-line descriptions, every tool answering small, a long
WAL paged with a cursor, bad arguments and ``post`` refused in one sentence, resources for channels and peer
cards, the database left as it was; the command line's bad input is one sentence with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from test_mcp_support import (
    LONG,
    ROOT,
    answer,
    demo_db,
    env,
    fingerprint,
    one_sentence,
    refusal,
    run_cli,
    stdio_session,
)

__all__ = ["demo_db"]  # the fixture, imported

ORDER = [
    "list_channels",
    "read_wal",
    "envelope",
    "projection",
    "turns",
    "compare_turns",
    "visibility",
    "state_at",
    "causation",
    "dry_run",
    "replay",
]


def label(cid: str, kind: str) -> str:
    return f"{kind}·{cid[-4:]}"


async def test_the_tools_are_listed_in_a_fixed_order_with_schemas_and_one_line_descriptions(demo_db):
    db, _ = demo_db
    async with stdio_session("--db", str(db)) as client:
        first = await client.list_tools()
        again = await client.list_tools(cache_mode="refresh")
    assert [t.name for t in first.tools] == ORDER
    assert [t.model_dump() for t in first.tools] == [t.model_dump() for t in again.tools]
    for tool in first.tools:
        assert tool.description and "\n" not in tool.description and len(tool.description) <= 120, tool.name
        schema = tool.input_schema
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert set(schema["required"]) <= set(schema["properties"])
        assert not [k for k in schema["required"] if "default" in schema["properties"][k]], tool.name
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool.name, name)
        assert tool.annotations.read_only_hint is True


async def test_every_tool_answers_small_on_the_demo(demo_db):
    db, steps = demo_db
    async with stdio_session("--db", str(db)) as client:
        await every_tool(client, steps)


async def every_tool(client: Any, steps: dict[str, str]) -> None:
    """Call every tool (but post) on the demo and check what it answers: small, and right."""
    pairing = label(steps["pairing"], "conversation")
    channels = await answer(client, "list_channels", {})
    assert channels["total"] == 7 and channels["next_cursor"] is None
    assert {c["label"] for c in channels["channels"]} >= {pairing}
    only = await answer(client, "list_channels", {"type": "workflow", "participant": "reviewer"})
    assert [c["type"] for c in only["channels"]] == ["workflow"]
    typed = await answer(client, "list_channels", {"query": "conversation critic"})
    assert [c["label"] for c in typed["channels"]] == [pairing]
    assert (await answer(client, "list_channels", {"query": pairing[-4:]}))["total"] == 1
    wal = await answer(client, "read_wal", {"channel": pairing, "limit": 5})
    assert [e["seq"] for e in wal["envelopes"]] == [1, 2, 3, 4, 5] and wal["wal_count"] == 20
    critic = wal["envelopes"][4]
    assert critic["sender"] == "critic" and critic["text"].startswith("On “where do we start?”")
    one = await answer(client, "envelope", {"channel": pairing, "envelope_id": critic["envelope_id"]})
    assert one["seq"] == 5 and one["caused_by"]["seq"] == 4 and one["led_to"][0]["seq"] == 6
    assert {c["participant"]: c["reason"] for c in one["seen_by"]} == {
        "coder": "delivered",
        "critic": "sender",
    }
    proj = await answer(client, "projection", {"channel": pairing, "participant": "critic", "at_seq": 4})
    assert proj["events_total"] == 1 and proj["events"][0]["type"] == "model_request"
    turns = await answer(client, "turns", {"channel": pairing, "participant": "critic", "limit": 2})
    assert turns["turns_total"] == 8 and [t["turn"] for t in turns["turns"]] == [1, 2]
    assert turns["turns"][0]["reply"] == critic["text"] and "say" in turns["turns"][0]["tools_offered"]
    diff = await answer(
        client, "compare_turns", {"channel": pairing, "participant": "critic", "a": 1, "b": 2}
    )
    assert diff["history"]["a"] < diff["history"]["b"] and diff["history"]["added"]
    vis = await answer(client, "visibility", {"channel": pairing, "from_seq": 4, "limit": 2})
    assert [r["seq"] for r in vis["rows"]] == [4, 5] and vis["next_cursor"]
    state = await answer(client, "state_at", {"channel": pairing, "seq": 5})
    assert state["seq"] == 5 and state["lifecycle"] == "active" and state["sender"] == "critic"
    tree = await answer(client, "causation", {"envelope_id": critic["envelope_id"]})
    assert critic["envelope_id"] in tree["chain"] and tree["nodes"][0]["level"] == 0
    dry = await answer(client, "dry_run", {"channel": pairing, "sender": "critic", "text": "ok"})
    assert dry["admitted"] is False and "closed" in dry["refusal"]  # the demo's channels are closed now
    dry = await answer(client, "dry_run", {"channel": pairing, "sender": "critic", "text": "ok", "at_seq": 4})
    assert dry["admitted"] is True and [r["name"] for r in dry["recipients"]] == ["coder"]
    same = await answer(client, "replay", {"channel": pairing, "at_seq": 1})
    assert same["identical"] is True and same["verdict"] == "completed: 20 of 20 envelopes reproduced"
    for data in (channels, wal, one, proj, turns, diff, vis, state, tree, dry, same):
        assert len(json.dumps(data)) < 20_000


async def test_a_long_wal_is_read_in_pages_with_a_cursor(demo_db):
    db, steps = demo_db
    long = label(steps["long"], "conversation")
    async with stdio_session("--db", str(db)) as client:
        seqs: list[int] = []
        arguments = {"channel": long, "limit": 100, "max_chars": 40}
        pages = 0
        while True:
            data = await answer(client, "read_wal", arguments)
            pages += 1
            assert len(json.dumps(data)) < 30_000
            seqs += [e["seq"] for e in data["envelopes"]]
            if data["next_cursor"] is None:
                break
            arguments = {**arguments, "cursor": data["next_cursor"]}
        assert seqs == list(range(1, LONG + 4)) and pages == (LONG + 3 + 99) // 100
        # a filter pages the same way, over what it matches
        query = {"channel": long, "limit": 40, "filter": "sender:ana seq:1000-1099"}
        first = await answer(client, "read_wal", query)
        second = await answer(client, "read_wal", {**query, "cursor": first["next_cursor"]})
        third = await answer(client, "read_wal", {**query, "cursor": second["next_cursor"]})
        got = [e["seq"] for e in first["envelopes"] + second["envelopes"] + third["envelopes"]]
        assert got == list(range(1000, 1100))
        # a cursor is tied to its query
        sentence = await refusal(client, "read_wal", {"channel": long, "cursor": first["next_cursor"]})
        assert sentence.startswith("read_wal: this cursor belongs to another query")
        sentence = await refusal(client, "read_wal", {"channel": long, "limit": 1000})
        assert sentence == "read_wal: limit must be from 1 to 100, got 1000; page with next_cursor instead"


async def test_bad_arguments_are_refused_in_one_sentence_naming_the_fix(demo_db):
    db, steps = demo_db
    pairing = label(steps["pairing"], "conversation")
    async with stdio_session("--db", str(db)) as client:
        said = {
            "no channel": await refusal(client, "read_wal", {}),
            "unknown": await refusal(client, "read_wal", {"chanel": pairing}),
            "type": await refusal(client, "read_wal", {"channel": pairing, "limit": "ten"}),
            "no such": await refusal(client, "read_wal", {"channel": "nowhere"}),
            "two": await refusal(client, "read_wal", {"channel": "conversation"}),
            "filter": await refusal(client, "read_wal", {"channel": pairing, "filter": 're:"/(/"'}),
            "view": await refusal(
                client, "projection", {"channel": pairing, "participant": "critic", "view": "x"}
            ),
            "who": await refusal(client, "turns", {"channel": pairing, "participant": "planner"}),
            "seq": await refusal(client, "state_at", {"channel": pairing, "seq": 999}),
            "tool": await refusal(client, "explain", {}),
            "dry": await refusal(client, "dry_run", {"channel": pairing, "sender": "critic"}),
            "model": await refusal(
                client, "replay", {"channel": pairing, "at_seq": 1, "models": {"critic": "gpt"}}
            ),
        }
    assert said["no channel"].startswith("read_wal needs 'channel' (the channel: its label")
    assert said["unknown"].startswith(
        "read_wal has no argument 'chanel'; its arguments are channel, from_seq"
    )
    assert said["type"] == 'read_wal: limit must be a whole number, got "ten"; give a whole number'
    assert said["no such"].endswith("call list_channels for the labels")
    assert said["two"].startswith("channel 'conversation' names 2 channels (")
    assert said["view"].startswith("projection view: unknown view 'x'; choose from full_transcript")
    assert said["who"].startswith(f"'planner' is not a participant of {pairing}; give one of coder, critic")
    assert said["seq"] == "state_at: seq 999 is out of range; give a seq from 1 to 20"
    assert said["tool"].startswith("there is no tool 'explain'; call one of list_channels, read_wal")
    assert said["dry"].startswith("dry_run needs what to post; give text")
    assert "is not one of replay, scripted" in said["model"]


async def test_post_is_refused_without_allow_post(demo_db):
    db, steps = demo_db
    async with stdio_session("--db", str(db)) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        sentence = await refusal(
            client, "post", {"channel": label(steps["pairing"], "conversation"), "text": "hi"}
        )
    assert "post" not in names
    assert sentence == (
        "post is off: this server is read-only; restart it with 'ag2net mcp --connect ws://HOST:PORT --allow-post' "
        "to post as the workbench's human"
    )


async def test_resources_are_the_channels_and_the_peer_cards(demo_db):
    db, steps = demo_db
    pairing = label(steps["pairing"], "conversation")
    async with stdio_session("--db", str(db)) as client:
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
        channel = await client.read_resource(f"ag2net://channels/{pairing}")
        card = await client.read_resource("ag2net://peers/critic")
    uris = [str(r.uri) for r in listed]
    assert f"ag2net://channels/{pairing}" in uris and "ag2net://peers/critic" in uris
    assert [t.uri_template for t in templates] == ["ag2net://channels/{label}", "ag2net://peers/{name}"]
    data = json.loads(channel.contents[0].text)
    assert (
        data["label"] == pairing
        and data["participant_names"] == ["coder", "critic"]
        and data["wal_count"] == 20
    )
    assert card.contents[0].text.startswith("---\ntitle: Critic\n")


async def test_the_database_is_never_written(demo_db):
    db, steps = demo_db
    before = fingerprint(db)
    async with stdio_session("--db", str(db)) as client:
        await answer(client, "replay", {"channel": label(steps["pairing"], "conversation"), "at_seq": 3})
        await answer(client, "visibility", {"channel": label(steps["pairing"], "conversation")})
    assert fingerprint(db) == before


def test_bad_command_lines_are_one_sentence_with_exit_2(demo_db, tmp_path):
    db, _ = demo_db
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    said = {
        "none": one_sentence(run_cli()),
        "both": one_sentence(run_cli("--db", str(db), "--connect", "ws://127.0.0.1:1")),
        "missing": one_sentence(run_cli("--db", str(tmp_path / "nope.db"))),
        "empty": one_sentence(run_cli("--db", str(empty))),
        "url": one_sentence(run_cli("--connect", "http://x")),
        "post": one_sentence(run_cli("--db", str(db), "--allow-post")),
        "http": one_sentence(run_cli("--db", str(db), "--http", "localhost")),
        "open": one_sentence(run_cli("--db", str(db), "--http", "0.0.0.0:8770")),
        "token": one_sentence(run_cli("--db", str(db), "--http-token", "t")),
        "option": one_sentence(run_cli("--db", str(db), "--alow-post")),
        "pg": one_sentence(run_cli("--db", "postgresql://u@localhost/x")),
        "unreachable": one_sentence(run_cli("--connect", "ws://127.0.0.1:9")),
    }
    assert said["none"] == (
        "Error: give --db PATH (a database, opened read-only) or --connect ws://HOST:PORT (a running hub)"
    )
    assert said["both"] == "Error: --db and --connect cannot be used together; choose one"
    assert said["missing"].endswith("does not exist; give the path of an ag2net database")
    assert "is not an ag2net database" in said["empty"]
    assert said["url"].startswith("Error: --connect 'http://x' must be a URL like ws://")
    assert said["post"].startswith("Error: --allow-post posts into a running hub")
    assert said["http"] == "Error: --http 'localhost' must look like HOST:PORT, e.g. --http 127.0.0.1:8770"
    assert "0.0.0.0 is not loopback" in said["open"] and "--http-token" in said["open"]
    assert said["token"].startswith("Error: --http-token protects the HTTP server; add --http HOST:PORT")
    assert said["option"].startswith("Error: no such option --alow-post (did you mean --allow-post?)")
    assert said["pg"].endswith("and give ag2net mcp --connect ws://HOST:PORT")
    assert said["unreachable"].startswith("Error: --connect ws://127.0.0.1:9: cannot reach a hub")


def test_print_config_registers_this_server_with_coding_agents(demo_db):
    db, _ = demo_db
    done = run_cli("--db", str(db), "--print-config")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert f"claude mcp add ag2net -- ag2net mcp --db {db.resolve()}" in text
    start = text.index("{")
    entry = json.loads(text[start : text.index("\n}\n", start) + 2])
    assert entry == {
        "mcpServers": {"ag2net": {"command": "ag2net", "args": ["mcp", "--db", str(db.resolve())]}}
    }
    assert "[mcp_servers.ag2net]" in text and "skills/debug-network/SKILL.md" in text
    http = run_cli("--db", str(db), "--http", "127.0.0.1:8770", "--http-token", "secret", "--print-config")
    assert http.returncode == 0 and "secret" not in http.stdout
    assert '"url": "http://127.0.0.1:8770/mcp"' in http.stdout and "Bearer ${AG2NET_MCP_TOKEN}" in http.stdout


def test_the_core_does_not_import_the_sdk():
    code = (
        "import sys, ag2net, ag2net.cli, ag2net.cli.commands, ag2net.mcp, ag2net.mcp.cli, ag2net.mcp.calls; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types', 'uvicorn', 'starlette')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env(), cwd=str(ROOT)
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_skill_is_a_skill_card_naming_only_real_tools():
    import re
    import tomllib

    from ag2net.mcp.tools import TOOLS
    from ag2net.skills import parse_skill_frontmatter

    text = (ROOT / "ag2net" / "skills" / "debug-network" / "SKILL.md").read_text(encoding="utf-8")
    parsed = parse_skill_frontmatter(text)
    assert parsed.error is None
    assert parsed.frontmatter["name"] == "debug-network" and parsed.frontmatter["description"]
    assert isinstance(parsed.frontmatter["expertise"], list)
    names = {t.name for t in TOOLS}
    steps = re.findall(r"\*\*[^*]+\*\* `(\w+)`", parsed.body) + re.findall(
        r"^\d\. \*\*.*?\*\* `(\w+)`", parsed.body
    )
    assert steps and set(steps) <= names
    for name in ORDER:
        assert f"`{name}`" in parsed.body, name
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "skills/*/SKILL.md" in data["tool"]["setuptools"]["package-data"]["ag2net"]
    assert data["project"]["optional-dependencies"]["mcp"] == ["mcp==2.3.0"]


def test_the_command_is_mounted_on_ag2net_when_the_group_lists_it():
    from ag2net.cli.commands import MOUNTED

    if "mcp" not in MOUNTED:
        import pytest

        pytest.skip("ag2net/cli/commands.py does not mount mcp yet")
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "mcp", "--help"],
        capture_output=True,
        text=True,
        env=env(),
        cwd=str(ROOT),
    )
    assert done.returncode == 0 and "--print-config" in done.stdout


async def test_a_database_a_hub_writes_meanwhile_is_read_afresh(demo_db, tmp_path):
    import shutil

    from ag2net import Hub, HubClient
    from ag2net.store import SqliteStore

    db, steps = demo_db
    copy = tmp_path / "live.db"
    shutil.copy(db, copy)
    long = label(steps["long"], "conversation")
    async with stdio_session("--db", str(copy)) as client:
        before = await answer(client, "read_wal", {"channel": long, "from_seq": LONG + 3})
        hub = await Hub.open(SqliteStore(copy), ttl_sweep_interval=0, expectation_sweep_interval=0)
        hc = HubClient.local(hub)
        ana = await hc.attach_human("ana")
        await ana.send(steps["long"], "one more, written while the server runs")
        await hc.close()
        await hub.close()
        after = await answer(client, "read_wal", {"channel": long, "from_seq": LONG + 3})
    assert before["wal_count"] == LONG + 3 and after["wal_count"] == LONG + 4
    assert after["envelopes"][-1]["text"] == "one more, written while the server runs"

"""The demo network: it covers every channel type and tool it promises, is deterministic, finishes by itself,
asks the workbench's human without waiting on them, re-attaches to a reopened database, and runs unchanged on
an OpenAI-compatible model."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from support import quiet

from ag2net import (
    EV_TEXT,
    CompactionSummary,
    Hub,
    HubClient,
    NotFoundError,
    Passport,
    SqliteStore,
    TaskState,
    parse_skill_frontmatter,
)
from ag2net.demo import REVIEW_REQUEST, ROLES, run_demo_cli, start_demo

CHANNEL_TYPES = {"consulting", "conversation", "discussion", "workflow"}


async def open_hub(store=None) -> Hub:
    return await Hub.open(store, **quiet())


async def test_run_demo_cli_transcript():
    lines: list[str] = []
    code = await asyncio.wait_for(run_demo_cli(print_fn=lines.append), timeout=15)
    assert code == 0
    rows = [
        line.split(None, 3) for line in lines if line and not line.startswith(" ") and "channels," not in line
    ]
    assert {row[0] for row in rows} == CHANNEL_TYPES
    events = {row[2] for row in rows}
    assert {REVIEW_REQUEST, EV_TEXT, "ag2.packet", "ag2.channel.closed"} <= events
    assert any(row[2] == REVIEW_REQUEST and row[1] == "drafter" for row in rows)
    summary = lines[lines.index("") + 1]
    assert summary.startswith("6 channels, ")
    assert lines[-6:] == [line for line in lines[-6:] if line.startswith("  ")]


async def test_demo_is_deterministic():
    first: list[str] = []
    second: list[str] = []
    await run_demo_cli(print_fn=first.append)
    await run_demo_cli(print_fn=second.append)
    assert first == second


async def test_demo_exercises_the_whole_surface(tmp_path):
    hub = await open_hub(SqliteStore(tmp_path / "demo.db"))
    hc = HubClient.local(hub)
    try:
        demo = await start_demo(hc)
        await asyncio.wait_for(demo.run(), timeout=15)
        await demo.close()
        channels = hub.query_channels(include_terminal=True, limit=None)
        reasons = sorted((md.manifest.type, md.close_reason) for md in channels)
        assert reasons == [
            ("consulting", "consulting_complete"),
            ("consulting", "consulting_complete"),
            ("consulting", "consulting_complete"),
            ("conversation", "max_turns"),
            ("discussion", "closed_by_agent"),
            ("workflow", "approved"),
        ]
        # real skill cards with YAML front matter
        for role in ROLES:
            agent_id = hub.find_agent_id(role.name)
            info = await hc.get_skill_info(agent_id)
            assert info["generated"] is False
            parsed = parse_skill_frontmatter(info["skill_md"])
            assert parsed.error is None
            assert isinstance(parsed.frontmatter["title"], str)
            assert isinstance(parsed.frontmatter["expertise"], list) and parsed.frontmatter["expertise"]
        turns = await hc.list_turns(limit=1000)
        used = {c["name"] for t in turns for c in t.tool_calls}
        assert {
            "delegate",
            "peers",
            "tasks",
            "channels",
            "say",
            "submit_for_review",
            "request_changes",
            "approve",
        } <= used
        errs = [c for t in turns for c in t.tool_calls if c["is_error"]]
        assert not errs, [(c, t.channel_id) for t in turns for c in t.tool_calls if c["is_error"]]
        assert not [t for t in turns if t.error]
        by_type = {md.channel_id: md.manifest.type for md in channels}
        views = {(by_type[t.channel_id], t.view["name"]) for t in turns}
        assert views == {
            ("consulting", "full_transcript"),
            ("conversation", "windowed_summary"),
            ("discussion", "named_windowed_summary"),
            ("workflow", "named_windowed_summary"),
        }
        pairing = [t for t in turns if by_type[t.channel_id] == "conversation"]
        assert any(t.history and isinstance(t.history[0], CompactionSummary) for t in pairing)
        # the coder's estimate ran as a task with progress, on the consulting channel it answered
        [task] = hub.query_tasks()
        assert task.owner_id == hub.find_agent_id("coder")
        assert task.state == TaskState.COMPLETED
        assert task.progress == {"stage": "sizing components", "pct": 80}
        assert task.spec.capability == "estimation"
        assert by_type[task.channel_id] == "consulting"
        assert task.result.startswith("Estimate:")
        # the custom event type, posted raw to the reviewer
        [workflow] = [md for md in channels if md.manifest.type == "workflow"]
        requests = [e for e in await hub.read_wal(workflow.channel_id) if e.event_type == REVIEW_REQUEST]
        assert len(requests) == 2
        assert all(e.audience == [hub.find_agent_id("reviewer")] for e in requests)
        assert requests[0].event_data == {
            "document": "offline-sync-announcement",
            "note": "first draft ready",
        }
    finally:
        await hc.close()
        await hub.close()
    # a reopened database: the demo re-attaches its agents and runs again
    hub = await open_hub(SqliteStore(tmp_path / "demo.db"))
    try:
        demo = await start_demo(hub)
        await asyncio.wait_for(demo.run(), timeout=15)
        await demo.close()
        assert len(hub.query_channels(include_terminal=True, limit=None)) == 12
        assert len(hub.identities.agents) == len(ROLES)
    finally:
        await hub.close()


async def test_demo_asks_the_human_and_thanks_them():
    hub = await open_hub()
    hc = HubClient.local(hub)
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana")
        await asyncio.wait_for(demo.run(), timeout=15)  # done although ana has not answered yet
        question = await ana.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.sender_id == hub.find_agent_id("planner"),
            timeout=3,
        )
        md = hub.lookup_channel(question.channel_id)
        assert md.manifest.type == "consulting" and md.creator_id == hub.find_agent_id("planner")
        assert question.event_data["text"].startswith("Hi ana, ")
        await ana.send(question.channel_id, "Offline sync first, please.")
        assert await asyncio.wait_for(demo.wait_for_human(), timeout=5) == "Offline sync first, please."
        thanks = await ana.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.channel_id != question.channel_id, timeout=3
        )
        assert thanks.event_data["text"].startswith("Thanks, ana! Noted: Offline sync first, please.")
        thanks_md = hub.lookup_channel(thanks.channel_id)
        assert (thanks_md.manifest.type, thanks_md.close_reason) == ("conversation", "max_turns")
        await demo.close()
    finally:
        await hc.close()
        await hub.close()


async def test_demo_refuses_a_wrong_human_name():
    hub = await open_hub()
    try:
        with pytest.raises(NotFoundError):
            await start_demo(hub, human_name="nobody")
        hc = HubClient.local(hub)
        await hc.register_human(Passport(name="planner", kind="human"))
        with pytest.raises(ValueError, match="human is registered under it"):
            await start_demo(hc)
        await hc.close()
    finally:
        await hub.close()


async def test_demo_close_stops_an_unanswered_question():
    hub = await open_hub()
    hc = HubClient.local(hub)
    try:
        await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana", pace=0.001)
        await asyncio.wait_for(demo.run(), timeout=15)
        await demo.close()
        assert demo.human_answer is None
        assert await asyncio.wait_for(demo.wait_for_human(), timeout=1) is None
    finally:
        await hc.close()
        await hub.close()


# --- the same network on an OpenAI-compatible endpoint ------------------------------------------------


class PlainChatServer:
    """A chat-completions endpoint on 127.0.0.1 that answers every request with a short plain text."""

    def __init__(self) -> None:
        self.requests = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                owner.requests += 1
                last = body["messages"][-1].get("content") or ""
                payload = {
                    "id": f"c{owner.requests}",
                    "object": "chat.completion",
                    "created": 0,
                    "model": body.get("model", "m"),
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": f"noted ({len(last)} chars)"},
                        }
                    ],
                    "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> PlainChatServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="needs the 'openai' extra")
async def test_demo_runs_on_an_openai_compatible_model():
    lines: list[str] = []
    with PlainChatServer() as server:
        code = await asyncio.wait_for(
            run_demo_cli(print_fn=lines.append, model="openai:test-model", base_url=server.base_url),
            timeout=60,
        )
    assert code == 0
    assert server.requests > 10
    rows = [
        line.split(None, 3) for line in lines if line and not line.startswith(" ") and "channels," not in line
    ]
    assert {row[0] for row in rows} == CHANNEL_TYPES
    assert any("noted (" in line for line in lines)
    # a model that never closes the discussion: the script wraps it up and moves on
    assert any(line.startswith("  discussion") and "(wrap_up)" in line for line in lines)


async def test_run_demo_cli_rejects_a_bad_model_name():
    if importlib.util.find_spec("openai") is None:
        pytest.skip("needs the 'openai' extra")
    with pytest.raises(ValueError, match="openai:MODEL_NAME"):
        await run_demo_cli(print_fn=lambda line: None, model="openai:")


async def test_demo_over_websocket():
    """``start_demo`` on a remote HubClient: the same traffic through the wire."""
    from ag2net.server import serve_ws

    hub = await open_hub()
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            client = HubClient.connect(server.url(), rpc_timeout=10)
            try:
                demo = await start_demo(client)
                await asyncio.wait_for(demo.run(), timeout=30)
                await demo.close()
            finally:
                await client.close()
        reasons = sorted(
            (md.manifest.type, md.close_reason) for md in hub.query_channels(include_terminal=True)
        )
        assert reasons[-3:] == [
            ("conversation", "max_turns"),
            ("discussion", "closed_by_agent"),
            ("workflow", "approved"),
        ]
    finally:
        await hub.close()


def test_skill_cards_are_package_data_one_per_role():
    from importlib import resources

    from ag2net.demo import skill_card

    folder = resources.files("ag2net.demo").joinpath("skills")
    cards = {entry.name for entry in folder.iterdir() if entry.name.endswith(".md")}
    assert cards == {f"{role.name}.md" for role in ROLES}
    for role in ROLES:
        text = folder.joinpath(f"{role.name}.md").read_text(encoding="utf-8")
        assert role.skill_md == text == skill_card(role.name)
        parsed = parse_skill_frontmatter(text)
        assert parsed.error is None, (role.name, parsed.error)
        assert isinstance(parsed.frontmatter["title"], str) and parsed.frontmatter["expertise"]
        assert parsed.body.lstrip().startswith("# ")


def test_a_missing_skill_card_is_one_sentence_naming_the_file():
    from ag2net.demo import skill_card

    with pytest.raises(FileNotFoundError) as caught:
        skill_card("nobody")
    message = str(caught.value)
    assert "skills/nobody.md" in message and "reinstall" in message
    assert "\n" not in message

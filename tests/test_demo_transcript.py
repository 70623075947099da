"""``ag2net demo`` prints each agent's tool calls in line, where the model made them: a reader sees the
delegation a nested consulting channel came from, the task the coder reports on, the say and the handoffs."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from ag2net.cli import app
from ag2net.demo import tool_call_text


def transcript() -> list[str]:
    result = CliRunner().invoke(app, ["demo"])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def index_of(lines: list[str], *parts: str, start: int = 0) -> int:
    for i in range(start, len(lines)):
        if all(part in lines[i] for part in parts):
            return i
    raise AssertionError(f"no line with {parts} after line {start}:\n" + "\n".join(lines))


def test_tool_calls_are_printed_where_they_happen():
    lines = transcript()
    asked = index_of(lines, "consulting", "planner", "ag2.msg.text", "What do we know")
    delegated = index_of(lines, "consulting   researcher → delegate(critic, ", start=asked)
    assert "What is the biggest risk" in lines[delegated] and 'capability="risk-review"' in lines[delegated]
    # the nested consulting channel opens after the call, and the critic answers in it
    invited = index_of(lines, "researcher", "ag2.channel.invite", start=delegated)
    assert invited == delegated + 1
    index_of(lines, "critic", "ag2.msg.text", "Conflict resolution", start=invited)
    # the coder's task progress, before its estimate
    progress = index_of(lines, "coder      → tasks(progress, ")
    complete = index_of(lines, "coder      → tasks(complete, ", start=progress)
    index_of(lines, "coder", "ag2.msg.text", "Estimate: sync engine", start=complete)
    # the planner looks at peers and tasks before wrapping up the discussion
    peers = index_of(lines, "discussion   planner    → peers(find")
    tasks = index_of(lines, "discussion   planner    → tasks(list", start=peers)
    index_of(lines, "planner", "ag2.msg.text", "Wrapping up", start=tasks)
    # say posts the text right after the call; handoffs precede their packets
    said = index_of(lines, "conversation coder      → say(")
    assert "ag2.msg.text" in lines[said + 1] and "(posted with say)" in lines[said + 1]
    submitted = index_of(lines, "workflow     drafter    → submit_for_review(")
    index_of(lines, "drafter", "ag2.packet", "[handoff via submit_for_review]", start=submitted)
    approved = index_of(lines, "workflow     reviewer   → approve(")
    index_of(lines, "reviewer", "ag2.packet", "[finish via approve]", start=approved)
    # every tool call line is in the envelope section, above the summary
    summary = lines.index("")
    assert all(i < summary for i, line in enumerate(lines) if " → " in line)


def test_tool_call_text():
    assert tool_call_text("delegate", json.dumps({"target": "critic", "prompt": "Why?"})) == (
        'delegate(critic, "Why?")'
    )
    assert tool_call_text("tasks", {"action": "create", "title": "Sync", "capability": "x"}) == (
        'tasks(create, "Sync", capability="x")'
    )
    assert tool_call_text("peers", "{}") == "peers()"
    assert tool_call_text("odd", "not json") == "odd(not json)"
    assert tool_call_text("say", {"content": "line one\nline two " + "x" * 100}).endswith('…")')
    long = tool_call_text("tasks", {"action": "progress", "payload": {"k": "v" * 200}}, width=60)
    assert len(long) == 60 and long.endswith("…)")


def test_a_pipe_closed_early_ends_the_demo_quietly():
    import subprocess
    import sys

    demo = subprocess.Popen(
        [sys.executable, "-m", "ag2net.cli", "demo"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert demo.stdout is not None and demo.stderr is not None
    assert demo.stdout.readline().startswith(b"consulting")
    demo.stdout.close()  # like `| head -1`
    err = demo.stderr.read().decode()
    assert demo.wait(timeout=60) == 0, err
    assert not err.strip()

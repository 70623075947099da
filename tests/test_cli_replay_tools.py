"""``ag2net replay --tool AGENT.TOOL=recorded|live|static:JSON`` and ``--network`` on the demo's review
workflow, in a real subprocess: the default (recorded) reproduces it; live needs the function, which
``--network`` loads; static changes the drafter's request, so the replay model says who needs a model;
every bad ``--tool`` is one sentence with exit 2."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from test_cli_replay import _demo, one_sentence, run_cli

from ag2net.store import SqliteStore

HERE = str(Path(__file__).parent)


@pytest.fixture(scope="module")
def workflow_db(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("replay_tools") / "demo.db"
    steps = asyncio.run(_demo(SqliteStore(db)))
    return db, steps["workflow"][-4:]


def test_recorded_by_default_and_live_through_network(workflow_db):
    db, ref = workflow_db
    done = run_cli("--db", str(db), ref, "--at", "6")
    assert done.returncode == 0, done.stderr
    assert "completed: 13 of 13 envelopes reproduced" in done.stdout.splitlines()
    done = run_cli(
        "--db",
        str(db),
        ref,
        "--at",
        "6",
        "--tool",
        "drafter.submit_for_review=live",
        "--network",
        "replay_drafter_network:register",
        env={"PYTHONPATH": HERE},
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "  override drafter: tool submit_for_review live" in lines
    assert "completed: 13 of 13 envelopes reproduced" in lines


def test_a_static_result_stops_the_replay_model_in_one_line(workflow_db):
    db, ref = workflow_db
    done = run_cli("--db", str(db), ref, "--at", "6", "--tool", 'drafter.submit_for_review=static:"sent"')
    assert done.returncode == 0, done.stderr
    assert (
        "stopped at seq 7: drafter's model is `replay` and has no recorded reply for a changed request; "
        "give drafter `scripted` or `openai` to go on"
    ) in done.stdout.splitlines()


def test_every_bad_tool_option_is_one_sentence(workflow_db):
    db, ref = workflow_db
    cases = [
        (
            "drafter.submit_for_review=live",
            "--tool 'drafter.submit_for_review=live': this process does not have drafter's tool "
            "'submit_for_review'; load the network that has it with --network module:function, or give it "
            "recorded or static:JSON",
        ),
        ("drafter=live", "--tool 'drafter=live' must look like AGENT.TOOL=recorded|live|static:JSON"),
        ("drafter.nosuch=recorded", "drafter was never offered a tool 'nosuch' in workflow·"),
        (
            "drafter.submit_for_review=sometimes",
            "tool policy 'sometimes' is not one of recorded, live or static:JSON",
        ),
        ("drafter.submit_for_review=static:{", "static:{ is not JSON"),
        ("zed.say=live", "--tool: 'zed' is not an agent of workflow·"),
    ]
    for option, expected in cases:
        sentence = one_sentence(run_cli("--db", str(db), ref, "--at", "6", "--tool", option))
        assert expected in sentence, (option, sentence)

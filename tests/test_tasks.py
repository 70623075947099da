"""The task model: states, record shapes of ag2 1.2.1, summaries, id rules."""

from __future__ import annotations

import json

import pytest

from ag2net.errors import ProtocolError
from ag2net.tasks import (
    TASK_ID_RE,
    TERMINAL_TASK_STATES,
    TaskMetadata,
    TaskSpec,
    TaskState,
    check_task_id,
    task_summary,
)


def sample() -> TaskMetadata:
    return TaskMetadata(
        task_id="t-1",
        owner_id="a" * 32,
        spec=TaskSpec("Write brief", description="Q3", payload={"k": [1, 2]}, capability="research"),
        state=TaskState.RUNNING,
        created_at="2026-01-01T00:00:00.000000Z",
        started_at="2026-01-01T00:00:01.000000Z",
        expires_at="2026-01-01T00:15:00.000000Z",
        last_progress_at="2026-01-01T00:00:02.000000Z",
        progress={"pct": 50},
        result=None,
        error="",
        channel_id="c" * 32,
    )


def test_states_and_terminal_set() -> None:
    assert [s.value for s in TaskState] == [
        "created",
        "running",
        "completed",
        "failed",
        "expired",
        "cancelled",
    ]
    assert {s.value for s in TERMINAL_TASK_STATES} == {"completed", "failed", "expired", "cancelled"}
    assert TaskState("completed") is TaskState.COMPLETED
    assert TaskState.FAILED == "failed"
    assert f"{TaskState.EXPIRED}" == "expired"


def test_is_terminal() -> None:
    md = sample()
    assert not md.is_terminal()
    for state in TaskState:
        md.state = state
        assert md.is_terminal() == (state in TERMINAL_TASK_STATES)


def test_to_dict_shape_writes_state_value_and_nests_spec() -> None:
    data = sample().to_dict()
    assert list(data) == [
        "task_id",
        "owner_id",
        "spec",
        "state",
        "created_at",
        "started_at",
        "completed_at",
        "expires_at",
        "last_progress_at",
        "progress",
        "result",
        "error",
        "channel_id",
    ]
    assert data["state"] == "running" and type(data["state"]) is str
    assert data["spec"] == {
        "title": "Write brief",
        "description": "Q3",
        "payload": {"k": [1, 2]},
        "capability": "research",
    }


def test_round_trip_through_json() -> None:
    md = sample()
    md.result = {"answer": 42}
    again = TaskMetadata.from_dict(json.loads(json.dumps(md.to_dict())))
    assert again == md
    assert again.state is TaskState.RUNNING
    assert isinstance(again.spec, TaskSpec)


def test_defaults() -> None:
    md = TaskMetadata("t", "o", TaskSpec("x"), TaskState.CREATED)
    assert md.to_dict() == {
        "task_id": "t",
        "owner_id": "o",
        "spec": {"title": "x", "description": "", "payload": {}, "capability": None},
        "state": "created",
        "created_at": "",
        "started_at": None,
        "completed_at": None,
        "expires_at": None,
        "last_progress_at": None,
        "progress": {},
        "result": None,
        "error": "",
        "channel_id": None,
    }
    assert (
        TaskMetadata.from_dict({"task_id": "t", "owner_id": "o", "spec": {"title": "x"}, "state": "created"})
        == md
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"task_id": "t", "owner_id": "o", "spec": {"title": "x"}, "state": "done"},
            "TaskMetadata.state must be one of",
        ),
        (
            {"task_id": "t", "owner_id": "o", "spec": {}, "state": "created"},
            "TaskMetadata.spec is missing required field 'title'",
        ),
        (
            {"task_id": "t", "owner_id": "o", "state": "created"},
            "TaskMetadata is missing required field 'spec'",
        ),
        (
            {"task_id": "t", "owner_id": "o", "spec": {"title": "x"}, "state": "created", "extra": 1},
            "TaskMetadata has unknown field 'extra'",
        ),
        (
            {"task_id": "t", "owner_id": "o", "spec": {"title": "x", "payload": []}, "state": "created"},
            "TaskMetadata.spec.payload must be a JSON object",
        ),
    ],
)
def test_from_dict_refuses_bad_input(data: dict, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        TaskMetadata.from_dict(data)
    assert message in str(info.value)


def test_task_summary_has_the_tool_keys() -> None:
    md = sample()
    md.state = TaskState.COMPLETED
    md.completed_at = "2026-01-01T00:01:00.000000Z"
    md.result = "done"
    assert task_summary(md) == {
        "task_id": "t-1",
        "owner_id": "a" * 32,
        "title": "Write brief",
        "capability": "research",
        "state": "completed",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "started_at": "2026-01-01T00:00:01.000000Z",
        "completed_at": "2026-01-01T00:01:00.000000Z",
        "expires_at": "2026-01-01T00:15:00.000000Z",
        "last_progress_at": "2026-01-01T00:00:02.000000Z",
        "result": "done",
        "error": "",
    }
    json.dumps(task_summary(md))


@pytest.mark.parametrize("task_id", ["a", "0", "t-1", "abc.def_ghi-1", "x" * 128, "a" * 32])
def test_task_id_accepts(task_id: str) -> None:
    assert TASK_ID_RE.fullmatch(task_id)
    check_task_id(task_id)


@pytest.mark.parametrize("task_id", ["", "-a", ".a", "_a", "a b", "a/b", "x" * 129, "é", None, 5])
def test_task_id_refuses(task_id: object) -> None:
    with pytest.raises(ProtocolError) as info:
        check_task_id(task_id)
    assert "task_id" in str(info.value) and "letters, digits" in str(info.value)

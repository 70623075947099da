"""The frames the server writes per post (``notify_json``, ``response_json``) say what encoding the frame's
dict says: same JSON data, and the same decoded frame."""

from __future__ import annotations

import json
import math

import pytest

from ag2net.envelope import Envelope
from ag2net.protocol import frames as fr
from ag2net.protocol.codec import dumps, notify_json, response_json

ENVELOPES = [
    Envelope("ch-1", "ag-1", None, "ag2.text", {"text": "hello"}, envelope_id="env-1", created_at="t"),
    Envelope(
        "ch-2",
        "ag-2",
        ["ag-3", "ag-4"],
        "ag2.text",
        {"text": 'é ü \u2603 \U0001f600 "quoted" \\ back', "n": [1, 2.5, None, True], "d": {"b": 1, "a": 2}},
        envelope_id="env-2",
        task_id="task-1",
        causation_id="env-1",
        trace_id="00-abc-def-01",
        priority="urgent",
        depth=3,
        idempotency_key="k",
        created_at="2026-12-03T07:00:00Z",
        ttl_seconds=60,
    ),
    Envelope("ch-3", "ag-1", [], "x.custom", {}, envelope_id="", created_at=""),
]


@pytest.mark.parametrize("env", ENVELOPES)
def test_notify_text_is_the_notify_frame(env: Envelope) -> None:
    text = notify_json(env, "ag-9")
    assert json.loads(text) == {"kind": "notify", "envelope": env.to_dict(), "recipient_id": "ag-9"}
    frame = fr.frame_from_json(text)
    assert isinstance(frame, fr.NotifyFrame)
    assert frame.envelope == env
    assert frame.recipient_id == "ag-9"


def test_notify_text_keeps_what_plain_json_cannot_say() -> None:
    """NaN in event_data (json's own extension, as ``dumps`` writes it) and a non-ASCII recipient."""
    env = Envelope("ch-1", "ag-1", None, "ag2.text", {"x": math.inf}, envelope_id="env-1")
    data = json.loads(notify_json(env, "ag-\u00e9"))
    assert data["envelope"]["event_data"] == {"x": math.inf}
    assert data["recipient_id"] == "ag-\u00e9"


@pytest.mark.parametrize(
    "result",
    ["env-123", 'é\u2603"\\', None, 7, 2.5, True, [1, "a", None], {"agent_id": "ag-1", "seq": 3}, ""],
)
def test_response_text_is_the_response_frame(result: object) -> None:
    text = response_json("req-1", result)
    expected = {
        "kind": "response",
        "request_id": "req-1",
        "ok": True,
        "result": result,
        "error_code": "",
        "error_message": "",
    }
    assert json.loads(text) == json.loads(dumps(expected))
    frame = fr.frame_from_json(text)
    assert isinstance(frame, fr.ResponseFrame)
    assert frame.ok and frame.result == result and frame.identity_secret is None

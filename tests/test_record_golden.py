"""Every record's dict form, byte for byte, against what was recorded before the ``Record`` base existed.

``tests/data/record_golden.json`` was written by ``python tests/test_record_golden.py --write`` from the
hand-written ``to_dict``/``from_dict`` methods, before they were replaced by the ``Record`` base. For each
record class, a populated and an empty (defaults-only) instance, the fixture holds:

* ``to_dict()`` as JSON text (key order included) and the Python type of every node (so an enum member where
  a plain ``str`` was, or a tuple where a list was, fails even though the JSON text matches);
* what ``from_dict`` makes of probes: the recorded dict itself, a minimal dict, one with an unknown key,
  one with a wrong-typed field (the rebuilt record's ``to_dict``, or the error's type and exact message).

The test also checks ``from_dict(x.to_dict()) == x`` and that ``to_dict`` returns fresh containers (mutating
the result leaves the record alone), as the hand-written methods did.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ag2net.adapters.transitions import (
    AgentTarget,
    Always,
    ContextEquals,
    FromSpeaker,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionGraph,
)
from ag2net.channel import (
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    Participant,
    ParticipantRole,
    ParticipantSchema,
)
from ag2net.client.turns import TurnRecord
from ag2net.envelope import Envelope
from ag2net.events import (
    CompactionSummary,
    DataInput,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)
from ag2net.identity import (
    AccessBlock,
    AgentRuntime,
    AuthBlock,
    ChannelTypeAccess,
    CostProfile,
    InboxBlock,
    LimitsBlock,
    ObservedStat,
    Passport,
    RateBlock,
    Resume,
    ResumeExample,
    Rule,
)
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.records import PendingTurn
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState

DATA = Path(__file__).parent / "data" / "record_golden.json"

ENV = Envelope(
    channel_id="c" * 32,
    sender_id="a" * 32,
    audience=["b" * 32],
    event_type="ag2.msg.text",
    event_data={"text": "hi", "n": [1, 2.5, None, True]},
    envelope_id="e" * 32,
    created_at="2026-01-01T00:00:00Z",
)

MANIFEST = ChannelManifest(
    type="workflow",
    version=3,
    participants=ParticipantSchema(min=2, max=5, roles=["lead", "member"]),
    knobs_schema={"rounds": "int", "topic": "str"},
    default_view_policy="windowed",
    expectations=[
        Expectation("turn_timeout", "close", {"seconds": 30, "nested": {"a": [1]}}, "initiator"),
        Expectation("quiet", "warn"),
    ],
)

PASSPORT = Passport(
    name="researcher",
    owner="lab",
    provider="openai",
    model="gpt-x",
    cost=CostProfile(1.5, 6, "fast"),
    region="eu",
    auth=AuthBlock("jwt", "iss", "aud", "fp", {"token": "s3cret", "scopes": ["a", "b"]}),
    kind="human",
    hub_id="h1",
    version=2,
    agent_id="d" * 32,
    created_at="2026-01-01T00:00:00Z",
)

RESUME = Resume(
    claimed_capabilities=["search", "summarise"],
    domains=["biology"],
    summary="reads papers",
    examples=[ResumeExample("lit review", "done", "t1", "c1", "2026-01-01", "good"), ResumeExample("x")],
    observed={"search": ObservedStat(3, 2, 1, 0, 12.5), "idle": ObservedStat()},
    version=4,
    last_updated="2026-01-02T00:00:00Z",
)

RULE = Rule(
    version=2,
    access=AccessBlock(["team-*"], ["*"], ChannelTypeAccess(["workflow"], ["*", "direct"])),
    limits=LimitsBlock(3, 4, 7200, "1h", RateBlock(60, 10), 2, InboxBlock(50, "drop_oldest", 40)),
)

CHANNEL = ChannelMetadata(
    channel_id="c" * 32,
    manifest=MANIFEST,
    creator_id="a" * 32,
    participants=[
        Participant("a" * 32, ParticipantRole.INITIATOR, 0, "2026-01-01T00:00:00Z"),
        Participant("b" * 32, ParticipantRole.RESPONDENT, 1),
    ],
    state=ChannelState.ACTIVE,
    created_at="2026-01-01T00:00:00Z",
    expires_at="2026-01-01T02:00:00Z",
    closed_at=None,
    close_reason="",
    parent_channel_id="p" * 32,
    knobs={"rounds": 3, "deep": {"x": [1, {"y": 2}]}},
    labels={"team": "blue"},
    required_acks=1,
    pending_acks=["b" * 32],
    rejected_by=[],
)

TASK = TaskMetadata(
    task_id="t-1",
    owner_id="a" * 32,
    spec=TaskSpec("write", "write a thing", {"words": 100, "style": {"tone": "dry"}}, "writing"),
    state=TaskState.RUNNING,
    created_at="2026-01-01T00:00:00Z",
    started_at="2026-01-01T00:00:01Z",
    completed_at=None,
    expires_at="2026-01-01T00:15:00Z",
    last_progress_at="2026-01-01T00:00:02Z",
    progress={"pct": 50},
    result={"draft": "..."},
    error="",
    channel_id="c" * 32,
)

HISTORY = [
    ModelRequest([TextInput("hello", {"from": "x"}), DataInput({"k": [1, 2]})]),
    ModelMessage("hi there", {"m": 1}),
    CompactionSummary("3 earlier messages", 3),
    ToolCallEvent("add", '{"a": 1}', "call1"),
    ToolResultEvent("call1", "add", "2", True, value=2),
]

TURN = TurnRecord(
    channel_id="c" * 32,
    agent_id="a" * 32,
    trigger_envelope_id="e" * 32,
    turn_id="turn1",
    started_at="2026-01-01T00:00:00Z",
    duration_ms=12.5,
    system_prompt="be brief",
    history=list(HISTORY),
    inputs=[TextInput("in"), DataInput([1, 2], {"k": "v"})],
    tools=[{"type": "function", "function": {"name": "add"}}],
    view={"policy": "full_transcript"},
    reply="done",
    tool_calls=[{"name": "add", "arguments": "{}"}],
    tokens={"system": 3, "history": 9},
    token_method="estimate",
    timings={"model": 1.5},
    reply_envelope_id="f" * 32,
    model_calls=2,
    error=None,
)

GRAPH = TransitionGraph(
    initial_speaker="a" * 32,
    transitions=[
        Transition(FromSpeaker("a" * 32), AgentTarget("b" * 32), 1),
        Transition(ToolCalled("handoff"), TerminateTarget("done")),
        Transition(ContextEquals("k", [1, {"v": 2}]), AgentTarget("a" * 32), -1),
        Transition(Always(), TerminateTarget()),
    ],
    default_target=TerminateTarget("bye"),
    max_turns=7,
)

# (case id, populated instance, empty instance or None, from_dict or None, extra decode probes)
Probe = tuple[str, Any]
CASES: list[tuple[str, Any, Any, Callable[[Any], Any] | None, list[Probe]]] = [
    (
        "CostProfile",
        CostProfile(1.5, 6, "fast"),
        CostProfile(),
        CostProfile.from_dict,
        [("wrong", {"input_per_mtok": "x"})],
    ),
    ("AuthBlock", PASSPORT.auth, AuthBlock(), AuthBlock.from_dict, [("wrong", {"claim": []})]),
    (
        "Passport",
        PASSPORT,
        Passport("x"),
        Passport.from_dict,
        [
            ("minimal", {"name": "n"}),
            ("wrong", {"name": "n", "cost": {"input_per_mtok": "cheap"}}),
            ("badkind", {"name": "n", "kind": "robot"}),
        ],
    ),
    (
        "ResumeExample",
        RESUME.examples[0],
        ResumeExample("t"),
        ResumeExample.from_dict,
        [("minimal", {"title": "t"})],
    ),
    (
        "ObservedStat",
        RESUME.observed["search"],
        ObservedStat(),
        ObservedStat.from_dict,
        [("wrong", {"n": 1.5}), ("bool", {"n": True})],
    ),
    (
        "Resume",
        RESUME,
        Resume(),
        Resume.from_dict,
        [
            ("wrong", {"examples": [{"outcome": "x"}]}),
            ("observed", {"observed": {"s": {"n": "x"}}}),
            ("caps", {"claimed_capabilities": ["a", 1]}),
        ],
    ),
    ("ChannelTypeAccess", RULE.access.channel_types, ChannelTypeAccess(), ChannelTypeAccess.from_dict, []),
    ("AccessBlock", RULE.access, AccessBlock(), AccessBlock.from_dict, [("wrong", {"inbound_from": "*"})]),
    ("RateBlock", RULE.limits.rate, RateBlock(), RateBlock.from_dict, []),
    ("InboxBlock", RULE.limits.inbox, InboxBlock(), InboxBlock.from_dict, []),
    (
        "LimitsBlock",
        RULE.limits,
        LimitsBlock(),
        LimitsBlock.from_dict,
        [
            ("ttl", {"channel_ttl_default": 5, "task_ttl_default": "1h"}),
            ("wrong", {"channel_ttl_default": None}),
        ],
    ),
    ("Rule", RULE, Rule(), Rule.from_dict, [("nested", {"limits": {"inbox": {"overflow": 1}}})]),
    (
        "AgentRuntime",
        AgentRuntime("a" * 32, "ws", "ep1", True, "2026-01-01T00:00:00Z"),
        None,
        AgentRuntime.from_dict,
        [("missing", {"agent_id": "a"})],
    ),
    ("TaskSpec", TASK.spec, TaskSpec("t"), TaskSpec.from_dict, [("minimal", {"title": "t"})]),
    (
        "TaskMetadata",
        TASK,
        TaskMetadata("t", "o", TaskSpec("x"), TaskState.CREATED),
        TaskMetadata.from_dict,
        [
            ("minimal", {"task_id": "t", "owner_id": "o", "spec": {"title": "x"}, "state": "failed"}),
            ("badstate", {"task_id": "t", "owner_id": "o", "spec": {"title": "x"}, "state": "done"}),
        ],
    ),
    (
        "ParticipantSchema",
        MANIFEST.participants,
        ParticipantSchema(2),
        ParticipantSchema.from_dict,
        [("minimal", {"min": 1}), ("nulls", {"min": 1, "roles": None}), ("missing", {})],
    ),
    (
        "Expectation",
        MANIFEST.expectations[0],
        MANIFEST.expectations[1],
        Expectation.from_dict,
        [
            ("minimal", {"name": "n", "on_violation": "v"}),
            ("nulls", {"name": "n", "on_violation": "v", "params": None}),
            ("missing", {"name": "n"}),
        ],
    ),
    (
        "ChannelManifest",
        MANIFEST,
        ChannelManifest("direct"),
        ChannelManifest.from_dict,
        [
            ("minimal", {"type": "t"}),
            (
                "nulls",
                {
                    "type": "t",
                    "participants": None,
                    "knobs_schema": None,
                    "expectations": None,
                    "version": None,
                },
            ),
            ("missing", {"version": 1}),
        ],
    ),
    (
        "Participant",
        CHANNEL.participants[0],
        CHANNEL.participants[1],
        Participant.from_dict,
        [
            ("minimal", {"agent_id": "a", "role": "participant", "order": 2}),
            ("badrole", {"agent_id": "a", "role": "boss", "order": 2}),
            ("missing", {"agent_id": "a"}),
        ],
    ),
    (
        "ChannelMetadata",
        CHANNEL,
        ChannelMetadata("c", ChannelManifest("direct"), "a", [], ChannelState.PENDING, ""),
        ChannelMetadata.from_dict,
        [
            (
                "minimal",
                {
                    "channel_id": "c",
                    "manifest": {"type": "d"},
                    "creator_id": "a",
                    "participants": [],
                    "state": "closed",
                    "created_at": "",
                },
            ),
            (
                "nulls",
                {
                    "channel_id": "c",
                    "manifest": {"type": "d"},
                    "creator_id": "a",
                    "participants": [],
                    "state": "closed",
                    "created_at": "",
                    "knobs": None,
                    "labels": None,
                    "pending_acks": None,
                    "rejected_by": None,
                },
            ),
            (
                "badstate",
                {
                    "channel_id": "c",
                    "manifest": {"type": "d"},
                    "creator_id": "a",
                    "participants": [],
                    "state": "opened",
                    "created_at": "",
                },
            ),
            (
                "badparts",
                {
                    "channel_id": "c",
                    "manifest": {"type": "d"},
                    "creator_id": "a",
                    "participants": {},
                    "state": "closed",
                    "created_at": "",
                },
            ),
            ("missing", {"channel_id": "c"}),
        ],
    ),
    (
        "PendingTurn",
        PendingTurn("c" * 32, "e" * 32, "2026-01-01T00:00:00Z"),
        PendingTurn("c", None, ""),
        PendingTurn.from_dict,
        [
            ("minimal", {"channel_id": "c"}),
            ("nulls", {"channel_id": 5, "expected_at": None}),
            ("missing", {}),
        ],
    ),
    (
        "ObservedEvent",
        ObservedEvent(7, "envelope", "c" * 32, 3, ENV, {"k": {"v": [1]}}),
        ObservedEvent(0, "agent"),
        ObservedEvent.from_dict,
        [
            ("minimal", {"position": "4", "kind": "audit"}),
            ("nulls", {"position": 1, "kind": "channel", "payload": None}),
            ("missing", {"kind": "x"}),
        ],
    ),
    ("TextInput", TextInput("hello", {"from": "x"}), TextInput(""), None, []),
    ("DataInput", DataInput({"k": [1, 2]}, {"m": 1}), DataInput(None), None, []),
    (
        "ModelRequest",
        HISTORY[0],
        ModelRequest([]),
        ModelRequest.from_dict,
        [
            ("minimal", {"type": "model_request"}),
            ("parts", {"type": "model_request", "parts": [{"content": 5}]}),
        ],
    ),
    (
        "ModelMessage",
        HISTORY[1],
        ModelMessage(""),
        ModelMessage.from_dict,
        [("minimal", {"type": "model_message"}), ("nulls", {"type": "model_message", "metadata": None})],
    ),
    (
        "CompactionSummary",
        HISTORY[2],
        CompactionSummary("", 0),
        CompactionSummary.from_dict,
        [
            ("minimal", {"type": "compaction_summary"}),
            ("str", {"type": "compaction_summary", "event_count": "4"}),
        ],
    ),
    (
        "ToolCallEvent",
        HISTORY[3],
        ToolCallEvent("n", id="i"),
        ToolCallEvent.from_dict,
        [("minimal", {"type": "tool_call", "name": "n", "id": "i"}), ("missing", {"type": "tool_call"})],
    ),
    (
        "ToolResultEvent",
        HISTORY[4],
        ToolResultEvent("", "", ""),
        ToolResultEvent.from_dict,
        [
            ("minimal", {"type": "tool_result"}),
            ("truthy", {"type": "tool_result", "is_error": 1}),
            ("unknown_type", {"type": "nope"}),
        ],
    ),
    (
        "TurnRecord",
        TURN,
        TurnRecord("c", "a", "e", turn_id="t"),
        TurnRecord.from_dict,
        [
            ("minimal", {"channel_id": "c", "agent_id": "a", "turn_id": "t"}),
            (
                "str",
                {"channel_id": "c", "agent_id": "a", "turn_id": "t", "duration_ms": "2", "model_calls": "3"},
            ),
            ("missing", {"channel_id": "c"}),
        ],
    ),
    ("Transition", GRAPH.transitions[0], Transition(Always(), TerminateTarget()), None, []),
    ("TransitionGraph", GRAPH, TransitionGraph("a"), TransitionGraph.loads, []),
]

UNKNOWN_KEY = "zz_not_a_field"


SHORT = {str: "s", int: "i", float: "f", bool: "b", type(None): "n"}


def types_of(value: Any) -> str:
    """The exact Python type of every node of a dict tree, in order: ``{s:s,s:[i,f]}``; other types by name."""
    if type(value) is dict:
        return "{" + ",".join(f"{types_of(k)}:{types_of(v)}" for k, v in value.items()) + "}"
    if type(value) is list:
        return "[" + ",".join(types_of(v) for v in value) + "]"
    return SHORT.get(type(value)) or f"<{type(value).__module__}.{type(value).__qualname__}>"


def encoded(data: Any) -> dict[str, Any]:
    return {"json": json.dumps(data), "types": types_of(data)}


def decoded(from_dict: Callable[[Any], Any], data: Any) -> Any:
    try:
        obj = from_dict(json.loads(json.dumps(data)))
    except Exception as exc:  # the exact refusal is part of the recorded behaviour
        return {"error": f"{type(exc).__name__}: {exc}"}
    return encoded(obj.to_dict())


def observe(case: tuple[str, Any, Any, Callable[[Any], Any] | None, list[Probe]]) -> dict[str, Any]:
    """Everything recorded about one class."""
    _name, full, empty, from_dict, probes = case
    out: dict[str, Any] = {"full": encoded(full.to_dict())}
    if empty is not None:
        out["empty"] = encoded(empty.to_dict())
    if isinstance(full, Passport):
        out["full_public"] = encoded(full.to_dict(include_claim=False))
        out["full_public_dict"] = encoded(full.public_dict())
    if from_dict is not None:
        out["decode_full"] = decoded(from_dict, full.to_dict())
        if empty is not None:
            out["decode_empty"] = decoded(from_dict, empty.to_dict())
        out["decode_unknown"] = decoded(from_dict, {**full.to_dict(), UNKNOWN_KEY: 1})
        out["decode_not_object"] = decoded(from_dict, ["not", "an", "object"])
        for label, data in probes:
            out[f"probe_{label}"] = decoded(from_dict, data)
    return out


def recorded() -> dict[str, Any]:
    return json.loads(DATA.read_text(encoding="utf-8"))


def test_every_case_is_recorded() -> None:
    assert sorted(recorded()) == sorted(name for name, *_ in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_dict_forms_match_the_recording(case: Any) -> None:
    expected = recorded()[case[0]]
    actual = observe(case)
    assert sorted(actual) == sorted(expected)
    for key in expected:
        assert actual[key] == expected[key], f"{case[0]} {key}"


@pytest.mark.parametrize("case", [c for c in CASES if c[3] is not None], ids=[c[0] for c in CASES if c[3]])
def test_round_trip_and_fresh_containers(case: Any) -> None:
    name, full, empty, from_dict, _probes = case
    for obj in (full, empty):
        if obj is None:
            continue
        data = obj.to_dict()
        again = from_dict(json.loads(json.dumps(data)))
        if name == "TransitionGraph":
            assert again.to_dict() == data
        else:
            assert again == obj
        before = json.dumps(obj.to_dict())
        for key, value in data.items():
            if key not in SHARED_OK.get(name, ()):
                _scribble(value)
        assert json.dumps(obj.to_dict()) == before, f"{name}.to_dict() shares a container with the record"


# Fields the hand-written methods handed out uncopied (or copied one level deep): ObservedEvent's payload
# and envelope (Envelope.to_dict shares event_data), TurnRecord's dicts, the events' ``data`` and
# TaskMetadata's payload/progress/result. Scribbling on them is not checked.
SHARED_OK = {
    "ObservedEvent": {"payload", "envelope"},
    "TurnRecord": {"tools", "view", "tool_calls", "tokens", "timings", "history", "inputs"},
    "TaskMetadata": {"result", "progress", "spec"},
    "TaskSpec": {"payload"},
    "DataInput": {"data"},
    "ModelRequest": {"parts"},
    "TransitionGraph": {"transitions"},  # ContextEquals.args() hands out its value
}


def _scribble(value: Any) -> None:
    """Mutate every container in ``value``."""
    if isinstance(value, dict):
        for item in list(value.values()):
            _scribble(item)
        value["zz_scribble"] = 1
    elif isinstance(value, list):
        for item in value:
            _scribble(item)
        value.append("zz_scribble")


def write() -> None:
    DATA.write_text(json.dumps({c[0]: observe(c) for c in CASES}, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print("usage: python tests/test_record_golden.py --write  (only to record a deliberate change)")

"""GenAI spans from turn records (``ag2net.traces.genai``): the content attributes follow the conventions'
published JSON schemas (``tests/data/genai_schemas.json``), ``gen_ai.input.messages`` is the projected view
exactly as each model call received it, no content without opting in; and the hub's live tracer with the real
OpenTelemetry SDK (in-memory exporter) on a real hub with ScriptedModel agents."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import until

from ag2net import Agent, Hub, HubClient, MemoryStore, Passport, ScriptedModel, tool, tool_call
from ag2net.adapters import AgentTarget, FromSpeaker, Handoff, Transition, TransitionGraph
from ag2net.traces.genai import (
    TraceOptions,
    input_messages,
    system_instructions,
    tool_definitions,
    turn_spans,
)

SCHEMAS = json.loads((Path(__file__).parent / "data" / "genai_schemas.json").read_text(encoding="utf-8"))
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
)
SECRET_WORD = "marmalade-7731"  # in a prompt, a message, a tool argument and result: content to keep out


# ----------------------------------------------------------------------------------------- a schema check


def _resolve(schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if ref is None:
        return schema
    return SCHEMAS["$defs"][ref.rsplit("/", 1)[-1]]


_TYPES = {
    "object": dict,
    "array": list,
    "string": str,
    "null": type(None),
}


def problems(value: Any, schema: dict[str, Any], where: str = "$") -> list[str]:
    """What makes ``value`` fail ``schema`` (the keywords ``tests/data/genai_schemas.json`` uses)."""
    schema = _resolve(schema)
    if "anyOf" in schema:
        options = [problems(value, option, where) for option in schema["anyOf"]]
        if all(options):
            return [f"{where}: matches none of anyOf ({'; '.join(o[0] for o in options)})"]
        return []
    found: list[str] = []
    kind = schema.get("type")
    if kind is not None and not isinstance(value, _TYPES[kind]):
        return [f"{where}: is {type(value).__name__}, not {kind}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: is {value!r}, not {schema['const']!r}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    if isinstance(value, dict):
        found += [f"{where}: lacks {key!r}" for key in schema.get("required", []) if key not in value]
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                found += problems(value[key], sub, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for n, item in enumerate(value):
            found += problems(item, schema["items"], f"{where}[{n}]")
    return found


_PART_DEFS = {
    "text": "TextPart",
    "tool_call": "ToolCallRequestPart",
    "tool_call_response": "ToolCallResponsePart",
}


def check_attribute(key: str, text: str) -> None:
    """``text`` (a span attribute's JSON) is valid for the conventions' schema of ``key``; a part whose type
    the conventions define must also satisfy that part's own schema (not only ``GenericPart``)."""
    value = json.loads(text)
    assert problems(value, SCHEMAS[key]) == [], (key, problems(value, SCHEMAS[key]))
    messages = value if key != "gen_ai.system_instructions" else [{"parts": value}]
    for message in messages if key != "gen_ai.tool.definitions" else []:
        for part in message.get("parts", []):
            name = _PART_DEFS.get(part.get("type"))
            if name is not None:
                assert problems(part, SCHEMAS["$defs"][name]) == [], (key, part)


def test_the_schema_check_can_fail():
    bad = [
        ("gen_ai.input.messages", [{"role": "user"}]),  # no parts
        ("gen_ai.input.messages", [{"role": "user", "parts": [{"content": "x"}]}]),  # a part without type
        ("gen_ai.output.messages", [{"role": "assistant", "parts": []}]),  # no finish_reason
        ("gen_ai.tool.definitions", [{"type": "function", "name": "x"}]),  # no description
        ("gen_ai.system_instructions", "You are helpful."),  # not a list of parts
    ]
    for key, value in bad:
        assert problems(value, SCHEMAS[key]), (key, value)
    with pytest.raises(AssertionError):
        check_attribute("gen_ai.input.messages", json.dumps([{"role": "user", "parts": [{"type": "text"}]}]))


# ----------------------------------------------------------------------------------------- a network


@tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: the term
    """
    return f"{term}: found in the {SECRET_WORD} index"


@tool
def broken(term: str) -> str:
    """A tool that always fails.

    Args:
        term: the term
    """
    raise ValueError(f"no {term}")


def _handoff(target: str) -> Any:
    @tool(name=f"hand_to_{target}")  # pyright: ignore[reportCallIssue]
    def hand(reason: str) -> Handoff:
        """Pass the work on.

        Args:
            reason: why
        """
        return Handoff(target=target, reason=reason)

    return hand


async def build_network(hub: Hub) -> dict[str, Any]:
    """A conversation (alice → bob: two questions, bob answers with a tool round each, one tool failing) and a
    workflow (user → drafter → reviewer). Returns the clients and the channel ids."""
    hc = HubClient.local(hub)
    bob = await hc.register(
        Agent(
            "bob",
            ScriptedModel(
                tool_call("lookup", term=SECRET_WORD),
                "It is found.",
                tool_call("broken", term="otel"),
                "Nothing more.",
            ),
            system_prompt=f"You are helpful. The password is {SECRET_WORD}.",
            tools=[lookup, broken],
        )
    )
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    conv = await alice.open(type="conversation", target="bob")
    await alice.send(conv.channel_id, f"what is {SECRET_WORD}?")
    await until(lambda: len(bob.agent.model.calls) == 2)
    await bob.idle()
    await alice.send(conv.channel_id, "and otel?")
    await until(lambda: len(bob.agent.model.calls) == 4)
    await bob.idle()

    drafter = await hc.register(
        Agent(
            "drafter",
            ScriptedModel(tool_call("hand_to_reviewer", reason="draft ready"), "Draft v1."),
            tools=[_handoff("reviewer")],
        )
    )
    reviewer = await hc.register(Agent("reviewer", ScriptedModel("Looks good.")))
    user = await hc.register_human(Passport(name="user", kind="human"))
    graph = TransitionGraph(
        initial_speaker=user.agent_id,
        transitions=[Transition(FromSpeaker(user.agent_id), AgentTarget(drafter.agent_id))],
    )
    flow = await user.open(type="workflow", target=["drafter", "reviewer"], knobs={"graph": graph.to_dict()})
    await user.send(flow.channel_id, "Write the intro.")
    await until(lambda: hub.lookup_channel(flow.channel_id).is_terminal())
    await drafter.idle()
    await reviewer.idle()
    return {
        "hc": hc,
        "agents": {"bob": bob, "drafter": drafter, "reviewer": reviewer},
        "conversation": conv.channel_id,
        "workflow": flow.channel_id,
    }


async def records_of(hub: Hub, channel_id: str) -> list[dict[str, Any]]:
    hc = HubClient.local(hub)
    try:
        turns = await hc.list_turns(channel_id=channel_id, limit=100)
    finally:
        await hc.close()
    return [t.to_dict() for t in sorted(turns, key=lambda t: t.started_at)]


@pytest.fixture
async def network():
    hub = await Hub.open(
        MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    try:
        net = await build_network(hub)
        net["hub"] = hub
        yield net
        await net["hc"].close()
    finally:
        await hub.close()


def spans_by_name(specs: list[Any], prefix: str) -> list[Any]:
    return [s for s in specs if s.name.startswith(prefix)]


# ----------------------------------------------------------------------------------------- the mapping


async def test_content_attributes_follow_the_published_schemas(network):
    hub = network["hub"]
    checked = 0
    for channel in ("conversation", "workflow"):
        for record in await records_of(hub, network[channel]):
            specs = turn_spans(record, agent_name="x", options=TraceOptions(capture_content=True))
            for span in spans_by_name(specs, "chat"):
                for key in CONTENT_KEYS:
                    if key in span.attributes:
                        check_attribute(key, span.attributes[key])
                        checked += 1
    assert checked >= 4 * 4  # bob's four calls carry all four; the workflow's calls some


async def test_input_messages_are_the_projected_view_exactly_as_each_call_received_it(network):
    """Every model call the agents' ScriptedModels received, in order, against the chat span rebuilt from the
    stored turn record: the same messages, system prompt and tools, byte for byte."""
    hub = network["hub"]
    for channel, names in (("conversation", ["bob"]), ("workflow", ["drafter", "reviewer"])):
        records = await records_of(hub, network[channel])
        chats = []
        for record in records:
            specs = turn_spans(record, agent_name="x", options=TraceOptions(capture_content=True))
            chats += spans_by_name(specs, "chat")
        calls = [c for n in names for c in network["agents"][n].agent.model.calls]
        assert len(chats) == len(calls) == sum(r["model_calls"] for r in records)
        by_request = {}
        for record in records:
            for n, rnd in enumerate(record["rounds"]):
                by_request[rnd["request"]] = (record["turn_id"], n)
        for call in calls:
            turn_id, n = by_request[call.digest()]  # each call is a recorded round
            (chat,) = [c for c in chats if c.key == f"chat:{turn_id}:{n}"]
            assert json.loads(chat.attributes["gen_ai.input.messages"]) == input_messages(call.history)
            if call.system:
                assert json.loads(chat.attributes["gen_ai.system_instructions"]) == system_instructions(
                    call.system
                )
            assert json.loads(chat.attributes["gen_ai.tool.definitions"]) == tool_definitions(call.tools)
            assert chat.attributes["ag2net.chat.tools_offered"] == call.tool_names


async def test_a_turns_spans_invoke_agent_chat_per_call_and_execute_tool_per_call(network):
    hub = network["hub"]
    first, second = await records_of(hub, network["conversation"])
    specs = turn_spans(first, agent_name="bob", options=TraceOptions(capture_content=True))
    assert [s.name for s in specs] == [
        "network.turn bob",
        "invoke_agent bob",
        "chat",
        "execute_tool lookup",
        "chat",
    ]
    turn, agent, chat0, tool0, chat1 = specs
    assert agent.parent == turn.key and {chat0.parent, tool0.parent, chat1.parent} == {agent.key}
    assert agent.attributes["gen_ai.agent.id"] == first["agent_id"]
    assert agent.attributes["gen_ai.agent.name"] == "bob"
    assert agent.attributes["gen_ai.conversation.id"] == network["conversation"]
    assert agent.attributes["ag2.span.type"] == "agent" and chat0.attributes["ag2.span.type"] == "llm"
    assert tool0.attributes["ag2.span.type"] == "tool"
    assert chat0.attributes["gen_ai.response.finish_reasons"] == ["tool_call"]
    assert chat1.attributes["gen_ai.response.finish_reasons"] == ["stop"]
    assert chat0.attributes["gen_ai.response.id"] != chat1.attributes["gen_ai.response.id"]
    (call,) = first["tool_calls"]
    assert tool0.attributes["gen_ai.tool.name"] == "lookup"
    assert tool0.attributes["gen_ai.tool.call.id"] == call["id"]
    assert json.loads(tool0.attributes["gen_ai.tool.call.arguments"]) == {"term": SECRET_WORD}
    assert tool0.attributes["gen_ai.tool.call.result"] == call["result"]
    output = json.loads(chat1.attributes["gen_ai.output.messages"])
    assert output == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "It is found."}],
            "finish_reason": "stop",
            "content": "It is found.",
        }
    ]
    for chat in (chat0, chat1):
        assert chat.attributes["gen_ai.usage.input_tokens"] > 0
        assert chat.attributes["gen_ai.usage.output_tokens"] > 0
        assert chat.attributes["ag2net.usage.method"] == first["token_method"]
    # the failing tool of the second turn: ERROR, its message only with content
    failing = spans_by_name(turn_spans(second, agent_name="bob", options=TraceOptions()), "execute_tool")
    assert [s.error for s in failing] == ["the tool reported an error"]
    shown = spans_by_name(
        turn_spans(second, agent_name="bob", options=TraceOptions(capture_content=True)), "execute_tool"
    )
    assert "no otel" in (shown[0].error or "")
    # spans lie inside their turn, in order
    assert turn.start_ns <= chat0.start_ns <= tool0.start_ns <= chat1.start_ns <= chat1.end_ns <= turn.end_ns


async def test_no_content_without_opting_in(network, monkeypatch):
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    hub = network["hub"]
    for record in await records_of(hub, network["conversation"]):
        for span in turn_spans(record, agent_name="bob", options=TraceOptions.from_env()):
            assert not set(span.attributes) & {
                *CONTENT_KEYS,
                "gen_ai.tool.call.arguments",
                "gen_ai.tool.call.result",
            }
            assert SECRET_WORD not in json.dumps(span.attributes, default=str), span.name
            assert SECRET_WORD not in json.dumps(span.events) and SECRET_WORD not in str(span.error)


def test_the_environment_decides_capture_and_the_names_written():
    assert TraceOptions.from_env(environ={}) == TraceOptions(capture_content=False, latest=False)
    env = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    assert TraceOptions.from_env(environ=env).capture_content
    assert TraceOptions.from_env(
        environ={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}
    ).capture_content
    assert not TraceOptions.from_env(
        environ={"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"}
    ).capture_content
    assert not TraceOptions.from_env(False, environ=env).capture_content  # the argument wins
    both = {"OTEL_SEMCONV_STABILITY_OPT_IN": "http, gen_ai_latest_experimental"}
    assert TraceOptions.from_env(environ=both).latest
    record = {
        "turn_id": "t1",
        "channel_id": "c1",
        "agent_id": "a1",
        "trigger_envelope_id": "e1",
        "started_at": "2026-03-01T12:00:00.000000Z",
        "duration_ms": 10.0,
        "model_calls": 1,
        "rounds": [
            {
                "request": "r",
                "tool_calls": [],
                "content": "hi",
                "usage": {"prompt_tokens": 12, "completion_tokens": 3, "cached_tokens": 8},
            }
        ],
        "reply": "hi",
        "model_params": {"model": "gpt-4o-mini", "temperature": 0.2},
    }
    old = spans_by_name(turn_spans(record, agent_name="a", options=TraceOptions()), "chat")[0]
    new = spans_by_name(turn_spans(record, agent_name="a", options=TraceOptions(latest=True)), "chat")[0]
    assert old.name == new.name == "chat gpt-4o-mini"
    assert old.attributes["gen_ai.system"] == "openai" and "gen_ai.system" not in new.attributes
    for span in (old, new):
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert (
            span.attributes["gen_ai.request.model"]
            == span.attributes["gen_ai.response.model"]
            == "gpt-4o-mini"
        )
        assert span.attributes["gen_ai.request.temperature"] == 0.2
        assert span.attributes["gen_ai.usage.input_tokens"] == 12
        assert span.attributes["gen_ai.usage.output_tokens"] == 3
        assert span.attributes["gen_ai.usage.cache_read.input_tokens"] == 8
        assert span.attributes["gen_ai.usage.cache_read_input_tokens"] == 8  # AG2's spelling
        assert span.attributes["ag2net.usage.method"] == "provider"


async def test_a_channels_trace_links_causes_and_tasks_to_the_channel(network):
    """``channel_spans`` on the hub's own records: protocol envelopes become events of the root, every
    substantive envelope a span linked to the one it answers, and an ended task of the channel a
    ``network.task`` span linked ``in_channel``."""
    from ag2net.tasks import TaskMetadata, TaskSpec, TaskState
    from ag2net.traces.otlp import channel_spans

    hub = network["hub"]
    cid = network["conversation"]
    md = hub.lookup_channel(cid).to_dict()
    envelopes = [e.to_dict() for e in await hub.read_wal(cid)]
    task = TaskMetadata(
        "t-1",
        md["creator_id"],
        TaskSpec("look it up", capability="research"),
        TaskState.FAILED,
        created_at="2026-03-01T12:00:00.000000Z",
        completed_at="2026-03-01T12:00:02.000000Z",
        error="gave up",
        channel_id=cid,
    ).to_dict()
    specs = channel_spans(
        md,
        envelopes,
        await records_of(hub, cid),
        name_for=lambda a: hub.name_for(a, default=a),
        options=TraceOptions(),
        tasks=[task],
    )
    root = specs[0]
    assert root.name == "network.channel conversation" and root.parent is None
    assert {name for name, _, _ in root.events} >= {"ag2.channel.invite", "ag2.channel.opened"}
    texts = [s for s in specs if s.name.startswith("network.envelope")]
    assert len(texts) == sum(1 for e in envelopes if e["event_type"] == "ag2.msg.text")
    answers = [s for s in texts if s.links]
    assert answers and all(link[1] == {"ag2.link.kind": "triggered_by"} for s in answers for link in s.links)
    keys = {s.key for s in specs}
    assert all(link[0] in keys for s in specs for link in s.links)
    turns = [s for s in specs if s.name.startswith("network.turn")]
    assert turns and all(t.parent in {s.key for s in texts} for t in turns)
    (span,) = [s for s in specs if s.name.startswith("network.task")]
    assert span.name == "network.task research" and span.error == "gave up"
    assert span.links == [(root.key, {"ag2.link.kind": "in_channel"})]
    assert span.end_ns - span.start_ns == 2_000_000_000
    assert root.end_ns >= max(s.end_ns for s in specs)

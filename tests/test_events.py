"""Events a view projects and a turn produces: construction as the seed writes it, and round trips."""

from __future__ import annotations

import json

import pytest

from ag2net.events import (
    BaseEvent,
    CompactionSummary,
    DataInput,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
    event_from_dict,
    event_text,
    part_from_dict,
    part_text,
)

SAMPLES: list[BaseEvent] = [
    ModelRequest([TextInput("hello")]),
    ModelRequest([TextInput("[alice]:", {"speaker": "alice"}), DataInput({"k": [1, 2]})]),
    ModelRequest([]),
    ModelMessage("I said this"),
    ModelMessage("with meta", {"envelope_id": "e1"}),
    CompactionSummary("Earlier in this channel: 3 messages from A, B, C.", 3),
    ToolCallEvent("peers", '{"action": "find"}', "call-1"),
    ToolResultEvent("call-1", "peers", "[]"),
    ToolResultEvent("call-2", "say", "Error: no current channel", is_error=True),
]


def test_seed_style_positional_construction() -> None:
    text = "hi"
    assert ModelMessage(text).content == "hi"
    request = ModelRequest([TextInput(text)])
    assert request.parts == [TextInput("hi")]
    assert isinstance(request, BaseEvent) and isinstance(ModelMessage(text), BaseEvent)
    assert isinstance(CompactionSummary("s", 1), BaseEvent)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip_through_json(event: BaseEvent) -> None:
    data = json.loads(json.dumps(event.to_dict()))
    assert data["type"] == type(event).type
    again = event_from_dict(data)
    assert again == event and type(again) is type(event)
    assert BaseEvent.from_dict(data) == event
    assert again.to_dict() == event.to_dict()


def test_type_tags_are_distinct() -> None:
    tags = [
        cls.type for cls in (ModelRequest, ModelMessage, CompactionSummary, ToolCallEvent, ToolResultEvent)
    ]
    assert tags == ["model_request", "model_message", "compaction_summary", "tool_call", "tool_result"]


def test_to_dict_copies_metadata() -> None:
    msg = ModelMessage("x", {"a": 1})
    msg.to_dict()["metadata"]["a"] = 2
    assert msg.metadata == {"a": 1}


def test_tool_call_ids_are_unique_by_default_and_arguments_parse() -> None:
    a, b = ToolCallEvent("say"), ToolCallEvent("say")
    assert a.id != b.id and a.arguments == "{}"
    assert ToolCallEvent("say", '{"content": "hi"}').parsed_arguments() == {"content": "hi"}
    assert ToolCallEvent("say", "not json").parsed_arguments() == {}
    assert ToolCallEvent("say", "[1, 2]").parsed_arguments() == {}
    assert ToolCallEvent("say", "").parsed_arguments() == {}


def test_tool_result_value_is_not_serialised_or_compared() -> None:
    result = ToolResultEvent("c", "peers", "[]", value=[{"name": "bob"}])
    assert "value" not in result.to_dict()
    assert result == ToolResultEvent("c", "peers", "[]")
    assert event_from_dict(result.to_dict()).value is None  # type: ignore[attr-defined]


def test_event_text() -> None:
    assert event_text(ModelRequest([TextInput("a"), TextInput("b")])) == "a\nb"
    assert event_text(ModelRequest([DataInput({"b": 1, "a": 2})])) == '{"a": 2, "b": 1}'
    assert event_text(ModelMessage("m")) == "m"
    assert event_text(CompactionSummary("s", 2)) == "s"
    assert event_text(ToolCallEvent("say", '{"content": "x"}', "i")) == 'say({"content": "x"})'
    assert event_text(ToolResultEvent("i", "say", "posted envelope e")) == "posted envelope e"


def test_parts() -> None:
    assert part_text(TextInput("t")) == "t"
    assert part_text(DataInput([1, "x"])) == '[1, "x"]'
    assert part_from_dict(TextInput("t", {"m": 1}).to_dict()) == TextInput("t", {"m": 1})
    assert part_from_dict(DataInput({"d": None}).to_dict()) == DataInput({"d": None})


def test_unknown_event_type_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError) as info:
        event_from_dict({"type": "model_response"})
    message = str(info.value)
    assert message.startswith("unknown event type 'model_response'; expected one of ")
    assert "model_request" in message and "tool_result" in message

"""The events a view returns and a turn produces: what an LLM receives as history, and what it did.

Each event is a ``Record`` whose ``to_dict`` is tagged with ``"type"`` (so turn records can be stored);
``event_from_dict`` (``BaseEvent.from_dict``) reads the tag back and rebuilds the event.
"""

from __future__ import annotations

import json
import uuid
from abc import ABC
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ag2net.record import Record, wire


class BaseEvent(Record, ABC):
    """Base of every event; subclasses are dataclasses with a ``type`` tag, written first by ``to_dict``."""

    type: ClassVar[str] = "event"
    _wire_tag = "type"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BaseEvent:
        """The event ``data["type"]`` names (whichever class this is called on)."""
        return event_from_dict(data)


class _InputPart(Record):
    """A part of a model request: read leniently and tagged by its ``type``."""

    __slots__ = ()

    _wire_strict = False
    _wire_tag = "type"


@dataclass(slots=True)
class TextInput(_InputPart):
    """A text part of a model request."""

    content: str
    metadata: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "text_input"


@dataclass(slots=True)
class DataInput(_InputPart):
    """A structured (non-text) part of a model request."""

    data: Any
    metadata: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "data_input"


Input = TextInput | DataInput


def part_from_dict(data: dict[str, Any]) -> Input:
    if data.get("type") == "data_input":
        return DataInput(data.get("data"), dict(data.get("metadata") or {}))
    return TextInput(str(data.get("content", "")), dict(data.get("metadata") or {}))


def part_text(part: Input) -> str:
    """The text a part contributes to a prompt (data parts as compact JSON)."""
    if isinstance(part, TextInput):
        return part.content
    return json.dumps(part.data, sort_keys=True, default=str)


@dataclass(slots=True)
class ModelRequest(BaseEvent):
    """Input from the "user" side: one or more parts."""

    parts: list[Input]

    type: ClassVar[str] = "model_request"

    @property
    def text(self) -> str:
        return "\n".join(part_text(p) for p in self.parts)


@dataclass(slots=True)
class ModelMessage(BaseEvent):
    """Assistant text: what this agent said."""

    content: str
    metadata: dict[str, Any] = field(default_factory=dict)

    type: ClassVar[str] = "model_message"


@dataclass(slots=True)
class CompactionSummary(BaseEvent):
    """Stands in for envelopes a windowed view elided."""

    summary: str
    event_count: int

    type: ClassVar[str] = "compaction_summary"


@dataclass(slots=True)
class ToolCallEvent(BaseEvent):
    """The model asked for a tool; ``arguments`` is the JSON text it produced."""

    name: str
    arguments: str = "{}"
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    type: ClassVar[str] = "tool_call"

    def parsed_arguments(self) -> dict[str, Any]:
        try:
            value = json.loads(self.arguments or "{}")
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(slots=True)
class ToolResultEvent(BaseEvent):
    """What a tool returned (as text for the model) for the call ``parent_id``."""

    parent_id: str
    name: str
    result: str
    is_error: bool = False
    value: Any = field(default=None, compare=False, repr=False, metadata=wire(omit=True))

    type: ClassVar[str] = "tool_result"


_EVENTS: dict[str, type] = {
    cls.type: cls for cls in (ModelRequest, ModelMessage, CompactionSummary, ToolCallEvent, ToolResultEvent)
}


def event_from_dict(data: dict[str, Any]) -> BaseEvent:
    """Rebuild an event from its ``to_dict`` form."""
    kind = data.get("type")
    if kind == ModelRequest.type:
        return ModelRequest([part_from_dict(p) for p in data.get("parts", [])])
    if kind == ModelMessage.type:
        return ModelMessage(data.get("content", ""), dict(data.get("metadata") or {}))
    if kind == CompactionSummary.type:
        return CompactionSummary(data.get("summary", ""), int(data.get("event_count", 0)))
    if kind == ToolCallEvent.type:
        return ToolCallEvent(data["name"], data.get("arguments", "{}"), data.get("id") or uuid.uuid4().hex)
    if kind == ToolResultEvent.type:
        return ToolResultEvent(
            data.get("parent_id", ""),
            data.get("name", ""),
            data.get("result", ""),
            bool(data.get("is_error")),
        )
    raise ValueError(f"unknown event type {kind!r}; expected one of {sorted(_EVENTS)}")


def event_text(event: BaseEvent) -> str:
    """A one-string rendering of an event, for token estimates and side-by-side diffs."""
    if isinstance(event, ModelRequest):
        return event.text
    if isinstance(event, ModelMessage):
        return event.content
    if isinstance(event, CompactionSummary):
        return event.summary
    if isinstance(event, ToolCallEvent):
        return f"{event.name}({event.arguments})"
    if isinstance(event, ToolResultEvent):
        return event.result
    return str(event)


__all__ = [
    "BaseEvent",
    "CompactionSummary",
    "DataInput",
    "Input",
    "ModelMessage",
    "ModelRequest",
    "TextInput",
    "ToolCallEvent",
    "ToolResultEvent",
    "event_from_dict",
    "event_text",
    "part_from_dict",
    "part_text",
]

"""What the agent view compares, without a widget: an event's role and text as the model gets it, a
per-event diff of two histories, the tools of two turns by name, and the labels of views and turns.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ag2net.client.turns import TurnRecord
from ag2net.events import (
    BaseEvent,
    CompactionSummary,
    ModelMessage,
    ModelRequest,
    ToolCallEvent,
    ToolResultEvent,
    event_text,
    part_text,
)


def role_of(event: BaseEvent) -> str:
    """The chat role an event plays for the model."""
    if isinstance(event, ModelRequest):
        return "user"
    if isinstance(event, ModelMessage):
        return "assistant"
    if isinstance(event, CompactionSummary):
        return "summary"
    if isinstance(event, ToolCallEvent):
        return "tool call"
    if isinstance(event, ToolResultEvent):
        return "tool result"
    return type(event).__name__


def spec_text(spec: dict[str, Any] | None) -> str:
    if not spec:
        return "—"
    params = " ".join(f"{k}={v}" for k, v in spec.items() if k != "name")
    return f"{spec.get('name', '?')}{(' ' + params) if params else ''}"


def event_body(event: BaseEvent, limit: int = 4000) -> str:
    """The text of an event as the model gets it (a compaction summary with its elided count)."""
    if isinstance(event, ModelRequest):
        body = "\n".join(part_text(p) for p in event.parts)
    elif isinstance(event, CompactionSummary):
        body = f"{event.summary}  ({event.event_count} elided)"
    else:
        body = event_text(event)
    if len(body) > limit:
        body = body[:limit] + f"… ({len(body) - limit} more characters)"
    return body


@dataclass(slots=True)
class DiffRow:
    """One line of the turn diff: ``mark`` is ' ' (same), '~' (changed), '-' (only then) or '+' (only now)."""

    mark: str
    then: BaseEvent | None
    now: BaseEvent | None


def diff_events(then: Sequence[BaseEvent], now: Sequence[BaseEvent]) -> list[DiffRow]:
    """A per-event diff of two histories (role and text compared)."""
    left = [f"{role_of(e)}\x00{event_text(e)}" for e in then]
    right = [f"{role_of(e)}\x00{event_text(e)}" for e in now]
    rows: list[DiffRow] = []
    matcher = difflib.SequenceMatcher(a=left, b=right, autojunk=False)
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            rows.extend(
                DiffRow(" ", then[i], now[j]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)
            )
        elif op == "delete":
            rows.extend(DiffRow("-", then[i], None) for i in range(i1, i2))
        elif op == "insert":
            rows.extend(DiffRow("+", None, now[j]) for j in range(j1, j2))
        else:
            pairs = min(i2 - i1, j2 - j1)
            rows.extend(DiffRow("~", then[i1 + k], now[j1 + k]) for k in range(pairs))
            rows.extend(DiffRow("-", then[i], None) for i in range(i1 + pairs, i2))
            rows.extend(DiffRow("+", None, now[j]) for j in range(j1 + pairs, j2))
    return rows


def tool_name(schema: dict[str, Any]) -> str:
    fn = schema.get("function", schema)
    return str(fn.get("name", "?")) if isinstance(fn, dict) else "?"


def schema_lines(schema: dict[str, Any]) -> list[str]:
    """A tool schema as indented JSON lines with sorted keys (what a diff compares)."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False, default=str).splitlines()


@dataclass(slots=True)
class ToolDiff:
    """One tool in a comparison: ``mark`` ' ' (same), '~' (schema changed), '-' (only then), '+' (only now);
    ``lines`` is the unified diff of the schemas for a changed tool."""

    mark: str
    name: str
    lines: list[str] = field(default_factory=list)


def diff_tools(then: Sequence[dict[str, Any]], now: Sequence[dict[str, Any]]) -> list[ToolDiff]:
    """The tools offered at two turns, by name: in the order of ``now``, then those only ``then`` had."""
    before = {tool_name(t): t for t in then}
    after = {tool_name(t): t for t in now}
    diffs: list[ToolDiff] = []
    for name, schema in after.items():
        old = before.get(name)
        if old is None:
            diffs.append(ToolDiff("+", name))
        elif old == schema:
            diffs.append(ToolDiff(" ", name))
        else:
            lines = list(difflib.unified_diff(schema_lines(old), schema_lines(schema), lineterm="", n=1))[2:]
            diffs.append(ToolDiff("~", name, lines))
    diffs.extend(ToolDiff("-", name) for name in before if name not in after)
    return diffs


def turn_label(turn: TurnRecord, number: int) -> str:
    """``#3 09:30:01`` — a turn's number (1 = the first recorded) and its start time."""
    started = turn.started_at[11:19] if len(turn.started_at) >= 19 else turn.started_at
    return f"#{number} {started}".rstrip()


__all__ = [
    "DiffRow",
    "ToolDiff",
    "diff_events",
    "diff_tools",
    "event_body",
    "role_of",
    "schema_lines",
    "spec_text",
    "tool_name",
    "turn_label",
]

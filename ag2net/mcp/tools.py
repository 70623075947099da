"""The tools of ``ag2net mcp``: their fixed order, JSON schemas, one-line descriptions, argument checks and
paging cursors. No ``mcp`` import: ``ag2net.mcp.server`` turns these into the SDK's types.

The order never changes between calls or runs (it keeps a model's prompt cache warm); ``post`` is listed
only when the server was started with ``--allow-post``. Every answer is small: a page of at most
``limit`` items, texts clipped to ``max_chars``, and ``next_cursor`` to ask for the next page (pass it back
with the same arguments). A bad argument is refused in one sentence naming the fix.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ag2net.mcp.network import Network, Refusal

Handler = Callable[[Network, dict[str, Any]], Awaitable[dict[str, Any]]]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    name: str
    description: str
    properties: dict[str, dict[str, Any]]
    required: tuple[str, ...] = ()
    read_only: bool = True

    @property
    def input_schema(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": self.properties,
            "required": list(self.required),
            "additionalProperties": False,
        }


# ----------------------------------------------------------------------------------------- schemas


def _s(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _i(description: str, default: int | None, low: int, high: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "integer", "description": description, "minimum": low, "maximum": high}
    if default is not None:
        schema["default"] = default
    return schema


CHANNEL = _s(
    "The channel: its label from list_channels (conversation·ae2a), a type with one channel, or an id."
)
CURSOR = _s("next_cursor of the previous page, with the same other arguments.")
PARTICIPANT = _s("A participant's name (critic) or id.")
MAX_CHARS = _i("Clip every text to this many characters.", 400, 20, 20000)
VIEW = _s(
    "A view name (full_transcript, windowed_summary, named_windowed_summary, …) to project with instead."
)
VIEW_PARAMS = {"type": "object", "description": 'The view\'s parameters, e.g. {"recent_n": 2}.'}
NAME_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "list_channels",
        "List the channels (label, type, state, participants, WAL length), filtered as the channel list is.",
        {
            "type": _s("Only channels of this type (conversation, discussion, consulting, workflow, …)."),
            "state": _s("Only channels in this state (open, closed, …)."),
            "participant": _s("Only channels this agent (name or id) takes part in."),
            "query": _s(
                "The channel list's filter: words its type, state, id, participants or close reason all contain."
            ),
            "limit": _i("Channels per page.", 20, 1, 100),
            "cursor": CURSOR,
        },
    ),
    ToolSpec(
        "read_wal",
        "Read a page of one channel's WAL from a seq, optionally filtered with the workbench tail's filter language.",
        {
            "channel": CHANNEL,
            "from_seq": _i("First seq to read (1 is the first envelope).", 1, 1, 10**12),
            "limit": _i("Envelopes per page.", 20, 1, 100),
            "filter": _s(
                "Tail filter, e.g. 'sender:critic type:ag2.msg.text', 'text:offline', 'seq:5-9', '-to:all'."
            ),
            "max_chars": MAX_CHARS,
            "cursor": CURSOR,
        },
        ("channel",),
    ),
    ToolSpec(
        "envelope",
        "One envelope in full, with who could see it (delivered, why not, what each model got) and its causation links.",
        {
            "channel": CHANNEL,
            "seq": _i("The envelope's seq (or give envelope_id).", None, 1, 10**12),
            "envelope_id": _s("The envelope's id (or give seq)."),
            "max_chars": MAX_CHARS,
        },
        ("channel",),
    ),
    ToolSpec(
        "projection",
        "What a participant's model got (at a seq) or would get now: its projected history, under its view or another.",
        {
            "channel": CHANNEL,
            "participant": PARTICIPANT,
            "at_seq": _i(
                "Project the WAL up to this seq (default: all of it, the next turn).", None, 0, 10**12
            ),
            "view": VIEW,
            "params": VIEW_PARAMS,
            "limit": _i("Events per page.", 30, 1, 200),
            "max_chars": MAX_CHARS,
            "cursor": CURSOR,
        },
        ("channel", "participant"),
    ),
    ToolSpec(
        "turns",
        "A participant's turn records on a channel: request as sent (system, history, inputs), tools offered, reply, usage.",
        {
            "channel": CHANNEL,
            "participant": PARTICIPANT,
            "turn": _i("Only this turn (1 is the participant's first on the channel).", None, 1, 10**9),
            "limit": _i("Turns per page.", 5, 1, 20),
            "max_chars": _i("Clip every text to this many characters.", 200, 20, 20000),
            "cursor": CURSOR,
        },
        ("channel", "participant"),
    ),
    ToolSpec(
        "compare_turns",
        "Compare two turn records: history removed/added, system prompt, inputs, tools offered, view, reply, tokens.",
        {
            "channel": CHANNEL,
            "participant": PARTICIPANT,
            "a": _i("The first turn's number (as turns numbers them).", None, 1, 10**9),
            "b": _i("The second turn's number.", None, 1, 10**9),
            "max_chars": _i("Clip every text to this many characters.", 200, 20, 20000),
        },
        ("channel", "participant", "a", "b"),
    ),
    ToolSpec(
        "visibility",
        "A page of the visibility matrix: per envelope and participant, delivered or why not, and projected how.",
        {
            "channel": CHANNEL,
            "from_seq": _i("First seq of the page.", 1, 1, 10**12),
            "limit": _i("Envelopes per page.", 10, 1, 50),
            "participants": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Only these columns.",
            },
            "preview_view": VIEW,
            "preview_params": VIEW_PARAMS,
            "cursor": CURSOR,
        },
        ("channel",),
    ),
    ToolSpec(
        "state_at",
        "The protocol state right after a seq (the scrubber): lifecycle, adapter state, who is expected, expectations.",
        {
            "channel": CHANNEL,
            "seq": _i("The seq (1 is the first envelope).", None, 1, 10**12),
            "max_chars": MAX_CHARS,
        },
        ("channel", "seq"),
    ),
    ToolSpec(
        "causation",
        "The causation tree of an envelope: the chain from its root cause, and what the root led to (delegations too).",
        {
            "envelope_id": _s("The envelope's id (from read_wal)."),
            "channel": _s("Its channel, if known (saves a search)."),
            "limit": _i("At most this many nodes.", 50, 1, 500),
        },
        ("envelope_id",),
    ),
    ToolSpec(
        "dry_run",
        "What posting an envelope would do (now, or at a past seq on a fork): verdict, recipients, projection deltas.",
        {
            "channel": CHANNEL,
            "sender": _s("Who would post it: a participant's name."),
            "text": _s("A text message's text (or give event_type and event_data)."),
            "event_type": _s("Another event type, e.g. ag2.msg.text."),
            "event_data": {"type": "object", "description": "Its event data."},
            "audience": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Names it is addressed to.",
            },
            "at_seq": _i("Dry-run on a fork of the channel as it was after this seq.", None, 0, 10**12),
            "max_chars": MAX_CHARS,
        },
        ("channel", "sender"),
    ),
    ToolSpec(
        "replay",
        "Fork a channel at a seq and replay it with overrides (views, models, prompts); the comparison and first divergence.",
        {
            "channel": CHANNEL,
            "at_seq": _i("Fork after this seq (0: before the first envelope).", None, 0, 10**12),
            "views": {
                "type": "object",
                "additionalProperties": {"type": "object"},
                "description": 'Agent name → view spec, e.g. {"critic": {"name": "windowed_summary", "recent_n": 2}}.',
            },
            "models": {
                **NAME_MAP,
                "description": "Agent name → replay (default), scripted, scripted:TEXT or openai:MODEL_NAME.",
            },
            "system_prompts": {
                **NAME_MAP,
                "description": "Agent name → the system prompt to replay it with.",
            },
            "tools": {
                **NAME_MAP,
                "description": "AGENT.TOOL (or AGENT.*) → recorded (default), live or static:JSON.",
            },
            "turns": _i("Stop after this many model turns.", 200, 1, 1000),
            "timeout": _i("Stop after this many seconds.", 60, 1, 600),
            "limit": _i("Differing rows per page.", 10, 1, 100),
            "max_chars": _i("Clip every text to this many characters.", 200, 20, 20000),
            "cursor": CURSOR,
        },
        ("channel", "at_seq"),
    ),
    ToolSpec(
        "post",
        "Post a text to a channel as the workbench's human (never as anyone else); only with --allow-post.",
        {
            "channel": CHANNEL,
            "text": _s("The text to post."),
            "audience": {
                "type": "array",
                "items": {"type": "string"},
                "description": "Names it is addressed to.",
            },
        },
        ("channel", "text"),
        read_only=False,
    ),
)

BY_NAME = {tool.name: tool for tool in TOOLS}


def listed(allow_post: bool) -> list[ToolSpec]:
    """The tools in their fixed order; ``post`` only with ``--allow-post``."""
    return [t for t in TOOLS if allow_post or t.name != "post"]


# ----------------------------------------------------------------------------------------- checks

_KINDS = {
    "string": (str, "a string"),
    "integer": (int, "a whole number"),
    "object": (dict, "an object"),
    "array": (list, "a list"),
}


def check_arguments(tool: ToolSpec, given: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with their defaults, or a ``Refusal`` for the first one that is wrong."""
    args = dict(given or {})
    for key in args:
        if key not in tool.properties:
            known = ", ".join(tool.properties)
            raise Refusal(f"{tool.name} has no argument {key!r}; its arguments are {known}")
    for key in tool.required:
        if args.get(key) in (None, ""):
            what = tool.properties[key]["description"].rstrip(".")
            raise Refusal(f"{tool.name} needs {key!r} ({what[0].lower()}{what[1:]}); give it")
    for key, value in list(args.items()):
        schema = tool.properties[key]
        kind, what = _KINDS[schema["type"]]
        if value is None:
            del args[key]
            continue
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise Refusal(f"{tool.name}: {key} must be {what}, got {json.dumps(value)[:60]}; give {what}")
        if kind is int and not schema["minimum"] <= value <= schema["maximum"]:
            raise Refusal(
                f"{tool.name}: {key} must be from {schema['minimum']} to {schema['maximum']}, got {value}; "
                + ("page with next_cursor instead" if key == "limit" else "give one in that range")
            )
        if kind is list and not all(isinstance(v, str) for v in value):
            raise Refusal(f'{tool.name}: {key} must be a list of names; give strings, e.g. ["critic"]')
    for key, schema in tool.properties.items():
        if key not in args and "default" in schema:
            args[key] = schema["default"]
    return args


# ----------------------------------------------------------------------------------------- cursors


def query_key(tool: str, args: dict[str, Any]) -> str:
    query = {k: v for k, v in args.items() if k not in ("cursor", "limit", "max_chars")}
    text = json.dumps([tool, query], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_cursor(tool: str, args: dict[str, Any], position: int) -> str:
    """An opaque cursor for the page of ``tool`` that starts at ``position``, valid for the same arguments."""
    raw = json.dumps({"t": tool, "q": query_key(tool, args), "p": position}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_cursor(tool: str, args: dict[str, Any]) -> int | None:
    """The position ``args["cursor"]`` names (None without a cursor); a ``Refusal`` for one that does not fit."""
    text = args.get("cursor")
    if not text:
        return None
    try:
        raw = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
        position = int(raw["p"])
        ok = raw["t"] == tool and raw["q"] == query_key(tool, args)
    except (ValueError, KeyError, TypeError):
        raise Refusal(
            f"{tool}: cursor {text[:24]!r} is not one this server gave; drop it to start from the top"
        ) from None
    if not ok:
        raise Refusal(
            f"{tool}: this cursor belongs to another query; repeat the arguments of the call that returned it, "
            "or drop it to start again"
        )
    return position


def page(
    tool: str, args: dict[str, Any], items: list[Any], start: int, limit: int
) -> tuple[list[Any], str | None]:
    """``items[start:start+limit]`` and the cursor of the next page (None at the end)."""
    chunk = items[start : start + limit]
    more = start + limit < len(items)
    return chunk, make_cursor(tool, args, start + limit) if more else None


__all__ = [
    "BY_NAME",
    "TOOLS",
    "ToolSpec",
    "check_arguments",
    "listed",
    "make_cursor",
    "page",
    "query_key",
    "read_cursor",
]

"""The envelope composer's draft, without a screen: the event type a person typed (``EV_TEXT`` means
``ag2.msg.text``), warnings about it, templates of event data, parsing the editor's JSON, saving the draft,
and the dry-run panel's text (what sending the draft would do now).
"""

from __future__ import annotations

import difflib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ag2net import envelope as envelope_module
from ag2net.envelope import (
    ALL_EVENT_TYPES,
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_EXPECTATION_VIOLATED,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TASK_CANCELLED,
    EV_TEXT,
    check_event_data,
)
from ag2net.errors import ProtocolError
from ag2net.events import event_from_dict
from tui.widgets.projection_diff import event_body, role_of
from tui.wording import Namer, humanize

if TYPE_CHECKING:  # ag2net.debug loads the hub (issue 28)
    from ag2net.debug import DryRun

CUSTOM_TEMPLATE = "custom"

EV_NAMES: dict[str, str] = {
    name: value
    for name, value in vars(envelope_module).items()
    if name.startswith("EV_") and isinstance(value, str) and value in ALL_EVENT_TYPES
}
"""``{"EV_TEXT": "ag2.msg.text", …}``: the constants' names a person may type as the event type."""

RESERVED_PREFIX = "ag2."
TERMINAL_STATES = ("closed", "expired", "closing")

DELTA_TEXT = 48
"""Characters of an event's text shown in a projection delta line."""


def resolve_event_type(text: str) -> tuple[str, str]:
    """(event type, note): an ``EV_*`` constant's name becomes its string (the note says so)."""
    typed = text.strip()
    name = typed.upper() if typed.upper().startswith("EV_") else typed
    if name in EV_NAMES:
        return EV_NAMES[name], f"{typed} is {EV_NAMES[name]}"
    return typed, ""


def reserved_type_warning(event_type: str) -> str:
    """A warning for an unknown type inside the reserved ``ag2.`` namespace, naming the closest known one."""
    if not event_type.startswith(RESERVED_PREFIX) or event_type in ALL_EVENT_TYPES:
        return ""
    close = difflib.get_close_matches(event_type, ALL_EVENT_TYPES, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}?" if close else "use your own namespace, e.g. 'myapp.' + a name"
    return f"{event_type!r} is not an ag2 event type (the ag2. namespace is reserved); {hint}"


def write_draft(path: Path, values: dict[str, Any]) -> None:
    """Write a draft atomically: a temp file of its own in the same folder, then ``os.replace``.

    Saves may overlap (a thread per keystroke); each has its own temp file, so one save never moves
    another's file away (the shared ``.tmp`` name made one of them fail with "No such file")."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(values, indent=2))
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def event_templates(channel_id: str = "", sender_id: str = "") -> dict[str, dict[str, Any]]:
    """An ``event_data`` skeleton for every EV_* type (plus a custom one), keyed by event type."""
    return {
        EV_TEXT: {"text": "Hello from the workbench."},
        EV_PACKET: {"routing": {}, "context_updates": {"set": {}, "delete": []}, "body": ""},
        EV_CHANNEL_INVITE: {
            "channel_id": channel_id,
            "manifest_type": "consulting",
            "manifest_version": 1,
            "creator_id": sender_id,
            "knobs": {},
            "labels": {},
        },
        EV_CHANNEL_INVITE_ACK: {"channel_id": channel_id},
        EV_CHANNEL_INVITE_REJECT: {"channel_id": channel_id, "reason": ""},
        EV_CHANNEL_OPENED: {"channel_id": channel_id},
        EV_CHANNEL_CLOSED: {"reason": "closed_by_human", "channel_id": channel_id},
        EV_CHANNEL_EXPIRED: {"reason": "ttl", "channel_id": channel_id},
        EV_EXPECTATION_VIOLATED: {"expectation": "reply_within", "violators": [], "detail": ""},
        EV_CONTEXT_SET: {"set": {"key": "value"}, "delete": []},
        EV_TASK_CANCEL_REQUEST: {"task_id": "", "reason": ""},
        EV_TASK_CANCELLED: {"task_id": "", "reason": ""},
        CUSTOM_TEMPLATE: {"document_id": "doc-123", "kind": "security"},
    }


def event_type_warning(event_type: str) -> str:
    """A warning (not an error) for a type outside a dotted namespace; empty when the type is fine."""
    if event_type and "." not in event_type.strip("."):
        return (
            f"'{event_type}' has no dotted namespace; prefer e.g. 'myapp.{event_type}' "
            "so it cannot collide with future ag2.* events"
        )
    return ""


def empty_text_warning(data: dict[str, Any]) -> str:
    """A warning for an ``ag2.msg.text`` whose ``text`` is empty (it would post a message saying nothing)."""
    text = data.get("text")
    if isinstance(text, str) and not text.strip():
        return 'the text is empty: this message would say nothing; write it in "text"'
    return ""


def parse_event_data(text: str) -> tuple[dict[str, Any] | None, str]:
    """Parse the editor's text: (object, "") or (None, one-sentence error)."""
    if not text.strip():
        return None, 'event_data is empty; write a JSON object such as {"text": "hi"}'
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"event_data is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
            type(value), "null"
        )
        return None, f'event_data must be a JSON object, got {kind}; wrap it like {{"value": ...}}'
    try:
        check_event_data(value)
    except ProtocolError as exc:
        return None, str(exc)
    return value, ""


def _short(text: str, limit: int = DELTA_TEXT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _event_line(data: dict[str, Any]) -> str:
    """``role: "text…"`` for one projection event (a dict from the op)."""
    try:
        event = event_from_dict(data)
    except (ValueError, KeyError, TypeError):
        return _short(json.dumps(data, sort_keys=True, default=str))
    return f'{role_of(event)}: "{_short(event_body(event, DELTA_TEXT * 2))}"'


def refusal_sentence(dry: DryRun, namer: Namer) -> str:
    """The refusal a post would get, with its advice, agents and channels named."""
    advice = str(dry.refusal.get("advice", "")) if dry.refusal else ""
    return humanize(dry.message + advice, namer)


def dry_run_text(dry: DryRun, namer: Namer) -> Text:
    """The dry-run panel's text: verdict, recipients in order, each participant's next-turn delta, state."""
    out = Text()
    if not dry.admitted:
        out.append("✗ Would be refused: ", style="bold red")
        out.append(refusal_sentence(dry, namer))
        return out
    out.append("✓ Would be admitted", style="bold green")
    out.append("\nRecipients", style="bold")
    recipients = sorted(dry.recipients, key=lambda r: r.get("order", 0))
    if recipients:
        out.append(f" (delivery order, {recipients[0].get('priority', 'normal')}):", style="dim")
        for number, row in enumerate(recipients, 1):
            out.append(f"\n {number}. {namer.who(str(row['agent_id']))}")
            notes = []
            if not row.get("connected", True):
                notes.append("offline: queued until it reconnects")
            if row.get("unacked"):
                notes.append(f"{row['unacked']} not yet acknowledged")
            if notes:
                out.append(f" · {'; '.join(notes)}", style="dim")
    else:
        out.append(": nobody (no participant is addressed)", style="dim")
    addressed = {str(r["agent_id"]) for r in recipients}
    out.append("\nTheir model's next history:", style="bold")
    for pid, delta in dry.projections.items():
        added = list(delta.get("added") or [])
        removed = list(delta.get("removed") or [])
        out.append(f"\n {namer.who(pid)} ")
        if not added and not removed:
            why = "delivered, not part of its history" if pid in addressed else "not addressed or not shown"
            out.append(f"unchanged ({why})", style="dim")
            continue
        counts = [f"+{len(added)}"] + ([f"−{len(removed)}"] if removed else [])
        out.append(" ".join(counts), style="bold")
        for event in added[:2]:
            out.append(f"\n   + {_event_line(event)}", style="green")
        for event in removed[:2]:
            out.append(f"\n   − {_event_line(event)}", style="red")
        more = len(added) + len(removed) - len(added[:2]) - len(removed[:2])
        if more > 0:
            out.append(f"\n   … {more} more", style="dim")
    out.append("\nAfter it: ", style="bold")
    expected = dry.expected_after
    if expected and expected.get("agent_id"):
        who = namer.who(str(expected["agent_id"]))
        out.append(f"{who} {'are' if who == 'you' else 'is'} expected to speak next; ")
    else:
        out.append("nobody in particular is expected next; ")
    if dry.closes:
        reason = dry.closes.get("reason") or ""
        out.append(f"the channel would be {dry.closes.get('state', 'closed')}", style="bold yellow")
        if reason:
            out.append(f" ({reason})", style="yellow")
    else:
        out.append("the channel stays open")
    return out


__all__ = [
    "CUSTOM_TEMPLATE",
    "EV_NAMES",
    "RESERVED_PREFIX",
    "TERMINAL_STATES",
    "dry_run_text",
    "empty_text_warning",
    "event_templates",
    "event_type_warning",
    "parse_event_data",
    "refusal_sentence",
    "reserved_type_warning",
    "resolve_event_type",
    "write_draft",
]

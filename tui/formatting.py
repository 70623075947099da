"""Pure helpers that turn envelopes into the short strings the workbench shows (no Textual imports)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from ag2net import naming
from ag2net.envelope import EV_PACKET, EV_TEXT, Envelope
from ag2net.filtering import FAMILIES, event_family
from ag2net.naming import channel_labels

NameFor = Callable[[str], str]


def short_type(event_type: str) -> str:
    """The event type without the ``ag2.`` namespace every built-in type shares; custom types stay whole."""
    return event_type[4:] if event_type.startswith("ag2.") and len(event_type) > 4 else event_type


def short_time(created_at: str) -> str:
    """``HH:MM:SS.mmm`` from a fixed-width ISO-Z timestamp (empty when unstamped)."""
    if len(created_at) >= 23 and created_at[10] == "T":
        return created_at[11:23]
    return created_at[:12]


def audience_label(envelope: Envelope, name_for: NameFor) -> str:
    """``all`` for a broadcast, ``sender only`` for an empty audience, else the names joined by commas."""
    audience = envelope.audience
    if audience is None:
        return "all"
    if not audience:
        return "sender only"
    return ",".join(name_for(a) for a in audience)


def _one_line(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def preview(envelope: Envelope, limit: int = 240) -> str:
    """A one-line summary of ``event_data``: the text for messages, the body for packets, else compact JSON."""
    data = envelope.event_data
    if not isinstance(data, dict):
        return _one_line(repr(data), limit)
    if envelope.event_type == EV_TEXT and isinstance(data.get("text"), str):
        return _one_line(data["text"], limit)
    if envelope.event_type == EV_PACKET and isinstance(data.get("body"), str):
        routing = data.get("routing")
        suffix = f"  → {compact_json(routing, 60)}" if routing else ""
        return _one_line(data["body"], limit) + suffix
    if data.get("channel_id") == envelope.channel_id:
        # the channel id repeats the envelope's own: leave it out of the one-line summary
        data = {k: v for k, v in data.items() if k != "channel_id"}
    if "reason" in data and isinstance(data["reason"], str) and len(data) == 1:
        return _one_line(f"reason: {data['reason']}", limit)
    if not data:
        return ""
    return compact_json(data, limit)


def compact_json(value: Any, limit: int = 240) -> str:
    try:
        text = json.dumps(value, separators=(", ", ": "), ensure_ascii=False, default=str, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return _one_line(text, limit)


def short_id(value: str | None, width: int = 8) -> str:
    if not value:
        return "—"
    return value[:width]


def channel_label(manifest_type: str, channel_id: str, tail: int = naming.MIN_TAIL) -> str:
    """A channel's short label, ``discussion·7d80`` (``ag2net.naming.channel_label``: one form everywhere).

    Alone it uses four id digits; for labels that must differ within a set (a list, a tail column) use
    :func:`channel_labels` (or ``tui.models.channel_labels_for`` over channel rows).
    """
    return naming.channel_label(manifest_type, channel_id, tail)


_ID_IN_TEXT = re.compile(r"(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])")


def ids_in(texts: Iterable[str]) -> list[str]:
    """Every 32-hex id found in ``texts``, once each, in order of first appearance."""
    found: dict[str, None] = {}
    for text in texts:
        for match in _ID_IN_TEXT.finditer(text):
            found.setdefault(match.group(0), None)
    return list(found)


def id_legend(texts: Iterable[str], name_for: NameFor) -> list[tuple[str, str]]:
    """``(id, name)`` for each id in ``texts`` that ``name_for`` knows (it returns an unknown id as is).

    For text shown exactly as a model received it (a compaction summary names speakers by id): the text
    stays as it is and this legend says who each id is.
    """
    pairs = []
    for agent_id in ids_in(texts):
        name = name_for(agent_id)
        if name and name != agent_id:
            pairs.append((agent_id, name))
    return pairs


def envelope_json(envelope: Envelope) -> str:
    """The envelope as indented JSON with sorted keys (what the detail screen shows and copies)."""
    return json.dumps(envelope.to_dict(), indent=2, sort_keys=True, ensure_ascii=False, default=str)


__all__ = [
    "FAMILIES",
    "NameFor",
    "audience_label",
    "channel_label",
    "channel_labels",
    "compact_json",
    "envelope_json",
    "event_family",
    "id_legend",
    "ids_in",
    "preview",
    "short_id",
    "short_time",
    "short_type",
]

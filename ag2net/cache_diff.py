"""Why a turn's prompt-cache read fell: where its request first differs from the previous turn's, in words.

Providers cache a prompt by its prefix (the tools offered, then the system prompt, then the messages in
order): a turn re-reads from the cache everything up to the first byte that differs from what was sent
before. So when an agent's cache read falls from one turn to the next, the reason is the first place where
the new request stops repeating the old one. ``request_change(previous, current)`` finds it, in that order:

* the model changed (caches are per model): "model changed from `gpt-4o` to `gpt-4o-mini`";
* the tools offered: "tools offered changed order", "tools offered changed: `lookup` added",
  "the schema of tool `lookup` changed";
* the system prompt: "a peer card was re-rendered" when the difference lies in a peer's skill card
  (a ``---`` / ``name:`` front-matter block) the prompt carries, else "system prompt changed";
* the messages (the projected history, then the current input), first differing one: "window slid:
  `windowed_summary(recent_n=10)` dropped seq 88 from the front" when a windowed view's summary grew (the
  front of the window moved), "a peer card was re-rendered" when both sides hold the same peer's card,
  else "message 4 changed" and how;
* none of these: the request repeats the previous one, and the fall is the provider's (its cache expired or
  was evicted).

Every function here is pure: it reads two turn records (``TurnRecord`` or their dicts) and nothing else.
Seq numbers of dropped messages come from ``seq_of`` when the caller has the WAL (``seq_finder``); without
it the message is named by its position and text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ag2net.events import BaseEvent, CompactionSummary, ModelRequest, event_from_dict, part_from_dict

WINDOWED = ("windowed_summary", "named_windowed_summary")

SeqOf = Callable[[str], int | None]
"""Maps a projected message's text to the WAL seq of the envelope it came from (None when unknown)."""

_CARD = re.compile(
    r"(?:^|(?<=\]: ))---[ \t]*\n(?:.*\n)*?name:[ \t]*[\"']?(?P<name>[^\n\"']+?)[\"']?[ \t]*\n(?:.*\n)*?---",
    re.M,
)


@dataclass(frozen=True, slots=True)
class RequestChange:
    """Where ``current``'s request first differs from ``previous``'s and why.

    ``kind``: ``model``, ``tools_order``, ``tools_set``, ``tool_schema``, ``system``, ``peer_card``,
    ``window``, ``message`` or ``none``; ``position``: ``"model"``, ``"tools"`` or the index of the first
    differing chat message as sent (0 is the system prompt when there is one); ``reason`` the words."""

    kind: str
    position: str | int
    reason: str

    def __str__(self) -> str:
        return self.reason


# ----------------------------------------------------------------------------------------- reading records


def _get(record: Any, name: str, default: Any = None) -> Any:
    value = record.get(name, default) if isinstance(record, Mapping) else getattr(record, name, default)
    return default if value is None else value


def _history(record: Any) -> list[BaseEvent]:
    return [e if isinstance(e, BaseEvent) else event_from_dict(e) for e in _get(record, "history", [])]


def _inputs(record: Any) -> list[Any]:
    return [p if not isinstance(p, Mapping) else part_from_dict(dict(p)) for p in _get(record, "inputs", [])]


def _messages(record: Any) -> list[dict[str, Any]]:
    """The chat messages a turn's first call was sent (system prompt, projected history, current input)."""
    from ag2net.agent.openai_model import to_chat_messages

    inputs = _inputs(record)
    events = _history(record) + ([ModelRequest(inputs)] if inputs else [])
    return to_chat_messages(str(_get(record, "system_prompt", "")), events)


def _tool_name(schema: Any) -> str:
    function = schema.get("function") if isinstance(schema, Mapping) else None
    source = function if isinstance(function, Mapping) else schema
    return str(source.get("name", "")) if isinstance(source, Mapping) else ""


def view_label(record: Any) -> str:
    """The view a turn was projected with, as code: ``windowed_summary(recent_n=10)``."""
    view = dict(_get(record, "view", {}) or {})
    name = str(view.pop("name", "") or "the view")
    args = ", ".join(f"{k}={v!r}" for k, v in view.items())
    return f"{name}({args})"


def _short(text: Any, limit: int = 40) -> str:
    flat = " ".join(str(text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# ----------------------------------------------------------------------------------------- the parts


def _model_change(previous: Any, current: Any) -> RequestChange | None:
    before = (_get(previous, "model_params", {}) or {}).get("model")
    after = (_get(current, "model_params", {}) or {}).get("model")
    if before and after and before != after:
        return RequestChange("model", "model", f"model changed from `{before}` to `{after}`")
    return None


def _tools_change(previous: Any, current: Any) -> RequestChange | None:
    old = list(_get(previous, "tools", []))
    new = list(_get(current, "tools", []))
    if old == new:
        return None
    old_names, new_names = [_tool_name(t) for t in old], [_tool_name(t) for t in new]
    if sorted(old_names) == sorted(new_names) and old_names != new_names:
        first = next(i for i, (a, b) in enumerate(zip(old_names, new_names, strict=True)) if a != b)
        return RequestChange(
            "tools_order",
            "tools",
            f"tools offered changed order: `{new_names[first]}` is now where `{old_names[first]}` was",
        )
    added = [n for n in new_names if n not in old_names]
    removed = [n for n in old_names if n not in new_names]
    if added or removed:
        parts = [f"`{n}` added" for n in added] + [f"`{n}` removed" for n in removed]
        return RequestChange("tools_set", "tools", f"tools offered changed: {', '.join(parts)}")
    changed = next(
        (_tool_name(b) for a, b in zip(old, new, strict=False) if a != b), new_names[0] if new_names else "?"
    )
    return RequestChange("tool_schema", "tools", f"the schema of tool `{changed}` changed")


def cards_in(text: str) -> dict[str, str]:
    """The skill cards (front matter with a ``name:``, and what follows to the next card) in a text, by name."""
    matches = list(_CARD.finditer(text or ""))
    out: dict[str, str] = {}
    for n, match in enumerate(matches):
        end = matches[n + 1].start() if n + 1 < len(matches) else len(text)
        out[match.group("name").strip()] = text[match.start() : end]
    return out


def _card_change(old: str, new: str) -> str | None:
    """The name of a peer whose card both texts hold, differently, when the texts differ only there."""
    before, after = cards_in(old), cards_in(new)
    for name in before:
        if (
            name in after
            and before[name] != after[name]
            and old.replace(before[name], "") == new.replace(after[name], "")
        ):
            return name
    return None


def _system_change(previous: Any, current: Any) -> RequestChange | None:
    old = str(_get(previous, "system_prompt", ""))
    new = str(_get(current, "system_prompt", ""))
    if old == new:
        return None
    peer = _card_change(old, new)
    if peer is not None:
        return RequestChange(
            "peer_card", 0, f"a peer card was re-rendered: `{peer}`'s skill card in the system prompt differs"
        )
    old_lines, new_lines = old.splitlines(), new.splitlines()
    line = next(
        (i for i, (a, b) in enumerate(zip(old_lines, new_lines, strict=False)) if a != b),
        min(len(old_lines), len(new_lines)),
    )
    return RequestChange("system", 0, f"system prompt changed (from line {line + 1})")


def _summary_count(events: list[BaseEvent]) -> int | None:
    first = events[0] if events else None
    return first.event_count if isinstance(first, CompactionSummary) else None


def _window_change(previous: Any, current: Any, seq_of: SeqOf | None, offset: int) -> RequestChange | None:
    """The window of a windowed view moved: the summary at the front counts more messages than before."""
    old_events, new_events = _history(previous), _history(current)
    before, after = _summary_count(old_events), _summary_count(new_events)
    windowed = str((_get(current, "view", {}) or {}).get("name", "")) in WINDOWED
    if after is None or (before is not None and after <= before) or not (windowed or before is not None):
        return None
    kept = old_events[1:] if before is not None else old_events
    dropped = kept[: after - (before or 0)]
    if not dropped:
        return None
    texts = [_event_text(e) for e in dropped]
    seqs = [seq_of(t) for t in texts] if seq_of is not None else []
    if seqs and all(s is not None for s in seqs):
        what = f"seq {', '.join(str(s) for s in seqs)}"
    else:
        start = offset + (1 if before is not None else 0)
        what = f"message {start}" + (f"–{start + len(dropped) - 1}" if len(dropped) > 1 else "")
        what += f" (“{_short(texts[0])}”)"
    return RequestChange(
        "window", offset, f"window slid: `{view_label(current)}` dropped {what} from the front"
    )


def _event_text(event: BaseEvent) -> str:
    from ag2net.events import event_text

    return event_text(event)


def _message_change(previous: Any, current: Any, seq_of: SeqOf | None) -> RequestChange | None:
    old, new = _messages(previous), _messages(current)
    offset = 1 if str(_get(current, "system_prompt", "")) else 0
    for i, before in enumerate(old):
        if i < offset:
            continue
        after = new[i] if i < len(new) else None
        if after == before:
            continue
        window = _window_change(previous, current, seq_of, offset)
        if window is not None:
            return window
        if after is None:
            return RequestChange("message", i, f"message {i} is gone: the request is shorter than before")
        peer = _card_change(str(before.get("content") or ""), str(after.get("content") or ""))
        if peer is not None:
            return RequestChange(
                "peer_card", i, f"a peer card was re-rendered: `{peer}`'s card in message {i}"
            )
        if before.get("role") != after.get("role"):
            return RequestChange(
                "message",
                i,
                f"message {i} changed from a {before.get('role')} to a {after.get('role')} message",
            )
        return RequestChange(
            "message",
            i,
            f"message {i} ({after.get('role')}) changed: “{_short(before.get('content'))}” is now "
            f"“{_short(after.get('content'))}”",
        )
    return None


def request_change(previous: Any, current: Any, *, seq_of: SeqOf | None = None) -> RequestChange:
    """Where ``current``'s first model request stops repeating ``previous``'s, and why (see the module)."""
    for found in (
        _model_change(previous, current),
        _tools_change(previous, current),
        _system_change(previous, current),
        _message_change(previous, current, seq_of),
    ):
        if found is not None:
            return found
    return RequestChange(
        "none",
        "none",
        "the request repeats the previous turn's up to its end; the provider's cache expired or was evicted",
    )


# ----------------------------------------------------------------------------------------- over turns


def cache_read(record: Any) -> int | None:
    """Prompt tokens the turn's first model call read from the provider's cache (its ``rounds[0].usage``,
    else the turn's ``tokens["cached"]`` when the provider counted them); None when unknown."""
    rounds = _get(record, "rounds", []) or []
    if rounds and isinstance(rounds[0], Mapping):
        usage = rounds[0].get("usage") or {}
        value = usage.get("cached_tokens")
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if usage:
            return 0
    if str(_get(record, "token_method", "")).startswith("provider"):
        value = (_get(record, "tokens", {}) or {}).get("cached")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    return None


@dataclass(frozen=True, slots=True)
class CacheDrop:
    """A turn whose cache read fell below the previous turn's, and why."""

    turn_id: str
    previous_turn_id: str
    before: int
    after: int
    change: RequestChange

    @property
    def sentence(self) -> str:
        return f"cache read fell from {self.before} to {self.after} tokens: {self.change.reason}"


def cache_drops(records: Iterable[Any], *, seq_of: SeqOf | None = None) -> list[CacheDrop]:
    """Every turn of ``records`` (one agent's, oldest first) whose cache read fell, with its reason."""
    out: list[CacheDrop] = []
    previous: Any = None
    for record in records:
        if previous is not None:
            before, after = cache_read(previous), cache_read(record)
            if before is not None and after is not None and after < before:
                out.append(
                    CacheDrop(
                        turn_id=str(_get(record, "turn_id", "")),
                        previous_turn_id=str(_get(previous, "turn_id", "")),
                        before=before,
                        after=after,
                        change=request_change(previous, record, seq_of=seq_of),
                    )
                )
        previous = record
    return out


def seq_finder(entries: Iterable[tuple[int, str]]) -> SeqOf:
    """A ``seq_of`` from ``(seq, rendered text)`` pairs of a channel's envelopes: a projected message matches
    an envelope whose text it is, or ends with after a ``[name]: `` label."""
    table = list(entries)

    def seq_of(text: str) -> int | None:
        for seq, rendered in table:
            if text == rendered or (text.endswith(rendered) and text[: -len(rendered)].endswith("]: ")):
                return seq
        return None

    return seq_of


__all__ = [
    "WINDOWED",
    "CacheDrop",
    "RequestChange",
    "SeqOf",
    "cache_drops",
    "cache_read",
    "cards_in",
    "request_change",
    "seq_finder",
    "view_label",
]

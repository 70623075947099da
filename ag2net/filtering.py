"""The filter language over envelopes: parse a query string into a ``FilterSpec`` that matches envelopes.

One language wherever a person or an agent picks envelopes: the workbench's tail (filter and search), the
MCP server's ``read_wal``, and the event-type families (``FAMILIES``, ``event_family``) the workbench colours by.

Query syntax (terms are ANDed; a leading ``-`` negates a term; commas inside one value mean OR)::

    type:ag2.msg            event type starts with ag2.msg (``*`` makes it a glob: type:*.review_*)
    family:custom           text, packet, channel, task, expectation, context or custom
    sender:planner          sender name contains "planner" (or sender id is exactly that)
    to:critic   to:all      audience names the critic / is a broadcast (alias: audience:)
    text:"two words"        event data contains the words (case-insensitive); a bare word means the same
    re:/x.+y/i              regular expression over type, sender name and event data (flag i: ignore case)
    seq:120-200             per-channel sequence number in a range (or one number)
    channel:discussion·7d80 the channel by its label (``.``, ``:``, ``-`` or ``/`` for ``·``), id tail or id
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ag2net.envelope import EV_PACKET, Envelope
from ag2net.naming import ChannelRefError, resolve_channel_ref

NameFor = Callable[[str], str]

FAMILIES: tuple[str, ...] = ("text", "packet", "channel", "task", "expectation", "context", "custom")
"""The families of event types, in the order the workbench lists (and colours) them."""


def event_family(event_type: str) -> str:
    """The family of an event type: text, packet, channel, task, expectation, context or custom."""
    if event_type.startswith("ag2.msg."):
        return "text"
    if event_type == EV_PACKET:
        return "packet"
    if event_type.startswith("ag2.channel."):
        return "channel"
    if event_type.startswith("ag2.task."):
        return "task"
    if event_type.startswith("ag2.expectation."):
        return "expectation"
    if event_type.startswith("ag2.context."):
        return "context"
    return "custom"


KEYS: tuple[str, ...] = (
    "type",
    "family",
    "sender",
    "from",
    "to",
    "audience",
    "text",
    "re",
    "seq",
    "channel",
    "ch",
)

Channels = Iterable[tuple[str, str]]
"""``(channel_type, channel_id)`` pairs a ``channel:`` term may name."""


class FilterError(ValueError):
    """A query that cannot be used; the message is one sentence naming the term and the fix."""


@dataclass(slots=True)
class _Term:
    key: str
    negated: bool
    values: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    seq_range: tuple[int, int] | None = None


class _Subject:
    """Lazily computed strings of one envelope, so a term only pays for what it reads."""

    __slots__ = ("_data", "_name_for", "_sender", "env", "seq")

    def __init__(self, env: Envelope, seq: int | None, name_for: NameFor) -> None:
        self.env = env
        self.seq = seq
        self._name_for = name_for
        self._sender: str | None = None
        self._data: str | None = None

    @property
    def sender(self) -> str:
        if self._sender is None:
            self._sender = self._name_for(self.env.sender_id)
        return self._sender

    @property
    def data(self) -> str:
        if self._data is None:
            try:
                self._data = json.dumps(self.env.event_data, ensure_ascii=False, default=str)
            except (TypeError, ValueError, RecursionError):
                self._data = repr(self.env.event_data)
        return self._data


@dataclass(slots=True)
class FilterSpec:
    """A parsed query; ``FilterSpec.parse("")`` matches everything."""

    query: str = ""
    terms: list[_Term] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not self.terms

    @classmethod
    def parse(cls, query: str, channels: Channels | None = None) -> FilterSpec:
        """Parse ``query``; ``channels`` resolves ``channel:`` terms (labels, tails, ids) to channel ids
        (without them a term matches an id, or the id's tail after the label's separator)."""
        query = query.strip()
        if not query:
            return cls()
        try:
            words = shlex.split(query, posix=True)
        except ValueError:
            raise FilterError(f"filter {query!r} has an unclosed quote; close it or remove it") from None
        pairs = list(channels) if channels is not None else None
        terms = [_parse_term(word, pairs) for word in words if word and word != "-"]
        return cls(query, terms)

    def matches(self, env: Envelope, name_for: NameFor, seq: int | None = None) -> bool:
        subject = _Subject(env, seq, name_for)
        return all(_term_matches(term, subject) != term.negated for term in self.terms)

    def describe(self) -> str:
        return self.query or "(none)"


def _parse_term(word: str, channels: list[tuple[str, str]] | None = None) -> _Term:
    negated = word.startswith("-") and len(word) > 1
    if negated:
        word = word[1:]
    key, sep, value = word.partition(":")
    if not sep or key not in KEYS:
        if sep and key.isidentifier():
            raise FilterError(
                f"unknown filter key {key!r}; use one of {', '.join(k + ':' for k in KEYS)} or a bare word"
            )
        return _Term("text", negated, (word.lower(),))
    if key == "from":
        key = "sender"
    if key == "audience":
        key = "to"
    if key == "ch":
        key = "channel"
    if not value:
        raise FilterError(f"filter term {key}: has no value; write e.g. {key}:{_EXAMPLE[key]}")
    if key == "re":
        return _Term("re", negated, pattern=_compile_regex(value))
    if key == "seq":
        return _Term("seq", negated, seq_range=_parse_seq(value))
    values = tuple(v for v in value.split(",") if v)
    if key == "family":
        bad = [v for v in values if v not in FAMILIES]
        if bad:
            raise FilterError(f"family {bad[0]!r} is unknown; use one of {', '.join(FAMILIES)}")
    if key in ("sender", "to", "text"):
        values = tuple(v.lower() for v in values)
    if key == "channel":
        values = tuple(_channel_value(v, channels) for v in values)
    return _Term(key, negated, values)


def _channel_value(ref: str, channels: list[tuple[str, str]] | None) -> str:
    if channels is None:
        return ref.lower()
    try:
        return resolve_channel_ref(ref, channels)
    except ChannelRefError as exc:
        raise FilterError(f"filter term channel:{ref}: {exc}") from None


_EXAMPLE = {
    "type": "ag2.msg",
    "family": "custom",
    "sender": "planner",
    "to": "all",
    "text": "budget",
    "re": "/x.+y/",
    "seq": "10-20",
    "channel": "discussion·7d80",
}


def _compile_regex(value: str) -> re.Pattern[str]:
    flags = 0
    body = value
    if value.startswith("/"):
        end = value.rfind("/")
        if end <= 0:
            raise FilterError(f"regular expression {value!r} is missing its closing '/'; write re:/pattern/")
        body = value[1:end]
        for flag in value[end + 1 :]:
            if flag == "i":
                flags |= re.IGNORECASE
            else:
                raise FilterError(
                    f"regular expression flag {flag!r} is unknown; only 'i' (ignore case) exists"
                )
    try:
        return re.compile(body, flags)
    except re.error as exc:
        raise FilterError(f"regular expression {body!r} is invalid ({exc}); fix the pattern") from None


def _parse_seq(value: str) -> tuple[int, int]:
    low, dash, high = value.partition("-")
    try:
        first = int(low) if low else 0
        last = int(high) if dash and high else (first if not dash else 2**63)
    except ValueError:
        raise FilterError(f"seq:{value} is not a number or range; write seq:42 or seq:10-20") from None
    return first, last


def _type_matches(value: str, event_type: str) -> bool:
    if any(ch in value for ch in "*?["):
        return fnmatch.fnmatchcase(event_type, value)
    return event_type == value or event_type.startswith(value if value.endswith(".") else value + ".")


def _term_matches(term: _Term, s: _Subject) -> bool:
    key = term.key
    env = s.env
    if key == "type":
        return any(_type_matches(v, env.event_type) for v in term.values)
    if key == "family":
        return event_family(env.event_type) in term.values
    if key == "sender":
        name = s.sender.lower()
        return any(v in name or v == env.sender_id for v in term.values)
    if key == "to":
        audience = env.audience
        for v in term.values:
            if v in ("all", "*"):
                if audience is None:
                    return True
            elif audience is not None and any(v == a or v == s._name_for(a).lower() for a in audience):
                return True
        return False
    if key == "text":
        data = s.data.lower()
        return any(v in data for v in term.values)
    if key == "re":
        assert term.pattern is not None
        return term.pattern.search(f"{env.event_type} {s.sender} {s.data}") is not None
    if key == "seq":
        assert term.seq_range is not None
        return s.seq is not None and term.seq_range[0] <= s.seq <= term.seq_range[1]
    if key == "channel":
        cid = env.channel_id
        return any(v == cid or cid.endswith(v.rpartition("·")[2] or v) for v in term.values)
    return False  # pragma: no cover - parse refuses other keys


def words_match(query: str, texts: Iterable[str]) -> bool:
    """Whether every word of ``query`` occurs in one of ``texts``, ignoring case (the channel list's filter
    over a channel's type, state, id, participants' names and close reason; an empty query matches)."""
    hay = " ".join(texts).lower()
    return all(word in hay for word in query.lower().split())


def matcher(spec: FilterSpec, name_for: NameFor) -> Callable[[Envelope, int | None], bool]:
    """A two-argument predicate for ``spec`` (always true when the spec is empty)."""
    if spec.empty:
        return lambda env, seq: True
    return lambda env, seq: spec.matches(env, name_for, seq)


__all__ = ["FAMILIES", "KEYS", "FilterError", "FilterSpec", "event_family", "matcher", "words_match"]

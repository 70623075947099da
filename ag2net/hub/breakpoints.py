"""Shell: ``Breakpoints`` (``hub.breakpoints``) — the table of breakpoints and step mode, and what matches.

A breakpoint's spec is the tail's filter language (``ag2net.filtering``) plus ``channel.type:TYPE`` and
``node:NAME`` (a workflow channel's current node: its expected next speaker); ``key=value`` is read as
``key:value`` and the word ``and`` between terms is allowed. ``agent:`` is ``sender:`` (a turn's agent).

Matching is cheap when nothing matches: the terms that depend only on the channel, the sender and the
event type are decided once per ``(channel, event type, sender)`` and remembered (``_memo``); only the
terms that read the envelope's body (audience, text, regex, seq) or the channel's live state (node) run
per post, and only for the breakpoints that passed the first step. The table and the step-mode set are
kept in the store (``get_meta``/``set_meta``, key ``breakpoints``) and loaded at hub start.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ag2net.breakpoints import BREAK_ON, Breakpoint
from ag2net.envelope import EV_TEXT, Envelope, is_protocol_event
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.filtering import FilterError, FilterSpec, _Subject, _term_matches  # pyright: ignore[reportPrivateUsage]
from ag2net.hub.core import required

if TYPE_CHECKING:
    from ag2net.hub.core import HubCore
    from ag2net.hub.services import Services

META_KEY = "breakpoints"
#: Network-wide step mode, in the step set.
ALL = "*"
#: Filter keys decided by channel, sender and event type alone (the rest read the envelope's body).
_STATIC_KEYS = frozenset({"type", "family", "sender", "channel"})
_MEMO_LIMIT = 4096
_EXTRA_KEYS = ("channel.type", "node", "agent")
_FILTER_KEYS = ("type", "family", "sender", "from", "to", "audience", "text", "re", "seq", "channel", "ch")


@dataclass(slots=True)
class Compiled:
    """A parsed spec: the filter's static and dynamic halves, and the extra terms (each ``(values, negated)``)."""

    static: FilterSpec
    dynamic: FilterSpec
    channel_types: tuple[tuple[str, ...], bool] | None = None
    nodes: tuple[tuple[str, ...], bool] | None = None


def compile_spec(spec: str) -> Compiled:
    """Parse a breakpoint spec; a bad one is a ``ProtocolError`` naming the term."""
    try:
        words = shlex.split(spec.strip(), posix=True)
    except ValueError:
        raise ProtocolError(
            f"breakpoint spec {spec!r} has an unclosed quote; close it or remove it"
        ) from None
    rest: list[str] = []
    channel_types = nodes = None
    for word in words:
        if word.lower() == "and":
            continue
        negated = word.startswith("-") and len(word) > 1
        body = word[1:] if negated else word
        key, sep, value = body.partition(":")
        if not sep:
            k, eq, v = body.partition("=")
            if eq and (k in _EXTRA_KEYS or k in _FILTER_KEYS):
                key, sep, value = k, ":", v
        if sep and key in ("channel.type", "node"):
            if not value:
                raise ProtocolError(f"breakpoint term {key}: has no value; write e.g. {key}:workflow")
            values = tuple(v.lower() for v in value.split(",") if v)
            if key == "node":
                nodes = (values, negated)
            else:
                channel_types = (values, negated)
            continue
        if sep and key == "agent":
            key = "sender"
        rest.append(("-" if negated else "") + (f"{key}:{value}" if sep else body))
    try:
        parsed = FilterSpec.parse(shlex.join(rest))
    except FilterError as exc:
        raise ProtocolError(f"breakpoint spec {spec!r}: {exc}") from None
    static = [t for t in parsed.terms if t.key in _STATIC_KEYS]
    dynamic = [t for t in parsed.terms if t.key not in _STATIC_KEYS]
    if not parsed.terms and channel_types is None and nodes is None:
        raise ProtocolError(
            "breakpoint spec is empty; give at least one term, e.g. sender:critic or channel.type:discussion"
        )
    return Compiled(FilterSpec(spec, static), FilterSpec(spec, dynamic), channel_types, nodes)


class _Body(_Subject):
    """One post's strings, computed once for every breakpoint that reads them: ``raw`` is its event data's
    keys and values (what ``text:`` and ``re:`` terms look in, without encoding the JSON), ``words`` the
    same lower-cased."""

    __slots__ = ("_raw", "_words")

    def __init__(self, env: Envelope, seq: int | None, name_for: Any) -> None:
        self.env, self.seq, self._name_for = env, seq, name_for
        self._sender = self._data = self._raw = self._words = None

    @property
    def raw(self) -> str:
        raw = self._raw
        if raw is None:
            data = self.env.event_data
            text = data.get("text") if len(data) == 1 else None
            if isinstance(text, str):  # the common post: {"text": ...}
                raw = "text " + text
            else:
                parts: list[str] = []
                _flatten(data, parts)
                raw = " ".join(parts)
            self._raw = raw
        return raw

    @property
    def words(self) -> str:
        if self._words is None:
            self._words = self.raw.lower()
        return self._words


def _flatten(value: Any, parts: list[str], depth: int = 0) -> None:
    if isinstance(value, str):
        parts.append(value)
    elif isinstance(value, dict) and depth < 32:
        for k, v in value.items():
            parts.append(str(k))
            _flatten(v, parts, depth + 1)
    elif isinstance(value, (list, tuple)) and depth < 32:
        for v in value:
            _flatten(v, parts, depth + 1)
    elif value is not None:
        parts.append(json.dumps(value, default=str))


def _body_matches(term: Any, subject: _Body) -> bool:
    key = term.key
    if key == "text":
        words = subject.words
        return any(v in words for v in term.values)
    if key == "re":
        return term.pattern.search(f"{subject.env.event_type} {subject.sender} {subject.raw}") is not None
    return _term_matches(term, subject)


def _extra_matches(term: tuple[tuple[str, ...], bool] | None, value: str) -> bool:
    if term is None:
        return True
    values, negated = term
    return (value.lower() in values) != negated


class Breakpoints:
    """The breakpoints by id (insertion order: oldest first), compiled, and the step-mode set."""

    __slots__ = ("_memo", "_turn_memo", "armed", "compiled", "core", "services", "step", "table", "turns")

    def __init__(self, services: Services, core: HubCore) -> None:
        self.services, self.core = services, core
        self.table: dict[str, Breakpoint] = {}
        self.compiled: dict[str, Compiled] = {}
        self.step: set[str] = set()
        #: Whether any post may be held (an enabled envelope breakpoint or step mode): the one check a post pays.
        self.armed = False
        #: Whether any turn breakpoint is enabled: ``turn_gate`` is this one check when none is.
        self.turns = False
        self._memo: dict[tuple[str, str, str], tuple[str, ...]] = {}
        self._turn_memo: dict[tuple[str, str], tuple[str, ...]] = {}

    # ------------------------------------------------------------ the table

    async def load(self) -> None:
        raw = await self.services.store.get_meta(META_KEY)
        self.table.clear()
        self.compiled.clear()
        self.step.clear()
        if raw:
            data = json.loads(raw)
            for item in data.get("breakpoints", []):
                bp = Breakpoint.from_dict(item)
                try:
                    self.compiled[bp.breakpoint_id] = compile_spec(bp.spec)
                except ProtocolError:
                    continue  # a spec this version cannot read is not kept
                self.table[bp.breakpoint_id] = bp
            self.step.update(str(c) for c in data.get("step", []))
        self._changed()

    async def save(self) -> None:
        data = {"breakpoints": [bp.to_dict() for bp in self.table.values()], "step": sorted(self.step)}
        await self.services.store.set_meta(META_KEY, json.dumps(data))

    def _changed(self) -> None:
        self._memo.clear()
        self._turn_memo.clear()
        self.armed = bool(self.step) or any(bp.enabled and bp.on == "envelope" for bp in self.table.values())
        self.turns = any(bp.enabled and bp.on == "turn" for bp in self.table.values())

    async def add(self, spec: str, *, on: str, enabled: bool, by: str) -> Breakpoint:
        if on not in BREAK_ON:
            raise ProtocolError(f"params.on must be one of {', '.join(BREAK_ON)}, not {on!r}")
        compiled = compile_spec(spec)
        bp = Breakpoint(
            self.services.ids.new_id(), spec, on, enabled, by or "operator", self.services.clock()
        )
        self.table[bp.breakpoint_id] = bp
        self.compiled[bp.breakpoint_id] = compiled
        self._changed()
        await self.save()
        await self.services.audit.record("breakpoint_set", breakpoint=bp.to_dict(), by=bp.created_by)
        return bp

    def get(self, breakpoint_id: str) -> Breakpoint:
        missing = f"no breakpoint {breakpoint_id!r}; list_breakpoints names the ones there are"
        return required(self.table, breakpoint_id, missing)

    async def set_enabled(self, breakpoint_id: str, enabled: bool) -> Breakpoint:
        bp = self.get(breakpoint_id)
        bp.enabled = enabled
        self._changed()
        await self.save()
        await self.services.audit.record("breakpoint_changed", breakpoint=bp.to_dict())
        return bp

    async def remove(self, breakpoint_id: str) -> Breakpoint:
        bp = self.get(breakpoint_id)
        del self.table[breakpoint_id]
        self.compiled.pop(breakpoint_id, None)
        self._changed()
        await self.save()
        await self.services.audit.record("breakpoint_removed", breakpoint=bp.to_dict())
        return bp

    async def set_step(self, channel_id: str | None, on: bool) -> list[str]:
        key = channel_id or ALL
        if channel_id is not None and channel_id not in self.core.channels.by_id:
            raise NotFoundError(f"channel not found: {channel_id}")
        if on:
            self.step.add(key)
        else:
            self.step.discard(key)
        self._changed()
        await self.save()
        await self.services.audit.record("step_mode", channel_id=channel_id, on=on)
        return sorted(self.step)

    # ------------------------------------------------------------ matching

    def match(self, env: Envelope) -> tuple[str, str] | None:
        """``(reason, breakpoint_id)`` when ``env`` is to be held (``("step", "")`` in step mode), else None."""
        cid = env.channel_id
        md = self.core.channels.by_id.get(cid)
        if md is None:
            return None  # refused by admission anyway
        step = self.step
        if step and (ALL in step or cid in step) and not is_protocol_event(env.event_type):
            return ("step", "")
        key = (cid, env.event_type, env.sender_id)
        ids = self._memo.get(key)
        if ids is None:
            ids = self._statics(env, md.manifest.type, "envelope")
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            self._memo[key] = ids
        if not ids:
            return None
        subject = _Body(env, None, self.core.identities.name_for)  # one per post, shared by the breakpoints
        node = None
        for bp_id in ids:
            c = self.compiled[bp_id]
            if c.nodes is not None:
                node = self._node(cid) if node is None else node
                if not _extra_matches(c.nodes, node):
                    continue
            for term in c.dynamic.terms:
                if _body_matches(term, subject) == term.negated:
                    break
            else:
                return ("breakpoint", bp_id)
        return None

    def _statics(self, env: Envelope, channel_type: str, on: str) -> tuple[str, ...]:
        name_for = self.core.identities.name_for
        out = []
        for bp_id, bp in self.table.items():
            if not bp.enabled or bp.on != on:
                continue
            c = self.compiled[bp_id]
            if not _extra_matches(c.channel_types, channel_type):
                continue
            if c.static.empty or c.static.matches(env, name_for):
                out.append(bp_id)
        return tuple(out)

    def _node(self, channel_id: str) -> str:
        state = self.core.channels.states.get(channel_id)
        for attr in ("current_node", "node"):
            value = getattr(state, attr, None)
            if isinstance(value, str):
                return value
        speaker = getattr(state, "expected_next_speaker", None)
        return self.core.identities.name_for(speaker) if isinstance(speaker, str) else ""

    def match_turn(self, agent_id: str, channel_id: str) -> str | None:
        """The id of an enabled turn breakpoint that pauses ``agent_id``'s turn in the channel, else None."""
        if not self.turns:
            return None
        md = self.core.channels.by_id.get(channel_id)
        if md is None:
            return None
        key = (channel_id, agent_id)
        ids = self._turn_memo.get(key)
        probe = Envelope(channel_id, agent_id, None, EV_TEXT, {})
        if ids is None:
            ids = self._statics(probe, md.manifest.type, "turn")
            if len(self._turn_memo) >= _MEMO_LIMIT:
                self._turn_memo.clear()
            self._turn_memo[key] = ids
        for bp_id in ids:
            c = self.compiled[bp_id]
            if c.nodes is not None and not _extra_matches(c.nodes, self._node(channel_id)):
                continue
            if c.dynamic.empty or c.dynamic.matches(probe, self.core.identities.name_for):
                return bp_id
        return None

    async def hit(self, breakpoint_id: str) -> None:
        """Count a post (or turn) the breakpoint held, kept in the store with the table: a count read after
        a restart is the count before it. A hold waits on a person, so one small write per hit is cheap."""
        bp = self.table.get(breakpoint_id)
        if bp is not None:
            bp.hits += 1
            await self.save()


def to_json(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


__all__ = ["ALL", "META_KEY", "Breakpoints", "Compiled", "compile_spec"]

"""Hub and adapter refusals turned into sentences people read: agents by name, channels by label.

The hub's messages name everything by id (``discussion channel '18ecd5ae…' expects '18ecd57e…' to
speak, got '18ecd5b1…'``). :func:`humanize` recognises the refusals a person at the keyboard meets
(whose turn it is, a closed or pending channel, a non-participant, an unknown audience) and says them
with the names and channel labels the workbench knows; any other text keeps its words with each known
id replaced by its name (:func:`ag2net.naming.name_ids`). Ids nobody knows stay as they are.

Nothing here imports Textual: :func:`namer_for` reads an app's ``source`` duck-typed, so widgets call
``humanize(text, namer_for(self.app))`` and tests can build a :class:`Namer` by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ag2net.naming import SEPARATOR, channel_labels, name_ids


def _id(name: str) -> str:
    """A participant as the hub says it, captured as ``name``: a 32-hex id (quoted or not) or, since the hub
    names whom it knows (``expects critic to speak, got root``), a name."""
    return rf"'?(?P<{name}>[0-9a-f]{{32}}|[^'\s,;][^',;]*?)'?"


def _chan() -> str:
    """A channel as the hub says it, captured as ``cid``: ``channel '<32-hex id>'`` or a label
    (``discussion·7d80``), with its type or the word "channel" before it or not."""
    return rf"(?:[\w.-]+ )?(?:channel )?'?(?P<cid>[0-9a-f]{{32}}|[\w.-]+{SEPARATOR}[0-9a-f]{{4,32}})'?"


#: the end of a refusal's last participant (a name may hold spaces, so the token runs to the end).
_END = r"(?=\s*(?:$|[;(—]))"


@dataclass(slots=True)
class Namer:
    """What the workbench knows to name ids: agents through ``name_for``, channels through ``labels``.

    ``name_for`` returns the id itself when it does not know it (as ``HubClient.name_for`` does);
    ``me`` is the person at the keyboard (a refusal about them says "you").
    """

    name_for: Callable[[str], str] = field(default=lambda agent_id: agent_id)
    labels: Mapping[str, str] = field(default_factory=dict)
    me: str | None = None
    order: tuple[str, ...] = ()
    """The speaking order of the channel a refusal is about (ids), when it is a round robin: whose turn
    comes before the person's ("you can speak after critic and researcher")."""

    def before(self, expected: str, got: str) -> str:
        """Who speaks from ``expected`` (whose turn it is) until ``got`` may, in ``order``: ``critic and
        researcher``; just ``expected``'s name when the order does not tell."""
        first = self.agent(expected)
        names = [self.agent(agent_id) for agent_id in self.order]
        mine = self.who(got)
        spots = [i for i, agent_id in enumerate(self.order) if self.who(agent_id) == mine]
        if first not in names or len(spots) != 1:
            return first
        start, stop = names.index(first), spots[0]
        count = (stop - start) % len(names)
        speakers = [names[(start + i) % len(names)] for i in range(count)] or [first]
        if len(speakers) == 1:
            return speakers[0]
        return ", ".join(speakers[:-1]) + " and " + speakers[-1]

    def agent(self, agent_id: str) -> str:
        """The agent's name, or the id cut to 8 digits and an ellipsis when unknown."""
        name = self.name_for(agent_id)
        if name and name != agent_id:
            return name
        return f"{agent_id[:8]}…" if _HEX.fullmatch(agent_id) else agent_id  # an id, or already a name

    def who(self, agent_id: str) -> str:
        """``you`` for the person at the keyboard, else :meth:`agent`."""
        if self.me is not None and agent_id in (self.me, self.name_for(self.me)):
            return "you"  # the hub said the id, or the name it knows the person by
        return self.agent(agent_id)

    def channel(self, channel_id: str) -> str:
        """The channel's label, or ``channel 18ecd5ae…`` when it is not known."""
        label = self.labels.get(channel_id)
        if label:
            return label
        if SEPARATOR in channel_id:  # the hub's label: the workbench's own when it knows the channel
            kind, _, tail = channel_id.rpartition(SEPARATOR)
            mine = [v for k, v in self.labels.items() if k.endswith(tail) and v.startswith(kind + SEPARATOR)]
            return mine[0] if len(mine) == 1 else channel_id
        return f"channel {channel_id[:8]}…" if len(channel_id) > 12 else f"channel {channel_id}"

    def mapping(self, text: str) -> dict[str, str]:
        """``{id: name or label}`` for every 32-hex id in ``text`` this namer knows."""
        found: dict[str, str] = {}
        for agent_id in set(re.findall(r"[0-9a-f]{32}", text)):
            label = self.labels.get(agent_id)
            if label:
                found[agent_id] = label
                continue
            name = self.name_for(agent_id)
            if name and name != agent_id:
                found[agent_id] = name
        return found


_HEX = re.compile(r"[0-9a-f]{32}")


def _possessive(name: str) -> str:
    return "your" if name == "you" else f"{name}'s"


def _turn(namer: Namer, m: re.Match[str]) -> str:
    cid, expected, got = m.group("cid"), m.group("expected"), m.group("got")
    who = namer.agent(expected)
    if namer.who(got) == "you":
        return f"{who}'s turn — you can speak after {namer.before(expected, got)}"
    return f"{who}'s turn in {namer.channel(cid)} — {namer.who(got)} can speak after {namer.before(expected, got)}"


def _consult_reply(namer: Namer, m: re.Match[str]) -> str:
    cid, expected, got = m.group("cid"), m.group("expected"), m.group("got")
    who = namer.who(expected)
    label = namer.channel(cid)
    return f"{label} waits for {_possessive(who)} reply — only {who} can speak now, not {namer.who(got)}"


def _consult_first(namer: Namer, m: re.Match[str]) -> str:
    cid, expected, got = m.group("cid"), m.group("expected"), m.group("got")
    who = namer.agent(expected)
    return f"{who} asks first in {namer.channel(cid)} — {namer.who(got)} can speak after {_possessive(who)} question"


def _complete(namer: Namer, m: re.Match[str]) -> str:
    return f"{namer.channel(m.group('cid'))} is complete (its question was answered); open a new consulting channel"


def _terminal(namer: Namer, m: re.Match[str]) -> str:
    state, rest = m.group("state"), m.group("rest") or ""
    return f"{namer.channel(m.group('cid'))} is {state}{rest}"


def _pending(namer: Namer, m: re.Match[str]) -> str:
    return (
        f"{namer.channel(m.group('cid'))} is still {m.group('state')}: "
        "wait until every invitee accepts the invitation"
    )


def _not_participant(namer: Namer, m: re.Match[str]) -> str:
    who = namer.who(m.group("got"))
    verb = "are" if who == "you" else "is"
    return f"{who} {verb} not a participant of {namer.channel(m.group('cid'))}"


def _audience(namer: Namer, m: re.Match[str]) -> str:
    return (
        f"{namer.agent(m.group('who'))} is not a participant of {namer.channel(m.group('cid'))}; "
        "address only its participants"
    )


def _not_found(namer: Namer, m: re.Match[str]) -> str:
    return f"{namer.channel(m.group('cid'))} does not exist (any more); pick another channel"


def _ack_timeout(namer: Namer, m: re.Match[str]) -> str:
    return (
        f"{namer.channel(m.group('cid'))} did not open: not every invitee accepted the invitation "
        "in time (ack timeout)"
    )


_Rule = tuple[re.Pattern[str], Callable[[Namer, re.Match[str]], str]]

_RULES: list[_Rule] = [
    (
        re.compile(
            rf"{_chan()} expects "
            rf"{_id('expected')} to speak, got {_id('got')}{_END}"
        ),
        _turn,
    ),
    (
        re.compile(
            rf"{_chan()} expects reply from respondent "
            rf"{_id('expected')}, got {_id('got')}{_END}"
        ),
        _consult_reply,
    ),
    (
        re.compile(
            rf"{_chan()} expects first send from initiator "
            rf"{_id('expected')}, got {_id('got')}{_END}"
        ),
        _consult_first,
    ),
    (re.compile(rf"{_chan()} already complete"), _complete),
    (
        re.compile(
            rf"{_chan()} is (?P<state>closed|expired|closing)(?P<rest>.*)$",
            re.S,
        ),
        _terminal,
    ),
    (
        re.compile(
            rf"{_chan()} not active \(state=(?P<state>\w+)\)",
        ),
        _pending,
    ),
    (
        re.compile(
            rf"{_chan()} only accepts sends from participants, "
            rf"got {_id('got')}{_END}"
        ),
        _not_participant,
    ),
    (
        re.compile(rf"(?:^|;\s*){_id('who')} is not one of {_chan()}"),
        _audience,
    ),
    (re.compile(rf"channel not found: {_id('cid')}"), _not_found),
    (re.compile(rf"{_chan()} ack timeout"), _ack_timeout),
]


def humanize(text: str, namer: Namer) -> str:
    """``text`` (a hub or adapter message) as a sentence naming agents and channels as people know them.

    Known refusals are reworded ("critic's turn — you can speak after critic", "consulting·cb2c is
    closed (reason: done); open a new one"); anything else keeps its words with known ids named.
    """
    text = text.strip()
    for pattern, build in _RULES:
        match = pattern.search(text)
        if match is not None:
            return build(namer, match)
    return name_ids(text, namer.mapping(text))


def plural(count: int, word: str, many: str | None = None) -> str:
    """``count`` and ``word``, in the plural unless the count is one: ``1 identity``, ``7 identities``
    (``many`` names a plural that is not ``word`` + ``s``)."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {many if many is not None else word + 's'}"


def labels_for(metadata: Mapping[str, Any]) -> dict[str, str]:
    """``{channel_id: label}`` for channel metadata (``ChannelMetadata`` values), labels unique in the set."""
    pairs = []
    for channel_id, md in metadata.items():
        manifest = getattr(md, "manifest", None)
        pairs.append((getattr(manifest, "type", None) or "channel", channel_id))
    return channel_labels(pairs)


_LABEL_CACHE: list[tuple[frozenset[str], dict[str, str]]] = []


def app_labels(app: Any) -> dict[str, str]:
    """The labels of every channel ``app.source`` knows (empty without one); cached per set of ids."""
    source = getattr(app, "source", None)
    metadata = getattr(source, "metadata", None)
    if not isinstance(metadata, Mapping) or not metadata:
        return {}
    ids = frozenset(metadata)
    if _LABEL_CACHE and _LABEL_CACHE[0][0] == ids:
        return _LABEL_CACHE[0][1]
    labels = labels_for(metadata)
    _LABEL_CACHE[:] = [(ids, labels)]
    return labels


def _speaking_order(source: Any, channel_id: str | None) -> tuple[str, ...]:
    """The participants of ``channel_id`` in speaking order when it is a round-robin discussion."""
    metadata = getattr(source, "metadata", None)
    md = metadata.get(channel_id) if isinstance(metadata, Mapping) and channel_id else None
    manifest = getattr(md, "manifest", None)
    if getattr(manifest, "type", None) != "discussion":
        return ()
    if (getattr(md, "knobs", None) or {}).get("ordering", "round_robin") != "round_robin":
        return ()
    people = sorted(getattr(md, "participants", []), key=lambda p: getattr(p, "order", 0))
    return tuple(str(p.agent_id) for p in people)


def namer_for(app: Any, channel_id: str | None = None) -> Namer:
    """A :class:`Namer` over what a workbench app knows (its ``source``); an app without one names nothing.
    With ``channel_id``, a round-robin discussion's speaking order too (whose turns come first)."""
    source = getattr(app, "source", None)
    if source is None:
        return Namer()
    lookup: Any = getattr(source, "name_for", None)
    me = getattr(source, "human_id", None)

    def name_for(agent_id: str) -> str:
        return str(lookup(agent_id)) if callable(lookup) else agent_id

    return Namer(
        name_for=name_for,
        labels=app_labels(app),
        me=me if isinstance(me, str) else None,
        order=_speaking_order(source, channel_id),
    )


__all__ = ["Namer", "app_labels", "humanize", "labels_for", "namer_for", "plural"]

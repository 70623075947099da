"""Core: the hub's in-memory tables and its decisions as pure functions (no awaits, no I/O).

* the tables: ``IdentityTable``, ``ChannelTable`` (a read-only mapping of channels by id),
  ``DeliveryBook``, ``TaskBook``; the shell's components (``hub.identities``, ``hub.channels``,
  ``hub.delivery``, ``hub.tasks``) are these tables with their async behaviour added, and ``HubCore``
  holds the four for the decisions below;
* admission: ``admit(core, envelope)`` is one call deciding ``Admitted`` or ``Refused`` (the exact error a
  post raises) and changing nothing; ``apply(core, admitted)`` records it once the store has it. A
  registered arbiter is asked before (``ag2net.hub.arbiter.Arbitration.consult``), never in between;
* routing: ``candidates(md, env)`` (audience, else every participant but the sender) and
  ``recipients(...)``, the one answer to "who receives this envelope" (dispatch, replay,
  visibility and the dry run ask it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_TASK_CANCEL_REQUEST,
    Envelope,
    check_shape,
    is_protocol_event,
)
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub import rules
from ag2net.hub.records import TERMINAL, TERMINAL_TASKS, AgentRecord
from ag2net.naming import SEPARATOR, channel_label, name_ids
from ag2net.tasks import TaskMetadata

if TYPE_CHECKING:
    from ag2net.hub.dispatch import Mailbox

# ---------------------------------------------------------------------------------------- tables

K = TypeVar("K")
V = TypeVar("V")


def required(table: Mapping[K, V], key: K, missing: str) -> V:
    """``table[key]``; ``NotFoundError(missing)`` when the table has no (or a None) value for it."""
    value = table.get(key)
    if value is None:
        raise NotFoundError(missing)
    return value


class IdentityTable:
    """Registered agents by id, their names, and names held while a registration is in flight."""

    __slots__ = ("agents", "names", "reserved")

    def __init__(self) -> None:
        self.agents: dict[str, AgentRecord] = {}
        self.names: dict[str, str] = {}
        self.reserved: set[str] = set()

    def add(self, record: AgentRecord) -> None:
        agent_id = record.passport.agent_id
        if agent_id is None:
            raise ValueError(
                f"agent {record.passport.name!r} has no agent_id; the hub stamps one at registration"
            )
        self.agents[agent_id] = record
        self.names[record.passport.name] = agent_id

    def clear(self) -> None:
        self.agents.clear()
        self.names.clear()

    def record(self, agent_id: str) -> AgentRecord:
        """The agent's record (``NotFoundError`` when it is not registered)."""
        return required(self.agents, agent_id, f"agent not registered: {agent_id}")

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        """The agent's name, else ``default``, else the id itself."""
        rec = self.agents.get(agent_id)
        if rec is not None:
            return rec.passport.name
        return default if default is not None else agent_id


class ChannelTable(Mapping[str, ChannelMetadata]):
    """Channels by id (read as a mapping), their adapters and adapter states, WAL lengths, last activity."""

    __slots__ = ("adapters", "by_id", "last_activity", "states", "wal_counts")

    def __init__(self) -> None:
        self.by_id: dict[str, ChannelMetadata] = {}
        self.states: dict[str, Any] = {}
        self.adapters: dict[tuple[str, int], Any] = {}
        self.wal_counts: dict[str, int] = {}
        self.last_activity: dict[str, str] = {}

    # the mapping, read straight from the dict (these run on every post)
    def __getitem__(self, channel_id: str) -> ChannelMetadata:
        return self.by_id[channel_id]

    def __contains__(self, channel_id: object) -> bool:
        return channel_id in self.by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self.by_id)

    def __len__(self) -> int:
        return len(self.by_id)

    def get(self, channel_id: str, default: Any = None) -> Any:  # type: ignore[override]
        return self.by_id.get(channel_id, default)

    def values(self) -> Any:  # type: ignore[override]
        return self.by_id.values()

    def items(self) -> Any:  # type: ignore[override]
        return self.by_id.items()

    def keys(self) -> Any:  # type: ignore[override]
        return self.by_id.keys()

    def metadata(self, channel_id: str) -> ChannelMetadata:
        """The channel's metadata (``NotFoundError`` when unknown)."""
        return required(self.by_id, channel_id, f"channel not found: {channel_id}")

    def adapter_of(self, md: ChannelMetadata) -> Any:
        """The adapter registered for the channel's manifest, or None."""
        return self.adapters.get((md.manifest.type, md.manifest.version))

    def adapter_required(self, md: ChannelMetadata) -> Any:
        """The channel's adapter (``NotFoundError`` when none is registered for its manifest)."""
        manifest = md.manifest
        missing = f"no adapter registered for {manifest.type!r}@v{manifest.version}"
        return required(self.adapters, (manifest.type, manifest.version), missing)

    def note_appended(self, channel_id: str, env: Envelope) -> int:
        """Count one envelope the store has just appended; returns its seq."""
        seq = self.wal_counts.get(channel_id, 0) + 1
        self.wal_counts[channel_id] = seq
        self.last_activity[channel_id] = env.created_at
        return seq


class DeliveryBook:
    """Endpoints, bindings, mailboxes, unacknowledged deliveries and inbox cursors."""

    __slots__ = (
        "bindings",
        "cursors",
        "dirty_cursors",
        "endpoints",
        "mailboxes",
        "pressure_fired",
        "unacked",
    )

    def __init__(self) -> None:
        self.endpoints: dict[str, Any] = {}
        self.bindings: dict[str, Any] = {}
        self.mailboxes: dict[str, Mailbox] = {}
        self.unacked: dict[str, set[str]] = {}
        self.pressure_fired: set[str] = set()
        self.cursors: dict[str, dict[str, str]] = {}
        self.dirty_cursors: set[tuple[str, str]] = set()

    def pending(self, agent_id: str) -> int:
        """Deliveries to ``agent_id`` not acknowledged yet."""
        pending = self.unacked.get(agent_id)
        return len(pending) if pending else 0


class TaskBook:
    """Tasks by id, observed outcomes, and who has sent a peer cancel request for each task."""

    __slots__ = ("observed_outcomes", "peer_cancellers", "tasks")

    def __init__(self) -> None:
        self.tasks: dict[str, TaskMetadata] = {}
        self.observed_outcomes: set[tuple[str, str]] = set()
        self.peer_cancellers: dict[str, set[str]] = {}

    def get(self, task_id: str) -> TaskMetadata | None:
        return self.tasks.get(task_id)


@dataclass(slots=True, eq=False)
class HubCore:
    """The four tables together (each a fresh one unless given): what admission and routing read.

    ``default_rules`` is True while the arbiter is the default ``RuleBasedArbiter``: admission then makes
    its decisions (``ag2net.hub.rules``) itself; a registered arbiter makes them before admission instead.
    """

    identities: IdentityTable = field(default_factory=IdentityTable)
    channels: ChannelTable = field(default_factory=ChannelTable)
    delivery: DeliveryBook = field(default_factory=DeliveryBook)
    tasks: TaskBook = field(default_factory=TaskBook)
    default_rules: bool = field(default=True, init=False)


# ---------------------------------------------------------------------------------------- routing

_ANYONE = ["*"]  # the default inbound_from: every sender

#: Answers to an invite: the hub consumes them (its handshake opens or closes the channel), nobody receives
#: them (reference §3.6 step 11).
HANDSHAKE_ANSWERS = frozenset({EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT})


def candidates(md: ChannelMetadata, env: Envelope) -> list[str]:
    """Whom ``env`` is addressed to: its audience (as given), else every participant but the sender."""
    audience = env.audience
    if audience is not None:
        return audience
    sender_id = env.sender_id
    return [p.agent_id for p in md.participants if p.agent_id != sender_id]


def recipients(
    agents: Mapping[str, AgentRecord],
    name_for: Callable[[str], str],
    md: ChannelMetadata,
    env: Envelope,
    denied: set[str] | None = None,
    among: list[str] | None = None,
) -> list[str]:
    """Who receives ``env`` on channel ``md``, in dispatch order, whether connected or not.

    Nobody for an invite's ack or reject (the hub's handshake consumes it); else the ``candidates`` (the
    sender too when the audience lists it; ``among``: them, when the caller has them already), minus
    identities no longer registered, and minus those whose rule's ``inbound_from`` refuses the sender, or,
    while a registered arbiter decides, those it ``denied``.
    """
    if env.event_type in HANDSHAKE_ANSWERS:
        return []
    sender_id = env.sender_id
    out: list[str] = []
    sender_name: str | None = None
    for rid in candidates(md, env) if among is None else among:
        rec = agents.get(rid)
        if rec is None:
            continue
        if denied is not None:
            if rid in denied:
                continue
        elif rid != sender_id:
            inbound = rec.rule.access.inbound_from
            if inbound != _ANYONE:
                if sender_name is None:
                    sender_name = name_for(sender_id)
                if not rules.matches_any(sender_name, inbound):
                    continue
        out.append(rid)
    return out


# ---------------------------------------------------------------------------------------- admission


@dataclass(slots=True, frozen=True)
class Refused:
    """Admission said no: ``error`` is the exception a post raises (its class and message)."""

    error: NetworkError

    @property
    def error_class(self) -> type[NetworkError]:
        return type(self.error)

    @property
    def message(self) -> str:
        return str(self.error)

    @property
    def advice(self) -> str:
        """What to do about it, when admission knows (``explain_send`` appends it to the message)."""
        return "".join(getattr(self.error, "__notes__", ()))


def _advised(error: NetworkError, advice: str) -> NetworkError:
    error.add_note(advice)  # not part of str(error): a post's message stays as it was
    return error


@dataclass(slots=True)
class Admitted:
    """Admission said yes: what the shell needs to stamp, fold, append, apply and dispatch."""

    envelope: Envelope
    metadata: ChannelMetadata
    sender: AgentRecord
    adapter: Any
    state: Any
    protocol: bool
    peer_cancel: bool
    new_state: Any = None
    result: Any = field(default=None)

    def fold(self) -> None:
        """Fold the (stamped) envelope into the adapter state; pure, the result is kept here."""
        env = self.envelope
        self.new_state = self.adapter.fold(env, self.state)
        self.result = self.adapter.on_accepted(self.metadata, env, self.new_state)


def admit_sender(core: HubCore, env: Envelope) -> AgentRecord:
    """Shape, a registered sender and (default rules) its outbound and depth rules; raises a refusal."""
    check_shape(env)
    agents = core.identities.agents
    sender = agents.get(env.sender_id)
    if sender is None:  # the message is formatted only when it is raised (this runs once per post)
        raise NotFoundError(f"sender not registered: {env.sender_id}")
    if core.default_rules:
        rule = sender.rule
        audience = env.audience
        if audience and rule.access.outbound_to != ["*"]:
            names = [agents[a].passport.name for a in audience if a in agents and a != env.sender_id]
            if names:
                rules.check_outbound(sender.passport.name, rule.access.outbound_to, names)
        limit = rule.limits.delegation_depth
        if limit > 0 and env.depth > limit:  # rules.check_depth, called only when it refuses
            rules.check_depth(sender.passport.name, env.depth, limit)
    return sender


def admit_channel(core: HubCore, env: Envelope) -> tuple[ChannelMetadata, bool]:
    """The channel's state and the sender's participation: ``(metadata, peer_cancel)``; raises a refusal."""
    cid = env.channel_id
    md = core.channels.by_id.get(cid)
    if md is None:
        raise NotFoundError(f"channel not found: {cid}")
    state = md.state
    if state != ChannelState.ACTIVE:
        if state in TERMINAL:
            reason = f" (reason: {md.close_reason})" if md.close_reason else ""
            raise _advised(ProtocolError(f"channel '{cid}' is {state.value}"), f"{reason}; open a new one")
        if not is_protocol_event(env.event_type):
            raise _advised(
                ProtocolError(f"channel '{cid}' not active (state={state.value})"),
                "; wait for every invitee to ack",
            )
    sender_id = env.sender_id
    for p in md.participants:  # ``sender_id in md.participant_ids()``, without the list
        if p.agent_id == sender_id:
            return md, False
    if not is_peer_cancel(core, md, env):
        raise ProtocolError(f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'")
    return md, True


def outsiders(md: ChannelMetadata, env: Envelope) -> list[str]:
    """Audience ids that are not participants of the channel (a registered arbiter may resolve them)."""
    audience = env.audience
    if not audience:
        return []
    participants = md.participant_ids()
    return [a for a in audience if a not in participants]


def admit_send(
    core: HubCore, env: Envelope, sender: AgentRecord, md: ChannelMetadata, peer_cancel: bool, state: Any
) -> Admitted:
    """The audience, the adapter, (default rules) each recipient's inbox cap, and ``validate_send``."""
    cid = md.channel_id
    if env.audience:
        for a in outsiders(md, env)[:1]:
            raise ProtocolError(
                f"audience must list only participants of the channel; {a!r} is not one of channel '{cid}'"
            )
    table = core.channels
    manifest = md.manifest
    adapter = table.adapters.get((manifest.type, manifest.version))  # ``table.adapter_of(md)``
    if adapter is None:
        raise ProtocolError(
            f"channel '{cid}' has no registered adapter (manifest {md.manifest.type!r}@v{md.manifest.version})"
        )
    protocol = is_protocol_event(env.event_type)
    if not protocol and core.default_rules:
        agents = core.identities.agents
        unacked = core.delivery.unacked
        sender_id = env.sender_id
        audience = env.audience
        for rid in audience if audience is not None else [p.agent_id for p in md.participants]:
            if rid == sender_id:
                continue
            rec = agents.get(rid)
            if rec is not None:
                # rules.check_inbox, called only when it refuses (this runs once per recipient per post)
                cap = rec.rule.limits.inbox.max_pending
                if cap > 0:
                    pending = unacked.get(rid)
                    if pending and len(pending) >= cap:
                        rules.check_inbox(rid, len(pending), cap)
    if state is None:
        state = table.states.get(cid)
    if state is None:
        raise ProtocolError(f"channel '{cid}' has no adapter state")
    if peer_cancel and env.sender_id in core.tasks.peer_cancellers.get(env.task_id or "", ()):
        raise ProtocolError(f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'")
    adapter.validate_send(md, env, state)
    return Admitted(env, md, sender, adapter, state, protocol, peer_cancel)


def admit(core: HubCore, env: Envelope, state: Any = None) -> Admitted | Refused:
    """Every admission check, in the order a post runs them; changes nothing.

    ``state`` replaces the table's adapter state of the channel (group admission: the fold of the
    envelopes admitted before this one in the same group, not yet in the table). With a registered
    arbiter the shell asks it first (``Arbitration.consult``), then calls this: the rules the arbiter
    decides are then not checked here.
    """
    try:
        sender = admit_sender(core, env)
        md, peer_cancel = admit_channel(core, env)
        return admit_send(core, env, sender, md, peer_cancel, state)
    except NetworkError as exc:
        return Refused(name_refusal(core, exc))


class _Names(Mapping[str, str]):
    """Ids the hub knows, as people read them: an agent's name, a channel's label (``discussion·7d80``)."""

    __slots__ = ("_core",)

    def __init__(self, core: HubCore) -> None:
        self._core = core

    def __getitem__(self, key: str) -> str:
        rec = self._core.identities.agents.get(key)
        if rec is not None:
            return rec.passport.name
        md = self._core.channels.by_id.get(key)
        if md is not None:
            return channel_label(md.manifest.type, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:  # pragma: no cover - looked up by id only
        return iter(())

    def __len__(self) -> int:  # pragma: no cover
        return 0


_HEX_ID = re.compile(r"[0-9a-f]{32}")

#: "discussion channel discussion·7d80", "workflow workflow·7d80", "channel consulting·7d80" once the id is
#: named: the label says it is a channel, and of which type.
_REPEATED_TYPE = re.compile(r"\b([a-z][\w.-]*) (?:channel )?(?=\1" + SEPARATOR + ")")
_CHANNEL_WORD = re.compile(r"\bchannel (?=[a-z][\w.-]*" + SEPARATOR + r"[0-9a-f]{4,32}\b)")


def named_text(core: HubCore, text: str) -> str:
    """``text`` with the agent and channel ids the hub knows named: ``discussion·7d80 expects critic to
    speak, got root`` for ``discussion channel '<id>' expects '<id>' to speak, got '<id>'``."""
    if not _HEX_ID.search(text):
        return text
    named = name_ids(text, _Names(core))
    return _CHANNEL_WORD.sub("", _REPEATED_TYPE.sub("", named))


def name_refusal(core: HubCore, error: NetworkError) -> NetworkError:
    """A refusal's message naming the channels and participants it mentions instead of their 32-hex ids
    (its class and notes stay: it is the same exception)."""
    if error.args and isinstance(error.args[0], str):
        text = named_text(core, error.args[0])
        if text != error.args[0]:
            error.args = (text, *error.args[1:])
    return error


def apply(core: HubCore, admitted: Admitted) -> int:
    """Record an admitted, folded envelope the store has appended; returns its seq."""
    env = admitted.envelope
    cid = admitted.metadata.channel_id
    seq = core.channels.note_appended(cid, env)
    core.channels.states[cid] = admitted.new_state
    if admitted.peer_cancel:
        core.tasks.peer_cancellers.setdefault(env.task_id or "", set()).add(env.sender_id)
    return seq


def is_peer_cancel(core: HubCore, md: ChannelMetadata, env: Envelope) -> bool:
    """A task's cancel request from a non-participant peer, addressed to the task's owner only."""
    if env.event_type != EV_TASK_CANCEL_REQUEST or not env.task_id:
        return False
    task = core.tasks.tasks.get(env.task_id)
    data = env.event_data
    return (
        task is not None
        and task.state not in TERMINAL_TASKS
        and md.state == ChannelState.ACTIVE
        and task.channel_id == md.channel_id
        and env.audience == [task.owner_id]
        and set(data) == {"task_id", "reason"}
        and data.get("task_id") == env.task_id
        and isinstance(data.get("reason"), str)
        and len(data["reason"]) <= 500
    )


__all__ = [
    "HANDSHAKE_ANSWERS",
    "Admitted",
    "ChannelTable",
    "DeliveryBook",
    "HubCore",
    "IdentityTable",
    "Refused",
    "TaskBook",
    "admit",
    "admit_channel",
    "admit_send",
    "admit_sender",
    "apply",
    "candidates",
    "is_peer_cancel",
    "name_refusal",
    "named_text",
    "outsiders",
    "recipients",
]

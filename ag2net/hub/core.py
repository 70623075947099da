"""The hub's synchronous core: the components owning its in-memory state, and admission as pure functions.

``admit(core, envelope)`` decides (``Admitted`` or a ``Refused`` carrying the exact error a post raises)
and changes nothing; ``apply(core, admitted)`` records an admitted envelope once the store has it. No
awaits here: the shell (``ag2net.hub.admission``) drives them around the durable append, and
``explain_send``/``can_send`` run the same ``admit`` on a probe envelope.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import EV_TASK_CANCEL_REQUEST, Envelope, check_shape, is_protocol_event
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub import rules
from ag2net.hub.records import TERMINAL, TERMINAL_TASKS, AgentRecord
from ag2net.naming import SEPARATOR, channel_label, name_ids
from ag2net.tasks import TaskMetadata

if TYPE_CHECKING:
    from ag2net.hub.dispatch import Mailbox


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


class ChannelTable:
    """Channels, their adapters and adapter states, WAL lengths and last activity."""

    __slots__ = ("adapters", "channels", "last_activity", "states", "wal_counts")

    def __init__(self) -> None:
        self.channels: dict[str, ChannelMetadata] = {}
        self.states: dict[str, Any] = {}
        self.adapters: dict[tuple[str, int], Any] = {}
        self.wal_counts: dict[str, int] = {}
        self.last_activity: dict[str, str] = {}

    def adapter_of(self, md: ChannelMetadata) -> Any:
        """The adapter registered for the channel's manifest, or None."""
        return self.adapters.get((md.manifest.type, md.manifest.version))

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


class HubCore:
    """The four components together: what admission reads. ``rules`` is True while the arbiter is the
    default one, whose decisions (``ag2net.hub.rules``) admission then makes itself, synchronously."""

    __slots__ = ("channel_table", "identities", "inboxes", "rules", "task_book")

    def __init__(self) -> None:
        self.identities = IdentityTable()
        self.channel_table = ChannelTable()
        self.inboxes = DeliveryBook()
        self.task_book = TaskBook()
        self.rules = True


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


@dataclass(slots=True)
class Gated:
    """The channel checks passed: what ``admit_send`` needs (``unresolved``: audience ids that are not
    participants, for a registered arbiter to resolve before ``admit_send``)."""

    metadata: ChannelMetadata
    peer_cancel: bool
    unresolved: bool = False


def admit_sender(core: HubCore, env: Envelope) -> AgentRecord:
    """Shape, a registered sender and (default arbiter) its outbound and depth rules; raises a refusal."""
    check_shape(env)
    agents = core.identities.agents
    sender = agents.get(env.sender_id)
    if sender is None:
        raise NotFoundError(f"sender not registered: {env.sender_id}")
    if core.rules:
        audience = env.audience
        if audience and sender.rule.access.outbound_to != ["*"]:
            names = [agents[a].passport.name for a in audience if a in agents and a != env.sender_id]
            if names:
                rules.check_outbound(sender.passport.name, sender.rule.access.outbound_to, names)
        rules.check_depth(sender.passport.name, env.depth, sender.rule.limits.delegation_depth)
    return sender


def admit_channel(core: HubCore, env: Envelope) -> Gated:
    """The channel's state, the sender's participation and the audience; raises a refusal."""
    cid = env.channel_id
    md = core.channel_table.channels.get(cid)
    if md is None:
        raise NotFoundError(f"channel not found: {cid}")
    if md.state in TERMINAL:
        reason = f" (reason: {md.close_reason})" if md.close_reason else ""
        raise _advised(ProtocolError(f"channel '{cid}' is {md.state.value}"), f"{reason}; open a new one")
    if not is_protocol_event(env.event_type) and md.state != ChannelState.ACTIVE:
        raise _advised(
            ProtocolError(f"channel '{cid}' not active (state={md.state.value})"),
            "; wait for every invitee to ack",
        )
    participants = [p.agent_id for p in md.participants]
    peer_cancel = False
    if env.sender_id not in participants:
        if not is_peer_cancel(core, md, env):
            raise ProtocolError(
                f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'"
            )
        peer_cancel = True
    gated = Gated(md, peer_cancel)
    audience = env.audience
    if audience:
        for a in audience:
            if a not in participants:
                if not core.rules:
                    gated.unresolved = True  # a registered arbiter may resolve unknown ids first
                    return gated
                raise ProtocolError(
                    f"audience must list only participants of the channel; {a!r} is not one of channel '{cid}'"
                )
    return gated


_TABLE: Any = object()  # admit_send's default: the channel's state as the table holds it


def admit_send(
    core: HubCore, env: Envelope, sender: AgentRecord, gated: Gated, state: Any = _TABLE
) -> Admitted:
    """The adapter, (default arbiter) each recipient's inbox cap, and the adapter's ``validate_send``.

    ``state`` replaces the table's adapter state (group admission: the fold of the envelopes admitted
    before this one in the same group, not yet in the table)."""
    md = gated.metadata
    cid = md.channel_id
    table = core.channel_table
    adapter = table.adapter_of(md)
    if adapter is None:
        raise ProtocolError(
            f"channel '{cid}' has no registered adapter (manifest {md.manifest.type!r}@v{md.manifest.version})"
        )
    protocol = is_protocol_event(env.event_type)
    if not protocol and core.rules:
        agents = core.identities.agents
        inboxes = core.inboxes
        audience = env.audience
        recipients = (
            audience if audience is not None else [p for p in md.participant_ids() if p != env.sender_id]
        )
        for rid in recipients:
            if rid == env.sender_id:
                continue
            rec = agents.get(rid)
            if rec is not None:
                rules.check_inbox(rid, inboxes.pending(rid), rec.rule.limits.inbox.max_pending)
    if state is _TABLE:
        state = table.states.get(cid)
    if state is None:
        raise ProtocolError(f"channel '{cid}' has no adapter state")
    if gated.peer_cancel and env.sender_id in core.task_book.peer_cancellers.get(env.task_id or "", ()):
        raise ProtocolError(f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'")
    adapter.validate_send(md, env, state)
    return Admitted(env, md, sender, adapter, state, protocol, gated.peer_cancel)


def admit(core: HubCore, env: Envelope) -> Admitted | Refused:
    """Every admission check, in the order a post runs them; changes nothing.

    With a registered (non-default) arbiter the shell runs ``admit_sender``, ``admit_channel`` and
    ``admit_send`` itself, asking the arbiter between them; this function then decides what the
    rules alone decide (a probe).
    """
    try:
        sender = admit_sender(core, env)
        gated = admit_channel(core, env)
        if gated.unresolved:  # no arbiter here to resolve them: the refusal a post without one gives
            cid = env.channel_id
            participants = gated.metadata.participant_ids()
            for a in env.audience or ():
                if a not in participants:
                    raise ProtocolError(
                        f"audience must list only participants of the channel; {a!r} is not one of channel '{cid}'"
                    )
        return admit_send(core, env, sender, gated)
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
        md = self._core.channel_table.channels.get(key)
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
    seq = core.channel_table.note_appended(cid, env)
    core.channel_table.states[cid] = admitted.new_state
    if admitted.peer_cancel:
        core.task_book.peer_cancellers.setdefault(env.task_id or "", set()).add(env.sender_id)
    return seq


def is_peer_cancel(core: HubCore, md: ChannelMetadata, env: Envelope) -> bool:
    """A task's cancel request from a non-participant peer, addressed to the task's owner only."""
    if env.event_type != EV_TASK_CANCEL_REQUEST or not env.task_id:
        return False
    task = core.task_book.tasks.get(env.task_id)
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
    "Admitted",
    "ChannelTable",
    "DeliveryBook",
    "Gated",
    "HubCore",
    "IdentityTable",
    "Refused",
    "TaskBook",
    "admit",
    "admit_channel",
    "admit_send",
    "admit_sender",
    "apply",
    "is_peer_cancel",
    "name_refusal",
    "named_text",
]

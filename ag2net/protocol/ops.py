"""The op catalogue: every control-plane op declared once — its params, result, access rule and codec.

Each ``OpSpec`` says what crosses the wire for one op. The in-process link passes the typed values
through; the WebSocket link encodes params and decodes the result with the spec, and the server decodes
params and encodes the result with the same spec, so every link returns the same typed result. The hub's
behaviour for an op lives in ``ag2net/hub/ops.py`` (one handler per spec; a test keeps them in step) and
the server reads the access rule from here.

Adding an op: declare it below (``_declare(OpSpec(...))``), write its handler in ``ag2net/hub/ops.py``,
and, for an access rule ``POLICY``, its rule on the server's ``WirePolicy`` (``ag2net/server/policy.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError
from ag2net.identity import Passport, Resume, Rule
from ag2net.protocol.codec import BOOL, INT, JSON, STR, Codec, ListOf, Record, TupleOf, to_wire
from ag2net.protocol.records import PendingTurn
from ag2net.tasks import TaskMetadata

# ---------------------------------------------------------------------------------------------- access


@dataclass(frozen=True, slots=True)
class Access:
    """Who may run an op over a remote connection (reference §7.4). In-process callers are trusted.

    ``rule``: ``open`` (anyone), ``directory`` (anyone who may read the directory: on a token server an
    authenticated connection unless the operator opened it), ``agent`` (the connection holds the agent
    named by ``param``; with ``operators_too`` an operator may act for anyone), ``channel`` (the connection
    holds a participant of ``params.channel_id``, or is an operator), ``operator`` (the operator role),
    ``policy`` (a rule of its own on the server's policy object, named like the op)."""

    rule: str
    param: str | None = None
    operators_too: bool = False


OPEN = Access("open")
DIRECTORY = Access("directory")
CHANNEL = Access("channel")
OPERATOR = Access("operator")
POLICY = Access("policy")
ACCESS_RULES = frozenset({"open", "directory", "agent", "channel", "operator", "policy"})


def agent(param: str = "agent_id", *, operators_too: bool = False) -> Access:
    return Access("agent", param, operators_too)


# ---------------------------------------------------------------------------------------------- specs


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    codec: Codec = JSON


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One op: ``name``, its ``params`` (each with a codec), its ``result`` codec and ``access`` rule.

    ``connection``: answered by the connection itself (the observe subscription), not by the hub."""

    name: str
    params: tuple[Param, ...]
    result: Codec
    access: Access
    doc: str = ""
    connection: bool = False
    #: The params whose codec decodes something (records, envelopes): the rest is plain JSON.
    typed: tuple[Param, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "typed", tuple(p for p in self.params if p.codec is not JSON))

    def encode_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Params as JSON data (a passport keeps its claim: the hub checks it)."""
        return to_wire(params, claims=True)

    def decode_params(self, params: dict[str, Any]) -> dict[str, Any]:
        """Typed params: records and envelopes decoded in place (typed values pass through)."""
        for p in self.typed:
            value = params.get(p.name)
            if value is not None:
                params[p.name] = p.codec.decode(value)
        return params

    def encode_result(self, value: Any) -> Any:
        return self.result.encode(value)

    def decode_result(self, data: Any) -> Any:
        return self.result.decode(data)


OPS: dict[str, OpSpec] = {}


def _declare(
    name: str, params: str | tuple[Any, ...], result: Codec, access: Access, doc: str, **kw: Any
) -> None:
    """``params``: space-separated plain JSON names, or a tuple mixing names and ``Param``s."""
    items = params.split() if isinstance(params, str) else params
    spec = OpSpec(
        name, tuple(p if isinstance(p, Param) else Param(p) for p in items), result, access, doc, **kw
    )
    if name in OPS:
        raise ValueError(f"op {name!r} is declared twice")
    OPS[name] = spec


def spec_for(name: str) -> OpSpec:
    spec = OPS.get(name)
    if spec is None:
        raise ProtocolError(f"unknown control-plane op: {name!r}")
    return spec


PASSPORT = Record(Passport)
RESUME = Record(Resume)
RULE = Record(Rule)
CHANNEL_MD = Record(ChannelMetadata)
TASK = Record(TaskMetadata)
ENVELOPE = Record(Envelope, "post_envelope needs params.envelope as an envelope object")
WAL_PAGE = ListOf(Record(Envelope))
OPTIONAL_ENVELOPE = Record(Envelope)

# --- identities
_declare(
    "register",
    (Param("passport", PASSPORT), Param("resume", RESUME), "skill_md", Param("rule", RULE), "bind"),
    PASSPORT,
    POLICY,
    "register an identity (and bind it to this connection unless bind=False)",
)
_declare(
    "bind",
    "name auth_scheme auth_claim",
    PASSPORT,
    POLICY,
    "bind an existing identity to this connection, presenting its credentials",
)
_declare("unbind", "agent_id", JSON, agent(), "stop delivering an identity's envelopes to this connection")
_declare("unregister", "agent_id", JSON, agent(), "remove an identity")
_declare("get_agent", "name_or_id", PASSPORT, DIRECTORY, "a passport by name or id (claims stripped)")
_declare("get_resume", "agent_id", RESUME, DIRECTORY, "an agent's resume")
_declare("get_rule", "agent_id", RULE, DIRECTORY, "an agent's rule")
_declare("get_skill", "agent_id", JSON, DIRECTORY, "an agent's skill card markdown, or null")
_declare("get_skill_info", "agent_id", JSON, DIRECTORY, "the skill card, or the generated fallback")
_declare("find_agent_id", "name", JSON, DIRECTORY, "the id registered under a name, or null")
_declare("names_for", "agent_ids", JSON, DIRECTORY, "{agent_id: name} for known ids")
_declare("list_agents", "capability query kind sort_by limit", ListOf(PASSPORT), DIRECTORY, "the directory")
_declare(
    "presence",
    "agent_ids",
    JSON,
    DIRECTORY,
    "{agent_id: online} for registered identities (all, or those of agent_ids): bound to a live connection now",
)
_declare("set_resume", ("agent_id", Param("resume", RESUME)), RESUME, agent(), "replace an agent's resume")
_declare("set_skill", "agent_id skill_md", JSON, agent(), "replace (or clear) an agent's skill card")
_declare("set_rule", ("agent_id", Param("rule", RULE)), RULE, agent(), "replace an agent's rule")
# --- channels and the WAL
_declare(
    "create_channel",
    "creator_id manifest_type manifest_version participants required_acks ttl knobs intent labels",
    CHANNEL_MD,
    agent("creator_id"),
    "open a channel (invites go out to the participants)",
)
_declare("get_channel", "channel_id", CHANNEL_MD, CHANNEL, "a channel's metadata")
_declare(
    "list_channels",
    "agent_id state include_terminal limit",
    ListOf(CHANNEL_MD),
    POLICY,
    "channels (of an agent; over a socket only those the connection may see)",
)
_declare("channel_stats", "", JSON, POLICY, "{channel_id: {wal_count, ...}} for live channels")
_declare("close_channel", "channel_id reason", CHANNEL_MD, CHANNEL, "close a channel")
_declare(
    "post_envelope",
    (Param("envelope", ENVELOPE),),
    STR,
    POLICY,
    "admit an envelope: durable when this returns its id",
)
_declare("read_wal", "channel_id since until", WAL_PAGE, CHANNEL, "a channel's envelopes by index")
_declare(
    "read_wal_seq",
    "channel_id first_seq last_seq",
    ListOf(TupleOf((INT, Record(Envelope)))),
    CHANNEL,
    "(seq, envelope) pairs for a seq range",
)
_declare(
    "read_wal_until", "channel_id envelope_id", WAL_PAGE, CHANNEL, "the WAL up to and including an envelope"
)
_declare("wal_count", "channel_id", INT, CHANNEL, "how many envelopes a channel's WAL holds")
_declare(
    "find_envelope_by_causation",
    "channel_id sender_id causation_id",
    OPTIONAL_ENVELOPE,
    CHANNEL,
    "the envelope a sender posted in answer to another, or null",
)
_declare(
    "can_send",
    "channel_id sender_id event_type",
    BOOL,
    agent("sender_id", operators_too=True),
    "whether admission would accept a send now",
)
_declare(
    "explain_send",
    "channel_id sender_id event_type",
    TupleOf((BOOL, STR)),
    agent("sender_id", operators_too=True),
    "(allowed, why) for a send",
)
_declare(
    "dry_run",
    (Param("envelope", Record(Envelope, "dry_run needs params.envelope as an envelope object")),),
    JSON,
    POLICY,
    "what posting an envelope would do now (verdict, recipients, projections, adapter state); writes nothing",
)
# --- turns
_declare(
    "pending_turns_for",
    "agent_id",
    ListOf(Record(PendingTurn)),
    agent(operators_too=True),
    "the turns the hub expects of an agent",
)
_declare(
    "report_turn_failure",
    "channel_id agent_id envelope_id error exc_type",
    JSON,
    POLICY,
    "tell the hub a turn failed",
)
_declare("record_turn", "record", STR, POLICY, "store a turn record; returns the hub-assigned turn_id")
_declare(
    "list_turns",
    "channel_id agent_id trigger_envelope_id limit",
    JSON,
    POLICY,
    "turn records (dicts), newest first",
)
# --- tasks
_declare("get_task", "task_id", TASK, POLICY, "a task's metadata")
_declare("list_tasks", "agent_id channel_id state limit", ListOf(TASK), POLICY, "tasks")
_declare("observe_task", (Param("metadata", TASK),), TASK, POLICY, "start (or refresh) observing a task")
_declare("update_task", "task_id state progress result error", TASK, POLICY, "move a task on")
_declare(
    "record_observation",
    "owner_id capability outcome latency_ms task_id",
    JSON,
    POLICY,
    "an observed outcome feeding the owner's observed resume",
)
_declare("fire_task_event", "task_id kind payload", JSON, POLICY, "a task event for the hub's listeners")
_declare("checkpoint_task", "task_id state", JSON, POLICY, "store a task's checkpoint (last write wins)")
_declare("read_task_checkpoint", "task_id", JSON, POLICY, "a task's last checkpoint, or null")
# --- knowledge, audit, health
_declare("add_knowledge", "agent_id text source", INT, agent(), "add to an agent's knowledge store")
_declare(
    "search_knowledge",
    "agent_id query limit",
    JSON,
    agent(operators_too=True),
    "an agent's knowledge items containing a query",
)
_declare(
    "list_audit", "since limit", ListOf(TupleOf((INT, JSON))), OPERATOR, "(position, record) audit pairs"
)
_declare("health", "", JSON, DIRECTORY, "an in-memory snapshot of the hub")
_declare("observe_position", "", INT, OPERATOR, "the observe stream's newest position")
_declare("adapter_types", "", ListOf(STR), OPEN, "the channel types the hub can open")
# --- the connection's own ops (the observe subscription over a socket)
_declare(
    "observe",
    "subscription since incarnation",
    JSON,
    OPERATOR,
    "stream the observe log to this connection",
    connection=True,
)
_declare("unobserve", "subscription", JSON, OPERATOR, "stop a subscription", connection=True)
_declare(
    "rotate_secret",
    "agent_id",
    JSON,
    agent(operators_too=True),
    "a new identity secret for its holder (token servers): the old one is refused from then on",
    connection=True,
)


def hub_ops() -> frozenset[str]:
    """The ops the hub answers (every declared op but the connection's own)."""
    return frozenset(name for name, spec in OPS.items() if not spec.connection)


__all__ = [
    "ACCESS_RULES",
    "CHANNEL",
    "DIRECTORY",
    "OPEN",
    "OPERATOR",
    "OPS",
    "POLICY",
    "Access",
    "OpSpec",
    "Param",
    "agent",
    "hub_ops",
    "spec_for",
]

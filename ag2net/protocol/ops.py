"""The op catalogue: every control-plane op is one request class, declared once.

``@op(name, result, access, doc)`` on a class of fields makes it a frozen request dataclass and its
``OpSpec``: the fields are the op's params (in wire order, each with its check and codec), ``result`` the
result's codec, ``access`` who may run it over a socket. From that one declaration follow the typed client
call (``HubClient.request(ReadWal(channel_id=...))`` returns the op's typed result on every link), the
params' validation (``OpSpec.parse``), the codec both ends of the WebSocket use, and the rule the server's
policy enforces. The hub's behaviour for an op is its method of the same name (``ag2net/hub/ops.py``
calls it with the request's fields), or a handler there when the op needs the calling connection.

Adding an op: declare its request class below, give the hub its behaviour, write its tests (see the
README's "Adding an op").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, MISSING, dataclass, field, fields
from typing import Any, ClassVar, Generic, TypeVar, dataclass_transform

from ag2net.breakpoints import Breakpoint, Decision, WaitingItem
from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError
from ag2net.identity import Passport, Resume, Rule
from ag2net.protocol.codec import BOOL, INT, JSON, STR, Codec, ListOf, Record, TupleOf, to_wire
from ag2net.protocol.records import PendingTurn
from ag2net.tasks import TaskMetadata

R = TypeVar("R")
T = TypeVar("T")

# ---------------------------------------------------------------------------------------------- access


@dataclass(frozen=True, slots=True)
class Access:
    """Who may run an op over a remote connection (reference §7.4). In-process callers are trusted.

    ``rule``: ``open`` (anyone), ``directory`` (anyone who may read the directory: on a token server an
    authenticated connection unless the operator opened it), ``agent`` (the connection holds the agent
    named by ``param``; with ``operators_too`` an operator may act for anyone), ``channel`` (the connection
    holds a participant of ``params.channel_id``, or is an operator), ``operator`` (the operator role),
    ``policy`` (a rule of its own on the server's policy object, ``WirePolicy``, named like the op).

    ``caller``: the hub checks a rule of its own for this op before its behaviour, for every caller,
    in-process ones included (``ag2net.hub.access.CALLER_RULES``). Each rule has exactly one home: the
    kinds above are read from this tag by the server; a ``policy`` rule's body is its ``WirePolicy``
    method; a ``caller`` rule's body is its entry in ``CALLER_RULES`` (a test checks the tags and the
    homes agree both ways)."""

    rule: str
    param: str | None = None
    operators_too: bool = False
    caller: bool = False


OPEN = Access("open")
DIRECTORY = Access("directory")
CHANNEL = Access("channel")
OPERATOR = Access("operator")
POLICY = Access("policy")
#: A socket's own rule on ``WirePolicy`` plus the hub's rule for every caller (``CALLER_RULES``).
POLICY_AND_CALLER = Access("policy", caller=True)
ACCESS_RULES = frozenset({"open", "directory", "agent", "channel", "operator", "policy"})


def agent(param: str = "agent_id", *, operators_too: bool = False) -> Access:
    return Access("agent", param, operators_too)


# ---------------------------------------------------------------------------------------------- params

#: How a param's wire value is checked when a request is parsed from JSON params.
#: ``str``: a string, required; ``opt_str``: a string or null; ``int``/``bool``: converted with
#: ``int()``/``bool()``; ``or_empty``: a missing or empty value reads as ``""``; ``value``: an enum member
#: (anything with a ``value``) reads as its value; ``json``: taken as it is.
CHECKS = frozenset({"str", "opt_str", "int", "bool", "or_empty", "value", "json"})


def param(
    *,
    default: Any = MISSING,
    codec: Codec = JSON,
    check: str = "json",
    key: str | None = None,
    omit: bool = False,
    kw_only: bool = False,
) -> Any:
    """One field of a request: its ``default`` (none: required), ``codec`` (records decode), ``check``
    (see ``CHECKS``), wire ``key`` (default: the field's name) and ``omit`` (not sent while it holds its
    default: the params ag2 1.2.1 leaves out, and the server's own)."""
    if check not in CHECKS:
        raise ValueError(f"unknown param check {check!r}; one of {sorted(CHECKS)}")
    meta = {"codec": codec, "check": check, "key": key, "omit": omit}
    keyword: Any = True if kw_only else MISSING  # MISSING: as the class says
    if default is MISSING:
        return field(metadata=meta, kw_only=keyword)
    return field(default=default, metadata=meta, kw_only=keyword)


@dataclass(frozen=True, slots=True)
class Param:
    """One param as the wire sees it: its ``name`` (the JSON key) and its ``codec``."""

    name: str
    codec: Codec = JSON
    check: str = "json"
    attr: str = ""
    default: Any = None
    required: bool = False
    omit: bool = False

    def read(self, params: dict[str, Any]) -> Any:
        """This param's value in JSON (or typed) params: its default when missing (a missing required
        number is a ``KeyError``; any other required param is refused by its check, in its own words)."""
        value = params.get(self.name, MISSING)
        if value is MISSING:
            if self.required and self.check == "int":
                raise KeyError(self.name)  # a missing number is answered as such
            return self.default  # None for a required one: its check says what it must be
        return value

    def settle(self, value: Any) -> Any:
        """``value`` checked and made typed (records decoded, ``int``/``bool`` converted), or a
        ``ProtocolError`` that names the param."""
        check = self.check
        if check == "json":
            return value if self.codec is JSON or value is None else self.codec.decode(value)
        if check == "str":
            if not isinstance(value, str):
                raise ProtocolError(f"params.{self.name} must be a string")
            return value
        if check == "opt_str":
            if value is not None and not isinstance(value, str):
                raise ProtocolError(f"params.{self.name} must be a string")
            return value
        if check == "int":
            return value if value is None or type(value) is int else int(value)
        if check == "bool":
            return bool(value)
        if check == "value":
            return getattr(value, "value", value)
        return value or ""  # or_empty


# ---------------------------------------------------------------------------------------------- specs


@dataclass(frozen=True, slots=True)
class OpSpec:
    """One op: ``name``, its ``params``, its ``result`` codec and ``access`` rule, and its request class.

    ``connection``: answered by the connection itself (the observe subscription), not by the hub."""

    name: str
    params: tuple[Param, ...]
    result: Codec
    access: Access
    doc: str = ""
    connection: bool = False
    request: type[Request[Any]] | None = None
    #: The params whose codec decodes something (records, envelopes): the rest is plain JSON.
    typed: tuple[Param, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "typed", tuple(p for p in self.params if p.codec is not JSON))

    def parse(self, params: dict[str, Any]) -> Request[Any]:
        """The typed request of JSON (or typed) params: each param checked and decoded, unknown ones
        ignored, then the op's own ``check``."""
        assert self.request is not None
        return self.request(**{p.attr: p.read(params) for p in self.params})

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


class Request(Generic[R]):
    """A request of one op (``R``: its typed result). Subclasses are declared with ``@op``.

    Making one checks it, however it is made (by a client's method, or parsed from the wire): each
    param's own check (``Param.settle``), then the op's ``check``."""

    __slots__ = ()
    spec: ClassVar[OpSpec]

    def __post_init__(self) -> None:
        for p in self.spec.params:
            value = getattr(self, p.attr)
            settled = p.settle(value)
            if settled is not value:
                object.__setattr__(self, p.attr, settled)
        self.check()

    def to_params(self) -> dict[str, Any]:
        """The params as typed values, keyed and ordered as on the wire (``omit`` ones left out at
        their default)."""
        out: dict[str, Any] = {}
        for p in self.spec.params:
            value = getattr(self, p.attr)
            if p.omit and value == p.default:
                continue
            out[p.name] = value
        return out

    def check(self) -> None:
        """What the op refuses beyond each param's own check (overridden per op)."""


@dataclass_transform(frozen_default=True, field_specifiers=(param,))
def _request_fields(cls: type[T]) -> type[T]:
    """The fields of a request base class that ``@op`` classes extend (a frozen dataclass, no op)."""
    return dataclass(frozen=True, slots=True)(cls)


@_request_fields
class AgentRequest(Request[R]):
    """A request about one agent: ``agent_id`` is its first param (or its only one)."""

    agent_id: str = param(check="str")


OPS: dict[str, OpSpec] = {}
_PLAIN: Mapping[str, Any] = {"codec": JSON, "check": "json", "key": None, "omit": False}


@dataclass_transform(frozen_default=True, field_specifiers=(param,))
def op(
    name: str, result: Codec, access: Access, doc: str, *, connection: bool = False
) -> Callable[[type[T]], type[T]]:
    """Declare the request class of op ``name`` (a frozen dataclass) and its ``OpSpec``. The fields'
    order and kinds (``_: KW_ONLY``, ``param(kw_only=True)``) are the client method's signature."""

    def declare(cls: type[T]) -> type[T]:
        if name in OPS:
            raise ValueError(f"op {name!r} is declared twice")
        made = dataclass(frozen=True, slots=True)(cls)
        params = []
        for f in fields(made):  # type: ignore[arg-type]
            meta: Mapping[str, Any] = f.metadata or _PLAIN
            required = f.default is MISSING
            default = None if required else f.default
            key = meta["key"] or f.name
            params.append(Param(key, meta["codec"], meta["check"], f.name, default, required, meta["omit"]))
        spec = OpSpec(name, tuple(params), result, access, doc, connection, made)  # type: ignore[arg-type]
        made.spec = spec  # type: ignore[attr-defined]
        OPS[name] = spec
        return made

    return declare


def spec_for(name: str) -> OpSpec:
    spec = OPS.get(name)
    if spec is None:
        raise ProtocolError(f"unknown control-plane op: {name!r}")
    return spec


def encode_result(value: Any, op: str | None = None) -> Any:
    """An op's result as JSON data, by the op's codec (an unknown op's by the plain JSON codec)."""
    spec = OPS.get(op) if op is not None else None
    return spec.encode_result(value) if spec is not None else to_wire(value)


def request_of(name: str, params: dict[str, Any]) -> Request[Any]:
    """The typed request of op ``name`` from its params (``HubClient.call(name, **params)``)."""
    return spec_for(name).parse(params)


PASSPORT = Record(Passport)
RESUME = Record(Resume)
RULE = Record(Rule)
CHANNEL_MD = Record(ChannelMetadata)
TASK = Record(TaskMetadata)
ENVELOPE = Record(Envelope, "post_envelope needs params.envelope as an envelope object")
DRY_RUN_ENVELOPE = Record(Envelope, "dry_run needs params.envelope as an envelope object")
WAL_PAGE = ListOf(Record(Envelope))
OPTIONAL_ENVELOPE = Record(Envelope)
#: How many items a listing answers when the caller names no limit (``list_agents`` … ``list_turns``).
DEFAULT_LIMIT = 50
#: How many knowledge items ``search_knowledge`` answers by default.
DEFAULT_KNOWLEDGE_LIMIT = 10

_CHANNEL_STATES = frozenset(s.value for s in ChannelState)


def _limit_check(value: Any, *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ProtocolError("params.limit must be a non-negative integer" + (" or null" if nullable else ""))


def _required(value: Any, name: str, cls: type) -> None:
    if value is None:
        raise ProtocolError(f"params.{name} is required: a {cls.__name__} object")


# ---------------------------------------------------------------------------------------------- identities


@op(
    "register",
    PASSPORT,
    POLICY,
    "register an identity (and bind it to this connection unless bind=False)",
)
class Register(Request[Passport]):
    _: KW_ONLY
    passport: Passport = param(codec=PASSPORT)
    resume: Resume | None = param(default=None, codec=RESUME)
    skill_md: str | None = param(default=None, omit=True)
    rule: Rule | None = param(default=None, codec=RULE)
    bind: bool = param(default=True, check="bool", omit=True)
    #: Set by the WebSocket server only (a client's own ``_secret_digest`` is dropped before this).
    secret_digest: Any = param(default=None, key="_secret_digest", omit=True)

    def check(self) -> None:
        if self.passport is None:
            raise ProtocolError("register needs params.passport")


@op(
    "bind",
    PASSPORT,
    POLICY,
    "bind an existing identity to this connection, presenting its credentials",
)
class Bind(Request[Passport]):
    _: KW_ONLY
    name: str = param(check="str")
    auth_scheme: str | None = param(default=None, omit=True)
    auth_claim: dict[str, Any] | None = param(default=None, omit=True)


@op("unbind", JSON, agent(), "stop delivering an identity's envelopes to this connection")
class Unbind(AgentRequest[None]): ...


@op("unregister", JSON, agent(), "remove an identity")
class Unregister(AgentRequest[None]): ...


@op("get_agent", PASSPORT, DIRECTORY, "a passport by name or id (claims stripped)")
class GetAgent(Request[Passport]):
    name_or_id: str = param(check="str")


@op("get_resume", RESUME, DIRECTORY, "an agent's resume")
class GetResume(AgentRequest[Resume]): ...


@op("get_rule", RULE, DIRECTORY, "an agent's rule")
class GetRule(AgentRequest[Rule]): ...


@op("get_skill", JSON, DIRECTORY, "an agent's skill card markdown, or null")
class GetSkill(AgentRequest[str | None]): ...


@op("get_skill_info", JSON, DIRECTORY, "the skill card, or the generated fallback")
class GetSkillInfo(AgentRequest[dict[str, Any]]): ...


@op("find_agent_id", JSON, DIRECTORY, "the id registered under a name, or null")
class FindAgentId(Request[str | None]):
    name: str = param(check="str")


@op("names_for", JSON, DIRECTORY, "{agent_id: name} for known ids")
class NamesFor(Request[dict[str, str]]):
    agent_ids: list[str] | None = param(default=None)

    def check(self) -> None:
        if self.agent_ids is not None and not isinstance(self.agent_ids, list):
            raise ProtocolError("params.agent_ids must be a list of ids")


@op("list_agents", ListOf(PASSPORT), DIRECTORY, "the directory")
class ListAgents(Request[list[Passport]]):
    _: KW_ONLY
    capability: str | None = param(default=None, check="opt_str")
    query: str | None = param(default=None, check="opt_str")
    kind: str | None = param(default=None, check="opt_str")
    sort_by: str | None = param(default=None, check="opt_str")
    limit: int | None = param(default=DEFAULT_LIMIT)

    def check(self) -> None:
        _limit_check(self.limit, nullable=True)


@op(
    "presence",
    JSON,
    DIRECTORY,
    "{agent_id: online} for registered identities (all, or those of agent_ids): bound to a live connection now",
)
class Presence(Request[dict[str, bool]]):
    """``{agent_id: online}``: whether each registered identity is bound to a live connection now."""

    agent_ids: list[str] | None = param(default=None)

    def check(self) -> None:
        ids = self.agent_ids
        if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
            raise ProtocolError(
                "params.agent_ids must be a list of agent ids (strings) or null for every identity"
            )


@op("set_resume", RESUME, agent(), "replace an agent's resume")
class SetResume(AgentRequest[Resume]):
    resume: Resume = param(codec=RESUME)

    def check(self) -> None:
        _required(self.resume, "resume", Resume)


@op("set_skill", JSON, agent(), "replace (or clear) an agent's skill card")
class SetSkill(AgentRequest[None]):
    skill_md: str | None = param(default=None)


@op("set_rule", RULE, agent(), "replace an agent's rule")
class SetRule(AgentRequest[Rule]):
    rule: Rule = param(codec=RULE)

    def check(self) -> None:
        _required(self.rule, "rule", Rule)


# ---------------------------------------------------------------------------------------------- channels, WAL


@op(
    "create_channel",
    CHANNEL_MD,
    agent("creator_id"),
    "open a channel (invites go out to the participants)",
)
class CreateChannel(Request[ChannelMetadata]):
    _: KW_ONLY
    creator_id: str = param(check="str")
    manifest_type: str = param(check="str")
    manifest_version: int = param(default=1, check="int")
    participants: list[str] | None = param(default=None)  # required: ``check`` says so
    required_acks: int | None = param(default=None)
    ttl: Any = param(default=None)
    knobs: dict[str, Any] | None = param(default=None)
    intent: str | None = param(default=None)
    labels: dict[str, Any] | None = param(default=None)

    def check(self) -> None:
        if not isinstance(self.participants, list):
            raise ProtocolError("params.participants must be a list of agent ids")


@op("get_channel", CHANNEL_MD, CHANNEL, "a channel's metadata")
class GetChannel(Request[ChannelMetadata]):
    channel_id: str = param(check="str")


@op(
    "list_channels",
    ListOf(CHANNEL_MD),
    POLICY,
    "channels (of an agent; over a socket only those the connection may see)",
)
class ListChannels(Request[list[ChannelMetadata]]):
    _: KW_ONLY
    agent_id: str | None = param(default=None)
    state: str | None = param(default=None, check="opt_str", omit=True)
    include_terminal: bool = param(default=False, check="bool")
    limit: int | None = param(default=DEFAULT_LIMIT)

    def check(self) -> None:
        if self.state is not None and self.state not in _CHANNEL_STATES:
            allowed = ", ".join(s.value for s in ChannelState)
            raise ProtocolError(f"params.state must be one of {allowed}; got {self.state!r}")


@op("channel_stats", JSON, POLICY, "{channel_id: {wal_count, ...}} for live channels")
class ChannelStats(Request[dict[str, dict[str, Any]]]):
    pass


@op("close_channel", CHANNEL_MD, CHANNEL, "close a channel")
class CloseChannel(Request[ChannelMetadata]):
    channel_id: str = param(check="str")
    reason: str = param(default="", check="or_empty", kw_only=True)


@op("post_envelope", STR, POLICY_AND_CALLER, "admit an envelope: durable when this returns its id")
class PostEnvelope(Request[str]):
    envelope: Envelope = param(codec=ENVELOPE)

    def __post_init__(self) -> None:  # an Envelope passes settle and check unchanged: once per post
        if type(self.envelope) is not Envelope:
            Request.__post_init__(self)

    def check(self) -> None:
        if not isinstance(self.envelope, Envelope):
            raise ProtocolError(ENVELOPE.message)


@op("read_wal", WAL_PAGE, CHANNEL, "a channel's envelopes by index")
class ReadWal(Request[list[Envelope]]):
    channel_id: str = param(check="str")
    since: int = param(default=0, check="int", kw_only=True)
    until: int | None = param(default=None, kw_only=True)


@op(
    "read_wal_seq",
    ListOf(TupleOf((INT, Record(Envelope)))),
    CHANNEL,
    "(seq, envelope) pairs for a seq range",
)
class ReadWalSeq(Request[list[tuple[int, Envelope]]]):
    channel_id: str = param(check="str")
    first_seq: int = param(check="int")
    last_seq: int = param(check="int")


@op("read_wal_until", WAL_PAGE, CHANNEL, "the WAL up to and including an envelope")
class ReadWalUntil(Request[list[Envelope]]):
    channel_id: str = param(check="str")
    envelope_id: str = param(check="str")


@op("wal_count", INT, CHANNEL, "how many envelopes a channel's WAL holds")
class WalCount(Request[int]):
    channel_id: str = param(check="str")


@op(
    "find_envelope_by_causation",
    OPTIONAL_ENVELOPE,
    CHANNEL,
    "the envelope a sender posted in answer to another, or null",
)
class FindEnvelopeByCausation(Request[Envelope | None]):
    channel_id: str = param(check="str")
    sender_id: str = param(check="str", kw_only=True)
    causation_id: str = param(check="str", kw_only=True)


@op("can_send", BOOL, agent("sender_id", operators_too=True), "whether admission would accept a send now")
class CanSend(Request[bool]):
    channel_id: str = param(check="str")
    sender_id: str = param(check="str")
    event_type: str | None = param(default=None, kw_only=True)


@op("explain_send", TupleOf((BOOL, STR)), agent("sender_id", operators_too=True), "(allowed, why) for a send")
class ExplainSend(Request[tuple[bool, str]]):
    channel_id: str = param(check="str")
    sender_id: str = param(check="str")
    event_type: str | None = param(default=None, kw_only=True)


@op(
    "dry_run",
    JSON,
    POLICY,
    "what posting an envelope would do now (verdict, recipients, projections, adapter state); writes nothing",
)
class DryRun(Request[dict[str, Any]]):
    envelope: Envelope = param(codec=DRY_RUN_ENVELOPE)

    def check(self) -> None:
        if not isinstance(self.envelope, Envelope):
            raise ProtocolError(DRY_RUN_ENVELOPE.message)


# ---------------------------------------------------------------------------------------------- turns


@op(
    "pending_turns_for",
    ListOf(Record(PendingTurn)),
    agent(operators_too=True),
    "the turns the hub expects of an agent",
)
class PendingTurnsFor(AgentRequest[list[Any]]): ...  # PendingTurn records (typed Any: callers read dicts too)


@op("report_turn_failure", JSON, POLICY, "tell the hub a turn failed")
class ReportTurnFailure(Request[None]):
    _: KW_ONLY
    channel_id: str = param(check="str")
    agent_id: str = param(check="str")
    envelope_id: str = param(check="str")
    exc_type: str = param(default="Error")
    #: The error's text (in-process: the exception itself, for the hub's listeners).
    error: Any = param(default="")


@op("record_turn", STR, POLICY_AND_CALLER, "store a turn record; returns the hub-assigned turn_id")
class RecordTurn(Request[str]):
    record: dict[str, Any] = param()

    def check(self) -> None:
        if not isinstance(self.record, dict):
            raise ProtocolError("params.record must be a turn record object")


@op("list_turns", JSON, POLICY_AND_CALLER, "turn records (dicts), newest first")
class ListTurns(Request[list[dict[str, Any]]]):
    _: KW_ONLY
    channel_id: str | None = param(default=None, check="opt_str")
    agent_id: str | None = param(default=None, check="opt_str")
    trigger_envelope_id: str | None = param(default=None, check="opt_str")
    limit: int = param(default=DEFAULT_LIMIT)

    def check(self) -> None:
        if self.limit is not None:  # null reads as the default
            _limit_check(self.limit, nullable=False)


# ---------------------------------------------------------------------------------------------- tasks


@op("get_task", TASK, POLICY, "a task's metadata")
class GetTask(Request[TaskMetadata]):
    task_id: str = param(check="str")


@op("list_tasks", ListOf(TASK), POLICY, "tasks")
class ListTasks(Request[list[TaskMetadata]]):
    _: KW_ONLY
    agent_id: str | None = param(default=None)
    channel_id: str | None = param(default=None)
    state: Any = param(default=None, check="value")
    limit: int | None = param(default=DEFAULT_LIMIT)


@op("observe_task", TASK, POLICY, "start (or refresh) observing a task")
class ObserveTask(Request[TaskMetadata]):
    metadata: TaskMetadata = param(codec=TASK)


@op("update_task", TASK, POLICY, "move a task on")
class UpdateTask(Request[TaskMetadata]):
    task_id: str = param(check="str")
    state: Any = param(default=None, check="value", kw_only=True)
    progress: Any = param(default=None, kw_only=True)
    result: Any = param(default=None, kw_only=True)
    error: Any = param(default=None, kw_only=True)


@op(
    "record_observation",
    JSON,
    POLICY,
    "an observed outcome feeding the owner's observed resume",
)
class RecordObservation(Request[None]):
    """Record an observed outcome of ``owner_id`` on ``capability`` (feeds its observed resume)."""

    _: KW_ONLY
    owner_id: str = param(check="str")
    capability: str = param(check="str")
    outcome: Any = param(default=None, check="value")
    latency_ms: float | None = param(default=None)
    task_id: str | None = param(default=None)


@op("fire_task_event", JSON, POLICY, "a task event for the hub's listeners")
class FireTaskEvent(Request[None]):
    task_id: str = param(check="str")
    kind: str = param(check="str")
    payload: dict[str, Any] = param()


@op("checkpoint_task", JSON, POLICY, "store a task's checkpoint (last write wins)")
class CheckpointTask(Request[None]):
    """Store ``state`` as the checkpoint of ``task_id`` in the hub (the last write wins, no history)."""

    task_id: str = param(check="str")
    state: dict[str, Any] = param()

    def check(self) -> None:
        if not isinstance(self.state, dict):
            raise ProtocolError("params.state must be a JSON object: the checkpoint to store")


@op("read_task_checkpoint", JSON, POLICY, "a task's last checkpoint, or null")
class ReadTaskCheckpoint(Request[dict[str, Any] | None]):
    """The checkpoint last stored for ``task_id``, or None if there is none."""

    task_id: str = param(check="str")


# ---------------------------------------------------------------------------------------------- knowledge, audit


@op("add_knowledge", INT, agent(), "add to an agent's knowledge store")
class AddKnowledge(AgentRequest[int]):
    text: str = param(check="str")
    source: str = param(default="", check="or_empty", kw_only=True)


@op(
    "search_knowledge",
    JSON,
    agent(operators_too=True),
    "an agent's knowledge items containing a query",
)
class SearchKnowledge(AgentRequest[list[dict[str, Any]]]):
    query: str = param(check="str")
    limit: int = param(default=DEFAULT_KNOWLEDGE_LIMIT, check="int")


@op("list_audit", ListOf(TupleOf((INT, JSON))), OPERATOR, "(position, record) audit pairs")
class ListAudit(Request[list[tuple[int, dict[str, Any]]]]):
    _: KW_ONLY
    since: int = param(default=0, check="int")
    limit: int | None = param(default=None)


@op("health", JSON, DIRECTORY, "an in-memory snapshot of the hub")
class Health(Request[dict[str, Any]]):
    pass


@op("observe_position", INT, OPERATOR, "the observe stream's newest position")
class ObservePosition(Request[int]):
    pass


@op("adapter_types", ListOf(STR), OPEN, "the channel types the hub can open")
class AdapterTypes(Request[list[str]]):
    pass


# ---------------------------------------------------------------------------------------------- stepping in
# Breakpoints, step mode, paused turns, approvals (``ag2net.breakpoints``; docs/breakpoints.md). ``by``: who
# set or answered; the WebSocket server sets it from the connection, an in-process caller names itself.

BREAKPOINT = Record(Breakpoint)
WAITING = Record(WaitingItem)
DECISION = Record(Decision)


@op("break_on", BREAKPOINT, OPERATOR, "set a breakpoint: hold matching posts, or pause matching turns")
class BreakOn(Request[Breakpoint]):
    #: The breakpoint's spec (``spec`` on the wire; ``Request.spec`` is the op's own).
    query: str = param(check="str", key="spec")
    _: KW_ONLY
    on: str = param(default="envelope", check="str")
    enabled: bool = param(default=True, check="bool")
    by: str = param(default="", check="or_empty", omit=True)


@op("list_breakpoints", ListOf(BREAKPOINT), OPERATOR, "the breakpoints, oldest first")
class ListBreakpoints(Request[list[Breakpoint]]):
    pass


@op("set_breakpoint", BREAKPOINT, OPERATOR, "enable or disable a breakpoint")
class SetBreakpoint(Request[Breakpoint]):
    breakpoint_id: str = param(check="str")
    enabled: bool = param(check="bool")


@op("remove_breakpoint", JSON, OPERATOR, "remove a breakpoint")
class RemoveBreakpoint(Request[None]):
    breakpoint_id: str = param(check="str")


@op("step_mode", JSON, OPERATOR, "hold every substantive post of a channel (no channel: the network)")
class StepMode(Request[dict[str, Any]]):
    channel_id: str | None = param(default=None, check="opt_str")
    on: bool = param(default=True, check="bool")


@op("pause_expectations", JSON, OPERATOR, "pause (or resume) a channel's expectation clock")
class PauseExpectations(Request[dict[str, Any]]):
    channel_id: str = param(check="str")
    paused: bool = param(default=True, check="bool")


@op("list_waiting", ListOf(WAITING), OPERATOR, "what waits on a person: held posts, paused turns, approvals")
class ListWaiting(Request[list[WaitingItem]]):
    _: KW_ONLY
    channel_id: str | None = param(default=None, check="opt_str")


@op("answer_waiting", WAITING, OPERATOR, "answer one waiting item (exactly once)")
class AnswerWaiting(Request[WaitingItem]):
    item_id: str = param(check="str")
    action: str = param(check="str")
    _: KW_ONLY
    reason: str = param(default="", check="or_empty", omit=True)
    envelope: Envelope | None = param(default=None, codec=OPTIONAL_ENVELOPE, omit=True)
    audience: list[str] | None = param(default=None, omit=True)
    messages: list[dict[str, Any]] | None = param(default=None, omit=True)
    system_prompt: str | None = param(default=None, check="opt_str", omit=True)
    text: str | None = param(default=None, check="opt_str", omit=True)
    arguments: dict[str, Any] | None = param(default=None, omit=True)
    by: str = param(default="", check="or_empty", omit=True)


@op("turn_gate", BOOL, agent(), "whether a turn breakpoint pauses this agent's turn in this channel now")
class TurnGate(AgentRequest[bool]):
    channel_id: str = param(check="str")
    trigger_envelope_id: str = param(default="", check="or_empty", omit=True)


@op("pause_turn", DECISION, agent(), "wait, before the model call, for a person to decide this turn")
class PauseTurn(AgentRequest[Decision]):
    channel_id: str = param(check="str")
    request: dict[str, Any] = param()
    _: KW_ONLY
    trigger_envelope_id: str = param(default="", check="or_empty", omit=True)


@op("request_approval", DECISION, agent(), "wait for a person to approve, deny or edit a tool call")
class RequestApproval(AgentRequest[Decision]):
    channel_id: str = param(check="or_empty")
    tool: str = param(check="str")
    arguments: dict[str, Any] = param()
    _: KW_ONLY
    reason: str = param(default="", check="or_empty", omit=True)
    call_id: str = param(default="", check="or_empty", omit=True)


# ---------------------------------------------------------------------------------------------- the connection's own


@op("observe", JSON, OPERATOR, "stream the observe log to this connection", connection=True)
class Observe(Request[dict[str, Any]]):
    _: KW_ONLY
    subscription: Any = param(default=None)
    since: Any = param(default=None)
    incarnation: Any = param(default=None)


@op("unobserve", JSON, OPERATOR, "stop a subscription", connection=True)
class Unobserve(Request[None]):
    _: KW_ONLY
    subscription: Any = param(default=None)


@op(
    "rotate_secret",
    JSON,
    agent(operators_too=True),
    "a new identity secret for its holder (token servers): the old one is refused from then on",
    connection=True,
)
class RotateSecret(Request[dict[str, Any]]):
    agent_id: Any = param(default=None)


def hub_ops() -> frozenset[str]:
    """The ops the hub answers (every declared op but the connection's own)."""
    return frozenset(name for name, spec in OPS.items() if not spec.connection)


__all__ = [
    "ACCESS_RULES",
    "CHANNEL",
    "DEFAULT_LIMIT",
    "DIRECTORY",
    "OPEN",
    "OPERATOR",
    "OPS",
    "POLICY",
    "POLICY_AND_CALLER",
    "Access",
    "OpSpec",
    "Param",
    "Request",
    "agent",
    "encode_result",
    "hub_ops",
    "op",
    "param",
    "request_of",
    "spec_for",
]

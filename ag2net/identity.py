"""Identity records: who an agent is (Passport), what it can do (Resume) and what it may do (Rule).

Every record is a slots dataclass whose ``to_dict`` is the ``asdict`` shape of ag2 1.2.1 and whose
``from_dict`` rebuilds nested records, refusing bad input with a ``ProtocolError`` naming the field.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
import unicodedata
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypeVar, get_args, get_origin

from ag2net.envelope import check_text, check_text_tree
from ag2net.errors import ProtocolError
from ag2net.ids import is_id

PassportKind = Literal["agent", "human", "remote_agent"]
PASSPORT_KINDS: tuple[str, ...] = ("agent", "human", "remote_agent")

MAX_NAME_CHARS = 100

R = TypeVar("R")


# --- generic record decoding -------------------------------------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


def _describe(hint: Any) -> str:
    """How a type hint reads in an error message: ``a string``, ``a list of strings or null``."""
    if hint is Any:
        return "any JSON value"
    if hint is type(None):
        return "null"
    if hint is str:
        return "a string"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    origin = get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(hint))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a JSON object"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "one of " + ", ".join(repr(m.value) for m in hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"a {hint.__name__} object"
    return getattr(hint, "__name__", str(hint))


def _coerce(value: Any, hint: Any, path: str) -> Any:
    """Check ``value`` against ``hint`` and rebuild nested records; raise ``ProtocolError`` naming ``path``."""
    if hint is Any:
        check_text_tree(value, path)
        return value
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = get_args(hint)
        if value is None and type(None) in arms:
            return None
        real = [arm for arm in arms if arm is not type(None)]
        if len(real) == 1:
            # ``X | None``: let X's own, more precise message through
            try:
                return _coerce(value, real[0], path)
            except ProtocolError:
                if isinstance(value, (dict, list)):
                    raise  # the error names the field inside the container
                raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}") from None
        for arm in real:
            try:
                return _coerce(value, arm, path)
            except ProtocolError:
                continue
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    if origin is Literal:
        if isinstance(value, str) and value in get_args(hint):
            return value
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{path} must be a list, got {_type_name(value)}")
        (item_hint,) = get_args(hint) or (Any,)
        return [_coerce(item, item_hint, f"{path}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{path} must be a JSON object, got {_type_name(value)}")
        _key_hint, item_hint = get_args(hint) or (str, Any)
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError(f"{path} keys must be strings, got {_type_name(key)}")
            check_text(key, f"a key of {path}")
            out[key] = _coerce(item, item_hint, f"{path}.{key}")
        return out
    if hint is type(None):
        if value is None:
            return None
    elif hint is str:
        if isinstance(value, str):
            check_text(value, path)
            return value
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        if isinstance(value, hint):
            return value
        try:
            return hint(value)
        except ValueError:
            pass
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        return record_from_dict(hint, value, path)
    raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _show(value: Any) -> str:
    """A short rendering of a bad value: scalars by value, containers by type."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(repr(value)) <= 60:
        return repr(value)
    return _type_name(value) if not isinstance(value, bool) else repr(value).lower()


def record_from_dict(cls: type[R], data: Any, path: str | None = None) -> R:
    """Build the record ``cls`` from its ``to_dict`` form, checking every field's type.

    Unknown and missing fields, wrong types and invalid values raise ``ProtocolError`` naming the
    field by its path (``Passport.auth.scheme``), so wire input is refused with one clear sentence.
    """
    where = path or cls.__name__
    if not isinstance(data, dict):
        raise ProtocolError(f"{where} must be a JSON object, got {_type_name(data)}")
    hints = _hints(cls)
    known = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise ProtocolError(f"{where} has unknown field {unknown[0]!r}; remove it")
    kwargs: dict[str, Any] = {}
    for name, f in known.items():
        if name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"{where} is missing required field {name!r}")
            continue
        kwargs[name] = _coerce(data[name], hints[name], f"{where}.{name}")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ProtocolError(str(exc)) from None


# --- Passport ----------------------------------------------------------------------------------


@dataclass(slots=True)
class CostProfile:
    """What a call to this agent costs: price per million tokens and a latency tier."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    latency_tier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CostProfile:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class AuthBlock:
    """How the agent proves who it is; ``claim`` is the credential checked at registration."""

    scheme: str = "none"
    issuer: str | None = None
    audience: str | None = None
    key_fingerprint: str | None = None
    claim: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AuthBlock:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class Passport:
    """An identity on the network. The hub stamps ``agent_id`` and ``created_at`` at registration."""

    name: str
    owner: str = ""
    provider: str | None = None
    model: str | None = None
    cost: CostProfile | None = None
    region: str | None = None
    auth: AuthBlock = field(default_factory=AuthBlock)
    kind: PassportKind | None = None
    hub_id: str | None = None
    version: int = 1
    agent_id: str | None = None
    created_at: str = ""

    def __post_init__(self) -> None:
        if self.kind is not None and self.kind not in PASSPORT_KINDS:
            raise ValueError(f"Passport.kind must be one of {PASSPORT_KINDS} or None; got {self.kind!r}")

    @property
    def effective_kind(self) -> str:
        """``kind`` with ``None`` read as ``"agent"``."""
        return self.kind or "agent"

    def to_dict(self, include_claim: bool = True) -> dict[str, Any]:
        data = asdict(self)
        if not include_claim:
            data["auth"]["claim"] = {}
        return data

    def public_dict(self) -> dict[str, Any]:
        """The shape other parties see: ``auth.claim`` (a credential) emptied."""
        return self.to_dict(include_claim=False)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Passport:
        return record_from_dict(cls, data)


def looks_like_id(name: str) -> bool:
    """True when ``name`` has the shape of an agent id (32 lowercase hex); such names are refused."""
    return is_id(name)


_LINE_BREAKING = {"Cc", "Zl", "Zp"}


MAX_SKILL_BYTES = 1024 * 1024  # a skill card's markdown, UTF-8
MAX_RESUME_BYTES = 256 * 1024  # a resume as JSON, UTF-8


def check_skill_size(skill_md: Any, field: str = "skill_md") -> None:
    """Skill markdown is kept and served to every reader: at most ``MAX_SKILL_BYTES``."""
    if isinstance(skill_md, str) and len(skill_md) * 4 > MAX_SKILL_BYTES:
        size = len(skill_md.encode("utf-8", "surrogatepass"))
        if size > MAX_SKILL_BYTES:
            raise ProtocolError(
                f"{field} is {size:,} bytes; the limit is {MAX_SKILL_BYTES:,} bytes (1 MiB): shorten the skill card"
            )


def check_resume_size(resume: Any, field: str = "resume") -> None:
    """A resume is kept and served to every reader: at most ``MAX_RESUME_BYTES`` as JSON."""
    if resume is None:
        return
    data = resume.to_dict() if hasattr(resume, "to_dict") else resume
    try:
        size = len(json.dumps(data, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    except (TypeError, ValueError, RecursionError):
        raise ProtocolError(f"{field} must be a JSON resume object") from None
    if size > MAX_RESUME_BYTES:
        raise ProtocolError(
            f"{field} is {size:,} bytes as JSON; the limit is {MAX_RESUME_BYTES:,} bytes (256 KiB): "
            "shorten its summary, capabilities and examples"
        )


def check_agent_name(name: Any) -> None:
    """Refuse names that cannot be shown or typed: not a string, blank, over 100 chars, control chars.

    These rules are ag2net's (ag2 1.2.1 accepts any string); the id-shape and uniqueness rules need
    the registry and live in the hub.
    """
    if not isinstance(name, str):
        raise ProtocolError(f"agent name must be a string, got {_type_name(name)}")
    if not name.strip():
        raise ProtocolError("agent name is empty; give the Passport a name such as 'researcher'")
    check_text(name, "Passport.name")
    if len(name) > MAX_NAME_CHARS:
        raise ProtocolError(
            f"agent name is {len(name)} characters long; at most {MAX_NAME_CHARS} are allowed, choose a shorter name"
        )
    for ch in name:
        if unicodedata.category(ch) in _LINE_BREAKING:
            raise ProtocolError(
                f"agent name {name!r} contains the control character U+{ord(ch):04X}; "
                "use printable characters only (ag2net rule)"
            )


# --- Resume ------------------------------------------------------------------------------------


@dataclass(slots=True)
class ResumeExample:
    """One piece of past work an agent points to."""

    title: str
    outcome: str = ""
    task_id: str | None = None
    channel_id: str | None = None
    when: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResumeExample:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class ObservedStat:
    """Task outcomes the hub observed for one capability."""

    n: int = 0
    completed: int = 0
    failed: int = 0
    expired: int = 0
    p50_latency_ms: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ObservedStat:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class Resume:
    """What an agent claims it can do, plus what the hub has observed it doing."""

    claimed_capabilities: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    summary: str = ""
    examples: list[ResumeExample] = field(default_factory=list)
    observed: dict[str, ObservedStat] = field(default_factory=dict)
    version: int = 1
    last_updated: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Resume:
        return record_from_dict(cls, data)

    def capabilities(self) -> list[str]:
        """Claimed capabilities then observed ones, each once, in that order."""
        return list(dict.fromkeys([*self.claimed_capabilities, *self.observed]))


# --- Rule --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChannelTypeAccess:
    """Channel types an agent may open and accept (recorded; not enforced, as in ag2 1.2.1)."""

    initiate: list[str] = field(default_factory=lambda: ["*"])
    accept: list[str] = field(default_factory=lambda: ["*"])

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChannelTypeAccess:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class AccessBlock:
    """Glob patterns (``fnmatchcase``) over passport names this agent accepts from and sends to."""

    inbound_from: list[str] = field(default_factory=lambda: ["*"])
    outbound_to: list[str] = field(default_factory=lambda: ["*"])
    channel_types: ChannelTypeAccess = field(default_factory=ChannelTypeAccess)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AccessBlock:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class RateBlock:
    """Send rate caps (recorded; not enforced, as in ag2 1.2.1). ``0`` disables."""

    per_minute: int = 0
    burst: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RateBlock:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class InboxBlock:
    """Back-pressure: deliveries not yet acknowledged beyond ``max_pending`` are refused (``0`` disables)."""

    max_pending: int = 1000
    overflow: str = "reject"
    high_water: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboxBlock:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class LimitsBlock:
    """Caps on concurrency, TTL defaults (durations like ``"2h"``), delegation depth and the inbox."""

    max_concurrent_channels: int = 0
    max_concurrent_tasks: int = 0
    channel_ttl_default: str | int = "2h"
    task_ttl_default: str | int = "15m"
    rate: RateBlock = field(default_factory=RateBlock)
    delegation_depth: int = 5
    inbox: InboxBlock = field(default_factory=InboxBlock)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LimitsBlock:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class Rule:
    """Per-agent policy the hub enforces: who may talk to it and how much it may do."""

    version: int = 1
    access: AccessBlock = field(default_factory=AccessBlock)
    limits: LimitsBlock = field(default_factory=LimitsBlock)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Rule:
        return record_from_dict(cls, data)


@dataclass(slots=True)
class AgentRuntime:
    """Where an agent runs and whether the hub can reach it: a record ag2 1.2.1 declares (and never uses).

    ``binding`` names how the agent is attached (e.g. ``"local"``, ``"ws"``), ``target`` where (an endpoint id
    or URL), ``last_heartbeat`` an ISO timestamp.
    """

    agent_id: str
    binding: str
    target: str
    reachable: bool
    last_heartbeat: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AgentRuntime:
        return record_from_dict(cls, data)


_DURATION_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([smhd]?)")
_UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(s: str | int) -> int:
    """Seconds in a duration: an int passes through, ``""`` is 0, ``"90s"``/``"15m"``/``"2h"``/``"1d"``.

    Decimal amounts (``"1.5h"``) are accepted too; negative or malformed input raises ``ValueError``.
    The parameter is named ``s`` as in ag2, so ``parse_duration(s="2h")`` works too.
    """
    if isinstance(s, (int, float)) and not isinstance(s, bool):
        if not 0 <= s < float("inf"):
            raise ValueError(f"duration must be a non-negative number of seconds, got {s!r}")
        return int(s)
    if not isinstance(s, str):
        raise ValueError(f"duration must be seconds or a string like '15m', got {s!r}")
    text = s.strip()
    if not text:
        return 0
    match = _DURATION_RE.fullmatch(text)
    if match is None:
        raise ValueError(
            f"duration {s!r} is not understood; use whole seconds or a number with s, m, h or d "
            "(for example '90s', '15m', '2h')"
        )
    amount, unit = match.groups()
    return int(float(amount) * _UNIT_SECONDS[unit])


__all__ = [
    "MAX_NAME_CHARS",
    "PASSPORT_KINDS",
    "AccessBlock",
    "AgentRuntime",
    "AuthBlock",
    "ChannelTypeAccess",
    "CostProfile",
    "InboxBlock",
    "LimitsBlock",
    "ObservedStat",
    "Passport",
    "PassportKind",
    "RateBlock",
    "Resume",
    "ResumeExample",
    "Rule",
    "check_agent_name",
    "looks_like_id",
    "parse_duration",
    "record_from_dict",
]

"""Identity records: who an agent is (Passport), what it can do (Resume) and what it may do (Rule).

Every record is a slots dataclass ``Record`` (``ag2net.record``): its ``to_dict`` is the ``asdict`` shape of
ag2 1.2.1 and its strict ``from_dict`` rebuilds nested records, refusing bad input with a ``ProtocolError``
naming the field.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from ag2net.agent_names import refused_character
from ag2net.envelope import check_text
from ag2net.errors import ProtocolError
from ag2net.ids import is_id
from ag2net.record import Record, _type_name, record_from_dict

PassportKind = Literal["agent", "human", "remote_agent"]
PASSPORT_KINDS: tuple[str, ...] = ("agent", "human", "remote_agent")

MAX_NAME_CHARS = 100


# --- Passport ----------------------------------------------------------------------------------


@dataclass(slots=True)
class CostProfile(Record):
    """What a call to this agent costs: price per million tokens and a latency tier."""

    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    latency_tier: str | None = None


@dataclass(slots=True)
class AuthBlock(Record):
    """How the agent proves who it is; ``claim`` is the credential checked at registration."""

    scheme: str = "none"
    issuer: str | None = None
    audience: str | None = None
    key_fingerprint: str | None = None
    claim: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Passport(Record):
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
        data = Record.to_dict(self)
        if not include_claim:
            data["auth"]["claim"] = {}
        return data

    def public_dict(self) -> dict[str, Any]:
        """The shape other parties see: ``auth.claim`` (a credential) emptied."""
        return self.to_dict(include_claim=False)


def looks_like_id(name: str) -> bool:
    """True when ``name`` has the shape of an agent id (32 lowercase hex); such names are refused."""
    return is_id(name)


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
    """Refuse names that cannot be shown or typed: not a string, blank, over 100 chars, control, format,
    bidi or other invisible characters (``ag2net.agent_names``).

    These rules are ag2net's (ag2 1.2.1 accepts any string); normalisation, the id-shape, uniqueness and
    lookalike rules need the registry and live in the hub.
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
    refused = refused_character(name)
    if refused is not None:
        raise ProtocolError(
            f"agent name {name!r} contains {refused}; use visible characters only (ag2net rule)"
        )


# --- Resume ------------------------------------------------------------------------------------


@dataclass(slots=True)
class ResumeExample(Record):
    """One piece of past work an agent points to."""

    title: str
    outcome: str = ""
    task_id: str | None = None
    channel_id: str | None = None
    when: str | None = None
    note: str = ""


@dataclass(slots=True)
class ObservedStat(Record):
    """Task outcomes the hub observed for one capability."""

    n: int = 0
    completed: int = 0
    failed: int = 0
    expired: int = 0
    p50_latency_ms: float | None = None


@dataclass(slots=True)
class Resume(Record):
    """What an agent claims it can do, plus what the hub has observed it doing."""

    claimed_capabilities: list[str] = field(default_factory=list)
    domains: list[str] = field(default_factory=list)
    summary: str = ""
    examples: list[ResumeExample] = field(default_factory=list)
    observed: dict[str, ObservedStat] = field(default_factory=dict)
    version: int = 1
    last_updated: str = ""

    def capabilities(self) -> list[str]:
        """Claimed capabilities then observed ones, each once, in that order."""
        return list(dict.fromkeys([*self.claimed_capabilities, *self.observed]))


# --- Rule --------------------------------------------------------------------------------------


@dataclass(slots=True)
class ChannelTypeAccess(Record):
    """Channel types an agent may open and accept (recorded; not enforced, as in ag2 1.2.1)."""

    initiate: list[str] = field(default_factory=lambda: ["*"])
    accept: list[str] = field(default_factory=lambda: ["*"])


@dataclass(slots=True)
class AccessBlock(Record):
    """Glob patterns (``fnmatchcase``) over passport names this agent accepts from and sends to."""

    inbound_from: list[str] = field(default_factory=lambda: ["*"])
    outbound_to: list[str] = field(default_factory=lambda: ["*"])
    channel_types: ChannelTypeAccess = field(default_factory=ChannelTypeAccess)


@dataclass(slots=True)
class RateBlock(Record):
    """Send rate caps (recorded; not enforced, as in ag2 1.2.1). ``0`` disables."""

    per_minute: int = 0
    burst: int = 0


@dataclass(slots=True)
class InboxBlock(Record):
    """Back-pressure: deliveries not yet acknowledged beyond ``max_pending`` are refused (``0`` disables)."""

    max_pending: int = 1000
    overflow: str = "reject"
    high_water: int | None = None


@dataclass(slots=True)
class LimitsBlock(Record):
    """Caps on concurrency, TTL defaults (durations like ``"2h"``), delegation depth and the inbox."""

    max_concurrent_channels: int = 0
    max_concurrent_tasks: int = 0
    channel_ttl_default: str | int = "2h"
    task_ttl_default: str | int = "15m"
    rate: RateBlock = field(default_factory=RateBlock)
    delegation_depth: int = 5
    inbox: InboxBlock = field(default_factory=InboxBlock)


@dataclass(slots=True)
class Rule(Record):
    """Per-agent policy the hub enforces: who may talk to it and how much it may do."""

    version: int = 1
    access: AccessBlock = field(default_factory=AccessBlock)
    limits: LimitsBlock = field(default_factory=LimitsBlock)


@dataclass(slots=True)
class AgentRuntime(Record):
    """Where an agent runs and whether the hub can reach it: a record ag2 1.2.1 declares (and never uses).

    ``binding`` names how the agent is attached (e.g. ``"local"``, ``"ws"``), ``target`` where (an endpoint id
    or URL), ``last_heartbeat`` an ISO timestamp.
    """

    agent_id: str
    binding: str
    target: str
    reachable: bool
    last_heartbeat: str


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
    "Record",
    "Resume",
    "ResumeExample",
    "Rule",
    "check_agent_name",
    "looks_like_id",
    "parse_duration",
    "record_from_dict",
]

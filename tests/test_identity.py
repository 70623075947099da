"""Identity records: shapes and defaults of ag2 1.2.1, exact round trips, and clear refusals."""

from __future__ import annotations

import dataclasses
import json

import pytest

from ag2net.errors import ProtocolError
from ag2net.identity import (
    PASSPORT_KINDS,
    AccessBlock,
    AuthBlock,
    ChannelTypeAccess,
    CostProfile,
    InboxBlock,
    LimitsBlock,
    ObservedStat,
    Passport,
    RateBlock,
    Resume,
    ResumeExample,
    Rule,
    check_agent_name,
    looks_like_id,
    parse_duration,
)
from ag2net.ids import make_id

ALL_RECORDS = [
    CostProfile,
    AuthBlock,
    Passport,
    ResumeExample,
    ObservedStat,
    Resume,
    ChannelTypeAccess,
    AccessBlock,
    RateBlock,
    InboxBlock,
    LimitsBlock,
    Rule,
]


def full_passport() -> Passport:
    return Passport(
        name="researcher",
        owner="acme",
        provider="openai",
        model="gpt-x",
        cost=CostProfile(input_per_mtok=2.5, output_per_mtok=10, latency_tier="fast"),
        region="eu",
        auth=AuthBlock(
            scheme="token", issuer="me", audience="hub", key_fingerprint="ab:cd", claim={"token": "s3"}
        ),
        kind="remote_agent",
        hub_id="h1",
        version=3,
        agent_id=make_id(),
        created_at="2026-01-01T00:00:00.000000Z",
    )


def full_resume() -> Resume:
    return Resume(
        claimed_capabilities=["research", "summarise"],
        domains=["policy"],
        summary="Finds things.",
        examples=[
            ResumeExample("Brief", outcome="accepted", task_id="t1", channel_id="c1", when="2025", note="n"),
            ResumeExample("Other"),
        ],
        observed={"research": ObservedStat(n=4, completed=3, failed=1, expired=0, p50_latency_ms=12.5)},
        version=2,
        last_updated="2026-01-01T00:00:00.000000Z",
    )


def full_rule() -> Rule:
    return Rule(
        version=4,
        access=AccessBlock(
            inbound_from=["alice", "team-*"],
            outbound_to=["*"],
            channel_types=ChannelTypeAccess(initiate=["consulting"], accept=["*"]),
        ),
        limits=LimitsBlock(
            max_concurrent_channels=3,
            max_concurrent_tasks=2,
            channel_ttl_default="30m",
            task_ttl_default=90,
            rate=RateBlock(per_minute=60, burst=10),
            delegation_depth=2,
            inbox=InboxBlock(max_pending=2, overflow="reject", high_water=1),
        ),
    )


@pytest.mark.parametrize("cls", ALL_RECORDS)
def test_every_record_is_a_slots_dataclass(cls: type) -> None:
    assert dataclasses.is_dataclass(cls)
    assert hasattr(cls, "__slots__")


def test_defaults_match_the_reference() -> None:
    assert Passport("n").to_dict() == {
        "name": "n",
        "owner": "",
        "provider": None,
        "model": None,
        "cost": None,
        "region": None,
        "auth": {"scheme": "none", "issuer": None, "audience": None, "key_fingerprint": None, "claim": {}},
        "kind": None,
        "hub_id": None,
        "version": 1,
        "agent_id": None,
        "created_at": "",
    }
    assert Resume().to_dict() == {
        "claimed_capabilities": [],
        "domains": [],
        "summary": "",
        "examples": [],
        "observed": {},
        "version": 1,
        "last_updated": "",
    }
    assert Rule().to_dict() == {
        "version": 1,
        "access": {
            "inbound_from": ["*"],
            "outbound_to": ["*"],
            "channel_types": {"initiate": ["*"], "accept": ["*"]},
        },
        "limits": {
            "max_concurrent_channels": 0,
            "max_concurrent_tasks": 0,
            "channel_ttl_default": "2h",
            "task_ttl_default": "15m",
            "rate": {"per_minute": 0, "burst": 0},
            "delegation_depth": 5,
            "inbox": {"max_pending": 1000, "overflow": "reject", "high_water": None},
        },
    }
    assert ObservedStat().to_dict() == {
        "n": 0,
        "completed": 0,
        "failed": 0,
        "expired": 0,
        "p50_latency_ms": None,
    }
    assert ResumeExample("t").to_dict() == {
        "title": "t",
        "outcome": "",
        "task_id": None,
        "channel_id": None,
        "when": None,
        "note": "",
    }
    assert CostProfile().to_dict() == {"input_per_mtok": None, "output_per_mtok": None, "latency_tier": None}


def test_mutable_defaults_are_not_shared() -> None:
    a, b = Resume(), Resume()
    a.claimed_capabilities.append("x")
    a.observed["x"] = ObservedStat()
    assert b.claimed_capabilities == [] and b.observed == {}
    r1, r2 = Rule(), Rule()
    r1.access.inbound_from.append("bob")
    r1.limits.inbox.max_pending = 1
    assert r2.access.inbound_from == ["*"] and r2.limits.inbox.max_pending == 1000
    assert Passport("a").auth is not Passport("b").auth


@pytest.mark.parametrize(
    ("record", "cls"),
    [(full_passport(), Passport), (full_resume(), Resume), (full_rule(), Rule), (Passport("x"), Passport)],
)
def test_round_trip_is_exact_through_json(record: object, cls: type) -> None:
    data = record.to_dict()  # type: ignore[attr-defined]
    again = cls.from_dict(json.loads(json.dumps(data)))  # type: ignore[attr-defined]
    assert again == record
    assert again.to_dict() == data
    assert dataclasses.asdict(record) == data  # type: ignore[call-overload]


def test_from_dict_rebuilds_nested_records() -> None:
    p = Passport.from_dict(full_passport().to_dict())
    assert isinstance(p.cost, CostProfile) and isinstance(p.auth, AuthBlock)
    r = Resume.from_dict(full_resume().to_dict())
    assert all(isinstance(e, ResumeExample) for e in r.examples)
    assert isinstance(r.observed["research"], ObservedStat)
    rule = Rule.from_dict(full_rule().to_dict())
    assert isinstance(rule.access.channel_types, ChannelTypeAccess)
    assert isinstance(rule.limits.rate, RateBlock) and isinstance(rule.limits.inbox, InboxBlock)


def test_from_dict_fills_defaults_for_missing_optional_fields() -> None:
    assert Passport.from_dict({"name": "a"}) == Passport("a")
    assert Rule.from_dict({"limits": {"delegation_depth": 1}}).limits == LimitsBlock(delegation_depth=1)
    assert Resume.from_dict({}) == Resume()


def test_to_dict_is_a_copy() -> None:
    p = full_passport()
    data = p.to_dict()
    data["auth"]["claim"]["token"] = "changed"
    assert p.auth.claim == {"token": "s3"}


def test_passport_kind_validation_message_is_exact() -> None:
    with pytest.raises(ValueError) as info:
        Passport(name="x", kind="huMAn")  # type: ignore[arg-type]
    assert str(info.value) == (
        "Passport.kind must be one of ('agent', 'human', 'remote_agent') or None; got 'huMAn'"
    )
    for kind in PASSPORT_KINDS:
        assert Passport("x", kind=kind).kind == kind  # type: ignore[arg-type]
    assert PASSPORT_KINDS == ("agent", "human", "remote_agent")


def test_effective_kind_reads_none_as_agent() -> None:
    assert Passport("a").effective_kind == "agent"
    assert Passport("a", kind="human").effective_kind == "human"
    assert Passport("a", kind="remote_agent").effective_kind == "remote_agent"


def test_claim_can_be_dropped_for_storage_and_the_wire() -> None:
    p = full_passport()
    assert p.to_dict()["auth"]["claim"] == {"token": "s3"}
    assert p.to_dict(include_claim=False)["auth"]["claim"] == {}
    public = p.public_dict()
    assert public["auth"] == {
        "scheme": "token",
        "issuer": "me",
        "audience": "hub",
        "key_fingerprint": "ab:cd",
        "claim": {},
    }
    assert {k: v for k, v in public.items() if k != "auth"} == {
        k: v for k, v in p.to_dict().items() if k != "auth"
    }
    assert p.auth.claim == {"token": "s3"}  # the record itself keeps it


@pytest.mark.parametrize(
    ("cls", "data", "message"),
    [
        (Passport, {}, "Passport is missing required field 'name'"),
        (Passport, {"name": "a", "nickname": "b"}, "Passport has unknown field 'nickname'; remove it"),
        (Passport, {"name": 5}, "Passport.name must be a string, got 5"),
        (
            Passport,
            {"name": "a", "kind": "robot"},
            "Passport.kind must be one of 'agent', 'human', 'remote_agent'",
        ),
        (Passport, {"name": "a", "version": True}, "Passport.version must be an integer, got true"),
        (
            Passport,
            {"name": "a", "cost": {"input_per_mtok": "cheap"}},
            "Passport.cost.input_per_mtok must be a number",
        ),
        (
            Passport,
            {"name": "a", "auth": {"claim": []}},
            "Passport.auth.claim must be a JSON object, got list",
        ),
        (Passport, {"name": "a", "auth": {"scheme": "x", "pin": 1}}, "Passport.auth has unknown field 'pin'"),
        (Passport, ["name"], "Passport must be a JSON object, got list"),
        (Resume, {"claimed_capabilities": "research"}, "Resume.claimed_capabilities must be a list, got str"),
        (
            Resume,
            {"claimed_capabilities": ["a", 1]},
            "Resume.claimed_capabilities[1] must be a string, got 1",
        ),
        (Resume, {"examples": [{"outcome": "x"}]}, "Resume.examples[0] is missing required field 'title'"),
        (Resume, {"observed": {"x": {"n": "1"}}}, "Resume.observed.x.n must be an integer, got '1'"),
        (
            Rule,
            {"limits": {"inbox": {"max_pending": None}}},
            "Rule.limits.inbox.max_pending must be an integer",
        ),
        (Rule, {"access": {"inbound_from": None}}, "Rule.access.inbound_from must be a list, got null"),
    ],
)
def test_from_dict_refuses_bad_input_naming_the_field(cls: type, data: object, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        cls.from_dict(data)  # type: ignore[attr-defined]
    assert message in str(info.value)


def test_integers_are_accepted_where_numbers_are_expected() -> None:
    cost = CostProfile.from_dict({"input_per_mtok": 3, "output_per_mtok": 1.5})
    assert cost == CostProfile(3, 1.5)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (90, 90),
        (0, 0),
        ("", 0),
        ("45", 45),
        ("45s", 45),
        ("15m", 900),
        ("2h", 7200),
        ("1d", 86400),
        (" 2h ", 7200),
        ("1.5h", 5400),
        (2.9, 2),
    ],
)
def test_parse_duration(value: object, seconds: int) -> None:
    assert parse_duration(value) == seconds  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["2x", "h", "abc", "-5m", -1, "1h30m", True, None, [1]])
def test_parse_duration_refuses_bad_input(value: object) -> None:
    with pytest.raises(ValueError) as info:
        parse_duration(value)  # type: ignore[arg-type]
    assert "duration" in str(info.value)


def test_default_ttls_parse() -> None:
    limits = LimitsBlock()
    assert parse_duration(limits.channel_ttl_default) == 7200
    assert parse_duration(limits.task_ttl_default) == 900


@pytest.mark.parametrize(
    "name", ["alice", "Research Assistant", "a" * 100, "über-agent", "bob_2", " spaced "]
)
def test_check_agent_name_accepts_printable_names(name: str) -> None:
    check_agent_name(name)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "agent name is empty; give the Passport a name such as 'researcher'"),
        ("   ", "agent name is empty"),
        ("a" * 101, "agent name is 101 characters long; at most 100 are allowed"),
        ("bad\nname", "contains U+000A, a control character; use visible characters only"),
        ("zero\u200dwidth", "contains U+200D ZERO WIDTH JOINER, a format character"),
        ("bidi\u202eoverride", "contains U+202E RIGHT-TO-LEFT OVERRIDE, a format character"),
        ("tab\tname", "U+0009"),
        ("esc\x1bname", "U+001B"),
        ("line\u2028sep", "U+2028"),
        (None, "agent name must be a string, got null"),
        (7, "agent name must be a string, got int"),
    ],
)
def test_check_agent_name_refuses(name: object, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        check_agent_name(name)
    assert message in str(info.value)


def test_looks_like_id() -> None:
    assert looks_like_id(make_id())
    assert looks_like_id("0" * 32)
    assert not looks_like_id("A" * 32)  # ids are lowercase
    assert not looks_like_id("0" * 31)
    assert not looks_like_id("alice")


def test_resume_capabilities_merges_claimed_and_observed() -> None:
    r = Resume(claimed_capabilities=["a", "b"], observed={"b": ObservedStat(), "c": ObservedStat()})
    assert r.capabilities() == ["a", "b", "c"]

"""ag2's identity helpers from the top level: ``PASSPORT_KINDS``, ``make_id``, ``parse_hub_urn``,
``parse_duration(s)`` and the ``AgentRuntime`` record."""

from __future__ import annotations

import re
import time

import pytest

from ag2net import (
    PASSPORT_KINDS,
    AgentRuntime,
    Passport,
    ProtocolError,
    make_id,
    parse_duration,
    parse_hub_urn,
)


def test_passport_kinds_are_the_accepted_kinds() -> None:
    assert PASSPORT_KINDS == ("agent", "human", "remote_agent")
    for kind in PASSPORT_KINDS:
        assert Passport(name="x", kind=kind).effective_kind == kind
    with pytest.raises(ValueError, match=re.escape(str(PASSPORT_KINDS))):
        Passport(name="x", kind="robot")


def test_make_id_is_32_hex_time_prefixed_and_unique() -> None:
    before = time.time_ns()
    ids = [make_id() for _ in range(500)]
    after = time.time_ns()
    assert all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    assert len(set(ids)) == 500
    stamps = [int(i[:16], 16) for i in ids]
    assert all(before <= s <= after for s in stamps)


@pytest.mark.parametrize(
    ("urn", "parsed"),
    [
        ("hub://h/alice", ("h", "alice")),
        ("hub://hub-1/team/alice", ("hub-1", "team/alice")),  # the agent part keeps later slashes
        ("hub://h:8765/a", ("h:8765", "a")),
        ("hub:///alice", (None, "hub:///alice")),  # no hub id
        ("hub://h/", (None, "hub://h/")),  # no agent
        ("hub://h", (None, "hub://h")),
        ("HUB://h/a", (None, "HUB://h/a")),  # the scheme is case-sensitive
        ("alice", (None, "alice")),  # a plain name passes through
        ("", (None, "")),
    ],
)
def test_parse_hub_urn(urn: str, parsed: tuple[str | None, str]) -> None:
    assert parse_hub_urn(urn) == parsed
    assert parse_hub_urn(s=urn) == parsed


def test_parse_hub_urn_passes_non_strings_through() -> None:
    assert parse_hub_urn(None) == (None, None)  # type: ignore[arg-type]
    assert parse_hub_urn(7) == (None, 7)  # type: ignore[arg-type]


def test_parse_duration_takes_ag2s_parameter_name() -> None:
    assert parse_duration(s="2h") == 7200
    assert parse_duration(s=90) == 90
    assert [parse_duration(x) for x in ("", "10s", "15m", "1d", "15")] == [0, 10, 900, 86400, 15]
    with pytest.raises(ValueError, match="not understood"):
        parse_duration(s="soon")


def test_agent_runtime_record() -> None:
    rt = AgentRuntime("a" * 32, "ws", "ws://127.0.0.1:8765", True, "2026-01-01T00:00:00.000000Z")
    assert rt == AgentRuntime(
        agent_id="a" * 32,
        binding="ws",
        target="ws://127.0.0.1:8765",
        reachable=True,
        last_heartbeat="2026-01-01T00:00:00.000000Z",
    )
    assert AgentRuntime.from_dict(rt.to_dict()) == rt
    assert rt.to_dict()["reachable"] is True
    with pytest.raises(ProtocolError, match="missing required field 'target'"):
        AgentRuntime.from_dict({"agent_id": "x", "binding": "ws", "reachable": True, "last_heartbeat": ""})
    with pytest.raises(TypeError):
        AgentRuntime("x", "ws")  # type: ignore[call-arg]  # every field is required, as in ag2

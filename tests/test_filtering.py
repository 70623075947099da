"""The filter language (``ag2net.filtering``): parsing, matching and the one-sentence errors."""

from __future__ import annotations

import pytest

from ag2net.envelope import Envelope
from ag2net.filtering import FAMILIES, FilterError, FilterSpec, event_family, words_match

NAMES = {"p" * 32: "planner", "c" * 32: "critic"}


def name_for(agent_id: str) -> str:
    return NAMES.get(agent_id, agent_id)


def env(event_type: str = "ag2.msg.text", sender: str = "p" * 32, audience=None, **data) -> Envelope:
    return Envelope("ch", sender, audience, event_type, data or {"text": "Quarterly Budget review"})


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("", True),
        ("type:ag2.msg", True),
        ("type:ag2.ms", False),  # prefix on dotted segments, not characters
        ("type:ag2.msg.text", True),
        ("type:*.text", True),
        ("type:ag2.packet,ag2.msg", True),
        ("family:text", True),
        ("-family:text", False),
        ("sender:plan", True),
        ("from:critic", False),
        ("to:all", True),
        ("audience:critic", False),
        ("text:budget", True),
        ('text:"quarterly budget"', True),
        ("budget", True),
        ("budget -budget", False),
        ("re:/Budg.t/", True),
        ("re:/budg.t/", False),
        ("re:/budg.t/i", True),
        ("seq:3-5", True),
        ("seq:6-", False),
        ("seq:4", True),
    ],
)
def test_matches(query: str, expected: bool) -> None:
    assert FilterSpec.parse(query).matches(env(), name_for, seq=4) is expected


def test_audience_names_and_custom_family() -> None:
    e = env("myapp.review_request", audience=["c" * 32], doc="d1")
    assert FilterSpec.parse("to:critic").matches(e, name_for)
    assert not FilterSpec.parse("to:all").matches(e, name_for)
    assert FilterSpec.parse("family:custom text:d1").matches(e, name_for)


@pytest.mark.parametrize(
    ("query", "fragment"),
    [
        ("colour:red", "unknown filter key 'colour'"),
        ("type:", "has no value"),
        ("re:/a(/", "regular expression 'a(' is invalid"),
        ("re:/abc", "missing its closing '/'"),
        ("re:/a/x", "flag 'x' is unknown"),
        ("family:weird", "family 'weird' is unknown"),
        ("seq:abc", "seq:abc is not a number"),
        ('text:"open', "unclosed quote"),
    ],
)
def test_errors_are_one_sentence(query: str, fragment: str) -> None:
    with pytest.raises(FilterError) as info:
        FilterSpec.parse(query)
    assert fragment in str(info.value)
    assert "\n" not in str(info.value)


def test_event_families_and_the_channel_list_words() -> None:
    assert [event_family(t) for t in ("ag2.msg.text", "ag2.packet", "ag2.channel.opened", "x.y")] == [
        "text",
        "packet",
        "channel",
        "custom",
    ]
    assert set(FAMILIES) >= {"task", "expectation", "context"}
    assert words_match("Critic conv", ["conversation", "active", "planner", "critic"])
    assert words_match("", [])
    assert not words_match("critic closed", ["conversation", "active", "critic"])

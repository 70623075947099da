"""The channel data model: enum values, record shapes, round trips and independent copies."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ag2net.channel import (
    TERMINAL_STATES,
    AdapterResult,
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    ExpectedTurn,
    Participant,
    ParticipantRole,
    ParticipantSchema,
)
from ag2net.errors import ProtocolError


def make_metadata(**overrides) -> ChannelMetadata:
    fields = dict(
        channel_id="c1",
        manifest=ChannelManifest(
            type="consulting",
            participants=ParticipantSchema(min=2, max=2, roles=["initiator", "respondent"]),
            expectations=[Expectation("acks_within", "auto_close", {"seconds": 30})],
        ),
        creator_id="a",
        participants=[
            Participant("a", ParticipantRole.INITIATOR, 0, "t0"),
            Participant("b", ParticipantRole.RESPONDENT, 1, "t0"),
        ],
        state=ChannelState.PENDING,
        created_at="2026-01-01T00:00:00.000000Z",
        knobs={"graph": {"initial_speaker": "a", "transitions": []}},
        labels={"intent": "ask"},
        pending_acks=["b"],
    )
    fields.update(overrides)
    return ChannelMetadata(**fields)


def test_enum_values_match_the_wire():
    assert [s.value for s in ChannelState] == ["pending", "active", "closing", "closed", "expired"]
    assert {ChannelState.CLOSED, ChannelState.EXPIRED} == TERMINAL_STATES
    assert [r.value for r in ParticipantRole] == ["initiator", "respondent", "participant"]
    assert ChannelState.ACTIVE == "active"
    assert f"state={ChannelState.PENDING}" == "state=pending"
    assert str(ParticipantRole.RESPONDENT) == "respondent"
    assert json.dumps(ChannelState.CLOSED) == '"closed"'


def test_manifest_defaults():
    m = ChannelManifest(type="x")
    assert m.version == 1
    assert m.participants == ParticipantSchema(min=2, max=None, roles=[])
    assert m.knobs_schema == {}
    assert m.default_view_policy == "full_transcript"
    assert m.expectations == []
    # defaults are per instance, never shared
    m.expectations.append(Expectation("x", "audit"))
    assert ChannelManifest(type="y").expectations == []


def test_metadata_to_dict_shape():
    md = make_metadata()
    d = md.to_dict()
    assert list(d) == [
        "channel_id",
        "manifest",
        "creator_id",
        "participants",
        "state",
        "created_at",
        "expires_at",
        "closed_at",
        "close_reason",
        "parent_channel_id",
        "knobs",
        "labels",
        "required_acks",
        "pending_acks",
        "rejected_by",
    ]
    assert d["state"] == "pending"
    assert d["participants"][0] == {"agent_id": "a", "role": "initiator", "order": 0, "joined_at": "t0"}
    assert d["manifest"] == {
        "type": "consulting",
        "version": 1,
        "participants": {"min": 2, "max": 2, "roles": ["initiator", "respondent"]},
        "knobs_schema": {},
        "default_view_policy": "full_transcript",
        "expectations": [
            {
                "name": "acks_within",
                "on_violation": "auto_close",
                "params": {"seconds": 30},
                "applies_to": None,
            }
        ],
    }
    json.dumps(d)  # plain JSON, enums as values
    assert ChannelMetadata.from_dict(json.loads(json.dumps(d))) == md


def test_metadata_helpers():
    md = make_metadata()
    assert md.participant_ids() == ["a", "b"]
    assert md.role_of("b") is ParticipantRole.RESPONDENT
    assert md.role_of("zz") is None
    assert md.participant("a").order == 0
    assert md.participant("zz") is None
    assert not md.is_terminal()
    md.state = ChannelState.EXPIRED
    assert md.is_terminal()


def test_copy_is_independent():
    md = make_metadata()
    cp = md.copy()
    assert cp == md
    cp.pending_acks.remove("b")
    cp.rejected_by.append("b")
    cp.knobs["graph"]["transitions"].append({"x": 1})
    cp.labels["new"] = 1
    cp.participants[0].joined_at = "later"
    cp.participants.append(Participant("c", ParticipantRole.PARTICIPANT, 2))
    cp.manifest.expectations[0].params["seconds"] = 1
    cp.manifest.participants.roles.append("x")
    assert md == make_metadata()


def test_from_dict_errors_name_the_field():
    d = make_metadata().to_dict()
    del d["creator_id"]
    with pytest.raises(ProtocolError, match="missing required field 'creator_id'"):
        ChannelMetadata.from_dict(d)
    d = make_metadata().to_dict()
    d["state"] = "opened"
    with pytest.raises(ProtocolError, match=r"channel state must be one of .* got 'opened'"):
        ChannelMetadata.from_dict(d)
    d = make_metadata().to_dict()
    d["participants"][0]["role"] = "boss"
    with pytest.raises(ProtocolError, match="participant role must be one of"):
        ChannelMetadata.from_dict(d)
    with pytest.raises(ProtocolError, match="must be a JSON object"):
        ChannelMetadata.from_dict([])


def test_small_records_round_trip():
    for rec in (
        ParticipantSchema(min=1, max=None, roles=["a"]),
        Expectation("reply_within", "auto_close", {"seconds": 600}, applies_to="b"),
        ChannelManifest(type="t", version=3, knobs_schema={"graph": "TransitionGraph"}),
        Participant("p", ParticipantRole.PARTICIPANT, 4, "t"),
    ):
        assert type(rec).from_dict(rec.to_dict()) == rec


def test_adapter_result_and_expected_turn_defaults():
    assert AdapterResult() == AdapterResult(None, "")
    assert ExpectedTurn("a").triggering_envelope_id is None


_text = st.text(max_size=8)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_participants = st.lists(
    st.builds(Participant, _text, st.sampled_from(list(ParticipantRole)), st.integers(0, 9), _text),
    max_size=4,
)
_manifest = st.builds(
    ChannelManifest,
    type=_text,
    version=st.integers(1, 5),
    participants=st.builds(
        ParticipantSchema, st.integers(0, 5), st.none() | st.integers(0, 9), st.lists(_text, max_size=3)
    ),
    knobs_schema=st.dictionaries(_text, _text, max_size=3),
    default_view_policy=_text,
    expectations=st.lists(
        st.builds(Expectation, _text, _text, st.dictionaries(_text, _json, max_size=3), st.none() | _text),
        max_size=3,
    ),
)


@given(
    st.builds(
        ChannelMetadata,
        channel_id=_text,
        manifest=_manifest,
        creator_id=_text,
        participants=_participants,
        state=st.sampled_from(list(ChannelState)),
        created_at=_text,
        expires_at=st.none() | _text,
        closed_at=st.none() | _text,
        close_reason=_text,
        parent_channel_id=st.none() | _text,
        knobs=st.dictionaries(_text, _json, max_size=3),
        labels=st.dictionaries(_text, _json, max_size=3),
        required_acks=st.none() | st.integers(0, 5),
        pending_acks=st.lists(_text, max_size=3),
        rejected_by=st.lists(_text, max_size=3),
    )
)
def test_metadata_round_trips_through_json(md: ChannelMetadata):
    again = ChannelMetadata.from_dict(json.loads(json.dumps(md.to_dict())))
    assert again == md
    assert md.copy() == md

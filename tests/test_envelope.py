"""The envelope: fields and wire shape of ag2 1.2.1, visibility, admission checks and the JSON codec."""

from __future__ import annotations

import dataclasses
import datetime
import json
import typing
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ag2net.envelope import (
    CHANNEL_EVENTS,
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CONTEXT_SET,
    EV_EXPECTATION_VIOLATED,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TASK_CANCELLED,
    EV_TEXT,
    MAX_EVENT_DATA_BYTES,
    MAX_EVENT_TYPE_CHARS,
    PRIORITY_RANK,
    Envelope,
    check_envelope,
    check_event_data,
    from_dict,
    from_json,
    is_channel_event,
    is_protocol_event,
    is_task_event,
    to_dict,
    to_json,
    visible_to,
)
from ag2net.errors import ProtocolError
from ag2net.ids import make_id

REFERENCE_FIELDS = [
    "channel_id",
    "sender_id",
    "audience",
    "event_type",
    "event_data",
    "envelope_id",
    "task_id",
    "causation_id",
    "trace_id",
    "priority",
    "depth",
    "idempotency_key",
    "created_at",
    "ttl_seconds",
]

ALICE, BOB, CAROL = "a" * 32, "b" * 32, "c" * 32


def text(audience: list[str] | None = None, sender: str = ALICE, **kw: Any) -> Envelope:
    return Envelope("f" * 32, sender, audience, EV_TEXT, {"text": "hi"}, **kw)


# --- the seed's examples -------------------------------------------------------------------------


class _Channel:
    channel_id = "f" * 32


class _Client:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id


def test_seed_example_raw_envelope_construction() -> None:
    from ag2net import Envelope

    channel, alice, bob = _Channel(), _Client(ALICE), _Client(BOB)
    envelope = Envelope(
        channel_id=channel.channel_id,
        sender_id=alice.agent_id,
        audience=[bob.agent_id],
        event_type="myapp.review_request",
        event_data={"document_id": "doc-123", "kind": "security"},
    )
    check_envelope(envelope)
    assert envelope.envelope_id == "" and envelope.created_at == ""
    assert envelope.priority == "normal" and envelope.depth == 0
    assert visible_to(envelope, BOB) and visible_to(envelope, ALICE) and not visible_to(envelope, CAROL)


def test_seed_example_visible_to() -> None:
    from ag2net import visible_to

    my_agent_id = BOB
    seen = []

    def process(env: Envelope) -> None:
        seen.append(env)

    for env in [text(None), text([BOB]), text([CAROL])]:
        if visible_to(env, my_agent_id):
            process(env)
    assert [e.audience for e in seen] == [None, [BOB]]


def test_seed_example_priority_is_a_plain_string() -> None:
    from ag2net import Priority

    assert typing.get_args(Priority) == ("background", "normal", "urgent")
    env = text(priority="urgent")
    check_envelope(env)
    assert env.to_dict()["priority"] == "urgent"


# --- fields and constants -----------------------------------------------------------------------


def test_field_order_matches_the_reference() -> None:
    assert [f.name for f in dataclasses.fields(Envelope)] == REFERENCE_FIELDS
    assert hasattr(Envelope, "__slots__")
    env = Envelope("c", "s", None, "t", {}, "id", "task", "cause", "trace", "urgent", 2, "idem", "now", 9)
    assert env.to_dict() == dict(
        zip(
            REFERENCE_FIELDS,
            ["c", "s", None, "t", {}, "id", "task", "cause", "trace", "urgent", 2, "idem", "now", 9],
            strict=True,
        )
    )


def test_defaults() -> None:
    env = Envelope("c", "s", None, "t", {})
    assert (env.envelope_id, env.task_id, env.causation_id, env.trace_id) == ("", None, None, None)
    assert (env.priority, env.depth, env.idempotency_key, env.created_at, env.ttl_seconds) == (
        "normal",
        0,
        None,
        "",
        None,
    )


def test_event_type_strings_are_exact() -> None:
    assert {
        EV_TEXT: "ag2.msg.text",
        EV_PACKET: "ag2.packet",
        EV_CHANNEL_INVITE: "ag2.channel.invite",
        EV_CHANNEL_INVITE_ACK: "ag2.channel.invite.ack",
        EV_CHANNEL_INVITE_REJECT: "ag2.channel.invite.reject",
        EV_CHANNEL_OPENED: "ag2.channel.opened",
        EV_CHANNEL_CLOSED: "ag2.channel.closed",
        EV_CHANNEL_EXPIRED: "ag2.channel.expired",
        EV_EXPECTATION_VIOLATED: "ag2.expectation.violated",
        EV_CONTEXT_SET: "ag2.context.set",
        EV_TASK_CANCEL_REQUEST: "ag2.task.cancel_request",
        EV_TASK_CANCELLED: "ag2.task.cancelled",
    } == {
        "ag2.msg.text": "ag2.msg.text",
        "ag2.packet": "ag2.packet",
        "ag2.channel.invite": "ag2.channel.invite",
        "ag2.channel.invite.ack": "ag2.channel.invite.ack",
        "ag2.channel.invite.reject": "ag2.channel.invite.reject",
        "ag2.channel.opened": "ag2.channel.opened",
        "ag2.channel.closed": "ag2.channel.closed",
        "ag2.channel.expired": "ag2.channel.expired",
        "ag2.expectation.violated": "ag2.expectation.violated",
        "ag2.context.set": "ag2.context.set",
        "ag2.task.cancel_request": "ag2.task.cancel_request",
        "ag2.task.cancelled": "ag2.task.cancelled",
    }
    assert {
        EV_CHANNEL_INVITE,
        EV_CHANNEL_INVITE_ACK,
        EV_CHANNEL_INVITE_REJECT,
        EV_CHANNEL_OPENED,
        EV_CHANNEL_CLOSED,
        EV_CHANNEL_EXPIRED,
    } == CHANNEL_EVENTS


def test_event_class_prefixes() -> None:
    assert is_channel_event(EV_CHANNEL_OPENED) and is_channel_event("ag2.channel.custom")
    assert not is_channel_event(EV_TEXT) and not is_channel_event(EV_EXPECTATION_VIOLATED)
    assert is_task_event(EV_TASK_CANCEL_REQUEST) and not is_task_event(EV_TEXT)
    assert is_protocol_event(EV_CHANNEL_INVITE_ACK) and is_protocol_event(EV_TASK_CANCELLED)
    assert not is_protocol_event(EV_EXPECTATION_VIOLATED) and not is_protocol_event("myapp.ag2.channel.x")


def test_priority_rank_serves_urgent_first() -> None:
    assert sorted(["background", "urgent", "normal"], key=PRIORITY_RANK.__getitem__) == [
        "urgent",
        "normal",
        "background",
    ]


# --- visibility ---------------------------------------------------------------------------------


def test_visible_to_rules() -> None:
    assert visible_to(text(None), BOB) and visible_to(text(None), CAROL)
    assert visible_to(text([BOB]), BOB) and not visible_to(text([BOB]), CAROL)
    # the sender always sees its own, even when it is not listed
    assert visible_to(text([BOB]), ALICE)
    # an empty audience is the sender only
    assert visible_to(text([]), ALICE) and not visible_to(text([]), BOB)


def test_visible_to_ignores_event_type() -> None:
    env = Envelope("c", ALICE, [BOB], EV_CHANNEL_CLOSED, {"reason": "x", "channel_id": "c"})
    assert visible_to(env, BOB) and not visible_to(env, CAROL)


# --- wire shape and codec -----------------------------------------------------------------------


def test_wire_shape_has_sorted_reference_keys() -> None:
    env = text([BOB], envelope_id=make_id(), created_at="2026-01-01T00:00:00.000000Z")
    wire = to_json(env)
    assert list(json.loads(wire)) == sorted(REFERENCE_FIELDS)
    assert wire == json.dumps(env.to_dict(), sort_keys=True)
    assert to_dict(env) == dataclasses.asdict(env)


@pytest.mark.parametrize(
    "value",
    ["plain", 'é ☃ \u2028 "q" \\ \n', "😀", "", 0, -7, 10**40, True, False, None, 1.5, [1, "a"], {"k": 1}],
)
def test_a_one_key_event_data_is_written_as_json_dumps_writes_it(value: Any) -> None:
    """A text post's ``{"text": ...}`` (one key, a str or int value) is written without the json module's
    encoder: every value type gives the bytes ``json.dumps(..., sort_keys=True)`` gives."""
    for key in ("text", "ключ"):
        env = Envelope("c", "s", None, EV_TEXT, {key: value}, envelope_id=make_id(), created_at="2026")
        assert to_json(env) == json.dumps(env.to_dict(), sort_keys=True)
    env = Envelope("c", "s", None, EV_TEXT, {7: value}, envelope_id=make_id(), created_at="2026")
    assert to_json(env) == json.dumps(env.to_dict(), sort_keys=True)  # a non-str key: json's own path


def test_round_trip() -> None:
    env = text(
        [BOB, CAROL], envelope_id=make_id(), task_id="t1", causation_id=make_id(), depth=2, ttl_seconds=30
    )
    assert from_json(to_json(env)) == env
    assert from_dict(json.loads(json.dumps(to_dict(env)))) == env
    assert Envelope.from_json(env.to_json().encode()) == env


def test_copy_has_its_own_audience() -> None:
    env = text([BOB])
    dup = env.copy()
    assert dup == env and dup is not env
    dup.audience.append(CAROL)  # type: ignore[union-attr]
    assert env.audience == [BOB]


def test_from_dict_names_an_unknown_key() -> None:
    data = text().to_dict() | {"sequence": 3}
    with pytest.raises(ProtocolError) as info:
        Envelope.from_dict(data)
    assert str(info.value) == "envelope has unknown field 'sequence'; remove it"


def test_from_dict_names_a_missing_required_field() -> None:
    data = text().to_dict()
    del data["event_type"]
    with pytest.raises(ProtocolError) as info:
        Envelope.from_dict(data)
    assert str(info.value) == "envelope is missing required field 'event_type'"


def test_from_dict_allows_missing_optional_fields() -> None:
    env = Envelope.from_dict(
        {"channel_id": "c", "sender_id": "s", "audience": None, "event_type": "t", "event_data": {}}
    )
    assert env == Envelope("c", "s", None, "t", {})


def test_from_dict_and_json_refuse_non_objects() -> None:
    with pytest.raises(ProtocolError, match="envelope must be a JSON object, got list"):
        Envelope.from_dict([])  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match="envelope is not valid JSON"):
        from_json("{nope")
    with pytest.raises(ProtocolError, match="envelope must be a JSON object, got str"):
        from_json('"x"')


def test_from_dict_checks_field_shapes() -> None:
    data = text().to_dict() | {"depth": "1"}
    with pytest.raises(ProtocolError, match="depth must be a non-negative integer, got '1'"):
        Envelope.from_dict(data)


# --- admission checks ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"channel_id": 5}, "channel_id must be a string, got int"),
        ({"sender_id": None}, "sender_id must be a string, got NoneType"),
        ({"channel_id": "x" * 201}, "channel_id is longer than 200 characters"),
        ({"event_type": ""}, "event_type must be a non-empty string such as 'myapp.review_request'"),
        ({"event_type": None}, "event_type must be a non-empty string such as 'myapp.review_request'"),
        ({"event_type": "x" * 201}, "event_type is 201 characters long; at most 200 are allowed"),
        ({"event_data": "hi"}, "event_data must be a JSON object, got str"),
        ({"event_data": None}, "event_data must be a JSON object, got NoneType"),
        ({"audience": "bob"}, "audience must be a list of participant ids or null, got str"),
        ({"audience": ("b",)}, "audience must be a list of participant ids or null, got tuple"),
        ({"audience": [BOB, ""]}, "audience[1] must be a non-empty string, got ''"),
        ({"audience": [None]}, "audience[0] must be a non-empty string, got None"),
        ({"priority": "high"}, "priority must be one of 'urgent', 'normal', 'background', got 'high'"),
        ({"depth": -1}, "depth must be a non-negative integer, got -1"),
        ({"depth": True}, "depth must be a non-negative integer, got True"),
        ({"depth": 1.0}, "depth must be a non-negative integer, got 1.0"),
        ({"ttl_seconds": -5}, "ttl_seconds must be a non-negative integer or null, got -5"),
        ({"ttl_seconds": "5"}, "ttl_seconds must be a non-negative integer or null, got '5'"),
        ({"envelope_id": None}, "envelope_id must be a string"),
        ({"created_at": 0}, "created_at must be a string"),
        ({"task_id": 7}, "task_id must be a string or null, got int"),
        ({"causation_id": ["x"]}, "causation_id must be a string or null, got list"),
        ({"trace_id": 1}, "trace_id must be a string or null, got int"),
        ({"idempotency_key": {}}, "idempotency_key must be a string or null, got dict"),
    ],
)
def test_shape_checks_name_the_field(changes: dict[str, Any], message: str) -> None:
    env = dataclasses.replace(text(), **changes)
    with pytest.raises(ProtocolError) as info:
        check_envelope(env)
    assert str(info.value) == message


def test_event_type_at_the_limit_is_accepted() -> None:
    check_envelope(Envelope("c", "s", None, "x" * MAX_EVENT_TYPE_CHARS, {}))
    assert MAX_EVENT_TYPE_CHARS == 200


@pytest.mark.parametrize(
    ("event_data", "where"),
    [
        ({"when": datetime.datetime(2026, 1, 1)}, "datetime at event_data.when"),
        ({"a": {"b": [1, {"c": {1, 2}}]}}, "set at event_data.a.b[1].c"),
        ({"blob": b"x"}, "bytes at event_data.blob"),
        ({"n": float("nan")}, "non-finite float at event_data.n"),
        ({"n": [float("inf")]}, "non-finite float at event_data.n[0]"),
        ({(1, 2): "x"}, "tuple key at event_data"),
        ({"m": {float("inf"): 1}}, "non-finite float key at event_data.m"),
        ({"obj": object()}, "object at event_data.obj"),
        # json accepts an int key; the culprit is the value beneath it
        ({1: datetime.date(2026, 1, 1)}, "date at event_data.1"),
    ],
)
def test_non_json_event_data_names_the_path(event_data: dict[Any, Any], where: str) -> None:
    with pytest.raises(ProtocolError) as info:
        check_envelope(Envelope("c", "s", None, "t", event_data))
    assert str(info.value) == f"event_data is not JSON-serialisable: {where}"


def test_circular_event_data_is_refused_not_crashed() -> None:
    loop: dict[str, Any] = {}
    loop["self"] = [loop]
    with pytest.raises(ProtocolError) as info:
        check_event_data(loop)
    assert str(info.value) == "event_data is not JSON-serialisable: circular reference at event_data.self[0]"


def test_shared_but_acyclic_values_are_fine() -> None:
    shared = {"x": 1}
    check_event_data({"a": shared, "b": [shared, shared]})


def test_absurdly_deep_event_data_is_refused_not_crashed() -> None:
    root: list[Any] = []
    cur = root
    for _ in range(50_000):
        nxt: list[Any] = []
        cur.append(nxt)
        cur = nxt
    with pytest.raises(ProtocolError) as info:
        check_event_data({"deep": root})
    assert str(info.value) == "event_data is nested too deeply to encode; flatten it"
    cur.append(datetime.date(2026, 1, 1))
    with pytest.raises(ProtocolError) as info:
        check_event_data({"deep": root})
    message = str(info.value)
    assert message.startswith("event_data is not JSON-serialisable: date at event_data.deep[0][0]")
    assert len(message) < 400


def test_event_data_one_mebibyte_limit() -> None:
    overhead = len('{"t":""}')
    at_limit = {"t": "x" * (MAX_EVENT_DATA_BYTES - overhead)}
    assert check_event_data(at_limit) == json.dumps(at_limit, separators=(",", ":"))
    with pytest.raises(ProtocolError) as info:
        check_event_data({"t": "x" * (MAX_EVENT_DATA_BYTES - overhead + 1)})
    assert str(info.value) == "event_data is 1048577 bytes encoded; at most 1048576 (1 MiB) are allowed"
    assert MAX_EVENT_DATA_BYTES == 1024 * 1024


def test_check_event_data_returns_compact_json() -> None:
    assert check_event_data({"text": "hé", "n": [1, 2]}) == '{"text":"h\\u00e9","n":[1,2]}'


# --- property: the JSON codec is lossless -------------------------------------------------------

_ids = st.text(alphabet="0123456789abcdef", min_size=1, max_size=32)
_json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_json_values = st.recursive(
    _json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
_optional_text = st.none() | st.text(max_size=40)

envelopes = st.builds(
    Envelope,
    channel_id=_ids,
    sender_id=_ids,
    audience=st.none() | st.lists(_ids, max_size=4),
    event_type=st.text(min_size=1, max_size=50),
    event_data=st.dictionaries(st.text(max_size=10), _json_values, max_size=5),
    envelope_id=st.just("") | _ids,
    task_id=_optional_text,
    causation_id=_optional_text,
    trace_id=_optional_text,
    priority=st.sampled_from(["background", "normal", "urgent"]),
    depth=st.integers(min_value=0, max_value=50),
    idempotency_key=_optional_text,
    created_at=st.just("") | st.just("2026-01-01T00:00:00.000000Z"),
    ttl_seconds=st.none() | st.integers(min_value=0, max_value=10**6),
)


@settings(max_examples=200, deadline=None)
@given(envelopes)
def test_json_round_trip_of_any_valid_envelope_is_lossless(env: Envelope) -> None:
    check_envelope(env)
    wire = env.to_json()
    again = Envelope.from_json(wire)
    assert again == env
    assert again.to_json() == wire
    assert list(json.loads(wire)) == sorted(REFERENCE_FIELDS)

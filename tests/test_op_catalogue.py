"""The op catalogue (``ag2net.protocol.ops``): every op declared once, with an access rule and a codec.

- The hub's handlers and the catalogue name the same ops; a handler for an undeclared op is refused.
- Every op has an access rule the server understands; an ``agent`` rule names one of the op's params;
  every ``policy`` rule has its method on the server's ``WirePolicy``; each op's access is decided in the
  one home its tag names (``WirePolicy`` for ``policy``, the hub's ``CALLER_RULES`` for ``caller``).
- Every op's params and result go through the JSON codec and back unchanged (representative values).
- The same op returns the same typed result over the in-process link and over a real WebSocket.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from ag2net.breakpoints import Breakpoint, Decision, WaitingItem
from ag2net.channel import ChannelMetadata
from ag2net.client import HubClient
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.hub import ops as hub_ops
from ag2net.identity import AuthBlock, Passport, Resume, Rule
from ag2net.protocol.codec import BOOL, INT, JSON, STR, ListOf, Record, Scalar, TupleOf, dumps
from ag2net.protocol.ops import ACCESS_RULES, OPS
from ag2net.protocol.ops import hub_ops as declared_hub_ops
from ag2net.protocol.records import PendingTurn
from ag2net.server import WirePolicy, classified_ops, serve_ws
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState


def test_the_hub_answers_exactly_the_declared_ops() -> None:
    assert set(hub_ops.OPS) == set(declared_hub_ops())
    assert classified_ops() == declared_hub_ops()
    assert {name for name, spec in OPS.items() if spec.connection} == {
        "observe",
        "unobserve",
        "rotate_secret",
    }


def test_a_handler_for_an_undeclared_op_is_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"declare it in ag2net/protocol/ops.py"):
        hub_ops.op("teleport")


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_has_an_access_rule_the_server_enforces(name: str) -> None:
    spec = OPS[name]
    assert spec.access.rule in ACCESS_RULES, spec
    params = {p.name for p in spec.params}
    if spec.access.rule == "agent":
        assert spec.access.param in params, f"{name}: agent rule names {spec.access.param!r}, not a param"
    if spec.access.rule == "policy":
        assert callable(getattr(WirePolicy, name, None)), f"{name}: WirePolicy has no rule {name}()"
    assert spec.doc, f"{name} has no one-line description"


# ------------------------------------------------------------------ codec round trips


def _samples(hub_values: dict[type, Any]) -> dict[type, Any]:
    spec = TaskSpec(title="write", description="the report", payload={"pages": 3}, capability="writing")
    task = TaskMetadata(
        task_id="t-1",
        owner_id="a1",
        spec=spec,
        state=TaskState.RUNNING if hasattr(TaskState, "RUNNING") else next(iter(TaskState)),
        created_at="2026-01-01T00:00:00Z",
        progress={"done": 1},
        result={"ok": True},
        channel_id="c1",
    )
    return {
        **hub_values,
        TaskMetadata: task,
        PendingTurn: PendingTurn("c1", "e1", "2026-01-01T00:00:00Z"),
        Breakpoint: Breakpoint("b1", "sender:critic", "envelope", True, "ops", "2026-01-01T00:00:00Z", 2),
        WaitingItem: WaitingItem(
            "w1", "held", "c1", "a1", "2026-01-01T00:00:00Z", {"would_be_seq": 3, "reason": "step"}
        ),
        Decision: Decision("edit", by="ops", audience=["a1"], arguments={"path": "/tmp"}),
    }


JSON_SAMPLE = {"text": "hé ✓", "n": [1, 2.5, None, True], "nested": {"k": ["v"]}}


def sample(codec: Any, values: dict[type, Any]) -> Any:
    if isinstance(codec, ListOf):
        return [sample(codec.item, values), sample(codec.item, values)]
    if isinstance(codec, TupleOf):
        return tuple(sample(c, values) for c in codec.items)
    if isinstance(codec, Record):
        return values[codec.cls]
    if isinstance(codec, Scalar):
        return {INT.label: 7, BOOL.label: True, STR.label: "why: not a participant"}[codec.label]
    assert codec is JSON
    return JSON_SAMPLE


def _round_trip_json(data: Any) -> Any:
    return json.loads(dumps(data))


async def _hub_values(hub: Any) -> dict[type, Any]:
    """Representative records made by a real hub: passports, a resume, a rule, a channel, an envelope."""
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"), resume=Resume(summary="reads"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    md = await hc.create_channel(
        creator_id=ana.agent_id,
        manifest_type="conversation",
        participants=[ana.agent_id, bob.agent_id],
        knobs={"max_turns": 4},
        labels={"topic": "tea"},
    )
    await hc.post_envelope(
        Envelope(
            channel_id=md.channel_id,
            sender_id=ana.agent_id,
            event_type=EV_TEXT,
            event_data={"text": "hi"},
            audience=None,
        )
    )
    envelope = (await hc.read_wal(md.channel_id))[-1]
    values = {
        Passport: await hc.get_agent("ana"),
        Resume: await hc.get_resume(ana.agent_id),
        Rule: await hc.get_rule(ana.agent_id),
        ChannelMetadata: await hc.get_channel(md.channel_id),
        Envelope: envelope,
    }
    await hc.close()
    return values


async def test_every_op_round_trips_its_params_and_result_through_the_json_codec(hub: Any) -> None:
    values = _samples(await _hub_values(hub))
    # Params: a client presents its own claim (kept in params); results never carry one.
    with_claim = Passport(name="eve", kind="human", auth=AuthBlock(scheme="api_key", claim={"token": "s"}))
    for name, spec in sorted(OPS.items()):
        params = {p.name: sample(p.codec, values) for p in spec.params}
        if "passport" in params:
            params["passport"] = with_claim
        wire = _round_trip_json(spec.encode_params(params))
        assert spec.decode_params(dict(wire)) == params, name
        # Typed values pass through decoding unchanged (the in-process link).
        assert spec.decode_params(dict(params)) == params, name
        result = sample(spec.result, values)
        back = spec.decode_result(_round_trip_json(spec.encode_result(result)))
        assert back == result, f"{name}: {spec.result!r} does not round-trip"
        assert type(back) is type(result), name


def test_a_result_passport_loses_its_claim_on_the_wire() -> None:
    spec = OPS["get_agent"]
    passport = Passport(name="eve", kind="human", auth=AuthBlock(scheme="api_key", claim={"token": "s"}))
    data = _round_trip_json(spec.encode_result(passport))
    assert data["auth"].get("claim") in (None, {})
    assert spec.decode_result(data).auth.claim == {}


def test_a_bad_record_param_is_refused_with_one_sentence() -> None:
    from ag2net.errors import ProtocolError

    with pytest.raises(ProtocolError, match=r"^post_envelope needs params.envelope as an envelope object$"):
        OPS["post_envelope"].decode_params({"envelope": 42})
    with pytest.raises(ProtocolError, match=r"expected a Resume object, got str"):
        OPS["set_resume"].decode_params({"agent_id": "a", "resume": "long"})


# ------------------------------------------------------------------ the same typed result on every link


async def _typed_results(hc: HubClient, ana_id: str, channel_id: str) -> dict[str, Any]:
    return {
        "get_agent": await hc.call("get_agent", name_or_id="ana"),
        "get_channel": await hc.call("get_channel", channel_id=channel_id),
        "read_wal": list(await hc.call("read_wal", channel_id=channel_id)),
        "read_wal_seq": await hc.call("read_wal_seq", channel_id=channel_id, first_seq=1, last_seq=9),
        "explain_send": await hc.call(
            "explain_send", channel_id=channel_id, sender_id=ana_id, event_type=EV_TEXT
        ),
        "pending_turns_for": await hc.call("pending_turns_for", agent_id=ana_id),
        "list_audit": (await hc.call("list_audit", since=0, limit=3))[:1],
        "wal_count": await hc.call("wal_count", channel_id=channel_id),
    }


def _shape(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, [_shape(v) for v in value])
    return type(value).__name__


async def test_the_in_process_and_the_websocket_link_return_the_same_typed_results(hub: Any) -> None:
    local = HubClient.local(hub)
    ana = await local.register_human(Passport(name="ana", kind="human"))
    bob = await local.register_human(Passport(name="bob", kind="human"))
    md = await local.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    await local.post_envelope(
        Envelope(
            channel_id=md.channel_id,
            sender_id=ana.agent_id,
            event_type=EV_TEXT,
            event_data={"text": "x"},
            audience=None,
        )
    )
    here = await _typed_results(local, ana.agent_id, md.channel_id)
    async with serve_ws(hub, "127.0.0.1", 0, operator_token="op") as server:
        remote = HubClient.connect(server.url(), operator_token="op", rpc_timeout=10, identity_secrets=False)
        try:
            there = await _typed_results(remote, ana.agent_id, md.channel_id)
        finally:
            await remote.close()
    await local.close()
    assert isinstance(there["get_agent"], Passport) and isinstance(there["get_channel"], ChannelMetadata)
    assert isinstance(there["explain_send"], tuple) and isinstance(there["read_wal_seq"][0], tuple)
    assert {k: _shape(v) for k, v in there.items()} == {k: _shape(v) for k, v in here.items()}
    assert there["read_wal"] == here["read_wal"]
    assert there["read_wal_seq"] == here["read_wal_seq"]
    assert there["explain_send"] == here["explain_send"]
    assert there["get_channel"] == here["get_channel"]


# ------------------------------------------------------------------ one declaration per op


def test_a_forwarded_op_calls_the_hub_method_of_its_name_with_the_request_fields() -> None:
    """An op without a handler of its own is the hub's method of the op's name, called with the request's
    fields as keywords: each such method takes exactly those."""
    import inspect

    from ag2net.hub import Hub

    assert hub_ops.FORWARDED, "no op is forwarded"
    for name, method in sorted(hub_ops.FORWARDED.items()):
        spec = OPS[name]
        signature = inspect.signature(getattr(Hub, method))
        signature.bind(None, **{p.attr: None for p in spec.params})  # raises if a field is not a keyword


async def test_the_hub_has_what_the_op_handlers_use(hub: Any) -> None:
    """``HubOps`` (what ``ag2net/hub/ops.py`` needs of a hub) is met by the real hub."""
    from ag2net.hub.access import CallerHub

    members = [
        n
        for shape in (hub_ops.HubOps, CallerHub)
        for n in [*(n for n in vars(shape) if not n.startswith("_")), *shape.__annotations__]
    ]
    assert [n for n in members if not hasattr(hub, n)] == []


def test_a_request_is_checked_however_it_is_made() -> None:
    from ag2net.errors import ProtocolError
    from ag2net.protocol import ops

    with pytest.raises(ProtocolError, match=r"^params\.channel_id must be a string$"):
        ops.ReadWal(7)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match=r"^params\.channel_id must be a string$"):
        OPS["read_wal"].parse({"since": 3})
    parsed = OPS["read_wal"].parse({"channel_id": "c", "since": "3", "unknown": 1})
    assert parsed == ops.ReadWal("c", since=3)
    assert parsed.to_params() == {"channel_id": "c", "since": 3, "until": None}
    # the params ag2 1.2.1 leaves out stay out while they hold their default
    assert ops.ListChannels(agent_id="a").to_params() == {
        "agent_id": "a",
        "include_terminal": False,
        "limit": 50,
    }
    assert "bind" not in ops.Register(passport=Passport(name="p")).to_params()


def test_each_client_method_made_from_a_request_has_its_signature() -> None:
    import inspect

    from ag2net.protocol import ops

    assert HubClient.read_wal.__name__ == "read_wal"
    assert str(inspect.signature(ops.ReadWal)).startswith("(channel_id: 'str', *, since: 'int' = 0")
    assert HubClient.checkpoint_task.__doc__ and "last write wins" in HubClient.checkpoint_task.__doc__


def test_every_per_op_table_outside_the_catalogue_names_declared_ops() -> None:
    """What the server, its policy and the WebSocket link do around particular ops is one table entry per
    op (no op-name switches); each entry names an op of the catalogue."""
    from ag2net.server import endpoint, policy
    from ag2net.transport import ws_identities

    tables = {
        "server CONNECTION_OPS": endpoint.CONNECTION_OPS,
        "server BEFORE": endpoint.BEFORE,
        "server AFTER": endpoint.AFTER,
        "policy SIZED": policy.SIZED,
        "policy envelope narrows": policy._ENVELOPE_NARROWS,
        "policy listing narrows": policy._LISTING_NARROWS,
        "link _PRESENT": ws_identities._PRESENT,
        "link _LEARN": ws_identities._LEARN,
    }
    assert {name: sorted(set(table) - set(OPS)) for name, table in tables.items()} == {n: [] for n in tables}


# ------------------------------------------------------------------ each access rule has one home


def _policy_rules() -> set[str]:
    """The ops ``WirePolicy`` has a rule of its own for (a method named like an op of the catalogue)."""
    return {name for name in OPS if callable(getattr(WirePolicy, name, None))}


def test_each_op_access_is_decided_in_the_one_home_its_tag_names() -> None:
    """The tag says which kind of rule an op has; the rule's body lives once. A ``policy`` op has exactly
    one rule on ``WirePolicy`` and no other op has one there; an op tagged ``caller`` has exactly one rule
    in the hub's ``CALLER_RULES`` and no other op has one there; the hub's rules are checked once, by
    ``run_op``, and no other module of the hub refuses access to an op."""
    from ag2net.hub import access

    policy_tagged = {name for name, spec in OPS.items() if spec.access.rule == "policy"}
    caller_tagged = {name for name, spec in OPS.items() if spec.access.caller}
    assert _policy_rules() == policy_tagged
    assert set(access.CALLER_RULES) == caller_tagged
    assert caller_tagged <= set(declared_hub_ops())  # a connection op never reaches run_op
    # the hub's rules are its own, not restated by the ops module or the checkpoints
    assert not hasattr(hub_ops, "caller_is_operator") and not hasattr(hub_ops, "check_poster")
    from ag2net.hub import checkpoints

    assert not hasattr(checkpoints, "authorize_checkpoint")


def test_a_caller_rule_for_an_op_not_tagged_caller_is_refused() -> None:
    from ag2net.hub import access

    with pytest.raises(ValueError, match=r"caller=True"):
        access.caller_rule("get_agent")
    with pytest.raises(ValueError, match=r"caller=True"):
        access.caller_rule("teleport")

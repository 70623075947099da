"""Issue 14, defects 7-9: ag2-style code on ag2net behaves as on ``ag2.network`` 1.2.1.

* workflow transitions: a new ``TransitionRegistry`` knows the built-ins, ``default()`` is one shared
  registry, and custom targets/conditions that only follow ag2's protocols (a ``name`` and
  ``resolve``/``evaluate``; no ag2net base class, no ``to_dict``) register, serialise, load and route a
  real workflow channel;
* the error phrases ag2 users match on (``missing required string field 'token'``,
  ``no transition target registered for ...``);
* ``Hub.health()`` has ag2's keys, ``on_turn_failed`` listeners get an exception, ``Hub(store)`` then
  ``hydrate()`` works without ``open()``, and ``bind_endpoint`` with an unknown endpoint id raises.

Written from ag2's observable behaviour (checked side by side against ag2 1.2.1), not from its tests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import pytest
from support import quiet, until

from ag2net import (
    EV_TEXT,
    Agent,
    Hub,
    HubClient,
    Passport,
    ScriptedModel,
    SqliteStore,
    tool_call,
)
from ag2net.adapters.transitions import (
    Always,
    FromSpeaker,
    StayTarget,
    TerminateTarget,
    Transition,
    TransitionDecision,
    TransitionGraph,
    TransitionRegistry,
    register_condition,
    register_target,
)
from ag2net.errors import AuthError, NotFoundError, ProtocolError, WorkflowGraphError
from ag2net.hub.auth import ApiKeyAuth
from ag2net.naming import channel_label

# ag2 1.2.1's Hub.health() keys (checked against the real package)
AG2_HEALTH_KEYS = {
    "active_channels",
    "registered_agents",
    "pending_inbox_total",
    "max_pending_inbox_depth",
    "registered_listeners",
    "adapters_loaded",
    "audit_log_bytes",
    "telemetry_log_bytes",
}


# custom routing written the ag2 way: plain dataclasses following the protocols ---------------------
@dataclass
class LastParticipant:
    """Hands the turn to the last participant in channel order, or ends with ``reason`` after ``hops``."""

    hops: int = 99
    reason: str = "hops_done"
    name: ClassVar[str] = "compat_last_participant"

    def resolve(self, state, envelope) -> TransitionDecision:
        if state.turn_count >= self.hops:
            return TransitionDecision(None, self.reason)
        return TransitionDecision(state.participant_order[-1])


@dataclass
class SaidWord:
    word: str
    name: ClassVar[str] = "compat_said_word"

    def evaluate(self, state, envelope) -> bool:
        return envelope.event_type == EV_TEXT and self.word in str(envelope.event_data.get("text", ""))


# --- defect 7: the registry --------------------------------------------------------------------------
def test_a_new_registry_knows_the_builtins_and_stays_isolated():
    reg = TransitionRegistry()
    assert reg.target_from_dict({"name": "stay"}) == StayTarget()
    assert reg.target_from_dict({"name": "terminate", "args": {"reason": "x"}}) == TerminateTarget("x")
    assert reg.condition_from_dict({"name": "from_speaker", "args": {"agent_id": "a"}}) == FromSpeaker("a")
    assert reg.target_from_dict(None) == TerminateTarget()  # a graph without default_target

    @dataclass
    class OnlyHere:
        name: ClassVar[str] = "compat_only_here"

        def resolve(self, state, envelope) -> TransitionDecision:
            return TransitionDecision(None)

    reg.register_target(OnlyHere)
    assert reg.target_from_dict({"name": "compat_only_here"}) == OnlyHere()
    assert "compat_only_here" not in TransitionRegistry().targets
    assert "compat_only_here" not in TransitionRegistry.default().targets


def test_default_is_one_shared_registry_that_register_target_fills():
    assert TransitionRegistry.default() is TransitionRegistry.default()
    register_target(LastParticipant)
    register_condition(SaidWord)
    assert TransitionRegistry.default().targets["compat_last_participant"] is LastParticipant
    assert TransitionRegistry.default().conditions["compat_said_word"] is SaidWord


def test_custom_protocol_classes_serialise_and_load_without_to_dict():
    register_target(LastParticipant)
    register_condition(SaidWord)
    graph = TransitionGraph(
        "a",
        [Transition(SaidWord("over"), LastParticipant(hops=3, reason="enough"), priority=1)],
        default_target=LastParticipant(),
        max_turns=5,
    )
    data = graph.to_dict()
    assert data["transitions"] == [
        {
            "when": {"name": "compat_said_word", "args": {"word": "over"}},
            "then": {"name": "compat_last_participant", "args": {"hops": 3, "reason": "enough"}},
            "priority": 1,
        }
    ]
    assert data["default_target"] == {
        "name": "compat_last_participant",
        "args": {"hops": 99, "reason": "hops_done"},
    }
    assert TransitionGraph.loads(graph.dumps()) == graph
    # an isolated registry does not know them, and says so in ag2's words
    with pytest.raises(
        WorkflowGraphError, match=r"^no transition condition registered for 'compat_said_word'; "
    ):
        TransitionGraph.loads(data, registry=TransitionRegistry())


def test_registering_a_class_without_a_name_says_what_is_missing():
    class Nameless:
        def resolve(self, state, envelope) -> TransitionDecision:
            return TransitionDecision(None)

    with pytest.raises(
        WorkflowGraphError, match=r"^target class Nameless needs a non-empty string class attribute `name`"
    ):
        TransitionRegistry().register_target(Nameless)


async def test_a_workflow_channel_routes_through_a_registered_custom_target_and_condition():
    register_target(LastParticipant)
    register_condition(SaidWord)
    hub = await Hub.open(None, **quiet())
    try:
        hc = HubClient.local(hub)
        ana, ben, cy = [await hc.register_human(Passport(name=n, kind="human")) for n in ("ana", "ben", "cy")]
        graph = TransitionGraph(
            ana.agent_id,
            [
                Transition(SaidWord("over"), LastParticipant(hops=3, reason="enough")),
                Transition(Always(), StayTarget(), priority=5),
            ],
        )
        flow = await ana.open(type="workflow", target=["ben", "cy"], knobs={"graph": graph.to_dict()})
        cid = flow.channel_id
        await ana.send(cid, "thinking")  # Always -> stay: ana again
        await ana.send(cid, "over to you")  # SaidWord -> the last participant, cy
        with pytest.raises(ProtocolError, match="expects"):
            await ben.send(cid, "me?")
        await cy.send(cid, "over and out")  # third turn: the custom target ends the workflow
        md = await hc.get_channel(cid)
        assert md.is_terminal() and md.close_reason == "enough"
        await hc.close()
    finally:
        await hub.close()


# --- defect 8: the phrases ag2 users match on -------------------------------------------------------
@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        (
            {"initial_speaker": "a", "default_target": {"name": "warp"}},
            "no transition target registered for 'warp'",
        ),
        (
            {
                "initial_speaker": "a",
                "transitions": [{"when": {"name": "sometimes"}, "then": {"name": "stay"}}],
            },
            "no transition condition registered for 'sometimes'",
        ),
    ],
)
def test_unknown_names_use_ag2s_phrase_and_name_the_fix(data, phrase):
    with pytest.raises(WorkflowGraphError) as err:
        TransitionGraph.loads(data)
    message = str(err.value)
    assert message.startswith(phrase + "; choose from [")
    assert message.endswith("or add the class with register_target()") or message.endswith(
        "or add the class with register_condition()"
    )


async def test_a_workflow_with_an_unknown_target_is_refused_with_ag2s_phrase():
    hub = await Hub.open(None, **quiet())
    try:
        hc = HubClient.local(hub)
        ana, _ben = [await hc.register_human(Passport(name=n, kind="human")) for n in ("ana", "ben")]
        knobs = {"graph": {"initial_speaker": ana.agent_id, "default_target": {"name": "warp"}}}
        with pytest.raises(
            ProtocolError, match=r"^invalid workflow graph: no transition target registered for 'warp'"
        ):
            await ana.open(type="workflow", target="ben", knobs=knobs)
        await hc.close()
    finally:
        await hub.close()


@pytest.mark.parametrize(
    ("keys", "claim"), [({"ana": "k"}, {"token": ""}), ({"ana": ""}, {"token": ""}), ({"ana": "k"}, {})]
)
async def test_api_key_auth_refuses_an_empty_or_missing_token_in_ag2s_words(keys, claim):
    with pytest.raises(AuthError, match=r"^api_key claim missing required string field 'token'"):
        await ApiKeyAuth(keys).validate(Passport(name="ana"), claim)


async def test_api_key_auth_still_accepts_the_right_token_and_names_a_mismatch():
    auth = ApiKeyAuth({"ana": "k"})
    await auth.validate(Passport(name="ana"), {"token": "k"})
    with pytest.raises(AuthError, match=r"^api_key mismatch for 'ana'$"):
        await auth.validate(Passport(name="ana"), {"token": "x"})


# --- defect 9: health, on_turn_failed, hydrate, bind_endpoint ----------------------------------------
async def test_health_has_ag2s_keys_beside_ours_and_counts_audit_bytes():
    hub = await Hub.open(None, **quiet())
    try:
        health = hub.health()
        assert set(health) >= AG2_HEALTH_KEYS
        assert {"channels", "envelopes", "wal_cache", "store"} <= set(health)  # ours stay
        assert health["audit_log_bytes"] == 0 and health["telemetry_log_bytes"] == 0
        hc = HubClient.local(hub)
        await hc.register_human(Passport(name="ana", kind="human"))  # writes an agent_registered audit
        [(_, record)] = await hub.store.read_audit()
        assert hub.health()["audit_log_bytes"] >= len(str(record["kind"])) > 0

        class Telemetry:
            bytes_written = 1234

            def channel_span_context(self, channel_id):
                return None

        hub.register_listener(Telemetry())
        assert hub.health()["telemetry_log_bytes"] == 1234
        await hc.close()
    finally:
        await hub.close()


class FailureListener:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    async def on_turn_failed(self, channel_id, agent_id, envelope_id, exc) -> None:
        self.calls.append((channel_id, agent_id, envelope_id, exc))


async def test_in_process_on_turn_failed_listeners_get_the_exception():
    hub = await Hub.open(None, **quiet())
    listener = FailureListener()
    hub.register_listener(listener)
    try:
        hc = HubClient.local(hub)
        # say answers the consulting prompt and closes the channel, so the round-end reply fails the turn
        bob = await hc.register(Agent("bob", ScriptedModel(tool_call("say", content="answer"), "again")))
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        ch = await alice.open(type="consulting", target="bob")
        await alice.send(ch.channel_id, "question")
        await until(lambda: listener.calls)
        [(channel_id, agent_id, _envelope_id, exc)] = listener.calls
        assert (channel_id, agent_id) == (ch.channel_id, bob.agent_id)
        assert isinstance(exc, ProtocolError)
        assert str(exc) == f"{channel_label('consulting', ch.channel_id)} is closed"
        await hc.close()
    finally:
        await hub.close()


async def test_a_reported_failure_as_text_reaches_listeners_as_an_exception():
    """A remote client reports text; listeners still get an exception (ag2: ``RuntimeError(text)``)."""
    hub = await Hub.open(None, **quiet())
    listener = FailureListener()
    hub.register_listener(listener)
    try:
        await hub.report_turn_failure(channel_id="c", agent_id="a", envelope_id="e", exc="model timed out")
        [(_, _, _, exc)] = listener.calls
        assert type(exc) is RuntimeError and str(exc) == "model timed out"
        [(_, record)] = await hub.store.read_audit()
        assert (record["exc_type"], record["exc_message"]) == ("Error", "model timed out")
    finally:
        await hub.close()


async def test_hub_then_hydrate_works_without_open(tmp_path):
    path = tmp_path / "hub.db"
    first = await Hub.open(SqliteStore(path), **quiet())
    hc = HubClient.local(first)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.close()
    await first.close()

    hub = Hub(SqliteStore(path), **quiet())
    try:
        await hub.hydrate()
        assert hub.find_agent_id("ana") == ana.agent_id
        await hub.hydrate()  # idempotent
        assert hub.health()["registered_agents"] == 1
    finally:
        await hub.close()
    with pytest.raises(Exception, match=r"^the hub is closed; reopen it with Hub.open"):
        await hub.hydrate()


async def test_bind_endpoint_takes_an_attached_endpoint_id_and_refuses_an_unknown_one():
    hub = await Hub.open(None, **quiet())
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        endpoint_id = hc.link.endpoint_id
        assert endpoint_id
        hub.bind_endpoint(endpoint_id, ana.agent_id)  # ag2's form: the endpoint's id
        with pytest.raises(NotFoundError, match=r"^endpoint not attached: no-such-endpoint \(attach it"):
            hub.bind_endpoint("no-such-endpoint", ana.agent_id)
        with pytest.raises(NotFoundError, match=r"^agent not registered: nobody"):
            hub.bind_endpoint(endpoint_id, "nobody")
        # the binding made from the id delivers: ana receives what bob says to her
        bob = await hc.register_human(Passport(name="bob", kind="human"))
        ch = await bob.open(type="conversation", target="ana")
        await bob.send(ch.channel_id, "hi ana")
        got = await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
        assert got.event_data["text"] == "hi ana"
        await hc.close()
    finally:
        await hub.close()

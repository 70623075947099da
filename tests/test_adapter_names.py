"""ag2's adapter names from the top level: the ``*_TYPE`` constants, the states, ``AdapterResult``, the
``default_*`` helpers and ``ensure_parts``; the ``state`` keyword of ``validate_send``/``on_accepted``; and a
channel type written the way ag2 users write one (a plain class over the default helpers) running on a hub."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import pytest

import ag2net
from ag2net import (
    CONSULTING_TYPE,
    CONVERSATION_TYPE,
    DISCUSSION_TYPE,
    EV_CHANNEL_CLOSED,
    EV_PACKET,
    EV_TEXT,
    ORDERING_ROUND_ROBIN,
    WORKFLOW_TYPE,
    AdapterResult,
    Agent,
    ChannelAdapter,
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    ConsultingAdapter,
    ConsultingState,
    ConversationAdapter,
    ConversationState,
    DataInput,
    DiscussionAdapter,
    DiscussionState,
    Envelope,
    FullTranscript,
    Handoff,
    Hub,
    HubClient,
    Participant,
    ParticipantRole,
    ParticipantSchema,
    Passport,
    ProtocolError,
    ScriptedModel,
    TextInput,
    TransitionGraph,
    WorkflowAdapter,
    WorkflowState,
    default_build_packet_envelope,
    default_build_round_envelope,
    default_build_text_envelope,
    default_expected_next,
    default_extract_turn_input,
    default_render_envelope,
    default_tools_for,
    ensure_parts,
)


def md_for(adapter: Any, ids=("alice", "bob"), knobs=None) -> ChannelMetadata:
    roles = (
        [ParticipantRole.INITIATOR, ParticipantRole.RESPONDENT]
        if len(ids) == 2
        else [ParticipantRole.INITIATOR] + [ParticipantRole.PARTICIPANT] * (len(ids) - 1)
    )
    return ChannelMetadata(
        channel_id="c1",
        manifest=adapter.manifest.copy(),
        creator_id=ids[0],
        participants=[Participant(a, r, i, "t") for i, (a, r) in enumerate(zip(ids, roles, strict=True))],
        state=ChannelState.ACTIVE,
        created_at="t",
        knobs=knobs or {},
    )


def text(sender: str, body: str = "hi", eid: str = "e1") -> Envelope:
    return Envelope("c1", sender, None, EV_TEXT, {"text": body}, envelope_id=eid)


def test_channel_type_constants_are_the_manifest_types() -> None:
    assert (CONSULTING_TYPE, CONVERSATION_TYPE, DISCUSSION_TYPE, WORKFLOW_TYPE) == (
        "consulting",
        "conversation",
        "discussion",
        "workflow",
    )
    assert ConsultingAdapter().manifest.type == CONSULTING_TYPE
    assert ConversationAdapter().manifest.type == CONVERSATION_TYPE
    assert DiscussionAdapter().manifest.type == DISCUSSION_TYPE
    assert WorkflowAdapter().manifest.type == WORKFLOW_TYPE
    assert ORDERING_ROUND_ROBIN == "round_robin"
    # the ordering knob accepts the constant, and only supported orderings
    DiscussionAdapter().validate_create(
        md_for(DiscussionAdapter(), ("a", "b", "c"), {"ordering": ORDERING_ROUND_ROBIN})
    )
    with pytest.raises(ProtocolError, match="not supported"):
        DiscussionAdapter().validate_create(
            md_for(DiscussionAdapter(), ("a", "b", "c"), {"ordering": "random"})
        )


def test_states_take_ag2s_positional_fields() -> None:
    assert ConsultingState(True, False, "e1") == ConsultingState(
        initiator_sent=True, respondent_replied=False, last_envelope_id="e1"
    )
    assert ConversationState(3, "bob", "e9").turn_count == 3
    d = DiscussionState(["a", "b"], "a", None, None, 0)
    assert d.participant_order == ["a", "b"] and DiscussionState().participant_order == []
    w = WorkflowState(["a", "b"], "b", "a", "e1", 1, "", "a", {"g": 1}, {"k": "v"})
    assert (w.creator_id, w.graph_data, w.context_vars) == ("a", {"g": 1}, {"k": "v"})
    assert AdapterResult() == AdapterResult(None, "")
    assert AdapterResult(ChannelState.CLOSED, "done").auto_close_reason == "done"


@pytest.mark.parametrize(
    ("adapter", "ids", "knobs"),
    [
        (ConsultingAdapter(), ("alice", "bob"), None),
        (ConversationAdapter(), ("alice", "bob"), {"max_turns": 1}),
        (DiscussionAdapter(), ("alice", "bob", "carol"), None),
        (
            WorkflowAdapter(),
            ("alice", "bob"),
            {"graph": TransitionGraph.sequence(["alice", "bob"]).to_dict()},
        ),
    ],
    ids=["consulting", "conversation", "discussion", "workflow"],
)
def test_validate_send_and_on_accepted_take_state_by_keyword(adapter, ids, knobs) -> None:
    md = md_for(adapter, ids, knobs)
    state = adapter.initial_state(md)
    first = text("alice")
    adapter.validate_send(md, first, state=state)
    after = adapter.fold(first, state)
    assert isinstance(adapter.on_accepted(md, first, state=after), AdapterResult)
    # the keyword reaches the real check: a wrong sender is still refused
    if not isinstance(adapter, ConversationAdapter):
        with pytest.raises(ProtocolError):
            adapter.validate_send(md, text("bob"), state=state)


def test_default_text_and_packet_builders() -> None:
    t = default_build_text_envelope("c1", "alice", "hello", audience=["bob"], causation_id="e0")
    assert (t.channel_id, t.sender_id, t.audience, t.event_type, t.event_data, t.causation_id) == (
        "c1",
        "alice",
        ["bob"],
        EV_TEXT,
        {"text": "hello"},
        "e0",
    )
    assert default_build_text_envelope("c1", "alice", "x").audience is None
    p = default_build_packet_envelope(
        "c1", "alice", "body", handoff=Handoff("bob", "needs review"), context_set={"k": 1}
    )
    assert p.event_type == EV_PACKET
    assert p.event_data == {
        "body": "body",
        "routing": {"kind": "handoff", "target": "bob", "reason": "needs review"},
        "context": {"k": 1},
    }
    bare = default_build_packet_envelope("c1", "alice", "b", context_set={})
    assert bare.event_data == {"body": "b"}  # no handoff, empty context: neither key
    assert default_build_packet_envelope("c1", "a", "b", handoff=Handoff("bob")).event_data["routing"] == {
        "kind": "handoff",
        "target": "bob",
    }


def test_default_round_envelope_render_and_turn_input() -> None:
    md = md_for(ConversationAdapter())
    out = default_build_round_envelope(md, "bob", SimpleNamespace(body="answer"), [], None, None)
    assert (out.channel_id, out.sender_id, out.audience, out.event_data, out.causation_id) == (
        "c1",
        "bob",
        None,
        {"text": "answer"},
        None,
    )
    assert default_build_round_envelope(md, "bob", SimpleNamespace(body=""), [], None, None) is None
    assert default_build_round_envelope(md, "bob", SimpleNamespace(body=None), [], None, None) is None
    # rendering keeps an empty text; a turn's input does not
    empty = text("alice", "")
    assert default_render_envelope(empty) == ""
    assert default_extract_turn_input(empty) is None
    assert default_extract_turn_input(text("alice", "q?")) == "q?"
    packet = default_build_packet_envelope("c1", "a", "b")
    assert default_render_envelope(packet) is None and default_extract_turn_input(packet) is None
    assert default_expected_next(md, None) is None
    assert default_tools_for(object(), md, None, "alice") == []


def test_ensure_parts() -> None:
    assert ensure_parts(None) == []
    assert ensure_parts("hi") == [TextInput("hi")]
    assert ensure_parts("") == [TextInput("")]
    part = DataInput({"x": 1})
    assert ensure_parts(part)[0] is part
    assert ensure_parts(b"raw") == [DataInput(b"raw")]
    assert ensure_parts({"k": 1}) == [DataInput({"k": 1})]  # a mapping is one value, not a sequence
    assert ensure_parts(3) == [DataInput(3)]
    assert ensure_parts(["a", 1, TextInput("t"), ["nested"]]) == [
        TextInput("a"),
        DataInput(1),
        TextInput("t"),
        DataInput(["nested"]),
    ]
    assert ensure_parts(("a",)) == [TextInput("a")]
    assert ensure_parts([]) == []


# --- a channel type written against ag2's protocol, from the top-level helpers only ---------------------


@dataclasses.dataclass
class TallyState:
    texts: int = 0
    last: str | None = None


class TallyAdapter:
    """A two-party channel that closes itself after ``limit`` texts — no BaseAdapter, only ag2net's names."""

    manifest = ChannelManifest(type="tally", participants=ParticipantSchema(min=2, max=2))

    def __init__(self, limit: int = 2) -> None:
        self.limit = limit
        self.seen_states: list[Any] = []

    def initial_state(self, metadata):
        return TallyState()

    def fold(self, envelope, state):
        if envelope.event_type != EV_TEXT:
            return state
        return TallyState(state.texts + 1, envelope.envelope_id)

    def validate_create(self, metadata):
        if len(metadata.participants) != 2:
            raise ProtocolError("tally needs exactly 2 participants")

    def validate_send(self, metadata, envelope, state):
        if envelope.event_type == EV_TEXT and state.texts >= self.limit:
            raise ProtocolError("tally is full")

    def on_accepted(self, metadata, envelope, state):
        self.seen_states.append(state)
        if envelope.event_type == EV_TEXT and state.texts >= self.limit:
            return AdapterResult(ChannelState.CLOSED, "tally_reached")
        return AdapterResult()

    def expected_next(self, metadata, state):
        return default_expected_next(metadata, state)

    def default_view_policy(self, metadata, participant_id):
        return FullTranscript()

    def extract_turn_input(self, envelope):
        return default_extract_turn_input(envelope)

    def render_envelope(self, envelope):
        return default_render_envelope(envelope)

    def build_round_envelope(self, metadata, sender_id, reply, events, state, hub):
        return default_build_round_envelope(metadata, sender_id, reply, events, state, hub)

    def tools_for(self, client, metadata, state, participant_id):
        return default_tools_for(client, metadata, state, participant_id)

    def build_text_envelope(self, channel_id, sender_id, text, *, audience=None, causation_id=None):
        return default_build_text_envelope(
            channel_id, sender_id, text, audience=audience, causation_id=causation_id
        )

    def build_packet_envelope(
        self, channel_id, sender_id, body, *, handoff=None, context_set=None, audience=None, causation_id=None
    ):
        return default_build_packet_envelope(
            channel_id,
            sender_id,
            body,
            handoff=handoff,
            context_set=context_set,
            audience=audience,
            causation_id=causation_id,
        )


async def test_an_ag2_style_adapter_runs_a_channel_to_its_close() -> None:
    adapter = TallyAdapter(limit=2)
    assert isinstance(adapter, ChannelAdapter)  # satisfies the protocol structurally
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=3)
    try:
        hub.register_adapter(adapter)
        hc = HubClient.local(hub)
        model = ScriptedModel("two")
        await hc.register(Agent("counter", model), attach_plugin=False)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ch = await ana.open(type="tally", target="counter")
        await ana.send(ch.channel_id, "one")
        closed = await ana.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=3)
        assert closed.event_data["reason"] == "tally_reached"
        wal = await hub.read_wal(ch.channel_id)
        texts = [e for e in wal if e.event_type == EV_TEXT]
        assert [e.event_data["text"] for e in texts] == ["one", "two"]
        assert texts[1].causation_id == texts[0].envelope_id  # the handler set the causation
        # the model got the turn input the default helper extracted
        assert model.calls[0].inputs == [TextInput("one")]
        assert [s.texts for s in adapter.seen_states if isinstance(s, TallyState)][-1] == 2
        with pytest.raises(ProtocolError):
            await ana.send(ch.channel_id, "three")
        await hc.close()
    finally:
        await hub.close()


def test_the_names_are_exported_at_top_level() -> None:
    for name in (
        "AdapterState",
        "Rendered",
        "ConsultingAdapter",
        "default_build_round_envelope",
        "ensure_parts",
    ):
        assert name in ag2net.__all__


class _NothingVisible:
    """A view that shows the model no history: the turn input then comes from ``extract_turn_input``."""

    name = "nothing_visible"

    async def project(self, wal, *, participant_id, channel, **_):
        return []


class PartsTallyAdapter(TallyAdapter):
    """An ag2-style adapter whose ``extract_turn_input`` returns input parts, not a string."""

    def default_view_policy(self, metadata, participant_id):
        return _NothingVisible()

    def extract_turn_input(self, envelope):
        text = default_extract_turn_input(envelope)
        return [TextInput(f"asked: {text}"), TextInput("")] if text else []


async def test_turn_input_given_as_parts_reaches_the_model() -> None:
    adapter = PartsTallyAdapter(limit=2)
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=3)
    try:
        hub.register_adapter(adapter)
        hc = HubClient.local(hub)
        model = ScriptedModel("two")
        counter = await hc.register(Agent("counter", model))
        assert counter.plugin is not None  # the applied NetworkPlugin is kept for its builders
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ch = await ana.open(type="tally", target="counter")
        await ana.send(ch.channel_id, "one")
        await ana.next_envelope(predicate=lambda e: e.event_type == EV_CHANNEL_CLOSED, timeout=3)
        # parts pass through as parts (empty text dropped), not str() of a list
        assert model.calls[0].inputs == [TextInput("asked: one")]
        await hc.close()
    finally:
        await hub.close()

"""Adapters: turn rules, error messages, tool gating, workflow routing and graphs, the say tool, and fold purity."""

from __future__ import annotations

import copy
import json
import re
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ag2net.adapters import (
    AgentTarget,
    Always,
    BaseAdapter,
    ChannelAdapter,
    ConsultingAdapter,
    ConsultingState,
    ContextEquals,
    ConversationAdapter,
    DiscussionAdapter,
    Finish,
    FromSpeaker,
    Handoff,
    RevertToInitiatorTarget,
    RoundRobinTarget,
    StayTarget,
    Target,
    TerminateTarget,
    ToolCalled,
    Transition,
    TransitionDecision,
    TransitionGraph,
    TransitionRegistry,
    WorkflowAdapter,
    WorkflowState,
    adapter_key,
    default_adapters,
)
from ag2net.agent.tool import CHANNEL_DEP
from ag2net.channel import (
    AdapterResult,
    ChannelMetadata,
    ChannelState,
    ExpectedTurn,
    Participant,
    ParticipantRole,
)
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_INVITE_ACK,
    EV_CONTEXT_SET,
    EV_PACKET,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    Envelope,
)
from ag2net.errors import NotFoundError, ProtocolError, WorkflowGraphError
from ag2net.events import ToolCallEvent, ToolResultEvent


def exact(message: str) -> str:
    """A pattern matching exactly ``message``."""
    return "^" + re.escape(message) + "$"


def make_md(adapter: BaseAdapter, ids=("alice", "bob"), knobs=None, roles=None, cid="c1") -> ChannelMetadata:
    if roles is None:
        roles = [
            ParticipantRole.INITIATOR
            if i == 0
            else ParticipantRole.RESPONDENT
            if len(ids) == 2
            else ParticipantRole.PARTICIPANT
            for i in range(len(ids))
        ]
    return ChannelMetadata(
        channel_id=cid,
        manifest=adapter.manifest.copy(),
        creator_id=ids[0],
        participants=[Participant(a, r, i, "t") for i, (a, r) in enumerate(zip(ids, roles, strict=True))],
        state=ChannelState.ACTIVE,
        created_at="t",
        knobs=knobs or {},
    )


_counter = iter(range(10**9))


def env(sender, etype=EV_TEXT, data=None, audience=None, cid="c1") -> Envelope:
    if data is None:
        data = {"text": f"from {sender}"}
    return Envelope(cid, sender, audience, etype, data, envelope_id=f"e{next(_counter):06d}")


def accept(adapter, md, state, envelope):
    """What the hub does per admitted envelope: validate, fold, ask for the result."""
    adapter.validate_send(md, envelope, state)
    after = adapter.fold(envelope, state)
    return after, adapter.on_accepted(md, envelope, after)


class FakeClient:
    """Just enough of an agent client for the say tool: an id, a hub client, and send_envelope."""

    def __init__(self, agent_id="alice", channels=None, agents=None, fail_send=None):
        self.agent_id = agent_id
        self.sent: list[Envelope] = []
        self.fail_send = fail_send
        self.hub_client = FakeHubClient(channels or {}, agents or {})

    async def send_envelope(self, envelope: Envelope) -> str:
        if self.fail_send:
            raise self.fail_send
        self.sent.append(envelope)
        return f"id{len(self.sent)}"


class FakeHubClient:
    def __init__(self, channels, agents):
        self.channels = channels
        self.agents = agents
        self.adapters = {a.manifest.type: a for a in default_adapters()}

    async def get_channel(self, channel_id):
        if channel_id not in self.channels:
            raise NotFoundError(f"channel not found: {channel_id}")
        return self.channels[channel_id]

    async def get_agent(self, name_or_id):
        for agent_id, name in self.agents.items():
            if name_or_id in (agent_id, name):
                return SimpleNamespace(name=name, agent_id=agent_id)
        raise NotFoundError(f"agent not registered: {name_or_id}")

    def adapter_for_metadata(self, metadata):
        return self.adapters[metadata.manifest.type]


# --- protocol and registry ----------------------------------------------------------------------------
def test_default_adapters_and_keys():
    adapters = default_adapters()
    assert [adapter_key(a.manifest.type, a.manifest.version) for a in adapters] == [
        ("consulting", 1),
        ("conversation", 1),
        ("discussion", 1),
        ("workflow", 1),
    ]
    assert all(isinstance(a, ChannelAdapter) for a in adapters)
    assert default_adapters()[0] is not adapters[0]
    assert [a.manifest.default_view_policy for a in adapters] == [
        "full_transcript",
        "windowed_summary",
        "named_windowed_summary",
        "named_windowed_summary",
    ]
    assert [(e.name, e.on_violation, e.params) for e in adapters[0].manifest.expectations] == [
        ("acks_within", "auto_close", {"seconds": 30}),
        ("reply_within", "auto_close", {"seconds": 600}),
    ]


def test_conversation_fold_keeps_a_subclass_state():
    """The fold builds the built-in state directly; a subclass's state (an adapter extending the
    conversation's) keeps its type and its own fields through it."""
    from dataclasses import dataclass

    from ag2net.adapters.conversation import ConversationState

    @dataclass(slots=True)
    class Tagged(ConversationState):
        tag: str = "kept"

    a = ConversationAdapter()
    plain = a.fold(env("alice"), a.initial_state(make_md(a)))
    assert type(plain) is ConversationState and plain.turn_count == 1 and plain.last_speaker_id == "alice"
    tagged = a.fold(env("bob"), Tagged(turn_count=4, tag="mine"))
    assert type(tagged) is Tagged
    assert (tagged.turn_count, tagged.last_speaker_id, tagged.tag) == (5, "bob", "mine")
    assert a.fold(env("bob", EV_PACKET, {"body": "x"}), tagged) is tagged  # not a text: no turn


def test_base_adapter_defaults():
    a = ConversationAdapter()
    md = make_md(a)
    assert a.render_envelope(env("alice", data={"text": ""})) == ""
    assert a.render_envelope(env("alice", data={"text": 3})) is None
    assert a.render_envelope(env("alice", EV_PACKET, {"body": "x"})) is None
    assert a.extract_turn_input(env("alice", data={"text": ""})) is None
    assert a.extract_turn_input(env("alice", data={"text": "go"})) == "go"
    assert a.expected_next(md, a.initial_state(md)) is None
    out = a.build_round_envelope(md, "bob", SimpleNamespace(body="reply"), [], None, None)
    assert (out.channel_id, out.sender_id, out.audience, out.event_type, out.event_data) == (
        "c1",
        "bob",
        None,
        EV_TEXT,
        {"text": "reply"},
    )
    assert out.causation_id is None
    assert a.build_round_envelope(md, "bob", SimpleNamespace(body=""), [], None, None) is None
    assert a.build_round_envelope(md, "bob", SimpleNamespace(body=None), [], None, None) is None
    t = a.build_text_envelope("c1", "alice", "hi", audience=["bob"], causation_id="e1")
    assert (t.event_type, t.event_data, t.audience, t.causation_id) == (
        EV_TEXT,
        {"text": "hi"},
        ["bob"],
        "e1",
    )
    p = a.build_packet_envelope(
        "c1", "alice", "go", handoff=Handoff("bob", "needs review"), context_set={"y": 2}
    )
    assert p.event_type == EV_PACKET
    assert p.event_data == {
        "body": "go",
        "routing": {"kind": "handoff", "target": "bob", "reason": "needs review"},
        "context": {"y": 2},
    }
    assert a.build_packet_envelope("c1", "alice", "b").event_data == {"body": "b"}
    state = a.initial_state(md)
    assert a.state_from_dict(json.loads(json.dumps(a.state_to_dict(state)))) == state
    with pytest.raises(ProtocolError, match=r"ConversationState has no field 'nope'"):
        a.state_from_dict({"nope": 1})


# --- consulting -----------------------------------------------------------------------------------------
def test_consulting_validate_create_messages():
    a = ConsultingAdapter()
    a.validate_create(make_md(a))
    with pytest.raises(ProtocolError, match=exact("consulting requires exactly one initiator")):
        a.validate_create(make_md(a, roles=[ParticipantRole.RESPONDENT, ParticipantRole.RESPONDENT]))
    with pytest.raises(ProtocolError, match=exact("consulting requires exactly one respondent")):
        a.validate_create(make_md(a, ids=("a", "b", "c")))
    with pytest.raises(ProtocolError, match=exact("consulting requires exactly 2 participants, got 3")):
        a.validate_create(
            make_md(
                a,
                ids=("a", "b", "c"),
                roles=[ParticipantRole.INITIATOR, ParticipantRole.RESPONDENT, ParticipantRole.PARTICIPANT],
            )
        )
    with pytest.raises(ProtocolError, match=r"knob 'view_policy' is invalid"):
        a.validate_create(make_md(a, knobs={"view_policy": "bogus"}))


def test_consulting_one_question_one_reply():
    a = ConsultingAdapter()
    md = make_md(a)
    s = a.initial_state(md)
    assert a.expected_next(md, s) == ExpectedTurn("alice", None)
    with pytest.raises(
        ProtocolError,
        match=exact("consulting channel 'c1' expects first send from initiator 'alice', got 'bob'"),
    ):
        a.validate_send(md, env("bob"), s)
    a.validate_send(md, env("bob", "myapp.custom", {}), s)  # other types are informational
    q = env("alice")
    s, result = accept(a, md, s, q)
    assert s == ConsultingState(True, False, q.envelope_id) and result == AdapterResult()
    assert a.expected_next(md, s) == ExpectedTurn("bob", q.envelope_id)
    with pytest.raises(
        ProtocolError, match=exact("consulting channel 'c1' expects reply from respondent 'bob', got 'alice'")
    ):
        a.validate_send(md, env("alice"), s)
    s, result = accept(a, md, s, env("bob"))
    assert result == AdapterResult(ChannelState.CLOSED, "consulting_complete")
    assert a.expected_next(md, s) is None
    with pytest.raises(ProtocolError, match=exact("consulting channel 'c1' already complete")):
        a.validate_send(md, env("alice"), s)
    # lifecycle events never move the state
    assert a.fold(env("alice", EV_CHANNEL_CLOSED, {"reason": "x", "channel_id": "c1"}), s) is s


def test_consulting_offers_say_to_whoever_holds_the_turn():
    a = ConsultingAdapter()
    md = make_md(a)
    alice, bob = FakeClient("alice"), FakeClient("bob")
    s = a.initial_state(md)
    assert [t.name for t in a.tools_for(alice, md, s, "alice")] == ["say"]
    assert a.tools_for(bob, md, s, "bob") == []
    s = a.fold(env("alice"), s)
    assert a.tools_for(alice, md, s, "alice") == []
    assert [t.name for t in a.tools_for(bob, md, s, "bob")] == ["say"]
    assert a.tools_for(FakeClient("eve"), md, s, "eve") == []
    s = a.fold(env("bob"), s)
    assert a.tools_for(bob, md, s, "bob") == []
    # one say tool per agent id, reused across turns
    s0 = a.initial_state(md)
    assert a.tools_for(alice, md, s0, "alice")[0] is a.tools_for(FakeClient("alice"), md, s0, "alice")[0]


# --- conversation -----------------------------------------------------------------------------------------
def test_conversation_rules_and_max_turns():
    a = ConversationAdapter()
    a.validate_create(make_md(a))
    with pytest.raises(ProtocolError, match=exact("conversation requires exactly one respondent")):
        a.validate_create(make_md(a, ids=("a", "b", "c")))
    for bad in (0, -2, "3", True, 2.5):
        with pytest.raises(ProtocolError, match=r"conversation knobs.max_turns must be a positive integer"):
            a.validate_create(make_md(a, knobs={"max_turns": bad}))
    md = make_md(a, knobs={"max_turns": 3})
    a.validate_create(md)
    s = a.initial_state(md)
    with pytest.raises(
        ProtocolError,
        match=exact("conversation channel 'c1' only accepts sends from participants, got 'eve'"),
    ):
        a.validate_send(md, env("eve"), s)
    results = []
    for sender in ("alice", "alice", "bob"):
        s, r = accept(a, md, s, env(sender))
        results.append(r)
    assert results == [AdapterResult(), AdapterResult(), AdapterResult(ChannelState.CLOSED, "max_turns")]
    assert s.turn_count == 3 and s.last_speaker_id == "bob"
    # without the knob it never closes
    md = make_md(a)
    s = a.initial_state(md)
    for _ in range(50):
        s, r = accept(a, md, s, env("alice"))
        assert r == AdapterResult()


def test_conversation_offers_say_always():
    a = ConversationAdapter()
    md = make_md(a)
    s = a.initial_state(md)
    for pid in ("alice", "bob"):
        assert [t.name for t in a.tools_for(FakeClient(pid), md, s, pid)] == ["say"]


# --- discussion ---------------------------------------------------------------------------------------------
def test_discussion_round_robin():
    a = DiscussionAdapter()
    md = make_md(a, ids=("alice", "bob", "carol"))
    a.validate_create(md)
    s = a.initial_state(md)
    assert s.participant_order == ["alice", "bob", "carol"] and s.expected_next_speaker == "alice"
    with pytest.raises(
        ProtocolError, match=exact("discussion channel 'c1' expects 'alice' to speak, got 'bob'")
    ):
        a.validate_send(md, env("bob"), s)
    expected = []
    for sender in ("alice", "bob", "carol", "alice"):
        s, r = accept(a, md, s, env(sender))
        assert r == AdapterResult()
        expected.append(s.expected_next_speaker)
    assert expected == ["bob", "carol", "alice", "bob"]
    assert s.turn_count == 4
    assert a.expected_next(md, s) == ExpectedTurn("bob", s.last_envelope_id)


def test_discussion_create_errors():
    a = DiscussionAdapter()
    with pytest.raises(ProtocolError, match=exact("discussion requires at least 2 participants, got 1")):
        a.validate_create(make_md(a, ids=("alice",)))
    with pytest.raises(
        ProtocolError,
        match=r"^discussion knobs.ordering='random' not supported; choose from \['round_robin'\]$",
    ):
        a.validate_create(make_md(a, ids=("a", "b", "c"), knobs={"ordering": "random"}))
    a.validate_create(make_md(a, ids=("a", "b", "c"), knobs={"ordering": "round_robin"}))


def test_discussion_offers_say_to_the_expected_speaker_only():
    a = DiscussionAdapter()
    md = make_md(a, ids=("alice", "bob", "carol"))
    s = a.initial_state(md)
    offered = {
        pid: [t.name for t in a.tools_for(FakeClient(pid), md, s, pid)] for pid in md.participant_ids()
    }
    assert offered == {"alice": ["say"], "bob": [], "carol": []}
    s = a.fold(env("alice"), s)
    offered = {
        pid: [t.name for t in a.tools_for(FakeClient(pid), md, s, pid)] for pid in md.participant_ids()
    }
    assert offered == {"alice": [], "bob": ["say"], "carol": []}


# --- workflow -----------------------------------------------------------------------------------------------
IDS = ("alice", "bob", "carol")


def wf(graph: TransitionGraph, ids=IDS, **knobs):
    a = WorkflowAdapter()
    md = make_md(a, ids=ids, knobs={"graph": graph.to_dict(), **knobs})
    a.validate_create(md)
    return a, md, a.initial_state(md)


def test_workflow_create_errors():
    a = WorkflowAdapter()
    with pytest.raises(ProtocolError, match=exact("workflow requires at least 2 participants, got 1")):
        a.validate_create(make_md(a, ids=("alice",)))
    msg = exact("workflow requires knobs['graph'] as a dict — call TransitionGraph.to_dict() before passing")
    with pytest.raises(ProtocolError, match=msg):
        a.validate_create(make_md(a, ids=IDS))
    with pytest.raises(ProtocolError, match=msg):
        a.validate_create(make_md(a, ids=IDS, knobs={"graph": TransitionGraph("alice")}))
    with pytest.raises(
        ProtocolError, match=r"^invalid workflow graph: no transition target registered for 'warp'"
    ):
        a.validate_create(
            make_md(
                a, ids=IDS, knobs={"graph": {"initial_speaker": "alice", "default_target": {"name": "warp"}}}
            )
        )
    with pytest.raises(
        ProtocolError,
        match=r"^workflow initial_speaker 'dave' not in participants \['alice', 'bob', 'carol'\]$",
    ):
        a.validate_create(make_md(a, ids=IDS, knobs={"graph": TransitionGraph("dave").to_dict()}))
    with pytest.raises(
        ProtocolError, match=exact("workflow knobs['context_vars'] must be a dict if provided")
    ):
        a.validate_create(
            make_md(a, ids=IDS, knobs={"graph": TransitionGraph("alice").to_dict(), "context_vars": [1]})
        )
    with pytest.raises(
        ProtocolError, match=exact("workflow knobs['context_vars'] must be a dict if provided")
    ):
        a.initial_state(
            make_md(a, ids=IDS, knobs={"graph": TransitionGraph("alice").to_dict(), "context_vars": 3})
        )
    with pytest.raises(
        ProtocolError, match=r"graph target 'agent' names 'bobby', which is not a participant id"
    ):
        a.validate_create(
            make_md(
                a,
                ids=IDS,
                knobs={
                    "graph": TransitionGraph("alice", [Transition(Always(), AgentTarget("bobby"))]).to_dict()
                },
            )
        )


def test_workflow_sequence_routes_and_closes():
    a, md, s = wf(TransitionGraph.sequence(list(IDS)))
    assert s.expected_next_speaker == "alice" and s.creator_id == "alice"
    with pytest.raises(ProtocolError, match=exact("workflow 'c1' expects 'alice' to speak, got 'carol'")):
        a.validate_send(md, env("carol"), s)
    s, r = accept(a, md, s, env("alice"))
    assert (s.expected_next_speaker, r) == ("bob", AdapterResult())
    s, r = accept(a, md, s, env("bob", EV_PACKET, {"routing": {"kind": "text"}, "body": "b"}))
    assert (s.expected_next_speaker, r) == ("carol", AdapterResult())
    s, r = accept(a, md, s, env("carol"))
    assert s.expected_next_speaker is None and s.pending_close_reason == "sequence_complete"
    assert r == AdapterResult(ChannelState.CLOSED, "sequence_complete")
    assert a.expected_next(md, s) is None


def test_workflow_round_robin_max_turns():
    a, md, s = wf(TransitionGraph.round_robin(list(IDS), max_turns=4))
    speakers = []
    for _ in range(4):
        speaker = s.expected_next_speaker
        speakers.append(speaker)
        s, r = accept(a, md, s, env(speaker))
    assert speakers == ["alice", "bob", "carol", "alice"]
    assert r == AdapterResult(ChannelState.CLOSED, "max_turns")


def test_workflow_handoff_round_envelope_and_finish():
    """Reference §11.20: a handoff tool returning Handoff(target="carol") routes to carol; Finish closes."""
    a, md, s = wf(TransitionGraph("alice", [], TerminateTarget(), None))
    hub = SimpleNamespace(find_agent_id={"carol": "carol-id"}.get)
    md.participants[2].agent_id = "carol-id"
    s.participant_order = md.participant_ids()
    call = ToolCallEvent("handoff_to", json.dumps({"reason": "needs numbers"}), id="call1")
    events = [
        call,
        ToolResultEvent("call1", "handoff_to", "handed off", value=Handoff("carol", "needs numbers")),
    ]
    out = a.build_round_envelope(md, "alice", SimpleNamespace(body="over to carol"), events, s, hub)
    assert out.event_type == EV_PACKET and out.audience is None
    assert out.event_data == {
        "routing": {"kind": "handoff", "tool": "handoff_to", "reason": "needs numbers", "target": "carol-id"},
        "context_updates": {"set": {}, "delete": []},
        "body": "over to carol",
    }
    out.envelope_id = "p1"
    s, r = accept(a, md, s, out)
    assert s.expected_next_speaker == "carol-id" and r == AdapterResult()
    assert a.render_envelope(out) == "[Handed off via handoff_to] needs numbers\nover to carol"
    finish_events = [
        ToolCallEvent("done", "{}", id="c2"),
        ToolResultEvent("c2", "done", "ok", value=Finish(summary="all good", reason="all_done")),
    ]
    out = a.build_round_envelope(md, "carol-id", SimpleNamespace(body=None), finish_events, s, hub)
    assert out.event_data["routing"] == {
        "kind": "finish",
        "tool": "done",
        "reason": "all_done",
        "summary": "all good",
    }
    assert out.event_data["body"] == ""
    s, r = accept(a, md, s, out)
    assert r == AdapterResult(ChannelState.CLOSED, "all_done")
    assert a.render_envelope(out) is None  # nothing to show: no handoff line and an empty body


def test_workflow_tool_called_rules_and_text_rounds():
    graph = TransitionGraph(
        "alice",
        [
            Transition(ToolCalled("escalate"), AgentTarget("carol")),
            Transition(Always(), StayTarget(), priority=5),
        ],
    )
    a, md, s = wf(graph)
    events = [ToolCallEvent("lookup", "{}", id="x"), ToolResultEvent("x", "lookup", "42", value=42)]
    assert a.build_round_envelope(md, "alice", SimpleNamespace(body=""), events, s, None) is None
    plain = a.build_round_envelope(md, "alice", SimpleNamespace(body="hi"), events, s, None)
    assert plain.event_data["routing"] == {"kind": "text"}
    events.append(ToolCallEvent("escalate", json.dumps({"reason": "urgent"}), id="y"))
    out = a.build_round_envelope(md, "alice", SimpleNamespace(body=""), events, s, None)
    assert out.event_data["routing"] == {"kind": "handoff", "tool": "escalate", "reason": "urgent"}
    out.envelope_id = "p"
    s2, _ = accept(a, md, s, out)
    assert s2.expected_next_speaker == "carol"
    s3, _ = accept(a, md, s, plain)
    assert s3.expected_next_speaker == "alice"  # Always -> Stay


def test_workflow_context_vars():
    """EV_CONTEXT_SET, round context_updates and (fixing ref §12.19) build_packet_envelope's context all apply."""
    graph = TransitionGraph(
        "alice",
        [
            Transition(ContextEquals("phase", "review"), AgentTarget("carol")),
            Transition(Always(), RoundRobinTarget(), 1),
        ],
    )
    a, md, s = wf(graph, context_vars={"x": 1, "old": True})
    assert s.context_vars == {"x": 1, "old": True}
    with pytest.raises(
        ProtocolError, match=exact("workflow 'c1' only accepts EV_CONTEXT_SET from participants, got 'eve'")
    ):
        a.validate_send(md, env("eve", EV_CONTEXT_SET, {"set": {}, "delete": []}), s)
    with pytest.raises(ProtocolError, match=r"EV_CONTEXT_SET event_data\['delete'\] must be a list of keys"):
        a.validate_send(md, env("bob", EV_CONTEXT_SET, {"set": {}, "delete": "old"}), s)
    before = copy.deepcopy(s)
    s, r = accept(a, md, s, env("bob", EV_CONTEXT_SET, {"set": {"y": 1}, "delete": ["old"]}))
    assert s.context_vars == {"x": 1, "y": 1} and s.turn_count == 0 and r == AdapterResult()
    assert before.context_vars == {"x": 1, "old": True}
    packet = a.build_packet_envelope("c1", "alice", "start", context_set={"phase": "review", "y": 2})
    assert packet.event_data == {"body": "start", "context": {"phase": "review", "y": 2}}
    s, _ = accept(a, md, s, packet)
    assert s.context_vars == {"x": 1, "y": 2, "phase": "review"}
    assert s.expected_next_speaker == "carol"  # the condition saw the context the packet set
    round_env = env(
        "carol",
        EV_PACKET,
        {
            "routing": {"kind": "text"},
            "context_updates": {"set": {"phase": "done"}, "delete": ["x"]},
            "body": "ok",
        },
    )
    s, _ = accept(a, md, s, round_env)
    assert s.context_vars == {"y": 2, "phase": "done"}
    assert s.expected_next_speaker == "alice"  # round robin after carol


def test_workflow_rejects_handoffs_to_non_participants_and_malformed_packets():
    a, md, s = wf(TransitionGraph("alice"))
    human_seed = a.build_packet_envelope("c1", "alice", "go", handoff=Handoff("bob-the-name"))
    with pytest.raises(
        ProtocolError, match=r"packet hands off to 'bob-the-name', which is not a participant id"
    ):
        a.validate_send(md, human_seed, s)
    a.validate_send(md, a.build_packet_envelope("c1", "alice", "go", handoff=Handoff("bob")), s)
    with pytest.raises(ProtocolError, match=r"packet routing must be an object"):
        a.validate_send(md, env("alice", EV_PACKET, {"routing": "bob", "body": ""}), s)
    with pytest.raises(ProtocolError, match=r"packet context must be an object"):
        a.validate_send(md, env("alice", EV_PACKET, {"context": [1], "body": ""}), s)


def test_workflow_offers_no_tools_and_renders_text():
    a, md, s = wf(TransitionGraph("alice"))
    assert a.tools_for(FakeClient("alice"), md, s, "alice") == []
    assert a.render_envelope(env("bob", data={"text": "hey"})) == "hey"
    p = env("bob", EV_PACKET, {"routing": {"kind": "handoff"}, "body": ""})
    assert a.render_envelope(p) == "[Handed off via handoff]"
    assert a.extract_turn_input(p) == "[Handed off via handoff]"
    assert a.extract_turn_input(env("bob", data={"text": ""})) is None


def test_workflow_terminates_on_default_target():
    a, md, s = wf(TransitionGraph("alice", default_target=TerminateTarget()))
    s, r = accept(a, md, s, env("alice"))
    assert r == AdapterResult(ChannelState.CLOSED, "after_work")
    a, md, s = wf(TransitionGraph("alice", [Transition(FromSpeaker("alice"), RevertToInitiatorTarget())]))
    s, r = accept(a, md, s, env("alice"))
    assert s.expected_next_speaker == "alice" and r == AdapterResult()


# --- transition graphs -----------------------------------------------------------------------------------------
def test_transition_graph_round_trips():
    graph = TransitionGraph(
        "a",
        [
            Transition(FromSpeaker("a"), AgentTarget("b"), priority=2),
            Transition(ToolCalled("approve"), TerminateTarget("approved")),
            Transition(ContextEquals("k", [1, {"x": None}]), StayTarget(), priority=-1),
            Transition(Always(), RoundRobinTarget()),
            Transition(Always(), RevertToInitiatorTarget()),
        ],
        TerminateTarget("done"),
        7,
    )
    d = graph.to_dict()
    assert d["transitions"][0] == {
        "when": {"name": "from_speaker", "args": {"agent_id": "a"}},
        "then": {"name": "agent", "args": {"agent_id": "b"}},
        "priority": 2,
    }
    assert d["default_target"] == {"name": "terminate", "args": {"reason": "done"}}
    assert d["max_turns"] == 7 and d["initial_speaker"] == "a"
    assert TransitionGraph.loads(d) == graph
    assert TransitionGraph.loads(graph.dumps()) == graph
    assert graph.dumps() == json.dumps(d, sort_keys=True)
    assert TransitionGraph.loads({"initial_speaker": "a"}).default_target == TerminateTarget("after_work")
    rr = TransitionGraph.round_robin(["a", "b"], max_turns=3)
    assert rr.to_dict() == {
        "initial_speaker": "a",
        "transitions": [
            {
                "when": {"name": "always", "args": {}},
                "then": {"name": "round_robin", "args": {}},
                "priority": 0,
            }
        ],
        "default_target": {"name": "terminate", "args": {"reason": "round_robin_complete"}},
        "max_turns": 3,
    }
    seq = TransitionGraph.sequence(["a", "b", "c"])
    assert seq.max_turns == 3 and seq.default_target == TerminateTarget("sequence_complete")
    assert [(t.when, t.then) for t in seq.transitions] == [
        (FromSpeaker("a"), AgentTarget("b")),
        (FromSpeaker("b"), AgentTarget("c")),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("{not json", "graph is not valid JSON"),
        ([], "graph must be an object, got list"),
        ({"initial_speaker": ""}, "graph initial_speaker must be a non-empty agent id"),
        ({"initial_speaker": "a", "transitions": {}}, "graph transitions must be a list"),
        (
            {
                "initial_speaker": "a",
                "transitions": [{"when": {"name": "sometimes"}, "then": {"name": "stay"}}],
            },
            "no transition condition registered for 'sometimes'; choose from",
        ),
        (
            {
                "initial_speaker": "a",
                "transitions": [{"when": {"name": "always"}, "then": {"name": "agent", "args": {}}}],
            },
            "target 'agent' has bad args",
        ),
        (
            {
                "initial_speaker": "a",
                "transitions": [{"when": {"name": "always"}, "then": {"name": "stay"}, "priority": "1"}],
            },
            "priority must be an integer",
        ),
        ({"initial_speaker": "a", "max_turns": 0}, "max_turns must be a positive integer or null"),
    ],
)
def test_graph_load_errors(data, message):
    with pytest.raises(WorkflowGraphError, match=message):
        TransitionGraph.loads(data)


def test_custom_targets_in_a_registry():
    class Oldest(Target):
        name = "oldest"

        def __init__(self) -> None:
            pass

        def resolve(self, state, envelope):
            return TransitionDecision(state.participant_order[-1])

        def __eq__(self, other):
            return isinstance(other, Oldest)

    reg = TransitionRegistry()  # isolated: default() is the one shared registry
    reg.register_target(Oldest)
    data = TransitionGraph("a", [Transition(Always(), Oldest())]).to_dict()
    assert TransitionGraph.loads(data, registry=reg).transitions[0].then == Oldest()
    with pytest.raises(WorkflowGraphError, match=r"no transition target registered for 'oldest'"):
        TransitionGraph.loads(data)
    state = WorkflowState(participant_order=["a", "b"], creator_id="a")
    assert TransitionGraph.loads(data, registry=reg).decide(state, env("a")) == TransitionDecision("b")
    assert RoundRobinTarget().resolve(WorkflowState(), env("a")) == TransitionDecision(
        None, "no_participants"
    )


# --- say -----------------------------------------------------------------------------------------------------
def _say_setup(**kw):
    a = ConversationAdapter()
    md = make_md(a, ids=("alice-id", "bob-id"), cid="c1")
    other = make_md(a, ids=("alice-id", "carol-id"), cid="c2")
    foreign = make_md(a, ids=("bob-id", "carol-id"), cid="c3")
    client = FakeClient(
        "alice-id",
        channels={"c1": md, "c2": other, "c3": foreign},
        agents={"alice-id": "alice", "bob-id": "bob", "carol-id": "carol"},
        **kw,
    )
    tool = a.tools_for(client, md, a.initial_state(md), "alice-id")[0]
    current = SimpleNamespace(channel_id="c1", metadata=md)
    return tool, client, current


async def test_say_posts_into_the_current_channel():
    tool, client, current = _say_setup()
    assert set(tool.parameters["properties"]) == {"content", "audience", "channel_id"}
    assert tool.parameters["required"] == ["content"]
    result = await tool.call({"content": "hello"}, {CHANNEL_DEP: current})
    assert result == "posted envelope id1"
    sent = client.sent[0]
    assert (sent.channel_id, sent.sender_id, sent.audience, sent.event_type, sent.event_data) == (
        "c1",
        "alice-id",
        None,
        EV_TEXT,
        {"text": "hello"},
    )
    assert await tool.call({"content": "psst", "audience": ["bob", "bob-id"]}, {CHANNEL_DEP: current}) == (
        "posted envelope id2"
    )
    assert client.sent[1].audience == ["bob-id", "bob-id"]
    # a channel without a metadata snapshot is fetched
    assert (
        await tool.call({"content": "x"}, {CHANNEL_DEP: SimpleNamespace(channel_id="c1")})
        == "posted envelope id3"
    )


async def test_say_with_channel_id_posts_there_even_inside_a_turn():
    tool, client, current = _say_setup()
    result = await tool.call({"content": "over here", "channel_id": "c2"}, {CHANNEL_DEP: current})
    assert result == "posted envelope id1" and client.sent[0].channel_id == "c2"
    assert await tool.call({"content": "x", "channel_id": "c2"}, {}) == "posted envelope id2"
    assert await tool.call({"content": "x", "channel_id": "c3"}, {CHANNEL_DEP: current}) == (
        "Error: not a participant of channel 'c3'"
    )
    assert await tool.call({"content": "x", "channel_id": "zz"}, {}) == (
        "Error: channel 'zz' not found: channel not found: zz"
    )
    assert len(client.sent) == 2


async def test_say_errors():
    tool, client, current = _say_setup()
    assert await tool.call({"content": "x"}, {}) == "Error: no current channel and no channel_id provided"
    assert await tool.call({"content": "x", "audience": ["bob", "dave"]}, {CHANNEL_DEP: current}) == (
        "Error: peer 'dave' not found"
    )
    assert client.sent == []
    tool, client, current = _say_setup(fail_send=ProtocolError("channel 'c1' is closed"))
    assert (
        await tool.call({"content": "x"}, {CHANNEL_DEP: current})
        == "Error: send failed: channel 'c1' is closed"
    )
    # the model cannot set the injected channel itself
    tool, client, current = _say_setup()
    await tool.call({"content": "x", "channel": SimpleNamespace(channel_id="c3")}, {CHANNEL_DEP: current})
    assert client.sent[0].channel_id == "c1"


# --- fold purity -------------------------------------------------------------------------------------------------
PIDS = ["alice", "bob", "carol"]


@st.composite
def wal_strategy(draw):
    n = draw(st.integers(0, 30))
    out = []
    for i in range(n):
        sender = draw(st.sampled_from([*PIDS, "eve"]))
        kind = draw(
            st.sampled_from(
                [
                    EV_TEXT,
                    EV_TEXT,
                    EV_PACKET,
                    EV_CONTEXT_SET,
                    EV_CHANNEL_INVITE_ACK,
                    EV_TASK_CANCEL_REQUEST,
                    "my.thing",
                ]
            )
        )
        if kind == EV_TEXT:
            data = {"text": f"t{i}"}
        elif kind == EV_PACKET:
            routing = draw(
                st.sampled_from(
                    [
                        {"kind": "text"},
                        {"kind": "finish", "reason": "r"},
                        {"kind": "handoff", "target": draw(st.sampled_from(PIDS))},
                        {"kind": "handoff", "tool": "escalate"},
                    ]
                )
            )
            data = {
                "routing": routing,
                "context_updates": {"set": {f"k{i % 3}": i}, "delete": [f"k{(i + 1) % 3}"]},
                "body": f"b{i}",
            }
            if draw(st.booleans()):
                data["context"] = {"c": i}
        elif kind == EV_CONTEXT_SET:
            data = {
                "set": {f"k{i % 4}": [i]},
                "delete": draw(st.lists(st.sampled_from(["k0", "k1", "k2"]), max_size=2)),
            }
        else:
            data = {"channel_id": "c1"}
        out.append(Envelope("c1", sender, None, kind, data, envelope_id=f"e{i:04d}"))
    return out


def _adapters_with_metadata():
    graph = TransitionGraph(
        "alice",
        [
            Transition(ToolCalled("escalate"), AgentTarget("carol")),
            Transition(ContextEquals("k0", 0), RevertToInitiatorTarget(), 1),
            Transition(Always(), RoundRobinTarget(), 2),
        ],
        max_turns=None,
    )
    out = []
    for adapter in default_adapters():
        ids = ("alice", "bob") if adapter.manifest.type in ("consulting", "conversation") else tuple(PIDS)
        knobs = (
            {"graph": graph.to_dict(), "context_vars": {"k1": 1}}
            if adapter.manifest.type == "workflow"
            else {}
        )
        out.append((adapter, make_md(adapter, ids=ids, knobs=knobs)))
    return out


@settings(max_examples=80, deadline=None)
@given(wal_strategy(), st.data())
def test_fold_is_a_pure_left_fold(wal, data):
    for adapter, md in _adapters_with_metadata():
        split = data.draw(st.integers(0, len(wal)))
        state = adapter.initial_state(md)
        whole = state
        for e in wal:
            snapshot = copy.deepcopy(whole)
            nxt = adapter.fold(e, whole)
            assert whole == snapshot, f"{adapter!r} mutated its input state on {e.event_type}"
            whole = nxt
        first = adapter.initial_state(md)
        for e in wal[:split]:
            first = adapter.fold(e, first)
        # the half-way state survives the workbench/wire codec and the fold continues from it
        resumed = adapter.state_from_dict(json.loads(json.dumps(adapter.state_to_dict(first))))
        assert resumed == first
        for e in wal[split:]:
            resumed = adapter.fold(e, resumed)
        assert resumed == whole
        assert adapter.state_to_dict(resumed) == adapter.state_to_dict(whole)

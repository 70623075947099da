"""LLM turns end to end: which tools each turn offers (``say`` gating per adapter, plugin order, the identity
prefix), the seed's tool-call examples, and that every model call received exactly what the channel's view
projects, with turn records that round-trip through SQLite."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from support import until

from ag2net import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    EV_PACKET,
    EV_TEXT,
    Agent,
    Channel,
    CompactionSummary,
    FullTranscript,
    Hub,
    HubClient,
    NamedWindowedSummary,
    Passport,
    ScriptedModel,
    SqliteStore,
    TextInput,
    ToolResultEvent,
    WindowedSummary,
    tool,
    tool_call,
)
from ag2net.adapters import AgentTarget, FromSpeaker, Handoff, Transition, TransitionGraph
from ag2net.naming import channel_label

PLUGIN = ["delegate", "peers", "channels", "tasks", "context"]


pytestmark = pytest.mark.hub(store="memory", invite_ack_timeout=3)


async def offered(hc, client, channel_id: str, participant) -> list[str]:
    """The adapter tools ``participant`` would get in ``channel_id`` right now."""
    md = await hc.get_channel(channel_id)
    state = await hc.adapter_state(channel_id, md)
    return [t.name for t in hc.adapter_for_metadata(md).tools_for(client, md, state, participant.agent_id)]


async def humans(hc, *names: str):
    return [await hc.register_human(Passport(name=n, kind="human")) for n in names]


# --- say gating per adapter (reference §11 item 13 with SPEC §3.4) --------------------------------


async def test_say_gating_consulting(hc):
    alice, bob = await humans(hc, "alice", "bob")
    ch = await alice.open(type="consulting", target="bob")
    cid = ch.channel_id
    assert await offered(hc, alice, cid, alice) == ["say"]  # initiator, before the prompt
    assert await offered(hc, bob, cid, bob) == []
    await alice.send(cid, "question")
    assert await offered(hc, alice, cid, alice) == []
    assert await offered(hc, bob, cid, bob) == ["say"]  # respondent, after the prompt, before the reply
    await bob.send(cid, "answer")
    assert (await hc.get_channel(cid)).close_reason == "consulting_complete"
    assert await offered(hc, alice, cid, alice) == []
    assert await offered(hc, bob, cid, bob) == []


async def test_say_gating_conversation(hc):
    alice, bob = await humans(hc, "alice", "bob")
    ch = await alice.open(type="conversation", target="bob")
    for speaker in (alice, bob, alice, alice):
        assert await offered(hc, alice, ch.channel_id, alice) == ["say"]
        assert await offered(hc, bob, ch.channel_id, bob) == ["say"]
        await speaker.send(ch.channel_id, "hi")


async def test_say_gating_discussion_expected_speaker_only(hc):
    """SPEC §3.4 (the seed's table): ag2 1.2.1 offers nothing here; we offer ``say`` to the expected speaker."""
    alice, bob, carol = await humans(hc, "alice", "bob", "carol")
    ch = await alice.open(type="discussion", target=["bob", "carol"])
    for speaker, rest in (
        (alice, (bob, carol)),
        (bob, (alice, carol)),
        (carol, (alice, bob)),
        (alice, (bob, carol)),
    ):
        assert await offered(hc, speaker, ch.channel_id, speaker) == ["say"]
        for other in rest:
            assert await offered(hc, other, ch.channel_id, other) == []
        await speaker.send(ch.channel_id, f"{speaker.name} speaks")


async def test_say_gating_workflow_offers_nothing(hc):
    alice, bob = await humans(hc, "alice", "bob")
    graph = TransitionGraph.round_robin([alice.agent_id, bob.agent_id], max_turns=4).to_dict()
    ch = await alice.open(type="workflow", target="bob", knobs={"graph": graph})
    for speaker in (alice, bob):
        assert await offered(hc, alice, ch.channel_id, alice) == []
        assert await offered(hc, bob, ch.channel_id, bob) == []
        await speaker.send(ch.channel_id, "step")


async def test_say_reaches_the_model_only_where_offered(hc):
    """In real turns: a consulting respondent and the discussion's expected speaker see ``say``; a workflow
    agent does not."""
    bob = await hc.register(Agent("bob", ScriptedModel("consulted")))
    carl = await hc.register(Agent("carl", ScriptedModel("discussed")))
    wes = await hc.register(Agent("wes", ScriptedModel("worked")))
    (alice,) = await humans(hc, "alice")
    consult = await alice.open(type="consulting", target="bob")
    await alice.send(consult.channel_id, "q")
    disc = await alice.open(type="discussion", target=["carl"])
    await alice.send(disc.channel_id, "topic")
    graph = TransitionGraph.sequence([alice.agent_id, wes.agent_id]).to_dict()
    flow = await alice.open(type="workflow", target="wes", knobs={"graph": graph})
    await alice.send(flow.channel_id, "do it")
    for agent in (bob, carl, wes):
        await until(lambda a=agent: len(a.agent.model.calls) == 1)
    assert bob.agent.model.calls[0].tool_names == [*PLUGIN, "say"]
    assert carl.agent.model.calls[0].tool_names == [*PLUGIN, "say"]
    assert wes.agent.model.calls[0].tool_names == PLUGIN
    await until(lambda: hc.hub.lookup_channel(flow.channel_id).is_terminal())
    packet = [e for e in await hc.read_wal(flow.channel_id) if e.event_type == EV_PACKET]
    assert [p.event_data["body"] for p in packet] == ["worked"]


# --- say itself ------------------------------------------------------------------------------------


async def test_say_posts_into_current_or_named_channel(hub, hc):
    bob = await hc.register(Agent("bob", ScriptedModel()))
    alice, carol = await humans(hc, "alice", "carol")
    here = await alice.open(type="conversation", target="bob")
    there = await carol.open(type="conversation", target="bob")
    elsewhere = await alice.open(type="conversation", target="carol")
    say = hub.adapter_for(here.channel_id).say_tool(bob)
    deps = {CHANNEL_DEP: Channel(metadata=here.metadata, client=bob), AGENT_CLIENT_DEP: bob}
    first = await say.call({"content": "to the current channel"}, deps)
    assert first.startswith("posted envelope ")
    # SPEC §3.3: channel_id wins over the injected current channel when the agent participates there
    second = await say.call(
        {"content": "to carol", "channel_id": there.channel_id, "audience": ["carol"]}, deps
    )
    sent_here = [e for e in await hub.read_wal(here.channel_id) if e.event_type == EV_TEXT]
    sent_there = [e for e in await hub.read_wal(there.channel_id) if e.event_type == EV_TEXT]
    assert [e.event_data["text"] for e in sent_here] == ["to the current channel"]
    assert [(e.event_data["text"], e.audience) for e in sent_there] == [("to carol", [carol.agent_id])]
    assert second == f"posted envelope {sent_there[0].envelope_id}"
    assert await say.call({"content": "x", "channel_id": elsewhere.channel_id}, deps) == (
        f"Error: not a participant of channel {elsewhere.channel_id!r}"
    )
    assert await say.call({"content": "x", "audience": ["nobody"]}, deps) == "Error: peer 'nobody' not found"
    assert await say.call({"content": "x"}, {}) == "Error: no current channel and no channel_id provided"


async def test_seed_say_example_on_conversation_posts_twice(hub, hc):
    """The seed's ``say(content="Here's my answer: …")`` plus a reply body: two texts, harmless on conversation."""
    bob = await hc.register(
        Agent("bob", ScriptedModel(tool_call("say", content="Here's my answer: …"), "and more"))
    )
    (alice,) = await humans(hc, "alice")
    ch = await alice.open(type="conversation", target="bob")
    await alice.send(ch.channel_id, "answer please")
    await until(lambda: len(bob.agent.model.calls) == 2)
    await bob.idle()
    texts = [e for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
    assert [(hub.name_for(e.sender_id), e.event_data["text"]) for e in texts] == [
        ("alice", "answer please"),
        ("bob", "Here's my answer: …"),
        ("bob", "and more"),
    ]
    assert texts[1].causation_id is None  # say builds the envelope without causation
    assert texts[2].causation_id == texts[0].envelope_id


async def test_seed_say_double_send_on_consulting_fails_the_turn(hub, hc):
    """The seed's hazard: ``say`` already answered, so the round-end reply hits a closed channel."""
    bob = await hc.register(
        Agent("bob", ScriptedModel(tool_call("say", content="Here's my answer: …"), "again"))
    )
    (alice,) = await humans(hc, "alice")
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "answer please")
    await until(lambda: len(bob.agent.model.calls) == 2)
    await bob.idle()
    md = await hc.get_channel(ch.channel_id)
    assert md.close_reason == "consulting_complete"
    texts = [e.event_data["text"] for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
    assert texts == ["answer please", "Here's my answer: …"]
    failed = [rec for _, rec in await hc.list_audit() if rec["kind"] == "turn_failed"]
    assert failed[-1]["agent_id"] == bob.agent_id
    assert failed[-1]["exc_type"] == "ProtocolError"
    assert failed[-1]["exc_message"] == f"{channel_label('consulting', ch.channel_id)} is closed"
    [record] = await hc.list_turns(agent_id=bob.agent_id)
    assert record.error == f"ProtocolError: {channel_label('consulting', ch.channel_id)} is closed"


async def test_seed_delegate_example(hub, hc):
    """``delegate(target="bob", prompt="What's the right way to model X?", capability="modeling")`` in a turn."""

    def relay(call) -> str:
        result = [e for e in call.history if isinstance(e, ToolResultEvent)][-1].result
        return f"bob thinks: {result}"

    await hc.register(Agent("bob", ScriptedModel("As a state machine.")))
    alice = await hc.register(
        Agent(
            "alice",
            ScriptedModel(
                tool_call(
                    "delegate", target="bob", prompt="What's the right way to model X?", capability="modeling"
                ),
                relay,
            ),
        )
    )
    (user,) = await humans(hc, "user")
    ch = await user.open(type="consulting", target="alice")
    await user.send(ch.channel_id, "how to model X?")
    reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert reply.event_data["text"] == "bob thinks: As a state machine."
    sub = [
        md
        for md in hub.query_channels(agent_id=alice.agent_id, include_terminal=True)
        if md.channel_id != ch.channel_id
    ]
    assert [(md.knobs, md.close_reason) for md in sub] == [
        ({"capability": "modeling"}, "consulting_complete")
    ]


# --- reference §11 item 25 under SPEC §3.17 ---------------------------------------------------------


@tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: the term
    """
    return f"{term}: found"


@pytest.mark.parametrize("attach_plugin", [True, False])
async def test_tool_order_and_identity_prefix(hc, attach_plugin):
    bob = await hc.register(
        Agent("bob", ScriptedModel("ok"), system_prompt="You are helpful.", tools=[lookup]),
        attach_plugin=attach_plugin,
    )
    (alice,) = await humans(hc, "alice")
    ch = await alice.open(type="conversation", target="bob")
    await alice.send(ch.channel_id, "hi")
    await until(lambda: len(bob.agent.model.calls) == 1)
    first = bob.agent.model.calls[0]
    if attach_plugin:
        assert first.tool_names == ["lookup", *PLUGIN, "say"]
        assert first.system == f"You are bob (agent_id: {bob.agent_id}).\n\nYou are helpful."
    else:
        assert first.tool_names == ["lookup", "say"]  # say is adapter-owned, not plugin-owned
        assert first.system == "You are helpful."


async def test_identity_prefix_reaches_a_bare_agent(hc):
    """ag2 1.2.1 drops the prefix for an agent without assembly policies; SPEC §3.17 always sends it."""
    bob = await hc.register(Agent("bob", ScriptedModel("ok")))
    (alice,) = await humans(hc, "alice")
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "hi")
    await until(lambda: len(bob.agent.model.calls) == 1)
    assert bob.agent.model.calls[0].system == f"You are bob (agent_id: {bob.agent_id})."


# --- projections: what each model call received ---------------------------------------------------


async def expected_projection(hc, view, channel_id: str, trigger_id: str, participant_id: str) -> list[Any]:
    md = await hc.get_channel(channel_id)
    wal = await hc.read_wal(channel_id)
    prefix = wal[: next(i for i, e in enumerate(wal) if e.envelope_id == trigger_id)]
    return await view.project(
        prefix,
        participant_id=participant_id,
        channel=md,
        render_envelope=hc.adapter_for_metadata(md).render_envelope,
        name_for=hc.name_for,
    )


async def test_two_agent_consulting_round(hub, hc):
    ann = await hc.register(Agent("ann", ScriptedModel()))
    ben = await hc.register(Agent("ben", ScriptedModel("the reply")))
    ch = await ann.open(type="consulting", target="ben")
    prompt_id = await ch.send("the question")
    await until(lambda: hub.lookup_channel(ch.channel_id).is_terminal())
    await ben.idle()
    await ann.idle()
    wal = await hub.read_wal(ch.channel_id)
    assert [e.event_type for e in wal] == [
        EV_CHANNEL_INVITE,
        EV_CHANNEL_INVITE_ACK,
        EV_CHANNEL_OPENED,
        EV_TEXT,
        EV_TEXT,
        EV_CHANNEL_CLOSED,
    ]
    invite, ack, _, prompt, reply, closed = wal
    assert ack.causation_id == invite.envelope_id
    assert prompt.envelope_id == prompt_id
    assert (reply.sender_id, reply.causation_id) == (ben.agent_id, prompt_id)
    assert closed.event_data == {"reason": "consulting_complete", "channel_id": ch.channel_id}
    assert ann.agent.model.calls == []  # the reply closed the channel: nothing left for ann to do
    [call] = ben.agent.model.calls
    assert call.history[: call.prior] == await expected_projection(
        hc, FullTranscript(), ch.channel_id, prompt_id, ben.agent_id
    )
    assert call.inputs == [TextInput("the question")]
    [record] = await hc.list_turns(channel_id=ch.channel_id)
    assert record.view == {"name": "full_transcript"}
    assert (record.trigger_envelope_id, record.reply_envelope_id, record.reply) == (
        prompt_id,
        reply.envelope_id,
        "the reply",
    )


async def test_three_agent_discussion(hub, hc):
    ann = await hc.register(Agent("ann", ScriptedModel("ann sums up")))
    ben = await hc.register(Agent("ben", ScriptedModel("ben's point", "")))
    cal = await hc.register(Agent("cal", ScriptedModel("cal's point")))
    ch = await ann.open(type="discussion", target=["ben", "cal"])
    seed_id = await ch.send("Topic: where to have lunch.")
    await until(lambda: len(ben.agent.model.calls) == 2)
    for client in (ann, ben, cal):
        await client.idle()
    wal = await hub.read_wal(ch.channel_id)
    kinds = [e.event_type for e in wal]
    assert sorted(kinds[:4]) == sorted([EV_CHANNEL_INVITE] * 2 + [EV_CHANNEL_INVITE_ACK] * 2)
    assert kinds[4:] == [EV_CHANNEL_OPENED, EV_TEXT, EV_TEXT, EV_TEXT, EV_TEXT]
    seed, b1, c1, a1 = wal[5:]
    assert [(hub.name_for(e.sender_id), e.event_data["text"]) for e in wal[5:]] == [
        ("ann", "Topic: where to have lunch."),
        ("ben", "ben's point"),
        ("cal", "cal's point"),
        ("ann", "ann sums up"),
    ]
    # each reply answers the message just before it (nobody answers a stale one)
    assert seed.envelope_id == seed_id
    assert (b1.causation_id, c1.causation_id, a1.causation_id) == (seed_id, b1.envelope_id, c1.envelope_id)
    view = NamedWindowedSummary(recent_n=6)
    triggers = {ann.agent_id: [c1], ben.agent_id: [seed, a1], cal.agent_id: [b1]}
    for client in (ann, ben, cal):
        calls = client.agent.model.calls
        assert len(calls) == len(triggers[client.agent_id])
        for call, trigger in zip(calls, triggers[client.agent_id], strict=True):
            projected = await expected_projection(
                hc, view, ch.channel_id, trigger.envelope_id, client.agent_id
            )
            assert call.history[: call.prior] == projected
    # what ann saw, concretely: her own seed as assistant text, the others labelled by name
    first = ann.agent.model.calls[0]
    assert [type(e).__name__ for e in first.history[: first.prior]] == ["ModelMessage", "ModelRequest"]
    assert first.history[1].parts == [TextInput("[ben]: ben's point")]
    assert first.inputs == [TextInput("[cal]: cal's point")]
    records = await hc.list_turns(channel_id=ch.channel_id)
    assert {r.view["name"] for r in records} == {"named_windowed_summary"}
    assert {r.view["recent_n"] for r in records} == {6}
    assert len(records) == 4  # ben's empty second reply is a turn too (it posted nothing)
    await ch.close()


async def test_conversation_records_round_trip_sqlite(tmp_path):
    """A long two-agent conversation: every call got the WindowedSummary projection (compaction included),
    and the turn records, read back after a restart, hold exactly what each model received."""
    db = tmp_path / "x.db"

    def talk(name: str):
        return lambda call: f"{name} #{len(call.history)}"

    hub = await Hub.open(
        SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=3
    )
    hc = HubClient.local(hub)
    try:
        ann = await hc.register(
            Agent("ann", ScriptedModel(talk("ann"), loop=True), system_prompt="Be brief.")
        )
        ben = await hc.register(
            Agent("ben", ScriptedModel(talk("ben"), loop=True), system_prompt="Be brief.")
        )
        ch = await ann.open(type="conversation", target="ben", knobs={"max_turns": 14})
        await ch.send("Let us plan.")
        await until(lambda: hub.lookup_channel(ch.channel_id).is_terminal())
        await ann.idle()
        await ben.idle()
        assert hub.lookup_channel(ch.channel_id).close_reason == "max_turns"
        texts = [e for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_TEXT]
        assert len(texts) == 14
        # alternating speakers, each reply caused by the previous text
        assert all(b.causation_id == a.envelope_id for a, b in itertools.pairwise(texts))
        assert len(ann.agent.model.calls) + len(ben.agent.model.calls) == 13
        live = {r.turn_id: r for r in await hc.list_turns(channel_id=ch.channel_id, limit=100)}
        view = WindowedSummary(recent_n=10)
        for client in (ann, ben):
            for call in client.agent.model.calls:
                projected = call.history[: call.prior]
                [record] = [
                    r
                    for r in live.values()
                    if r.agent_id == client.agent_id and r.history == projected and r.inputs == call.inputs
                ]
                assert projected == await expected_projection(
                    hc, view, ch.channel_id, record.trigger_envelope_id, client.agent_id
                )
                assert record.system_prompt == call.system
                assert record.tools == call.tools
                assert record.view == {"name": "windowed_summary", "recent_n": 10}
        compacted = [r for r in live.values() if r.history and isinstance(r.history[0], CompactionSummary)]
        assert compacted, "the window of 10 must elide turns in a 14-text conversation"
        # turn k answers text k and sees texts 1..k-1: turns 12 and 13 elide 1 and 2 of them
        assert sorted(r.history[0].event_count for r in compacted) == [1, 2]
    finally:
        await hc.close()
        await hub.close()
    reopened = await Hub.open(SqliteStore(db), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        again = HubClient.local(reopened)
        stored = {r.turn_id: r for r in await again.list_turns(channel_id=ch.channel_id, limit=100)}
        assert set(stored) == set(live)
        for turn_id, record in live.items():
            assert stored[turn_id].to_dict() == record.to_dict()
            assert stored[turn_id].history == record.history
        await again.close()
    finally:
        await reopened.close()


async def test_workflow_handoff_turns(hub, hc):
    """A workflow round driven by a handoff tool: each agent's call sees the named window of packets."""

    def make_handoff(target: str):
        @tool(name=f"hand_to_{target}")
        def hand(reason: str) -> Handoff:
            """Pass the work on.

            Args:
                reason: why
            """
            return Handoff(target=target, reason=reason)

        return hand

    drafter = await hc.register(
        Agent(
            "drafter",
            ScriptedModel(tool_call("hand_to_reviewer", reason="draft ready"), "Draft v1."),
            tools=[make_handoff("reviewer")],
        )
    )
    reviewer = await hc.register(Agent("reviewer", ScriptedModel("Looks good.")))
    (user,) = await humans(hc, "user")
    graph = TransitionGraph(
        initial_speaker=user.agent_id,
        transitions=[Transition(FromSpeaker(user.agent_id), AgentTarget(drafter.agent_id))],
    )
    graph_dict = graph.to_dict()
    ch = await user.open(type="workflow", target=["drafter", "reviewer"], knobs={"graph": graph_dict})
    await user.send(ch.channel_id, "Write the intro.")
    await until(lambda: hub.lookup_channel(ch.channel_id).is_terminal())
    await drafter.idle()
    await reviewer.idle()
    packets = [e for e in await hub.read_wal(ch.channel_id) if e.event_type == EV_PACKET]
    assert [(hub.name_for(p.sender_id), p.event_data["routing"]["kind"]) for p in packets] == [
        ("drafter", "handoff"),
        ("reviewer", "text"),
    ]
    assert packets[0].event_data["routing"]["target"] == reviewer.agent_id
    assert (
        hub.lookup_channel(ch.channel_id).close_reason == "after_work"
    )  # no rule after the reviewer: terminate
    [call] = reviewer.agent.model.calls
    assert call.inputs == [TextInput("[drafter]: [Handed off via hand_to_reviewer] draft ready\nDraft v1.")]
    view = NamedWindowedSummary(recent_n=6)
    assert call.history[: call.prior] == await expected_projection(
        hc, view, ch.channel_id, packets[0].envelope_id, reviewer.agent_id
    )

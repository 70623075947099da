"""The protocol scrubber (``ag2net.debug.states_at``): the adapter state after each seq, folded by the
adapter's own fold and kept (stepping costs no refold), with the expected speaker, the consulting phase,
the workflow node and its transitions, open expectations with their deadlines and tasks. On the demo
network (folding every channel ends in the hub's own state) and on a workflow with a back-edge."""

from __future__ import annotations

import pytest
from support import quiet, run_demo

from ag2net import EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.adapters import TransitionGraph
from ag2net.adapters.transitions import AgentTarget, FromSpeaker, TerminateTarget, ToolCalled, Transition
from ag2net.debug import states_at
from ag2net.envelope import EV_PACKET
from ag2net.ids import add_seconds


async def test_the_demo_channels_fold_to_the_hubs_own_states():
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        by_step = {step: cid for cid, step in demo.steps.items()}
        for md in hub.query_channels(include_terminal=True, limit=None):
            scrubber = await states_at(hub, md.channel_id)
            assert scrubber.state(len(scrubber)) == hub.channels.states[md.channel_id], md.manifest.type
            last = scrubber.at(len(scrubber))
            assert (last.lifecycle, last.expected) == ("closed", None)
        names = hub.name_for
        # consulting: the phases, who is expected, and the reply deadline the evaluator would enforce
        consult = await states_at(hub, by_step["consult_estimate"])
        wal = await hub.read_wal(by_step["consult_estimate"])
        phases = [(s.lifecycle, s.phase) for s in map(consult.at, range(len(consult) + 1))]
        assert phases == [
            ("pending", "awaiting question"),
            ("pending", "awaiting question"),
            ("pending", "awaiting question"),
            ("active", "awaiting question"),
            ("active", "awaiting reply"),
            ("active", "complete"),
            ("closed", "complete"),
        ]
        prompt = consult.at(4)
        assert names(prompt.expected["agent_id"]) == "coder"
        assert prompt.expected["triggering_envelope_id"] == wal[3].envelope_id
        [reply_within] = [e for e in prompt.expectations if e["name"] == "reply_within"]
        assert reply_within["deadline"] == add_seconds(wal[3].created_at, 600)
        assert [names(v) for v in reply_within["violators"]] == ["coder"]
        [acks] = consult.at(1).expectations
        assert (acks["name"], acks["deadline"]) == (
            "acks_within",
            add_seconds(md_created(hub, by_step["consult_estimate"]), 30),
        )
        assert consult.at(5).closes == {"state": "closed", "reason": "consulting_complete"}
        # the coder ran the estimate as a task: it shows once it exists
        assert consult.at(4).tasks == []
        [task] = consult.at(6).tasks
        assert (task["title"], names(task["owner_id"])) == ("Estimate the offline sync work", "coder")
        # discussion: round robin from the creator
        talk = await states_at(hub, by_step["discussion"])
        speakers = [names(talk.at(s).expected["agent_id"]) for s in range(7, 13)]
        assert speakers == ["planner", "researcher", "critic", "coder", "planner", "researcher"]
        assert talk.at(10).round == 3 and talk.at(10).changed == [
            "expected_next_speaker",
            "last_envelope_id",
            "last_speaker_id",
            "turn_count",
        ]
        assert talk.changes() == [7, 8, 9, 10, 11, 12, 13]
        # conversation: no expected speaker, a max_silence deadline an hour after the last text
        pairing = await states_at(hub, by_step["pairing"])
        pwal = await hub.read_wal(by_step["pairing"])
        mid = pairing.at(5)
        assert mid.expected is None and mid.round == 2
        [silence] = mid.expectations
        assert (silence["name"], silence["deadline"]) == (
            "max_silence",
            add_seconds(pwal[4].created_at, 3600),
        )
    finally:
        await hc.close()
        await hub.close()


def md_created(hub: Hub, channel_id: str) -> str:
    return hub.lookup_channel(channel_id).created_at


def packet(channel_id: str, sender_id: str, body: str, routing: dict | None = None) -> Envelope:
    data = {"body": body, **({"routing": routing} if routing else {})}
    return Envelope(channel_id, sender_id, None, EV_PACKET, data)


async def test_a_workflow_with_a_back_edge(hub, hc):
    a, b, c = [
        (await hc.register_human(Passport(name=n, kind="human"))).agent_id
        for n in ("author", "editor", "boss")
    ]
    assert a and b and c
    graph = TransitionGraph(
        initial_speaker=a,
        transitions=[
            Transition(ToolCalled("escalate"), AgentTarget(c), priority=-1),
            Transition(FromSpeaker(a), AgentTarget(b)),
            Transition(FromSpeaker(b), AgentTarget(a)),  # the back-edge: the editor sends it back
        ],
        default_target=TerminateTarget("signed_off"),
        max_turns=5,
    )
    md = await hc.create_channel(
        creator_id=a, manifest_type="workflow", participants=[a, b, c], knobs={"graph": graph.to_dict()}
    )
    cid = md.channel_id
    opened = hub.wal_count(cid)
    for sender, body in [(a, "draft 1"), (b, "needs work"), (a, "draft 2"), (b, "better")]:
        await hc.post_envelope(packet(cid, sender, body))
    scrubber = await states_at(hub, cid)
    nodes = [scrubber.at(opened + i).workflow["node"] for i in range(5)]
    assert nodes == [a, b, a, b, a]  # author -> editor -> back to the author, twice
    back = scrubber.at(opened + 1).workflow  # the editor's node: the back-edge holds for a plain reply
    assert back["next_on_plain_reply"] == a
    rules = [(t["when"]["name"], t["holds_on_plain_reply"], t["via_tool"]) for t in back["transitions"]]
    assert rules == [
        ("tool_called", False, "escalate"),
        ("from_speaker", False, None),
        ("from_speaker", True, None),
    ]
    assert back["max_turns"] == 5 and back["default_target"] == {
        "name": "terminate",
        "args": {"reason": "signed_off"},
    }
    assert scrubber.at(opened + 4).expected == {
        "agent_id": a,
        "triggering_envelope_id": (await hub.read_wal(cid))[-1].envelope_id,
    }
    assert scrubber.state(len(scrubber)) == hub.channels.states[cid]
    # the fifth turn reaches max_turns: the scrubber shows the adapter asking to close
    await hc.post_envelope(packet(cid, a, "final"))
    assert (await hc.get_channel(cid)).close_reason == "max_turns"
    scrubber = await states_at(hub, cid)
    assert scrubber.at(opened + 5).closes == {"state": "closed", "reason": "max_turns"}
    assert scrubber.at(len(scrubber)).lifecycle == "closed"


async def test_stepping_folds_once(hub, hc):
    ana, bob = [(await hc.register_human(Passport(name=n, kind="human"))).agent_id for n in ("ana", "bob")]
    assert ana and bob
    md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
    for i in range(20):
        await hc.post_envelope(
            Envelope(md.channel_id, ana if i % 2 else bob, None, EV_TEXT, {"text": f"t{i}"})
        )
    scrubber = await states_at(hub, md.channel_id)
    assert scrubber.folded == 0
    assert scrubber.at(10).round == 10 - hub.wal_count(md.channel_id) + 20
    assert scrubber.folded == 10
    for seq in (9, 3, 0, 10):  # stepping back reads kept states: nothing folds
        scrubber.at(seq)
    assert scrubber.folded == 10
    scrubber.at(11)
    assert scrubber.folded == 11  # one step forward folds one envelope
    with pytest.raises(ValueError, match=r"seq must be between 0 and 23, got 24"):
        scrubber.at(24)

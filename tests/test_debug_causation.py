"""The causation map (``ag2net.debug.causation_tree``): causation_id links, delegate-opened consulting
channels (through turn records, or inferred from depth and time without them) and task ids, across
channels; each node knows its channel and seq. On the demo network, a delegate chain of depth 3, a long
chain walked without recursion, and a cause in another channel."""

from __future__ import annotations

import pytest
from support import quiet, run_demo, text, until

from ag2net import EV_TEXT, Agent, Hub, HubClient, NotFoundError, Passport, ScriptedModel
from ag2net.agent import tool_call
from ag2net.debug import causation_tree
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState


async def test_the_demo_research_consult_and_its_delegation():
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        research = next(cid for cid, step in demo.steps.items() if step == "consult_research")
        question, answer = [e for e in await hub.read_wal(research) if e.event_type == EV_TEXT]
        tree = await causation_tree(hub, answer.envelope_id)
        assert tree.chain == [question.envelope_id, answer.envelope_id] and tree.root == question.envelope_id
        levels = [(lvl, hub.name_for(n.sender_id), n.link, n.depth) for lvl, n in tree.walk()]
        assert levels == [
            (0, "planner", "root", 0),
            (1, "researcher", "causation", 0),  # the researcher's answer
            (1, "researcher", "delegate", 1),  # the prompt of the consulting channel it opened mid-turn
            (2, "critic", "causation", 1),  # the critic's answer there
        ]
        root = tree.nodes[tree.root]
        assert (root.channel_id, root.seq) == (research, 4)
        sub = tree.nodes[root.children[1]]
        assert sub.channel_id != research and hub.lookup_channel(sub.channel_id).manifest.type == "consulting"
        assert sub.seq == 4 and sub.parent == root.envelope_id
        # from the bottom of the delegation, the chain climbs back to the planner's question
        bottom = tree.nodes[sub.children[0]]
        up = await causation_tree(hub, bottom.envelope_id)
        assert up.chain == [question.envelope_id, sub.envelope_id, bottom.envelope_id]
        assert len(up.channels) == 2
    finally:
        await hc.close()
        await hub.close()


@pytest.mark.parametrize("records", [True, False], ids=["turn-records", "inferred"])
async def test_a_delegate_chain_of_depth_three(hub, hc, records):
    hc.record_turns = records
    names = ["alpha", "beta", "gamma"]
    agents = {}
    for name, nxt in zip(names, ["beta", "gamma", "delta"], strict=True):
        model = ScriptedModel(tool_call("delegate", target=nxt, prompt=f"{name} asks {nxt}"), f"{name} done")
        agents[name] = await hc.register(Agent(name, model))
    agents["delta"] = await hc.register(Agent("delta", ScriptedModel("delta knows")))
    human = await hc.register_human(Passport(name="hal", kind="human"))
    md = await hc.create_channel(
        creator_id=human.agent_id,
        manifest_type="conversation",
        participants=[human.agent_id, agents["alpha"].agent_id],
    )
    await hc.post_envelope(text(md.channel_id, human.agent_id, "start"))
    await until(lambda: hub.wal_count(md.channel_id) >= 5, timeout=10)
    start, done = [e for e in await hub.read_wal(md.channel_id) if e.event_type == EV_TEXT]
    assert done.event_data["text"] == "alpha done"
    consults = [
        c for c in hub.query_channels(include_terminal=True, limit=None) if c.manifest.type == "consulting"
    ]
    assert len(consults) == 3
    deepest = next(c for c in consults if hub.name_for(c.creator_id) == "gamma")
    answer = [e for e in await hub.read_wal(deepest.channel_id) if e.event_type == EV_TEXT][-1]
    assert (answer.event_data["text"], answer.depth) == ("delta knows", 3)
    tree = await causation_tree(hub, answer.envelope_id)
    chain = [tree.nodes[eid] for eid in tree.chain]
    assert [(hub.name_for(n.sender_id), n.depth) for n in chain] == [
        ("hal", 0),
        ("alpha", 1),
        ("beta", 2),
        ("gamma", 3),
        ("delta", 3),
    ]
    link = "delegate" if records else "delegate_inferred"
    assert [n.link for n in chain] == ["root", link, link, link, "causation"]
    assert len({n.channel_id for n in chain}) == 4
    # the tree from the human's message holds every answer on the way back up
    said = sorted(tree.nodes[eid].sender_id for eid in tree.nodes)
    assert sorted(hub.name_for(s) for s in said) == sorted(
        ["hal", "alpha", "alpha", "beta", "beta", "gamma", "gamma", "delta"]
    )
    assert tree.nodes[tree.root].children[0] == done.envelope_id


async def test_a_long_chain_and_a_cause_in_another_channel(hub, hc):
    ana, bob = [(await hc.register_human(Passport(name=n, kind="human"))).agent_id for n in ("ana", "bob")]
    assert ana and bob
    one = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
    two = await hc.create_channel(creator_id=bob, manifest_type="conversation", participants=[bob, ana])
    await hub.observe_task(
        TaskMetadata("t-9", ana, TaskSpec("chain"), TaskState.RUNNING, channel_id=one.channel_id)
    )
    cause = await hc.post_envelope(text(one.channel_id, ana, "0", task_id="t-9"))
    previous = cause
    for i in range(1, 1500):
        previous = await hc.post_envelope(
            text(one.channel_id, bob if i % 2 else ana, str(i), causation_id=previous)
        )
    elsewhere = await hc.post_envelope(text(two.channel_id, bob, "about that", causation_id=cause))
    tree = await causation_tree(hub, previous)
    assert len(tree.chain) == 1500 and tree.root == cause
    assert [n.seq for _, n in tree.walk()][:3] == [4, 5, 6]
    assert len(tree.nodes) == 1501 and len(tree.walk()) == 1501
    assert tree.nodes[elsewhere].channel_id == two.channel_id and tree.nodes[elsewhere].parent == cause
    assert tree.tasks == {
        "t-9": {"owner_id": ana, "channel_id": one.channel_id, "state": "running", "title": "chain"}
    }
    cut = await causation_tree(hub, previous, limit=10)
    assert cut.truncated and len(cut.nodes) == 10
    with pytest.raises(NotFoundError, match="envelope not found in any channel: nope"):
        await causation_tree(hub, "nope")

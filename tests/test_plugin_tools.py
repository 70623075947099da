"""The five plugin tools (delegate, peers, channels, tasks, context): every action, its result shape and its
``"Error: ..."`` strings, called directly with dependencies and through ScriptedModel turns; ``delegate``
from inside a default-handler turn (one HubClient and two) and the delegation-depth limit."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from support import until

from ag2net import (
    AGENT_CLIENT_DEP,
    CHANNEL_DEP,
    EV_CHANNEL_INVITE,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    TASK_DEP,
    AccessBlock,
    AccessDeniedError,
    Agent,
    Channel,
    CostProfile,
    Envelope,
    HubClient,
    LimitsBlock,
    Passport,
    Resume,
    Rule,
    ScriptedModel,
    TaskState,
    ToolResultEvent,
    render_fallback_skill,
    tool_call,
)
from ag2net.adapters import TransitionGraph
from ag2net.client.handler import ack_invite
from ag2net.client.tools import make_plugin_tools

pytestmark = pytest.mark.hub(store="memory", invite_ack_timeout=3)


def tools_of(client) -> dict[str, Any]:
    return {t.name: t for t in client.agent.tools}


async def call(
    client, tool_name: str, /, *, in_channel: Channel | None = None, in_task: Any = None, **arguments: Any
) -> Any:
    """Call one of ``client``'s plugin tools as a turn would (``in_channel``/``in_task`` are injected)."""
    deps: dict[str, Any] = {AGENT_CLIENT_DEP: client}
    if in_channel is not None:
        deps[CHANNEL_DEP] = in_channel
    if in_task is not None:
        deps[TASK_DEP] = in_task
    return await tools_of(client)[tool_name].call(arguments, deps)


async def register(hc, name: str, *turns: Any, **kwargs: Any):
    return await hc.register(Agent(name, ScriptedModel(*turns)), **kwargs)


def mute(client, inbox: list[Envelope] | None = None) -> None:
    """Keep only the invite acks of the default handler (and collect every envelope into ``inbox``)."""

    async def handler(envelope: Envelope) -> None:
        if inbox is not None:
            inbox.append(envelope)
        if envelope.event_type == EV_CHANNEL_INVITE:
            await ack_invite(client, envelope)

    client.on_envelope(handler)


def last_tool_result(call) -> str:
    return [e for e in call.history if isinstance(e, ToolResultEvent)][-1].result


# --- the list itself ------------------------------------------------------------------------------


async def test_make_plugin_tools_order_and_hidden_injections(hc):
    alice = await register(hc, "alice")
    tools = make_plugin_tools(alice)
    assert [t.name for t in tools] == ["delegate", "peers", "channels", "tasks", "context"]
    for t in tools:
        props = t.schema()["function"]["parameters"]["properties"]
        assert not {"agent_client", "channel", "task"} & set(props), t.name
    assert tools[0].schema()["function"]["parameters"]["required"] == ["target", "prompt"]
    assert tools[1].schema()["function"]["parameters"]["properties"]["limit"]["default"] == 20
    assert tools[2].schema()["function"]["parameters"]["properties"]["state"]["default"] == "active"
    assert tools[3].schema()["function"]["parameters"]["properties"]["poll_interval"]["default"] == 0.1
    ctx = tools[4].schema()["function"]["parameters"]["properties"]
    assert (ctx["scope"]["default"], ctx["recent_n"]["default"], ctx["limit"]["default"]) == (
        "channel",
        1,
        10,
    )


# --- peers ----------------------------------------------------------------------------------------


async def test_peers_find_excludes_caller_with_summary_shape(hub, hc):
    alice = await register(hc, "alice")
    await hc.register(
        Agent("bob", ScriptedModel()),
        Passport(name="bob", cost=CostProfile(input_per_mtok=3.0, output_per_mtok=6.0, latency_tier="fast")),
        Resume(claimed_capabilities=["research"], summary="Policy researcher"),
    )
    await register(hc, "carol")
    found = await call(alice, "peers", action="find")
    assert [p["name"] for p in found] == ["bob", "carol"]
    bob = found[0]
    assert set(bob) == {"name", "agent_id", "summary", "capabilities", "observed_success_rate", "cost"}
    assert bob["summary"] == "Policy researcher"
    assert bob["capabilities"] == ["research"]
    assert bob["observed_success_rate"] is None
    assert bob["cost"] == {"input_per_mtok": 3.0, "output_per_mtok": 6.0, "latency_tier": "fast"}
    assert found[1]["cost"] is None
    assert [p["name"] for p in await call(alice, "peers", action="find", capability="research")] == ["bob"]
    assert [p["name"] for p in await call(alice, "peers", action="find", query="POLICY")] == ["bob"]
    # the caller is dropped after the lookup, so a limit still yields that many peers
    assert [p["name"] for p in await call(alice, "peers", action="find", limit=1)] == ["bob"]


async def test_peers_find_sorting(hub, hc):
    alice = await register(hc, "alice")
    for name, price in (("zed", 1.0), ("amy", None), ("max", 5.0)):
        await hc.register(
            Agent(name, ScriptedModel()),
            Passport(name=name, cost=CostProfile(input_per_mtok=price) if price is not None else None),
        )
    zed = hub.find_agent_id("zed")
    max_id = hub.find_agent_id("max")
    await hub.record_observation(owner_id=zed, capability="x", outcome="failed", task_id="t1")
    await hub.record_observation(owner_id=max_id, capability="x", outcome="completed", task_id="t2")
    by = {}
    for key in ("name", "cost", "track_record"):
        by[key] = [p["name"] for p in await call(alice, "peers", action="find", sort_by=key)]
    assert by["name"] == ["amy", "max", "zed"]
    assert by["cost"] == ["zed", "max", "amy"]  # cheapest first, unknown cost last
    assert by["track_record"][0] == "max"
    rates = {p["name"]: p["observed_success_rate"] for p in await call(alice, "peers", action="find")}
    assert rates == {"zed": 0.0, "amy": None, "max": 1.0}
    assert await call(alice, "peers", action="find", sort_by="price") == (
        "Error: unknown sort_by 'price'; choose from name, cost, track_record"
    )


async def test_peers_describe_and_errors(hub, hc):
    alice = await register(hc, "alice")
    skill = "---\ntitle: Researcher\nexpertise: [policy, finance]\n---\n\n# Researcher\n"
    bob = await hc.register(
        Agent("bob", ScriptedModel()),
        Passport(name="bob", owner="team-a", provider="openai", model="gpt-x"),
        Resume(claimed_capabilities=["research"], domains=["policy"], summary="s"),
        skill_md=skill,
    )
    await hub.record_observation(
        owner_id=bob.agent_id, capability="research", outcome="completed", task_id="t"
    )
    profile = await call(alice, "peers", action="describe", name="bob")
    assert profile["passport"] == {
        "name": "bob",
        "agent_id": bob.agent_id,
        "owner": "team-a",
        "provider": "openai",
        "model": "gpt-x",
    }
    assert profile["resume"] == {
        "summary": "s",
        "claimed_capabilities": ["research"],
        "domains": ["policy"],
        "observed": {"research": {"n": 1, "completed": 1, "failed": 0, "expired": 0}},
    }
    assert profile["skill_md"] == skill
    by_id = await call(alice, "peers", action="describe", name=bob.agent_id)
    assert by_id["passport"]["name"] == "bob"
    assert await call(alice, "peers", action="describe") == "Error: describe requires `name` (or agent_id)"
    assert await call(alice, "peers", action="describe", name="nobody") == "Error: peer 'nobody' not found"
    assert (
        await call(alice, "peers", action="hire")
        == "Error: unknown action 'hire'; choose from find, describe"
    )


async def test_reference_item_19_fallback_skill(hub, hc):
    """Reference §11 item 19 under SPEC §3.5: the hub serves the generated card, marked generated."""
    alice = await register(hc, "alice")
    passport = Passport(name="bob")
    resume = Resume(claimed_capabilities=["math"], summary="Counts things.")
    bob = await hc.register(Agent("bob", ScriptedModel()), passport, resume)
    fallback = render_fallback_skill(hub.lookup_agent("bob"), hub.lookup_resume(bob.agent_id))
    assert (
        await hub.get_skill(bob.agent_id)
    ) == fallback  # ag2 1.2.1 returns None here; we generate (SPEC §3.5)
    assert await hc.get_skill_info(bob.agent_id) == {"skill_md": fallback, "generated": True}
    assert (await call(alice, "peers", action="describe", name="bob"))["skill_md"] == fallback
    await hc.set_skill(bob.agent_id, "---\ntitle: B\n---\nbody\n")
    assert (await call(alice, "peers", action="describe", name="bob"))[
        "skill_md"
    ] == "---\ntitle: B\n---\nbody\n"
    await hc.set_skill(bob.agent_id, None)
    audit = [rec for _, rec in await hc.list_audit() if rec["kind"] == "skill_set"]
    assert audit[-1]["removed"] is True and audit[-1]["agent_id"] == bob.agent_id
    assert (await call(alice, "peers", action="describe", name="bob"))["skill_md"] == render_fallback_skill(
        hub.lookup_agent("bob"), hub.lookup_resume(bob.agent_id)
    )


# --- channels -------------------------------------------------------------------------------------


async def test_channels_open_list_info_close(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob", "hi back")
    opened = await call(alice, "channels", action="open", type="conversation", target="bob", intent="chat")
    assert set(opened) == {"channel_id", "type", "participants"}
    assert opened["type"] == "conversation"
    assert opened["participants"] == [alice.agent_id, bob.agent_id]
    cid = opened["channel_id"]
    listed = await call(alice, "channels", action="list")
    assert listed == [
        {"channel_id": cid, "type": "conversation", "state": "active", "participants": opened["participants"]}
    ]
    info = await call(alice, "channels", action="info", channel_id=cid)
    assert info == (await hc.get_channel(cid)).to_dict()  # the full ChannelMetadata (SPEC §3.11)
    assert info["labels"] == {"intent": "chat"}
    assert info["manifest"]["type"] == "conversation"
    closed = await call(alice, "channels", action="close", channel_id=cid)
    assert closed == {"channel_id": cid, "state": "closed", "close_reason": "closed_by_agent"}
    assert await call(alice, "channels", action="list") == []
    assert [c["state"] for c in await call(alice, "channels", action="list", state="all")] == ["closed"]
    # closing again "succeeds" with the original reason
    assert (await call(alice, "channels", action="close", channel_id=cid))[
        "close_reason"
    ] == "closed_by_agent"


async def test_channels_open_with_seed_message(hub, hc):
    alice = await register(hc, "alice")
    await register(hc, "bob", "the answer")
    opened = await call(
        alice, "channels", action="open", type="consulting", target="bob", message="the question"
    )
    wal = await hub.read_wal(opened["channel_id"])
    seed = next(e for e in wal if e.envelope_id == opened["seed_envelope_id"])
    assert (seed.event_type, seed.sender_id, seed.event_data) == (
        EV_TEXT,
        alice.agent_id,
        {"text": "the question"},
    )
    assert seed.depth == 0


async def test_channels_seed_failure_closes_with_seed_failed(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob")
    # bob speaks first in this workflow, so alice's seed is refused by the adapter
    graph = TransitionGraph.sequence([bob.agent_id, alice.agent_id]).to_dict()
    result = await call(
        alice, "channels", action="open", type="workflow", target="bob", knobs={"graph": graph}, message="go"
    )
    assert result.startswith("Error: seed send failed: workflow·")  # the hub names the channel by its label
    assert result.endswith("expects bob to speak, got alice")
    [md] = hub.query_channels(agent_id=alice.agent_id, include_terminal=True)
    assert md.close_reason == "seed_failed"


async def test_channels_errors(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob")
    carol = await register(hc, "carol")
    assert (
        await call(alice, "channels", action="open", type="consulting")
        == "Error: open requires `type` and `target`"
    )
    assert (
        await call(alice, "channels", action="open", target="bob")
        == "Error: open requires `type` and `target`"
    )
    assert (await call(alice, "channels", action="open", type="consulting", target="nobody")) == (
        "Error: open failed: agent not found: nobody"
    )
    assert (await call(alice, "channels", action="open", type="chatroom", target="bob")).startswith(
        "Error: open failed: no adapter registered for 'chatroom'"
    )
    assert await call(alice, "channels", action="info") == "Error: info requires `channel_id`"
    assert (
        await call(alice, "channels", action="info", channel_id="f" * 32)
        == f"Error: channel '{'f' * 32}' not found"
    )
    theirs = await bob.open(type="conversation", target="carol")
    assert await call(alice, "channels", action="info", channel_id=theirs.channel_id) == (
        f"Error: not a participant of channel '{theirs.channel_id}'"
    )
    assert await call(alice, "channels", action="close", channel_id=theirs.channel_id) == (
        f"Error: not a participant of channel '{theirs.channel_id}'"
    )
    assert not (await hc.get_channel(theirs.channel_id)).is_terminal()
    assert (
        await call(alice, "channels", action="close")
        == "Error: close requires `channel_id` or an active channel"
    )
    assert await call(alice, "channels", action="list", state="open") == (
        "Error: unknown state 'open'; choose from active, all"
    )
    assert await call(alice, "channels", action="join") == (
        "Error: unknown action 'join'; choose from list, open, info, close"
    )
    # close defaults to the current (injected) channel
    current = await carol.open(type="conversation", target="alice")
    closed = await call(
        alice, "channels", in_channel=Channel(metadata=current.metadata, client=alice), action="close"
    )
    assert closed["channel_id"] == current.channel_id


# --- tasks ----------------------------------------------------------------------------------------


async def test_tasks_progress_complete_need_an_active_task(hub, hc):
    alice = await register(hc, "alice")
    assert await call(alice, "tasks", action="progress", payload={"step": 1}) == (
        "Error: progress requires an active `agent.task(...)` block"
    )
    assert await call(alice, "tasks", action="complete") == (
        "Error: complete requires an active `agent.task(...)` block"
    )
    async with alice.agent.task("crunch numbers", capability="math") as task:
        assert await call(alice, "tasks", in_task=task, action="progress", payload={"step": 1}) == (
            f"progress emitted on {task.task_id}"
        )
        assert hub.lookup_task(task.task_id).progress == {"step": 1}
        assert (
            await call(alice, "tasks", in_task=task, action="complete", result="42")
            == f"completed {task.task_id}"
        )
        again = await call(alice, "tasks", in_task=task, action="progress", payload={"step": 2})
        assert again.startswith("Error: progress failed: task ") and "already completed" in again
    md = hub.lookup_task(task.task_id)
    assert (md.state, md.result, md.owner_id) == (TaskState.COMPLETED, "42", alice.agent_id)


async def test_tasks_progress_via_model_inside_agent_task(hub, hc):
    """The LLM reports progress from a turn run inside ``async with agent.task(...)`` (TaskInject)."""
    model = ScriptedModel(tool_call("tasks", action="progress", payload={"pct": 50}), "half way")
    alice = await hc.register(Agent("alice", model))
    async with alice.agent.task("write report") as task:
        reply = await alice.agent.ask("go", dependencies={AGENT_CLIENT_DEP: alice})
        assert reply.tool_results[0].result == f"progress emitted on {task.task_id}"
    assert hub.lookup_task(task.task_id).progress == {"pct": 50}


async def test_tasks_list_status_wait(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob")
    done = alice.agent.task("done one")
    async with done:
        pass
    running = alice.agent.task("running one")
    await running.start()
    async with bob.agent.task("bob's"):
        pass
    own = await call(alice, "tasks", action="list")
    assert [t["title"] for t in own] == ["running one"]
    assert set(own[0]) == {
        "task_id",
        "owner_id",
        "title",
        "capability",
        "state",
        "created_at",
        "started_at",
        "completed_at",
        "expires_at",
        "last_progress_at",
        "result",
        "error",
    }
    assert [t["title"] for t in await call(alice, "tasks", action="list", state="all")] == [
        "done one",
        "running one",
    ]
    assert [t["title"] for t in await call(alice, "tasks", action="list", scope="all", state="all")] == [
        "done one",
        "running one",
        "bob's",
    ]
    assert len(await call(alice, "tasks", action="list", scope="all", state="all", limit=2)) == 2
    status = await call(bob, "tasks", action="status", task_id=running.task_id)
    assert (status["state"], status["owner_id"]) == ("running", alice.agent_id)
    assert await call(alice, "tasks", action="status") == "Error: status requires `task_id`"
    assert await call(alice, "tasks", action="status", task_id="nope") == "Error: task 'nope' not found"
    assert await call(
        alice, "tasks", action="wait", task_id=running.task_id, timeout=0.05, poll_interval=0.01
    ) == (f"Error: task '{running.task_id}' did not complete within 0.05s")

    async def finish_soon() -> None:
        await asyncio.sleep(0.05)
        await running.complete("ok")

    finisher = asyncio.create_task(finish_soon())
    waited = await call(bob, "tasks", action="wait", task_id=running.task_id, timeout=3, poll_interval=0.01)
    await finisher
    assert (waited["state"], waited["result"]) == ("completed", "ok")
    assert await call(alice, "tasks", action="start") == (
        "Error: unknown action 'start'; choose from progress, complete, list, status, wait, cancel"
    )


async def test_tasks_cancel_posts_request_to_owner(hub, hc):
    alice = await register(hc, "alice")
    inbox: list[Envelope] = []
    bob = await register(hc, "bob")
    mute(bob, inbox)
    channel = await alice.open(type="conversation", target="bob")
    task = bob.agent.task("long job", channel_id=channel.channel_id)
    await task.start()
    result = await call(alice, "tasks", action="cancel", task_id=task.task_id, reason="no longer needed")
    assert result == f"cancel_request posted to bob for task {task.task_id}"
    await until(lambda: any(e.event_type == EV_TASK_CANCEL_REQUEST for e in inbox))
    request = next(e for e in inbox if e.event_type == EV_TASK_CANCEL_REQUEST)
    assert request.audience == [bob.agent_id]
    assert request.task_id == task.task_id
    assert request.event_data == {"task_id": task.task_id, "reason": "no longer needed"}
    assert request.sender_id == alice.agent_id
    await task.complete()
    assert await call(alice, "tasks", action="cancel", task_id=task.task_id) == (
        f"task '{task.task_id}' is already completed"
    )
    loose = bob.agent.task("no channel")
    await loose.start()
    assert await call(alice, "tasks", action="cancel", task_id=loose.task_id) == (
        f"Error: task '{loose.task_id}' has no associated channel to post the cancel request into"
    )


# --- context --------------------------------------------------------------------------------------


async def test_context_search_channel_respects_audience_and_cuts_excerpts(hub, hc):
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await register(hc, "bob")
    carol = await register(hc, "carol")
    mute(bob)
    mute(carol)
    ch = await alice.open(type="conversation", target="bob")
    long_text = "Budget " + "x" * 300
    await alice.send(ch.channel_id, "The BUDGET is tight")
    await alice.send(ch.channel_id, long_text)
    await alice.send(ch.channel_id, "nothing to see")
    here = Channel(metadata=ch.metadata, client=bob)
    found = await call(bob, "context", in_channel=here, action="search", query="budget")
    assert [f["excerpt"] for f in found] == ["The BUDGET is tight", long_text[:239] + "…"]
    assert len(found[1]["excerpt"]) == 240
    assert set(found[0]) == {"envelope_id", "sender_id", "when", "excerpt"}
    assert found[0]["sender_id"] == alice.agent_id
    assert found[0]["when"].endswith("Z")
    limited = await call(bob, "context", action="search", query="budget", channel_id=ch.channel_id, limit=1)
    assert len(limited) == 1
    # audience: a message addressed to carol only is invisible to bob
    disc = await alice.open(type="discussion", target=["bob", "carol"])
    await alice.send(disc.channel_id, "secret budget plan", audience=["carol"])
    assert await call(bob, "context", action="search", query="budget", channel_id=disc.channel_id) == []
    seen = await call(carol, "context", action="search", query="budget", channel_id=disc.channel_id)
    assert [f["excerpt"] for f in seen] == ["secret budget plan"]


async def test_context_errors_and_quote(hub, hc):
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await register(hc, "bob")
    mute(bob)
    ch = await alice.open(type="conversation", target="bob")
    for i in range(4):
        await alice.send(ch.channel_id, f"point {i}")
    quoted = await call(bob, "context", action="quote", speaker="alice", recent_n=2, channel_id=ch.channel_id)
    assert [q["text"] for q in quoted] == ["point 2", "point 3"]
    assert set(quoted[0]) == {"envelope_id", "when", "text"}
    one = await call(
        bob, "context", in_channel=Channel(metadata=ch.metadata, client=bob), action="quote", speaker="alice"
    )
    assert [q["text"] for q in one] == ["point 3"]
    assert (
        await call(bob, "context", action="search", query="x")
        == "Error: no current channel and no channel_id provided"
    )
    assert (
        await call(bob, "context", action="search", channel_id=ch.channel_id)
        == "Error: search requires `query`"
    )
    assert (
        await call(bob, "context", action="quote", channel_id=ch.channel_id)
        == "Error: quote requires `speaker`"
    )
    assert await call(bob, "context", action="quote", speaker="zed", channel_id=ch.channel_id) == (
        "Error: peer 'zed' not found"
    )
    assert await call(
        bob, "context", action="quote", speaker="alice", recent_n=0, channel_id=ch.channel_id
    ) == ("Error: recent_n must be >= 1, got 0")
    assert await call(bob, "context", action="search", query="x", limit=0, channel_id=ch.channel_id) == (
        "Error: limit must be >= 1, got 0"
    )
    assert (
        await call(bob, "context", action="recall")
        == "Error: unknown action 'recall'; choose from search, quote"
    )
    other = await register(hc, "other")
    mute(other)
    elsewhere = await alice.open(type="conversation", target="other")
    assert await call(bob, "context", action="search", query="x", channel_id=elsewhere.channel_id) == (
        f"Error: not a participant of channel '{elsewhere.channel_id}'"
    )


async def test_context_search_knowledge_is_own_only(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob")
    await hc.add_knowledge(alice.agent_id, "The launch date is March 3.", source="notes.md")
    await hc.add_knowledge(alice.agent_id, "Unrelated fact.")
    await hc.add_knowledge(bob.agent_id, "Bob's LAUNCH plan.")
    found = await call(alice, "context", action="search", query="launch", scope="knowledge")
    assert [f["excerpt"] for f in found] == ["The launch date is March 3."]
    assert found[0]["source"] == "notes.md"
    assert set(found[0]) == {"id", "source", "when", "excerpt"}
    assert [
        f["excerpt"] for f in await call(bob, "context", action="search", query="launch", scope="knowledge")
    ] == ["Bob's LAUNCH plan."]
    assert await call(alice, "context", action="search", query="mars", scope="knowledge") == []


# --- delegate -------------------------------------------------------------------------------------


async def test_delegate_direct_call(hub, hc):
    alice = await register(hc, "alice")
    bob = await register(hc, "bob", "Model X as a graph.")
    reply = await call(
        alice, "delegate", target="bob", prompt="What's the right way to model X?", capability="modeling"
    )
    assert reply == "Model X as a graph."
    [md] = hub.query_channels(agent_id=alice.agent_id, include_terminal=True)
    assert (md.manifest.type, md.close_reason, md.knobs) == (
        "consulting",
        "consulting_complete",
        {"capability": "modeling"},
    )
    wal = await hub.read_wal(md.channel_id)
    prompt, answer = [e for e in wal if e.event_type == EV_TEXT]
    assert (prompt.sender_id, prompt.audience, prompt.depth) == (alice.agent_id, [bob.agent_id], 1)
    assert (answer.sender_id, answer.causation_id, answer.depth) == (bob.agent_id, prompt.envelope_id, 1)
    # the caller's handler never ran a turn on the sub-channel, and its inbox is gone
    assert alice.agent.model.calls == []
    assert md.channel_id not in alice._inboxes and md.channel_id not in alice._suppressed


async def test_delegate_errors(hub, hc):
    alice = await register(hc, "alice")
    await register(hc, "bob", "by name")
    await hc.register(Agent("picky", ScriptedModel()), rule=Rule(access=AccessBlock(inbound_from=["bob"])))
    assert await call(alice, "delegate", target="zed", prompt="?") == (
        "Error: target 'zed' not found. Available targets: [bob, picky]"
    )
    assert await call(alice, "delegate", target="functions.bob", prompt="?") == "by name"
    assert await call(alice, "delegate", target="alice", prompt="?") == (
        "Error: cannot delegate to self (target 'alice' is this agent)"
    )
    assert await call(alice, "delegate", target="picky", prompt="?") == (
        "Error: failed to open consulting channel: invitee 'picky' does not accept inbound from 'alice'"
    )


async def test_delegate_lonely_target_not_found(hub, hc):
    alice = await register(hc, "alice")
    assert await call(alice, "delegate", target="zed", prompt="?") == "Error: target 'zed' not found"


async def test_delegate_timeout_and_closed(hub, hc):
    alice = await register(hc, "alice")
    human = await hc.register_human(Passport(name="hank", kind="human"))
    assert await call(alice, "delegate", target="hank", prompt="anyone?", timeout=0.1) == (
        "Error: delegate to 'hank' timed out after 0.1s"
    )

    async def close_it(envelope: Envelope) -> None:
        if envelope.event_type == EV_TEXT:
            await human.close_channel(envelope.channel_id)

    human.on_envelope(close_it)
    assert await call(alice, "delegate", target="hank", prompt="anyone?", timeout=3) == (
        "Error: delegate to 'hank' channel closed: human_closed"
    )
    assert alice._suppressed == set()


async def _consult_through_bob(hub, bob_client: HubClient, carol_client: HubClient) -> tuple[Any, Any]:
    def relay(call) -> str:
        return "carol says: " + last_tool_result(call)

    bob = await bob_client.register(
        Agent("bob", ScriptedModel(tool_call("delegate", target="carol", prompt="six times seven?"), relay))
    )
    carol = await carol_client.register(Agent("carol", ScriptedModel("42")))
    alice = await bob_client.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "ask carol for me")
    answer = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    return answer, (bob, carol, ch)


@pytest.mark.parametrize("connections", ["one", "two"])
async def test_delegate_from_inside_a_turn(hub, connections):
    """SPEC §3.2: the reply reaches the tool in-process, on one shared HubClient and on two."""
    first = HubClient.local(hub)
    second = first if connections == "one" else HubClient.local(hub)
    try:
        answer, (bob, carol, ch) = await _consult_through_bob(hub, first, second)
        assert answer.event_data == {"text": "carol says: 42"}
        assert answer.sender_id == bob.agent_id
        sub = [md for md in hub.query_channels(agent_id=carol.agent_id, include_terminal=True)]
        assert [md.close_reason for md in sub] == ["consulting_complete"]
        prompt = next(e for e in await hub.read_wal(sub[0].channel_id) if e.event_type == EV_TEXT)
        assert prompt.depth == 1  # handled depth 0 + 1
        [record] = await first.list_turns(channel_id=ch.channel_id)
        assert record.tool_calls[0]["name"] == "delegate"
        assert record.tool_calls[0]["result"] == "42"
        assert record.tool_calls[0]["is_error"] is False
    finally:
        await first.close()
        if second is not first:
            await second.close()


async def test_delegation_depth_limit(hub, hc):
    """A prompt deeper than the sender's delegation_depth is refused (SPEC §3.15)."""

    def relay(call) -> str:
        return "relayed: " + last_tool_result(call)

    await hc.register(
        Agent("bob", ScriptedModel(tool_call("delegate", target="carol", prompt="and you?"), relay))
    )
    carol = await hc.register(
        Agent("carol", ScriptedModel(tool_call("delegate", target="dave", prompt="and you?"), relay)),
        rule=Rule(limits=LimitsBlock(delegation_depth=1)),
    )
    dave = await register(hc, "dave", "never asked")
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "go deep")
    answer = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    refusal = "Error: prompt send failed: sender 'carol' exceeded delegation_depth (2 > 1)"
    assert answer.event_data["text"] == "relayed: relayed: " + refusal
    assert dave.agent.model.calls == []
    [to_dave] = hub.query_channels(agent_id=dave.agent_id, include_terminal=True)
    assert to_dave.close_reason == "prompt_send_failed"
    # the same rule, straight at the hub
    with pytest.raises(AccessDeniedError, match=r"exceeded delegation_depth \(2 > 1\)"):
        await carol.send_envelope(
            Envelope(to_dave.channel_id, carol.agent_id, None, EV_TEXT, {"text": "x"}, depth=2)
        )


# --- through ScriptedModel turns ------------------------------------------------------------------


async def test_tools_through_a_scripted_turn(hub, hc):
    """An LLM turn calling peers, channels and context; results land in the model's history and the turn record."""

    def answer(call) -> str:
        results = [json.loads(e.result) for e in call.history if isinstance(e, ToolResultEvent)]
        peers, listing, quotes = results
        return f"{len(peers)} peer(s); {len(listing)} channel(s); you said: {quotes[0]['text']}"

    bob = await hc.register(
        Agent(
            "bob",
            ScriptedModel(
                [
                    tool_call("peers", action="find"),
                    tool_call("channels", action="list"),
                    tool_call("context", action="quote", speaker="alice"),
                ],
                answer,
            ),
        )
    )
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "who is around?")
    reply = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert reply.event_data["text"] == "1 peer(s); 1 channel(s); you said: who is around?"
    [record] = await hc.list_turns(agent_id=bob.agent_id)
    assert [c["name"] for c in record.tool_calls] == ["peers", "channels", "context"]
    assert all(not c["is_error"] for c in record.tool_calls)


async def test_tool_error_string_reaches_the_model(hub, hc):
    def answer(call) -> str:
        return "tool said: " + last_tool_result(call)

    bob = await hc.register(
        Agent("bob", ScriptedModel(tool_call("peers", action="describe", name="ghost"), answer))
    )
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(type="consulting", target="bob")
    await alice.send(ch.channel_id, "describe ghost")
    reply = await alice.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert reply.event_data["text"] == "tool said: Error: peer 'ghost' not found"
    [record] = await hc.list_turns(agent_id=bob.agent_id)
    # returned as a string by the tool, not raised: the loop does not flag it as a failed call
    assert record.tool_calls[0]["result"] == "Error: peer 'ghost' not found"


@pytest.mark.parametrize("connections", ["one", "two"])
async def test_delegate_from_inside_a_turn_over_websocket(hub, connections):
    """The same in-turn delegate with every client attached over a real WebSocket (127.0.0.1)."""
    from ag2net.server import serve_ws

    async with serve_ws(hub, "127.0.0.1", 0) as server:
        first = HubClient.connect(server.url(), rpc_timeout=10)
        second = first if connections == "one" else HubClient.connect(server.url(), rpc_timeout=10)
        try:
            answer, (bob, carol, ch) = await _consult_through_bob(hub, first, second)
            assert answer.event_data == {"text": "carol says: 42"}
            [sub] = hub.query_channels(agent_id=carol.agent_id, include_terminal=True)
            assert sub.close_reason == "consulting_complete"
        finally:
            await first.close()
            if second is not first:
                await second.close()

"""The seed's custom-handler examples, run against ag2net: ``gateway_handler``, ``selective_handler``,
``logged_handler``, the no-``say`` handler built from the public hooks, swapping and restoring the default
handler, ``attach_plugin=False`` workers, and raw envelopes with a custom event type."""

from __future__ import annotations

import asyncio
import logging

import pytest
from support import until

from ag2net import (
    EV_CHANNEL_INVITE,
    EV_TEXT,
    Agent,
    Channel,
    Envelope,
    Passport,
    ProtocolError,
    Resume,
    ScriptedModel,
    default_handler,
    read_wal_until,
    resolve_view_policy,
    stamp_dependencies,
    visible_to,
)

PLUGIN = ["delegate", "peers", "channels", "tasks", "context"]


pytestmark = pytest.mark.hub(store="memory", invite_ack_timeout=3)


async def test_gateway_handler(hub, hc):
    client = await hc.register(Agent("gateway", ScriptedModel()))
    my_external_queue: asyncio.Queue[dict] = asyncio.Queue()

    async def gateway_handler(envelope: Envelope) -> None:
        """Forward inbound text to an external system instead of running an LLM."""
        if envelope.event_type != EV_TEXT:
            await default_handler(envelope, client)  # auto-ack invites etc. (client from closure)
            return
        text = envelope.event_data.get("text", "")
        await my_external_queue.put(
            {
                "from": envelope.sender_id,
                "text": text,
                "channel": envelope.channel_id,
            }
        )

    client.on_envelope(gateway_handler)
    user = await hc.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="consulting", target="gateway")  # the invite was acked by the default handler
    await user.send(ch.channel_id, "What's our Q3 exposure?")
    item = await asyncio.wait_for(my_external_queue.get(), 3)
    assert item == {"from": user.agent_id, "text": "What's our Q3 exposure?", "channel": ch.channel_id}
    assert client.agent.model.calls == []  # no LLM ran
    assert [e.event_type for e in await hub.read_wal(ch.channel_id)][-1] == EV_TEXT  # nothing answered


async def test_selective_handler(hub, hc):
    client = await hc.register(Agent("careful", ScriptedModel("trusted answer")))
    friend = await hc.register_human(Passport(name="friend", kind="human"))
    stranger = await hc.register_human(Passport(name="stranger", kind="human"))
    TRUSTED_AGENTS = {friend.agent_id}

    async def selective_handler(envelope: Envelope) -> None:
        if envelope.event_type == EV_CHANNEL_INVITE and envelope.sender_id not in TRUSTED_AGENTS:
            return  # untrusted invite → silent drop; hub will time out and close
        await default_handler(envelope, client)  # default for everything else

    client.on_envelope(selective_handler)
    hub.invite_ack_timeout = 0.2
    with pytest.raises(ProtocolError, match=r"ack timeout"):
        await stranger.open(type="consulting", target="careful")
    [dropped] = hub.query_channels(agent_id=stranger.agent_id, include_terminal=True)
    assert dropped.close_reason == "invite_timeout"
    hub.invite_ack_timeout = 3
    ch = await friend.open(type="consulting", target="careful")
    await friend.send(ch.channel_id, "question")
    reply = await friend.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
    assert reply.event_data == {"text": "trusted answer"}


async def test_logged_handler(hub, hc, caplog):
    client = await hc.register(Agent("logged", ScriptedModel("logged answer")))
    log = logging.getLogger("test.seed.logged")

    async def logged_handler(envelope: Envelope) -> None:
        log.info("inbound %s from %s", envelope.event_type, envelope.sender_id)
        try:
            await default_handler(envelope, client)
        finally:
            log.info("processed %s", envelope.envelope_id)

    client.on_envelope(logged_handler)
    user = await hc.register_human(Passport(name="user", kind="human"))
    with caplog.at_level(logging.INFO, logger="test.seed.logged"):
        ch = await user.open(type="consulting", target="logged")
        prompt_id = await user.send(ch.channel_id, "question")
        reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
        await client.idle()
    assert reply.event_data == {"text": "logged answer"}
    messages = [r.getMessage() for r in caplog.records if r.name == "test.seed.logged"]
    assert f"inbound {EV_TEXT} from {user.agent_id}" in messages
    assert f"processed {prompt_id}" in messages
    assert messages[0] == f"inbound {EV_CHANNEL_INVITE} from {user.agent_id}"


async def test_no_say_handler_from_the_public_hooks(hub, hc):
    """The seed's "bypassing adapter tools" pattern: the default substantive path minus ``tools=``."""

    async def no_say_handler(envelope, client):
        if envelope.event_type != EV_TEXT:
            await default_handler(envelope, client)  # invite-ack + lifecycle for free
            return
        if not await client._hub_client.can_send(envelope.channel_id, client.agent_id):
            return  # not our turn / channel closing
        meta = await client._hub_client.get_channel(envelope.channel_id)
        adapter = client._hub_client.adapter_for_metadata(meta)
        view = resolve_view_policy(client, meta)
        history = await read_wal_until(client, envelope)
        projection = await view.project(
            history,
            participant_id=client.agent_id,
            channel=meta,
            render_envelope=adapter.render_envelope,
            name_for=client._hub_client.name_for,
        )
        state = await client._hub_client.adapter_state(envelope.channel_id)
        deps = stamp_dependencies(client, Channel(metadata=meta, client=client), state)
        current_input = adapter.extract_turn_input(envelope)
        reply = await client.agent.ask(current_input, history=projection, dependencies=deps)  # ← no tools=
        out = adapter.build_round_envelope(
            metadata=meta,
            sender_id=client.agent_id,
            reply=reply,
            events=reply.events,
            state=state,
            hub=client._hub,
        )
        if out is not None:
            out.causation_id = envelope.envelope_id
            await client.send_envelope(out)

    client = await hc.register(Agent("quiet", ScriptedModel("first reply", "second reply")))
    client.on_envelope(lambda envelope: no_say_handler(envelope, client))
    user = await hc.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="quiet")
    first_id = await user.send(ch.channel_id, "hello")
    first = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
    await user.send(ch.channel_id, "and again")
    second = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
    assert (first.event_data["text"], first.causation_id) == ("first reply", first_id)
    assert second.event_data["text"] == "second reply"
    calls = client.agent.model.calls
    assert [c.tool_names for c in calls] == [PLUGIN, PLUGIN]  # the static tools stay; say is gone
    # the second call's history is the conversation's window: user, own reply
    assert [type(e).__name__ for e in calls[1].history[: calls[1].prior]] == ["ModelRequest", "ModelMessage"]
    assert calls[1].system == f"You are quiet (agent_id: {client.agent_id})."


async def test_replace_and_restore_default_handler(hub, hc):
    client = await hc.register(Agent("swapper", ScriptedModel("default is back")))
    seen: list[str] = []

    async def counting(envelope: Envelope) -> None:
        seen.append(envelope.event_type)
        await default_handler(envelope, client)  # the exported handler takes (envelope, client)

    client.on_envelope(counting)
    user = await hc.register_human(Passport(name="user", kind="human"))
    ch = await user.open(type="conversation", target="swapper")
    await until(lambda: len(seen) == 2)
    assert seen == [EV_CHANNEL_INVITE, "ag2.channel.opened"]
    client.on_envelope(client._run_default_handler)
    await user.send(ch.channel_id, "anyone?")
    reply = await user.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=3)
    assert reply.event_data["text"] == "default is back"
    assert seen == [EV_CHANNEL_INVITE, "ag2.channel.opened"]


async def test_worker_without_plugin_and_without_default_handler(hub, hc):
    worker_agent = Agent("worker", ScriptedModel())
    worker = await hc.register(
        worker_agent, Passport(name="worker"), Resume(claimed_capabilities=["batch"]), attach_plugin=False
    )
    assert worker_agent.tools == []  # no peers/channels/tasks/context/delegate
    assert worker_agent.prompt_prefixes == []
    handled: list[Envelope] = []

    async def my_custom_handler(envelope: Envelope) -> None:
        handled.append(envelope)
        await default_handler(envelope, worker)

    worker.on_envelope(my_custom_handler)
    user = await hc.register_human(Passport(name="user", kind="human"))
    await user.open(type="conversation", target="worker")
    assert handled[0].event_type == EV_CHANNEL_INVITE

    silent = await hc.register(Agent("silent", ScriptedModel()), attach_default_handler=False)
    hub.invite_ack_timeout = 0.2
    with pytest.raises(ProtocolError, match="ack timeout"):
        await user.open(type="conversation", target="silent")
    assert silent.agent.model.calls == []


async def test_custom_event_type_reaches_a_custom_handler(hub, hc):
    """The seed's raw envelope: a custom type is WAL'd and delivered, and the default handler runs no LLM."""
    reviews: list[dict] = []
    bob = await hc.register(Agent("bob", ScriptedModel()))

    async def review_handler(envelope: Envelope) -> None:
        if envelope.event_type == "myapp.review_request":
            reviews.append(envelope.event_data)
        await default_handler(envelope, bob)

    bob.on_envelope(review_handler)
    alice = await hc.register(Agent("alice", ScriptedModel()))
    carol = await hc.register(Agent("carol", ScriptedModel()))
    channel = await alice.open(type="discussion", target=["bob", "carol"])
    envelope = Envelope(
        channel_id=channel.channel_id,
        sender_id=alice.agent_id,
        audience=[bob.agent_id],
        event_type="myapp.review_request",
        event_data={"document_id": "doc-123", "kind": "security"},
    )
    envelope_id = await alice.send_envelope(envelope)
    await until(lambda: bool(reviews))
    assert reviews == [{"document_id": "doc-123", "kind": "security"}]
    wal = await hub.read_wal(channel.channel_id)
    stored = next(e for e in wal if e.envelope_id == envelope_id)
    assert stored.event_type == "myapp.review_request"
    assert visible_to(stored, bob.agent_id) and visible_to(stored, alice.agent_id)
    assert not visible_to(stored, carol.agent_id)
    await bob.idle()
    assert bob.agent.model.calls == [] and carol.agent.model.calls == []

"""``LocalLink`` shared by several ``HubClient``s, and ``HubClient(link, *, hub=None, rpc_timeout=30.0)``.

ag2 code writes ``link = LocalLink(hub)`` once and ``HubClient(link, hub=hub)`` per agent (issue 14,
defects 1 and 2): each client must get its own connection, so deliveries reach the right client and
closing one leaves the others attached.
"""

from __future__ import annotations

import asyncio

import pytest

from ag2net import EV_CHANNEL_CLOSED, EV_TEXT, Agent, HubClient, ScriptedModel
from ag2net.channel import ChannelState
from ag2net.hub import Hub
from ag2net.hub.local import LocalLink, LocalLinkClient
from ag2net.store import MemoryStore


async def consult(asker, target: str, question: str) -> str:
    """``asker`` opens a consulting channel to ``target``, asks, and returns the reply text."""
    channel = await asyncio.wait_for(asker.open(type="consulting", target=target), 3)
    assert channel.state == ChannelState.ACTIVE, f"invite to {target} was never acknowledged"
    await channel.send(question)
    reply = await asker.wait_for_channel_event(
        channel_id=channel.channel_id,
        predicate=lambda e: e.event_type in (EV_TEXT, EV_CHANNEL_CLOSED) and e.sender_id != asker.agent_id,
        timeout=3,
    )
    assert reply.event_type == EV_TEXT, reply
    return reply.event_data["text"]


async def test_three_hub_clients_on_one_local_link(hub):
    link = LocalLink(hub)
    one, two, three = (HubClient(link, hub=hub) for _ in range(3))
    asker = await one.register(
        Agent("asker", ScriptedModel()), attach_plugin=False, attach_default_handler=False
    )
    await two.register(Agent("bob", ScriptedModel("bob here", loop=True)), attach_plugin=False)
    await three.register(Agent("cy", ScriptedModel("cy here", loop=True)), attach_plugin=False)

    # each client took its own connection from the shared link
    endpoints = {c.link.endpoint_id for c in (one, two, three)}
    assert len(endpoints) == 3 and "" not in endpoints
    assert all(c.hub is hub for c in (one, two, three))

    # invites reach the agents on the 2nd and 3rd client, and so do the questions
    assert await consult(asker, "bob", "who?") == "bob here"
    assert await consult(asker, "cy", "who?") == "cy here"

    # closing one client detaches only that one
    await two.close()
    assert await consult(asker, "cy", "still there?") == "cy here"
    assert one.link.endpoint_id in hub.delivery.endpoints and three.link.endpoint_id in hub.delivery.endpoints
    await one.close()
    await three.close()


async def test_one_link_client_cannot_serve_two_hub_clients(hub):
    """Handing the same connection to two clients would misdeliver silently; it is refused instead."""
    shared = LocalLink(hub).client()
    assert isinstance(shared, LocalLinkClient)
    first, second = HubClient(shared), HubClient(shared)
    await first.open()
    with pytest.raises(RuntimeError, match="already open for another HubClient"):
        await second.open()
    await first.close()


async def test_hub_keyword_and_rpc_timeout():
    hub = await Hub.open(MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    other = await Hub.open(MemoryStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        client = HubClient(LocalLink(hub), hub=hub, rpc_timeout=7.5)
        assert client.hub is hub and client.rpc_timeout == 7.5 and not client.remote
        assert HubClient(LocalLink(hub)).hub is hub  # hub= is optional, as in ag2
        with pytest.raises(ValueError, match="hub is not the Hub this link connects to"):
            HubClient(LocalLink(hub), hub=other)
        await client.close()
    finally:
        await hub.close()
        await other.close()

"""Issue 14, defect 3: ag2's hub and client getters are coroutines, its lookups synchronous.

Code written for ag2 1.2.1 awaits ``hub.get_channel(...)``, ``hub.list_channels(state=...)``,
``hub.get_agent``/``list_agents``/``get_task``/``list_tasks``, ``await hub.start()``; calls
``hub.can_send(...)`` and ``hub_client.adapter_for(...)`` without ``await``; awaits
``client.disconnect()``; and uses ``async with`` on an ``AgentClient``. Each is exercised here on an
in-process hub and, where the remote path differs, over a real WebSocket on 127.0.0.1.
"""

from __future__ import annotations

import inspect

import pytest

from ag2net import (
    Agent,
    ChannelState,
    Hub,
    HubClient,
    LocalLink,
    NotFoundError,
    Passport,
    ScriptedModel,
    TaskMetadata,
    TaskSpec,
    TaskState,
)
from ag2net.server import serve_ws

pytestmark = pytest.mark.hub(store="sqlite")


async def _two_party_channel(hub: Hub):
    hc = HubClient(LocalLink(hub), hub=hub)
    ana = await hc.register_human(Passport(name="ana"))
    bot = await hc.register(Agent("bot", ScriptedModel("hello")))
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bot.agent_id]
    )
    return hc, ana, bot, md


async def test_hub_getters_are_awaited_as_in_ag2(hub):
    hc, ana, bot, md = await _two_party_channel(hub)
    for name in ("get_channel", "list_channels", "get_agent", "list_agents", "get_task", "list_tasks"):
        assert inspect.iscoroutinefunction(getattr(Hub, name)), name
    assert (await hub.get_channel(md.channel_id)).channel_id == md.channel_id
    assert (await hub.get_agent("bot")).agent_id == bot.agent_id
    assert (await hub.get_agent(bot.agent_id)).name == "bot"
    assert {p.name for p in await hub.list_agents(kind="human")} == {"ana"}
    assert (await hub.get_resume(bot.agent_id)).version >= 1
    assert (await hub.get_rule(bot.agent_id)) is not None
    assert (await hub.get_skill(bot.agent_id)).startswith("---")  # the generated fallback (SPEC §3.5)
    with pytest.raises(NotFoundError, match="channel not found"):
        await hub.get_channel("nope")
    with pytest.raises(NotFoundError, match="agent not found"):
        await hub.get_agent("nobody")


async def test_list_channels_filters_by_state_and_includes_terminal_ones(hub):
    hc, ana, bot, md = await _two_party_channel(hub)
    other = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bot.agent_id]
    )
    await hub.close_channel(other.channel_id, reason="done")
    everything = await hub.list_channels()
    assert {m.channel_id for m in everything} == {md.channel_id, other.channel_id}  # ag2: terminal included
    closed = await hub.list_channels(state=ChannelState.CLOSED)
    assert [m.channel_id for m in closed] == [other.channel_id]
    assert [m.channel_id for m in await hub.list_channels(state="closed")] == [other.channel_id]
    assert await hub.list_channels(agent_id="someone-else") == []
    assert len(await hub.list_channels(limit=1)) == 1
    # the client keeps ag2's default of hiding terminal channels
    assert [m.channel_id for m in await hc.list_channels(agent_id=ana.agent_id)] == [md.channel_id]
    assert len(await hc.list_channels(agent_id=ana.agent_id, include_terminal=True)) == 2


async def test_tasks_are_awaited(hub):
    hc, ana, bot, md = await _two_party_channel(hub)
    task = TaskMetadata(
        task_id="t-1",
        owner_id=bot.agent_id,
        spec=TaskSpec(title="answer", capability="answer"),
        state=TaskState.RUNNING,
        channel_id=md.channel_id,
    )
    await hub.observe_task(task)
    assert (await hub.get_task("t-1")).owner_id == bot.agent_id
    assert [t.task_id for t in await hub.list_tasks(agent_id=bot.agent_id)] == ["t-1"]
    assert await hub.list_tasks(state=TaskState.COMPLETED) == []
    with pytest.raises(NotFoundError, match="task not found"):
        await hub.get_task("t-2")


async def test_start_is_a_coroutine_and_idempotent(tmp_path):
    hub = Hub(tmp_path / "h.db", ttl_sweep_interval=30.0, expectation_sweep_interval=0)
    await hub.store.open()
    await hub.hydrate()
    await hub.start()
    await hub.start()
    try:
        assert "ttl" in hub.sweepers.running
    finally:
        await hub.close()


async def test_can_send_and_adapter_for_are_synchronous(hub):
    hc, ana, bot, md = await _two_party_channel(hub)
    allowed = hub.can_send(md.channel_id, ana.agent_id)
    assert isinstance(allowed, bool)
    assert hub.can_send("no-such-channel", ana.agent_id) is False
    adapter = hc.adapter_for(md.channel_id)
    assert adapter.manifest.type == "conversation"
    assert hub.default_view_policy(md.channel_id, bot.agent_id) == hc.default_view_policy(
        md.channel_id, bot.agent_id
    )


async def test_remote_adapter_for_reads_the_metadata_the_client_has_seen(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        remote = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        ana = await remote.register_human(Passport(name="ana"))
        bot = await remote.register(Agent("bot", ScriptedModel("x")), attach_plugin=False)
        md = await remote.create_channel(
            creator_id=ana.agent_id, manifest_type="consulting", participants=[ana.agent_id, bot.agent_id]
        )
        other = await hub.create_channel(
            creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bot.agent_id]
        )
        # created here: cached; created by someone else: unknown until fetched
        assert remote.adapter_for(md.channel_id).manifest.type == "consulting"
        with pytest.raises(NotFoundError, match="get_channel"):
            remote.adapter_for(other.channel_id)
        await remote.get_channel(other.channel_id)
        assert remote.adapter_for(other.channel_id).manifest.type == "conversation"
        assert remote.default_view_policy(other.channel_id, bot.agent_id) == hub.default_view_policy(
            other.channel_id, bot.agent_id
        )
        await remote.close()


async def test_disconnect_is_a_coroutine_and_stops_delivery(hub):
    hc, ana, bot, md = await _two_party_channel(hub)
    assert inspect.iscoroutinefunction(type(ana).disconnect)
    assert inspect.iscoroutinefunction(type(bot).disconnect)
    await bot.disconnect()
    assert bot.disconnected
    await ana.disconnect()
    assert ana.disconnected
    await hc.close()


async def test_agent_client_is_an_async_context_manager(hub):
    hc = HubClient(LocalLink(hub), hub=hub)
    async with await hc.register(Agent("bot", ScriptedModel("x"))) as bot:
        assert (await hub.get_agent("bot")).agent_id == bot.agent_id
    # leaving the block closes the client: it is unregistered from the hub
    with pytest.raises(NotFoundError):
        await hub.get_agent("bot")
    await hc.close()

"""The library keeps its promises (issue 22 item 7): ``AgentClient.send``, ``await HubClient.connect(url)``,
a ``LocalLink`` connection live from ``client()`` on, the hub's log of registrations and refusals, and a
compaction summary that names its senders."""

from __future__ import annotations

import asyncio
import logging

import pytest
from support import until

from ag2net import EV_TEXT, Agent, Envelope, HubClient, Passport, Resume, ScriptedModel
from ag2net.events import CompactionSummary
from ag2net.hub.local import LocalLink
from ag2net.protocol.frames import NotifyFrame, ReceiptFrame
from ag2net.server import serve_ws
from ag2net.views.builtin import NamedWindowedSummary, WindowedSummary


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


pytestmark = pytest.mark.hub(store="memory")


async def test_an_agent_client_sends_text_like_a_human_client(hub):
    hc = HubClient.local(hub)
    try:
        bot = await hc.register(Agent("bot", ScriptedModel("hi")), Passport(name="bot"), Resume())
        await hc.register_human(Passport(name="ana", kind="human"))
        cid = (await bot.open(type="discussion", target=["ana"])).channel_id
        eid = await bot.send(cid, "hello ana", audience=["ana"])
        [env] = [e for e in await hub.read_wal(cid) if e.envelope_id == eid]
        assert (env.sender_id, env.event_type, env.event_data) == (
            bot.agent_id,
            EV_TEXT,
            {"text": "hello ana"},
        )
        assert env.audience == [hub.find_agent_id("ana")]
    finally:
        await hc.close()


async def test_a_remote_client_is_awaited_open_as_a_hub_is(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        client = await HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        try:
            assert isinstance(client, HubClient) and client.connection_state()["connected"]
            assert client is await client  # awaiting an open client gives it again
            assert await client.adapter_types()
        finally:
            await client.close()
        # the other forms still work
        async with HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False) as again:
            assert await again.adapter_types()
        lazy = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        try:
            assert await lazy.adapter_types()
        finally:
            await lazy.close()


async def test_a_local_link_connection_is_live_from_client_on(hub):
    """ag2's receipt-cursor pattern: bind an identity to ``link.client().endpoint_id`` straight away, read
    its deliveries as frames, acknowledge one, and the hub's cursor moves."""
    hc = HubClient.local(hub)
    conn = LocalLink(hub).client()
    try:
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        bob = await hc.register_human(Passport(name="bob", kind="human"))
        cid = (await ana.open(type="conversation", target="bob")).channel_id
        hub.bind_endpoint(conn.endpoint_id, bob.agent_id)  # before: "endpoint not attached"
        eid = await ana.send(cid, "for bob")
        frames = conn.frames()
        while True:
            frame = await asyncio.wait_for(anext(frames), 5)
            if isinstance(frame, NotifyFrame) and frame.envelope.envelope_id == eid:
                break
        await conn.send_frame(ReceiptFrame(eid, "ack", bob.agent_id, cid))
        await until(lambda: hub.inbox_cursor(bob.agent_id, cid) == eid)
        assert hub.inbox_cursor(bob.agent_id, cid) == eid
    finally:
        await conn.close()
        await hc.close()


async def test_the_hub_logs_registrations_and_refused_envelopes(hub, caplog):
    hc = HubClient.local(hub)
    other = HubClient.local(hub)
    try:
        with caplog.at_level(logging.INFO, logger="ag2net.hub"):
            ana = await hc.register_human(Passport(name="ana", kind="human"))
            bob = await other.register_human(Passport(name="bob", kind="human"))
            eve = await hc.register_human(Passport(name="eve", kind="human"))
            cid = (await ana.open(type="conversation", target="bob")).channel_id
            with pytest.raises(Exception, match="only accepts sends from participants"):
                await hc.post_envelope(Envelope(cid, eve.agent_id, None, EV_TEXT, {"text": "let me in"}))
            with pytest.raises(Exception, match="does not hold 'bob'"):
                await hc.post_envelope(Envelope(cid, bob.agent_id, None, EV_TEXT, {"text": "forged"}))
        mine = [r for r in caplog.records if r.name == "ag2net.hub"]
        messages = [r.getMessage() for r in mine]
        assert f"registered human 'ana' ({ana.agent_id})" in messages
        assert f"registered human 'bob' ({bob.agent_id})" in messages
        assert any(m.startswith(f"refused {EV_TEXT} from eve on channel {cid}: ") for m in messages)
        assert any("does not hold 'bob'" in r.getMessage() and r.levelno == logging.WARNING for r in mine)
    finally:
        await hc.close()
        await other.close()


async def test_a_compaction_summary_names_its_senders_through_name_for():
    """Both windowed views list the elided envelopes' senders by ``name_for`` (the model reads names, not
    32-hex ids); only the named variant labels the kept messages too."""
    ids = {"a" * 32: "alice", "b" * 32: "bob"}
    wal = [
        Envelope("c", sender, None, EV_TEXT, {"text": f"m{i}"}, envelope_id=f"e{i}")
        for i, sender in enumerate(["a" * 32, "b" * 32, "a" * 32, "b" * 32])
    ]
    for view in (WindowedSummary(1), NamedWindowedSummary(1)):
        out = await view.project(
            wal,
            participant_id="c" * 32,
            render_envelope=lambda e: e.event_data["text"],
            name_for=ids.__getitem__,
        )
        assert out[0] == CompactionSummary("Earlier in this channel: 3 messages from alice, bob.", 3)

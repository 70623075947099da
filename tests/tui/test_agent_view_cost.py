"""The agent view's Cost tab (issue 26 part 4) on a real hub: an agent on an OpenAI-compatible server (real
HTTP on 127.0.0.1) whose windowed view slides; the tab shows what its turns cost, its cache hit rate as a
sparkline, and why the cache read fell, naming the seqs the window dropped; the channel list shows the cost."""

from __future__ import annotations

import io
from typing import Any

from fake_openai import FakeOpenAI, usage
from rich.console import Console
from textual.widgets import TabbedContent
from tui_network import until

from ag2net import Agent, Hub, HubClient, Passport
from ag2net.agent.openai_model import OpenAIChatModel, RetryPolicy
from tui.app import build_app
from tui.settings import Settings
from tui.widgets.cost_view import CostView


def plain(renderable: Any, width: int = 150) -> str:
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.export_text()


async def test_the_cost_tab_names_the_cost_the_hit_rate_and_the_slide():
    server = await FakeOpenAI().start()
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5)
    hc = HubClient.local(hub)
    model = OpenAIChatModel(
        server.model,
        base_url=server.base_url,
        api_key="k",
        stream=True,
        retry=RetryPolicy(attempts=2, base_delay=0),
    )
    try:
        bob = await hc.register(Agent("bob", model, "You are terse."))
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ch = await ana.open(
            type="conversation",
            target="bob",
            knobs={"view_policy": {"name": "windowed_summary", "recent_n": 2}},
        )
        for n, (text, cached) in enumerate([("a1", 0), ("a2", 640), ("a3", 0)], start=1):
            server.stream(f"b{n}", usage=usage(800, 5, cached=cached))
            await ch.send(text)
            await until(lambda n=n: hub.wal_count(ch.channel_id) >= 3 + 2 * n)
            await bob.idle()
        app = await build_app(hc, ana, Settings(), load_history=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await until(lambda: app.ready)
            app.channel_list.select(ch.channel_id)
            view = app.projected_view
            await until(lambda: view.data is not None)
            if view.data is not None and view.data.participant_id != bob.agent_id:
                view.select_participant(bob.agent_id)
            await until(
                lambda: (
                    view.data is not None
                    and view.data.participant_id == bob.agent_id
                    and len(view.data.turns) == 3
                )
            )
            view.query_one("#pv-tabs", TabbedContent).active = "pv-tab-cost"
            await pilot.pause()
            text = plain(view.query_one("#pv-cost", CostView).content)
            rows = await hub.read_wal_seq(ch.channel_id, 1, hub.wal_count(ch.channel_id))
            render = hc.adapter_for_metadata(await hc.get_channel(ch.channel_id)).render_envelope
            seq = {render(env): s for s, env in rows}
            assert "cache hit rate 27% ▁▇▁" in text
            assert (
                f"window slid: `windowed_summary(recent_n=2)` dropped seq {seq['a1']}, {seq['b1']} from the front"
                in text
            )
            assert "(provider usage)" in text
    finally:
        await model.aclose()
        await hc.close()
        await hub.close()
        await server.stop()


async def test_the_channel_list_shows_what_a_channel_cost():
    server = await FakeOpenAI().start()
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5)
    hc = HubClient.local(hub)
    model = OpenAIChatModel(server.model, base_url=server.base_url, api_key="k")
    try:
        bob = await hc.register(Agent("bob", model, "You are terse."))
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        ch = await ana.open(type="conversation", target="bob")
        server.reply("b1", usage=usage(1_000_000, 0, cached=0))  # $0.15 at gpt-4o-mini's list price
        await ch.send("a1")
        await until(lambda: hub.wal_count(ch.channel_id) >= 5)
        await bob.idle()
        app = await build_app(hc, ana, Settings(), load_history=False)
        async with app.run_test(size=(160, 45)) as pilot:
            await until(lambda: app.ready)
            from tui.source import HubSource

            source = HubSource(hc, ana)

            def cost_shown() -> bool:  # the app prices the recorded turns by itself once it is ready
                row = app.channel_list.get_row(ch.channel_id)
                return row is not None and row.cost == "$0.15"

            await until(cost_shown, timeout=20)
            await pilot.pause()
            assert "ana, bob · $0.15" in str(app.channel_list.table.get_row(ch.channel_id)[0])
            app.channel_list.set_channels(await source.load_channels())  # a fresh read keeps the cost
            row = app.channel_list.get_row(ch.channel_id)
            assert row is not None and row.cost == "$0.15"
    finally:
        await model.aclose()
        await hc.close()
        await hub.close()
        await server.stop()

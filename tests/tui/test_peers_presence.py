"""Peers online/offline in the workbench: the hub's ``presence`` op fills ``PeerInfo.online``, and the
``agent`` observe events ``bound`` / ``unbound`` reload the peers so the list and the card follow live,
on the in-process hub and on a remote hub (``--connect``) over a real WebSocket on 127.0.0.1."""

from __future__ import annotations

import pytest
from tui_network import close, small_network, until

from ag2net import HubClient, Passport
from ag2net.server import serve_ws
from tui.app import WorkbenchApp, build_app
from tui.settings import Settings
from tui.widgets.peer_card import PeerCard

SIZE = (160, 45)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def online(app: WorkbenchApp, name: str) -> bool | None:
    peer = next((p for p in app.peers.peers if p.name == name), None)
    return None if peer is None else peer.online


def card_presence(app: WorkbenchApp) -> tuple[str, str]:
    card = app.peers.query_one(PeerCard)
    badge = card.query("#peer-presence")
    return (str(badge.first().render()) if badge else "", dict(card.field_rows)["presence"])


async def test_the_human_and_the_agents_of_the_workbench_count_as_online(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("4")
        await until(lambda: bool(app.peers.peers))
        assert {p.name: p.online for p in app.peers.peers} == {"ana": True, "planner": True, "critic": True}
        assert app.peers.select("ana")
        await pilot.pause()
        assert card_presence(app) == ("online", "online (bound to a live connection)")
        assert "3 online" in str(app.peers.query_one("#peers-count").render())


async def test_a_peer_goes_online_and_offline_live(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("4")
        await until(lambda: bool(app.peers.peers))
        zed_client = HubClient.local(network.hub)
        await zed_client.register_human(Passport(name="zed", kind="human"))
        await until(lambda: online(app, "zed") is True)
        assert app.peers.select("zed")
        await pilot.pause()
        assert card_presence(app) == ("online", "online (bound to a live connection)")
        await zed_client.close()  # the connection goes: the hub says unbound, the workbench reloads
        await until(lambda: online(app, "zed") is False)
        await until(lambda: card_presence(app)[0] == "offline")
        assert card_presence(app) == ("offline", "offline (no live connection)")
        app.peers.search("is:offline")
        await pilot.pause()
        assert [p.name for p in app.peers.shown] == ["zed"]


async def test_a_remote_workbench_follows_presence_over_a_websocket(network) -> None:
    async with serve_ws(network.hub, "127.0.0.1", 0, operator_token="op") as server:
        hc = HubClient.connect(server.url(), operator_token="op", rpc_timeout=10, identity_secrets=False)
        bo = await hc.register_human(Passport(name="bo", kind="human"))
        app = await build_app(hc, bo, Settings(), load_history=False)
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready)
            await pilot.press("4")
            await until(lambda: online(app, "bo") is True)
            other = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
            await other.register_human(Passport(name="cy", kind="human"))
            await until(lambda: online(app, "cy") is True)
            await other.close()
            await until(lambda: online(app, "cy") is False)
            assert online(app, "planner") is True and online(app, "bo") is True
        await hc.close()

"""The live feed: what the hub does arrives as the feed's messages (seen through ``run_test(message_hook=...)``),
and a hub that fails while the feed reads gives a notification, not a crash."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from textual.message import Message
from tui_network import close, small_network, until

from ag2net.envelope import EV_TEXT
from tui.app import WorkbenchApp, build_app
from tui.feed import (
    ChannelChanged,
    ChannelsLoaded,
    ConnectionChanged,
    FeedBatch,
    HistoryBatch,
    PeersLoaded,
    Ready,
)
from tui.models import ChannelRow, TailItem
from tui.settings import Settings
from tui.source import HubSource

SIZE = (160, 45)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def of(seen: list[Message], kind: type[Message]) -> list[Any]:
    return [m for m in seen if isinstance(m, kind)]


async def test_startup_posts_channels_then_the_first_page_then_ready(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append):
        await until(lambda: app.ready)
        feed_kinds = [type(m) for m in seen if type(m) in (ChannelsLoaded, FeedBatch, Ready)]
        assert feed_kinds[:3] == [ChannelsLoaded, FeedBatch, Ready]
        loaded = of(seen, ChannelsLoaded)[0]
        assert {r.channel_id for r in loaded.rows} == {network.conversation, network.discussion}
        first = of(seen, FeedBatch)[0]
        wal = await network.hc.read_wal(network.conversation) + await network.hc.read_wal(network.discussion)
        assert sorted(env.envelope_id for env, _seq, _label in first.items) == sorted(
            e.envelope_id for e in wal
        )
        assert first.activity == {}  # counts of loaded rows come with the channel list
        await until(lambda: bool(of(seen, PeersLoaded)))
        assert {p.name for p in of(seen, PeersLoaded)[-1].peers} >= {"planner", "critic"}


async def test_a_posted_envelope_arrives_in_a_feed_batch_once(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(lambda: app.ready)
        envelope_id = await network.human.send(network.discussion, "through the feed")

        def batches_with_it() -> list[tuple[FeedBatch, TailItem]]:
            return [
                (b, item)
                for b in of(seen, FeedBatch)
                for item in b.items
                if item[0].envelope_id == envelope_id
            ]

        await until(lambda: bool(batches_with_it()))
        await pilot.pause(0.3)
        found = batches_with_it()
        assert len(found) == 1  # posted once, not again by a later batch
        batch, (env, seq, label) = found[0]
        assert env.event_type == EV_TEXT and env.event_data == {"text": "through the feed"}
        count = await network.hc.wal_count(network.discussion)
        wal = await network.hc.read_wal_seq(network.discussion, 1, count)
        assert [s for s, e in wal if e.envelope_id == envelope_id] == [seq]
        assert label.startswith("conversation·")
        assert batch.activity[network.discussion][0] >= 1
        assert app.feed.max_seq[network.discussion] >= seq
        assert any(r.envelope.envelope_id == envelope_id for r in app.tail.visible_rows())


async def test_creating_a_channel_posts_channel_changed(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append):
        await until(lambda: app.ready)
        channel = await network.human.open(type="consulting", target="critic", intent="a question")
        await until(lambda: any(m.channel_id == channel.channel_id for m in of(seen, ChannelChanged)))
        change = next(m for m in of(seen, ChannelChanged) if m.channel_id == channel.channel_id)
        assert isinstance(change.row, ChannelRow)
        assert change.row.type == "consulting"
        assert set(change.row.participant_ids) == {network.human.agent_id, network.critic.agent_id}
        await until(lambda: channel.channel_id in app.channel_list.rows)


async def test_losing_the_connection_posts_connection_changed() -> None:
    from ag2net import Hub, HubClient, Passport, serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    port = server.port
    hc = HubClient.connect(server.url(), reconnect_initial_delay=0.02, reconnect_max_delay=0.1)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    seen: list[Message] = []
    app = await build_app(hc, ana, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append):
        await until(lambda: app.ready)
        assert not of(seen, ConnectionChanged)  # nothing to say while the link is up
        await serving.__aexit__(None, None, None)
        await until(lambda: any(m.reconnecting for m in of(seen, ConnectionChanged)), timeout=3)
        assert app.status.reconnecting
        async with serve_ws(hub, "127.0.0.1", port):
            await until(lambda: any(m.reconnected for m in of(seen, ConnectionChanged)), timeout=5)
            back = next(m for m in of(seen, ConnectionChanged) if m.reconnected)
            assert back.reconnecting is False
            await until(lambda: not app.status.reconnecting)
            # a reconnect reloads the channels
            await until(lambda: of(seen, ChannelsLoaded)[-1] is not of(seen, ChannelsLoaded)[0], timeout=5)
    await hc.close()
    await hub.close()


class _ServerDies(HubSource):
    """The real source, with the real server shut down just before one read (the read then really fails)."""

    serving: Any = None
    die_before = ""

    async def _die(self, step: str) -> None:
        if step == self.die_before and self.serving is not None:
            serving, self.serving = self.serving, None
            self.hc.link.rpc_timeout = 2.0  # type: ignore[attr-defined]  # the failing read gives up soon
            await serving.__aexit__(None, None, None)

    async def last_page(self, rows: list[ChannelRow], count: int) -> list[TailItem]:
        await self._die("last_page")
        return await super().last_page(rows, count)

    async def older_pages(
        self, rows: list[ChannelRow], loaded: dict[str, int], limit: int, page: int = 5000
    ) -> AsyncIterator[tuple[list[TailItem], int, int]]:
        await self._die("older_pages")
        async for item in super().older_pages(rows, loaded, limit, page):
            yield item


async def _dying_hub_app(step: str, **kwargs: Any) -> tuple[WorkbenchApp, Any, Any]:
    from ag2net import Hub, HubClient, Passport, serve_ws

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    await local.register_human(Passport(name="ben", kind="human"))
    serving = serve_ws(hub, "127.0.0.1", 0)
    server = await serving.__aenter__()
    # a generous rpc timeout for the reads before the dying step (a loaded machine); _die shortens it
    hc = HubClient.connect(
        server.url(), rpc_timeout=15.0, reconnect_initial_delay=0.02, reconnect_max_delay=0.1
    )
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    channel = await ana.open(type="conversation", target="ben")
    for i in range(30):
        await ana.send(channel.channel_id, f"m{i}")
    app = await build_app(hc, ana, Settings(first_page=10), **kwargs)
    source = _ServerDies(hc, ana)
    source.serving, source.die_before = serving, step
    app.source = source  # the feed is made on mount, over the source as it is then

    async def cleanup() -> None:
        await hc.close()
        await local.close()
        await hub.close()

    return app, source, cleanup


async def test_a_hub_failing_on_the_first_page_gives_a_notification_not_a_crash() -> None:
    seen: list[Message] = []
    app, _source, cleanup = await _dying_hub_app("last_page", load_history=False)
    try:
        await _first_page_fails(app, seen)
    finally:
        await cleanup()


async def _first_page_fails(app: WorkbenchApp, seen: list[Message]) -> None:
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(lambda: any(m.error for m in of(seen, ConnectionChanged)), timeout=10)
        await pilot.pause()
        failure = next(m for m in of(seen, ConnectionChanged) if m.error)
        assert failure.error.startswith("Cannot read the newest envelopes: ")
        assert failure.connected is False
        assert app.is_running and app._exception is None
        assert any(n.message == failure.error for n in app._notifications)
        assert app.status.progress == ""
        assert not app.status.connected
        assert not app.ready


async def test_a_hub_failing_while_history_loads_gives_a_notification_not_a_crash() -> None:
    seen: list[Message] = []
    app, _source, cleanup = await _dying_hub_app("older_pages", load_history=True)
    try:
        await _history_fails(app, seen)
    finally:
        await cleanup()


async def _history_fails(app: WorkbenchApp, seen: list[Message]) -> None:
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(lambda: app.ready, timeout=10)
        assert app.tail.row_count == 10  # the first page; the rest is history
        await until(lambda: any(m.error for m in of(seen, ConnectionChanged)), timeout=10)
        await pilot.pause()
        failure = next(m for m in of(seen, ConnectionChanged) if m.error)
        assert failure.error.startswith("Cannot load older envelopes: ")
        assert app.is_running and app._exception is None
        assert any(n.message == failure.error for n in app._notifications)
        assert app.status.progress == ""
        assert not of(seen, HistoryBatch)
        assert app.tail.row_count == 10  # what was shown stays


async def test_the_feed_stops_with_the_app(network) -> None:
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE):
        await until(lambda: app.ready)
        feed = app.feed
        assert feed.live
        assert any(w.group == "feed-observe" for w in app.workers)
    assert not feed.live
    assert not [t for t in feed._timers if t._task is not None]


def test_the_app_routes_the_feed_and_checks_no_widgets() -> None:
    assert not hasattr(WorkbenchApp, "_panes_alive")
    source = (ROOT / "tui" / "app.py").read_text()
    assert "_panes_alive" not in source
    for name in ("_observe", "_flush_batch", "_max_seq", "_buffer", "_rate_count"):
        assert name not in source, f"tui/app.py still owns {name}: the feed does"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, wherever the import is (top level, function, TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def test_source_imports_no_widgets_and_the_models_need_no_textual() -> None:
    for module in ("source", "models", "tail_model"):
        imported = _imports(ROOT / "tui" / f"{module}.py")
        assert not [m for m in imported if m.startswith(("tui.widgets", "tui.screens", "tui.app"))], module
    code = (
        "import sys, tui.models, tui.tail_model, tui.source; "
        "print(sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]", out.stdout

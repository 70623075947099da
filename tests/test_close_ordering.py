"""A channel reads as closed only once its closing envelope is in the WAL, and a hub that stopped between
the two writes finishes the close when it reopens (found as a flaky conformance test: a reader that saw
``is_terminal()`` could read a WAL without the close)."""

from __future__ import annotations

import json

from support import quiet

from ag2net import EV_CHANNEL_CLOSED, ChannelState, Hub, HubClient, Passport
from ag2net.store import MemoryStore, SqliteStore


class WatchingStore(MemoryStore):
    """Records, each time a channel row is written as terminal, the last event type then in its WAL."""

    def __init__(self) -> None:
        super().__init__()
        self.seen_at_close: list[str | None] = []

    async def put_channel(self, metadata: dict) -> None:
        if metadata.get("state") in ("closed", "expired"):
            wal = await self.read_wal(metadata["channel_id"])
            self.seen_at_close.append(json.loads(wal[-1])["event_type"] if wal else None)
        await super().put_channel(metadata)


async def _open_pair(hub: Hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    return hc, ana, ch


async def test_the_close_is_in_the_wal_before_the_channel_reads_closed():
    store = WatchingStore()
    hub = await Hub.open(store, **quiet())
    try:
        hc, ana, ch = await _open_pair(hub)
        seen_in_memory: list[str] = []

        class Probe:
            async def on_channel_event(self, channel_id, kind, payload):
                if kind == "closed":
                    seen_in_memory.append((await hub.read_wal(channel_id))[-1].event_type)

        hub.register_listener(Probe())
        await hub.close_channel(ch.channel_id, reason="done")
        assert store.seen_at_close == [EV_CHANNEL_CLOSED]
        assert seen_in_memory == [EV_CHANNEL_CLOSED]
        await hc.close()
    finally:
        await hub.close()


class RowWriteFails(SqliteStore):
    """A store whose terminal channel-row write fails (the process dies between the two writes)."""

    fail = True

    async def put_channel(self, metadata: dict) -> None:
        if self.fail and metadata.get("state") == "closed":
            raise OSError("disk gone")
        await super().put_channel(metadata)


async def test_reopening_finishes_a_close_whose_row_was_not_written(tmp_path):
    path = tmp_path / "hub.db"
    store = RowWriteFails(path)
    hub = await Hub.open(store, **quiet())
    hc, ana, ch = await _open_pair(hub)
    await hub.close_channel(ch.channel_id, reason="done")
    # the WAL is the truth: in memory the channel is closed, the envelope is there
    assert hub.lookup_channel(ch.channel_id).state is ChannelState.CLOSED
    assert (await hub.read_wal(ch.channel_id))[-1].event_type == EV_CHANNEL_CLOSED
    await hc.close()
    # the process dies without a clean shutdown (no snapshot): only the store's files remain
    await hub.store.close()

    again = await Hub.open(path, **quiet())
    try:
        md = await again.get_channel(ch.channel_id)
        assert (md.state, md.close_reason) == (ChannelState.CLOSED, "done")
        assert again.adapter_state(ch.channel_id) is None  # terminal channels keep no adapter state
    finally:
        await again.close()
    reread = SqliteStore(path)
    await reread.open()
    try:
        rows = {r["channel_id"]: r for r in await reread.load_channels()}
        assert rows[ch.channel_id]["state"] == "closed"  # the row was written on reopen
    finally:
        await reread.close()


class ProbingStore(MemoryStore):
    """While the close is being made durable, asks the hub what a participant may do."""

    hub: Hub | None = None
    probe: tuple[str, str] | None = None

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, bool]] = []

    async def append(self, channel_id: str, envelope_id: str, text: str) -> int:
        if self.hub is not None and self.probe and json.loads(text)["event_type"] == EV_CHANNEL_CLOSED:
            cid, sender = self.probe
            self.seen.append((self.hub.lookup_channel(cid).state.value, self.hub.can_send(cid, sender)))
        return await super().append(channel_id, envelope_id, text)


async def test_nothing_new_starts_while_a_close_is_made_durable():
    store = ProbingStore()
    hub = await Hub.open(store, **quiet())
    try:
        hc, ana, ch = await _open_pair(hub)
        store.hub, store.probe = hub, (ch.channel_id, ana.agent_id)
        assert hub.can_send(ch.channel_id, ana.agent_id)
        await hub.close_channel(ch.channel_id, reason="done")
        # during the append: not closed yet (the WAL does not hold the close), but nobody may start a turn
        assert store.seen == [("closing", False)]
        assert hub.lookup_channel(ch.channel_id).state is ChannelState.CLOSED
        await hc.close()
    finally:
        await hub.close()


class CloseAppendFails(MemoryStore):
    async def append(self, channel_id: str, envelope_id: str, text: str) -> int:
        if json.loads(text)["event_type"] == EV_CHANNEL_CLOSED:
            raise OSError("disk full")
        return await super().append(channel_id, envelope_id, text)


async def test_a_close_that_cannot_be_written_leaves_the_channel_as_it_was():
    hub = await Hub.open(CloseAppendFails(), **quiet())
    try:
        hc, ana, ch = await _open_pair(hub)
        try:
            await hub.close_channel(ch.channel_id, reason="done")
        except OSError:
            pass
        md = hub.lookup_channel(ch.channel_id)
        assert md.state is ChannelState.ACTIVE and hub.can_send(ch.channel_id, ana.agent_id)
        await hc.close()
    finally:
        await hub.close()

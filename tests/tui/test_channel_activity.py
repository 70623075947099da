"""The channel list's envelope counts and last activity: one count per envelope whatever the order in
which a channel reload and the live feed's batches reach the list, and a last activity that never moves
back (closing a channel used to put its creation time back). Also: labels unique within a set, and the
feed's ``TurnRecorded`` message."""

from __future__ import annotations

import pytest
from textual.message import Message
from tui_network import close, small_network, until

from tui.app import build_app
from tui.feed import ChannelChanged, FeedBatch, TurnRecorded
from tui.formatting import channel_label, id_legend, ids_in
from tui.models import ActivityLedger, ChannelRow, channel_labels_for
from tui.settings import Settings

SIZE = (160, 45)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def settled(network, app, pilot) -> None:
    """Every agent idle, every observed envelope in the tail, and the list's batches handled."""
    await network.planner.idle()
    await network.critic.idle()
    total = sum([await network.hc.wal_count(cid) for cid in app.source.metadata])
    await until(lambda: app.tail.row_count >= total)
    await pilot.pause(0.3)


async def test_a_channel_reload_while_envelopes_are_in_flight_counts_each_envelope_once(network) -> None:
    """What the workbench does after opening a channel (reload every channel, show the rows at once)
    while the feed still holds the newest envelopes: the list used to add them a second time."""
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await network.human.send(network.conversation, "counted once, please")
        rows = await app.source.load_channels()  # already counts the envelope the feed has not shown
        app.channel_list.set_channels(rows)
        await settled(network, app, pilot)
        for cid in (network.conversation, network.discussion):
            row = app.channel_list.get_row(cid)
            assert row is not None
            assert row.count == await network.hc.wal_count(cid)


async def test_a_channel_opened_from_the_workbench_has_its_true_count(network) -> None:
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        channel_id = await app.source.open_channel("consulting", ["critic"], {}, None, "a question")
        app.channel_list.set_channels(await app.source.load_channels())
        await settled(network, app, pilot)
        row = app.channel_list.get_row(channel_id)
        assert row is not None and row.count == await network.hc.wal_count(channel_id) > 0
        assert app.channel_list.rows[channel_id].count == row.count


async def test_closing_a_channel_does_not_move_its_last_activity_back(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(lambda: app.ready)
        network.clock.advance(90)  # 09:31:30
        await network.human.send(network.discussion, "one more thing")
        await until(
            lambda: (
                (row := app.channel_list.get_row(network.discussion)) is not None
                and row.last_activity.startswith("2026-03-01T09:31:30")
            )
        )
        network.clock.advance(30)  # 09:32:00
        await network.hc.close_channel(network.discussion, reason="done")
        await until(lambda: app.channel_list.get_row(network.discussion).state == "closed")
        await settled(network, app, pilot)
        row = app.channel_list.get_row(network.discussion)
        assert row.last_activity.startswith("2026-03-01T09:32:00")  # the close, not the creation
        assert row.count == await network.hc.wal_count(network.discussion)
        change = [m for m in seen if isinstance(m, ChannelChanged) and m.channel_id == network.discussion]
        assert change and change[-1].row.last_activity >= "2026-03-01T09:31:30"


async def test_batches_carry_seen_seqs_and_settle_once(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await until(lambda: app.ready)
        before = app.channel_list.get_row(network.discussion).count
        await network.human.send(network.discussion, "a")
        await network.human.send(network.discussion, "b")
        await settled(network, app, pilot)
        batches = [m for m in seen if isinstance(m, FeedBatch) and network.discussion in m.seen]
        assert batches
        added = sum(b.activity[network.discussion][0] for b in batches)
        final = await network.hc.wal_count(network.discussion)
        assert added == final - before
        assert max(b.seen[network.discussion][0] for b in batches) == final


async def test_a_recorded_turn_posts_turn_recorded(network) -> None:
    seen: list[Message] = []
    app = await build_app(network.hc, network.human, Settings(), load_history=False)
    async with app.run_test(size=SIZE, message_hook=seen.append):
        await until(lambda: app.ready)
        await network.human.send(network.conversation, "another step?")
        await until(lambda: any(isinstance(m, TurnRecorded) for m in seen))
        turn = next(m for m in seen if isinstance(m, TurnRecorded))
        assert (turn.channel_id, turn.agent_id) == (network.conversation, network.planner.agent_id)


def test_the_ledger_keeps_the_highest_reading() -> None:
    ledger = ActivityLedger()
    assert ledger.get("c") is None
    assert ledger.absorb("c", 5, "2026-03-01T09:30:00.000000Z") == (5, "2026-03-01T09:30:00.000000Z")
    assert ledger.advance("c", 5, "2026-03-01T09:30:01.000000Z") == (0, "2026-03-01T09:30:01.000000Z")
    assert ledger.advance("c", 8, "2026-03-01T09:30:02.000000Z") == (3, "2026-03-01T09:30:02.000000Z")
    # an older reading (a reload that raced the feed, a channel's creation time) changes nothing
    assert ledger.absorb("c", 6, "2026-03-01T09:29:00.000000Z") == (8, "2026-03-01T09:30:02.000000Z")
    assert ledger.get("c") == (8, "2026-03-01T09:30:02.000000Z")


def test_labels_are_the_naming_form_and_unique_within_a_set() -> None:
    a = "1898adaa3a090388eada329afba97d80"
    b = "1898adaa3a090388eada329afba87d80"  # the same last four digits
    assert channel_label("discussion", a) == "discussion·7d80"
    rows = [ChannelRow(a, "discussion", "active"), ChannelRow(b, "discussion", "closed")]
    labels = channel_labels_for(rows)
    assert labels == {a: "discussion·97d80", b: "discussion·87d80"}
    assert len(set(labels.values())) == 2


def test_ids_in_text_and_their_legend() -> None:
    coder, critic, stranger = "a" * 32, "b" * 32, "c" * 32
    text = f"Earlier in this channel: 4 messages from {coder}, {critic}. Also {stranger}; {coder}."
    assert ids_in([text]) == [coder, critic, stranger]
    names = {coder: "coder", critic: "critic"}
    assert id_legend([text], lambda i: names.get(i, i)) == [(coder, "coder"), (critic, "critic")]
    assert ids_in(["x" * 40, "d" * 33]) == []  # not an id: too long

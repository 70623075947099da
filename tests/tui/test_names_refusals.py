"""Names, not hex: refusals in the chat bar and screens name agents and channels; labels stay unique.

Driven through the real workbench against a real in-process hub (tests/tui/tui_network.py), and
against the real adapters' messages for the wording.
"""

from __future__ import annotations

import re

import pytest
from textual.app import App, ComposeResult
from textual.widgets import DataTable, Input
from tui_network import close, small_network, until

from ag2net.envelope import EV_TEXT, Envelope
from ag2net.filtering import FilterError, FilterSpec
from ag2net.naming import channel_labels
from tui.app import build_app
from tui.settings import Settings
from tui.widgets.envelope_tail import EnvelopeTail, _fit_label
from tui.wording import Namer, humanize

HEX = re.compile(r"[0-9a-f]{12,}")
SIZE = (160, 45)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def namer(network) -> Namer:
    return Namer(network.hc.name_for, {}, network.human.agent_id)


# ---------------------------------------------------------------- wording of real refusals


async def test_turn_refusal_of_a_real_discussion_names_the_speaker(network) -> None:
    channel = await network.critic.open(
        type="discussion", target=[network.human.agent_id, network.planner.agent_id]
    )
    allowed, reason = await network.human.can_send(channel.channel_id)
    # the hub names the channel and the participants (issue 22 item 7), not their ids
    assert not allowed and "expects critic to speak" in reason and not HEX.search(reason)
    text = humanize(reason, namer(network))
    assert text == "critic's turn — you can speak after critic"


async def test_consulting_refusals_of_a_real_channel_name_both_sides(network) -> None:
    # the critic asks the human: the critic speaks first, then only the human may answer
    channel = await network.critic.open(type="consulting", target=network.human.agent_id)
    cid = channel.channel_id
    md = await network.hc.get_channel(cid)
    label = channel_labels([(md.manifest.type, cid)])[cid]
    words = Namer(network.hc.name_for, {cid: label}, network.human.agent_id)
    _, first = await network.human.can_send(cid)
    assert humanize(first, words) == f"critic asks first in {label} — you can speak after critic's question"
    await channel.send("Is the budget final?")
    _, again = await network.hc.explain_send(cid, network.critic.agent_id)
    text = humanize(again, words)
    assert text == f"{label} waits for your reply — only you can speak now, not critic"
    assert not HEX.search(text)


async def test_closed_channel_refusal_says_its_label(network) -> None:
    await network.hc.close_channel(network.discussion, reason="done")
    _, reason = await network.human.can_send(network.discussion)
    md = await network.hc.get_channel(network.discussion)
    label = channel_labels([(md.manifest.type, network.discussion)])[network.discussion]
    text = humanize(reason, Namer(network.hc.name_for, {network.discussion: label}, network.human.agent_id))
    assert text.startswith(f"{label} is closed")
    assert not HEX.search(text)


def test_unknown_text_keeps_its_words_and_names_known_ids() -> None:
    known, unknown = "a" * 32, "f" * 32
    words = Namer(lambda i: {known: "critic"}.get(i, i))
    assert humanize(f"inbox of '{known}' is full; {unknown} waits", words) == (
        f"inbox of critic is full; {unknown} waits"
    )


# ---------------------------------------------------------------- the chat bar


async def test_chat_bar_says_whose_turn_it_is_by_name_and_wraps(network) -> None:
    channel = await network.critic.open(
        type="discussion", target=[network.human.agent_id, network.planner.agent_id]
    )
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=(80, 24)) as pilot:
        await until(lambda: app.ready and channel.channel_id in app.source.metadata)
        app.channel_list.select(channel.channel_id)
        await pilot.pause()
        await pilot.press("i", *"my turn?", "enter")
        await until(lambda: bool(app.chat.reason))
        assert app.chat.reason == "critic's turn — you can speak after critic"
        assert app.chat.input.value == "my turn?"
        # a long refusal wraps under the line instead of being cut at the edge
        long = "the hub refused because " + "of a reason that takes many words " * 4
        app.chat.show_reason(long)
        await pilot.pause()
        reason = app.chat.query_one("#chat-reason")
        assert reason.size.height >= 2
        assert reason.region.right <= app.size.width


# ---------------------------------------------------------------- labels


async def test_channel_list_labels_are_unique_and_accepted_by_its_filter(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.pause()
        labels = {cid: app.channel_list.label_of(cid) for cid in app.channel_list.rows}
        assert len(set(labels.values())) == len(labels)
        wanted = labels[network.discussion]
        flt = app.channel_list.query_one("#channels-filter", Input)
        flt.value = wanted.replace("·", ".")  # the ASCII form a keyboard types
        await pilot.pause()
        assert app.channel_list.shown_ids() == [network.discussion]


def _column(tail: EnvelopeTail, width: int) -> list[str]:
    cols = tail._columns(width)
    start = cols.seq + 1 + cols.time + 1
    return [
        tail.render_line(y).text[start : start + cols.channel].strip()
        for y in range(1, tail.visible_count + 1)
    ]


class TailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EnvelopeTail()


async def test_all_channels_tail_column_stays_distinguishable_when_narrow() -> None:
    # five consulting channels opened together: their ids share all but the random tail
    ids = [
        f"18ecd5ae{n:04x}0000000000000000{tail}"
        for n, tail in enumerate(["cb2c", "1b2c", "cb2c", "77aa", "0001"])
    ]
    ids[2] = ids[2][:-5] + "9cb2c"  # two share the last four digits
    app = TailApp()
    async with app.run_test(size=(70, 12)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.append_many(
            (
                Envelope(cid, "a" * 32, None, EV_TEXT, {"text": "q"}, envelope_id=f"{i:032x}"),
                1,
                f"consulting·{cid[-4:]}",
            )
            for i, cid in enumerate(ids)
        )
        await pilot.pause()
        shown = _column(tail, tail.scrollable_content_region.width)
        assert tail._columns(tail.scrollable_content_region.width).channel <= 12
        assert len(set(shown)) == len(ids), shown
        assert not any(text.endswith("·…") for text in shown)
        assert all(
            text.endswith(tail.model.labels[cid].rpartition("·")[2])
            for text, cid in zip(shown, ids, strict=False)
        )


def test_fit_label_shortens_the_type_not_the_tail() -> None:
    assert _fit_label("consulting·cb2c", 12) == "consul…·cb2c"
    assert _fit_label("consulting·cb2c", 20) == "consulting·cb2c     "


async def test_tail_filter_and_goto_take_labels() -> None:
    a, b = "1" * 28 + "7d80", "2" * 28 + "cb2c"
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.append_many(
            (
                Envelope(cid, "a" * 32, None, EV_TEXT, {"text": str(i)}, envelope_id=f"{i:032x}"),
                i // 2 + 1,
                label,
            )
            for i, (cid, label) in enumerate([(a, "discussion·7d80"), (b, "consulting·cb2c")] * 5)
        )
        await pilot.pause()
        tail.set_filter("channel:discussion.7d80")
        assert {r.envelope.channel_id for r in tail.visible_rows()} == {a}
        tail.set_filter("-ch:7d80")
        assert {r.envelope.channel_id for r in tail.visible_rows()} == {b}
        with pytest.raises(FilterError, match="matches no channel"):
            tail.set_filter("channel:workflow·ffff")
        tail.set_filter(None)
        assert tail.goto_text("consulting·cb2c 2") == ""
        assert tail.cursor_row is not None and tail.cursor_row.envelope.channel_id == b
        assert tail.cursor_row.seq == 2
        assert "not among the rows shown" in tail.goto_text("discussion·7d80#99")
        assert "matches no channel" in tail.goto_text("nothing·0000")


def test_filter_spec_resolves_a_label_among_channels() -> None:
    a = "1" * 28 + "7d80"
    spec = FilterSpec.parse("channel:discussion:7d80", [("discussion", a), ("consulting", "2" * 32)])
    assert spec.matches(Envelope(a, "x" * 32, None, EV_TEXT, {}), str)
    assert not spec.matches(Envelope("2" * 32, "x" * 32, None, EV_TEXT, {}), str)


async def test_channels_pane_filter_says_what_it_filters_and_counts(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("1")
        await pilot.press("ctrl+f")
        flt = app.channel_list.query_one("#channels-filter", Input)
        assert flt.has_focus
        await pilot.press(*"zzz")
        await pilot.pause()
        assert app.channel_list.filter_status.startswith("no channel matches 'zzz'")
        table = app.channel_list.query_one(DataTable)
        assert "0 of 2 channels" in str(table.get_row_at(0)[0])
        flt.value = "critic"
        await pilot.pause()
        assert app.channel_list.filter_status == "filtered by 'critic': 1 of 2 channels"
        assert "1 of 2 channels" in str(table.get_row_at(0)[0])
        flt.value = ""
        await pilot.pause()
        assert app.channel_list.filter_status == ""
        assert "2 channels" in str(table.get_row_at(0)[0])

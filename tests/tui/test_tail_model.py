"""TailModel without a widget or a pilot: rows, the limit, the channel index, filter and search, lines."""

from __future__ import annotations

import pytest

from ag2net.envelope import Envelope
from ag2net.filtering import FilterError
from tui.tail_model import TailModel

NAMES = {"a" * 32: "planner", "b" * 32: "critic", "c" * 32: "ana"}
SENDERS = list(NAMES)
TYPES = ["ag2.msg.text", "ag2.packet", "ag2.channel.opened", "myapp.review"]


def make(i: int, channel: str = "c1") -> Envelope:
    etype = TYPES[i % len(TYPES)]
    data = {"text": f"message {i}"} if etype == "ag2.msg.text" else {"n": i}
    return Envelope(
        channel,
        SENDERS[i % 3],
        None if i % 2 else ["b" * 32],
        etype,
        data,
        envelope_id=f"{i:032x}",
        created_at=f"2026-01-01T10:00:{i % 60:02d}.{i:06d}Z",
    )


def items(start: int, count: int, channel: str = "c1") -> list[tuple[Envelope, int, str]]:
    return [(make(i, channel), i + 1, f"label-{channel}") for i in range(start, start + count)]


def model(limit: int = 1000) -> TailModel:
    return TailModel(lambda agent_id: NAMES.get(agent_id, agent_id), limit=limit)


def test_append_keeps_order_and_reports_rows_shown() -> None:
    m = model()
    assert m.append([]) == 0
    assert m.append(items(0, 5)) == 5
    assert [r.seq for r in m.visible_rows()] == [1, 2, 3, 4, 5]
    assert m.visible_rows()[0].channel == "label-c1"
    assert (m.row_count, m.visible_count, m.base) == (5, 5, 0)
    assert m.row_at(4).envelope.envelope_id == f"{4:032x}"


def test_limit_drops_the_oldest_and_absolute_indexes_stay() -> None:
    m = model(limit=10)
    m.append(items(0, 8))
    sixth = m.index_at(5)
    m.append(items(8, 7))
    assert m.row_count == 10
    assert m.base == 5
    assert [r.seq for r in m.visible_rows()] == list(range(6, 16))
    assert m.row(sixth).seq == 6  # the same absolute index still names the same row
    assert m.index_at(0) == sixth


def test_prepend_never_pushes_newer_rows_out() -> None:
    m = model(limit=6)
    m.append(items(10, 4))
    kept, shown = m.prepend(items(0, 10))
    assert (kept, shown) == (2, 2)  # only the newest two of the older rows fit
    assert [r.seq for r in m.visible_rows()] == [9, 10, 11, 12, 13, 14]
    assert m.prepend(items(0, 3)) == (0, 0)
    assert m.base == -2


def test_the_channel_index_holds_only_that_channels_rows_and_grows_with_appends() -> None:
    m = model()
    m.append(items(0, 4, "c1") + items(4, 3, "c2") + items(7, 2, "c1"))
    assert m.set_channel_filter("c2")
    assert not m.set_channel_filter("c2")
    assert [r.envelope.channel_id for r in m.visible_rows()] == ["c2"] * 3
    assert m.visible_count == 3 and m.row_count == 9
    assert m.append(items(9, 2, "c2") + items(11, 1, "c1")) == 2
    assert [r.seq for r in m.visible_rows()] == [5, 6, 7, 10, 11]
    assert [r.seq for r in m.recent_rows("c1", 3)] == [12, 9, 8]  # filters ignored, newest first
    m.set_channel_filter(None)
    assert m.view is None and m.visible_count == 12


def test_the_index_drops_trimmed_rows() -> None:
    m = model(limit=5)
    m.set_channel_filter("c1")
    m.append(items(0, 3, "c1") + items(3, 3, "c2"))
    assert [r.seq for r in m.visible_rows()] == [2, 3]  # row 1 was trimmed from store and index
    assert m.view == [1, 2]


def test_filter_and_search_match_like_the_widget_shows() -> None:
    m = model()
    m.append(items(0, 12))
    m.set_filter("type:ag2.msg.text")
    assert [r.seq for r in m.visible_rows()] == [1, 5, 9]
    m.set_filter("sender:critic -type:ag2.msg")
    assert all(r.envelope.sender_id == "b" * 32 for r in m.visible_rows())
    assert all(r.envelope.event_type != "ag2.msg.text" for r in m.visible_rows())
    m.set_filter(None)
    m.set_search("text:message")
    assert [m.is_match(r) for r in m.visible_rows()].count(True) == 3
    first = m.find_match(0, forward=True, inclusive=True)
    assert first == 0
    assert m.step_match(first, forward=True) == 4
    assert m.step_match(8, forward=True) == 0  # wraps to the first match
    assert m.step_match(0, forward=False) == 8  # and backwards to the last
    m.set_search(None)
    assert m.step_match(0, forward=True) is None
    assert not any(m.is_match(r) for r in m.visible_rows())
    with pytest.raises(FilterError):
        m.set_filter("type:")


def test_lines_seq_and_envelope_lookups() -> None:
    m = model()
    m.append(items(0, 6, "c1") + items(6, 6, "c2"))
    m.set_channel_filter("c2")
    assert m.line_of_seq(9) == 2
    assert m.line_of_seq(1) is None  # c1's seq 1 is not shown
    assert m.line_of_envelope(f"{11:032x}") == 5
    assert m.find_envelope(f"{0:032x}") is not None  # held, though filtered out
    # a hidden row's nearest shown line is the one before it (else the first)
    assert m.line_of(m.base + 3) == 0
    assert m.line_of(m.index_at(3)) == 3


def test_bounds() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        TailModel(limit=0)
    m = model(limit=3)
    assert m.line_of(0) is None
    assert m.step_match(None, forward=True) is None
    m.append(items(0, 3))
    assert m.line_of(-50) == 0 and m.line_of(99) == 2
    m.clear()
    assert (m.row_count, m.visible_count, m.base) == (0, 0, 3)
    m.append(items(3, 1))
    assert m.index_at(0) == 3


def test_a_window_pages_older_past_the_limit_and_detaches_with_exact_bounds() -> None:
    """Issue 22 item 3: the limit bounds the rows held, never the reach. A page of older rows with
    ``evict`` keeps every row of the page and drops the newest past the limit; each channel's bounds
    (its held seqs, how many are older, where the newer ones start) follow, so the next page is exact."""
    m = model(limit=10)
    sizes = {"c1": 30, "c2": 30}
    # the newest rows of two channels, interleaved in admission order (ids grow)
    live = [(make(100 + i, "c1" if i % 2 else "c2"), 21 + i // 2, "x") for i in range(20)]
    m.append(live)
    assert m.row_count == 10 and not m.detached
    assert (m.low["c1"], m.high["c1"], m.low["c2"], m.high["c2"]) == (26, 30, 26, 30)
    assert m.older_of("c1", 30) == 25 and m.older_total(sizes) == 50  # the trim moved the bounds
    older = [(make(50 + i, "c1" if i % 2 else "c2"), 23 + i // 2, "x") for i in range(6)]
    kept, shown = m.prepend(older, evict=True)
    assert (kept, shown) == (6, 6) and m.row_count == 10 and m.detached
    assert (m.low["c1"], m.high["c1"]) == (23, 27) and (m.low["c2"], m.high["c2"]) == (23, 27)
    assert m.newer_from("c1", 30) == 28 and m.newer_from("c2", 30) == 28
    assert m.newer_total(sizes) == 3 + 3
    # without evict (the background history) newer rows are never pushed out
    assert m.prepend([(make(10, "c1"), 1, "x")]) == (0, 0)
    # narrowing to one channel keeps its run, its bounds and its cursor's rows
    before = [i for i in range(m.base, m.base + m.row_count) if m.row(i).envelope.channel_id == "c1"]
    moved = m.narrow("c1", 30)
    assert m.scope == "c1" and [r.seq for r in m.rows] == [23, 24, 25, 26, 27]
    assert [m.row(moved[i]).seq for i in before] == [23, 24, 25, 26, 27]
    assert m.held_of("c1") == 5 and m.older_total(sizes) == 22 and m.detached
    m.reset("c1", detached=True, older={"c1": 0}, newer={"c1": 1})
    m.append(items(0, 4, "c1"))
    m.settle(sizes)
    assert m.detached and m.older_total(sizes) == 0 and m.newer_from("c1", 30) == 5

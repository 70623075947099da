"""EnvelopeTail behaviour: batching, limit, filters, search, cursor, follow mode and its messages."""

from __future__ import annotations

from textual import events
from textual.app import App, ComposeResult

from ag2net.envelope import Envelope
from tui.widgets.envelope_tail import EnvelopeTail

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


class TailApp(App[None]):
    def __init__(self, limit: int = 1000) -> None:
        super().__init__()
        self.limit = limit
        self.messages: list[object] = []

    def compose(self) -> ComposeResult:
        yield EnvelopeTail(lambda agent_id: NAMES.get(agent_id, agent_id), limit=self.limit)

    def on_envelope_tail_selected(self, message: EnvelopeTail.Selected) -> None:
        self.messages.append(message)

    def on_envelope_tail_follow_changed(self, message: EnvelopeTail.FollowChanged) -> None:
        self.messages.append(message)


def fill(tail: EnvelopeTail, count: int, start: int = 0, channel: str = "c1") -> None:
    tail.append_many((make(i, channel), i + 1, channel) for i in range(start, start + count))


async def test_append_many_and_limit_drops_oldest() -> None:
    app = TailApp(limit=50)
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        fill(tail, 120)
        await pilot.pause()
        assert tail.row_count == 50
        rows = tail.visible_rows()
        assert [r.seq for r in rows[:2]] == [71, 72]
        assert rows[-1].seq == 120
        assert tail.following
        assert tail.cursor_row is not None and tail.cursor_row.seq == 120
        assert tail.virtual_size.height == 51  # header line + rows
        assert tail.scroll_y == tail.max_scroll_y


async def test_follow_pauses_on_scroll_up_and_resumes_on_end() -> None:
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.focus()
        fill(tail, 200)
        await pilot.pause()
        assert tail.following
        await pilot._post_mouse_events([events.MouseScrollUp], tail, offset=(10, 5))
        assert not tail.following
        assert tail.scroll_y < tail.max_scroll_y
        paused_at = tail.scroll_y
        fill(tail, 7, start=200)
        await pilot.pause()
        assert tail.pending_count == 7
        assert tail.scroll_y == paused_at  # rows arrived but the view did not move
        assert "7 new" in str(tail.border_subtitle)
        await pilot.press("end")
        assert tail.following
        assert tail.pending_count == 0
        assert tail.scroll_y == tail.max_scroll_y
        assert tail.cursor_row is not None and tail.cursor_row.seq == 207
        follow_messages = [m for m in app.messages if isinstance(m, EnvelopeTail.FollowChanged)]
        assert [m.following for m in follow_messages] == [False, True]


async def test_cursor_keys_pause_and_scrolling_to_bottom_resumes() -> None:
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.focus()
        fill(tail, 100)
        await pilot.pause()
        await pilot.press("up", "up")
        assert not tail.following
        assert tail.cursor_row is not None and tail.cursor_row.seq == 98
        await pilot.press("home")
        assert tail.cursor_row is not None and tail.cursor_row.seq == 1
        assert tail.scroll_y == 0
        await pilot.press("pagedown")
        assert tail.cursor_row is not None and tail.cursor_row.seq > 10
        await pilot.press("down", "down")
        assert not tail.following
        # moving onto the last row resumes following
        await pilot.press("G")
        assert tail.following
        await pilot.press("up", "down")
        assert tail.following


async def test_enter_posts_selected_with_the_envelope() -> None:
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.focus()
        fill(tail, 10)
        await pilot.press("up", "enter")
        await pilot.pause()
        selected = [m for m in app.messages if isinstance(m, EnvelopeTail.Selected)]
        assert len(selected) == 1
        assert selected[0].seq == 9
        assert selected[0].envelope.envelope_id == f"{8:032x}"


async def test_channel_filter_and_query_filter() -> None:
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        fill(tail, 30, channel="c1")
        fill(tail, 20, channel="c2")
        tail.set_channel_filter("c2")
        await pilot.pause()
        assert tail.visible_count == 20
        assert {r.envelope.channel_id for r in tail.visible_rows()} == {"c2"}
        assert not tail.show_channel
        tail.set_filter("type:ag2.msg sender:planner")
        rows = tail.visible_rows()
        assert rows and all(r.envelope.event_type == "ag2.msg.text" for r in rows)
        assert all(NAMES[r.envelope.sender_id] == "planner" for r in rows)
        # rows arriving later are filtered on the way in
        fill(tail, 24, start=100, channel="c2")
        fill(tail, 24, start=200, channel="c1")
        assert all(r.envelope.channel_id == "c2" for r in tail.visible_rows())
        assert all(r.envelope.event_type == "ag2.msg.text" for r in tail.visible_rows())
        tail.set_filter(None)
        tail.set_channel_filter(None)
        assert tail.visible_count == 98
        tail.set_filter("-family:channel to:all")
        rows = tail.visible_rows()
        assert rows and all(r.envelope.audience is None for r in rows)
        assert all(not r.envelope.event_type.startswith("ag2.channel.") for r in rows)


async def test_search_next_prev_wraps_and_goto_seq() -> None:
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.focus()
        fill(tail, 40)
        assert tail.set_search("text:'message 3'")  # matches message 3, 30..39 (EV_TEXT every 4th: 32, 36)
        matches = [
            r.seq
            for r in tail.visible_rows()
            if r.envelope.event_data.get("text", "").startswith("message 3")
        ]
        assert matches == [33, 37]
        # the search starts from the cursor (last row) and wraps to the first match
        assert tail.cursor_row is not None and tail.cursor_row.seq == 33
        await pilot.press("n")
        assert tail.cursor_row.seq == 37
        await pilot.press("n")
        assert tail.cursor_row.seq == 33
        await pilot.press("N")
        assert tail.cursor_row.seq == 37
        assert not tail.following
        assert tail.goto_seq(5)
        assert tail.cursor_row.seq == 5
        assert not tail.goto_seq(999)
        assert not tail.set_search("text:nothing-like-this")


async def test_rendering_shows_names_types_and_preview() -> None:
    app = TailApp()
    async with app.run_test(size=(140, 12)) as pilot:
        tail = app.query_one(EnvelopeTail)
        fill(tail, 8)
        await pilot.pause()
        lines = [tail.render_line(y).text for y in range(tail.size.height)]
        assert lines[0].split()[:3] == ["seq", "time", "channel"]
        last = next(line for line in lines if line.strip().startswith("8 "))
        assert "critic" in last and "b" * 32 not in last  # sender name resolved through name_for
        assert "myapp.review" in last
        text_row = next(line for line in lines if "message 4" in line)
        assert " msg.text " in text_row and "ag2.msg" not in text_row and "10:00:04.000 " in text_row
        assert "critic" in text_row  # audience [critic]
        opened = next(line for line in lines if "channel.opened" in line)
        assert "ag2.channel" not in opened


def test_event_types_drop_the_ag2_prefix_and_cut_from_the_left() -> None:
    from tui.formatting import short_type
    from tui.widgets.envelope_tail import _fit_left, _fit_type

    assert short_type("ag2.channel.invite.ack") == "channel.invite.ack"
    assert short_type("ag2.packet") == "packet"
    assert short_type("myapp.review") == "myapp.review"
    assert _fit_left("channel.invite.ack", 18) == "channel.invite.ack"
    assert _fit_left("channel.invite.reject", 18) == "…nel.invite.reject"
    assert _fit_left("msg.text", 10) == "msg.text  "
    assert _fit_type("ag2.channel.invite.ack", 14) == "…invite.ack   "
    assert _fit_type("ag2.channel.opened", 14) == "channel.opened"
    # custom: cut in the middle, keeping the namespace (issue 22: ``myapp.…request``, not ``…pp.review_request``)
    assert _fit_type("demo.review_request", 14) == "demo.…_request"
    assert _fit_type("myapp.review_request", 14) == "myapp.…request"
    assert _fit_type("averyverylongnamespace.x_y_z", 10) == "…ace.x_y_z"  # no room for the namespace

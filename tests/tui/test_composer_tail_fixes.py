"""Composer (every channel, closed marked, EV_* names, ag2. typos, the draft-save race), the open-channel
wait, and the tail's fixes (paused counter, duplicate rows, match k of n). Real hub, real app, pilot."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input, Label, Select, SelectionList
from tui_network import close, small_network, until

from ag2net import Passport
from ag2net.envelope import EV_CHANNEL_INVITE_ACK, EV_TEXT, Envelope
from tui.app import build_app
from tui.screens.composer import EnvelopeComposer, reserved_type_warning, resolve_event_type, write_draft
from tui.screens.open_channel import OpenChannelForm
from tui.settings import Settings
from tui.tail_model import TailModel
from tui.widgets.envelope_tail import EnvelopeTail

SIZE = (160, 45)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def message(screen, name: str) -> str:
    label = screen.query_one(f"#composer-{name}", Label)
    return "" if label.has_class("-empty") else str(label.render())


# ---------------------------------------------------------------- composer


async def test_composer_lists_every_channel_whatever_the_filter_and_marks_closed(network, tmp_path) -> None:
    await network.hc.close_channel(network.discussion, reason="done")
    settings = Settings(database=tmp_path / "wb.db")
    settings.source = tmp_path / "workbench.toml"
    app = await build_app(network.hc, network.human, settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.query_one("#channels-filter", Input).value = "planner"  # hides the discussion
        await pilot.pause()
        assert app.channel_list.shown_ids() == [network.conversation]
        assert set(app.channel_list.all_ids()) == {network.conversation, network.discussion}
        app.tail.focus()
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        picker = composer.query_one("#composer-channel", Select)
        options = {str(value): str(prompt) for prompt, value in picker._options if value is not Select.NULL}
        assert set(options) == {network.conversation, network.discussion}
        assert options[network.discussion].endswith("· closed")
        assert "closed" not in options[network.conversation]
        picker.value = network.discussion
        await pilot.pause()
        assert "is closed: the hub will refuse this post" in message(composer, "channel-msg")


async def test_composer_resolves_ev_names_and_warns_on_ag2_typos(network, tmp_path) -> None:
    settings = Settings(database=tmp_path / "wb.db")
    settings.source = tmp_path / "workbench.toml"
    app = await build_app(network.hc, network.human, settings)
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        kind = composer.query_one("#composer-type", Input)
        kind.value = "ag2.msg.txt"
        await pilot.pause()
        assert "did you mean 'ag2.msg.text'" in message(composer, "type-warning")
        kind.value = "EV_TEXT"
        composer.query_one("#composer-data").load_text('{"text": "typed as EV_TEXT"}')  # type: ignore[attr-defined]
        await pilot.pause()
        assert message(composer, "type-warning") == "EV_TEXT is ag2.msg.text"
        envelope = composer.validate_form()
        assert envelope is not None and envelope.event_type == EV_TEXT
        await pilot.press("ctrl+s")
        await until(lambda: not isinstance(app.screen, EnvelopeComposer))
        wal = await network.hc.read_wal(network.conversation)
        assert [e.event_type for e in wal if e.event_data == {"text": "typed as EV_TEXT"}] == [EV_TEXT]


def test_event_type_helpers() -> None:
    assert resolve_event_type(" ev_channel_invite_ack ") == (
        EV_CHANNEL_INVITE_ACK,
        f"ev_channel_invite_ack is {EV_CHANNEL_INVITE_ACK}",
    )
    assert resolve_event_type("myapp.x") == ("myapp.x", "")
    assert "did you mean 'ag2.channel.opened'" in reserved_type_warning("ag2.channel.openned")
    assert "own namespace" in reserved_type_warning("ag2.zzzzzzzzzzzz")
    assert reserved_type_warning("ag2.packet") == "" and reserved_type_warning("myapp.packet") == ""


def test_concurrent_draft_saves_never_lose_the_file(tmp_path: Path) -> None:
    path = tmp_path / "config" / "composer-draft.json"
    errors: list[BaseException] = []
    start = threading.Barrier(16)

    def save(n: int) -> None:
        start.wait()
        for i in range(40):
            try:
                write_draft(path, {"event_type": f"myapp.t{n}", "i": i})
            except BaseException as exc:  # what the app turned into "Could not save the draft"
                errors.append(exc)

    threads = [threading.Thread(target=save, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads(path.read_text())["i"] == 39
    assert [p.name for p in path.parent.iterdir()] == ["composer-draft.json"]  # no temp file left


async def test_composer_typing_fast_saves_the_draft_without_a_warning(network, tmp_path) -> None:
    settings = Settings(database=tmp_path / "wb.db")
    settings.source = tmp_path / "workbench.toml"
    app = await build_app(network.hc, network.human, settings)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.pause()
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        app.screen.query_one("#composer-type", Input).value = ""
        await pilot.press(*"myapp.quick_brown_fox_jumps_over_the_lazy_dog")
        wanted = "myapp.quick_brown_fox_jumps_over_the_lazy_dog"

        def saved() -> bool:
            try:
                return json.loads(settings.drafts_path.read_text())["event_type"] == wanted
            except (OSError, ValueError):
                return False

        await until(saved)
        await pilot.pause(0.2)
        assert not [n for n in app._notifications if "Could not save the draft" in n.message]


# ---------------------------------------------------------------- open channel: waiting for acks


async def test_open_channel_shows_progress_while_invitees_have_not_acked(network) -> None:
    bob = await network.hc.register_human(Passport(name="bob", kind="human"), auto_ack_invites=False)
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready and any(p.name == "bob" for p in app.peers.peers))
        await pilot.press("ctrl+o")
        await until(lambda: isinstance(app.screen, OpenChannelForm))
        form = app.screen
        assert isinstance(form, OpenChannelForm)
        form.query_one("#open-type", Select).value = "conversation"
        form.query_one("#open-targets", SelectionList).select(bob.agent_id)
        await pilot.press("ctrl+s")
        await until(lambda: "waiting for them to accept" in form.waiting_text)
        assert "Invited bob" in form.waiting_text and "of 5 s" in form.waiting_text
        first = form.waiting_text
        await until(lambda: form.waiting_text != first and form.waiting_text != "")  # it moves
        # the hub gives up after its 5 s ack timeout: the spinner stops and the refusal names the channel
        await until(lambda: bool(str(form.query_one("#open-error").render()).strip()), timeout=10)
        assert form.waiting_text == ""
        error = str(form.query_one("#open-error").render())
        assert "did not open: not every invitee accepted the invitation in time" in error
        assert "conversation·" in error or "channel " in error


# ---------------------------------------------------------------- the tail


def env(i: int, channel: str = "c" * 32) -> Envelope:
    return Envelope(
        channel,
        "a" * 32,
        None,
        EV_TEXT,
        {"text": f"m{i}"},
        envelope_id=f"{i:032x}",
        created_at=f"2026-01-01T10:00:{i % 60:02d}.000000Z",
    )


class TailApp(App[None]):
    def compose(self) -> ComposeResult:
        yield EnvelopeTail()


async def test_paused_counter_counts_rows_below_the_screen_only_and_resets_on_channel_switch() -> None:
    one, two = "1" * 32, "2" * 32
    app = TailApp()
    async with app.run_test(size=(120, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.focus()
        tail.append_many((env(i, one), i + 1, "conversation·1111") for i in range(5))
        await pilot.pause()
        await pilot.press("up")
        assert not tail.following
        # three rows arrive and the screen has room: they are on screen, so not "new" below it
        tail.append_many((env(i, one), i + 1, "conversation·1111") for i in range(5, 8))
        await pilot.pause()
        assert tail.pending_count == 0
        # enough to run past the bottom: only those below the last line count
        tail.append_many((env(i, one), i + 1, "conversation·1111") for i in range(8, 40))
        await pilot.pause()
        below = tail.visible_count - (int(tail.scroll_y) + tail.scrollable_content_region.height - 1)
        assert tail.pending_count == below > 0
        assert f"paused · {below:,} new" in tail.summary
        # another channel's view: nothing new there yet
        tail.set_channel_filter(two)
        await pilot.pause()
        assert tail.pending_count == 0
        tail.append_many((env(i, one), i + 1, "conversation·1111") for i in range(40, 60))
        await pilot.pause()
        assert tail.pending_count == 0  # rows of a channel not shown never count
        tail.set_channel_filter(None)
        await pilot.pause()
        assert tail.pending_count == 0  # switching back does not count the rows held before


def test_tail_model_holds_an_envelope_once() -> None:
    model = TailModel()
    assert model.append([(env(i), i + 1, "conversation·cccc") for i in range(5, 10)]) == 5
    kept, _shown = model.prepend([(env(i), i + 1, "conversation·cccc") for i in range(0, 7)])
    assert kept == 5  # 5 and 6 were held already
    assert model.append([(env(9), 10, "conversation·cccc"), (env(10), 11, "conversation·cccc")]) == 1
    assert [r.seq for r in model.rows] == list(range(1, 12))
    assert model.duplicates == 3
    small = TailModel(limit=3)
    small.append([(env(i), i, "x") for i in range(5)])
    small.append([(env(0), 0, "x")])  # dropped past the limit: held again when it comes back
    assert [r.envelope.envelope_id for r in small.rows][-1] == env(0).envelope_id


async def test_no_duplicate_row_when_traffic_arrives_while_the_history_is_read(network) -> None:
    """The live feed starts at the hub position read before the channel list. Under live traffic an
    envelope posted in that window, followed by a first page's worth of newer ones elsewhere, is in
    its channel's history (the channel is not in the first page) and in the live feed."""
    app = await build_app(network.hc, network.human, Settings(first_page=10))
    load_channels = app.source.load_channels
    posted: list[str] = []

    async def traffic_meanwhile():
        if not posted:
            posted.append(await network.human.send(network.conversation, "sent while loading"))
            for i in range(12):  # newer than it: the first page (10 rows) holds none of its channel
                await network.human.send(network.discussion, f"filler {i}")
        return await load_channels()

    app.source.load_channels = traffic_meanwhile  # type: ignore[method-assign]
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await network.critic.idle()
        total = sum([await network.hc.wal_count(c) for c in (network.conversation, network.discussion)])
        await until(lambda: app.tail.row_count >= total)
        await pilot.pause(0.3)
        rows = [r for r in app.tail.visible_rows() if r.envelope.envelope_id == posted[0]]
        assert len(rows) == 1
        assert app.tail.row_count == total
        ids = [r.envelope.envelope_id for r in app.tail.visible_rows()]
        assert len(ids) == len(set(ids))
        assert app.tail.model.duplicates >= 1  # the race happened and the copy was dropped


async def test_search_says_match_k_of_n_and_the_header_counts_rows() -> None:
    app = TailApp()
    async with app.run_test(size=(140, 20)) as pilot:
        tail = app.query_one(EnvelopeTail)
        tail.append_many((env(i), i + 1, "conversation·cccc") for i in range(30))
        await pilot.pause()
        assert tail.summary == "30 rows"
        tail.set_filter("-text:m0")  # hides m0 only
        await pilot.pause()
        assert tail.summary == "29 of 30 rows"
        assert tail.set_search("text:m2")  # m2, m20…m29: 11 matches
        await pilot.pause()
        k, n = tail.match_position
        assert n == 11 and k >= 1
        assert f"match {k} of 11" in tail.summary
        assert f"match {k} of 11" in tail.render_line(0).text
        tail.search_next()
        assert tail.match_position == ((k % 11) + 1, 11)
        tail.append_many([(env(31), 32, "conversation·cccc"), (env(32), 33, "conversation·cccc")])
        tail.append_many([(env(200), 34, "conversation·cccc")])  # m200 matches
        await pilot.pause()
        assert tail.match_position[1] == 12
        assert not tail.set_search("text:nothing-like-this")
        assert "no match" in tail.summary

"""The composer's dry run (issue 12, item 5) and its issue-11 fixes, through the real workbench on a real hub.

- The dry-run panel shows what sending the draft would do, before sending: a refusal in the words the post
  itself gets (agents and channels named), or the recipients in order, each participant's next history
  and the state after; debounced, never per keystroke; against an in-process hub and over a WebSocket.
- The event type's text is selected on focus (typing replaces the template's type).
- At 80x24 no label of the form runs past the form's edge (long ones wrap).
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import Input, Label, Select, TextArea
from tui_network import close, small_network, until

from ag2net import Hub, HubClient, Passport, serve_ws
from ag2net.debug import DryRun
from ag2net.envelope import EV_CHANNEL_CLOSED, EV_TEXT, Envelope
from ag2net.errors import NetworkError
from tui.app import WorkbenchApp, build_app
from tui.screens.composer import DRY_RUN_DELAY, ChannelChoice, EnvelopeComposer
from tui.settings import Settings
from tui.wording import namer_for

SIZE = (160, 45)
HEX = re.compile(r"[0-9a-f]{12,}")


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


async def open_composer(app: WorkbenchApp, pilot: Any, channel_id: str) -> EnvelopeComposer:
    await until(lambda: app.ready and channel_id in app.source.metadata)
    app.settings.source = None
    app.channel_list.select(channel_id)
    await pilot.pause()
    await pilot.press("ctrl+e")
    await until(lambda: isinstance(app.screen, EnvelopeComposer))
    composer = app.screen
    assert isinstance(composer, EnvelopeComposer)
    composer.draft_path = None
    assert composer.channel_id == channel_id
    return composer


def write(composer: EnvelopeComposer, event_type: str, data: str) -> None:
    composer.query_one("#composer-type", Input).value = event_type
    composer.query_one("#composer-data", TextArea).load_text(data)


async def dry_run_shown(composer: EnvelopeComposer, words: str, timeout: float = 5.0) -> str:
    await until(lambda: not composer.dry_run_pending and words in composer.dry_run_text, timeout=timeout)
    return composer.dry_run_text


# ---------------------------------------------------------------- in-process hub


async def test_a_refused_draft_shows_the_posts_refusal_by_name_before_sending(network, tmp_path) -> None:
    # the critic opens a discussion: it is the critic's turn, so the human's post would be refused
    channel = await network.critic.open(
        type="discussion", target=[network.human.agent_id, network.planner.agent_id]
    )
    cid = channel.channel_id
    app = await build_app(network.hc, network.human, Settings(database=tmp_path / "wb.db"))
    async with app.run_test(size=SIZE) as pilot:
        composer = await open_composer(app, pilot, cid)
        write(composer, EV_TEXT, '{"text": "May I go first?"}')
        shown = await dry_run_shown(composer, "Would be refused")
        assert "critic's turn — you can speak after critic" in shown
        assert not HEX.search(shown)
        box = composer.query_one("#composer-dry-box")
        assert box.has_class("-refused") and "REFUSED" in str(box.border_title)
        assert composer.dry_result is not None and not composer.dry_result.admitted
        count = await network.hc.wal_count(cid)
        # the post then gets the very refusal the panel showed, in the same words
        await pilot.press("ctrl+s")
        await until(lambda: bool(composer.send_error))
        assert composer.send_error.removeprefix("Not sent: ") in shown
        assert await network.hc.wal_count(cid) == count


async def test_an_admitted_draft_lists_recipients_next_histories_and_the_state_after(
    network, tmp_path
) -> None:
    cid = network.conversation
    count = await network.hc.wal_count(cid)
    app = await build_app(network.hc, network.human, Settings(database=tmp_path / "wb.db"))
    async with app.run_test(size=SIZE) as pilot:
        composer = await open_composer(app, pilot, cid)
        write(composer, EV_TEXT, '{"text": "Check the totals against last year."}')
        shown = await dry_run_shown(composer, "Check the totals")
        assert shown.startswith("✓ Would be admitted")
        assert "Recipients (delivery order, normal):\n 1. planner" in shown
        # the planner's model gets it as user input, the human's own history as its assistant reply
        assert ' planner +1\n   + user: "Check the totals against last year."' in shown
        assert ' you +1\n   + assistant: "Check the totals against last year."' in shown
        assert "After it: " in shown and "the channel stays open" in shown
        assert composer.query_one("#composer-dry-box").has_class("-admitted")
        # a priority and an audience change are dry-run too
        composer.query_one("#composer-priority", Select).value = "urgent"
        await dry_run_shown(composer, "(delivery order, urgent)")
        await asyncio.sleep(0.3)
    assert await network.hc.wal_count(cid) == count  # nothing was posted


async def test_the_panel_waits_for_the_debounce_and_runs_once_for_a_burst_of_changes(
    network, tmp_path
) -> None:
    app = await build_app(network.hc, network.human, Settings(database=tmp_path / "wb.db"))
    async with app.run_test(size=SIZE) as pilot:
        composer = await open_composer(app, pilot, network.conversation)
        write(composer, EV_TEXT, '{"text": "first"}')
        await dry_run_shown(composer, '"first"')
        calls: list[tuple[float, Envelope]] = []
        real = app.source.dry_run

        async def counted(envelope: Envelope) -> DryRun:
            calls.append((time.monotonic(), envelope))
            return await real(envelope)

        app.source.dry_run = counted  # type: ignore[method-assign]  # the real op, counted
        data = composer.query_one("#composer-data", TextArea)
        first = time.monotonic()
        for word in ("s", "se", "sec", "seco", "secon", "second"):
            data.load_text(f'{{"text": "{word}"}}')
            await until(lambda: composer.dry_run_pending)
            # until the debounce passes, the panel keeps the last dry run, dimmed as out of date
            assert '"first"' in composer.dry_run_text
        await dry_run_shown(composer, '"second"')
        # far fewer dry runs than changes, the last of the last draft, none before the debounce passed
        texts = [e.event_data["text"] for _, e in calls]
        assert texts[-1] == "second" and len(calls) < 6
        assert calls[0][0] - first >= DRY_RUN_DELAY - 0.01


async def test_invalid_json_says_the_draft_is_not_valid_yet(network, tmp_path) -> None:
    app = await build_app(network.hc, network.human, Settings(database=tmp_path / "wb.db"))
    async with app.run_test(size=SIZE) as pilot:
        composer = await open_composer(app, pilot, network.conversation)
        write(composer, EV_TEXT, '{"text": "half')
        shown = await dry_run_shown(composer, "The draft is not valid yet")
        assert "event_data is not valid JSON" in shown
        assert composer.dry_result is None
        box = composer.query_one("#composer-dry-box")
        assert not box.has_class("-refused") and not box.has_class("-admitted")
        write(composer, EV_TEXT, '{"text": "whole"}')
        await dry_run_shown(composer, "Would be admitted")
        assert app.is_running and app._exception is None


async def test_a_failing_dry_run_says_so_and_the_composer_carries_on(network, tmp_path) -> None:
    app = await build_app(network.hc, network.human, Settings(database=tmp_path / "wb.db"))
    async with app.run_test(size=SIZE) as pilot:
        composer = await open_composer(app, pilot, network.conversation)

        async def unreachable(envelope: Envelope) -> DryRun:
            raise NetworkError("hub unreachable")

        composer._dry_runner = unreachable
        write(composer, EV_TEXT, '{"text": "anyone?"}')
        shown = await dry_run_shown(composer, "could not run")
        assert "hub unreachable" in shown
        assert app.is_running and app._exception is None


# ---------------------------------------------------------------- a remote hub over a real WebSocket


async def test_dry_run_against_a_remote_hub_follows_the_channel_closing() -> None:
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5)
    local = HubClient.local(hub)
    bob = await local.register_human(Passport(name="bob", kind="human"))
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        hc = HubClient.connect(server.url())
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        channel = await ana.open(type="conversation", target="bob")
        cid = channel.channel_id
        app = await build_app(hc, ana, Settings(), load_history=False)
        try:
            async with app.run_test(size=SIZE) as pilot:
                assert app.source.hc.remote
                composer = await open_composer(app, pilot, cid)
                write(composer, EV_TEXT, '{"text": "over the wire"}')
                shown = await dry_run_shown(composer, '"over the wire"')
                assert (
                    shown.startswith("✓ Would be admitted")
                    and "1. bob" in shown
                    and ' bob +1\n   + user: "over the wire"' in shown
                )
                # the server refuses a hub-only type before admission: its dry run says so, in the post's words
                write(composer, EV_CHANNEL_CLOSED, '{"reason": "closed_by_human"}')
                shown = await dry_run_shown(composer, "emitted only by the hub")
                assert shown == f"✗ Would be refused: '{EV_CHANNEL_CLOSED}' is emitted only by the hub"
                with pytest.raises(NetworkError) as refused:
                    await ana.post_envelope(Envelope(cid, ana.agent_id, None, EV_CHANNEL_CLOSED, {}))
                assert str(refused.value) in shown
                write(composer, EV_TEXT, '{"text": "over the wire"}')
                await dry_run_shown(composer, '"over the wire"')
                # the channel closes while the draft sits unchanged: the panel turns to the refusal
                await local.close_channel(cid, reason="done")
                shown = await dry_run_shown(composer, "Would be refused", timeout=8)
                namer = namer_for(app)
                assert f"{namer.channel(cid)} is closed" in shown and not HEX.search(shown)
                wal = await local.read_wal(cid)
                assert EV_TEXT not in {e.event_type for e in wal}  # dry runs post nothing
                assert bob.agent_id in {a for a, _ in app.source.participants(cid)}
        finally:
            await hc.close()
    await local.close()
    await hub.close()


# ---------------------------------------------------------------- issue 11: focus and fit


HUMAN = "h" * 32
PLANNER = "a" * 32
CHANNEL = "c" * 32


class ComposerApp(App[None]):
    def on_mount(self) -> None:
        channels = [ChannelChoice(CHANNEL, "conversation·cccc", [(PLANNER, "planner")])]
        self.push_screen(EnvelopeComposer(channels, HUMAN))


async def test_typing_into_the_event_type_replaces_it() -> None:
    app = ComposerApp()
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        kind = composer.query_one("#composer-type", Input)
        assert kind.has_focus and kind.value == EV_TEXT
        await pilot.press(*"myapp.note")
        assert kind.value == "myapp.note"  # not "ag2.msg.textmyapp.note"
        # a template fills the type; coming back to the field and typing replaces the template's type
        composer.query_one("#composer-template", Select).value = EV_CHANNEL_CLOSED
        await pilot.pause()
        assert kind.value == EV_CHANNEL_CLOSED
        assert kind.has_focus
        await pilot.press(*"myapp.closing")  # still in the field: typing replaces the template's type
        assert kind.value == "myapp.closing"
        composer.query_one("#composer-template", Select).value = EV_TEXT
        await pilot.pause()
        composer.query_one("#composer-data", TextArea).focus()
        await pilot.press("shift+tab")  # back to the event type, as a person would
        await pilot.pause()
        assert kind.has_focus
        await pilot.press(*"review.ask")
        assert kind.value == "review.ask"
        # inside the field, editing works as usual: the selection goes with the first cursor key
        await pilot.press("end", *"ed")
        assert kind.value == "review.asked"


async def test_no_form_label_runs_past_the_edge_at_80x24() -> None:
    app = ComposerApp()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        composer = app.screen
        form = composer.query_one("#composer-form")
        right = form.scrollable_content_region.right
        audience = composer.query_one("#composer-audience-label", Label)
        assert audience.region.right <= right
        text = "Audience (none ticked = broadcast to all participants)"
        assert audience.region.height >= 2  # wrapped, not cut
        shown = " ".join(
            str(line.text).strip() for line in audience.render_lines(audience.region.reset_offset)
        )
        assert " ".join(shown.split()) == text
        for label in form.query(Label):
            if label.display and label.region.width:
                assert label.region.right <= right, str(label.render())
        side = composer.query_one("#composer-side")
        for button in composer.query("#composer-buttons Button"):
            assert button.region.right <= side.content_region.right


async def test_the_dry_run_sits_beside_the_preview_when_wide_and_below_when_narrow(tmp_path: Path) -> None:
    app = ComposerApp()
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        composer = app.screen
        preview = composer.query_one("#composer-preview-box")
        dry = composer.query_one("#composer-dry-box")
        assert dry.region.x > preview.region.right - 1 and dry.region.y <= preview.region.y + 1
        await pilot.resize_terminal(120, 36)
        await pilot.pause()
        assert dry.region.y >= preview.region.bottom and dry.region.x == preview.region.x
        # no hub behind this app: the panel says the dry run is not available, and nothing breaks
        await until(lambda: not composer.dry_run_pending)  # type: ignore[attr-defined]
        assert "not available" in composer.dry_run_text  # type: ignore[attr-defined]


def test_the_refusal_sentence_names_the_channel_and_keeps_the_advice() -> None:
    """The panel's refusal is the op's message and advice, ids named as the chat bar names them."""
    from tui.screens.composer import refusal_sentence
    from tui.wording import Namer

    cid = "d" * 32
    dry = DryRun(
        cid,
        HUMAN,
        EV_TEXT,
        False,
        {
            "error": "ProtocolError",
            "code": "protocol_error",
            "message": f"channel '{cid}' is closed",
            "advice": " (reason: done); open a new one",
        },
    )
    namer = Namer(lambda a: {HUMAN: "ana"}.get(a, a), {cid: "discussion·dddd"}, HUMAN)
    assert refusal_sentence(dry, namer) == "discussion·dddd is closed (reason: done); open a new one"


# ---------------------------------------------------------------- pictures (the deterministic demo)


async def _dry_run_scene(pilot: Any, state: str, data: str) -> None:
    from tui.screenshots import ready, settle

    app = await ready(pilot)
    app.settings.source = None
    cid = next(c for c, md in app.source.metadata.items() if getattr(md.state, "value", md.state) == state)
    app.channel_list.select(cid)
    await settle(pilot)
    await pilot.press("ctrl+e")
    await settle(pilot)
    composer = app.screen
    assert isinstance(composer, EnvelopeComposer)
    composer.draft_path = None
    kind = composer.query_one("#composer-type", Input)
    kind.value = EV_TEXT
    kind.cursor_position = len(kind.value)
    composer.query_one("#composer-data", TextArea).load_text(data)
    await settle(pilot)
    for _ in range(200):
        if not composer.dry_run_pending and composer.dry_result is not None:
            break
        await pilot.pause(0.02)
    await settle(pilot)


@pytest.mark.parametrize("size", [(120, 36), (200, 50)], ids=["120x36", "200x50"])
def test_snapshot_an_admitted_reply_that_would_close_the_consulting_channel(snap_compare, size) -> None:
    from tui.screenshots import DemoWorkbench

    async def run_before(pilot: Any) -> None:
        await _dry_run_scene(pilot, "active", '{"text": "The budget is final: 42k."}')

    assert snap_compare(DemoWorkbench(), terminal_size=size, run_before=run_before)


def test_snapshot_a_refused_draft_at_80x24(snap_compare) -> None:
    from tui.screenshots import DemoWorkbench

    async def run_before(pilot: Any) -> None:
        await _dry_run_scene(pilot, "closed", '{"text": "one more thing"}')

    assert snap_compare(DemoWorkbench(), terminal_size=(80, 24), run_before=run_before)

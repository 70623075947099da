"""The workbench at 80x24 (issue 22 item 5): the new-channel form's spinner and refusal in view beside its
buttons; the composer's draft kept on Escape until sent or discarded, and an empty text warned; the fork
form's overrides kept between openings, Enter never starting a replay; the agent view's projection given
14 rows, scrolled from anywhere in the pane. Real hub, real app, Textual's pilot at 80x24."""

from __future__ import annotations

import pytest
from fork_app import RealTimeDemo, open_form
from textual.geometry import Region
from textual.widget import Widget
from textual.widgets import Input, Select, SelectionList, TextArea
from tui_network import close, small_network, until

from ag2net import Passport
from tui.app import build_app
from tui.screens.composer import EnvelopeComposer
from tui.screens.fork import ForkForm
from tui.screens.open_channel import OpenChannelForm
from tui.screenshots import settle
from tui.settings import Settings

SIZE = (80, 24)


@pytest.fixture
async def network():
    net = await small_network()
    yield net
    await close(net)


def on_screen(widget: Widget, frame: Widget) -> None:
    """``widget`` is drawn, inside ``frame`` (not scrolled below it) and inside the 80x24 terminal."""
    region = widget.region
    assert region.area, f"{widget!r} is not drawn"
    assert frame.region.contains_region(region), f"{widget!r} at {region} is outside {frame.region}"
    assert Region(0, 0, *SIZE).contains_region(region), f"{widget!r} at {region} is cut off at 80x24"


async def test_open_form_shows_its_spinner_and_the_refusal_beside_the_buttons(network) -> None:
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
        await pilot.pause()
        frame = form.query_one("#open-frame")
        on_screen(form.query_one("#open-waiting"), frame)
        on_screen(form.query_one("#open-submit"), frame)
        # the hub gives up after its 5 s ack timeout: the refusal takes the spinner's place, in view
        await until(lambda: bool(str(form.query_one("#open-error").render()).strip()), timeout=15)
        await pilot.pause()
        on_screen(form.query_one("#open-error"), frame)
        assert form.query_one("#open-error").region.y == form.query_one("#open-submit").region.y


async def test_composer_keeps_the_draft_on_escape_until_discarded(network) -> None:
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        composer.query_one("#composer-data", TextArea).load_text('{"text": "a draft worth keeping"}')
        await pilot.pause()
        await pilot.press("escape")
        await until(lambda: not isinstance(app.screen, EnvelopeComposer))
        # at once again: the draft is there (written on Escape itself, not left to the closing screen's worker)
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        assert composer.query_one("#composer-data", TextArea).text == '{"text": "a draft worth keeping"}'
        # ctrl+d discards it, and the footer offers it
        assert any(b.action == "discard" and b.show for _, b, *_ in composer.active_bindings.values())
        await pilot.press("ctrl+d")
        await until(lambda: not isinstance(app.screen, EnvelopeComposer))
        await pilot.press("ctrl+e")
        await until(lambda: isinstance(app.screen, EnvelopeComposer))
        composer = app.screen
        assert isinstance(composer, EnvelopeComposer)
        assert "a draft worth keeping" not in composer.query_one("#composer-data", TextArea).text
        # the fresh form's text is empty: a warning says so, under the event data
        warning = composer.query_one("#composer-data-warning")
        assert "text is empty" in str(warning.render())
        assert not warning.has_class("-empty")
        composer.query_one("#composer-data", TextArea).load_text('{"text": "now it says something"}')
        await pilot.pause()
        assert warning.has_class("-empty")


async def test_the_agent_views_projection_gets_14_rows_and_scrolls_from_the_pickers(network) -> None:
    for _ in range(12):  # a history taller than the pane
        await network.human.send(network.conversation, "A longer line of the conversation, again.")
    app = await build_app(network.hc, network.human, Settings())
    async with app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready)
        app.channel_list.select(network.conversation)
        await pilot.press("3")
        view = app.projected_view
        await until(lambda: view.data is not None)
        await pilot.pause()
        scroll = view.query_one("#pv-tab-history").query_one("VerticalScroll")
        assert scroll.region.height >= 14, f"the projection gets {scroll.region.height} rows of 24"
        assert Region(0, 0, *SIZE).contains_region(scroll.region)
        assert scroll.max_scroll_y > 0
        assert app.focused is view.query_one("#pv-participant")
        await pilot.press("down", "down")
        assert scroll.scroll_y == 2 and not view.query_one("#pv-participant", Select).expanded
        await pilot.press("end")
        assert scroll.scroll_y == scroll.max_scroll_y
        await pilot.press("home")
        assert scroll.scroll_y == 0
        await pilot.press("pagedown")
        assert scroll.scroll_y > 2
        await pilot.press("pageup")
        assert scroll.scroll_y == 0
        # the view picker too, and the tabs
        view.query_one("#pv-view").focus()
        await pilot.press("down")
        assert scroll.scroll_y == 1
        view.query_one("#pv-tabs").query_one("Tabs").focus()
        await pilot.press("down")
        assert scroll.scroll_y == 2


async def test_the_fork_form_keeps_its_overrides_and_enter_never_runs() -> None:
    async with RealTimeDemo().run_test(size=SIZE) as pilot:
        form = await open_form(pilot, seq=7)
        await until(lambda: form.agents != [])
        form.set_override("critic", model="scripted", model_arg="I disagree.", system="Be brief.")
        form.query_one("#fork-turns", Input).value = "50"
        await pilot.pause()
        # Enter in a field moves to the next one; nothing runs
        form.query_one("#fork-system-0", Input).focus()
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert form.running is None and isinstance(pilot.app.screen, ForkForm)
        await pilot.press("escape")
        await until(lambda: not isinstance(pilot.app.screen, ForkForm))
        await settle(pilot)
        await pilot.press("2", "F")
        await until(lambda: isinstance(pilot.app.screen, ForkForm))
        again = pilot.app.screen
        assert isinstance(again, ForkForm) and again is not form
        await until(lambda: again.agents != [])
        await pilot.pause()
        critic = next(i for i, a in enumerate(again.agents) if a.name == "critic")
        assert again.query_one(f"#fork-model-{critic}", Select).value == "scripted"
        assert again.query_one(f"#fork-model-arg-{critic}", Input).value == "I disagree."
        assert again.query_one(f"#fork-system-{critic}", Input).value == "Be brief."
        assert again.query_one("#fork-turns", Input).value == "50"
        # ctrl+r runs, with what was kept
        await pilot.press("ctrl+r")
        await until(lambda: again.running is not None)

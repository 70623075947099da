"""The README's "Debugging a projection" walk-through at 80x24, by its keys, on the demo network: what each
step says the screen shows is what the screen shows (issue 22 item 6).

The demo runs to its end first on a real clock (``fork_app.RealTimeDemo``: the replay needs real turn
times); the human is ana. Selects (the agent view's participant and view, the fork form's fields) are set
as the tests of those screens set them; every other step is the key the README names.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from fork_app import RealTimeDemo, wait_for
from textual.widgets import DataTable, Static

from tui.screens.composer import EnvelopeComposer
from tui.screens.fork import ForkForm
from tui.screens.replay_compare import ReplayCompare
from tui.screens.visibility_matrix import VisibilityMatrixScreen
from tui.screenshots import channel_of, ready, settle

SIZE = (80, 24)
README = Path(__file__).parents[2] / "README.md"


def walkthrough_text() -> str:
    """The README's "Debugging a projection" section, its whitespace collapsed (lines wrap anywhere)."""
    section = (
        README.read_text(encoding="utf-8").split("### Debugging a projection", 1)[1].split("\n## ", 1)[0]
    )
    return " ".join(section.split())


def test_the_walkthrough_quotes_what_the_screen_shows() -> None:
    """The sentences the pilot test below finds on screen are the ones the README quotes."""
    text = walkthrough_text()
    for quoted in (
        "twenty envelopes, closed when the turns ran out (`reason: max_turns`)",
        "`windowed_summary` with `recent_n=10`",
        '"Earlier in this channel: 6 messages from coder, critic."',
        "no `[coder]:` prefix",
        '"1.8k / 8.2k tokens (estimate)"',
        'round 2 of the conversation; expected: "no one in particular"',
        '"faithful: 20/20 reproduced (a replay with no change from seq 4)"',
        "\"stopped at seq 9: critic's model is `replay` and has no recorded reply for a changed request; "
        'give critic `scripted` or `openai` to go on"',
        '"first divergence at seq 5: different reply"',
    ):
        assert quoted in text, quoted
    assert "the critic as the last speaker" not in text and "prefixed `[coder]:`" not in text


def screen_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def until(pilot: Any, check: Any, what: str, timeout: float = 30.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
        await pilot.pause()
    raise AssertionError(f"{what} within {timeout} s; the screen shows:\n{screen_text(pilot.app)}")


async def go_to_seq(pilot: Any, seq: int) -> None:
    await pilot.press("colon", *str(seq), "enter")
    await settle(pilot)
    row = pilot.app.tail.cursor_row
    assert row is not None and row.seq == seq, row


async def test_the_readme_debugging_walkthrough_at_80x24() -> None:
    app = RealTimeDemo()
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot)
        conversation = channel_of(app, "conversation")
        md = app.source.metadata[conversation]
        names = {app.source.name_for(p.agent_id) for p in md.participants}
        assert names == {"coder", "critic"}

        # 1. `1`, the conversation of coder and critic, `enter`; the tail shows twenty envelopes, closed
        await pilot.press("1")
        table = app.channel_list.query_one(DataTable)
        target = table.get_row_index(conversation)
        for _ in range(30):
            if table.cursor_row == target:
                break
            await pilot.press("down" if table.cursor_row < target else "up")
        await pilot.press("enter")
        await until(pilot, lambda: app.selected_channel == conversation, "the conversation selected")
        await pilot.press("2")
        await settle(pilot)
        rows = [r.envelope for r in app.tail.visible_rows()]
        assert len(rows) == 20 and all(e.channel_id == conversation for e in rows)
        assert rows[-1].event_type == "ag2.channel.closed" and rows[-1].event_data["reason"] == "max_turns"
        assert "20 rows" in screen_text(app)

        # 2. `3`, the critic: the view in force is windowed_summary recent_n=10, a summary first, the
        # coder's lines as `user` messages without a `[coder]:` prefix (two parties), its own `assistant`
        await pilot.press("3")
        view = app.projected_view
        critic = next(p.agent_id for p in md.participants if app.source.name_for(p.agent_id) == "critic")
        view.select_participant(critic)
        await until(
            pilot,
            lambda: view.data is not None and view.data.participant_id == critic,
            "the critic's projection",
        )
        await settle(pilot)
        text = screen_text(app)
        assert view.data is not None
        assert "in force: windowed_summary" in text, text  # cut at 80 columns; the figures:
        assert view.data.preview.view == {"name": "windowed_summary", "recent_n": 10}
        assert "Earlier in this channel: 6 messages from coder, critic." in text
        assert "[coder]:" not in text
        assert (
            "window unknown" not in text and "1.8k / 8.2k tokens (estimate)" in text
        )  # the demo's model has a window
        turns = len(view.data.turns)
        assert turns >= 8
        await pilot.press("[")
        await settle(pilot)
        assert view.turn_index == turns - 2
        await pilot.press("d")
        await settle(pilot)

        # 3. `m`: the visibility matrix, a cell of the critic's column explained with `enter`
        await pilot.press("m")
        matrix = await wait_for(pilot, VisibilityMatrixScreen)
        await settle(pilot)
        await pilot.press("enter")
        await settle(pilot)
        assert "delivered" in screen_text(app) or "not delivered" in screen_text(app)
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], "back from the matrix")
        del matrix

        # 4. the tail, `:5`, `S`: round 2, no one in particular expected (a conversation has no turn
        # order); `]` steps to seq 6, round 3
        await pilot.press("2")
        await go_to_seq(pilot, 5)
        await pilot.press("S")
        await settle(pilot)
        text = screen_text(app)
        assert "#5 critic" in text and "no one in particular · round 2" in text, text
        assert "changed from #4" in text
        await pilot.press("]")
        await settle(pilot)
        text = screen_text(app)
        assert "#6 coder" in text and "round 3" in text, text

        # 5. seq 4, `F`: the form shows the faithful baseline; a shorter view for the critic with the
        # `replay` model stops at its first changed request and says who needs a model
        await pilot.press("S")  # the scrubber closes again
        await settle(pilot)
        await go_to_seq(pilot, 4)
        await pilot.press("F")
        form = await wait_for(pilot, ForkForm)
        await until(pilot, lambda: form.baseline is not None, "the faithful baseline", timeout=60)
        assert form.baseline_text == "faithful: 20/20 reproduced (a replay with no change from seq 4)"
        form.set_override("critic", view="windowed_summary", params="recent_n=2")
        await pilot.press("ctrl+r")
        compare = await wait_for(pilot, ReplayCompare, timeout=60)
        await settle(pilot)
        summary = str(compare.query_one("#rc-summary", Static).render())
        assert (
            "stopped at seq 9: critic's model is `replay` and has no recorded reply for a changed request; "
            "give critic `scripted` or `openai` to go on"
        ) in summary, summary
        # a scripted critic answers: the first divergent envelope is its first answer, seq 5
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], "back from the comparison")
        await go_to_seq(pilot, 4)
        await pilot.press("F")
        form = await wait_for(pilot, ForkForm)
        form.set_override("critic", model="scripted", model_arg="I disagree.")
        await pilot.press("ctrl+r")
        compare = await wait_for(pilot, ReplayCompare, timeout=60)
        await settle(pilot)
        summary = str(compare.query_one("#rc-summary", Static).render())
        assert "first divergence at seq 5: different reply" in summary, summary
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.screen_stack[0], "back from the comparison")

        # 6. `ctrl+e`: the composer's dry run says the closed conversation would refuse the draft
        await pilot.press("ctrl+e")
        composer = await wait_for(pilot, EnvelopeComposer)
        composer.draft_path = None  # type: ignore[attr-defined]
        await settle(pilot)
        await until(pilot, lambda: "closed" in screen_text(app), "the dry run's verdict")
        await pilot.press("escape")
        del table

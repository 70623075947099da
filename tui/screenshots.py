"""README screenshots: the real workbench on the deterministic demo network, saved as SVGs.

Run ``python -m tui.screenshots [--out screenshots]``. Ids and time are frozen and the demo runs to
completion before the first frame, so the same code gives the same pictures.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import random
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Input, TextArea
from textual.worker import WorkerCancelled

from ag2net import Hub, HubClient, Passport
from ag2net.demo import start_demo
from ag2net.ids import IdMint, ManualClock
from tui.app import WorkbenchApp
from tui.settings import Settings
from tui.source import HubSource

SIZE = (120, 36)
"""The README pictures' terminal: legible at the README's width (one shot shows 80x24)."""

NARROW = (80, 24)
"""The default size of most terminals: one pane at a time."""

START = "2026-03-01T09:30:00.000000Z"


DEMO_SEED = 20260301
"""The demo network's id seed: the same agent, channel and envelope ids on every run."""


class SteppingClock(ManualClock):
    """A clock that moves on by a seeded 0.3–6 s at every reading, so the pictures show times as a
    morning's work would, the same on every run."""

    def __init__(self, start: str = START, seed: int = DEMO_SEED) -> None:
        super().__init__(start)
        self._random = random.Random(seed)

    def __call__(self) -> str:
        self.advance(round(self._random.uniform(0.3, 6.0), 3))
        return super().__call__()


class TickTimer:
    """Turn durations and timings in turn records: 0.1 ms per reading, the same on every run."""

    def __init__(self) -> None:
        self._ticks = itertools.count(1)

    def __call__(self) -> float:
        return next(self._ticks) * 1e-4


class DemoWorkbench(WorkbenchApp):
    """The workbench over the finished demo network, human 'ana', theme textual-dark, no live observing."""

    def __init__(self, clock: ManualClock | None = None) -> None:
        super().__init__(None, None, Settings(theme="textual-dark"), observe=False, load_history=False)  # type: ignore[arg-type]
        self.animation_level = "none"
        self._clock = clock if clock is not None else ManualClock(START)
        self._closers: list[Any] = []

    async def on_load(self) -> None:
        # built here, on the app's own event loop
        hub = await Hub.open(
            None,
            clock=self._clock,
            ttl_sweep_interval=0,
            expectation_sweep_interval=0,
            ids=IdMint.seeded(DEMO_SEED),
        )
        hc = HubClient.local(hub)
        hc.timer = TickTimer()
        human = await hc.register_human(Passport(name="ana", kind="human"))
        demo = await start_demo(hc, human_name="ana")
        await demo.run()
        self.source = HubSource(hc, human)
        self._closers = [demo.close, hc.close, hub.close]

    async def on_unmount(self) -> None:
        for close in self._closers:
            await close()


def still(app: WorkbenchApp) -> None:
    """Cursor blink off everywhere on the current screen, so a picture never catches it mid-blink."""
    for widget in app.screen.query("Input, TextArea"):
        if isinstance(widget, (Input, TextArea)):
            widget.cursor_blink = False


async def ready(pilot: Pilot[Any]) -> WorkbenchApp:
    """Wait for the first page and the peers."""
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    for _ in range(2000):
        if app.ready and app.peers.peers:
            break
        await asyncio.sleep(0.01)
    await pilot.pause()
    return app


async def settle(pilot: Pilot[Any]) -> None:
    """Let every worker finish and the screen repaint, with the cursor blink off."""
    app = pilot.app
    for _ in range(20):  # an exclusive worker cancelled by its successor is not a failure here
        try:
            await app.workers.wait_for_complete()
            break
        except WorkerCancelled:
            await pilot.pause()
    await pilot.pause()
    still(app)  # type: ignore[arg-type]
    await pilot.pause()


def channel_of(app: WorkbenchApp, kind: str) -> str:
    """The first channel of type ``kind`` in the channel list."""
    rows = app.channel_list
    return next(cid for cid in rows.shown_ids() if (r := rows.get_row(cid)) is not None and r.type == kind)


async def _select(pilot: Pilot[Any], kind: str) -> WorkbenchApp:
    app = await ready(pilot)
    app.channel_list.select(channel_of(app, kind))
    await settle(pilot)
    return app


async def shot_workbench(pilot: Pilot[Any]) -> None:
    app = await _select(pilot, "conversation")
    app.projected_view.switch_view("windowed_summary", 2)  # the projection starts with a CompactionSummary
    await settle(pilot)
    app.action_focus_pane("view")  # at 120 columns the agent view shares the middle with the tail
    await settle(pilot)


async def shot_tail(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    app.tail.focus()
    await settle(pilot)


async def shot_agent_view(pilot: Pilot[Any]) -> None:
    app = await _select(pilot, "discussion")
    app.action_focus_pane("view")
    await settle(pilot)


async def shot_turn_diff(pilot: Pilot[Any]) -> None:
    app = await _select(pilot, "conversation")
    app.projected_view.switch_view("windowed_summary", 2)
    await settle(pilot)
    app.action_focus_pane("view")
    app.query_one("#pv-tabs").active = "pv-tab-turn"  # type: ignore[attr-defined]
    await settle(pilot)


async def shot_peers(pilot: Pilot[Any]) -> None:
    app = await ready(pilot)
    await pilot.press("4")
    app.peers.select("researcher")
    await settle(pilot)


async def shot_composer(pilot: Pilot[Any]) -> None:
    app = await _select(pilot, "conversation")
    app.settings.source = None
    app.action_compose_envelope()
    await settle(pilot)
    composer = app.screen
    composer.draft_path = None  # type: ignore[attr-defined]
    event_type = composer.query_one("#composer-type", Input)
    event_type.value = "review.request"
    event_type.cursor_position = len(event_type.value)
    composer.query_one("#composer-data", TextArea).load_text(
        '{\n  "document_id": "doc-123",\n  "deadline": "2026-03-02",\n  "reviewers": ["critic"]\n}'
    )
    await settle(pilot)
    for _ in range(200):  # the dry-run panel: its debounce timer, then its worker
        if not getattr(composer, "dry_run_pending", False):
            break
        await pilot.pause(0.02)
    await settle(pilot)


async def shot_detail(pilot: Pilot[Any]) -> None:
    app = await _select(pilot, "workflow")
    app.tail.focus()
    app.tail.set_filter("type:ag2.packet")
    await pilot.press("enter")
    await settle(pilot)


async def shot_narrow(pilot: Pilot[Any]) -> None:
    await _select(pilot, "consulting")
    await pilot.press("2")
    await settle(pilot)


async def shot_replay_compare(pilot: Pilot[Any]) -> None:
    from tui.screens.fork import ForkForm
    from tui.screens.replay_compare import ReplayCompare

    app = await _select(pilot, "conversation")
    app.action_focus_pane("tail")
    app.tail.goto_seq(3)
    await pilot.press("F")  # Fork here… at seq 3; the critic answers "I disagree." in the replay
    for kind in (ForkForm, ReplayCompare):
        for _ in range(3000):
            if isinstance(app.screen, kind) and (kind is ReplayCompare or app.screen.agents):  # type: ignore[attr-defined]
                break
            await asyncio.sleep(0.01)
        await settle(pilot)
        if kind is ForkForm:
            app.screen.set_override("critic", model="scripted", model_arg="I disagree.")  # type: ignore[attr-defined]
            await pilot.press("ctrl+r")


async def _wait_screen(pilot: Pilot[Any], kind: type, ready: Callable[[Any], bool]) -> None:
    for _ in range(3000):
        if isinstance(pilot.app.screen, kind) and ready(pilot.app.screen):
            break
        await asyncio.sleep(0.01)
    await settle(pilot)


async def shot_visibility(pilot: Pilot[Any]) -> None:
    from tui.screens.visibility_matrix import VisibilityMatrixScreen

    app = await _select(pilot, "workflow")
    app.action_focus_pane("tail")
    await pilot.press("m")  # the visibility matrix; seq 7 x planner: not in the review request's audience
    await _wait_screen(pilot, VisibilityMatrixScreen, lambda s: s.matrix is not None)
    await pilot.press(*["up"] * 6, "enter")
    await settle(pilot)


async def shot_causation(pilot: Pilot[Any]) -> None:
    from tui.screens.causation_tree import CausationTreeScreen

    app = await ready(pilot)
    pair = ["critic", "researcher"]  # the researcher's consult, delegated while answering the planner
    app.channel_list.select(
        next(
            cid
            for cid, md in app.source.metadata.items()
            if sorted(app.source.name_for(p) for p in md.participant_ids()) == pair
        )
    )
    await settle(pilot)
    app.action_focus_pane("tail")
    app.tail.goto_seq(5)
    await pilot.press("t")
    await _wait_screen(pilot, CausationTreeScreen, lambda s: s.result is not None)


async def _hold_a_critic_post(pilot: Pilot[Any]) -> WorkbenchApp:
    """A breakpoint on the critic's texts and one of them held: the critic's answer to ana's question
    in a new conversation (the critic's post waits while it is held)."""
    app = await ready(pilot)
    source = app.source
    await source.break_on("sender:critic type:ag2.msg.text")
    conversation = await source.human.open(type="conversation", target="critic")
    await source.send_text(conversation.channel_id, "Is the sync design ready for review?", None)
    for _ in range(500):
        if await source.list_waiting():
            break
        await asyncio.sleep(0.01)
    app.feed.load_waiting()
    rows = await source.load_channels()
    app.channel_list.set_channels(rows)
    for _ in range(500):
        if app.inbox.held():
            break
        await asyncio.sleep(0.01)
    app.feed.flush()
    app.tail.append_many(await source.channel_range(conversation.channel_id, 1, 99))
    app.channel_list.select(conversation.channel_id)
    await settle(pilot)
    return app


async def shot_held(pilot: Pilot[Any]) -> None:
    await _hold_a_critic_post(pilot)
    await pilot.press("2")
    await settle(pilot)


async def shot_inbox(pilot: Pilot[Any]) -> None:
    from tui.screens.inbox import InboxScreen

    await _hold_a_critic_post(pilot)
    await pilot.press("w")
    await _wait_screen(pilot, InboxScreen, lambda s: bool(s._keys))


@dataclass(frozen=True, slots=True)
class Shot:
    """One picture: the file name and what to do on the demo before taking it."""

    filename: str
    prepare: Callable[[Pilot[Any]], Awaitable[None]]
    title: str
    size: tuple[int, int] = SIZE


SHOTS: tuple[Shot, ...] = (
    Shot("workbench.svg", shot_workbench, "a channel selected, its agent view with a compaction summary"),
    Shot("tail.svg", shot_tail, "the WAL tail over all channels"),
    Shot("agent_view.svg", shot_agent_view, "the agent view of a discussion"),
    Shot("turn_diff.svg", shot_turn_diff, "the last turn and its diff against a replay"),
    Shot("peers.svg", shot_peers, "a peer card"),
    Shot("composer.svg", shot_composer, "the composer with a custom event type and JSON"),
    Shot("detail.svg", shot_detail, "an envelope's detail"),
    Shot("narrow.svg", shot_narrow, "the workbench at 80x24: one pane at a time", NARROW),
    Shot("replay_compare.svg", shot_replay_compare, "fork and replay: the original beside a what-if"),
    Shot("visibility.svg", shot_visibility, "the visibility matrix of a workflow, a cell explained"),
    Shot("causation.svg", shot_causation, "the causation tree of a delegated answer, across channels"),
    Shot("held.svg", shot_held, "a post held at a breakpoint in the tail, at 80x24", NARROW),
    Shot("inbox.svg", shot_inbox, "Waiting for you: the held post, at 80x24", NARROW),
)

NEW_SHOTS: tuple[Shot, ...] = ()
"""Shots taken only when named (``python -m tui.screenshots held inbox``) until the README links them."""


FRAME_TITLE = "ag2net tui --memory --demo"
"""The picture's window title (the app's own title is in its header already)."""


async def take(shot: Shot, out: Path) -> Path:
    """Run a fresh demo workbench (stepping clock), prepare it for ``shot`` and save the SVG under ``out``."""
    app = DemoWorkbench(SteppingClock())
    path = out / shot.filename
    async with app.run_test(size=shot.size) as pilot:
        await shot.prepare(pilot)
        path.write_text(app.export_screenshot(title=FRAME_TITLE), encoding="utf-8")
    return path


async def take_all(out: Path, names: list[str] | None = None) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    saved = []
    for shot in SHOTS + NEW_SHOTS:
        if not names and shot in NEW_SHOTS:
            continue
        if names and shot.filename not in names and shot.filename.removesuffix(".svg") not in names:
            continue
        saved.append(await take(shot, out))
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.screenshots", description=__doc__)
    parser.add_argument("--out", default="screenshots", help="directory for the SVGs (default: screenshots)")
    parser.add_argument("names", nargs="*", help="only these shots (e.g. tail detail); default: all")
    args = parser.parse_args(argv)
    every = SHOTS + NEW_SHOTS
    known = {s.filename for s in every} | {s.filename.removesuffix(".svg") for s in every}
    unknown = [n for n in args.names if n not in known]
    if unknown:
        parser.error(f"unknown shot {unknown[0]!r}; choose from {', '.join(s.filename for s in every)}")
    for path in asyncio.run(take_all(Path(args.out), args.names)):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["SHOTS", "SIZE", "DemoWorkbench", "Shot", "SteppingClock", "main", "still", "take", "take_all"]

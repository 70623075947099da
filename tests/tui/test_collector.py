"""The workbench's garbage-collection policy: no full collection while it starts or while someone types."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
from tui_network import close, small_network, until

from tui.app import build_app
from tui.collector import DUE_AFTER_YOUNG, IDLE_SECONDS, NEVER, OVERDUE_SECONDS, IdleCollector
from tui.feed import ChannelsLoaded
from tui.settings import Settings


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def restored() -> Iterator[None]:
    """Whatever a test does to the collector, the next test gets it back as it was."""
    enabled, threshold = gc.isenabled(), gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    if enabled:
        gc.enable()


def make_due() -> None:
    """Run generation-1 collections until a full one is due."""
    for _ in range(DUE_AFTER_YOUNG):
        gc.collect(1)


def test_hold_switches_the_collector_off_and_settle_freezes_and_defers_full_collections(
    restored: None,
) -> None:
    gc.enable()
    threshold0, threshold1, _ = gc.get_threshold()
    collector = IdleCollector(Clock())
    collector.hold()
    assert not gc.isenabled()
    collector.settle()
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == (threshold0, threshold1, NEVER)
    collector.release()
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold()[2] != NEVER and gc.isenabled()


def test_a_due_full_collection_waits_for_the_person_to_pause(restored: None) -> None:
    gc.enable()
    clock = Clock()
    collector = IdleCollector(clock)
    collector.hold()
    collector.settle()
    assert not collector.tick()  # nothing due yet
    make_due()
    assert collector.due
    collector.note_input()
    clock.now += IDLE_SECONDS / 2
    assert not collector.tick()  # typing: wait
    collector.note_input()
    clock.now += IDLE_SECONDS
    full_before = gc.get_stats()[2]["collections"]
    assert collector.tick()  # a pause: collect now
    assert gc.get_stats()[2]["collections"] == full_before + 1
    assert collector.full_collections == 1 and not collector.due
    collector.release()


def test_an_overdue_collection_runs_even_while_someone_keeps_typing(restored: None) -> None:
    gc.enable()
    clock = Clock()
    collector = IdleCollector(clock)
    collector.hold()
    collector.settle()
    make_due()
    for _ in range(int(OVERDUE_SECONDS)):
        collector.note_input()
        assert not collector.tick()
        clock.now += 1.0
    collector.note_input()
    assert collector.tick()
    collector.release()


def test_nothing_runs_before_settle_nor_after_release(restored: None) -> None:
    gc.enable()
    clock = Clock()
    collector = IdleCollector(clock)
    collector.hold()
    make_due()
    clock.now += 10 * OVERDUE_SECONDS
    assert not collector.tick()
    collector.settle()
    collector.release()
    clock.now += 10 * OVERDUE_SECONDS
    assert not collector.tick()
    assert gc.isenabled()


async def test_the_workbench_holds_the_collector_until_its_first_page_and_gives_it_back(
    restored: None,
) -> None:
    gc.enable()
    threshold = gc.get_threshold()
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human, Settings(), load_history=False)
        seen_while_loading: list[bool] = []

        def hook(message: object) -> None:
            if isinstance(message, ChannelsLoaded):  # the feed's first message, before the first page
                seen_while_loading.append(gc.isenabled())

        async with app.run_test(size=(120, 36), message_hook=hook):
            await until(lambda: app.ready)
            await until(lambda: gc.get_freeze_count() > 0)
            assert gc.isenabled() and gc.get_threshold()[2] == NEVER
        assert seen_while_loading == [False]
        assert gc.isenabled() and gc.get_threshold() == threshold and gc.get_freeze_count() == 0
    finally:
        await close(network)

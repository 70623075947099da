"""Keys typed right after a key that moves the keyboard (a pane key, ``i``, ``ctrl+f``, ``/``) reach the
widget that gets it, every time, even when the machine is busy (issue 22 item 5).

A terminal hands a fast typist's keys (or a paste) to the app in one read: the app has them all queued
before it handles the first. A key bound without priority is resolved only when it has bubbled back up
from the focused widget, and ``widget.focus()`` only asks for the move after the keys already queued: the
keys after it went to the widget left behind (the tail's ``t`` opened the causation tree). Here each burst is queued the way the driver queues it, all keys before the first is
handled, while a subprocess spins on a core, a thread in this process competes for the interpreter, and
a participant keeps the channel busy.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

from textual import events
from textual.app import App
from textual.widgets import Input
from tui_network import close, small_network, until

from tui.app import build_app
from tui.settings import Settings

SIZE = (80, 24)
ROUNDS = 50


def burst(app: App[None], keys: list[str]) -> None:
    """Queue ``keys`` as one read from the terminal does: every one is queued before the first is handled."""
    for key in keys:
        char = key if len(key) == 1 else None
        event = events.Key(key, char)
        event.set_sender(app)
        app.post_message(event)


def typed(text: str) -> list[str]:
    return list(text)


class Busy:
    """CPU load: a spinning subprocess and a thread of this process that wants the interpreter."""

    def __enter__(self) -> Busy:
        # niced: the machine's other work goes first; this test's event loop competes with it
        self.proc = subprocess.Popen([sys.executable, "-c", "import os; os.nice(10)\nwhile True: pass"])
        self.stop = threading.Event()

        def spin() -> None:
            while not self.stop.is_set():
                sum(range(20_000))

        self.thread = threading.Thread(target=spin, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(5)
        self.proc.kill()
        self.proc.wait(5)


async def test_keys_right_after_a_focus_key_reach_the_new_field_under_load() -> None:
    network = await small_network()
    try:
        app = await build_app(network.hc, network.human, Settings())
        async with app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready and bool(app.peers.peers))
            await pilot.pause()
            chat = app.chat.input
            channels_filter = app.channel_list.query_one("#channels-filter", Input)
            peers_search = app.peers.query_one("#peers-search", Input)
            cases = [
                ("i then text", ["i"], chat),
                ("3, i then text", ["3", "i"], chat),
                ("1, ctrl+f then text", ["1", "ctrl+f"], channels_filter),
                ("4, ctrl+f then text", ["4", "ctrl+f"], peers_search),
            ]

            async def traffic() -> None:  # the channel keeps moving: the planner answers each line
                n = 0
                while True:
                    n += 1
                    await network.critic.send(network.discussion, f"traffic {n}")
                    await asyncio.sleep(0.02)

            lost: list[str] = []
            mover = asyncio.create_task(traffic())
            try:
                with Busy():
                    for round_no in range(ROUNDS):
                        name, keys, field = cases[round_no % len(cases)]
                        # "tell" has t and e and l: the tail's causation tree, the peers' keys, …
                        text = f"tell{round_no}"
                        burst(app, [*keys, *typed(text)])
                        started = time.monotonic()
                        while time.monotonic() - started < 3 and field.value != text:
                            await asyncio.sleep(0.01)
                        await pilot.pause()
                        if field.value != text or app.screen is not app.screen_stack[0]:
                            lost.append(f"round {round_no} ({name}): {field.value!r}, screen {app.screen!r}")
                            while app.screen is not app.screen_stack[0]:
                                await app.pop_screen()
                        field.value = ""
                        app.tail.focus()
                        await pilot.pause()
            finally:
                mover.cancel()
                await asyncio.gather(mover, return_exceptions=True)
            assert not lost, f"{len(lost)} of {ROUNDS} bursts lost keys:\n" + "\n".join(lost)
    finally:
        await close(network)

"""Stepping into a live network from a workbench attached over a real WebSocket (``ag2net tui --connect``),
at 80x24, with the agents in other processes (issue 24, "What must show").

* ``ag2net serve --demo --approvals`` in its own process: the workbench attached to it shows the reviewer's
  approval in "Waiting for you" and the count in the status bar; a breakpoint set with ``b`` on a critic's
  text holds the critic's next post, shown in the tail as ``⏸ held`` with its would-be seq and in the inbox;
  both answered in place;
* the critic in a process of its own (``tests/helpers/ws_agent.py``): a turn breakpoint set in the workbench
  pauses its turn in that process; the paused-turn screen answers in its place (no model call there), or
  edits its history (the model there reads the edit);
* an approval the critic asks for waits while the workbench is closed and its connection gone, and a new
  workbench on a new connection approves it: the tool runs in the critic's process, once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widgets import Label, TextArea
from tui_network import until
from ws_helpers import AgentProcess, ServeProcess, free_port

from ag2net import EV_TEXT, HubClient
from ag2net.hub import Hub
from ag2net.server import serve_ws
from ag2net.store import SqliteStore
from tui.app import WorkbenchApp, build_app
from tui.screens.approval import ApprovalScreen
from tui.screens.break_when import BreakWhenScreen
from tui.screens.inbox import InboxScreen
from tui.screens.paused_turn import PausedTurnScreen
from tui.widgets.tail_lines import HELD_MARK

SIZE = (80, 24)
SCREEN = Region(0, 0, *SIZE)


def screen_text(app: Any) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def wait_screen(pilot: Pilot[Any], kind: type, timeout: float = 30.0) -> Any:
    await until(lambda: isinstance(pilot.app.screen, kind), timeout)
    await pilot.pause()
    return pilot.app.screen


async def until_async(check: Any, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not await check():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def attached(url: str, name: str = "ana") -> AsyncIterator[tuple[HubClient, WorkbenchApp]]:
    """A workbench attached to the hub at ``url`` the way ``ag2net tui --connect URL --as NAME`` attaches."""
    hc = HubClient.connect(url)
    await hc.open()
    try:
        human = await hc.register_or_attach_human(name)
        yield hc, await build_app(hc, human)
    finally:
        await hc.close()


async def open_inbox_on(pilot: Pilot[Any], app: WorkbenchApp, kind: str) -> Any:
    """``w``, then the cursor on the first entry of ``kind``; the entry."""
    await until(lambda: any(e.kind == kind for e in app.inbox.entries()), 60)
    await pilot.press("w")
    inbox = await wait_screen(pilot, InboxScreen)
    entry = next(e for e in app.inbox.entries() if e.kind == kind)
    await until(lambda: entry.key in inbox._keys)
    inbox.option_list.highlighted = inbox._keys.index(entry.key)
    await pilot.pause()
    return entry


# ------------------------------------------------------------------------------------- the served demo


async def test_the_served_demo_at_80x24_the_approval_and_a_held_critic_post_in_the_inbox(tmp_path) -> None:
    served = ServeProcess(tmp_path / "demo.db", free_port(), "--demo", "--approvals")
    await served.start()
    try:
        async with attached(served.url) as (hc, app), app.run_test(size=SIZE) as pilot:
            await until(lambda: app.ready, 60)
            # the demo runs in the serve process until the reviewer's approve waits for a person
            await until(lambda: any(e.kind == "approval" for e in app.inbox.entries()), 120)
            await pilot.pause()
            status = app.query_one("#status-waiting", Label)
            assert "1 waiting" in str(status.render()) and SCREEN.contains_region(status.region)

            # b on one of the critic's texts in the tail: "Break when…" prefilled; the critic's posts anywhere
            await pilot.press("2", "slash", *"sender:critic type:ag2.msg.text", "enter")
            await until(lambda: app.tail.visible_count > 0, 30)
            await pilot.press("b")
            form = await wait_screen(pilot, BreakWhenScreen)
            assert "sender:critic type:ag2.msg.text" in form.spec_input.value
            form.spec_input.value = "sender:critic type:ag2.msg.text"
            await pilot.press("enter")
            await until(lambda: [b.spec for b in app.breakpoints] == ["sender:critic type:ag2.msg.text"])
            await pilot.press("x")

            # the approval: w, enter, a — the workflow goes on and the pairing conversation starts
            entry = await open_inbox_on(pilot, app, "approval")
            assert "wants to run approve" in screen_text(app)
            await pilot.press("enter")
            approval = await wait_screen(pilot, ApprovalScreen)
            assert SCREEN.contains_region(approval.region)
            await pilot.press("a")
            await until(lambda: entry.key not in app.inbox, 30)
            await pilot.press("escape")
            await until(lambda: app.screen is app.screen_stack[0])

            # the critic's first reply in the pairing conversation is held: in the tail and in the inbox
            await until(lambda: any(e.kind == "held" for e in app.inbox.entries()), 120)
            held = next(e for e in app.inbox.entries() if e.kind == "held")
            assert hc.name_for(held.agent_id) == "critic"
            app.select_channel(held.channel_id)
            app.action_focus_pane("tail")
            await until(lambda: bool(app.tail.held_rows), 30)
            await pilot.pause()
            text = screen_text(app)
            assert HELD_MARK in text, text
            line = next(ln for ln in text.splitlines() if HELD_MARK in ln)
            seq = held.would_be_seq
            assert seq is not None and str(seq) in line
            wal = await hc.read_wal(held.channel_id)
            assert held.envelope is not None and all(e.envelope_id != held.envelope.envelope_id for e in wal)

            await open_inbox_on(pilot, app, "held")
            text = screen_text(app)
            assert "Waiting for you" in text and HELD_MARK in text and "critic" in text, text
            await pilot.press("r")  # released: admitted with the seq it was shown with
            await until(lambda: held.key not in app.inbox, 30)

            await until_async(lambda: _longer(hc, held.channel_id, seq - 1))
            wal = await hc.read_wal(held.channel_id)
            assert wal[seq - 1].sender_id == held.agent_id
    finally:
        await served.stop()


async def _longer(hc: HubClient, channel_id: str, n: int) -> bool:
    return await hc.wal_count(channel_id) > n


# ------------------------------------------------------------------------------------- the critic elsewhere


@pytest.fixture
async def served(tmp_path) -> AsyncIterator[str]:
    hub = await Hub.open(
        SqliteStore(tmp_path / "hub.db"),
        ttl_sweep_interval=0,
        expectation_sweep_interval=0,
        invite_ack_timeout=5,
    )
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            yield f"ws://127.0.0.1:{server.port}"
    finally:
        await hub.close()


@pytest.fixture
async def critic(served) -> AsyncIterator[AgentProcess]:
    agent = AgentProcess(served, "critic", rpc_timeout=2.0)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


def critic_texts(wal: list[Any], critic: AgentProcess) -> list[str]:
    return [
        str(e.event_data.get("text"))
        for e in wal
        if e.event_type == EV_TEXT and e.sender_id == critic.agent_id
    ]


async def test_a_turn_breakpoint_set_in_the_workbench_pauses_the_critic_in_its_process_and_ana_answers(
    served, critic
) -> None:
    async with attached(served) as (hc, app), app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, 60)
        ana = app.source.human
        cid = (await ana.open(type="conversation", target="critic")).channel_id
        app.open_break_when("agent:critic", on="turn")
        await wait_screen(pilot, BreakWhenScreen)
        await pilot.press("enter")
        await until(lambda: [b.on for b in app.breakpoints] == ["turn"])
        calls = critic.model_calls()
        await ana.send(cid, "who writes the conflict screen?")

        await open_inbox_on(pilot, app, "turn")
        await pilot.press("enter")
        paused = await wait_screen(pilot, PausedTurnScreen)
        assert SCREEN.contains_region(paused.region)
        text = screen_text(app)
        assert "You are critic, reviewing what others say." in text or "deploy" in text, text
        await asyncio.sleep(3)  # past the critic's 2 s RPC timeout: the paused turn has none
        await pilot.press("a")
        await until(lambda: paused.focused is paused.query_one("#turn-answer-text", TextArea))
        await pilot.press(*"I will take it, said ana in the critic's seat.")
        await pilot.press("ctrl+s")

        async def answered() -> bool:
            return bool(critic_texts(await hc.read_wal(cid), critic))

        await until_async(answered)
        assert critic_texts(await hc.read_wal(cid), critic) == [
            "I will take it, said ana in the critic's seat."
        ]
        assert critic.model_calls() == calls  # the model in the critic's process was never called
        (record,) = [r for r in await hc.list_turns(channel_id=cid, agent_id=critic.agent_id) if r.operator]
        assert record.operator == {"action": "answer", "by": "ana"}


async def test_an_approval_is_answered_after_the_workbench_is_closed_and_opened_again(served, critic) -> None:
    async with attached(served) as (hc, app), app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, 60)
        ana = app.source.human
        cid = (await ana.open(type="conversation", target="critic")).channel_id
        await ana.send(cid, "please deploy staging")
        entry = await open_inbox_on(pilot, app, "approval")
        assert "wants to run deploy" in screen_text(app)
        item_id = entry.key
    # the workbench is gone, its connection closed; the call waits in the hub, the tool has not run
    await asyncio.sleep(3)  # past the critic's 2 s RPC timeout
    assert critic.count(r"^ran deploy") == 0
    async with attached(served) as (hc, app), app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, 60)
        entry = await open_inbox_on(pilot, app, "approval")
        assert entry.key == item_id
        await pilot.press("enter")
        screen = await wait_screen(pilot, ApprovalScreen)
        assert SCREEN.contains_region(screen.region)
        assert "staging" in screen_text(app)
        await pilot.press("a")
        await critic.wait_line(r"^ran deploy staging$", timeout=30)

        async def replied() -> bool:
            return bool(critic_texts(await hc.read_wal(cid), critic))

        await until_async(replied)
        assert critic_texts(await hc.read_wal(cid), critic) == ["critic: deploy said deployed to staging"]
        await until(lambda: item_id not in app.inbox, 30)
    assert critic.count(r"^ran deploy") == 1


async def test_the_paused_turn_screen_edits_the_critics_history_and_its_model_in_the_other_process_reads_it(
    served, critic
) -> None:
    async with attached(served) as (hc, app), app.run_test(size=SIZE) as pilot:
        await until(lambda: app.ready, 60)
        ana = app.source.human
        cid = (await ana.open(type="conversation", target="critic")).channel_id
        await ana.send(cid, "the sync engine needs a queue")

        async def first_reply() -> bool:
            return bool(critic_texts(await hc.read_wal(cid), critic))

        await until_async(first_reply)
        app.open_break_when("agent:critic", on="turn")
        await wait_screen(pilot, BreakWhenScreen)
        await pilot.press("enter")
        await until(lambda: [b.on for b in app.breakpoints] == ["turn"])
        await ana.send(cid, "and a retry policy")

        await open_inbox_on(pilot, app, "turn")
        await pilot.press("enter")
        paused = await wait_screen(pilot, PausedTurnScreen)
        await pilot.press("e")
        area = paused.query_one("#turn-edit-messages", TextArea)
        await until(lambda: paused.focused is area)
        assert "the sync engine needs a queue" in area.text
        area.text = area.text.replace("the sync engine needs a queue", "HISTORY EDITED BY ANA")
        await pilot.pause()
        await pilot.press("ctrl+s")

        async def second_reply() -> bool:
            return len(critic_texts(await hc.read_wal(cid), critic)) >= 2

        await until_async(second_reply)
        said = critic_texts(await hc.read_wal(cid), critic)[-1]
        assert "HISTORY EDITED BY ANA" in said and "needs a queue" not in said, said
        records = [r for r in await hc.list_turns(channel_id=cid, agent_id=critic.agent_id) if r.operator]
        assert [r.operator.get("action") for r in records] == ["edit"]
        assert records[0].operator.get("by") == "ana" and "messages" in records[0].operator.get("changed", [])

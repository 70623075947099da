"""Stepping into a live network, end to end (issue 24, "What must show"): real WebSocket, real SQLite, the
agent in another process.

The critic runs in a process of its own (``tests/helpers/ws_agent.py``: an ag2net ``HubClient`` agent on a
``ScriptedModel``, attached over WebSocket), the hub is served by ``serve_ws`` on 127.0.0.1 (or is
``ag2net serve`` itself, for the restarts), and the operator is a ``HubClient`` dialled the way the workbench
attaches (``ag2net tui --connect``): on a loopback hub without a token it holds the operator role. The
person at the workbench is the human "ana" on that connection.

* a breakpoint on the critic's texts holds its posts before they are appended; the operator edits one,
  drops one and releases one, and the WAL, the audit log and the critic's own turn records say so;
* a turn breakpoint pauses the critic's turn in its own process before the model call: the operator edits
  its history (the model gets the edit) or answers in its place (no model call, the person's text posted as
  the critic's);
* an approval (the critic's ``deploy``, ``requires_approval=True``) waits while the operator's connection
  closes and a new one opens, and is answered exactly once;
* ``ag2net serve`` stopped (SIGTERM) or killed (SIGKILL) with posts held: the held posts are answered with
  an error (or lost with the connection, never acknowledged), none is in the WAL, the breakpoints are still
  there after the restart, and a post made again is admitted once.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from support import quiet, until
from ws_helpers import AgentProcess, ServeProcess, free_port

from ag2net import EV_PACKET, EV_TEXT, Envelope, HubClient, Passport
from ag2net.breakpoints import WaitingItem
from ag2net.client.turns import TurnRecord
from ag2net.errors import AccessDeniedError, NetworkError
from ag2net.hub import Hub
from ag2net.server import serve_ws
from ag2net.store import SqliteStore

CRITIC_TEXTS = "sender:critic type:ag2.msg.text"
"""The breakpoint of the walk-through: hold every text the critic posts."""


@pytest.fixture
async def served(tmp_path) -> AsyncIterator[tuple[Hub, str]]:
    """A hub on a SQLite file, served over WebSocket on a loopback port; its URL."""
    hub = await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            yield hub, f"ws://127.0.0.1:{server.port}"
    finally:
        await hub.close()


@pytest.fixture
async def critic(served) -> AsyncIterator[AgentProcess]:
    """The critic in its own process, attached over the wire. Its RPC timeout is 2 s: a held post outlives
    it only because the hub tells the client the post is held."""
    _, url = served
    agent = AgentProcess(url, "critic", rpc_timeout=2.0)
    await agent.start()
    try:
        yield agent
    finally:
        await agent.stop()


@contextlib.asynccontextmanager
async def operator(url: str) -> AsyncIterator[HubClient]:
    """A connection the way the workbench attaches (``ag2net tui --connect``): the operator role."""
    hc = HubClient.connect(url)
    try:
        await hc.open()
        yield hc
    finally:
        await hc.close()


async def waiting(
    op: HubClient, kind: str, channel_id: str, *, besides: frozenset[str] | set[str] = frozenset()
) -> WaitingItem:
    """The first item of ``kind`` waiting in ``channel_id`` (and not in ``besides``), once there is one."""
    found: list[WaitingItem] = []

    async def look() -> bool:
        found[:] = [
            item
            for item in await op.list_waiting(channel_id=channel_id)
            if item.kind == kind and item.state == "waiting" and item.item_id not in besides
        ]
        return bool(found)

    await until(look, 30, message=f"no {kind} item waiting in {channel_id}")
    return found[0]


async def texts_of(op: HubClient, channel_id: str, sender_id: str) -> list[str]:
    return [
        str(e.event_data.get("text"))
        for e in await op.read_wal(channel_id)
        if e.event_type == EV_TEXT and e.sender_id == sender_id
    ]


async def audit_kinds(op: HubClient) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for _, record in await op.list_audit():
        out.setdefault(record["kind"], []).append(record)
    return out


async def turn_of(op: HubClient, channel_id: str, agent_id: str, trigger: str) -> TurnRecord:
    """The agent's turn record for the trigger envelope ``trigger``, once it is recorded."""
    found: list[TurnRecord] = []

    async def look() -> bool:
        found[:] = await op.list_turns(channel_id=channel_id, agent_id=agent_id, trigger_envelope_id=trigger)
        return bool(found)

    await until(look, 30, message=f"no turn record for {trigger}")
    return found[-1]


async def seat(op: HubClient, critic: AgentProcess) -> tuple[Any, str]:
    """ana (the person at the workbench) and a conversation between her and the critic."""
    ana = await op.register_or_attach_human("ana")
    channel = await ana.open(type="conversation", target="critic")
    return ana, channel.channel_id


# ------------------------------------------------------------------------------------- held posts


async def test_critic_posts_held_over_the_wire_are_edited_dropped_and_released(served, critic):
    _, url = served
    async with operator(url) as op:
        ana, cid = await seat(op, critic)
        bp = await op.break_on(CRITIC_TEXTS)
        assert [b.breakpoint_id for b in await op.list_breakpoints()] == [bp.breakpoint_id]

        # 1. held before it is appended; edited, the edit is admitted in its place
        first = await ana.send(cid, "first point")
        item = await waiting(op, "held", cid)
        held = item.detail["envelope"]
        assert held["sender_id"] == critic.agent_id and "first point" in held["event_data"]["text"]
        assert item.detail["reason"] == "breakpoint" and item.detail["breakpoint_id"] == bp.breakpoint_id
        assert item.detail["would_be_seq"] == await op.wal_count(cid) + 1
        assert await texts_of(op, cid, critic.agent_id) == []  # not in the WAL, not delivered
        await asyncio.sleep(3)  # past the critic's 2 s RPC timeout: its post still waits, told it is held
        edited = Envelope.from_dict({**held, "event_data": {"text": "EDITED: the operator's words"}})
        answered = await op.answer_waiting(item.item_id, "edit", envelope=edited)
        assert answered.state == "answered"
        await until(lambda: texts_of(op, cid, critic.agent_id), 30)
        assert await texts_of(op, cid, critic.agent_id) == ["EDITED: the operator's words"]
        record = await turn_of(op, cid, critic.agent_id, first)
        assert record.reply_envelope_id, f"the critic's post got no answer: {record.error}"
        assert not record.error
        kinds = await audit_kinds(op)
        (edit,) = kinds["held_edited"]
        assert edit["by"] and edit["envelope_id"] == record.reply_envelope_id
        assert "first point" in str(edit["original"]) and "EDITED" in str(edit["edited"])
        with pytest.raises(NetworkError, match="already answered by"):
            await op.answer_waiting(item.item_id, "release")

        # 2. dropped: never admitted, the critic's post fails with the operator's reason
        second = await ana.send(cid, "second point")
        item2 = await waiting(op, "held", cid, besides={item.item_id})
        await op.answer_waiting(item2.item_id, "drop", reason="off topic")
        record2 = await turn_of(op, cid, critic.agent_id, second)
        error = record2.error or ""
        assert "dropped at a breakpoint by" in error and "off topic" in error, error
        assert not record2.reply_envelope_id
        assert len(await texts_of(op, cid, critic.agent_id)) == 1
        assert len((await audit_kinds(op))["held_dropped"]) == 1

        # 3. released as it was; then the breakpoint disabled lets the next one through at once
        third = await ana.send(cid, "third point")
        item3 = await waiting(op, "held", cid, besides={item.item_id, item2.item_id})
        await op.answer_waiting(item3.item_id, "release")
        await until(lambda: _count(texts_of(op, cid, critic.agent_id), 2), 30)
        assert "third point" in (await texts_of(op, cid, critic.agent_id))[-1]
        assert (await turn_of(op, cid, critic.agent_id, third)).reply_envelope_id
        await op.set_breakpoint(bp.breakpoint_id, False)
        await ana.send(cid, "fourth point")
        await until(lambda: _count(texts_of(op, cid, critic.agent_id), 3), 30)
        assert await op.list_waiting(channel_id=cid) == [] or all(
            i.state != "waiting" for i in await op.list_waiting(channel_id=cid)
        )


async def _count(texts: Any, n: int) -> bool:
    return len(await texts) >= n


# ------------------------------------------------------------------------------------- turns


async def test_a_turn_breakpoint_pauses_the_critic_in_its_own_process_and_the_operator_edits_its_history(
    served, critic
):
    _, url = served
    async with operator(url) as op:
        ana, cid = await seat(op, critic)
        await ana.send(cid, "the sync engine needs a queue")
        await until(lambda: texts_of(op, cid, critic.agent_id), 30)
        await op.break_on("agent:critic", on="turn")
        calls = critic.model_calls()
        trigger = await ana.send(cid, "and a retry policy")
        item = await waiting(op, "turn", cid)
        request = item.detail["request"]
        assert request["system_prompt"].endswith("You are critic, reviewing what others say.")
        assert any(t["name"] == "deploy" for t in request["tools"])
        assert "the sync engine needs a queue" in str(request["messages"])
        assert critic.model_calls() == calls  # paused before the model call
        await asyncio.sleep(3)  # past the critic's 2 s RPC timeout: a paused turn has none
        messages = _replace_text(request["messages"], "the sync engine needs a queue", "HISTORY EDITED")
        await op.answer_waiting(item.item_id, "edit", messages=messages)
        await until(lambda: _count(texts_of(op, cid, critic.agent_id), 2), 30)
        reply = (await texts_of(op, cid, critic.agent_id))[-1]
        assert "HISTORY EDITED" in reply and "the sync engine needs a queue" not in reply, reply
        record = await turn_of(op, cid, critic.agent_id, trigger)
        assert record.operator["action"] == "edit" and record.operator["by"]
        assert "messages" in record.operator.get("changed", [])
        assert "turn_paused" in (kinds := await audit_kinds(op)) and "turn_decided" in kinds


async def test_the_person_answers_as_the_critic_and_the_critics_model_is_not_called(served, critic):
    _, url = served
    async with operator(url) as op:
        ana, cid = await seat(op, critic)
        await op.break_on("agent:critic", on="turn")
        calls = critic.model_calls()
        trigger = await ana.send(cid, "who takes the conflict screen?")
        item = await waiting(op, "turn", cid)
        await op.answer_waiting(item.item_id, "answer", text="I will, said the person in the critic's seat.")
        await until(lambda: texts_of(op, cid, critic.agent_id), 30)
        assert await texts_of(op, cid, critic.agent_id) == ["I will, said the person in the critic's seat."]
        record = await turn_of(op, cid, critic.agent_id, trigger)
        assert record.operator["action"] == "answer" and record.operator["by"]
        assert critic.model_calls() == calls
        # skip: no post at all, and the channel goes on
        skipped = await ana.send(cid, "anything else?")
        item2 = await waiting(op, "turn", cid, besides={item.item_id})
        await op.answer_waiting(item2.item_id, "skip")
        assert (await turn_of(op, cid, critic.agent_id, skipped)).operator["action"] == "skip"
        assert len(await texts_of(op, cid, critic.agent_id)) == 1
        assert critic.model_calls() == calls


def _replace_text(value: Any, old: str, new: str) -> Any:
    """``value`` (event dicts) with every string containing ``old`` rewritten to contain ``new`` instead."""
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, list):
        return [_replace_text(v, old, new) for v in value]
    if isinstance(value, dict):
        return {k: _replace_text(v, old, new) for k, v in value.items()}
    return value


# ------------------------------------------------------------------------------------- approvals


async def test_an_approval_outlives_the_operators_connection_and_is_answered_once(served, critic):
    _, url = served
    async with operator(url) as op:
        ana, cid = await seat(op, critic)
        await ana.send(cid, "please deploy staging")
        item = await waiting(op, "approval", cid)
        assert item.detail["tool"] == "deploy" and item.detail["arguments"] == {"target": "staging"}
        assert item.agent_id == critic.agent_id
    # the workbench closed; the call still waits, in the hub, and the tool has not run
    await asyncio.sleep(3)  # past the critic's 2 s RPC timeout
    assert critic.count(r"^ran deploy") == 0
    async with operator(url) as op:
        again = await waiting(op, "approval", cid)
        assert again.item_id == item.item_id
        await op.answer_waiting(item.item_id, "approve")
        await critic.wait_line(r"^ran deploy staging$", timeout=30)
        await until(lambda: texts_of(op, cid, critic.agent_id), 30)
        assert await texts_of(op, cid, critic.agent_id) == ["critic: deploy said deployed to staging"]
        with pytest.raises(NetworkError, match="already answered by"):
            await op.answer_waiting(item.item_id, "deny", reason="too late")
        assert critic.count(r"^ran deploy") == 1
        kinds = await audit_kinds(op)
        assert len(kinds["approval_requested"]) == 1 and len(kinds["approval_decided"]) == 1


async def test_a_denied_approval_returns_the_reason_and_an_edited_one_runs_with_the_new_arguments(
    served, critic
):
    _, url = served
    async with operator(url) as op:
        ana, cid = await seat(op, critic)
        await ana.send(cid, "please deploy production")
        item = await waiting(op, "approval", cid)
        await op.answer_waiting(item.item_id, "deny", reason="not on a Friday")
        await until(lambda: texts_of(op, cid, critic.agent_id), 30)
        (reply,) = await texts_of(op, cid, critic.agent_id)
        assert "denied by" in reply and "not on a Friday" in reply, reply
        assert critic.count(r"^ran deploy") == 0
        await ana.send(cid, "please deploy production")
        item2 = await waiting(op, "approval", cid, besides={item.item_id})
        await op.answer_waiting(item2.item_id, "edit", arguments={"target": "canary"})
        await critic.wait_line(r"^ran deploy canary$", timeout=30)
        await until(lambda: _count(texts_of(op, cid, critic.agent_id), 2), 30)
        assert (await texts_of(op, cid, critic.agent_id))[-1] == "critic: deploy said deployed to canary"
        assert critic.count(r"^ran deploy") == 1


# ------------------------------------------------------------------------------------- restarts


async def _post_held(url: str, cid: str, text: str) -> tuple[HubClient, asyncio.Task[str]]:
    """ana's post of ``text`` on its own connection, left waiting (held): the connection and the post."""
    hc = HubClient.connect(url)
    await hc.open()
    ana = await hc.attach_human("ana")
    return hc, asyncio.create_task(ana.send(cid, text))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "crashed"])
async def test_a_hub_restarted_with_posts_held_keeps_its_breakpoints_and_admits_each_post_once(
    tmp_path, signum
):
    db, port = tmp_path / "served.db", free_port()
    hub = ServeProcess(db, port)
    await hub.start()
    posters: list[HubClient] = []
    try:
        async with operator(hub.url) as op:
            ana = await op.register_or_attach_human("ana")
            await op.register_or_attach_human("ben")
            cid = (await ana.open(type="conversation", target="ben")).channel_id
            bp = await op.break_on("sender:ana text:held")
            before = await op.wal_count(cid)
        pending = []
        for text in ("held one", "held two"):
            hc, post = await _post_held(hub.url, cid, text)
            posters.append(hc)
            pending.append(post)
        async with operator(hub.url) as op:
            await until(lambda: _n_waiting(op, cid, 2), 30, message="the two posts were not held")
        await hub.stop(signum)
        for post in pending:
            with pytest.raises(NetworkError) as caught:
                await asyncio.wait_for(post, 30)
            if signum == signal.SIGTERM:  # a clean stop answers every held post before it goes
                assert "the hub stopped while this post was held" in str(caught.value), caught.value
        for hc in posters:
            await hc.close()
        posters.clear()

        hub = ServeProcess(db, port)
        await hub.start()
        async with operator(hub.url) as op:
            assert [(b.breakpoint_id, b.spec) for b in await op.list_breakpoints()] == [
                (bp.breakpoint_id, bp.spec)
            ]
            assert await op.wal_count(cid) == before  # none of the held posts was admitted
            assert [i for i in await op.list_waiting() if i.state == "waiting"] == []
            hc, post = await _post_held(hub.url, cid, "held one")  # made again: held again
            posters.append(hc)
            item = await waiting(op, "held", cid)
            await op.answer_waiting(item.item_id, "release")
            envelope_id = await asyncio.wait_for(post, 30)
            wal = await op.read_wal(cid)
            assert [e.envelope_id for e in wal if e.event_data.get("text") == "held one"] == [envelope_id]
            assert not any(e.event_data.get("text") == "held two" for e in wal)
    finally:
        for hc in posters:
            await hc.close()
        await hub.stop()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["stopped", "crashed"])
async def test_an_approval_pending_when_the_hub_goes_never_runs_the_tool_and_the_critic_comes_back(
    tmp_path, signum
):
    """The critic (its own process) waits for an approval when ``ag2net serve`` stops or is killed: the tool
    does not run, no approval outlives the hub, and after the restart the critic's link is back: asked
    again, it waits again, and approved, runs once."""
    db, port = tmp_path / "served.db", free_port()
    hub = ServeProcess(db, port)
    await hub.start()
    critic = AgentProcess(hub.url, "critic")
    await critic.start()
    try:
        async with operator(hub.url) as op:
            ana = await op.register_or_attach_human("ana")
            cid = (await ana.open(type="conversation", target="critic")).channel_id
            await ana.send(cid, "please deploy staging")
            await waiting(op, "approval", cid)
        await hub.stop(signum)
        hub = ServeProcess(db, port)
        await hub.start()
        async with operator(hub.url) as op:
            assert [i for i in await op.list_waiting() if i.state == "waiting"] == []
            assert critic.count(r"^ran deploy") == 0
            ana = await op.register_or_attach_human("ana")
            cid = (await ana.open(type="conversation", target="critic")).channel_id  # the link came back
            await ana.send(cid, "please deploy canary")
            item = await waiting(op, "approval", cid)
            await op.answer_waiting(item.item_id, "approve")
            await critic.wait_line(r"^ran deploy canary$", timeout=30)
            await until(lambda: texts_of(op, cid, critic.agent_id), 30)
            assert await texts_of(op, cid, critic.agent_id) == ["critic: deploy said deployed to canary"]
        assert critic.count(r"^ran deploy") == 1
    finally:
        await critic.stop()
        await hub.stop()


async def _n_waiting(op: HubClient, cid: str, n: int) -> bool:
    return len([i for i in await op.list_waiting(channel_id=cid) if i.state == "waiting"]) >= n


# ------------------------------------------------------------------------------------- the demo


async def test_ag2net_serve_demo_approvals_makes_the_reviewer_wait_for_a_person_over_the_wire(tmp_path):
    hub = ServeProcess(tmp_path / "demo.db", free_port(), "--demo", "--approvals")
    await hub.start()
    try:
        async with operator(hub.url) as op:
            items: list[WaitingItem] = []

            async def approval() -> bool:
                items[:] = [i for i in await op.list_waiting() if i.kind == "approval"]
                return bool(items)

            await until(approval, 120, message="the reviewer never asked to approve")
            (item,) = items
            assert item.detail["tool"] == "approve" and item.detail["arguments"]["summary"]
            assert (await op.get_agent(item.agent_id)).name == "reviewer"
            workflow = item.channel_id
            assert not (await op.get_channel(workflow)).is_terminal()
            await op.answer_waiting(item.item_id, "approve")

            async def closed() -> bool:
                return (await op.get_channel(workflow)).is_terminal()

            await until(closed, 60, message="the workflow did not end after the approval")
            bodies = [
                e.event_data.get("body") for e in await op.read_wal(workflow) if e.event_type == EV_PACKET
            ]
            assert bodies[-1] == "Approved: ready to publish."
    finally:
        await hub.stop()


def test_serve_approvals_without_demo_is_one_sentence(tmp_path):
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "serve", "--approvals", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "--approvals" in done.stderr and "add --demo" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("answer", ["deny", "hold"])
async def test_the_demo_script_waits_while_a_person_decides(answer):
    """With a 1 s step timeout the script would close the workflow under the person: it waits instead, for
    an approval (then denied: the reviewer says so and the workflow ends) or a held post (then released)."""
    from ag2net.demo import start_demo

    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        if answer == "hold":
            await hc.break_on("sender:reviewer type:ag2.packet", by="ana")
        demo = await start_demo(hc, approvals=answer == "deny", step_timeout=1.0)
        kind = "approval" if answer == "deny" else "held"
        items: list[WaitingItem] = []

        async def asked() -> bool:
            items[:] = [i for i in await hc.list_waiting() if i.kind == kind]
            return bool(items)

        await until(asked, 60)
        item = items[0]
        await asyncio.sleep(3)  # three step timeouts
        assert not (await hc.get_channel(item.channel_id)).is_terminal()
        if answer == "deny":
            await hc.answer_waiting(item.item_id, "deny", reason="legal has not seen it", by="ana")
        else:
            await hc.remove_breakpoint((await hc.list_breakpoints())[0].breakpoint_id)
            await hc.answer_waiting(item.item_id, "release", by="ana")
        await asyncio.wait_for(demo.run(), 120)
        wal = await hc.read_wal(item.channel_id)
        closed = [e for e in wal if e.event_type == "ag2.channel.closed"]
        assert closed and closed[-1].event_data.get("reason") != "demo_step_timeout"
        bodies = [str(e.event_data.get("body")) for e in wal if e.event_type == EV_PACKET]
        if answer == "deny":
            assert "denied by ana" in bodies[-1] and "legal has not seen it" in bodies[-1], bodies
        await demo.close()
    finally:
        await hc.close()
        await hub.close()


# ------------------------------------------------------------------------------------- operators only


async def test_on_a_token_server_only_the_operator_token_steps_in_and_a_participant_never_reads_the_spec(
    tmp_path,
):
    hub = await Hub.open(SqliteStore(tmp_path / "token.db"), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0, token="net-token", operator_token="op-token") as server:
            url = f"ws://127.0.0.1:{server.port}"
            critic = AgentProcess(url, "critic", rpc_timeout=2.0, token="net-token")
            await critic.start()
            participant = HubClient.connect(url, token="net-token", rpc_timeout=2.0)
            op = HubClient.connect(url, token="net-token", operator_token="op-token")
            try:
                ana = await participant.register_human(Passport(name="ana", kind="human"))
                for call in (
                    lambda: participant.break_on("sender:critic"),
                    lambda: participant.list_waiting(),
                    lambda: participant.list_breakpoints(),
                ):
                    with pytest.raises(AccessDeniedError):
                        await call()
                secret_spec = "sender:critic text:point"
                await op.break_on(secret_spec)
                cid = (await ana.open(type="conversation", target="critic")).channel_id
                first = await ana.send(cid, "a point to review")
                item = await waiting(op, "held", cid)
                with pytest.raises(AccessDeniedError) as refused:
                    await participant.answer_waiting(item.item_id, "release")
                assert secret_spec not in str(refused.value)
                await asyncio.sleep(3)  # the critic, a participant, waits past its 2 s RPC timeout
                answered = await op.answer_waiting(item.item_id, "drop", reason="not now")
                assert answered.answer.get("by")  # the server signs who answered
                record = await turn_of(op, cid, critic.agent_id, first)
                error = record.error or ""
                assert "dropped at a breakpoint by" in error and "not now" in error, error
                assert secret_spec not in error and "text:point" not in error
                assert await texts_of(op, cid, critic.agent_id) == []
            finally:
                await participant.close()
                await op.close()
                await critic.stop()
    finally:
        await hub.close()


# ------------------------------------------------------------------------------------- step mode


NOTE = "demo.note"
"""A discussion takes notes from anyone at any time (texts only from the speaker due): two of them can race."""


@pytest.mark.parametrize("order", ["ana_first", "ben_first"])
async def test_step_mode_over_the_wire_reproduces_a_race_of_two_posts_in_either_order(served, critic, order):
    """Two notes posted at once into a discussion over two connections, both held by step mode; released in
    the chosen order they are admitted in it, each with the seq the inbox gave it when it was released."""
    _, url = served
    async with operator(url) as op:
        ana = await op.register_or_attach_human("ana")
        ben_hc = HubClient.connect(url)
        try:
            await ben_hc.open()
            ben = await ben_hc.register_or_attach_human("ben")
            cid = (await ana.open(type="discussion", target=["ben", "critic"])).channel_id
            await until(lambda: _is_active(op, cid), 30, message="the discussion never became active")
            await op.step_mode(cid, on=True)
            notes = {
                "ana": Envelope(cid, ana.agent_id or "", None, NOTE, {"text": "ana: ship the log first"}),
                "ben": Envelope(cid, ben.agent_id or "", None, NOTE, {"text": "ben: ship the screen first"}),
            }
            posts = {
                "ana": asyncio.create_task(op.post_envelope(notes["ana"])),
                "ben": asyncio.create_task(ben_hc.post_envelope(notes["ben"])),
            }
            await until(lambda: _n_waiting(op, cid, 2), 30, message="the two notes were not both held")
            items = {op.name_for(i.agent_id): i for i in await op.list_waiting(channel_id=cid)}
            assert {i.detail["reason"] for i in items.values()} == {"step"}
            first, second = ("ana", "ben") if order == "ana_first" else ("ben", "ana")
            admitted = []
            for name in (first, second):
                (now,) = [
                    i for i in await op.list_waiting(channel_id=cid) if i.item_id == items[name].item_id
                ]
                await op.answer_waiting(now.item_id, "release")
                envelope_id = await asyncio.wait_for(posts[name], 30)
                admitted.append((now.detail["would_be_seq"], envelope_id))
            wal = await op.read_wal(cid)
            assert [(wal.index(e) + 1, e.envelope_id) for e in wal if e.event_type == NOTE] == admitted
            assert [str(e.event_data["text"]).split(":")[0] for e in wal if e.event_type == NOTE] == [
                first,
                second,
            ]
        finally:
            await ben_hc.close()


async def _is_active(op: HubClient, cid: str) -> bool:
    return (await op.get_channel(cid)).state == "active"

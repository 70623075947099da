"""The composer dry-run (``ag2net.debug.dry_run``, the ``dry_run`` op): the admission a real post runs, the
recipients, each participant's projection delta and the adapter state after, with nothing written or
delivered; refused for each admission rule with the very message a real post raises; over a real socket,
a participant dry-runs only as itself and an operator as anyone."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from support import quiet, run_demo, text

from ag2net import EV_TEXT, Envelope, Hub, HubClient, Passport
from ag2net.client.handler import ack_invite
from ag2net.debug import dry_run
from ag2net.envelope import EV_CHANNEL_INVITE, EV_TASK_CANCEL_REQUEST
from ag2net.errors import AccessDeniedError, NetworkError
from ag2net.identity import AccessBlock, InboxBlock, LimitsBlock, Rule
from ag2net.naming import channel_label
from ag2net.server import serve_ws
from ag2net.transport.ws import WsLink


async def humans(hc: HubClient, *names: str, **kw: Any) -> list[Any]:
    return [await hc.register_human(Passport(name=n, kind="human"), **kw) for n in names]


async def snapshot(hub: Hub, channel_id: str) -> dict[str, Any]:
    """Everything a post would change: the WAL (store and cache), counts, state, inboxes, ids, observers."""
    return {
        "store": await hub.store.read_wal(channel_id),
        "wal": [e.to_dict() for e in await hub.read_wal(channel_id)],
        "count": hub.wal_count(channel_id),
        "state": repr(hub.channels.states.get(channel_id)),
        "unacked": {k: sorted(v) for k, v in hub.delivery.unacked.items()},
        "mailboxes": {k: len(v) for k, v in hub.delivery.mailboxes.items()},
        "last_id": hub.ids.last_envelope_id(),
        "observe": hub.observe_position,
        "activity": hub.channels.last_activity.get(channel_id),
    }


# ------------------------------------------------------------------ what a dry run tells


async def test_a_dry_run_tells_recipients_projections_and_state_and_changes_nothing(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    got: list[Envelope] = []
    bob.on_envelope(lambda env: got.append(env) or asyncio.sleep(0))
    md = await hc.create_channel(
        creator_id=ana.agent_id,
        manifest_type="consulting",
        participants=[ana.agent_id, bob.agent_id],
    )
    cid = md.channel_id
    await hc.post_envelope(text(cid, ana.agent_id, "what is 2+2?"))
    await asyncio.sleep(0.05)
    got.clear()
    before = await snapshot(hub, cid)
    dry = await dry_run(hub, text(cid, bob.agent_id, "4", priority="urgent"))
    await asyncio.sleep(0.05)
    assert await snapshot(hub, cid) == before  # nothing written, stamped, counted or queued
    assert got == []  # nothing delivered
    assert dry.admitted and dry.refusal is None and dry.message == ""
    assert dry.recipient_ids == [ana.agent_id]
    [ana_row] = dry.recipients
    assert (ana_row["priority"], ana_row["rank"], ana_row["connected"], ana_row["order"]) == (
        "urgent",
        0,
        True,
        0,
    )
    # the consulting channel expects bob now, nobody after his reply, and closes on it
    assert dry.expected_before == {
        "agent_id": bob.agent_id,
        "triggering_envelope_id": before["wal"][-1]["envelope_id"],
    }
    assert dry.expected_after is None
    assert dry.closes == {"state": "closed", "reason": "consulting_complete"}
    assert (dry.state_before["respondent_replied"], dry.state_after["respondent_replied"]) == (False, True)
    # each participant's next projection gains the reply, in its own role
    assert dry.added_for(ana.agent_id) == [
        {"type": "model_request", "parts": [{"type": "text_input", "content": "4", "metadata": {}}]}
    ]
    assert dry.added_for(bob.agent_id) == [{"type": "model_message", "content": "4", "metadata": {}}]
    assert dry.projections[ana.agent_id]["removed"] == []
    assert dry.projections[ana.agent_id]["view"] == {"name": "full_transcript"}
    # and the post itself then does what the dry run said
    await hc.post_envelope(text(cid, bob.agent_id, "4"))
    assert (await hc.get_channel(cid)).close_reason == "consulting_complete"


async def test_a_windowed_view_shows_what_leaves_the_window(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(
        creator_id=ana.agent_id,
        manifest_type="conversation",
        participants=[ana.agent_id, bob.agent_id],
        knobs={"view_policy": {"name": "windowed_summary", "recent_n": 2}},
    )
    cid = md.channel_id
    for i in range(3):
        await hc.post_envelope(text(cid, ana.agent_id, f"m{i}"))
    dry = await dry_run(hub, text(cid, ana.agent_id, "m3"))
    delta = dry.projections[bob.agent_id]
    assert (delta["before"], delta["after"]) == (3, 3)  # a summary and the last two, before and after
    removed = [e.get("summary") or e["parts"][0]["content"] for e in delta["removed"]]
    added = [e.get("summary") or e["parts"][0]["content"] for e in delta["added"]]
    # the summary names its senders through the view's name_for (the hub's names), as the model reads it
    assert removed == ["Earlier in this channel: 1 message from ana.", "m1"]
    assert added == ["Earlier in this channel: 2 messages from ana.", "m3"]
    assert dry.state_after["turn_count"] == 4 and dry.expected_after is None


async def test_a_dry_run_on_the_demo_discussion_names_the_next_speaker():
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        [conv] = [
            md
            for md in hub.query_channels(include_terminal=True, limit=None)
            if md.manifest.type == "conversation"
        ]
        coder = demo["coder"].agent_id
        dry = await dry_run(hc, text(conv.channel_id, coder, "one more?"))
        assert not dry.admitted
        assert dry.refusal == {
            "error": "ProtocolError",
            "code": "protocol_error",
            "message": f"{channel_label('conversation', conv.channel_id)} is closed",
            "advice": " (reason: max_turns); open a new one",
        }
        # a fresh discussion among the demo's agents: the creator speaks first, then the next in order
        planner, critic = demo["planner"].agent_id, demo["critic"].agent_id
        for client in demo.agents.values():
            client.on_envelope(invites_only(client))  # they join, and take no turn of their own
        md = await hc.create_channel(
            creator_id=planner, manifest_type="discussion", participants=[planner, critic, coder]
        )
        dry = await dry_run(hc, text(md.channel_id, planner, "go"))
        assert dry.admitted and dry.recipient_ids == [critic, coder]
        assert dry.expected_after == {"agent_id": critic, "triggering_envelope_id": ""}
        refused = await dry_run(hc, text(md.channel_id, coder, "me first"))
        # the hub names the channel and the participants (issue 22 item 7), not three 32-hex ids
        assert (
            refused.message
            == f"{channel_label('discussion', md.channel_id)} expects planner to speak, got coder"
        )
    finally:
        await hc.close()
        await hub.close()


def invites_only(client: Any) -> Any:
    async def handle(envelope: Envelope) -> None:
        if envelope.event_type == EV_CHANNEL_INVITE:
            await ack_invite(client, envelope)

    return handle


# ------------------------------------------------------------------ one refusal per admission rule


async def refused_alike(hub: Hub, env: Envelope) -> Any:
    """The dry run refuses ``env`` with exactly the error a real post raises."""
    dry = await dry_run(hub, env.copy())
    with pytest.raises(NetworkError) as caught:
        await hub.post_envelope(env.copy())
    assert not dry.admitted
    assert dry.message == str(caught.value)
    assert dry.refusal["error"] == type(caught.value).__name__
    assert dry.refusal["code"] == caught.value.code
    assert type(dry.error()) is type(caught.value) or dry.refusal["code"] == "error"
    return dry


@pytest.fixture
async def pair(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    return ana.agent_id, bob.agent_id, md.channel_id


async def test_refused_shape(hub, pair):
    ana, _, cid = pair
    dry = await refused_alike(hub, text(cid, ana, "hi", priority="soon"))
    assert dry.message.startswith("priority must be one of")


async def test_refused_unregistered_sender(hub, pair):
    _, _, cid = pair
    dry = await refused_alike(hub, text(cid, "nobody", "hi"))
    assert dry.message == "sender not registered: nobody"


async def test_refused_outbound_rule(hub, hc):
    ana, bob, carol = await humans(hc, "ana", "bob", "carol")
    md = await hc.create_channel(
        creator_id=ana.agent_id,
        manifest_type="discussion",
        participants=[ana.agent_id, bob.agent_id, carol.agent_id],
    )
    await hub.set_rule(ana.agent_id, Rule(access=AccessBlock(outbound_to=["bob"])))
    dry = await refused_alike(hub, text(md.channel_id, ana.agent_id, "psst", audience=[carol.agent_id]))
    assert dry.refusal["error"] == "AccessDeniedError"


async def test_refused_delegation_depth(hub, pair):
    ana, _, cid = pair
    dry = await refused_alike(hub, text(cid, ana, "deep", depth=6))
    assert dry.message == "sender 'ana' exceeded delegation_depth (6 > 5)"


async def test_refused_unknown_channel(hub, pair):
    ana, _, _ = pair
    dry = await refused_alike(hub, text("no-such-channel", ana, "hi"))
    assert dry.message == "channel not found: no-such-channel"


async def test_refused_closed_channel(hub, hc, pair):
    ana, _, cid = pair
    await hc.close_channel(cid, reason="done")
    dry = await refused_alike(hub, text(cid, ana, "hi"))
    assert (
        dry.message == f"{channel_label('conversation', cid)} is closed"
        and dry.refusal["advice"] == " (reason: done); open a new one"
    )


async def test_refused_pending_channel(hub, hc):
    ana = (await humans(hc, "ana"))[0]
    slow = (await humans(hc, "slow", auto_ack_invites=False))[0]
    opening = asyncio.ensure_future(
        hc.create_channel(
            creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, slow.agent_id]
        )
    )
    try:
        for _ in range(300):
            pending = [md for md in hub.channels.values() if md.state == "pending"]
            if pending:
                break
            await asyncio.sleep(0.01)
        [md] = pending
        dry = await refused_alike(hub, text(md.channel_id, ana.agent_id, "hello?"))
        assert dry.message == f"{channel_label('conversation', md.channel_id)} not active (state=pending)"
    finally:
        opening.cancel()
        with pytest.raises((asyncio.CancelledError, NetworkError)):
            await opening


async def test_refused_non_participant(hub, hc, pair):
    _, _, cid = pair
    eve = (await humans(hc, "eve"))[0]
    dry = await refused_alike(hub, text(cid, eve.agent_id, "let me in"))
    assert (
        dry.message == f"{channel_label('conversation', cid)} only accepts sends from participants, got eve"
    )


async def test_refused_audience_outside_the_channel(hub, hc, pair):
    ana, _, cid = pair
    eve = (await humans(hc, "eve"))[0]
    dry = await refused_alike(hub, text(cid, ana, "hi", audience=[eve.agent_id]))
    assert dry.message.startswith("audience must list only participants of the channel")


class Deaf:
    """A connection that takes deliveries and never acknowledges them."""

    endpoint_id = "deaf"

    async def notify(self, agent_id: str, envelope: Envelope) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_refused_full_inbox(hub, hc):
    ana = (await humans(hc, "ana"))[0]
    bob = (await humans(hc, "bob", rule=Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=1)))))[0]
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    hub.bind_endpoint(Deaf(), bob.agent_id)
    await hub.post_envelope(text(md.channel_id, ana.agent_id, "one"))
    dry = await refused_alike(hub, text(md.channel_id, ana.agent_id, "two"))
    assert dry.refusal["error"] == "InboxFull"
    assert dry.message == "recipient bob inbox at capacity (1 >= 1)"


async def test_refused_by_the_adapter(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="consulting", participants=[ana.agent_id, bob.agent_id]
    )
    dry = await refused_alike(hub, text(md.channel_id, bob.agent_id, "an answer before the question"))
    assert "expects first send from initiator" in dry.message


async def test_refused_text_no_store_can_hold(hub, pair):
    ana, _, cid = pair
    dry = await refused_alike(hub, text(cid, ana, "bad \ud800 text"))
    assert "surrogate" in dry.message


async def test_refused_second_peer_cancel(hub, hc):
    """A non-participant may ask a task's owner to cancel once; the second request is refused."""
    from ag2net.tasks import TaskMetadata, TaskSpec, TaskState

    ana, bob, eve = await humans(hc, "ana", "bob", "eve")
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    await hub.observe_task(
        TaskMetadata("t-1", ana.agent_id, TaskSpec("work"), TaskState.RUNNING, channel_id=md.channel_id)
    )
    cancel = Envelope(
        md.channel_id,
        eve.agent_id,
        [ana.agent_id],
        EV_TASK_CANCEL_REQUEST,
        {"task_id": "t-1", "reason": "stop"},
        task_id="t-1",
    )
    assert (await dry_run(hub, cancel.copy())).admitted
    await hub.post_envelope(cancel.copy())
    dry = await refused_alike(hub, cancel)
    assert (
        dry.message
        == f"{channel_label(md.manifest.type, md.channel_id)} only accepts sends from participants, got eve"
    )


# ------------------------------------------------------------------ over a real socket


async def test_the_dry_run_op_over_a_websocket(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(
        creator_id=ana.agent_id, manifest_type="conversation", participants=[ana.agent_id, bob.agent_id]
    )
    cid = md.channel_id
    here = await dry_run(hc, text(cid, ana.agent_id, "hi"))
    async with serve_ws(hub, "127.0.0.1", 0, operator_token="op") as server:
        operator = HubClient.connect(
            server.url(), operator_token="op", rpc_timeout=10, identity_secrets=False
        )
        plain = HubClient(WsLink(server.url()))
        try:
            there = await dry_run(operator, text(cid, ana.agent_id, "hi"))
            assert there == here  # the same answer on both links
            # a connection that holds no identity may not dry-run as someone else
            with pytest.raises(AccessDeniedError, match="not bound to agent"):
                await dry_run(plain, text(cid, ana.agent_id, "hi"))
            # as itself it may: a participant of its own, refused by admission (not a participant here)
            carl = await plain.register_human(Passport(name="carl", kind="human"))
            mine = await dry_run(plain, text(cid, carl.agent_id, "hi"))
            assert (
                mine.message
                == f"{channel_label('conversation', cid)} only accepts sends from participants, got carl"
            )
            refused = await dry_run(operator, text(cid, "nobody", "hi"))
            assert refused.message == "sender not registered: nobody"
        finally:
            await operator.close()
            await plain.close()
    assert await hub.read_wal(cid) == await hc.read_wal(cid)
    assert [e.event_type for e in await hub.read_wal(cid)].count(EV_TEXT) == 0

"""Hub behaviour on both stores: reference §11 items 1–10, 19, 22–24 rewritten for our decisions."""

from __future__ import annotations

import asyncio

import pytest
from support import until

from ag2net import (
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    AccessDeniedError,
    Agent,
    Envelope,
    HubClient,
    InboxFull,
    NotFoundError,
    Passport,
    ProtocolError,
    Resume,
    Rule,
    ScriptedModel,
)
from ag2net.channel import ChannelState
from ag2net.hub import Hub
from ag2net.identity import InboxBlock, LimitsBlock
from ag2net.ids import ID_RE, ManualClock
from ag2net.naming import channel_label
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState


class Recorder:
    """A listener that keeps every hook call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def __getattr__(self, name: str):
        if not name.startswith("on_"):
            raise AttributeError(name)

        async def hook(*args):
            self.calls.append((name, args))

        return hook

    def named(self, name: str) -> list[tuple]:
        return [args for n, args in self.calls if n == name]


async def test_ids_and_created_at(hub):
    hc = HubClient.local(hub)
    a = await hc.register(Agent("alice", ScriptedModel()), attach_plugin=False)
    b = await hc.register(Agent("bob", ScriptedModel()), attach_plugin=False)
    assert a.agent_id != b.agent_id
    for client in (a, b):
        assert ID_RE.fullmatch(client.agent_id)
        created = client.passport.created_at
        assert created.endswith("Z") and len(created) == len("2026-11-29T20:53:59.053435Z")


async def test_duplicate_and_id_shaped_names(hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    with pytest.raises(ProtocolError) as err:
        await hc.register_human(Passport(name="alice", kind="human"))
    assert str(err.value) == (
        f"name 'alice' already registered (agent_id={alice.agent_id}); unregister it before re-registering."
    )
    with pytest.raises(ProtocolError, match="has the shape of, an agent id"):
        await hc.register_human(Passport(name="0123456789abcdef0123456789abcdef", kind="human"))


async def test_register_kind_checks(hub):
    hc = HubClient.local(hub)
    with pytest.raises(ValueError, match="register_human"):
        await hc.register(Agent("h", ScriptedModel()), Passport(name="h", kind="human"))
    with pytest.raises(ValueError, match="requires kind='human'"):
        await hc.register_human(Passport(name="a", kind="agent"))


async def test_list_agents_by_kind(hub):
    hc = HubClient.local(hub)
    await hc.register(Agent("plain", ScriptedModel()), Passport(name="plain"), attach_plugin=False)
    await hc.register(
        Agent("typed", ScriptedModel()), Passport(name="typed", kind="agent"), attach_plugin=False
    )
    await hc.register_human(Passport(name="person", kind="human"))
    agents = {p.name for p in hub.query_agents(kind="agent")}
    assert agents == {"plain", "typed"}
    assert {p.name for p in hub.query_agents(kind="human")} == {"person"}


async def consulting_pair(hub, reply="ans"):
    hc = HubClient.local(hub)
    bob = await hc.register(Agent("bob", ScriptedModel(reply)), attach_plugin=False)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    return hc, alice, bob


async def test_consulting_round_wal_and_close(hub):
    recorder = Recorder()
    hub.register_listener(recorder)
    _hc, alice, bob = await consulting_pair(hub)
    ch = await alice.open(type="consulting", target="bob")
    prompt_id = await alice.send(ch.channel_id, "question?")
    await until(lambda: hub.lookup_channel(ch.channel_id).is_terminal())
    wal = await hub.read_wal(ch.channel_id)
    assert [e.event_type for e in wal] == [
        "ag2.channel.invite",
        "ag2.channel.invite.ack",
        "ag2.channel.opened",
        "ag2.msg.text",
        "ag2.msg.text",
        "ag2.channel.closed",
    ]
    reply = wal[4]
    assert reply.sender_id == bob.agent_id and reply.event_data == {"text": "ans"}
    assert reply.causation_id == prompt_id
    md = hub.lookup_channel(ch.channel_id)
    assert md.state == ChannelState.CLOSED and md.close_reason == "consulting_complete"
    assert [e.seq for e in []] == []
    # a third send hits the terminal check and fires on_envelope_rejected
    with pytest.raises(ProtocolError) as err:
        await alice.send(ch.channel_id, "again")
    assert str(err.value) == f"{channel_label('consulting', ch.channel_id)} is closed"
    assert recorder.named("on_envelope_rejected")
    assert len(await hub.read_wal(ch.channel_id)) == 6


async def test_invite_timeout(store_factory):
    hub = await Hub.open(
        store_factory(), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=0.2
    )
    try:
        hc = HubClient.local(hub)
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        await hc.register_human(Passport(name="mute", kind="human"), auto_ack_invites=False)
        with pytest.raises(ProtocolError, match=r"ack timeout"):
            await alice.open(type="consulting", target="mute")
        (md,) = hub.query_channels(include_terminal=True)
        assert md.state == ChannelState.CLOSED and md.close_reason == "invite_timeout"
        assert [e.event_type for e in await hub.read_wal(md.channel_id)] == [
            "ag2.channel.invite",
            "ag2.channel.closed",
        ]
    finally:
        await hub.close()


async def test_invite_reject(hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    carol = await hc.register_human(Passport(name="carol", kind="human"), auto_ack_invites=False)

    async def reject(env: Envelope) -> None:
        if env.event_type == EV_CHANNEL_INVITE:
            await carol.post_envelope(
                Envelope(
                    env.channel_id,
                    carol.agent_id,
                    None,
                    EV_CHANNEL_INVITE_REJECT,
                    {"channel_id": env.channel_id},
                )
            )

    carol.on_envelope(reject)
    with pytest.raises(ProtocolError, match="closed during handshake: invite_rejected"):
        await alice.open(type="consulting", target="carol")
    (md,) = hub.query_channels(include_terminal=True)
    assert md.rejected_by == [carol.agent_id]


async def test_hand_posted_ack(hub):
    """The seed: ``auto_ack_invites=False`` then ``post_envelope`` an ack yourself."""
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"), auto_ack_invites=False)

    async def gate(env: Envelope) -> None:
        if env.event_type == EV_CHANNEL_INVITE:
            await bob.post_envelope(
                Envelope(
                    env.channel_id,
                    "",
                    None,
                    EV_CHANNEL_INVITE_ACK,
                    {"channel_id": env.channel_id},
                    causation_id=env.envelope_id,
                )
            )

    bob.on_envelope(gate)
    ch = await alice.open(type="conversation", target="bob")
    assert ch.state == ChannelState.ACTIVE


async def test_pending_channel_refuses_text(hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    await hc.register_human(Passport(name="slow", kind="human"), auto_ack_invites=False)
    task = asyncio.create_task(alice.open(type="conversation", target="slow"))
    await until(lambda: bool(hub.channels))
    (md,) = hub.channels.values()
    assert md.state == ChannelState.PENDING
    with pytest.raises(ProtocolError) as err:
        await alice.send(md.channel_id, "too early")
    assert str(err.value) == f"{channel_label(md.manifest.type, md.channel_id)} not active (state=pending)"
    # a protocol-prefixed custom event is accepted while pending
    await alice.post_envelope(Envelope(md.channel_id, alice.agent_id, None, "ag2.channel.custom_probe", {}))
    task.cancel()
    await hub.close_channel(md.channel_id)


async def test_non_participant_and_peer_cancel(hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    bob = await hc.register_human(Passport(name="bob", kind="human"))
    eve = await hc.register_human(Passport(name="eve", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    with pytest.raises(ProtocolError) as err:
        await eve.send(ch.channel_id, "let me in")
    assert (
        str(err.value)
        == f"{channel_label('conversation', ch.channel_id)} only accepts sends from participants, got eve"
    )
    await hub.observe_task(
        TaskMetadata("task-1", bob.agent_id, TaskSpec("work"), TaskState.RUNNING, channel_id=ch.channel_id)
    )
    cancel = Envelope(
        ch.channel_id,
        eve.agent_id,
        [bob.agent_id],
        EV_TASK_CANCEL_REQUEST,
        {"task_id": "task-1", "reason": "stop"},
        task_id="task-1",
    )
    await eve.post_envelope(cancel)
    with pytest.raises(ProtocolError, match="only accepts sends from participants"):
        await eve.post_envelope(
            Envelope(
                ch.channel_id,
                eve.agent_id,
                [bob.agent_id],
                EV_TASK_CANCEL_REQUEST,
                {"task_id": "task-1", "reason": "stop"},
                task_id="task-1",
            )
        )


async def test_skill_fallback_and_audit(hub):
    hc = HubClient.local(hub)
    bob = await hc.register(
        Agent("bob", ScriptedModel()),
        Passport(name="bob"),
        Resume(summary="Bob does X."),
        attach_plugin=False,
    )
    info = hub.get_skill_info(bob.agent_id)
    assert info["generated"] is True
    assert info["skill_md"] == "---\nname: bob\ndescription: Bob does X.\n---\n"
    await hub.set_skill(bob.agent_id, "---\ntitle: B\n---\nbody\n")
    assert hub.get_skill_info(bob.agent_id) == {"skill_md": "---\ntitle: B\n---\nbody\n", "generated": False}
    await hub.set_skill(bob.agent_id, None)
    audit = [rec for _, rec in await hub.store.read_audit()]
    skill_records = [r for r in audit if r["kind"] == "skill_set"]
    assert [r["removed"] for r in skill_records] == [False, True]
    assert {"kind", "source", "agent_id", "version"} <= set(skill_records[0])
    assert skill_records[0]["source"] == "tenant"


async def test_inbox_full_counts_unacknowledged(hub):
    recorder = Recorder()
    hub.register_listener(recorder)
    hc = HubClient.local(hub)
    sender = await hc.register_human(Passport(name="sender", kind="human"))
    rule = Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=2)))
    gate = asyncio.Event()
    busy = await hc.register_human(Passport(name="busy", kind="human"), rule=rule)
    ch = await sender.open(type="conversation", target="busy")

    async def stall(env: Envelope) -> None:
        if env.event_type == EV_TEXT:
            await gate.wait()

    busy.on_envelope(stall)
    await sender.send(ch.channel_id, "one")
    await sender.send(ch.channel_id, "two")
    with pytest.raises(InboxFull) as err:
        await sender.send(ch.channel_id, "three")
    assert str(err.value) == f"recipient {busy.name} inbox at capacity (2 >= 2)"
    await until(lambda: len(recorder.named("on_inbox_pressure")) == 1)
    await asyncio.sleep(0.02)
    assert len(recorder.named("on_inbox_pressure")) == 1
    gate.set()
    await until(lambda: hub.pending_inbox(busy.agent_id) == 0)
    await sender.send(ch.channel_id, "three")


async def test_ttl_expiry(store_factory):
    clock = ManualClock("2026-11-29T10:00:00.000000Z")
    hub = await Hub.open(store_factory(), clock=clock, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc = HubClient.local(hub)
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        await hc.register_human(Passport(name="bob", kind="human"))
        ch = await alice.open(type="conversation", target="bob", ttl="1m")
        assert await hub.expire_due() == 0
        clock.advance(61)
        assert await hub.expire_due() == 1
        md = hub.lookup_channel(ch.channel_id)
        assert md.state == ChannelState.EXPIRED and md.close_reason == "ttl_expired"
        wal = await hub.read_wal(ch.channel_id)
        assert wal[-1].event_type == "ag2.channel.expired"
        assert wal[-1].event_data == {"reason": "ttl_expired", "channel_id": ch.channel_id}
        kinds = [rec["kind"] for _, rec in await hub.store.read_audit()]
        assert "channel_expired" in kinds
    finally:
        await hub.close()


async def test_close_unknown_channel_is_not_found(hub):
    with pytest.raises(NotFoundError, match="channel not found: nope"):
        await hub.close_channel("nope")


async def test_close_closed_channel_keeps_reason(hub):
    hc = HubClient.local(hub)
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    await hc.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    await hub.close_channel(ch.channel_id, reason="first")
    md = await hub.close_channel(ch.channel_id, reason="second")
    assert md.close_reason == "first"


async def test_depth_refused(hub):
    hc = HubClient.local(hub)
    rule = Rule(limits=LimitsBlock(delegation_depth=2))
    alice = await hc.register_human(Passport(name="alice", kind="human"), rule=rule)
    await hc.register_human(Passport(name="bob", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    await alice.send_envelope(Envelope(ch.channel_id, alice.agent_id, None, EV_TEXT, {"text": "d2"}, depth=2))
    with pytest.raises(AccessDeniedError, match=r"exceeded delegation_depth \(3 > 2\)"):
        await alice.send_envelope(
            Envelope(ch.channel_id, alice.agent_id, None, EV_TEXT, {"text": "d3"}, depth=3)
        )


async def test_outbound_rule(hub):
    hc = HubClient.local(hub)
    dave = await hc.register_human(Passport(name="dave", kind="human"))
    await hc.register_human(Passport(name="alice", kind="human"))
    ch = await dave.open(type="conversation", target="alice")
    from ag2net.identity import AccessBlock

    await dave.set_rule(Rule(access=AccessBlock(outbound_to=["bob*"])))
    alice_id = hub.find_agent_id("alice")
    with pytest.raises(AccessDeniedError, match="sender 'dave' not permitted to send to 'alice'"):
        await dave.send(ch.channel_id, "hi", audience=[alice_id])

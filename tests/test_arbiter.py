"""The arbiter seam (reference §3.13): custom decisions at send, inbox, dispatch and channel open.

Every test runs a real hub (SQLite and memory stores, ``conftest.hub``) with in-process clients, and
checks what the arbiter's decision does to the WAL, to deliveries and to the caller.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from support import until

from ag2net import (
    EV_TEXT,
    AccessDeniedError,
    Allow,
    BaseHubArbiter,
    Decision,
    Deny,
    Envelope,
    HubArbiter,
    HubClient,
    InboxFull,
    NetworkError,
    Passport,
    ProtocolError,
    Rule,
    RuleBasedArbiter,
)
from ag2net.identity import AccessBlock, InboxBlock, LimitsBlock

SECRET = "acme.secret"
NOTE = "acme.note"


async def humans(hub, *names, rules=None):
    hc = HubClient.local(hub)
    rules = rules or {}
    return [await hc.register_human(Passport(name=n, kind="human"), rule=rules.get(n)) for n in names]


def collect(client, kind=None):
    got: list[Envelope] = []

    async def keep(env: Envelope) -> None:
        if kind is None or env.event_type == kind:
            got.append(env)

    client.on_envelope(keep)
    return got


async def stored_event_types(hub, channel_id):
    """The WAL as the store holds it (not the hub's cache)."""
    import json

    return [json.loads(text)["event_type"] for text in await hub.store.read_wal(channel_id)]


class NoSecrets(BaseHubArbiter):
    """Written the way ag2 users write one: subclass, override one gate, register."""

    async def authorize_send(self, envelope, sender, sender_rule, recipients):
        if envelope.event_type == SECRET:
            return Deny(f"{sender.name} may not post {SECRET}")
        return Allow()


class Rejections:
    def __init__(self) -> None:
        self.seen: list[tuple[str, BaseException]] = []

    async def on_envelope_rejected(self, envelope, error):
        self.seen.append((envelope.event_type, error))


async def test_default_arbiter_is_rule_based(hub):
    assert type(hub.arbiter) is RuleBasedArbiter
    assert isinstance(hub.arbiter, HubArbiter)
    assert isinstance(BaseHubArbiter(), HubArbiter)


async def test_custom_event_type_denied_with_reason_and_nothing_stored(hub):
    alice, bob = await humans(hub, "alice", "bob")
    ch = await alice.open(type="conversation", target="bob")
    notes = collect(bob, NOTE)
    rejections = Rejections()
    hub.register_listener(rejections)
    arbiter = NoSecrets()
    hub.register_arbiter(arbiter)
    assert hub.arbiter is arbiter
    before = await stored_event_types(hub, ch.channel_id)

    secret = Envelope(ch.channel_id, alice.agent_id, None, SECRET, {"x": 1})
    with pytest.raises(AccessDeniedError) as err:
        await hub.post_envelope(secret)
    assert str(err.value) == f"alice may not post {SECRET}"
    assert not secret.envelope_id  # never stamped
    with pytest.raises(AccessDeniedError, match=r"alice may not post acme\.secret"):
        await alice.send_envelope(Envelope(ch.channel_id, alice.agent_id, [bob.agent_id], SECRET, {}))
    assert await stored_event_types(hub, ch.channel_id) == before
    assert [e.event_type for e in await hub.read_wal(ch.channel_id)] == before
    # the refusal went through the admission pipeline like any other: listeners hear about it
    assert [(t, type(e)) for t, e in rejections.seen] == [(SECRET, AccessDeniedError)] * 2

    await alice.send_envelope(Envelope(ch.channel_id, alice.agent_id, None, NOTE, {"y": 2}))
    await until(lambda: len(notes) == 1)
    assert (await stored_event_types(hub, ch.channel_id))[-1] == NOTE


async def test_deny_with_a_custom_error_class_raises_that_class(hub):
    class TenantQuota(NetworkError):
        pass

    class Picky(BaseHubArbiter):
        async def authorize_send(self, envelope, sender, sender_rule, recipients):
            if envelope.event_data.get("text") == "quota":
                return Deny("tenant quota reached", TenantQuota)
            if envelope.event_data.get("text") == "plain":
                return Deny("not a network error", PermissionError)
            return Allow()

        async def authorize_inbox(self, envelope, recipient, recipient_rule, current_pending):
            if envelope.event_data.get("text") == "full":
                return Deny(f"{recipient.name} is busy", InboxFull)
            return Allow()

    alice, _bob = await humans(hub, "alice", "bob")
    ch = await alice.open(type="conversation", target="bob")
    before = await stored_event_types(hub, ch.channel_id)
    hub.register_arbiter(Picky())
    with pytest.raises(TenantQuota, match=r"^tenant quota reached$"):
        await alice.send(ch.channel_id, "quota")
    with pytest.raises(PermissionError, match=r"^not a network error$"):
        await hub.post_envelope(Envelope(ch.channel_id, alice.agent_id, None, EV_TEXT, {"text": "plain"}))
    with pytest.raises(InboxFull, match=r"^bob is busy$"):
        await alice.send(ch.channel_id, "full")
    assert await stored_event_types(hub, ch.channel_id) == before
    await alice.send(ch.channel_id, "fine")
    assert (await stored_event_types(hub, ch.channel_id))[-1] == EV_TEXT


async def test_dispatch_denial_skips_one_recipient_only(hub):
    class NotToCarol(BaseHubArbiter):
        def __init__(self) -> None:
            self.asked: list[tuple[str, str, str]] = []

        async def authorize_dispatch(self, envelope, sender, recipient, recipient_rule):
            self.asked.append((envelope.event_type, sender.name, recipient.name))
            if envelope.event_type == EV_TEXT and recipient.name == "carol":
                return Deny("carol does not read texts")
            return Allow()

    alice, bob, carol = await humans(hub, "alice", "bob", "carol")
    ch = await alice.open(type="discussion", target=["bob", "carol"])
    bob_texts, carol_texts = collect(bob, EV_TEXT), collect(carol, EV_TEXT)
    arbiter = NotToCarol()
    hub.register_arbiter(arbiter)
    eid = await alice.send(ch.channel_id, "topic")
    await until(lambda: len(bob_texts) == 1)
    await asyncio.sleep(0.05)
    assert carol_texts == []
    assert bob_texts[0].envelope_id == eid
    assert hub.pending_inbox(carol.agent_id) == 0  # nothing was queued for her
    assert eid in [e.envelope_id for e in await hub.read_wal(ch.channel_id)]
    assert (await stored_event_types(hub, ch.channel_id))[-1] == EV_TEXT
    assert sorted(a for a in arbiter.asked if a[0] == EV_TEXT) == [
        (EV_TEXT, "alice", "bob"),
        (EV_TEXT, "alice", "carol"),
    ]
    # hub-emitted envelopes are dispatched through the arbiter too (the close reaches both)
    closes_bob, closes_carol = collect(bob, "ag2.channel.closed"), collect(carol, "ag2.channel.closed")
    await hub.close_channel(ch.channel_id)
    await until(lambda: len(closes_bob) == 1 and len(closes_carol) == 1)
    assert ("ag2.channel.closed", "alice", "carol") in arbiter.asked


async def test_channel_open_denial_refuses_and_stores_nothing(hub):
    class NoConversations(BaseHubArbiter):
        def __init__(self) -> None:
            self.asked = []

        async def authorize_channel_open(
            self, manifest, creator, creator_rule, invitees, invitee_rules, active_creator_channels
        ):
            self.asked.append(
                (
                    manifest.type,
                    creator.name,
                    [i.name for i in invitees],
                    len(invitee_rules),
                    active_creator_channels,
                )
            )
            if manifest.type == "conversation":
                return Deny("conversations are closed today", ProtocolError)
            return Allow()

    alice, _bob, _carol = await humans(hub, "alice", "bob", "carol")
    first = await alice.open(type="discussion", target=["bob", "carol"])
    arbiter = NoConversations()
    hub.register_arbiter(arbiter)
    channels_before = len(await hub.store.load_channels())
    with pytest.raises(ProtocolError, match=r"^conversations are closed today$"):
        await alice.open(type="conversation", target="bob")
    with pytest.raises(ProtocolError, match=r"^conversations are closed today$"):
        await hub.create_channel(
            creator_id=alice.agent_id, manifest_type="conversation", participants=[_bob.agent_id]
        )
    assert len(await hub.store.load_channels()) == channels_before
    assert list(hub.channels) == [first.channel_id]
    assert arbiter.asked[0] == ("conversation", "alice", ["bob"], 1, 1)
    second = await alice.open(type="discussion", target=["bob", "carol"])
    assert arbiter.asked[-1] == ("discussion", "alice", ["bob", "carol"], 2, 1)
    assert hub.lookup_channel(second.channel_id).state.value == "active"


async def test_base_arbiter_lifts_what_the_rule_based_default_enforces(hub):
    closed = Rule(access=AccessBlock(inbound_from=["nobody"]))
    alice, bob = await humans(hub, "alice", "bob", rules={"bob": closed})
    with pytest.raises(AccessDeniedError, match=r"^invitee 'bob' does not accept inbound from 'alice'$"):
        await alice.open(type="conversation", target="bob")

    hub.register_arbiter(BaseHubArbiter())
    texts = collect(bob, EV_TEXT)
    ch = await alice.open(type="conversation", target="bob")
    await alice.send(ch.channel_id, "let in")
    await until(lambda: len(texts) == 1)  # dispatch no longer checks inbound_from either

    hub.register_arbiter(RuleBasedArbiter())  # back to the default: refused again
    with pytest.raises(AccessDeniedError, match="does not accept inbound from 'alice'"):
        await alice.open(type="conversation", target="bob")


async def test_base_arbiter_lifts_outbound_depth_inbox_and_channel_caps(hub):
    rules = {
        "alice": Rule(
            access=AccessBlock(outbound_to=["carol"]),
            limits=LimitsBlock(delegation_depth=1, max_concurrent_channels=1),
        ),
        "bob": Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=1))),
    }
    alice, bob = await humans(hub, "alice", "bob", rules=rules)
    hub.register_arbiter(BaseHubArbiter())  # invitations are explicit sends: outbound_to applies
    ch = await alice.open(type="conversation", target="bob")
    hub.register_arbiter(RuleBasedArbiter())
    gate = asyncio.Event()

    async def stall(env):
        if env.event_type == EV_TEXT:
            await gate.wait()

    bob.on_envelope(stall)
    with pytest.raises(AccessDeniedError, match=r"^sender 'alice' not permitted to send to 'bob'$"):
        await alice.send(ch.channel_id, "hi", audience=["bob"])
    with pytest.raises(AccessDeniedError, match=r"exceeded delegation_depth \(2 > 1\)"):
        await hub.post_envelope(
            Envelope(ch.channel_id, alice.agent_id, None, EV_TEXT, {"text": "d"}, depth=2)
        )
    await alice.send(ch.channel_id, "one")
    with pytest.raises(InboxFull, match=r"inbox at capacity \(1 >= 1\)"):
        await alice.send(ch.channel_id, "two")
    with pytest.raises(AccessDeniedError, match=r"exceeded max_concurrent_channels \(1 >= 1\)"):
        await hub.create_channel(
            creator_id=alice.agent_id, manifest_type="conversation", participants=[bob.agent_id]
        )

    hub.register_arbiter(BaseHubArbiter())
    await alice.send(ch.channel_id, "hi", audience=["bob"])
    await hub.post_envelope(Envelope(ch.channel_id, alice.agent_id, None, EV_TEXT, {"text": "d"}, depth=2))
    await alice.send(ch.channel_id, "two")
    gate.set()  # bob reads again (his handler runs one envelope at a time), so he can ack an invite
    second = await alice.open(type="conversation", target="bob")
    assert hub.lookup_channel(second.channel_id).state.value == "active"


async def test_a_rule_based_subclass_is_consulted_and_keeps_the_rules(hub):
    class Counting(RuleBasedArbiter):
        def __init__(self) -> None:
            self.sends = 0

        async def authorize_send(self, envelope, sender, sender_rule, recipients):
            self.sends += 1
            if envelope.event_type == SECRET:
                return Deny("no secrets")
            return await super().authorize_send(envelope, sender, sender_rule, recipients)

    alice, _bob = await humans(hub, "alice", "bob")
    ch = await alice.open(type="conversation", target="bob")
    arbiter = Counting()
    hub.register_arbiter(arbiter)
    await alice.send(ch.channel_id, "ok")
    assert arbiter.sends == 1
    with pytest.raises(AccessDeniedError, match=r"^no secrets$"):
        await hub.post_envelope(Envelope(ch.channel_id, alice.agent_id, None, SECRET, {}))
    await alice.set_rule(Rule(access=AccessBlock(outbound_to=["carol"])))
    with pytest.raises(AccessDeniedError, match=r"^sender 'alice' not permitted to send to 'bob'$"):
        await alice.send(ch.channel_id, "hi", audience=["bob"])
    assert arbiter.sends == 3


async def test_resolve_unknown_audience(hub):
    class Directory(BaseHubArbiter):
        def __init__(self, mapping) -> None:
            self.mapping = mapping
            self.asked: list[list[str]] = []

        async def resolve_unknown_audience(self, envelope, unknown_ids):
            self.asked.append(list(unknown_ids))
            out = [self.mapping[u] for u in unknown_ids if u in self.mapping]
            return out or None

    alice, bob, carol = await humans(hub, "alice", "bob", "carol")
    ch = await alice.open(type="discussion", target=["bob", "carol"])
    bob_notes, carol_notes = collect(bob, NOTE), collect(carol, NOTE)

    def to(*audience):
        return Envelope(ch.channel_id, alice.agent_id, list(audience), NOTE, {"n": 1})

    # the default keeps today's refusal
    with pytest.raises(ProtocolError, match="audience must list only participants of the channel; 'bob@far'"):
        await hub.post_envelope(to("bob@far"))

    directory = Directory({"bob@far": bob.agent_id, "dave@far": "dave-not-here"})
    hub.register_arbiter(directory)
    env = to("bob@far")
    await hub.post_envelope(env)
    assert directory.asked == [["bob@far"]]
    assert env.audience == [bob.agent_id]
    stored = (await hub.read_wal(ch.channel_id))[-1]
    assert stored.envelope_id == env.envelope_id and stored.audience == [bob.agent_id]
    await until(lambda: len(bob_notes) == 1)
    await asyncio.sleep(0.05)
    assert carol_notes == []

    # known ids are kept (and not asked about); an arbiter answering None keeps the refusal
    count = len(await stored_event_types(hub, ch.channel_id))
    with pytest.raises(ProtocolError, match="'nobody@far' is not one of discussion·"):
        await hub.post_envelope(to(carol.agent_id, "nobody@far"))
    assert directory.asked[-1] == ["nobody@far"]
    # resolving to someone outside the channel is refused, naming the resolution
    with pytest.raises(
        ProtocolError, match=r"'dave-not-here' is not one of discussion·.*resolved \['dave@far'\]"
    ):
        await hub.post_envelope(to("dave@far"))
    assert len(await stored_event_types(hub, ch.channel_id)) == count

    env = to(carol.agent_id, "bob@far")
    await hub.post_envelope(env)
    assert env.audience == [carol.agent_id, bob.agent_id]
    await until(lambda: len(bob_notes) == 2 and len(carol_notes) == 1)


async def test_rule_based_decisions_carry_the_hub_sentences():
    arbiter = RuleBasedArbiter()
    alice = Passport(name="alice", agent_id="a1")
    bob = Passport(name="bob", agent_id="b1")
    env = Envelope("c1", "a1", ["b1"], EV_TEXT, {"text": "x"}, depth=3)
    open_rule = Rule()
    assert await arbiter.authorize_send(env, alice, open_rule, [bob]) == Allow()
    narrow = Rule(access=AccessBlock(outbound_to=["c*"]), limits=LimitsBlock(delegation_depth=2))
    assert await arbiter.authorize_send(env, alice, narrow, [bob]) == Deny(
        "sender 'alice' not permitted to send to 'bob'"
    )
    assert await arbiter.authorize_send(env, alice, narrow, []) == Deny(
        "sender 'alice' exceeded delegation_depth (3 > 2)"
    )
    capped = Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=2)))
    assert await arbiter.authorize_inbox(env, bob, capped, 1) == Allow()
    assert await arbiter.authorize_inbox(env, bob, capped, 2) == Deny(
        "recipient 'b1' inbox at capacity (2 >= 2)", InboxFull
    )
    shut = Rule(access=AccessBlock(inbound_from=["carol"]))
    assert isinstance(await arbiter.authorize_dispatch(env, alice, bob, shut), Deny)
    assert await arbiter.authorize_dispatch(env, alice, bob, open_rule) == Allow()
    quota = Rule(limits=LimitsBlock(max_concurrent_channels=2))
    assert await arbiter.authorize_channel_open(None, alice, quota, [bob], [shut], 0) == Deny(
        "invitee 'bob' does not accept inbound from 'alice'"
    )
    assert await arbiter.authorize_channel_open(None, alice, quota, [bob], [open_rule], 2) == Deny(
        "creator 'alice' exceeded max_concurrent_channels (2 >= 2)"
    )
    assert await arbiter.authorize_channel_open(None, alice, quota, [bob], [open_rule], 1) == Allow()
    assert await arbiter.authorize_register(alice, None, open_rule) == Allow()
    assert await arbiter.resolve_unknown_audience(env, ["x"]) is None


def test_decisions_are_frozen_values():
    assert Deny("r").error is AccessDeniedError
    assert Deny("r") == Deny("r", AccessDeniedError) and Allow() == Allow()
    with pytest.raises(dataclasses.FrozenInstanceError):
        Deny("r").reason = "other"  # type: ignore[misc]
    assert set(Decision.__args__) == {Allow, Deny}
    with pytest.raises(TypeError, match=r"Deny\.error must be an exception class"):
        Deny("r", error="AccessDeniedError")  # type: ignore[arg-type]


async def test_register_arbiter_refuses_what_the_hub_could_not_await(hub):
    class Partial:
        async def authorize_send(self, envelope, sender, sender_rule, recipients):
            return Allow()

    class SyncGate(BaseHubArbiter):
        def authorize_send(self, envelope, sender, sender_rule, recipients):  # type: ignore[override]
            return Allow()

    with pytest.raises(TypeError, match="has no authorize_inbox"):
        hub.register_arbiter(Partial())
    with pytest.raises(TypeError, match=r"SyncGate\.authorize_send must be a coroutine function"):
        hub.register_arbiter(SyncGate())
    assert type(hub.arbiter) is RuleBasedArbiter

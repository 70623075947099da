"""Admission as pure functions: ``admit``/``apply`` over hand-built state (no store, no event loop), and
``explain_send`` refusing with the very message ``post_envelope`` raises."""

from __future__ import annotations

import dataclasses

import pytest

from ag2net import Hub, HubClient, Passport
from ag2net.adapters.conversation import ConversationAdapter
from ag2net.channel import ChannelManifest, ChannelMetadata, ChannelState, Participant, ParticipantRole
from ag2net.envelope import EV_CHANNEL_INVITE_ACK, EV_TASK_CANCEL_REQUEST, EV_TEXT, Envelope
from ag2net.errors import AccessDeniedError, InboxFull, NotFoundError, ProtocolError
from ag2net.hub.core import Admitted, HubCore, Refused, admit, apply
from ag2net.hub.records import AgentRecord
from ag2net.identity import AccessBlock, InboxBlock, LimitsBlock, Resume, Rule
from ag2net.naming import channel_label
from ag2net.tasks import TaskMetadata, TaskSpec, TaskState

NAMES = ("ana", "ben", "cy", "dee")


class TurnAdapter(ConversationAdapter):
    """A conversation whose state names who may not send now (a hand-made ``validate_send`` refusal)."""

    def validate_send(self, metadata, envelope, state):
        if envelope.sender_id in getattr(state, "muted", ()):
            raise ProtocolError(f"{envelope.sender_id!r} may not speak now in {metadata.channel_id!r}")


@dataclasses.dataclass(frozen=True)
class Muted:
    muted: tuple[str, ...] = ()
    messages: int = 0


class CountingAdapter(TurnAdapter):
    def initial_state(self, metadata):
        return Muted()

    def fold(self, envelope, state):
        return dataclasses.replace(state, messages=state.messages + 1)


def record(name: str, rule: Rule | None = None) -> AgentRecord:
    return AgentRecord(Passport(name=name, kind="human", agent_id=f"{name}-id"), Resume(), rule or Rule())


def channel(cid: str, members: tuple[str, ...], state: ChannelState = ChannelState.ACTIVE) -> ChannelMetadata:
    return ChannelMetadata(
        channel_id=cid,
        manifest=ChannelManifest(type="conversation"),
        creator_id=f"{members[0]}-id",
        participants=[
            Participant(f"{m}-id", ParticipantRole.INITIATOR if i == 0 else ParticipantRole.RESPONDENT, i)
            for i, m in enumerate(members)
        ],
        state=state,
        created_at="2026-01-01T00:00:00Z",
    )


def make_core() -> HubCore:
    core = HubCore()
    for name in NAMES:
        core.identities.add(record(name))
    core.channels.adapters[("conversation", 1)] = CountingAdapter()
    for md in (
        channel("c1", ("ana", "ben")),
        channel("closed", ("ana", "ben"), ChannelState.CLOSED),
        channel("pending", ("ana", "ben"), ChannelState.PENDING),
    ):
        core.channels.by_id[md.channel_id] = md
        core.channels.states[md.channel_id] = Muted()
    return core


def text(cid: str = "c1", sender: str = "ana", **kw) -> Envelope:
    return Envelope(
        cid, f"{sender}-id", kw.pop("audience", None), kw.pop("event_type", EV_TEXT), {"text": "hi"}, **kw
    )


def refused(verdict) -> tuple[type, str]:
    assert isinstance(verdict, Refused), f"expected a refusal, got {verdict!r}"
    return verdict.error_class, verdict.message


def test_a_well_formed_send_is_admitted_and_admit_changes_nothing():
    core = make_core()
    before = (dict(core.channels.wal_counts), dict(core.channels.states))
    verdict = admit(core, text())
    assert isinstance(verdict, Admitted)
    assert verdict.metadata.channel_id == "c1" and verdict.sender.passport.name == "ana"
    assert not verdict.protocol and not verdict.peer_cancel
    assert (dict(core.channels.wal_counts), dict(core.channels.states)) == before


def test_apply_counts_the_envelope_and_installs_the_folded_state():
    core = make_core()
    env = text()
    verdict = admit(core, env)
    assert isinstance(verdict, Admitted)
    env.envelope_id, env.created_at = "e1", "2026-01-01T00:00:01Z"
    verdict.fold()
    assert core.channels.states["c1"].messages == 0  # folding does not install
    assert apply(core, verdict) == 1
    assert core.channels.states["c1"].messages == 1
    assert core.channels.wal_counts["c1"] == 1
    assert core.channels.last_activity["c1"] == "2026-01-01T00:00:01Z"
    second = admit(core, text(sender="ben"))
    assert isinstance(second, Admitted)
    second.fold()
    assert apply(core, second) == 2


@pytest.mark.parametrize(
    ("env", "error", "message"),
    [
        (text(cid="nope"), NotFoundError, "channel not found: nope"),
        (text(sender="zed"), NotFoundError, "sender not registered: zed-id"),
        (text(cid="closed"), ProtocolError, "channel 'closed' is closed"),
        (text(cid="pending"), ProtocolError, "channel 'pending' not active (state=pending)"),
        (text(sender="cy"), ProtocolError, "channel 'c1' only accepts sends from participants, got 'cy-id'"),
        (
            text(audience=["dee-id"]),
            ProtocolError,
            "audience must list only participants of the channel; 'dee-id' is not one of channel 'c1'",
        ),
        (text(depth=-1), ProtocolError, None),  # a shape check (message from ag2net.envelope)
    ],
)
def test_each_refusal_carries_the_error_class_and_message(env, error, message):
    cls, why = refused(admit(make_core(), env))
    assert cls is error
    if message is not None:
        assert why == message


def test_refusals_of_a_closed_or_pending_channel_say_what_to_do():
    core = make_core()
    core.channels.by_id["closed"].close_reason = "done"
    verdict = admit(core, text(cid="closed"))
    assert isinstance(verdict, Refused)
    assert (verdict.message, verdict.advice) == (
        "channel 'closed' is closed",
        " (reason: done); open a new one",
    )
    verdict = admit(core, text(cid="pending"))
    assert isinstance(verdict, Refused) and verdict.advice == "; wait for every invitee to ack"
    assert refused(admit(core, text(sender="cy")))[1] and admit(core, text(sender="cy")).advice == ""


def test_a_protocol_event_is_admitted_on_a_pending_channel():
    verdict = admit(make_core(), text(cid="pending", sender="ben", event_type=EV_CHANNEL_INVITE_ACK))
    assert isinstance(verdict, Admitted) and verdict.protocol


def test_the_adapters_validate_send_refusal_is_the_refusal():
    core = make_core()
    core.channels.states["c1"] = Muted(muted=("ben-id",))
    assert refused(admit(core, text(sender="ben"))) == (ProtocolError, "'ben-id' may not speak now in 'c1'")
    assert isinstance(admit(core, text(sender="ana")), Admitted)


def test_a_channel_without_adapter_or_state_is_refused():
    core = make_core()
    del core.channels.states["c1"]
    assert refused(admit(core, text())) == (ProtocolError, "channel 'c1' has no adapter state")
    core.channels.adapters.clear()
    assert refused(admit(core, text())) == (
        ProtocolError,
        "channel 'c1' has no registered adapter (manifest 'conversation'@v1)",
    )


def test_outbound_and_depth_rules():
    core = make_core()
    core.identities.add(
        record("ana", Rule(access=AccessBlock(outbound_to=["cy"]), limits=LimitsBlock(delegation_depth=2)))
    )
    cls, why = refused(admit(core, text(audience=["ben-id"])))
    assert cls is AccessDeniedError and "ana" in why and "ben" in why
    cls, why = refused(admit(core, text(depth=3)))
    assert (cls, why) == (AccessDeniedError, "sender 'ana' exceeded delegation_depth (3 > 2)")
    assert isinstance(admit(core, text(depth=2)), Admitted)


def test_a_full_inbox_refuses_substantive_sends_only():
    core = make_core()
    core.identities.add(record("ben", Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=2)))))
    core.delivery.unacked["ben-id"] = {"x1", "x2"}
    assert refused(admit(core, text())) == (InboxFull, "recipient 'ben-id' inbox at capacity (2 >= 2)")
    assert isinstance(admit(core, text(event_type=EV_CHANNEL_INVITE_ACK)), Admitted)
    core.delivery.unacked["ben-id"].discard("x1")
    assert isinstance(admit(core, text()), Admitted)


def test_with_a_registered_arbiter_the_core_leaves_the_rules_to_it():
    core = make_core()
    core.identities.add(record("ana", Rule(limits=LimitsBlock(delegation_depth=1))))
    core.identities.add(record("ben", Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=1)))))
    core.delivery.unacked["ben-id"] = {"x"}
    assert refused(admit(core, text(depth=2)))[0] is AccessDeniedError
    assert refused(admit(core, text(depth=1)))[0] is InboxFull
    core.default_rules = False  # what register_arbiter sets for an arbiter of its own
    assert isinstance(admit(core, text(depth=2)), Admitted)


def test_a_peer_cancel_request_is_admitted_once_per_peer():
    core = make_core()
    core.tasks.tasks["t1"] = TaskMetadata(
        "t1", "ana-id", TaskSpec(title="t"), TaskState.RUNNING, channel_id="c1"
    )
    cancel = Envelope(
        "c1", "cy-id", ["ana-id"], EV_TASK_CANCEL_REQUEST, {"task_id": "t1", "reason": "stop"}, task_id="t1"
    )
    verdict = admit(core, cancel)
    assert isinstance(verdict, Admitted) and verdict.peer_cancel
    cancel.envelope_id, cancel.created_at = "e1", "2026-01-01T00:00:01Z"
    verdict.fold()
    apply(core, verdict)
    assert core.tasks.peer_cancellers == {"t1": {"cy-id"}}
    again = dataclasses.replace(cancel, envelope_id="")
    assert refused(admit(core, again)) == (
        ProtocolError,
        "channel 'c1' only accepts sends from participants, got 'cy-id'",
    )


# ------------------------------------------------------------------ the real hub: one admission


pytestmark = pytest.mark.hub(store="memory")


async def refusal_of_post(hub: Hub, env: Envelope) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        await hub.post_envelope(env)
    return type(info.value), str(info.value)


async def test_explain_send_and_post_envelope_refuse_with_the_same_message(hub):
    hub.register_adapter(TurnAdapter())
    hc = HubClient.local(hub)
    ana, ben, cy = [await hc.register_human(Passport(name=n, kind="human")) for n in ("ana", "ben", "cy")]
    live = (await ana.open(type="conversation", target="ben")).channel_id
    closed = (await ana.open(type="conversation", target="ben")).channel_id
    await hub.close_channel(closed, reason="done")
    cases = [  # (channel, sender, what explain_send adds after the post's message: the fix)
        ("no-such-channel", ana.agent_id, ""),
        (live, "nobody-registered", ""),
        (closed, ana.agent_id, " (reason: done); open a new one"),
        (live, cy.agent_id, ""),
    ]
    for cid, sender, advice in cases:
        ok, why = await hub.explain_send(cid, sender)
        assert not ok and not hub.can_send(cid, sender)
        posted = await refusal_of_post(hub, Envelope(cid, sender, None, EV_TEXT, {"text": ""}))
        assert posted[1] + advice == why

    # the adapter's own refusal, read from the channel's state
    hub.channels.states[live] = Muted(muted=(ben.agent_id,))
    ok, why = await hub.explain_send(live, ben.agent_id)
    assert (ok, why) == (False, f"ben may not speak now in {channel_label('conversation', live)}")
    assert await refusal_of_post(hub, Envelope(live, ben.agent_id, None, EV_TEXT, {"text": ""})) == (
        ProtocolError,
        why,
    )
    assert await hub.explain_send(live, ana.agent_id) == (True, "")

    # a recipient's full inbox
    await hub.set_rule(ben.agent_id, Rule(limits=LimitsBlock(inbox=InboxBlock(max_pending=1))))
    hub.delivery.unacked[ben.agent_id] = {"unacked-delivery"}
    ok, why = await hub.explain_send(live, ana.agent_id)
    assert not ok and "inbox at capacity" in why
    assert await refusal_of_post(hub, Envelope(live, ana.agent_id, None, EV_TEXT, {"text": ""})) == (
        InboxFull,
        why,
    )


async def test_admit_on_the_hubs_core_predicts_each_posts_refusal(hub):
    hc = HubClient.local(hub)
    ana, ben, cy = [await hc.register_human(Passport(name=n, kind="human")) for n in ("ana", "ben", "cy")]
    live = (await ana.open(type="conversation", target="ben")).channel_id
    await hub.set_rule(
        ana.agent_id, Rule(access=AccessBlock(outbound_to=["cy"]), limits=LimitsBlock(delegation_depth=1))
    )
    envelopes = [
        Envelope(live, ana.agent_id, [ben.agent_id], EV_TEXT, {"text": "x"}),  # outbound rule
        Envelope(live, ana.agent_id, None, EV_TEXT, {"text": "x"}, depth=2),  # depth rule
        Envelope(live, ana.agent_id, [cy.agent_id], EV_TEXT, {"text": "x"}),  # audience not in the channel
        Envelope(live, ana.agent_id, ["ghost"], EV_TEXT, {"text": "x"}),  # unknown audience id
        Envelope(live, ana.agent_id, None, "", {"text": "x"}),  # shape
    ]
    for env in envelopes:
        verdict = admit(hub.core, env)
        assert isinstance(verdict, Refused)
        assert await refusal_of_post(hub, env) == (verdict.error_class, verdict.message)
    assert await hub.read_wal(live) == [e for e in await hub.read_wal(live) if e.event_type != EV_TEXT]

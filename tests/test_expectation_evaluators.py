"""Expectations under ag2's names (reference §3.11): the evaluator classes on a ManualClock, the default
evaluators and handlers, and the handlers on a live hub (listeners and the audit log see each fire)."""

from __future__ import annotations

import inspect

from ag2net import (
    AUDIT_KIND_EXPECTATION_VIOLATED,
    EV_EXPECTATION_VIOLATED,
    EV_TEXT,
    AcksWithinEvaluator,
    AuditHandler,
    AutoCloseHandler,
    BaseHubListener,
    Envelope,
    ExpectationContext,
    ExpectationEvaluator,
    Hub,
    HubClient,
    MaxSilenceEvaluator,
    MemoryStore,
    NotifyChannelHandler,
    Passport,
    ReplyWithinEvaluator,
    Violation,
    ViolationHandler,
    default_evaluators,
    default_handlers,
)
from ag2net.channel import (
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    Participant,
    ParticipantRole,
)
from ag2net.ids import ManualClock, parse_time

ASK, ANS, OBS = "1" * 32, "2" * 32, "3" * 32


def metadata(clock: ManualClock, state: ChannelState, pending: list[str] | None = None) -> ChannelMetadata:
    ids = (ASK, ANS, OBS)
    return ChannelMetadata(
        channel_id="9" * 32,
        manifest=ChannelManifest("discussion"),
        creator_id=ASK,
        participants=[
            Participant(pid, ParticipantRole.INITIATOR if i == 0 else ParticipantRole.PARTICIPANT, i, clock())
            for i, pid in enumerate(ids)
        ],
        state=state,
        created_at=clock(),
        pending_acks=list(pending or []),
    )


def text(clock: ManualClock, sender: str, audience: list[str] | None = None, event_type: str = EV_TEXT):
    return Envelope("9" * 32, sender, audience, event_type, {"text": "t"}, created_at=clock())


def context(md: ChannelMetadata, wal: list[Envelope], clock: ManualClock) -> ExpectationContext:
    now = clock()
    return ExpectationContext(md, None, wal, now, parse_time(now).timestamp())


def test_defaults_are_three_fresh_evaluators_and_three_fresh_handlers_with_ag2_names():
    evaluators, handlers = default_evaluators(), default_handlers()
    assert [type(e) for e in evaluators] == [AcksWithinEvaluator, ReplyWithinEvaluator, MaxSilenceEvaluator]
    assert [e.name for e in evaluators] == ["acks_within", "reply_within", "max_silence"]
    assert [type(h) for h in handlers] == [AuditHandler, NotifyChannelHandler, AutoCloseHandler]
    assert [h.name for h in handlers] == ["audit", "notify_channel", "auto_close"]
    assert default_handlers()[0] is not handlers[0] and default_evaluators()[0] is not evaluators[0]
    assert all(isinstance(e, ExpectationEvaluator) for e in evaluators)
    assert all(isinstance(h, ViolationHandler) for h in handlers)
    assert all(inspect.iscoroutinefunction(h.handle) for h in handlers)
    assert list(inspect.signature(AcksWithinEvaluator().evaluate).parameters) == ["expectation", "context"]


def test_acks_within_fires_once_the_invitees_are_late():
    clock = ManualClock()
    md = metadata(clock, ChannelState.PENDING, pending=[ANS, OBS])
    exp = Expectation("acks_within", "auto_close", {"seconds": 20})
    evaluator = AcksWithinEvaluator()
    clock.advance(19.5)
    assert evaluator.evaluate(exp, context=context(md, [], clock)) is None
    clock.advance(0.5)
    assert evaluator.evaluate(exp, context(md, [], clock)) == Violation(
        exp, [ANS, OBS], {"elapsed_seconds": 20.0, "threshold_seconds": 20}
    )
    md.pending_acks = [OBS]
    assert evaluator.evaluate(exp, context(md, [], clock)).violator_ids == [OBS]
    md.state = ChannelState.ACTIVE  # only a pending channel waits for acks
    assert evaluator.evaluate(exp, context(md, [], clock)) is None
    # the default threshold is 30 seconds
    md2 = metadata(clock, ChannelState.PENDING, pending=[ANS])
    clock.advance(29)
    assert evaluator.evaluate(Expectation("acks_within", "audit"), context(md2, [], clock)) is None
    clock.advance(1)
    assert evaluator.evaluate(Expectation("acks_within", "audit"), context(md2, [], clock)) is not None


def test_reply_within_names_each_participant_that_left_text_addressed_to_it_unanswered():
    clock = ManualClock()
    md = metadata(clock, ChannelState.ACTIVE)
    exp = Expectation("reply_within", "notify_channel", {"seconds": 60})
    evaluator = ReplyWithinEvaluator()
    wal = [text(clock, ASK, [ANS])]  # addressed to ANS only
    clock.advance(59.9)
    assert evaluator.evaluate(exp, context(md, wal, clock)) is None
    clock.advance(0.1)
    assert evaluator.evaluate(exp, context(md, wal, clock)) == Violation(
        exp, [ANS], {"threshold_seconds": 60}
    )
    wal.append(text(clock, OBS))  # a broadcast to ASK and ANS: the latest text addressed to each decides
    assert evaluator.evaluate(exp, context(md, wal, clock)) is None
    clock.advance(60)
    v = evaluator.evaluate(exp, context(md, wal, clock))
    assert v is not None and v.violator_ids == [ASK, ANS]  # in participant order; OBS was never addressed
    wal.append(text(clock, ANS, [ASK]))  # ANS answers, to ASK only
    assert evaluator.evaluate(exp, context(md, wal, clock)) is None
    clock.advance(60)
    v = evaluator.evaluate(exp, context(md, wal, clock))
    assert v is not None and v.violator_ids == [ASK]
    md.state = ChannelState.CLOSED
    assert evaluator.evaluate(exp, context(md, wal, clock)) is None


def test_max_silence_counts_only_content_since_the_last_one_or_creation():
    clock = ManualClock()
    md = metadata(clock, ChannelState.ACTIVE)
    exp = Expectation("max_silence", "auto_close", {"seconds": "2m"})
    evaluator = MaxSilenceEvaluator()
    clock.advance(100)
    wal = [text(clock, ASK)]
    clock.advance(100)
    # protocol events and violation notices are not content
    wal.append(text(clock, ASK, event_type="ag2.channel.opened"))
    wal.append(text(clock, ASK, event_type=EV_EXPECTATION_VIOLATED))
    assert evaluator.evaluate(exp, context(md, wal, clock)) is None  # 100 s since the text
    clock.advance(20)
    assert evaluator.evaluate(exp, context(md, wal, clock)) == Violation(
        exp, [], {"elapsed_seconds": 120.0, "threshold_seconds": 120.0}
    )
    assert evaluator.evaluate(exp, context(md, [], clock)).detail["elapsed_seconds"] == 220.0


class Fired(BaseHubListener):
    def __init__(self) -> None:
        self.fired: list[tuple] = []

    async def on_expectation_fired(self, channel_id, expectation, violation):
        self.fired.append((channel_id, expectation.name, list(violation.violator_ids)))


async def watched_hub(clock: ManualClock, on_violation: str, evaluator_name: str = "max_silence"):
    hub = await Hub.open(MemoryStore(), clock=clock, ttl_sweep_interval=0, expectation_sweep_interval=0)
    base = hub.get_adapter("conversation")

    class Watched(type(base)):
        manifest = ChannelManifest(
            type="watched",
            participants=base.manifest.participants,
            default_view_policy="windowed_summary",
            expectations=[Expectation(evaluator_name, on_violation, {"seconds": 60})],
        )

    hub.register_adapter(Watched())
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="watched", target="ben")
    return hub, hc, ana, ben, ch


async def test_a_fire_reaches_listeners_and_the_audit_log_then_auto_close_closes_once():
    clock = ManualClock()
    hub, hc, ana, ben, ch = await watched_hub(clock, "auto_close")
    fired = Fired()
    hub.register_listener(fired)
    records: list[dict] = []

    async def tail(record: dict) -> None:
        records.append(record)

    hub.audit_log.subscribe(tail)
    try:
        clock.advance(61)
        assert await hub.tick_expectations() == 1
        assert fired.fired == [(ch.channel_id, "max_silence", [])]
        violated = [r for r in records if r["kind"] == AUDIT_KIND_EXPECTATION_VIOLATED]
        assert violated == [
            {
                "at": clock(),
                "kind": "expectation_violated",
                "channel_id": ch.channel_id,
                "expectation": "max_silence",
                "on_violation": "auto_close",
                "params": {"seconds": 60},
                "violators": [],
                "detail": {"elapsed_seconds": 61.0, "threshold_seconds": 60},
            }
        ]
        md = await hub.get_channel(ch.channel_id)
        assert md.state == ChannelState.CLOSED and md.close_reason == "expectation_violated:max_silence"
        # the handler again on the closed channel: nothing happens, nothing raises
        await AutoCloseHandler().handle(
            hub, ch.channel_id, Violation(Expectation("max_silence", "auto_close"))
        )
        await NotifyChannelHandler().handle(hub, ch.channel_id, Violation(Expectation("max_silence", "x")))
        assert (await hub.get_channel(ch.channel_id)).close_reason == "expectation_violated:max_silence"
    finally:
        await hc.close()
        await hub.close()


async def test_custom_evaluator_and_handler_by_protocol():
    """A user's evaluator and handler need only ``name`` and ``evaluate`` / ``handle``."""
    clock = ManualClock()
    handled: list[tuple[str, list[str]]] = []

    class EveryTick:
        name = "every_tick"

        def evaluate(self, expectation, context):
            return Violation(expectation, [context.metadata.creator_id], {"now": context.now_iso})

    class Collect:
        name = "collect"

        async def handle(self, hub, channel_id, violation):
            handled.append((channel_id, violation.violator_ids))

    assert isinstance(EveryTick(), ExpectationEvaluator) and isinstance(Collect(), ViolationHandler)
    hub, hc, ana, ben, ch = await watched_hub(clock, "collect", evaluator_name="every_tick")
    hub.register_expectation_evaluator(EveryTick())
    hub.register_violation_handler(Collect())
    try:
        assert await hub.tick_expectations() == 1
        assert await hub.tick_expectations() == 0  # deduplicated per (expectation, violator)
        assert handled == [(ch.channel_id, [ana.agent_id])]
        (record,) = [r for r in await hub.audit_log.read_all() if r["kind"] == "expectation_violated"]
        assert record["on_violation"] == "collect" and record["detail"] == {"now": clock()}
    finally:
        await hc.close()
        await hub.close()

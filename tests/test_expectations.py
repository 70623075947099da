"""Expectation evaluators (acks_within, reply_within, max_silence) over hand-built channels and WALs."""

from __future__ import annotations

import pytest

from ag2net.channel import (
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    Participant,
    ParticipantRole,
)
from ag2net.envelope import (
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_OPENED,
    EV_EXPECTATION_VIOLATED,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    Envelope,
)
from ag2net.hub.expectations import (
    AcksWithin,
    ExpectationContext,
    ExpectationEvaluator,
    MaxSilence,
    ReplyWithin,
    Violation,
    default_evaluators,
    threshold_seconds,
)
from ag2net.ids import ManualClock, add_seconds

T0 = "2026-01-01T00:00:00.000000Z"
A, B, C = "a" * 32, "b" * 32, "c" * 32


def at(seconds: float) -> str:
    return add_seconds(T0, seconds)


def channel(
    state: ChannelState, *, pending: list[str] | None = None, ids: tuple[str, ...] = (A, B)
) -> ChannelMetadata:
    return ChannelMetadata(
        channel_id="f" * 32,
        manifest=ChannelManifest("conversation"),
        creator_id=ids[0],
        participants=[
            Participant(pid, ParticipantRole.INITIATOR if i == 0 else ParticipantRole.PARTICIPANT, i, T0)
            for i, pid in enumerate(ids)
        ],
        state=state,
        created_at=T0,
        pending_acks=list(pending or []),
    )


def env(
    sender: str, seconds: float, event_type: str = EV_TEXT, audience: list[str] | None = None
) -> Envelope:
    return Envelope(
        "f" * 32,
        sender,
        audience,
        event_type,
        {"text": "hi"} if event_type == EV_TEXT else {},
        created_at=at(seconds),
    )


def ctx(md: ChannelMetadata, wal: list[Envelope], now: float) -> ExpectationContext:
    return ExpectationContext.at(md, None, wal, at(now))


def test_defaults_are_the_three_builtins_with_reference_names() -> None:
    evaluators = default_evaluators()
    assert [e.name for e in evaluators] == ["acks_within", "reply_within", "max_silence"]
    assert all(isinstance(e, ExpectationEvaluator) for e in evaluators)
    assert default_evaluators()[0] is not evaluators[0]


def test_context_now_seconds_is_epoch_of_now_iso() -> None:
    c = ExpectationContext.at(channel(ChannelState.ACTIVE), None, [], "1970-01-01T00:01:00.000000Z")
    assert c.now_seconds == 60.0


def test_violation_defaults() -> None:
    v = Violation(Expectation("x", "audit"))
    assert v.violator_ids == [] and v.detail == {}
    assert Violation("e").violator_ids is not Violation("e").violator_ids


# --- acks_within ---------------------------------------------------------------------------------


def test_acks_within_fires_at_threshold_with_pending_invitees() -> None:
    exp = Expectation("acks_within", "auto_close", {"seconds": 30})
    md = channel(ChannelState.PENDING, pending=[B, C], ids=(A, B, C))
    assert AcksWithin().evaluate(exp, ctx(md, [], 29.9)) is None
    v = AcksWithin().evaluate(exp, ctx(md, [], 30))
    assert v == Violation(exp, [B, C], {"elapsed_seconds": 30.0, "threshold_seconds": 30})


def test_acks_within_default_is_30_seconds() -> None:
    exp = Expectation("acks_within", "auto_close")
    md = channel(ChannelState.PENDING, pending=[B])
    assert AcksWithin().evaluate(exp, ctx(md, [], 29)) is None
    v = AcksWithin().evaluate(exp, ctx(md, [], 45.5))
    assert v is not None and v.detail == {"elapsed_seconds": 45.5, "threshold_seconds": 30.0}


def test_acks_within_is_quiet_when_acked_or_not_pending() -> None:
    exp = Expectation("acks_within", "auto_close", {"seconds": 1})
    assert AcksWithin().evaluate(exp, ctx(channel(ChannelState.PENDING, pending=[]), [], 100)) is None
    for state in (ChannelState.ACTIVE, ChannelState.CLOSED, ChannelState.EXPIRED):
        assert AcksWithin().evaluate(exp, ctx(channel(state, pending=[B]), [], 100)) is None


def test_acks_within_returns_a_copy_of_pending() -> None:
    md = channel(ChannelState.PENDING, pending=[B])
    v = AcksWithin().evaluate(Expectation("acks_within", "audit"), ctx(md, [], 31))
    assert v is not None
    v.violator_ids.append("x")
    assert md.pending_acks == [B]


# --- reply_within --------------------------------------------------------------------------------


def test_reply_within_fires_for_the_addressee_who_did_not_answer() -> None:
    exp = Expectation("reply_within", "notify_channel", {"seconds": 60})
    md = channel(ChannelState.ACTIVE)
    wal = [
        env(A, 0, EV_CHANNEL_INVITE, [B]),
        env(B, 1, EV_CHANNEL_INVITE_ACK),
        env(A, 2, EV_CHANNEL_OPENED, [A, B]),
    ]
    wal.append(env(A, 10))
    assert ReplyWithin().evaluate(exp, ctx(md, wal, 69.9)) is None
    assert ReplyWithin().evaluate(exp, ctx(md, wal, 70)) == Violation(exp, [B], {"threshold_seconds": 60})


def test_reply_within_an_own_text_after_the_prompt_clears_it() -> None:
    exp = Expectation("reply_within", "audit", {"seconds": 60})
    md = channel(ChannelState.ACTIVE)
    wal = [env(A, 0), env(B, 5)]
    # B answered A; B's broadcast is now the latest text addressed to A
    v = ReplyWithin().evaluate(exp, ctx(md, wal, 1000))
    assert v is not None and v.violator_ids == [A]
    wal.append(env(A, 6))
    v = ReplyWithin().evaluate(exp, ctx(md, wal, 1000))
    assert v is not None and v.violator_ids == [B]
    wal.append(env(B, 7, audience=[]))  # speaking at all counts as answering, whoever it is to
    assert ReplyWithin().evaluate(exp, ctx(md, wal, 1000)) is None


def test_reply_within_only_the_latest_addressed_text_counts() -> None:
    exp = Expectation("reply_within", "audit", {"seconds": 60})
    md = channel(ChannelState.ACTIVE, ids=(A, B, C))
    # B answered an old text from A; a fresh one from C to B is not overdue yet
    wal = [env(A, 0, audience=[B]), env(B, 1, audience=[A]), env(C, 100, audience=[B])]
    v = ReplyWithin().evaluate(exp, ctx(md, wal, 120))
    assert v is not None and v.violator_ids == [A]  # B's answer to A is 119 s old
    v = ReplyWithin().evaluate(exp, ctx(md, wal, 160))
    assert v is not None and v.violator_ids == [A, B]


def test_reply_within_respects_audience() -> None:
    exp = Expectation("reply_within", "audit", {"seconds": 10})
    md = channel(ChannelState.ACTIVE, ids=(A, B, C))
    wal = [env(A, 0, audience=[C])]
    v = ReplyWithin().evaluate(exp, ctx(md, wal, 50))
    assert v is not None and v.violator_ids == [C]
    # an empty audience addresses nobody
    assert ReplyWithin().evaluate(exp, ctx(md, [env(A, 0, audience=[])], 50)) is None


def test_reply_within_broadcast_lists_violators_in_participant_order() -> None:
    exp = Expectation("reply_within", "audit", {"seconds": 10})
    md = channel(ChannelState.ACTIVE, ids=(C, A, B))
    v = ReplyWithin().evaluate(exp, ctx(md, [env(B, 0)], 50))
    assert v is not None and v.violator_ids == [C, A]


def test_reply_within_ignores_non_text_and_non_active() -> None:
    exp = Expectation("reply_within", "audit", {"seconds": 10})
    wal = [env(A, 0, "myapp.ping"), env(A, 0, EV_TASK_CANCEL_REQUEST, [B])]
    assert ReplyWithin().evaluate(exp, ctx(channel(ChannelState.ACTIVE), wal, 50)) is None
    for state in (ChannelState.PENDING, ChannelState.CLOSED):
        assert ReplyWithin().evaluate(exp, ctx(channel(state), [env(A, 0)], 5000)) is None


def test_reply_within_default_is_600_seconds() -> None:
    exp = Expectation("reply_within", "audit")
    md = channel(ChannelState.ACTIVE)
    assert ReplyWithin().evaluate(exp, ctx(md, [env(A, 0)], 599)) is None
    assert ReplyWithin().evaluate(exp, ctx(md, [env(A, 0)], 600)) is not None


# --- max_silence ---------------------------------------------------------------------------------


def test_max_silence_counts_from_creation_when_nothing_was_said() -> None:
    exp = Expectation("max_silence", "auto_close", {"seconds": 100})
    md = channel(ChannelState.ACTIVE)
    protocol_only = [
        env(A, 0, EV_CHANNEL_INVITE, [B]),
        env(B, 1, EV_CHANNEL_INVITE_ACK),
        env(A, 90, EV_EXPECTATION_VIOLATED),
    ]
    assert MaxSilence().evaluate(exp, ctx(md, protocol_only, 99)) is None
    assert MaxSilence().evaluate(exp, ctx(md, protocol_only, 100)) == Violation(
        exp, [], {"elapsed_seconds": 100.0, "threshold_seconds": 100}
    )


def test_max_silence_counts_from_the_last_content_envelope() -> None:
    exp = Expectation("max_silence", "audit", {"seconds": 100})
    md = channel(ChannelState.ACTIVE)
    wal = [env(A, 10), env(B, 50, "myapp.custom"), env(A, 120, EV_TASK_CANCEL_REQUEST, [B])]
    assert MaxSilence().evaluate(exp, ctx(md, wal, 149)) is None
    v = MaxSilence().evaluate(exp, ctx(md, wal, 150.25))
    assert v is not None and v.violator_ids == [] and v.detail["elapsed_seconds"] == 100.25


def test_max_silence_default_is_an_hour_and_only_when_active() -> None:
    exp = Expectation("max_silence", "audit")
    assert MaxSilence().evaluate(exp, ctx(channel(ChannelState.ACTIVE), [], 3599)) is None
    assert MaxSilence().evaluate(exp, ctx(channel(ChannelState.ACTIVE), [], 3600)) is not None
    assert MaxSilence().evaluate(exp, ctx(channel(ChannelState.PENDING), [], 9999)) is None


def test_evaluators_work_with_a_manual_clock() -> None:
    clock = ManualClock(T0)
    md = channel(ChannelState.ACTIVE)
    exp = Expectation("max_silence", "audit", {"seconds": "2m"})
    clock.advance(119)
    assert MaxSilence().evaluate(exp, ExpectationContext.at(md, None, [], clock())) is None
    clock.advance(1)
    assert MaxSilence().evaluate(exp, ExpectationContext.at(md, None, [], clock())) is not None


def test_evaluators_are_pure() -> None:
    md = channel(ChannelState.ACTIVE, ids=(A, B, C))
    wal = [env(A, 0), env(B, 5, audience=[A])]
    before_md, before_wal = md.to_dict(), [e.to_dict() for e in wal]
    for evaluator in default_evaluators():
        evaluator.evaluate(Expectation(evaluator.name, "audit", {"seconds": 1}), ctx(md, wal, 100))
    assert md.to_dict() == before_md and [e.to_dict() for e in wal] == before_wal


def test_expectations_may_be_plain_dicts() -> None:
    exp = {"name": "max_silence", "on_violation": "audit", "params": {"seconds": 5}}
    v = MaxSilence().evaluate(exp, ctx(channel(ChannelState.ACTIVE), [], 10))
    assert v is not None and v.expectation is exp


@pytest.mark.parametrize(
    ("params", "seconds"), [({}, 7), ({"seconds": 3}, 3), ({"seconds": 2.5}, 2.5), ({"seconds": "1m"}, 60)]
)
def test_threshold_seconds(params: dict, seconds: float) -> None:
    assert threshold_seconds(Expectation("x", "audit", params), 7) == seconds


@pytest.mark.parametrize("bad", [-1, "soon", True, None, [5], float("nan")])
def test_threshold_seconds_refuses_unusable_params(bad: object) -> None:
    with pytest.raises(ValueError) as info:
        threshold_seconds(Expectation("reply_within", "audit", {"seconds": bad}), 7)
    assert "expectation 'reply_within': params.seconds" in str(info.value)

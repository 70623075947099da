"""Edge: the hub's dry run — what the hub would do with an envelope, decided by its own code, writing nothing.

Its functions read the hub through ``DryRunHost`` (its core tables, delivery, arbitration and logs), never the
concrete ``Hub``.

- ``addressed(hub, md, env)``: the recipients the hub's dispatch queues ``env`` for, in its order, as if
  every recipient were connected: ``ag2net.hub.core.recipients``, the one function ``Delivery.dispatch``
  (the very code a post runs) asks; it reads the hub's tables and changes nothing.
- ``with_envelope(log, env)``: a ``WalLog`` reading as ``log`` followed by ``env``, without touching
  ``log``; a windowed view projects it in O(window) (its visibility indexes start from copies of the
  log's own).
- ``dry_run(hub, env)``: the ``dry_run`` op's body. Admission is ``core.admit`` (what ``explain_send`` and
  a post run) plus the encoding check a post makes before its append; then the recipients, each
  participant's projection before and after (the view in force, the adapter's renderer), and the adapter
  state after the fold. No id is minted and no clock is read: the probe envelope stays unstamped.
  Cost: a windowed view's summary counts every visible rendered envelope before its window, read from the
  log's (participant, renderer) index. The first dry run on a channel whose log keeps no index (a hub just
  opened on a long stored channel) builds the indexes of every participant it needs together, in slices
  that yield to the event loop (``ag2net.views.visibility_indexes``), each stored envelope read back once; later ones
  cost O(window). A built-in transcript's delta is the transcript of the envelope alone, after as many
  events as the index counts, so it costs O(1) once the index is warm instead of projecting the WAL twice.

This module is part of the hub (the op handler needs it); ``ag2net.debug`` builds on it.
"""

from __future__ import annotations

import asyncio
import difflib
import json
from array import array
from typing import TYPE_CHECKING, Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.envelope import PRIORITY_RANK, Envelope, encode_envelope
from ag2net.errors import NetworkError
from ag2net.events import BaseEvent
from ag2net.hub.core import Admitted, HubCore, Refused, admit, recipients
from ag2net.views.registry import resolve_view, view_spec
from ag2net.views.visibility_indexes import build_indexes, per_envelope, windowed
from ag2net.views.wal import VisibleIndex, WalLog, WalSlice

_LOG_BLOCK = 2048  # a closed channel's envelopes read and decoded between two yields to the event loop

if TYPE_CHECKING:
    from ag2net.hub.arbiter import Arbitration
    from ag2net.hub.delivery import Delivery
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.registry import Identities


class DryRunHost(Protocol):
    """What a dry run reads of the hub: its core tables, delivery, arbitration and logs."""

    core: HubCore
    identities: Identities
    delivery: Delivery
    arbitration: Arbitration
    logs: ChannelLogs

    def name_for(self, agent_id: str, *, default: str | None = None) -> str: ...


# ---------------------------------------------------------------------------------------- dispatch


def addressed(
    hub: DryRunHost, md: ChannelMetadata, env: Envelope, denied: set[str] | None = None
) -> list[str]:
    """The recipients the hub's dispatch queues ``env`` for on channel ``md``, in dispatch order, as if each
    were connected: ``ag2net.hub.core.recipients``, the very function ``Delivery.dispatch`` runs (so an
    invite's ack or reject has none, as the hub delivers it to no one). ``denied``: a registered arbiter's
    refusals (``arbiter_denials``)."""
    identities = hub.identities
    return recipients(identities.agents, identities.name_for, md, env, denied)


async def arbiter_denials(hub: DryRunHost, md: ChannelMetadata, env: Envelope) -> set[str] | None:
    """A registered arbiter's dispatch refusals for ``env`` (None under the default rules)."""
    return await hub.arbitration.dispatch_denials(md, env)


# ---------------------------------------------------------------------------------------- WAL + one


class _WithEnvelope(WalLog):
    """``under`` followed by extra envelopes; positions below ``len(under)`` read through ``under``."""

    __slots__ = ("_under",)

    def __init__(self, under: WalLog, extra: list[Envelope]) -> None:
        n = len(under)
        if n:
            super().__init__(base=n, cold=lambda start, stop: list(under.iter_range(start, stop)))
        else:
            super().__init__()
        self._under = under
        for env in extra:
            self.append(env)

    def _derived(self, under_index: VisibleIndex, participant_id: str, render: Any, end: int) -> VisibleIndex:
        idx = VisibleIndex(participant_id, render)
        idx.positions = array("I", under_index.positions)
        idx.dropped = under_index.dropped
        idx.first_seen = dict(under_index.first_seen)
        idx.scanned = under_index.scanned
        if end > idx.scanned:
            idx.advance(self, end)
        return idx

    def visible_index(self, participant_id: str, render: Any, end: int) -> VisibleIndex:
        n = len(self._under)
        return self._derived(
            self._under.visible_index(participant_id, render, min(end, n)), participant_id, render, end
        )

    def rebuild_index(self, participant_id: str, render: Any, end: int) -> VisibleIndex:
        n = len(self._under)
        return self._derived(
            self._under.rebuild_index(participant_id, render, min(end, n)), participant_id, render, end
        )


async def channel_log(hub: DryRunHost, channel_id: str) -> WalLog:
    """The channel's whole WAL as a ``WalLog``: the hub's cached log of a live channel (its visibility
    indexes shared with the agents' views), else a log read from the store (a closed channel), in blocks
    of ``_LOG_BLOCK`` envelopes with a yield to the event loop between two (decoding a long channel's
    envelopes in one go would freeze the loop for seconds)."""
    wal = await hub.logs.for_read(channel_id)
    if wal is not None:
        return wal
    log = WalLog()
    while True:
        block = await hub.logs.read(channel_id, since=len(log), until=len(log) + _LOG_BLOCK)
        log.extend(block)
        if len(block) < _LOG_BLOCK:
            return log
        await asyncio.sleep(0)


def with_envelope(log: WalLog, env: Envelope) -> WalSlice:
    """The whole of ``log`` and then ``env``, as a slice a view projects; ``log`` is not changed."""
    return _WithEnvelope(log, [env]).prefix()


# ---------------------------------------------------------------------------------------- projections


def event_dict(event: BaseEvent) -> dict[str, Any]:
    return event.to_dict()


def projection_delta(before: list[BaseEvent], after: list[BaseEvent]) -> dict[str, Any]:
    """What changes between two projections: ``removed`` and ``added`` events (dicts), in order."""
    lo = 0
    top = min(len(before), len(after))
    while lo < top and before[lo] == after[lo]:
        lo += 1
    hi_b, hi_a = len(before), len(after)
    while hi_b > lo and hi_a > lo and before[hi_b - 1] == after[hi_a - 1]:
        hi_b -= 1
        hi_a -= 1
    mid_b = [json.dumps(event_dict(e), sort_keys=True, default=str) for e in before[lo:hi_b]]
    mid_a = [json.dumps(event_dict(e), sort_keys=True, default=str) for e in after[lo:hi_a]]
    removed: list[dict[str, Any]] = []
    added: list[dict[str, Any]] = []
    matcher = difflib.SequenceMatcher(None, mid_b, mid_a, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag in ("replace", "delete"):
            removed += [event_dict(e) for e in before[lo + i1 : lo + i2]]
        if tag in ("replace", "insert"):
            added += [event_dict(e) for e in after[lo + j1 : lo + j2]]
    return {"before": len(before), "after": len(after), "removed": removed, "added": added}


# ---------------------------------------------------------------------------------------- dry run


async def _appended_delta(view: Any, log: WalLog, env: Envelope, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``projection_delta`` of a built-in transcript before and after ``env``, without projecting the WAL:
    the transcript of the WAL and then ``env`` is the WAL's (one event per visible rendered envelope, as
    many as the log's index counts) followed by the transcript of ``env`` alone."""
    count = len(log.visible_index(kwargs["participant_id"], kwargs["render_envelope"], len(log)))
    added = await view.project([env], **kwargs)
    return {
        "before": count,
        "after": count + len(added),
        "removed": [],
        "added": [event_dict(e) for e in added],
    }


def _refusal(error: NetworkError, advice: str = "") -> dict[str, Any]:
    return {"error": type(error).__name__, "code": error.code, "message": str(error), "advice": advice}


def _state_dict(adapter: Any, state: Any) -> Any:
    to_dict = getattr(adapter, "state_to_dict", None)
    if callable(to_dict):
        try:
            return json.loads(json.dumps(to_dict(state), default=str))
        except Exception:
            return repr(state)
    return repr(state)


def expected_of(adapter: Any, md: ChannelMetadata, state: Any) -> dict[str, Any] | None:
    """``adapter.expected_next`` as a dict (None: nobody in particular)."""
    expected = adapter.expected_next(md, state)
    if expected is None:
        return None
    return {"agent_id": expected.agent_id, "triggering_envelope_id": expected.triggering_envelope_id}


async def dry_run(hub: DryRunHost, envelope: Envelope) -> dict[str, Any]:
    """What posting ``envelope`` would do now (see the module docstring); nothing is written or delivered."""
    env = envelope.copy()
    env.envelope_id = ""
    env.created_at = ""
    out: dict[str, Any] = {
        "channel_id": env.channel_id,
        "sender_id": env.sender_id,
        "event_type": env.event_type,
        "admitted": False,
        "refusal": None,
        "recipients": [],
        "projections": {},
        "state_before": None,
        "state_after": None,
        "expected_before": None,
        "expected_after": None,
        "closes": None,
    }
    verdict = admit(hub.core, env)
    if isinstance(verdict, Refused):
        out["refusal"] = _refusal(verdict.error, verdict.advice)
        return out
    try:
        encode_envelope(env)  # a post's append encodes the envelope, refusing what no store can hold
        verdict.fold()
    except NetworkError as exc:
        out["refusal"] = _refusal(exc)
        return out
    out["admitted"] = True
    md, adapter = verdict.metadata, verdict.adapter
    out.update(_states(verdict))
    out["recipients"] = _recipients(hub, md, env, await arbiter_denials(hub, md, env))
    out["projections"] = await _projections(hub, md, adapter, env)
    return out


def _states(verdict: Admitted) -> dict[str, Any]:
    """The adapter state and expected speaker before and after the fold, and whether it closes."""
    md, adapter = verdict.metadata, verdict.adapter
    result = verdict.result
    closes = None
    if result is not None and result.next_state is not None:
        closes = {"state": result.next_state.value, "reason": result.auto_close_reason}
    return {
        "state_before": _state_dict(adapter, verdict.state),
        "state_after": _state_dict(adapter, verdict.new_state),
        "expected_before": expected_of(adapter, md, verdict.state),
        "expected_after": expected_of(adapter, md, verdict.new_state),
        "closes": closes,
    }


def _recipients(
    hub: DryRunHost, md: ChannelMetadata, env: Envelope, denied: set[str] | None
) -> list[dict[str, Any]]:
    """Each recipient in dispatch order, with its connection and queue as the hub holds them now."""
    delivery = hub.delivery
    rank = PRIORITY_RANK.get(env.priority, 1)
    out = []
    for order, rid in enumerate(addressed(hub, md, env, denied)):
        mailbox = delivery.mailboxes.get(rid)
        out.append(
            {
                "agent_id": rid,
                "name": hub.name_for(rid),
                "order": order,
                "priority": env.priority,
                "rank": rank,
                "connected": rid in delivery.bindings,
                "unacked": delivery.pending(rid),
                "queued": len(mailbox) if mailbox is not None else 0,
            }
        )
    return out


async def _projections(hub: DryRunHost, md: ChannelMetadata, adapter: Any, env: Envelope) -> dict[str, Any]:
    """Each participant's projection before and after ``env`` (as a delta), under the view in force."""
    log = await channel_log(hub, md.channel_id)
    render = adapter.render_envelope
    views: dict[str, Any] = {pid: resolve_view(md, pid, adapter) for pid in md.participant_ids()}
    # the indexes a windowed view's summary and a transcript's length are read from, built (the first time,
    # e.g. on a hub just opened on a long stored channel) in slices that yield to the event loop: one cold
    # block (512 envelopes, ~3-7 ms of CPU) per slice, since the composer calls this as the user types
    counted = [
        (pid, render, view.recent_n if windowed(view) else 0)
        for pid, view in views.items()
        if windowed(view) or per_envelope(view)
    ]
    await build_indexes(log, counted, len(log), step=512)
    before_wal = log.prefix()
    after_wal = with_envelope(log, env)
    projections: dict[str, Any] = {}
    for pid, view in views.items():
        kwargs: dict[str, Any] = {
            "participant_id": pid,
            "channel": md,
            "render_envelope": render,
            "name_for": hub.name_for,
        }
        if per_envelope(view):
            delta = await _appended_delta(view, log, env, kwargs)
        else:
            before = await view.project(before_wal, **kwargs)
            after = await view.project(after_wal, **kwargs)
            delta = projection_delta(before, after)
        projections[pid] = {"view": view_spec(view), **delta}
    return projections


__all__ = [
    "DryRunHost",
    "addressed",
    "arbiter_denials",
    "channel_log",
    "dry_run",
    "expected_of",
    "projection_delta",
    "with_envelope",
]

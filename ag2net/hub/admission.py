"""Shell: ``Admission`` (``hub.admission``) — ``post_envelope``, driving the pure core around the durable append.

A post, holding the channel's lock: a registered arbiter is asked what it decides (``Arbitration.consult``)
→ ``core.admit`` decides, once → stamp and fold → ``await store.append`` → ``core.apply`` → dispatch
(``Delivery``) → observe and fan out. ``explain_send``/``can_send`` run the same ``core.admit`` on a probe
envelope (``why_not_send``). Posts queued behind the lock may be admitted together, in one store group.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.envelope import (
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_TEXT,
    Envelope,
    encode_envelope,
    is_protocol_event,
)
from ag2net.errors import NetworkError
from ag2net.hub.core import Admitted, HubCore, Refused, admit, apply, name_refusal
from ag2net.hub.locks import GRANTED, ChannelLock

if TYPE_CHECKING:
    from ag2net.hub.arbiter import Arbitration
    from ag2net.hub.delivery import Delivery
    from ag2net.hub.lifecycle import Channels
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.services import Services

log = logging.getLogger(__name__)
#: What an operator reads of the hub's decisions (registrations, refused envelopes), as ag2's hub logs them.
hub_log = logging.getLogger("ag2net.hub")

#: Appends several envelopes of one channel all or none (``Store.append_group``, when the store has it).
AppendGroup = Callable[[str, list[tuple[str, str]]], Awaitable[list[int]]]


class Admission:
    """Admits envelopes: the one way into a channel's WAL (besides the lifecycle's own close)."""

    __slots__ = ("append_group", "arbitration", "channels", "core", "delivery", "gate", "logs", "services")

    def __init__(
        self,
        services: Services,
        core: HubCore,
        *,
        channels: Channels,
        arbitration: Arbitration,
        delivery: Delivery,
        logs: ChannelLogs,
    ) -> None:
        self.services, self.core = services, core
        self.channels, self.arbitration, self.delivery, self.logs = channels, arbitration, delivery, logs
        # group admission needs a store that appends several envelopes all or none
        self.append_group: AppendGroup | None = getattr(services.store, "append_group", None)
        #: The breakpoints and their holding (``hub.stepping``), set by the hub.
        self.gate: Gate | None = None

    async def post(self, envelope: Envelope, *, bypass: bool = False) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``.

        A post that matches an enabled breakpoint (or falls in step mode) and would be admitted is held
        first, until an operator answers (``hub.stepping``); ``bypass`` (a release) skips that."""
        try:
            gate = self.gate
            if gate is not None and not bypass and gate.breakpoints.armed:
                match = gate.breakpoints.match(envelope)
                if match is not None:
                    return await self._held(gate, envelope, match)
            # ``_admit``, inline: its frame is one of the few every post runs through
            lock = self._lock_of(envelope)
            if lock is None:
                lock = await self._lock_after_consult(envelope)
            if (
                self.arbitration.registered is None
                and self.append_group is not None
                and not lock.held_here
                and not is_protocol_event(envelope.event_type)
                and (lock.busy or lock.waiting or lock.gathering)  # else: this post is a group of one
            ):
                return await self._admit_queued(lock, envelope)
            async with lock:
                if self.arbitration.registered is None:  # ``_admit_locked``, inline
                    return await self._commit(_admitted(admit(self.core, envelope)))
                return await self._admit_locked(envelope)
        except _Answered as answered:  # a held post's answer: the sender's error, reported once
            raise answered.error from None
        except NetworkError as exc:
            name_refusal(self.core, exc)  # channels and participants by name, not by 32-hex id
            hub_log.info(
                "refused %s from %s on channel %s: %s",
                envelope.event_type,
                self.core.identities.name_for(envelope.sender_id),
                envelope.channel_id,
                exc,
            )
            listeners = self.services.listeners
            if listeners.tracer is not None:
                listeners.tracer.fail_envelope(envelope, exc)
            if listeners.active:
                await listeners.fan_out("on_envelope_rejected", envelope, exc)
            raise

    async def _held(self, gate: Gate, env: Envelope, match: tuple[str, str]) -> str:
        """Hold a matching post; what its answer raises (a drop, a refused release) was reported already."""
        try:
            return await gate.hold(env, *match)
        except NetworkError as exc:
            if getattr(exc, "held_answer", False):
                raise _Answered(exc) from exc
            raise

    def _lock_of(self, env: Envelope) -> ChannelLock | None:
        """The channel's lock; None when the channel does not exist (no lock is made for it)."""
        cid = env.channel_id
        if cid not in self.channels.by_id:
            return None
        # Validation -> append -> fold -> dispatch run holding the channel's lock: adapter state,
        # wal_count and the WAL always agree, whatever else is posted concurrently.
        return self.channels.locks(cid)

    async def _lock_after_consult(self, env: Envelope) -> ChannelLock:
        """A post to a channel that does not exist: refused, unless it appears while a registered
        arbiter is asked (then admitted as any other post, under its lock)."""
        if self.arbitration.registered is not None:
            await self.arbitration.consult(env)
        _admitted(admit(self.core, env))
        return self.channels.locks(env.channel_id)

    async def _admit_locked(self, env: Envelope) -> str:
        """Holding the channel's lock: a registered arbiter's questions, the one pure admission (raising
        its refusal), then the commit."""
        if self.arbitration.registered is not None:
            await self.arbitration.consult(env)
        return await self._commit(_admitted(admit(self.core, env)))

    # ------------------------------------------------------------ group admission

    async def _admit_queued(self, lock: ChannelLock, env: Envelope) -> str:
        """Wait in the lock's line as a post; whoever holds it when this post is next in line may admit it
        together with its own (``_admit_group``) and answer it through its future, else this post gets the
        lock and admits itself and the posts queued right behind it. A holder alone in line while posts
        arrive together (``lock.gathering``: the last holder admitted a group) lets the loop run once
        first, so the posts arriving with it queue behind it: one store group, not one of one and then
        one of the rest (a pipelined sender's posts stay in step with the groups' answers)."""
        loop = asyncio.get_running_loop()
        post = _Post(env, loop.create_future())
        if lock.busy:
            outcome = await lock.wait_turn(post, post.done)
            if outcome is not GRANTED:
                return outcome  # admitted by the holder before us (a refusal raised from wait_turn)
            post.done = loop.create_future()  # its line future said GRANTED
        else:
            lock.take()
        try:
            if lock.gathering and next(lock.queued_posts(), None) is None:
                await asyncio.sleep(0)  # alone while posts arrive together: let the loop run them once
            group = [post]
            if self._groups_allowed():
                for follower in lock.queued_posts():
                    group.append(follower)
                    if len(group) >= MAX_GROUP:
                        break
            lock.gathering = len(group) > 1
            if len(group) == 1:
                return await self._admit_locked(env)
            await self._admit_group(group)
        finally:
            lock.release()
        return post.done.result()

    def _groups_allowed(self) -> bool:
        """Group admission keeps what each post observes only when nothing runs between two posts:
        no registered arbiter, tracer or listener (their awaits interleave with each envelope)."""
        listeners = self.services.listeners
        return (
            self.arbitration.registered is None
            and listeners.tracer is None
            and not listeners.active
            and self.append_group is not None
        )

    async def _admit_group(self, group: list[_Post]) -> None:
        """Admit queued posts of one channel together: each is admitted against the state the ones before
        it leave (the same ``admit``), all are appended in one all-or-nothing store group, then applied
        and dispatched in order. A post whose admission could depend on the deliveries of the ones
        before it (an inbox near its cap), and every post after one that changes the channel's state,
        is left to admit itself."""
        core = self.core
        first = group[0].envelope
        cid = first.channel_id
        md = self.channels.by_id[cid]
        state: Any = core.channels.states.get(cid)
        taken: list[tuple[_Post, Admitted, str]] = []
        extra: dict[str, int] = {}  # recipient with an inbox cap -> the group's envelopes to it so far
        caps: dict[str, int] = {}  # recipient -> its inbox cap (0: none), read once per group
        for post in group:
            env = post.envelope
            others = _others(md, env)
            if self._inbox_may_fill(others, extra, caps):  # never for the first: nothing before it
                break
            try:
                admitted = _admitted(admit(core, env, state))
                self.services.stamp(env)
                text = encode_envelope(env)
                admitted.fold()
            except Exception as exc:  # this post's refusal (or its adapter's error), as alone
                _settle(post, exc)
                continue
            state = admitted.new_state
            taken.append((post, admitted, text))
            for rid in others:
                if caps[rid] > 0:
                    extra[rid] = extra.get(rid, 0) + 1
            result = admitted.result
            if result is not None and result.next_state is not None:
                break
        if not taken:
            return
        append_group = self.append_group
        assert append_group is not None
        try:
            await append_group(cid, [(a.envelope.envelope_id, text) for _, a, text in taken])
        except Exception:
            # Nothing of the group was written: admit each on its own, as if they had come one by one.
            for post, _, _ in taken:
                try:
                    _settle(post, await self._admit_locked(post.envelope))
                except Exception as exc:
                    _settle(post, exc)
            return
        for _, admitted, text in taken:
            env = admitted.envelope
            self.logs.remember(cid, env, text, apply(core, admitted))
        delivery = self.delivery
        try:
            for _, admitted, _ in taken:
                delivery.dispatch(md, admitted.envelope)
            result = taken[-1][1].result
            if result is not None and result.next_state is not None:
                await self.channels.transition(cid, result.next_state, result.auto_close_reason)
        finally:
            # durable, so answered whatever follows; once the group is done, as each would be by its own
            # commit: the posters run after the holder's last step, in line order
            for post, admitted, _ in taken:
                _settle(post, admitted.envelope.envelope_id)

    def _inbox_may_fill(self, others: list[str], extra: dict[str, int], caps: dict[str, int]) -> bool:
        """Whether a recipient's inbox cap could refuse an envelope to ``others`` (its recipients but the
        sender) once the group's earlier envelopes are delivered (then it waits for them, as it would one
        by one). Fills ``caps`` with the cap of each recipient it meets (0 for none, or unregistered)."""
        agents = self.core.identities.agents
        for rid in others:
            cap = caps.get(rid)
            if cap is None:
                rec = agents.get(rid)
                cap = caps[rid] = rec.rule.limits.inbox.max_pending if rec is not None else 0
            if cap > 0:
                n = extra.get(rid)
                if n and self.delivery.pending(rid) + n >= cap:
                    return True
        return False

    async def _commit(self, admitted: Admitted) -> str:
        """Stamp, fold, append durably, apply, dispatch and observe one admitted envelope (in its lock)."""
        env = admitted.envelope
        md = admitted.metadata
        cid = md.channel_id
        protocol = admitted.protocol
        self.services.stamp(env)
        listeners = self.services.listeners
        tracer = listeners.tracer
        if tracer is not None and not protocol:
            tracer.start_envelope(env)  # writes the span's traceparent into trace_id before the WAL
        text = encode_envelope(env)
        admitted.fold()
        await self.services.store.append(cid, env.envelope_id, text)
        seq = apply(self.core, admitted)
        self.logs.remember(cid, env, text, seq)
        if env.event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT):
            await self.channels.handshake(md, env)
            return env.envelope_id
        arbitration = self.arbitration
        if arbitration.registered is None:
            self.delivery.dispatch(md, env)
        else:
            self.delivery.dispatch(md, env, await arbitration.dispatch_denials(md, env))
        if tracer is not None and not protocol:
            tracer.end_envelope(env)
        if listeners.active:
            await listeners.fan_out("on_envelope_posted", env, md)
        result = admitted.result
        if result is not None and result.next_state is not None:
            await self.channels.transition(cid, result.next_state, result.auto_close_reason)
        return env.envelope_id

    def why_not_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]:
        """``explain_send``'s synchronous body: the admission a post runs, on a probe envelope
        (``event_data={"text": ""}``, no audience); a refusal is the message the post would raise,
        followed by what to do when admission knows (a closed channel: open a new one)."""
        probe = Envelope(channel_id, sender_id, None, event_type or EV_TEXT, {"text": ""})
        verdict = admit(self.core, probe)  # no arbiter is asked: a probe is not a post
        if isinstance(verdict, Refused):
            return False, verdict.message + verdict.advice
        return True, ""


MAX_GROUP = 256  # posts admitted together at most (one store group)


class Gate(Protocol):
    """What admission asks before a post: the breakpoints (``armed``, ``match``) and their holding."""

    breakpoints: Any

    async def hold(self, env: Envelope, reason: str, breakpoint_id: str) -> str: ...


class _Answered(NetworkError):
    """Carries a held post's answer (a drop, a refused release) past the refusal reporting."""

    def __init__(self, error: NetworkError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class _Post:
    """A post waiting for its channel's lock: ``done`` is its future in the lock's line (``GRANTED``, or its
    outcome when the holder admits it)."""

    envelope: Envelope
    done: asyncio.Future[Any]


def _admitted(verdict: Admitted | Refused) -> Admitted:
    if isinstance(verdict, Refused):
        raise verdict.error
    return verdict


def _settle(post: _Post, outcome: str | BaseException) -> None:
    fut = post.done
    if fut.done():
        return
    if isinstance(outcome, BaseException):
        fut.set_exception(outcome)
        fut.exception()  # retrieved: a poster cancelled meanwhile must not leave a warning behind
    else:
        fut.set_result(outcome)


def _others(md: ChannelMetadata, env: Envelope) -> list[str]:
    """The ``candidates`` but the sender (an audience may list it)."""
    sender_id = env.sender_id
    audience = env.audience
    if audience is None:
        return [p.agent_id for p in md.participants if p.agent_id != sender_id]
    return [a for a in audience if a != sender_id]


__all__ = ["Admission"]

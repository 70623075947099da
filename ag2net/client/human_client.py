"""``HumanClient``: a participant without an LLM — a person at the workbench, a bridge, a seeder."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ag2net.client.base import ParticipantClient
from ag2net.envelope import EV_CHANNEL_INVITE, PRIORITY_RANK, Envelope, invite_ack
from ag2net.errors import NetworkError
from ag2net.identity import Passport, Resume, Rule

if TYPE_CHECKING:
    from ag2net.client.hub_port import ParticipantHub

log = logging.getLogger(__name__)

EnvelopeCallback = Callable[[Envelope], Awaitable[None]]
_RANK = PRIORITY_RANK


class HumanClient(ParticipantClient):
    """Push (``on_envelope``) and pull (``next_envelope``, ``envelopes()``) access to deliveries.

    The pull side serves ``urgent`` before ``normal`` before ``background``, FIFO within a level
    (SPEC decision 1), however long the deliveries waited: a human who reads later still gets the
    urgent ones first. Callbacks run in arrival order.
    """

    kind_label = "HumanClient"

    #: Deliveries kept for ``next_envelope``/``envelopes()`` when nobody pulls; beyond it the oldest
    #: go first (whatever their priority) and ``dropped`` counts them, so a human that only uses
    #: callbacks (the workbench) does not grow without bound.
    pull_buffer = 10_000

    def __init__(
        self,
        *,
        passport: Passport,
        resume: Resume,
        rule: Rule,
        hub: Any = None,
        hub_client: ParticipantHub,
        auto_ack_invites: bool = True,
    ) -> None:
        """``hub`` is accepted for ag2's signature; the connection is ``hub_client``'s."""
        super().__init__(passport=passport, resume=resume, rule=rule, hub_client=hub_client)
        self.auto_ack_invites = auto_ack_invites
        self._callbacks: tuple[EnvelopeCallback, ...] = ()
        # the in-process ack without a coroutine (``HubClient.ack_now``), when the hub client has it
        self._ack_now: Callable[[Envelope, str], bool] | None = getattr(hub_client, "ack_now", None)
        # One FIFO per priority level, urgent first; items are (arrival number, envelope).
        self._levels: tuple[deque[tuple[int, Envelope]], ...] = tuple(deque() for _ in PRIORITY_RANK)
        self._buffered = 0
        self._arrivals = itertools.count()
        self._arrived = asyncio.Event()
        self._signalled = False  # whether ``_arrived`` is set (only this class sets and clears it)
        self.dropped = 0

    async def receive(self, envelope: Envelope) -> None:
        if self._disconnected:
            return
        agent_id = self._passport.agent_id or self.agent_id  # the property raises when there is none
        if (
            envelope.event_type == EV_CHANNEL_INVITE
            and self.auto_ack_invites
            and envelope.sender_id != agent_id
        ):
            with contextlib.suppress(NetworkError):
                await self._post_ack(envelope)
        self._to_inbox(envelope)
        # _buffer, inline (one call per delivery)
        if self._buffered >= self.pull_buffer:
            self._drop_oldest()
        self._levels[_RANK.get(envelope.priority, 1)].append((next(self._arrivals), envelope))
        self._buffered += 1
        if not self._signalled:  # the event's own state, without a call per delivery
            self._signalled = True
            self._arrived.set()
        # a tuple, replaced (not changed) when a callback is added or removed: a callback may add or remove
        # callbacks while this loop runs, so the loop needs no copy
        for callback in self._callbacks:
            try:
                await callback(envelope)
            except Exception:
                log.exception("HumanClient %s: envelope callback failed", self.name)
        hub_client = self._hub_client
        ack_now = self._ack_now
        if ack_now is None or not ack_now(envelope, agent_id):
            await hub_client.ack(envelope, agent_id)

    def _buffer(self, envelope: Envelope) -> None:
        if self._buffered >= self.pull_buffer:
            self._drop_oldest()
        self._levels[_RANK.get(envelope.priority, 1)].append((next(self._arrivals), envelope))
        self._buffered += 1
        self._signalled = True
        self._arrived.set()

    def _drop_oldest(self) -> None:
        # the level whose head arrived first (a plain loop: this runs per delivery once the buffer is full)
        oldest = None
        for level in self._levels:
            if level and (oldest is None or level[0][0] < oldest[0][0]):
                oldest = level
        if oldest is not None:
            oldest.popleft()
            self._buffered -= 1
            self.dropped += 1

    def _pop(self) -> Envelope | None:
        """The most urgent, then oldest, buffered envelope (None when the buffer is empty)."""
        for level in self._levels:
            if level:
                self._buffered -= 1
                return level.popleft()[1]
        return None

    async def _pull(self) -> Envelope | None:
        """Wait for the next envelope in priority order; None once disconnected and drained."""
        while True:
            env = self._pop()
            if env is not None:
                return env
            if self._disconnected:
                return None
            self._signalled = False
            self._arrived.clear()
            await self._arrived.wait()

    async def _post_ack(self, invite: Envelope) -> str:
        return await self._hub_client.post_envelope(invite_ack(invite, self.agent_id))

    def on_envelope(self, callback: EnvelopeCallback) -> EnvelopeCallback:
        """Add a callback run once per inbound envelope (in registration order; errors are logged)."""
        self._callbacks = (*self._callbacks, callback)
        return callback

    def remove_envelope_callback(self, callback: EnvelopeCallback) -> None:
        callbacks = list(self._callbacks)
        with contextlib.suppress(ValueError):
            callbacks.remove(callback)
            self._callbacks = tuple(callbacks)

    async def next_envelope(
        self, *, predicate: Callable[[Envelope], bool] | None = None, timeout: float | None = None
    ) -> Envelope:
        """The next inbound envelope matching ``predicate`` (non-matching ones are discarded).

        Most urgent first, then oldest first within a priority level.
        """
        self._check_connected()

        async def wait() -> Envelope:
            while True:
                env = await self._pull()
                if env is None:
                    raise RuntimeError("HumanClient is disconnected")
                if predicate is None or predicate(env):
                    return env

        return await asyncio.wait_for(wait(), timeout)

    async def envelopes(self) -> AsyncIterator[Envelope]:
        """Every inbound envelope until ``disconnect()``, most urgent first (FIFO within a level)."""
        while True:
            env = await self._pull()
            if env is None:
                return
            yield env

    async def post_envelope(self, envelope: Envelope) -> str:
        return await self.send_envelope(envelope)

    async def can_send(self, channel_id: str, *, event_type: str | None = None) -> tuple[bool, str]:
        """Whether this human may speak in ``channel_id`` now, and if not, why (one sentence)."""
        return await self._hub_client.explain_send(channel_id, self.agent_id, event_type=event_type)

    async def close_channel(self, channel_id: str, reason: str = "human_closed") -> Any:
        return await self._hub_client.close_channel(channel_id, reason=reason)

    async def receive_chunk(self, delta: object, *, channel_id: str, parent_envelope_id: str) -> None:
        """Streaming chunks of an agent's reply; a human sees the final envelope, so this does nothing.
        Subclass it to show token-level streaming."""
        return None

    def _disconnect(self) -> None:
        if self._disconnected:
            return
        super()._disconnect()
        self._signalled = True
        self._arrived.set()  # pullers drain what is buffered, then end


__all__ = ["HumanClient"]

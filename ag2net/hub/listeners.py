"""Shell: hub listeners — the observer protocol, a no-op base, and ``Listeners``, the hub's fan-out to them.

A listener hears of the hub's state transitions after they happened (it cannot veto them; that is the
arbiter's job). ``Hub.register_listener(listener)`` adds one; every event is handed first to the hub's
own method of the same name (so a ``Hub`` subclass can override ``on_envelope_posted`` without
registering itself), then to each listener in registration order. A listener that raises is logged and
skipped: it never breaks admission, delivery or another listener.

The hub's audit log (``Hub.audit_log``, kept by ``hub.audit``) is the built-in observer: every audit record
the hub writes goes through its ``append``.
"""

from __future__ import annotations

import inspect
import logging
from typing import Any, Protocol, runtime_checkable

log = logging.getLogger(__name__)

#: The listener methods, in the order the reference lists them.
LISTENER_METHODS: tuple[str, ...] = (
    "on_envelope_posted",
    "on_envelope_rejected",
    "on_dispatch_failed",
    "on_channel_event",
    "on_agent_event",
    "on_expectation_fired",
    "on_turn_failed",
    "on_task_event",
    "on_inbox_pressure",
)


@runtime_checkable
class HubListener(Protocol):
    """What a hub listener implements (all coroutines). Subclass ``BaseHubListener`` to override only some.

    * ``on_envelope_posted(envelope, metadata)`` — an envelope was admitted and handed to delivery.
    * ``on_envelope_rejected(envelope, reason)`` — admission refused it; ``reason`` is the exception.
    * ``on_dispatch_failed(envelope, recipient_id, reason)`` — a delivery to one recipient failed.
    * ``on_channel_event(channel_id, kind, payload)`` — ``created``, ``opened``, ``closed``, ``expired``.
    * ``on_agent_event(agent_id, kind, payload)`` — ``registered``, ``unregistered``, ``resume_set``,
      ``skill_set``, ``rule_set``, ``observation_recorded``.
    * ``on_expectation_fired(channel_id, expectation, violation)`` — an expectation evaluator fired.
    * ``on_turn_failed(channel_id, agent_id, envelope_id, exc)`` — an agent's turn raised.
    * ``on_task_event(task_id, kind, payload)`` — a task changed state.
    * ``on_inbox_pressure(agent_id, pending, cap)`` — an inbox crossed its high-water mark.
    """

    async def on_envelope_posted(self, envelope: Any, metadata: Any) -> None: ...

    async def on_envelope_rejected(self, envelope: Any, reason: Any) -> None: ...

    async def on_dispatch_failed(self, envelope: Any, recipient_id: str, reason: Any) -> None: ...

    async def on_channel_event(self, channel_id: str, kind: str, payload: dict[str, Any]) -> None: ...

    async def on_agent_event(self, agent_id: str, kind: str, payload: dict[str, Any]) -> None: ...

    async def on_expectation_fired(self, channel_id: str, expectation: Any, violation: Any) -> None: ...

    async def on_turn_failed(
        self, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException
    ) -> None: ...

    async def on_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None: ...

    async def on_inbox_pressure(self, agent_id: str, pending: int, cap: int) -> None: ...


class BaseHubListener:
    """A listener that ignores every event: subclass it and override the methods you need."""

    async def on_envelope_posted(self, envelope: Any, metadata: Any) -> None:
        return None

    async def on_envelope_rejected(self, envelope: Any, reason: Any) -> None:
        return None

    async def on_dispatch_failed(self, envelope: Any, recipient_id: str, reason: Any) -> None:
        return None

    async def on_channel_event(self, channel_id: str, kind: str, payload: dict[str, Any]) -> None:
        return None

    async def on_agent_event(self, agent_id: str, kind: str, payload: dict[str, Any]) -> None:
        return None

    async def on_expectation_fired(self, channel_id: str, expectation: Any, violation: Any) -> None:
        return None

    async def on_turn_failed(
        self, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException
    ) -> None:
        return None

    async def on_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        return None

    async def on_inbox_pressure(self, agent_id: str, pending: int, cap: int) -> None:
        return None


def overridden_hooks(cls: type) -> frozenset[str]:
    """The listener methods ``cls`` (a ``Hub`` subclass) defines itself rather than inheriting the no-ops."""
    return frozenset(
        name for name in LISTENER_METHODS if getattr(cls, name, None) is not getattr(BaseHubListener, name)
    )


class Listeners:
    """The listeners of one hub, in registration order, and the fan-out of each event to them.

    ``owner`` is the hub: its own hook methods a subclass overrides (``own_hooks``) hear every event first,
    then the OpenTelemetry ``tracer`` (``ag2net.hub.telemetry``, with a tracer provider), then each
    listener. With no own hook and no listener, ``active`` is False and the hub skips the fan-out
    entirely (no coroutine per envelope).
    """

    __slots__ = ("active", "own_hooks", "owner", "registered", "tracer")

    def __init__(self, owner: Any, tracer_provider: Any = None, trace_content: bool | None = None) -> None:
        self.owner = owner
        self.registered: list[Any] = []
        self.own_hooks = overridden_hooks(type(owner))
        self.active = bool(self.own_hooks)  # whether an event reaches anyone but the tracer
        self.tracer: Any = None
        if tracer_provider is not None:
            # Imported only here: without a tracer provider, OpenTelemetry is never imported.
            from ag2net.hub.telemetry import EnvelopeTracer

            self.tracer = EnvelopeTracer(tracer_provider, capture_content=trace_content)

    def add(self, listener: Any) -> None:
        """Add ``listener`` (a ``HubListener``; methods it lacks are skipped); events reach it in
        registration order, after the hub's own hook methods."""
        self.registered.append(listener)
        self.active = True

    def remove(self, listener: Any) -> None:
        """Remove ``listener``; no-op if it is not registered."""
        try:
            self.registered.remove(listener)
        except ValueError:
            pass
        self.active = bool(self.registered or self.own_hooks)

    async def call_hook(self, owner: Any, fn: Any, method: str, args: tuple[Any, ...]) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception(
                "%s.%s raised; the event goes on to the other listeners", type(owner).__name__, method
            )

    async def fan_out(self, method: str, *args: Any) -> None:
        """Hand one event to the hub's own ``method`` (if a subclass overrides it), to the tracer, then to
        every listener in registration order; exceptions are logged, never propagated."""
        owner = self.owner
        if method in self.own_hooks:
            await self.call_hook(owner, getattr(owner, method), method, args)
        tracer = self.tracer
        if tracer is not None:
            hook = getattr(tracer, method, None)
            if hook is not None:
                await self.call_hook(tracer, hook, method, (owner, *args))
        for listener in list(self.registered):
            fn = getattr(listener, method, None)
            if fn is not None:
                await self.call_hook(listener, fn, method, args)


__all__ = ["LISTENER_METHODS", "BaseHubListener", "HubListener", "Listeners", "overridden_hooks"]

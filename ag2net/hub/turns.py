"""Shell: ``Turns`` (``hub.turns``) — agents' turns as the hub sees them: the ones the adapters expect,
the records agents store, and the failures they report."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelState
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.hub.audit import AUDIT_KIND_TURN_FAILED
from ag2net.hub.records import PendingTurn

if TYPE_CHECKING:
    from ag2net.hub.core import ChannelTable, IdentityTable
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.services import Services


class Turns:
    """Expected turns, turn records and turn failures."""

    __slots__ = ("channels", "identities", "logs", "owner", "services")

    def __init__(
        self,
        services: Services,
        owner: Any,
        *,
        identities: IdentityTable,
        channels: ChannelTable,
        logs: ChannelLogs,
    ) -> None:
        self.services = services
        self.owner = owner  # the hub: a tracer's turn span is told of it
        self.identities = identities
        self.channels = channels
        self.logs = logs

    async def pending_for(self, agent_id: str) -> list[PendingTurn]:
        """The turns the adapters expect of ``agent_id`` now; ``expected_at`` is the trigger's time."""
        channels = self.channels
        wanted: list[tuple[str, str | None]] = []
        for cid, md in channels.items():
            if md.state != ChannelState.ACTIVE or agent_id not in md.participant_ids():
                continue
            adapter = channels.adapter_of(md)
            state = channels.states.get(cid)
            if adapter is None or state is None:
                continue
            expected = adapter.expected_next(md, state)
            if expected is None or expected.agent_id != agent_id:
                continue
            wanted.append((cid, expected.triggering_envelope_id))
        out = []
        for cid, trigger in wanted:
            found = await self.logs.find(cid, trigger) if trigger else None
            out.append(PendingTurn(cid, trigger, found[1].created_at if found else self.services.clock()))
        return out

    async def report_failure(
        self, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException | str, exc_type: str | None
    ) -> None:
        """Audit a failed turn and give every listener's ``on_turn_failed`` the exception.

        In-process callers pass the exception itself; a remote client's report arrives as text and
        ``exc_type``, and listeners get ``RuntimeError(text)`` (as in ag2, the type is not rebuilt)."""
        if exc_type is None:
            exc_type = type(exc).__name__ if isinstance(exc, BaseException) else "Error"
        if not isinstance(exc, BaseException):
            exc = RuntimeError(str(exc))
        await self.services.audit.record(
            AUDIT_KIND_TURN_FAILED,
            channel_id=channel_id,
            agent_id=agent_id,
            envelope_id=envelope_id,
            exc_type=exc_type,
            exc_message=str(exc),
        )
        await self.services.listeners.fan_out("on_turn_failed", channel_id, agent_id, envelope_id, exc)

    async def record(self, record: dict[str, Any]) -> str:
        """Store one turn record under a fresh, hub-assigned ``turn_id`` and return that id.

        Records are never upserted by a client: a ``turn_id`` in ``record`` is replaced, so nobody can
        overwrite or erase another agent's records by naming their id. ``agent_id`` must be a
        registered agent and ``channel_id`` a known channel.
        """
        if not isinstance(record, dict):
            raise ProtocolError("a turn record must be a JSON object")
        agent_id = record.get("agent_id")
        if not isinstance(agent_id, str) or agent_id not in self.identities.agents:
            raise NotFoundError(f"turn record names an agent that is not registered: {agent_id!r}")
        channel_id = record.get("channel_id")
        if not isinstance(channel_id, str) or channel_id not in self.channels:
            raise NotFoundError(f"turn record names a channel that does not exist: {channel_id!r}")
        stored = dict(record)
        stored["turn_id"] = turn_id = self.services.ids.new_id()
        await self.services.store.put_turn(stored)
        tracer = self.services.listeners.tracer
        if tracer is not None:  # a network.turn span (ag2net.hub.telemetry)
            await self.services.listeners.call_hook(
                tracer, tracer.turn_recorded, "turn_recorded", (self.owner, stored)
            )
        self.services.observe_log.append(
            "turn",
            channel_id=channel_id,
            payload={
                "turn_id": turn_id,
                "agent_id": agent_id,
                "trigger_envelope_id": stored.get("trigger_envelope_id"),
            },
        )
        return turn_id


__all__ = ["Turns"]

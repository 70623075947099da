"""Shell: the audit log: record kinds (the values ag2 1.2.1 writes) and ``AuditLog``, the writer over a store.

An audit record is a JSON object ``{"at", "kind", ...fields}`` about something that is not on any
channel's WAL: identity changes, channel lifecycle, task terminations, expectation violations, failed
turns. ``AuditLog`` keeps them in the store's audit table (``Store.append_audit``), in order, and tells
live subscribers about each one. The kind set is open: ``append`` takes records of any kind.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ag2net.hub.listeners import BaseHubListener
from ag2net.ids import utc_now

if TYPE_CHECKING:
    from ag2net.hub.observe import ObserveLog
    from ag2net.store import Store

log = logging.getLogger(__name__)

AUDIT_KIND_AGENT_REGISTERED = "agent_registered"
AUDIT_KIND_AGENT_UNREGISTERED = "agent_unregistered"
AUDIT_KIND_RESUME_SET = "resume_set"
AUDIT_KIND_SKILL_SET = "skill_set"
AUDIT_KIND_RULE_SET = "rule_set"
AUDIT_KIND_SECRET_ROTATED = "identity_secret_rotated"
AUDIT_KIND_CHANNEL_CREATED = "channel_created"
AUDIT_KIND_CHANNEL_CLOSED = "channel_closed"
AUDIT_KIND_CHANNEL_EXPIRED = "channel_expired"
AUDIT_KIND_EXPECTATION_VIOLATED = "expectation_violated"
AUDIT_KIND_TASK_TERMINATED = "task_terminated"
AUDIT_KIND_TURN_FAILED = "turn_failed"

RESUME_SOURCE_TENANT = "tenant"
RESUME_SOURCE_OBSERVED = "observed"


#: A live audit subscriber: ``async def callback(record: dict) -> None``.
AuditSubscriber = Callable[[dict], Awaitable[None]]

_TERMINAL_TASK_KINDS = ("completed", "failed", "expired", "cancelled")


def audit_record(kind: str, at: str, **fields: Any) -> dict[str, Any]:
    """One audit record: ``{"at", "kind", ...fields}``."""
    return {"at": at, "kind": kind, **fields}


def _payload_at(payload: Any) -> str | None:
    return payload.get("at") if isinstance(payload, dict) else None


class AuditLog(BaseHubListener):
    """Append-only audit records in a store's audit table, with live subscribers.

    ``AuditLog(store, *, clock=None)``: ``store`` is an ag2net ``Store`` (or a path / ``":memory:"``, as
    ``open_store`` takes); ``clock`` stamps ``at`` when an event carries none (default: UTC now).
    The hub owns one (``Hub.audit_log``) and writes every audit record through its ``append``. As a
    listener (``hub.register_listener(AuditLog(other_store))``) its ``on_*`` methods turn hub events
    into the same records.
    """

    def __init__(self, store: Store | str | Path | None, *, clock: Callable[[], str] | None = None) -> None:
        from ag2net.store import open_store

        self.store: Store = open_store(store)
        """Where the records go (set once, here)."""
        self._clock = clock or utc_now
        self._subscribers: list[AuditSubscriber] = []
        self._bytes_written = 0
        self._opened = False

    @property
    def bytes_written(self) -> int:
        """Bytes of audit records this log wrote since it was made (one JSON line per record)."""
        return self._bytes_written

    async def _ready(self) -> Store:
        if not self._opened:
            await self.store.open()  # idempotent; the hub has usually opened it already
            self._opened = True
        return self.store

    async def append(self, record: dict) -> int:
        """Store one record (any ``kind``), then hand it to every subscriber in order; returns its
        position in the audit table. A subscriber that raises is logged and skipped."""
        if not isinstance(record, dict):
            raise TypeError(
                f"an audit record must be a dict like {{'kind': ..., 'at': ...}}, got {type(record).__name__}"
            )
        line = json.dumps(record, default=str, sort_keys=True)
        clean = json.loads(line)
        store = await self._ready()
        position = await store.append_audit(clean)
        self._bytes_written += len(line.encode("utf-8")) + 1
        for callback in list(self._subscribers):
            try:
                await callback(clean)
            except Exception:
                log.exception("audit subscriber %r failed on a %s record", callback, clean.get("kind"))
        return position

    async def read_all(self) -> list[dict]:
        """Every record in the store's audit table, oldest first (``[]`` when there are none)."""
        store = await self._ready()
        return [record for _position, record in await store.read_audit()]

    def subscribe(self, callback: AuditSubscriber) -> None:
        """Call ``await callback(record)`` for every record appended from now on."""
        self._subscribers.append(callback)

    def unsubscribe(self, callback: AuditSubscriber) -> None:
        """Stop calling ``callback``; no-op if it is not subscribed."""
        if callback in self._subscribers:
            self._subscribers.remove(callback)

    # ------------------------------------------------------------------ listener methods

    async def on_agent_event(self, agent_id: str, kind: str, payload: dict[str, Any]) -> None:
        at = _payload_at(payload) or self._clock()
        payload = payload if isinstance(payload, dict) else {}
        if kind == "registered":
            passport = payload.get("passport")
            name = getattr(passport, "name", None) if passport is not None else payload.get("name")
            await self.append(audit_record(AUDIT_KIND_AGENT_REGISTERED, at, agent_id=agent_id, name=name))
        elif kind == "unregistered":
            await self.append(
                audit_record(AUDIT_KIND_AGENT_UNREGISTERED, at, agent_id=agent_id, name=payload.get("name"))
            )
        elif kind == "resume_set":
            await self.append(
                audit_record(
                    AUDIT_KIND_RESUME_SET,
                    at,
                    source=RESUME_SOURCE_TENANT,
                    agent_id=agent_id,
                    version=payload.get("version"),
                )
            )
        elif kind == "observation_recorded":
            await self.append(
                audit_record(
                    AUDIT_KIND_RESUME_SET,
                    at,
                    source=RESUME_SOURCE_OBSERVED,
                    agent_id=agent_id,
                    version=payload.get("version"),
                    capability=payload.get("capability"),
                    outcome=payload.get("outcome"),
                )
            )
        elif kind == "skill_set":
            await self.append(
                audit_record(
                    AUDIT_KIND_SKILL_SET, at, agent_id=agent_id, removed=bool(payload.get("removed", False))
                )
            )
        elif kind == "rule_set":
            await self.append(
                audit_record(AUDIT_KIND_RULE_SET, at, agent_id=agent_id, version=payload.get("version"))
            )

    async def on_channel_event(self, channel_id: str, kind: str, payload: dict[str, Any]) -> None:
        """``created``, ``closed`` and ``expired`` become records; ``opened`` is on the WAL already."""
        at = _payload_at(payload) or self._clock()
        payload = payload if isinstance(payload, dict) else {}
        if kind == "created":
            record = audit_record(AUDIT_KIND_CHANNEL_CREATED, at, channel_id=channel_id)
            md = payload.get("metadata")
            if md is not None:
                record.update(
                    manifest_type=md.manifest.type,
                    manifest_version=md.manifest.version,
                    creator_id=md.creator_id,
                )
            participants = payload.get("participants")
            if participants is None and md is not None:
                participants = [p.agent_id for p in md.participants]
            if participants is not None:
                record["participants"] = list(participants)
            await self.append(record)
        elif kind in ("closed", "expired"):
            kind_constant = AUDIT_KIND_CHANNEL_CLOSED if kind == "closed" else AUDIT_KIND_CHANNEL_EXPIRED
            await self.append(
                audit_record(kind_constant, at, channel_id=channel_id, reason=payload.get("reason"))
            )

    async def on_expectation_fired(self, channel_id: str, expectation: Any, violation: Any) -> None:
        exp = getattr(violation, "expectation", None) or expectation
        await self.append(
            audit_record(
                AUDIT_KIND_EXPECTATION_VIOLATED,
                self._clock(),
                channel_id=channel_id,
                expectation=getattr(exp, "name", None),
                on_violation=getattr(exp, "on_violation", None),
                params=dict(getattr(exp, "params", None) or {}),
                violators=list(getattr(violation, "violator_ids", None) or []),
                detail=dict(getattr(violation, "detail", None) or {}),
            )
        )

    async def on_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        """Only terminal kinds (completed, failed, expired, cancelled) become records."""
        if kind not in _TERMINAL_TASK_KINDS:
            return
        payload = payload if isinstance(payload, dict) else {}
        await self.append(
            audit_record(
                AUDIT_KIND_TASK_TERMINATED,
                _payload_at(payload) or self._clock(),
                task_id=task_id,
                owner_id=payload.get("owner_id"),
                channel_id=payload.get("channel_id"),
                outcome=payload.get("outcome", kind),
                capability=payload.get("capability"),
                reason=payload.get("reason"),
            )
        )

    async def on_turn_failed(
        self, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException
    ) -> None:
        await self.append(
            audit_record(
                AUDIT_KIND_TURN_FAILED,
                self._clock(),
                channel_id=channel_id,
                agent_id=agent_id,
                envelope_id=envelope_id,
                exc_type=type(exc).__name__,
                exc_message=str(exc),
            )
        )


class Audit:
    """Shell: the hub's audit trail — writes each record through ``log`` (the hub's ``AuditLog``, or the one
    ``replace`` installed) and shows it on the observe stream."""

    __slots__ = ("clock", "log", "observe_log")

    def __init__(self, store: Store, clock: Callable[[], str], observe_log: ObserveLog) -> None:
        self.clock = clock
        self.log: Any = AuditLog(store, clock=clock)
        self.observe_log = observe_log

    def replace(self, audit_log: Any) -> None:
        """Send the hub's audit records to ``audit_log`` (anything with an async ``append(record)``)."""
        if not callable(getattr(audit_log, "append", None)):
            raise TypeError(
                f"audit_log must have an async append(record) method (an AuditLog); got {type(audit_log).__name__}"
            )
        self.log = audit_log

    async def record(self, kind: str, **fields: Any) -> None:
        """Write one audit record (``at`` defaults to the clock's now) and show it on the observe stream."""
        record = {"at": fields.pop("at", None) or self.clock(), "kind": kind, **fields}
        record = json.loads(json.dumps(record, default=str))
        position = await self.log.append(record)
        self.observe_log.append(
            "audit",
            channel_id=record.get("channel_id"),
            payload={"id": position if isinstance(position, int) else None, **record},
        )


__all__ = [
    "AUDIT_KIND_AGENT_REGISTERED",
    "AUDIT_KIND_AGENT_UNREGISTERED",
    "AUDIT_KIND_CHANNEL_CLOSED",
    "AUDIT_KIND_CHANNEL_CREATED",
    "AUDIT_KIND_CHANNEL_EXPIRED",
    "AUDIT_KIND_EXPECTATION_VIOLATED",
    "AUDIT_KIND_RESUME_SET",
    "AUDIT_KIND_RULE_SET",
    "AUDIT_KIND_SECRET_ROTATED",
    "AUDIT_KIND_SKILL_SET",
    "AUDIT_KIND_TASK_TERMINATED",
    "AUDIT_KIND_TURN_FAILED",
    "RESUME_SOURCE_OBSERVED",
    "RESUME_SOURCE_TENANT",
    "Audit",
    "AuditLog",
    "AuditSubscriber",
    "audit_record",
]

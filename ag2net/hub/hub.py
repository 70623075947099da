"""The hub: registry, channel lifecycle, admission, WAL, dispatch, hydrate, expectations, tasks, observe.

One ``Hub`` owns one ``Store``. Every admitted envelope is committed to the store before
``post_envelope`` returns, folded into its channel's adapter state, then pushed to each recipient's
priority mailbox and to the observe stream. The hub never calls an LLM.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag2net.adapters import default_adapters
from ag2net.channel import (
    ChannelMetadata,
    ChannelState,
    Participant,
    ParticipantRole,
)
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_EXPECTATION_VIOLATED,
    EV_TASK_CANCEL_REQUEST,
    Envelope,
    check_shape,
    encode_envelope,
    is_protocol_event,
)
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub import rules
from ag2net.hub.audit import (
    AUDIT_KIND_AGENT_REGISTERED,
    AUDIT_KIND_AGENT_UNREGISTERED,
    AUDIT_KIND_CHANNEL_CLOSED,
    AUDIT_KIND_CHANNEL_CREATED,
    AUDIT_KIND_CHANNEL_EXPIRED,
    AUDIT_KIND_EXPECTATION_VIOLATED,
    AUDIT_KIND_RESUME_SET,
    AUDIT_KIND_RULE_SET,
    AUDIT_KIND_SKILL_SET,
    AUDIT_KIND_TASK_TERMINATED,
    AUDIT_KIND_TURN_FAILED,
    RESUME_SOURCE_OBSERVED,
    RESUME_SOURCE_TENANT,
    audit_record,
)
from ag2net.hub.auth import AuthRegistry
from ag2net.hub.dispatch import Mailbox
from ag2net.hub.expectations import ExpectationContext, default_evaluators
from ag2net.hub.observe import ObservedEvent, ObserveLog
from ag2net.identity import (
    ObservedStat,
    Passport,
    Resume,
    Rule,
    check_agent_name,
    looks_like_id,
    parse_duration,
)
from ag2net.ids import MonotonicIds, add_seconds, make_id, parse_time, utc_now
from ag2net.skills import render_fallback_skill
from ag2net.store import Store, open_store
from ag2net.tasks import TASK_ID_RE, TaskMetadata, TaskState
from ag2net.views.wal import WalLog, WalSlice

log = logging.getLogger(__name__)

TERMINAL = (ChannelState.CLOSED, ChannelState.EXPIRED)
SNAPSHOT_KEY = "hub.hydrate_snapshot"
TERMINAL_TASKS = (TaskState.COMPLETED, TaskState.FAILED, TaskState.EXPIRED, TaskState.CANCELLED)


@dataclass(slots=True)
class AgentRecord:
    passport: Passport
    resume: Resume
    rule: Rule
    skill_md: str | None = None
    owners: list[str] = field(default_factory=list)


@dataclass(slots=True)
class PendingTurn:
    channel_id: str
    triggering_envelope_id: str | None
    expected_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "triggering_envelope_id": self.triggering_envelope_id,
            "expected_at": self.expected_at,
        }


class AuditHandler:
    """Violation handler ``audit``: the audit record is already written; nothing else to do."""

    name = "audit"

    async def handle(self, hub: Hub, channel_id: str, violation: Any) -> None:
        return None


class NotifyChannelHandler:
    """Violation handler ``notify_channel``: post ``EV_EXPECTATION_VIOLATED`` into the channel."""

    name = "notify_channel"

    async def handle(self, hub: Hub, channel_id: str, violation: Any) -> None:
        md = hub.channels.get(channel_id)
        if md is None:
            return
        with contextlib.suppress(NetworkError):
            await hub.post_envelope(
                Envelope(
                    channel_id=channel_id,
                    sender_id=md.creator_id,
                    audience=None,
                    event_type=EV_EXPECTATION_VIOLATED,
                    event_data={
                        "expectation": violation.expectation.name,
                        "violators": list(violation.violator_ids),
                        "detail": dict(violation.detail),
                    },
                )
            )


class AutoCloseHandler:
    """Violation handler ``auto_close``: close the channel with ``expectation_violated:{name}``."""

    name = "auto_close"

    async def handle(self, hub: Hub, channel_id: str, violation: Any) -> None:
        await hub.close_channel(channel_id, reason=f"expectation_violated:{violation.expectation.name}")


class Hub:
    """The network's centre. Open with ``await Hub.open(path_or_store)`` or ``async with``."""

    def __init__(
        self,
        store: Store | str | Path | None = None,
        *,
        auth: AuthRegistry | None = None,
        clock: Callable[[], str] | None = None,
        ttl_sweep_interval: float = 30.0,
        expectation_sweep_interval: float = 10.0,
        invite_ack_timeout: float = 30.0,
        allow_remote_agent_registration: bool = False,
        observe_buffer: int = 250_000,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.store: Store = open_store(store)
        self.auth = auth or AuthRegistry.default()
        self.clock = clock or utc_now
        self.ttl_sweep_interval = ttl_sweep_interval
        self.expectation_sweep_interval = expectation_sweep_interval
        self.invite_ack_timeout = invite_ack_timeout
        self.allow_remote_agent_registration = allow_remote_agent_registration
        self._ids = MonotonicIds()
        self.agents: dict[str, AgentRecord] = {}
        self._names: dict[str, str] = {}
        self.channels: dict[str, ChannelMetadata] = {}
        self._states: dict[str, Any] = {}
        self._wal: dict[str, WalLog] = {}
        self._wal_counts: dict[str, int] = {}
        self._last_activity: dict[str, str] = {}
        self._adapters: dict[tuple[str, int], Any] = {}
        self._evaluators: dict[str, Any] = {}
        self._violation_handlers: dict[str, Any] = {}
        self._fired: dict[str, set[tuple[int, str, str]]] = {}
        self._open_waiters: dict[str, asyncio.Future[ChannelMetadata]] = {}
        self._endpoints: dict[str, Any] = {}
        self._bindings: dict[str, Any] = {}
        self._mailboxes: dict[str, Mailbox] = {}
        self._unacked: dict[str, set[str]] = {}
        self._pressure_fired: set[str] = set()
        self._cursors: dict[str, dict[str, str]] = {}
        self._dirty_cursors: set[tuple[str, str]] = set()
        self._cursor_flush: asyncio.TimerHandle | None = None
        self._tasks: dict[str, TaskMetadata] = {}
        self._observed_outcomes: set[tuple[str, str]] = set()
        self._peer_cancellers: dict[str, set[str]] = {}
        self._listeners: list[Any] = []
        self._sweepers: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._owned_clients: list[Any] = []
        self.observe_log = ObserveLog(observe_buffer)
        self.progress = progress  # (envelopes folded, envelopes to fold) while hydrating
        self._closed = False
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls, store: Store | str | Path | None = None, *, register_default_adapters: bool = True, **kwargs: Any
    ) -> Hub:
        hub = cls(store, **kwargs)
        if register_default_adapters:
            for adapter in default_adapters():
                hub.register_adapter(adapter)
            for evaluator in default_evaluators():
                hub.register_expectation_evaluator(evaluator)
            for handler in (AuditHandler(), NotifyChannelHandler(), AutoCloseHandler()):
                hub.register_violation_handler(handler)
        await hub.store.open()
        await hub.hydrate()
        hub.start()
        return hub

    async def __aenter__(self) -> Hub:
        if not self._started:
            await self.store.open()
            if not self._adapters:
                for adapter in default_adapters():
                    self.register_adapter(adapter)
            await self.hydrate()
            self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self.ttl_sweep_interval > 0:
            self.register_sweeper("ttl", self.ttl_sweep_interval, self.expire_due)
        if self.expectation_sweep_interval > 0:
            self.register_sweeper("expectations", self.expectation_sweep_interval, self.tick_expectations)

    def register_sweeper(self, name: str, interval_seconds: float, fn: Callable[[], Any]) -> None:
        if name in self._sweepers:
            raise ValueError(f"sweeper {name!r} is already registered")
        if interval_seconds <= 0:
            raise ValueError(f"sweeper interval must be positive, got {interval_seconds}")

        async def loop() -> None:
            while True:
                await asyncio.sleep(interval_seconds)
                try:
                    result = fn()
                    if inspect.isawaitable(result):
                        await result
                except asyncio.CancelledError:
                    raise
                except Exception:
                    log.exception("sweeper %s failed", name)

        self._sweepers[name] = asyncio.get_running_loop().create_task(loop())

    async def unregister_sweeper(self, name: str) -> None:
        task = self._sweepers.pop(name, None)
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for name in list(self._sweepers):
            await self.unregister_sweeper(name)
        for client in list(self._owned_clients):
            with contextlib.suppress(Exception):
                await client.close()
        for mailbox in list(self._mailboxes.values()):
            await mailbox.stop()
        for task in list(self._background):
            task.cancel()
        for waiter in self._open_waiters.values():
            if not waiter.done():
                waiter.cancel()
        self.observe_log.close()
        await self._flush_cursors()
        try:
            await self.store.set_meta(SNAPSHOT_KEY, self._snapshot())
        except Exception:
            log.exception("could not write the hydrate snapshot; the next open folds every WAL")
        await self.store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------------ registries

    def register_adapter(self, adapter: Any) -> None:
        self._adapters[(adapter.manifest.type, adapter.manifest.version)] = adapter

    def adapter_types(self) -> list[str]:
        return sorted({t for t, _ in self._adapters})

    def get_adapter(self, manifest_type: str, version: int = 1) -> Any:
        adapter = self._adapters.get((manifest_type, version))
        if adapter is None:
            raise NotFoundError(f"no adapter registered for {manifest_type!r}@v{version}")
        return adapter

    def adapter_for(self, channel_id: str) -> Any:
        md = self._channel(channel_id)
        return self.get_adapter(md.manifest.type, md.manifest.version)

    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any:
        return self.get_adapter(metadata.manifest.type, metadata.manifest.version)

    def adapter_state(self, channel_id: str) -> Any:
        return self._states.get(channel_id)

    def register_expectation_evaluator(self, evaluator: Any) -> None:
        self._evaluators[evaluator.name] = evaluator

    def register_violation_handler(self, handler: Any) -> None:
        self._violation_handlers[handler.name] = handler

    def register_listener(self, listener: Any) -> None:
        self._listeners.append(listener)

    def unregister_listener(self, listener: Any) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def _fan_out(self, method: str, *args: Any) -> None:
        for listener in list(self._listeners):
            fn = getattr(listener, method, None)
            if fn is None:
                continue
            try:
                result = fn(*args)
                if inspect.isawaitable(result):
                    await result
            except Exception:
                log.exception("listener %r failed in %s", listener, method)

    async def _audit(self, kind: str, **fields: Any) -> None:
        record = audit_record(kind, fields.pop("at", None) or self.clock(), **fields)
        record = json.loads(json.dumps(record, default=str))
        position = await self.store.append_audit(record)
        self.observe_log.append(
            "audit", channel_id=record.get("channel_id"), payload={"id": position, **record}
        )

    def _observe_channel(self, channel_id: str, kind: str, metadata: ChannelMetadata, **extra: Any) -> None:
        self.observe_log.append(
            "channel", channel_id=channel_id, payload={"kind": kind, "metadata": metadata.to_dict(), **extra}
        )

    def _observe_agent(self, agent_id: str, kind: str, **payload: Any) -> None:
        self.observe_log.append("agent", payload={"kind": kind, "agent_id": agent_id, **payload})

    # ------------------------------------------------------------------ hydrate

    async def hydrate(self) -> None:
        """Rebuild every in-memory cache from the store (idempotent)."""
        self.agents.clear()
        self._names.clear()
        self.channels.clear()
        self._states.clear()
        self._wal.clear()
        self._tasks.clear()
        self._peer_cancellers.clear()
        for rec in await self.store.load_agents():
            passport = Passport.from_dict(rec["passport"])
            record = AgentRecord(
                passport=passport,
                resume=Resume.from_dict(rec.get("resume") or {}),
                rule=Rule.from_dict(rec["rule"]) if rec.get("rule") else Rule(),
                skill_md=rec.get("skill_md"),
                owners=list(rec.get("owners") or []),
            )
            self.agents[passport.agent_id] = record
            self._names[passport.name] = passport.agent_id
        self._wal_counts = await self.store.wal_counts()
        live: list[str] = []
        for data in await self.store.load_channels():
            md = ChannelMetadata.from_dict(data)
            self.channels[md.channel_id] = md
            self._last_activity[md.channel_id] = md.closed_at or md.created_at
            if not md.is_terminal() and (md.manifest.type, md.manifest.version) in self._adapters:
                live.append(md.channel_id)
        live = self._restore_snapshot(await self.store.get_meta(SNAPSHOT_KEY), live)
        for cid in live:
            md = self.channels[cid]
            self._states[cid] = self.get_adapter(md.manifest.type, md.manifest.version).initial_state(md)
            self._wal[cid] = WalLog()
        if live:
            folds = {
                cid: self.get_adapter(self.channels[cid].manifest.type, self.channels[cid].manifest.version)
                for cid in live
            }
            loads = json.loads
            progress = self.progress
            total = sum(self._wal_counts.get(cid, 0) for cid in live)
            done = 0
            async for cid, _seq, text in self.store.iter_wal(live):
                if progress is not None:
                    done += 1
                    if done % 5000 == 0 or done == total:
                        progress(done, total)
                env = Envelope(**loads(text))
                self._wal[cid].append(env)
                self._states[cid] = folds[cid].fold(env, self._states[cid])
                self._ids.observe(env.envelope_id)
                if env.event_type == EV_TASK_CANCEL_REQUEST and env.task_id:
                    self._peer_cancellers.setdefault(env.task_id, set()).add(env.sender_id)
            for cid in live:
                if self._wal[cid]:
                    self._last_activity[cid] = self._wal[cid][-1].created_at
        for data in await self.store.load_tasks():
            md = TaskMetadata.from_dict(data)
            self._tasks[md.task_id] = md
        self._cursors = await self.store.load_cursors()

    def _restore_snapshot(self, text: str | None, live: list[str]) -> list[str]:
        """Take adapter states from a clean shutdown's snapshot; returns the channels still to fold.

        A channel's snapshot is used only when its seq equals the WAL length in the store, so anything
        appended after the snapshot (or a crash after a restart) falls back to folding the WAL.
        Restored channels load their WAL lazily, on first read.
        """
        if not text:
            return live
        try:
            snapshot = json.loads(text)
            high = snapshot.get("max_envelope_id") or ""
            if high:
                self._ids.observe(high)
            for task_id, senders in (snapshot.get("peer_cancellers") or {}).items():
                self._peer_cancellers.setdefault(task_id, set()).update(senders)
            channels = snapshot.get("channels") or {}
        except (ValueError, AttributeError):
            return live
        remaining = []
        for cid in live:
            entry = channels.get(cid)
            md = self.channels[cid]
            if not isinstance(entry, dict) or entry.get("seq") != self._wal_counts.get(cid, 0):
                remaining.append(cid)
                continue
            try:
                adapter = self.get_adapter(md.manifest.type, md.manifest.version)
                self._states[cid] = adapter.state_from_dict(entry["state"])
            except Exception:
                log.warning("snapshot of channel %s unusable; folding its WAL", cid)
                remaining.append(cid)
                continue
            if entry.get("last_activity"):
                self._last_activity[cid] = entry["last_activity"]
        return remaining

    def _snapshot(self) -> str:
        """Adapter states of live channels, so the next open need not fold every WAL."""
        channels: dict[str, Any] = {}
        high = ""
        for cid, md in self.channels.items():
            state = self._states.get(cid)
            if md.is_terminal() or state is None:
                continue
            adapter = self._adapters.get((md.manifest.type, md.manifest.version))
            if adapter is None:
                continue
            try:
                channels[cid] = {
                    "seq": self._wal_counts.get(cid, 0),
                    "state": adapter.state_to_dict(state),
                    "last_activity": self._last_activity.get(cid, ""),
                }
            except Exception:
                log.warning("adapter state of channel %s cannot be snapshotted", cid)
        for wal in self._wal.values():
            if len(wal) and wal[-1].envelope_id > high:
                high = wal[-1].envelope_id
        return json.dumps(
            {
                "max_envelope_id": max(high, self._ids.last_id()),
                "peer_cancellers": {t: sorted(s) for t, s in self._peer_cancellers.items()},
                "channels": channels,
            },
            default=str,
        )

    # ------------------------------------------------------------------ identities

    def _record(self, agent_id: str) -> AgentRecord:
        rec = self.agents.get(agent_id)
        if rec is None:
            raise NotFoundError(f"agent not registered: {agent_id}")
        return rec

    async def _persist_agent(self, rec: AgentRecord) -> None:
        p = rec.passport
        await self.store.put_agent(
            {
                "agent_id": p.agent_id,
                "name": p.name,
                "kind": p.effective_kind,
                "passport": p.to_dict(include_claim=p.kind == "remote_agent"),
                "resume": rec.resume.to_dict(),
                "rule": rec.rule.to_dict(),
                "skill_md": rec.skill_md,
                "owners": list(rec.owners),
            }
        )

    async def register_identity(
        self,
        passport: Passport,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        rule: Rule | None = None,
        owner_id: str | None = None,
    ) -> Passport:
        """Register a new identity; stamps ``passport.agent_id`` and ``created_at``."""
        check_agent_name(passport.name)
        if passport.kind != "remote_agent":
            await self.auth.get(passport.auth.scheme).validate(passport, passport.auth.claim)
        name = passport.name
        if looks_like_id(name) or name in self.agents:
            raise ProtocolError(f"name {name!r} is, or has the shape of, an agent id")
        if name in self._names:
            raise ProtocolError(
                f"name {name!r} already registered (agent_id={self._names[name]}); "
                "unregister it before re-registering."
            )
        if skill_md is not None and not isinstance(skill_md, str):
            raise ProtocolError("skill_md must be a string of markdown or None")
        passport.agent_id = make_id()
        passport.created_at = self.clock()
        stored = Passport.from_dict(passport.to_dict(include_claim=passport.kind == "remote_agent"))
        if passport.kind != "remote_agent":
            stored.auth.claim = {}
        rec = AgentRecord(
            stored, resume or Resume(), rule or Rule(), skill_md, [owner_id] if owner_id else []
        )
        self.agents[stored.agent_id] = rec
        self._names[name] = stored.agent_id
        await self._persist_agent(rec)
        at = self.clock()
        await self._audit(AUDIT_KIND_AGENT_REGISTERED, at=at, agent_id=stored.agent_id, name=name)
        self._observe_agent(stored.agent_id, "registered", name=name, passport=stored.public_dict())
        await self._fan_out("on_agent_event", stored.agent_id, "registered", {"passport": stored, "at": at})
        return passport

    async def register(
        self, agent: Any, passport: Passport | None = None, resume: Resume | None = None, **kw: Any
    ):
        """Register ``agent`` on a dedicated in-process ``HubClient``; returns its ``AgentClient``."""
        from ag2net.client.hub_client import HubClient

        client = HubClient.local(self)
        try:
            agent_client = await client.register(agent, passport, resume, **kw)
        except BaseException:
            await client.close()
            raise
        agent_client._owns_connection = True
        self._owned_clients.append(client)
        return agent_client

    async def unregister(self, agent_id: str) -> None:
        rec = self._record(agent_id)
        name = rec.passport.name
        del self.agents[agent_id]
        self._names.pop(name, None)
        self._bindings.pop(agent_id, None)
        mailbox = self._mailboxes.pop(agent_id, None)
        if mailbox is not None:
            await mailbox.stop()
        self._unacked.pop(agent_id, None)
        await self.store.delete_agent(agent_id)
        at = self.clock()
        await self._audit(AUDIT_KIND_AGENT_UNREGISTERED, at=at, agent_id=agent_id, name=name)
        self._observe_agent(agent_id, "unregistered", name=name)
        await self._fan_out("on_agent_event", agent_id, "unregistered", {"name": name, "at": at})

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        rec = self.agents.get(agent_id)
        if rec is not None:
            return rec.passport.name
        return default if default is not None else agent_id

    def names_for(self, agent_ids: list[str]) -> dict[str, str]:
        return {a: self.name_for(a) for a in agent_ids}

    def find_agent_id(self, name: str) -> str | None:
        return self._names.get(name)

    def name_to_id_map(self) -> dict[str, str]:
        return dict(self._names)

    def get_agent(self, name_or_id: str) -> Passport:
        rec = self.agents.get(name_or_id)
        if rec is None:
            agent_id = self._names.get(name_or_id)
            rec = self.agents.get(agent_id) if agent_id else None
        if rec is None:
            raise NotFoundError(f"agent not found: {name_or_id}")
        return rec.passport

    def get_resume(self, agent_id: str) -> Resume:
        rec = self.agents.get(agent_id)
        if rec is None:
            raise NotFoundError(f"resume not found: {agent_id}")
        return rec.resume

    def get_rule(self, agent_id: str) -> Rule:
        rec = self.agents.get(agent_id)
        if rec is None:
            raise NotFoundError(f"rule not found: {agent_id}")
        return rec.rule

    def get_skill_info(self, agent_id: str) -> dict[str, Any]:
        """The stored skill, or the generated fallback (SPEC §3.5) with ``generated=True``."""
        rec = self._record(agent_id)
        if rec.skill_md is not None:
            return {"skill_md": rec.skill_md, "generated": False}
        return {"skill_md": render_fallback_skill(rec.passport, rec.resume), "generated": True}

    def get_skill(self, agent_id: str) -> str | None:
        rec = self.agents.get(agent_id)
        if rec is None:
            return None
        return self.get_skill_info(agent_id)["skill_md"]

    def list_agents(
        self,
        *,
        capability: str | None = None,
        query: str | None = None,
        kind: str | None = None,
        sort_by: str | None = None,
        limit: int | None = 50,
    ) -> list[Passport]:
        """Registered passports, filtered; ``query`` matches name or resume summary (case-insensitive)."""
        out: list[Passport] = []
        q = query.lower() if query else None
        for rec in self.agents.values():
            p = rec.passport
            if kind is not None and p.effective_kind != kind:
                continue
            if capability is not None and capability not in rec.resume.capabilities():
                continue
            if q is not None and q not in rec.resume.summary.lower() and q not in p.name.lower():
                continue
            out.append(p)
        if sort_by == "name":
            out.sort(key=lambda p: p.name)
        return out if limit is None else out[:limit]

    def agents_with_capability(self, capability: str) -> list[str]:
        return sorted(a for a, rec in self.agents.items() if capability in rec.resume.capabilities())

    async def set_resume(self, agent_id: str, resume: Resume) -> Resume:
        rec = self._record(agent_id)
        resume.version = rec.resume.version + 1
        resume.last_updated = self.clock()
        rec.resume = resume
        await self._persist_agent(rec)
        await self._audit(
            AUDIT_KIND_RESUME_SET, source=RESUME_SOURCE_TENANT, agent_id=agent_id, version=resume.version
        )
        self._observe_agent(agent_id, "resume_set", version=resume.version)
        await self._fan_out("on_agent_event", agent_id, "resume_set", {"version": resume.version})
        return resume

    async def set_skill(self, agent_id: str, skill_md: str | None) -> None:
        """Replace (or with ``None`` remove) an agent's skill; audited like ``set_resume`` (SPEC §3.7)."""
        rec = self._record(agent_id)
        if skill_md is not None and not isinstance(skill_md, str):
            raise ProtocolError("skill_md must be a string of markdown or None")
        rec.skill_md = skill_md
        rec.resume.version += 1
        await self._persist_agent(rec)
        await self._audit(
            AUDIT_KIND_SKILL_SET,
            source=RESUME_SOURCE_TENANT,
            agent_id=agent_id,
            version=rec.resume.version,
            removed=skill_md is None,
        )
        self._observe_agent(agent_id, "skill_set", removed=skill_md is None)
        await self._fan_out("on_agent_event", agent_id, "skill_set", {"removed": skill_md is None})

    async def set_rule(self, agent_id: str, rule: Rule) -> Rule:
        rec = self._record(agent_id)
        rule.version = rec.rule.version + 1
        rec.rule = rule
        await self._persist_agent(rec)
        await self._audit(AUDIT_KIND_RULE_SET, agent_id=agent_id, version=rule.version)
        self._observe_agent(agent_id, "rule_set", version=rule.version)
        await self._fan_out("on_agent_event", agent_id, "rule_set", {"version": rule.version})
        return rule

    async def record_observation(
        self,
        *,
        owner_id: str,
        capability: str,
        outcome: TaskState | str,
        latency_ms: float | None = None,
        task_id: str | None = None,
    ) -> None:
        outcome = TaskState(outcome)
        if outcome not in TERMINAL_TASKS:
            return
        if task_id is not None:
            if (owner_id, task_id) in self._observed_outcomes:
                return
            self._observed_outcomes.add((owner_id, task_id))
        rec = self._record(owner_id)
        stat = rec.resume.observed.setdefault(capability, ObservedStat())
        stat.n += 1
        if outcome == TaskState.COMPLETED:
            stat.completed += 1
        elif outcome == TaskState.FAILED:
            stat.failed += 1
        elif outcome == TaskState.EXPIRED:
            stat.expired += 1
        if latency_ms is not None:
            stat.p50_latency_ms = latency_ms
        rec.resume.version += 1
        rec.resume.last_updated = self.clock()
        await self._persist_agent(rec)
        await self._audit(
            AUDIT_KIND_RESUME_SET,
            source=RESUME_SOURCE_OBSERVED,
            agent_id=owner_id,
            version=rec.resume.version,
            capability=capability,
            outcome=outcome.value,
        )

    # ------------------------------------------------------------------ channels

    def _channel(self, channel_id: str) -> ChannelMetadata:
        md = self.channels.get(channel_id)
        if md is None:
            raise NotFoundError(f"channel not found: {channel_id}")
        return md

    def get_channel(self, channel_id: str) -> ChannelMetadata:
        return self._channel(channel_id)

    def list_channels(
        self,
        *,
        agent_id: str | None = None,
        include_terminal: bool = False,
        limit: int | None = 50,
    ) -> list[ChannelMetadata]:
        out = []
        for md in self.channels.values():
            if agent_id is not None and agent_id not in md.participant_ids():
                continue
            if not include_terminal and md.is_terminal():
                continue
            out.append(md)
        return out if limit is None else out[:limit]

    def channel_stats(self) -> dict[str, dict[str, Any]]:
        return {
            cid: {
                "wal_count": self._wal_counts.get(cid, 0),
                "last_activity": self._last_activity.get(cid, ""),
            }
            for cid in self.channels
        }

    async def create_channel(
        self,
        *,
        creator_id: str,
        manifest_type: str,
        manifest_version: int = 1,
        participants: list[str],
        required_acks: int | None = None,
        ttl: str | int | float | None = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> ChannelMetadata:
        """Create a channel, invite every other participant and wait for their acks (quorum)."""
        creator = self.agents.get(creator_id)
        if creator is None:
            raise NotFoundError(f"creator not registered: {creator_id}")
        if not participants:
            raise ProtocolError("channel requires at least one participant")
        seen: set[str] = set()
        for pid in participants:
            if pid in seen:
                raise ProtocolError(f"participant listed twice: {pid!r}")
            seen.add(pid)
            if pid != creator_id and pid not in self.agents:
                raise NotFoundError(f"participant not registered: {pid}")
        ids = list(participants) if creator_id in participants else [creator_id, *participants]
        adapter = self.get_adapter(manifest_type, manifest_version)
        if knobs is not None and not isinstance(knobs, dict):
            raise ProtocolError("knobs must be a JSON object (dict) or null")
        invitees = [i for i in ids if i != creator_id]
        for pid in invitees:
            invitee = self.agents[pid]
            rules.check_inbound(
                creator.passport.name, invitee.passport.name, invitee.rule.access.inbound_from
            )
        active = sum(
            1 for md in self.channels.values() if creator_id in md.participant_ids() and not md.is_terminal()
        )
        rules.check_channel_quota(creator.passport.name, active, creator.rule.limits.max_concurrent_channels)
        now = self.clock()
        ttl_value = creator.rule.limits.channel_ttl_default if ttl is None else ttl
        try:
            ttl_seconds = (
                float(ttl_value) if isinstance(ttl_value, (int, float)) else parse_duration(ttl_value)
            )
        except (TypeError, ValueError):
            raise ProtocolError(
                f"ttl {ttl_value!r} is not a duration; use seconds or e.g. '90s', '15m', '2h'"
            ) from None
        two = len(ids) == 2
        md = ChannelMetadata(
            channel_id=make_id(),
            manifest=adapter.manifest,
            creator_id=creator_id,
            participants=[
                Participant(
                    agent_id=pid,
                    role=ParticipantRole.INITIATOR
                    if pid == creator_id
                    else (ParticipantRole.RESPONDENT if two else ParticipantRole.PARTICIPANT),
                    order=i,
                    joined_at=now,
                )
                for i, pid in enumerate(ids)
            ],
            state=ChannelState.PENDING,
            created_at=now,
            expires_at=add_seconds(now, ttl_seconds) if ttl_seconds > 0 else None,
            knobs=json.loads(json.dumps(knobs or {})),
            labels={**(labels or {}), **({"intent": intent} if intent else {})},
            required_acks=required_acks,
            pending_acks=list(invitees),
        )
        adapter.validate_create(md)
        state = adapter.initial_state(md)
        from ag2net.views.registry import resolve_view  # validate any view override knobs now

        for pid in ids:
            resolve_view(md, pid, adapter)
        cid = md.channel_id
        self.channels[cid] = md
        self._states[cid] = state
        self._wal[cid] = WalLog()
        self._wal_counts[cid] = 0
        self._last_activity[cid] = now
        await self.store.put_channel(md.to_dict())
        await self._audit(
            AUDIT_KIND_CHANNEL_CREATED,
            at=now,
            channel_id=cid,
            manifest_type=manifest_type,
            manifest_version=manifest_version,
            creator_id=creator_id,
            participants=list(ids),
        )
        self._observe_channel(cid, "created", md)
        await self._fan_out(
            "on_channel_event", cid, "created", {"metadata": md, "participants": ids, "at": now}
        )
        if not invitees:
            await self._activate(md)
            return md
        waiter: asyncio.Future[ChannelMetadata] = asyncio.get_running_loop().create_future()
        self._open_waiters[cid] = waiter
        try:
            for pid in invitees:
                await self.post_envelope(
                    Envelope(
                        channel_id=cid,
                        sender_id=creator_id,
                        audience=[pid],
                        event_type=EV_CHANNEL_INVITE,
                        event_data={
                            "channel_id": cid,
                            "manifest_type": manifest_type,
                            "manifest_version": manifest_version,
                            "creator_id": creator_id,
                            "knobs": md.knobs,
                            "labels": md.labels,
                        },
                    )
                )
        except BaseException:
            self._open_waiters.pop(cid, None)
            await self._transition(cid, ChannelState.CLOSED, "invite_failed")
            raise
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.invite_ack_timeout)
        except TimeoutError:
            self._open_waiters.pop(cid, None)
            await self._transition(cid, ChannelState.CLOSED, "invite_timeout")
            raise ProtocolError(f"channel '{cid}' ack timeout") from None
        finally:
            self._open_waiters.pop(cid, None)
        return md

    async def _activate(self, md: ChannelMetadata) -> None:
        md.state = ChannelState.ACTIVE
        await self.store.put_channel(md.to_dict())
        self._observe_channel(md.channel_id, "opened", md)
        await self._fan_out("on_channel_event", md.channel_id, "opened", {"metadata": md})
        await self.post_envelope(
            Envelope(
                channel_id=md.channel_id,
                sender_id=md.creator_id,
                audience=md.participant_ids(),
                event_type=EV_CHANNEL_OPENED,
                event_data={"channel_id": md.channel_id},
            )
        )
        waiter = self._open_waiters.get(md.channel_id)
        if waiter is not None and not waiter.done():
            waiter.set_result(md)

    async def _handshake(self, md: ChannelMetadata, env: Envelope) -> None:
        if md.state != ChannelState.PENDING or env.sender_id not in md.pending_acks:
            return
        if env.event_type == EV_CHANNEL_INVITE_ACK:
            md.pending_acks.remove(env.sender_id)
            await self.store.put_channel(md.to_dict())
            if not md.pending_acks and not md.rejected_by:
                await self._activate(md)
        else:
            md.rejected_by.append(env.sender_id)
            await self._transition(md.channel_id, ChannelState.CLOSED, "invite_rejected")

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata:
        """Close a channel (no-op on a terminal one). Unknown id → ``NotFoundError`` (SPEC §3.19)."""
        md = self._channel(channel_id)
        if md.is_terminal():
            return md
        await self._transition(channel_id, ChannelState.CLOSED, reason or "explicit_close")
        return md

    async def _transition(self, channel_id: str, new_state: ChannelState, reason: str) -> None:
        md = self.channels[channel_id]
        if md.is_terminal():
            return
        was_pending = md.state == ChannelState.PENDING
        for task in list(self._tasks.values()):
            if task.channel_id == channel_id and task.state not in TERMINAL_TASKS:
                await self.update_task(task.task_id, state=TaskState.EXPIRED, error="channel_closed")
        now = self.clock()
        md.state = new_state
        md.close_reason = reason
        md.closed_at = now
        self._fired.pop(channel_id, None)
        waiter = self._open_waiters.get(channel_id)
        if was_pending and waiter is not None and not waiter.done():
            waiter.set_exception(ProtocolError(f"channel {channel_id!r} closed during handshake: {reason}"))
            waiter.exception()  # mark retrieved: the creator may already have given up
        await self.store.put_channel(md.to_dict())
        expired = new_state == ChannelState.EXPIRED
        env = Envelope(
            channel_id=channel_id,
            sender_id=md.creator_id,
            audience=md.participant_ids(),
            event_type=EV_CHANNEL_EXPIRED if expired else EV_CHANNEL_CLOSED,
            event_data={"reason": reason, "channel_id": channel_id},
        )
        self._stamp(env)
        await self._append(md, env)
        self._dispatch(md, env)
        kind = "expired" if expired else "closed"
        self._observe_channel(channel_id, kind, md, reason=reason)
        await self._audit(
            AUDIT_KIND_CHANNEL_EXPIRED if expired else AUDIT_KIND_CHANNEL_CLOSED,
            at=now,
            channel_id=channel_id,
            reason=reason,
        )
        await self._fan_out(
            "on_channel_event", channel_id, kind, {"reason": reason, "metadata": md, "at": now}
        )

    # ------------------------------------------------------------------ admission

    def _stamp(self, env: Envelope) -> None:
        env.envelope_id = self._ids()
        env.created_at = self.clock()

    async def _append(self, md: ChannelMetadata, env: Envelope, text: str | None = None) -> int:
        """Cache and durably append one stamped envelope (``text``: its JSON, when already encoded)."""
        cid = md.channel_id
        wal = self._wal.get(cid)
        if wal is None:
            wal = await self._load_wal(cid)
        seq = self._wal_counts.get(cid, 0) + 1
        self._wal_counts[cid] = seq
        self._last_activity[cid] = env.created_at
        try:
            await self.store.append(cid, env.envelope_id, text if text is not None else env.to_json())
        except BaseException:
            if self._wal_counts.get(cid) == seq:
                self._wal_counts[cid] = seq - 1
            raise
        # Appended only once committed, so readers never see an envelope the store may not have.
        # The store resolves appends in call order, so the cache keeps admission order.
        wal.append(env)
        self.observe_log.append("envelope", channel_id=cid, seq=seq, envelope=env)
        return seq

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``."""
        try:
            return await self._admit(envelope)
        except NetworkError as exc:
            if self._listeners:
                await self._fan_out("on_envelope_rejected", envelope, exc)
            raise

    async def _admit(self, env: Envelope) -> str:
        check_shape(env)
        sender = self.agents.get(env.sender_id)
        if sender is None:
            raise NotFoundError(f"sender not registered: {env.sender_id}")
        audience = env.audience
        if audience:
            names = [
                self.agents[a].passport.name for a in audience if a in self.agents and a != env.sender_id
            ]
            if names:
                rules.check_outbound(sender.passport.name, sender.rule.access.outbound_to, names)
        rules.check_depth(sender.passport.name, env.depth, sender.rule.limits.delegation_depth)
        cid = env.channel_id
        md = self.channels.get(cid)
        if md is None:
            raise NotFoundError(f"channel not found: {cid}")
        if md.state in TERMINAL:
            raise ProtocolError(f"channel '{cid}' is {md.state.value}")
        event_type = env.event_type
        protocol = is_protocol_event(event_type)
        if not protocol and md.state != ChannelState.ACTIVE:
            raise ProtocolError(f"channel '{cid}' not active (state={md.state.value})")
        participants = [p.agent_id for p in md.participants]
        peer_cancel = False
        if env.sender_id not in participants:
            if not self._is_peer_cancel(md, env):
                raise ProtocolError(
                    f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'"
                )
            peer_cancel = True
        if audience:
            for a in audience:
                if a not in participants:
                    raise ProtocolError(
                        f"audience must list only participants of the channel; {a!r} is not one of channel '{cid}'"
                    )
        adapter = self._adapters.get((md.manifest.type, md.manifest.version))
        if adapter is None:
            raise ProtocolError(
                f"channel '{cid}' has no registered adapter (manifest {md.manifest.type!r}@v{md.manifest.version})"
            )
        if not protocol:
            recipients = audience if audience is not None else [p for p in participants if p != env.sender_id]
            for rid in recipients:
                if rid == env.sender_id:
                    continue
                rec = self.agents.get(rid)
                if rec is not None:
                    pending = self._unacked.get(rid)
                    rules.check_inbox(rid, len(pending) if pending else 0, rec.rule.limits.inbox.max_pending)
        state = self._states.get(cid)
        if state is None:
            raise ProtocolError(f"channel '{cid}' has no adapter state")
        if peer_cancel and env.sender_id in self._peer_cancellers.get(env.task_id or "", ()):
            raise ProtocolError(
                f"channel '{cid}' only accepts sends from participants, got '{env.sender_id}'"
            )
        adapter.validate_send(md, env, state)
        self._stamp(env)
        text = encode_envelope(env)
        new_state = adapter.fold(env, state)
        result = adapter.on_accepted(md, env, new_state)
        self._states[cid] = new_state
        try:
            await self._append(md, env, text)
        except BaseException:
            self._states[cid] = state
            raise
        if peer_cancel:
            self._peer_cancellers.setdefault(env.task_id or "", set()).add(env.sender_id)
        if event_type in (EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT):
            await self._handshake(md, env)
            return env.envelope_id
        self._dispatch(md, env)
        if self._listeners:
            await self._fan_out("on_envelope_posted", env, md)
        if result is not None and result.next_state is not None:
            await self._transition(cid, result.next_state, result.auto_close_reason)
        return env.envelope_id

    def _is_peer_cancel(self, md: ChannelMetadata, env: Envelope) -> bool:
        if env.event_type != EV_TASK_CANCEL_REQUEST or not env.task_id:
            return False
        task = self._tasks.get(env.task_id)
        data = env.event_data
        return (
            task is not None
            and task.state not in TERMINAL_TASKS
            and md.state == ChannelState.ACTIVE
            and task.channel_id == md.channel_id
            and env.audience == [task.owner_id]
            and set(data) == {"task_id", "reason"}
            and data.get("task_id") == env.task_id
            and isinstance(data.get("reason"), str)
            and len(data["reason"]) <= 500
        )

    async def can_send(self, channel_id: str, sender_id: str, *, event_type: str | None = None) -> bool:
        return (await self.explain_send(channel_id, sender_id, event_type=event_type))[0]

    async def explain_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]:
        """Whether ``sender_id`` may send now, and if not, one sentence saying why."""
        from ag2net.envelope import EV_TEXT

        md = self.channels.get(channel_id)
        if md is None:
            return False, f"channel '{channel_id}' not found"
        if md.is_terminal():
            reason = f" (reason: {md.close_reason})" if md.close_reason else ""
            return False, f"channel '{channel_id}' is {md.state.value}{reason}; open a new one"
        if md.state != ChannelState.ACTIVE:
            return (
                False,
                f"channel '{channel_id}' not active (state={md.state.value}); wait for every invitee to ack",
            )
        if sender_id not in md.participant_ids():
            return False, f"you are not a participant of channel '{channel_id}'"
        state = self._states.get(channel_id)
        adapter = self._adapters.get((md.manifest.type, md.manifest.version))
        if state is None or adapter is None:
            return False, f"channel '{channel_id}' has no adapter"
        probe = Envelope(channel_id, sender_id, None, event_type or EV_TEXT, {"text": ""})
        try:
            adapter.validate_send(md, probe, state)
        except NetworkError as exc:
            return False, str(exc)
        return True, ""

    # ------------------------------------------------------------------ dispatch and receipts

    def attach_endpoint(self, endpoint: Any) -> None:
        self._endpoints[endpoint.endpoint_id] = endpoint

    async def detach_endpoint(self, endpoint: Any) -> None:
        self._endpoints.pop(endpoint.endpoint_id, None)
        for agent_id, bound in list(self._bindings.items()):
            if bound is endpoint:
                del self._bindings[agent_id]
                mailbox = self._mailboxes.pop(agent_id, None)
                if mailbox is not None:
                    await mailbox.stop()
                self._unacked.pop(agent_id, None)
        with contextlib.suppress(Exception):
            await endpoint.close()

    def bind_endpoint(self, endpoint: Any, agent_id: str) -> None:
        """Bind ``agent_id`` to ``endpoint`` (a re-bind moves the agent to the new endpoint)."""
        self._record(agent_id)
        self._bindings[agent_id] = endpoint
        bound = getattr(endpoint, "bound", None)
        if isinstance(bound, set):
            bound.add(agent_id)
        mailbox = self._mailboxes.get(agent_id)
        if mailbox is not None:
            mailbox.endpoint = endpoint

    def unbind_endpoint(self, endpoint: Any, agent_id: str) -> None:
        if self._bindings.get(agent_id) is endpoint:
            del self._bindings[agent_id]
            mailbox = self._mailboxes.pop(agent_id, None)
            if mailbox is not None:
                self._spawn(mailbox.stop())

    def _dispatch(self, md: ChannelMetadata, env: Envelope) -> None:
        sender_id = env.sender_id
        recipients = (
            env.audience if env.audience is not None else [p for p in md.participant_ids() if p != sender_id]
        )
        if not recipients:
            return
        counted = not is_protocol_event(env.event_type)
        sender_name = None
        for rid in recipients:
            rec = self.agents.get(rid)
            if rec is None:
                continue
            if rid != sender_id:
                inbound = rec.rule.access.inbound_from
                if inbound != ["*"]:
                    if sender_name is None:
                        sender_name = self.name_for(sender_id)
                    if not rules.matches_any(sender_name, inbound):
                        continue
            endpoint = self._bindings.get(rid)
            if endpoint is None:
                continue
            if counted:
                pending = self._unacked.setdefault(rid, set())
                pending.add(env.envelope_id)
                self._check_pressure(rid, rec, len(pending))
            mailbox = self._mailboxes.get(rid)
            if mailbox is None:
                mailbox = self._mailboxes[rid] = Mailbox(rid, endpoint, self._dispatch_failed)
            mailbox.put(env)

    def _check_pressure(self, rid: str, rec: AgentRecord, pending: int) -> None:
        inbox = rec.rule.limits.inbox
        if inbox.max_pending <= 0:
            return
        high = inbox.high_water if inbox.high_water is not None else max(1, int(0.8 * inbox.max_pending))
        if high <= 0:
            return
        if pending >= high and rid not in self._pressure_fired:
            self._pressure_fired.add(rid)
            if self._listeners:
                self._spawn(self._fan_out("on_inbox_pressure", rid, pending, inbox.max_pending))
        elif pending < high:
            self._pressure_fired.discard(rid)

    async def _dispatch_failed(self, env: Envelope, recipient_id: str, exc: BaseException) -> None:
        log.warning("delivery of %s to %s failed: %s", env.envelope_id, recipient_id, exc)
        await self._fan_out("on_dispatch_failed", env, recipient_id, exc)

    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None:
        """A client acknowledged (or refused) one delivery."""
        if recipient_id not in self.agents or self._bindings.get(recipient_id) is not endpoint:
            return
        if status != "ack":
            log.info("nack of %s by %s: %s", envelope_id, recipient_id, reason)
            return
        pending = self._unacked.get(recipient_id)
        if pending is not None:
            pending.discard(envelope_id)
            if recipient_id in self._pressure_fired:
                self._check_pressure(recipient_id, self.agents[recipient_id], len(pending))
        if channel_id:
            cursors = self._cursors.setdefault(recipient_id, {})
            if envelope_id > cursors.get(channel_id, ""):
                cursors[channel_id] = envelope_id
                self._dirty_cursors.add((recipient_id, channel_id))
                if self._cursor_flush is None and not self._closed:
                    loop = asyncio.get_running_loop()
                    self._cursor_flush = loop.call_later(0.2, lambda: self._spawn(self._flush_cursors()))

    async def _flush_cursors(self) -> None:
        self._cursor_flush = None
        dirty, self._dirty_cursors = self._dirty_cursors, set()
        for agent_id, channel_id in dirty:
            value = self._cursors.get(agent_id, {}).get(channel_id)
            if value:
                await self.store.set_cursor(agent_id, channel_id, value)

    def inbox_cursor(self, agent_id: str, channel_id: str) -> str:
        return self._cursors.get(agent_id, {}).get(channel_id, "")

    def pending_inbox(self, agent_id: str) -> int:
        return len(self._unacked.get(agent_id, ()))

    async def replay(self, endpoint: Any, agent_id: str, since_envelope_id: str) -> int:
        """Resend what ``agent_id`` missed in its active channels since a cursor; returns the count."""
        sent = 0
        for md in list(self.channels.values()):
            if md.is_terminal() or agent_id not in md.participant_ids():
                continue
            high = max(self.inbox_cursor(agent_id, md.channel_id), since_envelope_id or "")
            for env in await self.read_wal(md.channel_id):
                if env.envelope_id <= high or env.sender_id == agent_id:
                    continue
                if env.audience is not None and agent_id not in env.audience:
                    continue
                try:
                    await endpoint.notify(agent_id, env)
                except Exception as exc:
                    await self._dispatch_failed(env, agent_id, exc)
                    break
                sent += 1
        return sent

    # ------------------------------------------------------------------ WAL reads

    async def _load_wal(self, channel_id: str) -> WalLog:
        wal = self._wal.get(channel_id)
        if wal is None:
            loads = json.loads
            wal = WalLog(Envelope(**loads(t)) for t in await self.store.read_wal(channel_id))
            self._wal[channel_id] = wal
        return wal

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[Envelope]:
        """The channel's envelopes in admission order, index-sliced ``[since:until]``; unknown → ``[]``."""
        if channel_id not in self.channels:
            return []
        wal = self._wal.get(channel_id)
        if wal is None:
            wal = await self._load_wal(channel_id)
        return wal[since:until]

    async def read_wal_seq(
        self, channel_id: str, first_seq: int, last_seq: int
    ) -> list[tuple[int, Envelope]]:
        """Envelopes with ``first_seq <= seq <= last_seq`` (seq starts at 1), O(range)."""
        if channel_id not in self.channels:
            return []
        first_seq = max(1, first_seq)
        wal = self._wal.get(channel_id)
        if wal is not None:
            return [(first_seq + i, env) for i, env in enumerate(wal[first_seq - 1 : max(last_seq, 0)])]
        rows = await self.store.read_wal_seq(channel_id, first_seq, last_seq)
        loads = json.loads
        return [(seq, Envelope(**loads(text))) for seq, text in rows]

    def wal_count(self, channel_id: str) -> int:
        return self._wal_counts.get(channel_id, 0)

    async def read_wal_until(self, channel_id: str, envelope_id: str) -> WalSlice | list[Envelope]:
        """The WAL strictly before ``envelope_id`` (the whole WAL if it is not found).

        In-process this is a ``WalSlice`` of the cached log, so windowed views cost O(window).
        """
        if channel_id not in self.channels:
            return []
        wal = self._wal.get(channel_id)
        if wal is None:
            wal = await self._load_wal(channel_id)
        return wal.until(envelope_id)

    async def find_envelope_by_causation(
        self, channel_id: str, *, sender_id: str, causation_id: str
    ) -> Envelope | None:
        md = self.channels.get(channel_id)
        if md is None or md.is_terminal():
            return None
        for env in reversed(await self.read_wal(channel_id)):
            if env.causation_id == causation_id and env.sender_id == sender_id:
                return env
        return None

    async def find_envelope(self, channel_id: str, envelope_id: str) -> tuple[int, Envelope] | None:
        wal = await self.read_wal(channel_id)
        for i in range(len(wal) - 1, -1, -1):
            if wal[i].envelope_id == envelope_id:
                return i + 1, wal[i]
        return None

    # ------------------------------------------------------------------ observe

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Every admitted envelope, lifecycle event and audit record after position ``since``."""
        return self.observe_log.follow(since)

    @property
    def observe_position(self) -> int:
        return self.observe_log.position

    # ------------------------------------------------------------------ turns

    def pending_turns_for(self, agent_id: str) -> list[PendingTurn]:
        out = []
        for cid, md in self.channels.items():
            if md.state != ChannelState.ACTIVE or agent_id not in md.participant_ids():
                continue
            adapter = self._adapters.get((md.manifest.type, md.manifest.version))
            state = self._states.get(cid)
            if adapter is None or state is None:
                continue
            expected = adapter.expected_next(md, state)
            if expected is None or expected.agent_id != agent_id:
                continue
            at = self.clock()
            trigger = expected.triggering_envelope_id
            if trigger:
                for env in reversed(self._wal.get(cid, [])):
                    if env.envelope_id == trigger:
                        at = env.created_at
                        break
            out.append(PendingTurn(cid, trigger, at))
        return out

    async def report_turn_failure(
        self,
        *,
        channel_id: str,
        agent_id: str,
        envelope_id: str,
        exc: BaseException | str,
        exc_type: str | None = None,
    ) -> None:
        if exc_type is None:
            exc_type = type(exc).__name__ if isinstance(exc, BaseException) else "Error"
        await self._audit(
            AUDIT_KIND_TURN_FAILED,
            channel_id=channel_id,
            agent_id=agent_id,
            envelope_id=envelope_id,
            exc_type=exc_type,
            exc_message=str(exc),
        )
        await self._fan_out("on_turn_failed", channel_id, agent_id, envelope_id, exc)

    async def record_turn(self, record: dict[str, Any]) -> None:
        await self.store.put_turn(record)
        self.observe_log.append(
            "turn",
            channel_id=record.get("channel_id"),
            payload={
                "turn_id": record.get("turn_id"),
                "agent_id": record.get("agent_id"),
                "trigger_envelope_id": record.get("trigger_envelope_id"),
            },
        )

    async def list_turns(
        self,
        *,
        channel_id: str | None = None,
        agent_id: str | None = None,
        trigger_envelope_id: str | None = None,
        limit: int = 50,
    ) -> list[dict[str, Any]]:
        return await self.store.list_turns(
            channel_id=channel_id, agent_id=agent_id, trigger_envelope_id=trigger_envelope_id, limit=limit
        )

    # ------------------------------------------------------------------ knowledge

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        self._record(agent_id)
        return await self.store.add_knowledge(agent_id, text, source=source)

    async def search_knowledge(self, agent_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        return await self.store.search_knowledge(agent_id, query, limit)

    # ------------------------------------------------------------------ tasks

    async def observe_task(self, metadata: TaskMetadata) -> TaskMetadata:
        if not TASK_ID_RE.fullmatch(metadata.task_id or ""):
            raise ProtocolError(f"invalid task_id {metadata.task_id!r}")
        existing = self._tasks.get(metadata.task_id)
        if existing is not None:
            existing.state = metadata.state
            existing.started_at = metadata.started_at or existing.started_at
            existing.expires_at = metadata.expires_at or existing.expires_at
            existing.channel_id = metadata.channel_id or existing.channel_id
            existing.progress.update(metadata.progress or {})
            await self.store.put_task(existing.to_dict())
            return existing
        owner = self._record(metadata.owner_id)
        limit = owner.rule.limits.max_concurrent_tasks
        if limit > 0:
            active = sum(
                1 for t in self._tasks.values() if t.owner_id == metadata.owner_id and not t.is_terminal()
            )
            if active >= limit:
                from ag2net.errors import AccessDeniedError

                raise AccessDeniedError(
                    f"owner '{metadata.owner_id}' exceeded max_concurrent_tasks ({active} >= {limit})"
                )
        self._tasks[metadata.task_id] = metadata
        await self.store.put_task(metadata.to_dict())
        return metadata

    async def update_task(
        self,
        task_id: str,
        *,
        state: TaskState | str | None = None,
        progress: dict[str, Any] | None = None,
        result: Any = None,
        error: str | None = None,
    ) -> TaskMetadata:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"task not found: {task_id}")
        if task.is_terminal():
            return task
        now = self.clock()
        if progress:
            task.progress.update(progress)
            task.last_progress_at = now
        if result is not None:
            task.result = result
        if error is not None:
            task.error = error
        if state is not None:
            task.state = TaskState(state)
        await self.store.put_task(task.to_dict())
        if task.is_terminal():
            task.completed_at = now
            await self.store.put_task(task.to_dict())
            await self._audit(
                AUDIT_KIND_TASK_TERMINATED,
                at=now,
                task_id=task_id,
                owner_id=task.owner_id,
                channel_id=task.channel_id,
                outcome=task.state.value,
                capability=task.spec.capability,
                reason=task.error or "",
            )
            await self._fan_out(
                "on_task_event",
                task_id,
                task.state.value,
                {"owner_id": task.owner_id, "channel_id": task.channel_id, "reason": task.error or ""},
            )
        return task

    def get_task(self, task_id: str) -> TaskMetadata:
        task = self._tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"task not found: {task_id}")
        return task

    def list_tasks(
        self,
        *,
        agent_id: str | None = None,
        channel_id: str | None = None,
        state: TaskState | str | None = None,
        limit: int | None = 50,
    ) -> list[TaskMetadata]:
        out = []
        wanted = TaskState(state) if state is not None else None
        for task in self._tasks.values():
            if agent_id is not None and task.owner_id != agent_id:
                continue
            if channel_id is not None and task.channel_id != channel_id:
                continue
            if wanted is not None and task.state != wanted:
                continue
            out.append(task)
        return out if limit is None else out[:limit]

    async def fire_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        await self._fan_out("on_task_event", task_id, kind, payload)

    # ------------------------------------------------------------------ sweepers

    async def expire_due(self) -> int:
        """Expire channels and tasks whose ``expires_at`` has passed; returns how many channels expired."""
        now = self.clock()
        count = 0
        for cid, md in list(self.channels.items()):
            if not md.is_terminal() and md.expires_at and md.expires_at <= now:
                await self._transition(cid, ChannelState.EXPIRED, "ttl_expired")
                count += 1
        for task in list(self._tasks.values()):
            if not task.is_terminal() and task.expires_at and task.expires_at <= now:
                await self.update_task(task.task_id, state=TaskState.EXPIRED, error="ttl_expired")
        return count

    async def tick_expectations(self) -> int:
        """Evaluate every active channel's expectations once; returns how many violations fired."""
        if not self._evaluators or not self._violation_handlers:
            return 0
        now_iso = self.clock()
        now_seconds = parse_time(now_iso).timestamp()
        fired = 0
        for cid, md in list(self.channels.items()):
            if md.is_terminal():
                continue
            ctx = ExpectationContext(
                md, self._states.get(cid), await self.read_wal(cid), now_iso, now_seconds
            )
            for index, exp in enumerate(md.manifest.expectations):
                evaluator = self._evaluators.get(exp.name)
                handler = self._violation_handlers.get(exp.on_violation)
                if evaluator is None or handler is None:
                    continue
                try:
                    violation = evaluator.evaluate(exp, ctx)
                except Exception:
                    log.exception("expectation %s on channel %s could not be evaluated", exp.name, cid)
                    continue
                if violation is None:
                    continue
                memory = self._fired.setdefault(cid, set())
                keys = [(index, exp.name, v) for v in (violation.violator_ids or [""])]
                if all(k in memory for k in keys):
                    continue
                memory.update(keys)
                fired += 1
                await self._audit(
                    AUDIT_KIND_EXPECTATION_VIOLATED,
                    channel_id=cid,
                    expectation=exp.name,
                    on_violation=exp.on_violation,
                    params=dict(exp.params),
                    violators=list(violation.violator_ids),
                    detail=dict(violation.detail),
                )
                await self._fan_out("on_expectation_fired", cid, exp, violation)
                try:
                    await handler.handle(self, cid, violation)
                except Exception:
                    log.exception("violation handler %s failed", exp.on_violation)
                if exp.on_violation == "auto_close":
                    break
        return fired

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        pending = [len(v) for v in self._unacked.values()]
        return {
            "active_channels": sum(1 for md in self.channels.values() if not md.is_terminal()),
            "channels": len(self.channels),
            "registered_agents": len(self.agents),
            "pending_inbox_total": sum(pending),
            "max_pending_inbox_depth": max(pending) if pending else None,
            "registered_listeners": len(self._listeners),
            "adapters_loaded": len(self._adapters),
            "envelopes": sum(self._wal_counts.values()),
            "observe_position": self.observe_log.position,
            "store": type(self.store).__name__,
            "durable": bool(getattr(self.store, "durable", False)),
        }

    # ------------------------------------------------------------------ ops (transport seam)

    async def handle_op(self, endpoint: Any, op: str, params: dict[str, Any]) -> Any:
        from ag2net.hub.ops import run_op

        if self._closed:
            raise NetworkError("the hub is closed; reopen it with Hub.open(...)")

        return await run_op(self, endpoint, op, params)


__all__ = ["AgentRecord", "Hub", "PendingTurn"]

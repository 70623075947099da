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
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from ag2net.adapters import default_adapters
from ag2net.channel import (
    ChannelMetadata,
    ChannelState,
)
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_TASK_CANCEL_REQUEST,
    Envelope,
)
from ag2net.errors import NetworkError, NotFoundError
from ag2net.hub.admission import Admission
from ag2net.hub.arbiter import ArbiterSeat
from ag2net.hub.audit import (
    AUDIT_KIND_TURN_FAILED,
)
from ag2net.hub.auth import AuthRegistry
from ag2net.hub.checkpoints import TaskCheckpoints
from ag2net.hub.core import HubCore
from ag2net.hub.delivery import Delivery
from ag2net.hub.expectations import default_evaluators
from ag2net.hub.gate import ChannelGates
from ag2net.hub.lifecycle import ChannelLifecycle
from ag2net.hub.listeners import Listeners
from ag2net.hub.local import LocalLink
from ag2net.hub.observe import ObservedEvent, ObserveLog
from ag2net.hub.records import (
    SNAPSHOT_KEY,
    AgentRecord,
    AuditHandler,
    AutoCloseHandler,
    NotifyChannelHandler,
    PendingTurn,
)
from ag2net.hub.registry import IdentityRegistry
from ag2net.hub.remote import RemoteProxies
from ag2net.hub.sweeps import Sweeps
from ag2net.hub.task_table import TaskTable
from ag2net.hub.wal_cache import DEFAULT_CACHE_MB, DEFAULT_WINDOW, WalCache
from ag2net.identity import (
    Passport,
    Resume,
    Rule,
)
from ag2net.ids import IdMint, IdSource, is_id, utc_now
from ag2net.store import Store, open_store
from ag2net.tasks import TaskMetadata
from ag2net.views.wal import WalLog, WalSlice
from ag2net.views.warm import channel_indexes, restore_channel_indexes

log = logging.getLogger(__name__)

INDEX_SNAPSHOT_BYTES = 1 << 20
"""The most the hydrate snapshot spends on visibility index summaries (JSON; ~2 KB per participant)."""


class Hub(
    RemoteProxies,
    IdentityRegistry,
    ChannelLifecycle,
    Admission,
    Delivery,
    TaskTable,
    TaskCheckpoints,
    Sweeps,
    Listeners,
    ArbiterSeat,
):
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
        tracer_provider: Any = None,
        allow_remote_agent_registration: bool = False,
        observe_buffer: int = 250_000,
        progress: Callable[[int, int], None] | None = None,
        cache_mb: float = DEFAULT_CACHE_MB,
        wal_window: int = DEFAULT_WINDOW,
        ids: IdSource | None = None,
    ) -> None:
        self.store: Store = open_store(store)
        self.auth = auth or AuthRegistry.default()
        self.clock = clock or utc_now
        self.ttl_sweep_interval = ttl_sweep_interval
        self.expectation_sweep_interval = expectation_sweep_interval
        self.invite_ack_timeout = invite_ack_timeout
        self.allow_remote_agent_registration = allow_remote_agent_registration
        self.ids: IdSource = ids if ids is not None else IdMint()
        # The synchronous state lives in components that own it (ag2net.hub.core); the names below are
        # the same dicts and sets, for the parts of the shell that read them.
        self.core = core = HubCore()
        self.identities = core.identities
        self.channel_table = core.channel_table
        self.inboxes = core.inboxes
        self.task_book = core.task_book
        self.agents = core.identities.agents
        self._names = core.identities.names
        self._reserved_names = core.identities.reserved
        self.channels = core.channel_table.channels
        self._states = core.channel_table.states
        self._adapters = core.channel_table.adapters
        self._wal_counts = core.channel_table.wal_counts
        self._last_activity = core.channel_table.last_activity
        self._endpoints = core.inboxes.endpoints
        self._bindings = core.inboxes.bindings
        self._mailboxes = core.inboxes.mailboxes
        self._unacked = core.inboxes.unacked
        self._pressure_fired = core.inboxes.pressure_fired
        self._cursors = core.inboxes.cursors
        self._dirty_cursors = core.inboxes.dirty_cursors
        self._tasks = core.task_book.tasks
        self._observed_outcomes = core.task_book.observed_outcomes
        self._peer_cancellers = core.task_book.peer_cancellers
        # The WALs in memory: a bounded cache over the store (newest envelopes of recently used live
        # channels); ``cache_mb`` bounds it and the observe buffer (a quarter of it) together.
        self._wal_cache = WalCache(self.store, cache_mb=cache_mb, window=wal_window)
        # the visibility indexes the last hub kept for channels whose log is not loaded yet (installed by
        # the load: a reopened hub's first windowed projection need not scan every stored envelope)
        self._index_entries: dict[str, Any] = {}
        self._gates = ChannelGates()
        # group admission needs a store that appends several envelopes all or none (hub/admission.py)
        self._append_group: Callable[[str, list[tuple[str, str]]], Awaitable[list[int]]] | None = getattr(
            self.store, "append_group", None
        )
        self._evaluators: dict[str, Any] = {}
        self._violation_handlers: dict[str, Any] = {}
        self._fired: dict[str, set[tuple[int, str, str]]] = {}
        self._open_waiters: dict[str, asyncio.Future[ChannelMetadata]] = {}
        self._cursor_flush: asyncio.TimerHandle | None = None
        self._agent_locks: dict[str, asyncio.Lock] = {}
        # listeners, the audit log (every audit record goes through it) and, with a tracer provider,
        # OpenTelemetry spans (ag2net.hub.listeners, ag2net.hub.telemetry)
        self._init_listeners(tracer_provider)
        self._sweepers: dict[str, asyncio.Task[None]] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._owned_clients: list[Any] = []
        self._remote_proxies: dict[str, Any] = {}  # RemoteAgentProxy by scheme (hub/remote.py)
        self.observe_log = ObserveLog(observe_buffer, max_bytes=int(cache_mb * (1 << 20)) // 4)
        self.progress = progress  # (envelopes folded, envelopes to fold) while hydrating
        self._closed = False
        self._started = False

    # ------------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        store: Store | str | Path | None = None,
        *,
        auth: AuthRegistry | None = None,
        clock: Callable[[], str] | None = None,
        ttl_sweep_interval: float = 30.0,
        expectation_sweep_interval: float = 10.0,
        invite_ack_timeout: float = 30.0,
        tracer_provider: Any = None,
        register_default_adapters: bool = True,
        allow_remote_agent_registration: bool = False,
        **kwargs: Any,
    ) -> Hub:
        """Construct, open the store, hydrate and start the sweepers; ``kwargs`` are ag2net's own knobs
        (``cache_mb``, ``wal_window``, ``observe_buffer``, ``progress``, ``ids``: an :class:`~ag2net.ids.IdSource`)."""
        if tracer_provider is not None:
            kwargs["tracer_provider"] = tracer_provider
        hub = cls(
            store,
            auth=auth,
            clock=clock,
            ttl_sweep_interval=ttl_sweep_interval,
            expectation_sweep_interval=expectation_sweep_interval,
            invite_ack_timeout=invite_ack_timeout,
            allow_remote_agent_registration=allow_remote_agent_registration,
            **kwargs,
        )
        if register_default_adapters:
            for adapter in default_adapters():
                hub.register_adapter(adapter)
            for evaluator in default_evaluators():
                hub.register_expectation_evaluator(evaluator)
            for handler in (AuditHandler(), NotifyChannelHandler(), AutoCloseHandler()):
                hub.register_violation_handler(handler)
        await hub.store.open()
        await hub.hydrate()
        await hub.start()
        return hub

    async def __aenter__(self) -> Hub:
        if not self._started:
            await self.store.open()
            if not self.channel_table.adapters:
                for adapter in default_adapters():
                    self.register_adapter(adapter)
            await self.hydrate()
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Start the interval sweepers (TTL expiry, expectations); idempotent."""
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
        for mailbox in list(self.inboxes.mailboxes.values()):
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
        self.channel_table.adapters[(adapter.manifest.type, adapter.manifest.version)] = adapter

    def adapter_types(self) -> list[str]:
        return sorted({t for t, _ in self.channel_table.adapters})

    def get_adapter(self, manifest_type: str, version: int = 1) -> Any:
        adapter = self.channel_table.adapters.get((manifest_type, version))
        if adapter is None:
            raise NotFoundError(f"no adapter registered for {manifest_type!r}@v{version}")
        return adapter

    def adapter_for(self, channel_id: str) -> Any:
        md = self._channel(channel_id)
        return self.get_adapter(md.manifest.type, md.manifest.version)

    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any:
        return self.get_adapter(metadata.manifest.type, metadata.manifest.version)

    def adapter_state(self, channel_id: str) -> Any:
        return self.channel_table.states.get(channel_id)

    def register_expectation_evaluator(self, evaluator: Any) -> None:
        self._evaluators[evaluator.name] = evaluator

    def register_violation_handler(self, handler: Any) -> None:
        self._violation_handlers[handler.name] = handler

    def _observe_channel(self, channel_id: str, kind: str, metadata: ChannelMetadata, **extra: Any) -> None:
        self.observe_log.append(
            "channel", channel_id=channel_id, payload={"kind": kind, "metadata": metadata.to_dict(), **extra}
        )

    def _observe_agent(self, agent_id: str, kind: str, **payload: Any) -> None:
        self.observe_log.append("agent", payload={"kind": kind, "agent_id": agent_id, **payload})

    # ------------------------------------------------------------------ hydrate

    async def hydrate(self) -> None:
        """Rebuild every in-memory cache from the store (idempotent); opens the store if it is not open,
        so ``Hub(store)`` then ``await hub.hydrate()`` works as in ag2."""
        if self._closed:
            raise NetworkError("the hub is closed; reopen it with Hub.open(...)")
        await self.store.open()
        self.agents.clear()
        self.identities.names.clear()
        self.channels.clear()
        self.channel_table.states.clear()
        self._wal_cache.clear()
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
                secret_digest=rec.get("secret_digest") or None,
            )
            self.identities.add(record)
        self.channel_table.wal_counts.clear()
        self.channel_table.wal_counts.update(await self.store.wal_counts())
        live: list[str] = []
        for data in await self.store.load_channels():
            md = ChannelMetadata.from_dict(data)
            self.channels[md.channel_id] = md
            self.channel_table.last_activity[md.channel_id] = md.closed_at or md.created_at
            if (
                not md.is_terminal()
                and (md.manifest.type, md.manifest.version) in self.channel_table.adapters
            ):
                live.append(md.channel_id)
        self._index_entries.clear()
        live = self._restore_snapshot(await self.store.get_meta(SNAPSHOT_KEY), live)
        cache = self._wal_cache
        logs: dict[str, WalLog] = {}
        for cid in live:
            md = self.channels[cid]
            self.channel_table.states[cid] = self.get_adapter(
                md.manifest.type, md.manifest.version
            ).initial_state(md)
            logs[cid] = cache.new_log(cid)
        if live:
            folds = {
                cid: self.get_adapter(self.channels[cid].manifest.type, self.channels[cid].manifest.version)
                for cid in live
            }
            loads = json.loads
            progress = self.progress
            total = sum(self.channel_table.wal_counts.get(cid, 0) for cid in live)
            done = 0
            window = cache.window
            async for cid, _seq, text in self.store.iter_wal(live):
                if progress is not None:
                    done += 1
                    if done % 5000 == 0 or done == total:
                        progress(done, total)
                env = Envelope(**loads(text))
                wal = logs[cid]
                wal.append(env, len(text))
                if wal.resident > 2 * window and wal.can_trim:
                    wal.trim(window)
                self.channel_table.states[cid] = folds[cid].fold(env, self.channel_table.states[cid])
                self.ids.observe(env.envelope_id)
                if env.event_type == EV_TASK_CANCEL_REQUEST and env.task_id:
                    self._peer_cancellers.setdefault(env.task_id, set()).add(env.sender_id)
            for cid in live:
                wal = logs[cid]
                if len(wal):
                    self.channel_table.last_activity[cid] = wal[-1].created_at
                    if await self._finish_interrupted_close(cid, wal[-1]):
                        self._index_entries.pop(cid, None)
                        continue
                cache.install(cid, wal)
                self._restore_indexes(cid, wal)
        for data in await self.store.load_tasks():
            md = TaskMetadata.from_dict(data)
            self._tasks[md.task_id] = md
        self.inboxes.cursors.clear()
        self.inboxes.cursors.update(await self.store.load_cursors())

    async def _finish_interrupted_close(self, channel_id: str, last: Envelope) -> bool:
        """A live channel whose WAL ends with its close or expiry envelope was closed by a hub that stopped
        before it wrote the channel's row: write it now. Returns whether the channel was terminal."""
        if last.event_type not in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED):
            return False
        md = self.channels[channel_id]
        md.state = ChannelState.EXPIRED if last.event_type == EV_CHANNEL_EXPIRED else ChannelState.CLOSED
        reason = last.event_data.get("reason") if isinstance(last.event_data, dict) else None
        md.close_reason = reason if isinstance(reason, str) else ""
        md.closed_at = last.created_at
        await self.store.put_channel(md.to_dict())
        self.channel_table.states.pop(channel_id, None)
        return True

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
                self.ids.observe(high)
            for task_id, senders in (snapshot.get("peer_cancellers") or {}).items():
                self._peer_cancellers.setdefault(task_id, set()).update(senders)
            channels = snapshot.get("channels") or {}
        except (ValueError, AttributeError):
            return live
        remaining = []
        for cid in live:
            entry = channels.get(cid)
            md = self.channels[cid]
            if isinstance(entry, dict) and entry.get("indexes") is not None:
                # valid for any WAL extending the one they were taken over (checked when installed)
                self._index_entries[cid] = entry["indexes"]
            if not isinstance(entry, dict) or entry.get("seq") != self.channel_table.wal_counts.get(cid, 0):
                remaining.append(cid)
                continue
            try:
                adapter = self.get_adapter(md.manifest.type, md.manifest.version)
                self.channel_table.states[cid] = adapter.state_from_dict(entry["state"])
            except Exception:
                log.warning("snapshot of channel %s unusable; folding its WAL", cid)
                remaining.append(cid)
                continue
            if entry.get("last_activity"):
                self.channel_table.last_activity[cid] = entry["last_activity"]
        return remaining

    def _snapshot(self) -> str:
        """Adapter states of live channels, so the next open need not fold every WAL, and the visibility
        indexes of their logs (``_index_snapshot``)."""
        channels: dict[str, Any] = {}
        high = ""
        for cid, md in self.channels.items():
            state = self.channel_table.states.get(cid)
            if md.is_terminal() or state is None:
                continue
            adapter = self.channel_table.adapters.get((md.manifest.type, md.manifest.version))
            if adapter is None:
                continue
            try:
                channels[cid] = {
                    "seq": self.channel_table.wal_counts.get(cid, 0),
                    "state": adapter.state_to_dict(state),
                    "last_activity": self.channel_table.last_activity.get(cid, ""),
                }
            except Exception:
                log.warning("adapter state of channel %s cannot be snapshotted", cid)
        for wal in self._wal_cache.logs():
            if wal.resident and wal[-1].envelope_id > high:
                high = wal[-1].envelope_id
        self._index_snapshot(channels)
        return json.dumps(
            {
                "max_envelope_id": max(high, self.ids.last_envelope_id()),
                "peer_cancellers": {t: sorted(s) for t, s in self._peer_cancellers.items()},
                "channels": channels,
            },
            default=str,
        )

    def _index_snapshot(self, channels: dict[str, Any]) -> None:
        """Add to the snapshot's channel entries the summaries of their logs' visibility indexes under the
        channel's renderer (``ag2net.views.warm.channel_indexes``; a channel whose log is not loaded keeps
        what the last hub left), longest channels first while they fit in ``INDEX_SNAPSHOT_BYTES``: a
        reopened hub installs them when it loads the log, and its first windowed projection (a dry run's)
        reads the window instead of every stored envelope."""
        found: list[tuple[int, str, Any, int]] = []
        for cid, entry in channels.items():
            md = self.channels[cid]
            wal = self._wal_cache.peek(cid)
            indexes: Any = None
            if wal is not None and len(wal) == entry["seq"]:
                adapter = self.channel_table.adapters[(md.manifest.type, md.manifest.version)]
                try:
                    indexes = channel_indexes(wal, adapter.render_envelope)
                except Exception:
                    log.warning("visibility indexes of channel %s cannot be snapshotted", cid, exc_info=True)
            elif wal is None:
                indexes = self._index_entries.get(cid)
            if not isinstance(indexes, dict):
                continue
            length = indexes.get("length")
            size = len(json.dumps(indexes, default=str))
            found.append((length if isinstance(length, int) else 0, cid, indexes, size))
        budget = INDEX_SNAPSHOT_BYTES
        for _length, cid, indexes, size in sorted(found, key=lambda f: -f[0]):
            if size <= budget:
                channels[cid]["indexes"] = indexes
                budget -= size

    def _restore_indexes(self, channel_id: str, wal: WalLog) -> None:
        """Install the visibility indexes the last hub kept for the channel in its freshly loaded log."""
        entry = self._index_entries.pop(channel_id, None)
        if entry is None:
            return
        md = self.channels.get(channel_id)
        adapter = (
            None if md is None else self.channel_table.adapters.get((md.manifest.type, md.manifest.version))
        )
        if adapter is None:
            return
        try:
            restore_channel_indexes(wal, adapter.render_envelope, entry)
        except Exception:  # the slow path (a scan) answers the same
            log.warning("visibility indexes kept for channel %s unusable", channel_id, exc_info=True)

    # ------------------------------------------------------------------ WAL reads

    async def _ensure_wal(self, channel_id: str) -> WalLog:
        """The channel's cached log, loading its newest envelopes from the store when absent.

        Single-flight: loads run inside the channel's gate, as every append does, so one load installs
        one log, no append can land between the store read and the install, and a second caller finds
        the log the first one installed.
        """
        cache = self._wal_cache
        wal = cache.get(channel_id)
        if wal is not None:
            return wal
        async with self._gates(channel_id):
            wal = cache.get(channel_id)
            if wal is None:
                wal = await self._read_log(channel_id)
                cache.install(channel_id, wal)
                self._restore_indexes(channel_id, wal)
        return wal

    async def _read_log(self, channel_id: str) -> WalLog:
        count = await self.store.wal_count(channel_id)
        keep = self._wal_cache.load_start
        base = max(0, count - keep) if keep else 0
        texts = await self.store.read_wal(channel_id, since=base)
        loads = json.loads
        wal = self._wal_cache.new_log(channel_id, base=base)
        for text in texts:
            wal.append(Envelope(**loads(text)), len(text))
        if len(wal) != self.channel_table.wal_counts.get(channel_id, 0):
            log.warning(
                "channel %s: the store holds %d envelopes, the hub counted %d; the store wins",
                channel_id,
                len(wal),
                self.channel_table.wal_counts.get(channel_id, 0),
            )
            self.channel_table.wal_counts[channel_id] = len(wal)
        return wal

    async def _wal_for_read(self, channel_id: str) -> WalLog | None:
        """The cached log of a known channel (loaded if live); None for an uncached terminal channel."""
        md = self.channels.get(channel_id)
        if md is None:
            return None
        wal = self._wal_cache.get(channel_id)
        if wal is None and not md.is_terminal():
            wal = await self._ensure_wal(channel_id)
        return wal

    async def _read_store(self, channel_id: str, start: int, stop: int | None) -> list[Envelope]:
        loads = json.loads
        return [Envelope(**loads(t)) for t in await self.store.read_wal(channel_id, since=start, until=stop)]

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[Envelope]:
        """The channel's envelopes in admission order, index-sliced ``[since:until]``; unknown → ``[]``.

        Served from the cache when the range is held in memory, else read from the store.
        """
        if channel_id not in self.channels:
            return []
        wal = await self._wal_for_read(channel_id)
        if wal is None:
            return await self._read_store(channel_id, since, until)
        start, stop, _ = slice(since, until).indices(len(wal))
        if start >= wal.base:
            return wal[start:stop]
        return await self._read_store(channel_id, start, stop) if stop > start else []

    async def read_wal_seq(
        self, channel_id: str, first_seq: int, last_seq: int
    ) -> list[tuple[int, Envelope]]:
        """Envelopes with ``first_seq <= seq <= last_seq`` (seq starts at 1), O(range)."""
        if channel_id not in self.channels:
            return []
        first_seq = max(1, first_seq)
        wal = self._wal_cache.get(channel_id)
        if wal is not None and first_seq - 1 >= wal.base:
            return [(first_seq + i, env) for i, env in enumerate(wal[first_seq - 1 : max(last_seq, 0)])]
        rows = await self.store.read_wal_seq(channel_id, first_seq, last_seq)
        loads = json.loads
        return [(seq, Envelope(**loads(text))) for seq, text in rows]

    def wal_count(self, channel_id: str) -> int:
        return self.channel_table.wal_counts.get(channel_id, 0)

    async def read_wal_until(self, channel_id: str, envelope_id: str) -> WalSlice | list[Envelope]:
        """The WAL strictly before ``envelope_id`` (the whole WAL if it is not found).

        For a live channel this is a ``WalSlice`` of the cached log, so windowed views cost O(window);
        envelopes older than the cache's window are read back from the store when a view reaches them.
        """
        wal = await self._wal_for_read(channel_id)
        if wal is None:
            if channel_id not in self.channels:
                return []
            seq = await self.store.find_seq(channel_id, envelope_id)
            return await self._read_store(channel_id, 0, None if seq is None else seq - 1)
        pos = wal.index_of(envelope_id)
        if pos is None and wal.base:
            seq = await self.store.find_seq(channel_id, envelope_id)
            if seq is not None:
                pos = seq - 1
        return wal.prefix(pos)

    async def find_envelope_by_causation(
        self, channel_id: str, *, sender_id: str, causation_id: str
    ) -> Envelope | None:
        md = self.channels.get(channel_id)
        if md is None or md.is_terminal():
            return None
        # Walk back from the newest envelope only as far as the cause: ids grow in admission order, so
        # an answer to ``causation_id`` sits after it (older envelopes come back from the store only if
        # the walk reaches them).
        bounded = is_id(causation_id)
        for env in reversed((await self._ensure_wal(channel_id)).prefix()):
            if bounded and env.envelope_id <= causation_id:
                break
            if env.causation_id == causation_id and env.sender_id == sender_id:
                return env
        return None

    async def find_envelope(self, channel_id: str, envelope_id: str) -> tuple[int, Envelope] | None:
        """``(seq, envelope)`` of one envelope of the channel, or None."""
        if channel_id not in self.channels:
            return None
        wal = self._wal_cache.get(channel_id)
        pos = wal.index_of(envelope_id) if wal is not None else None
        if wal is not None and pos is not None:
            return pos + 1, wal[pos]
        seq = await self.store.find_seq(channel_id, envelope_id)
        if seq is None:
            return None
        rows = await self.read_wal_seq(channel_id, seq, seq)
        return rows[0] if rows else None

    # ------------------------------------------------------------------ observe

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Every admitted envelope, lifecycle event and audit record after position ``since``."""
        return self.observe_log.follow(since)

    @property
    def observe_position(self) -> int:
        return self.observe_log.position

    # ------------------------------------------------------------------ turns

    async def pending_turns_for(self, agent_id: str) -> list[PendingTurn]:
        """The turns the adapters expect of ``agent_id`` now; ``expected_at`` is the trigger's time."""
        wanted: list[tuple[str, str | None]] = []
        for cid, md in self.channels.items():
            if md.state != ChannelState.ACTIVE or agent_id not in md.participant_ids():
                continue
            adapter = self.channel_table.adapters.get((md.manifest.type, md.manifest.version))
            state = self.channel_table.states.get(cid)
            if adapter is None or state is None:
                continue
            expected = adapter.expected_next(md, state)
            if expected is None or expected.agent_id != agent_id:
                continue
            wanted.append((cid, expected.triggering_envelope_id))
        out = []
        for cid, trigger in wanted:
            found = await self.find_envelope(cid, trigger) if trigger else None
            out.append(PendingTurn(cid, trigger, found[1].created_at if found else self.clock()))
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
        """Audit a failed turn and give every listener's ``on_turn_failed`` the exception.

        In-process callers pass the exception itself; a remote client's report arrives as text and
        ``exc_type``, and listeners get ``RuntimeError(text)`` (as in ag2, the type is not rebuilt)."""
        if exc_type is None:
            exc_type = type(exc).__name__ if isinstance(exc, BaseException) else "Error"
        if not isinstance(exc, BaseException):
            exc = RuntimeError(str(exc))
        await self._audit(
            AUDIT_KIND_TURN_FAILED,
            channel_id=channel_id,
            agent_id=agent_id,
            envelope_id=envelope_id,
            exc_type=exc_type,
            exc_message=str(exc),
        )
        await self._fan_out("on_turn_failed", channel_id, agent_id, envelope_id, exc)

    async def record_turn(self, record: dict[str, Any]) -> str:
        """Store one turn record under a fresh, hub-assigned ``turn_id`` and return that id.

        Records are never upserted by a client: a ``turn_id`` in ``record`` is replaced, so nobody can
        overwrite or erase another agent's records by naming their id. ``agent_id`` must be a
        registered agent and ``channel_id`` a known channel.
        """
        from ag2net.errors import ProtocolError

        if not isinstance(record, dict):
            raise ProtocolError("a turn record must be a JSON object")
        agent_id = record.get("agent_id")
        if not isinstance(agent_id, str) or agent_id not in self.agents:
            raise NotFoundError(f"turn record names an agent that is not registered: {agent_id!r}")
        channel_id = record.get("channel_id")
        if not isinstance(channel_id, str) or channel_id not in self.channels:
            raise NotFoundError(f"turn record names a channel that does not exist: {channel_id!r}")
        stored = dict(record)
        stored["turn_id"] = turn_id = self.ids.new_id()
        await self.store.put_turn(stored)
        if self._tracer is not None:  # a network.turn span (ag2net.hub.telemetry)
            await self._call_hook(self._tracer, self._tracer.turn_recorded, "turn_recorded", (self, stored))
        self.observe_log.append(
            "turn",
            channel_id=channel_id,
            payload={
                "turn_id": turn_id,
                "agent_id": agent_id,
                "trigger_envelope_id": stored.get("trigger_envelope_id"),
            },
        )
        return turn_id

    async def list_turns(
        self,
        *,
        channel_id: str | None = None,
        agent_id: str | None = None,
        trigger_envelope_id: str | None = None,
        limit: int = 50,
        agent_ids: set[str] | frozenset[str] | list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Turn records, newest first; ``agent_ids`` keeps only those agents' records (callers' own)."""
        return await self.store.list_turns(
            channel_id=channel_id,
            agent_id=agent_id,
            trigger_envelope_id=trigger_envelope_id,
            limit=limit,
            agent_ids=agent_ids,
        )

    # ------------------------------------------------------------------ knowledge

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        self._record(agent_id)
        return await self.store.add_knowledge(agent_id, text, source=source)

    async def search_knowledge(self, agent_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        return await self.store.search_knowledge(agent_id, query, limit)

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        """An in-memory snapshot: ag2's keys (``active_channels`` … ``telemetry_log_bytes``) and ours.

        ``audit_log_bytes`` is the audit log's ``bytes_written`` (the records this process wrote, one JSON
        line each; it starts at 0 on every open, like ag2's); ``registered_listeners`` counts the audit log
        as ag2 does (it is listener #0 there); ``telemetry_log_bytes`` sums ``bytes_written`` of listeners that
        are telemetry listeners (they have ``channel_span_context``), 0 when there are none."""
        pending = [len(v) for v in self.inboxes.unacked.values()]
        telemetry = 0
        for listener in self._listeners:
            written = getattr(listener, "bytes_written", None)
            if hasattr(listener, "channel_span_context") and isinstance(written, int):
                telemetry += written
        return {
            "active_channels": sum(1 for md in self.channels.values() if not md.is_terminal()),
            "channels": len(self.channels),
            "registered_agents": len(self.agents),
            "pending_inbox_total": sum(pending),
            "max_pending_inbox_depth": max(pending) if pending else None,
            "registered_listeners": len(self._listeners) + 1,
            "adapters_loaded": len(self.channel_table.adapters),
            "audit_log_bytes": getattr(self._audit_log, "bytes_written", 0),
            "telemetry_log_bytes": telemetry,
            "envelopes": sum(self.channel_table.wal_counts.values()),
            "observe_position": self.observe_log.position,
            "wal_cache": self._wal_cache.stats(),
            "observe_buffer_bytes": self.observe_log.nbytes,
            "store": type(self.store).__name__,
            "durable": bool(getattr(self.store, "durable", False)),
        }

    # ------------------------------------------------------------------ ops (transport seam)

    async def handle_op(self, endpoint: Any, op: str, params: dict[str, Any]) -> Any:
        from ag2net.hub.ops import run_op

        if self._closed:
            raise NetworkError("the hub is closed; reopen it with Hub.open(...)")

        return await run_op(self, endpoint, op, params)

    def local_link(self) -> LocalLink:
        """An in-process link to this hub: ``HubClient(hub.local_link())`` (what ``HubClient.local`` does)."""
        return LocalLink(self)


__all__ = ["AgentRecord", "Hub", "PendingTurn"]

"""Shell: ``Hub``, the network's centre — builds the components and is the public API over them.

One ``Hub`` owns one ``Store``. Its state lives in components, each reached by name: ``identities``
(who is registered), ``channels`` (the channel table and lifecycle), ``admission`` (``post_envelope``),
``delivery`` (connections, mailboxes, receipts), ``tasks``, ``expectations``, ``sweepers``, ``logs``
(the cached WALs), ``audit``, ``listeners``, ``arbitration``, ``hydration``; ``core`` holds the tables the
pure decisions read (``ag2net.hub.core``). Every admitted envelope is committed to the store before
``post_envelope`` returns, folded into its channel's adapter state, then pushed to each recipient's
priority mailbox and to the observe stream. The hub never calls an LLM.

The methods below are ag2's ``Hub`` surface (reference §3) and ag2net's own; each says which component
does the work.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

from ag2net.adapters import default_adapters
from ag2net.breakpoints import APPROVAL, DEFAULT_MAX_HELD_PER_CHANNEL, Breakpoint, Decision, WaitingItem
from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError
from ag2net.hub.admission import Admission
from ag2net.hub.arbiter import Arbitration, HubArbiter
from ag2net.hub.audit import Audit
from ag2net.hub.auth import AuthRegistry
from ag2net.hub.checkpoints import read_checkpoint, write_checkpoint
from ag2net.hub.core import HubCore, required
from ag2net.hub.delivery import Delivery
from ag2net.hub.dispatch import Background
from ag2net.hub.expectations import default_evaluators
from ag2net.hub.forward import forward, named_forwards
from ag2net.hub.hydrate import Hydration
from ag2net.hub.lifecycle import Channels
from ag2net.hub.listeners import BaseHubListener, Listeners
from ag2net.hub.local import LocalLink
from ag2net.hub.logs import ChannelLogs
from ag2net.hub.observe import ObservedEvent, ObserveLog
from ag2net.hub.ops import run_op
from ag2net.hub.records import SNAPSHOT_KEY, AgentRecord, PendingTurn, default_handlers
from ag2net.hub.registry import Identities
from ag2net.hub.remote import RemoteAgentProxy
from ag2net.hub.services import Services
from ag2net.hub.sweeps import Expectations, Sweepers
from ag2net.hub.task_table import Tasks
from ag2net.hub.turns import Turns
from ag2net.hub.waiting import Stepping
from ag2net.hub.wal_cache import DEFAULT_CACHE_MB, DEFAULT_WINDOW, WalCache
from ag2net.identity import Passport, Resume, Rule
from ag2net.ids import IdMint, IdSource, utc_now
from ag2net.store import Store, open_store
from ag2net.tasks import TaskMetadata

log = logging.getLogger(__name__)


@named_forwards
class Hub(BaseHubListener):
    """The network's centre. Open with ``await Hub.open(path_or_store)`` or ``async with``.

    Its ``on_*`` methods are ag2's hub hooks: a subclass overriding one hears that event before every
    registered listener (``hub.listeners``).
    """

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
        max_held_per_channel: int = DEFAULT_MAX_HELD_PER_CHANNEL,
        trace_content: bool | None = None,
    ) -> None:
        store = open_store(store)
        clock = clock or utc_now
        ids = ids if ids is not None else IdMint()
        self.store: Store = store
        self.clock = clock
        self.ids: IdSource = ids
        self.ttl_sweep_interval = ttl_sweep_interval
        self.expectation_sweep_interval = expectation_sweep_interval
        self.allow_remote_agent_registration = allow_remote_agent_registration
        # the observe stream and the WAL cache share ``cache_mb`` (the stream a quarter of it)
        self.observe_log = observe = ObserveLog(observe_buffer, max_bytes=int(cache_mb * (1 << 20)) // 4)
        self.listeners = listeners = Listeners(self, tracer_provider, trace_content)
        self.audit = audit = Audit(store, clock, observe)
        self.services = Services(store, clock, ids, audit=audit, listeners=listeners, observe_log=observe)
        self.background = Background()
        self._build(
            auth or AuthRegistry.default(),
            invite_ack_timeout,
            WalCache(store, cache_mb=cache_mb, window=wal_window),
        )
        self.hydration = Hydration(self.services, self.core, self.logs, progress)
        self._build_stepping(max_held_per_channel)
        self._owned_clients: list[Any] = []  # HubClients made by ``register``, closed with the hub
        # ``hub.channels.adapters``, for ``ag2net.hub.local.LocalHub`` until it reads the component
        self._adapters: dict[tuple[str, int], Any] = self.channels.adapters
        self._closed = False
        self._started = False

    def _build(self, auth: AuthRegistry, invite_ack_timeout: float, cache: WalCache) -> None:
        """The components, each given the ones it uses (the tables first: most components read them)."""
        services = self.services
        self.identities = identities = Identities(services, auth)
        self.channels = channels = Channels(services, invite_ack_timeout)
        self.logs = logs = ChannelLogs(services, cache, channels=channels, locks=channels.locks)
        self.tasks = tasks = Tasks(services, identities)
        self.delivery = delivery = Delivery(
            services, identities=identities, channels=channels, background=self.background, read_wal=logs.read
        )
        self.core = core = HubCore(identities, channels, delivery, tasks)
        self.arbitration = arbitration = Arbitration(core, identities)
        self.expectations = expectations = Expectations(services, self, channels=channels, load_wal=logs.load)
        self.sweepers = Sweepers()
        self.turns = Turns(services, self, identities=identities, channels=channels, logs=logs)
        self.admission = Admission(
            services,
            core,
            channels=channels,
            arbitration=arbitration,
            delivery=delivery,
            logs=logs,
        )
        channels.connect(
            identities=identities,
            arbitration=arbitration,
            delivery=delivery,
            tasks=tasks,
            expectations=expectations,
            logs=logs,
            post=self.post_envelope,
        )

    @property
    def auth(self) -> AuthRegistry:
        """The auth registry registrations and re-attaches are validated against (``hub.identities``)."""
        return self.identities.auth

    @auth.setter
    def auth(self, registry: AuthRegistry) -> None:
        self.identities.auth = registry

    @property
    def invite_ack_timeout(self) -> float:
        """Seconds ``create_channel`` waits for every invitee's ack (``hub.channels``)."""
        return self.channels.invite_ack_timeout

    @invite_ack_timeout.setter
    def invite_ack_timeout(self, seconds: float) -> None:
        self.channels.invite_ack_timeout = seconds

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
        (``cache_mb``, ``wal_window``, ``observe_buffer``, ``progress``, ``ids``: an :class:`~ag2net.ids.IdSource`,
        ``max_held_per_channel``, ``trace_content``: whether the GenAI spans carry message content)."""
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
            for handler in default_handlers():
                hub.register_violation_handler(handler)
        await hub.store.open()
        await hub.hydrate()
        await hub.start()
        return hub

    async def __aenter__(self) -> Hub:
        if not self._started:
            await self.store.open()
            if not self.channels.adapters:
                for adapter in default_adapters():
                    self.register_adapter(adapter)
            await self.hydrate()
            await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def hydrate(self) -> None:
        """Rebuild every in-memory cache from the store (``hub.hydration``; idempotent); opens the store if
        it is not open, so ``Hub(store)`` then ``await hub.hydrate()`` works as in ag2."""
        if self._closed:
            raise NetworkError("the hub is closed; reopen it with Hub.open(...)")
        await self.hydration.load()

    async def start(self) -> None:
        """Start the interval sweepers (TTL expiry, expectations); idempotent."""
        if self._started:
            return
        await self.breakpoints.load()
        self._started = True
        if self.ttl_sweep_interval > 0:
            self.register_sweeper("ttl", self.ttl_sweep_interval, self.expire_due)
        if self.expectation_sweep_interval > 0:
            self.register_sweeper("expectations", self.expectation_sweep_interval, self.tick_expectations)

    register_sweeper = forward("sweepers", Sweepers.register)
    unregister_sweeper = forward("sweepers", Sweepers.unregister)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = self.background.closed = True
        self.stepping.stop()  # held posts fail (not admitted), paused turns and approvals end
        await self.sweepers.stop_all()
        for client in list(self._owned_clients):
            with contextlib.suppress(Exception):
                await client.close()
        for mailbox in list(self.delivery.mailboxes.values()):
            await mailbox.stop()
        self.background.cancel_all()
        for waiter in self.channels.open_waiters.values():
            if not waiter.done():
                waiter.cancel()
        self.observe_log.close()
        await self.delivery.flush_cursors()
        try:
            await self.store.set_meta(SNAPSHOT_KEY, self.hydration.snapshot())
        except Exception:
            log.exception("could not write the hydrate snapshot; the next open folds every WAL")
        await self.store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # ------------------------------------------------------------------ what the hub knows of (registries)

    def register_adapter(self, adapter: Any) -> None:
        self.channels.adapters[(adapter.manifest.type, adapter.manifest.version)] = adapter

    def adapter_types(self) -> list[str]:
        return sorted({t for t, _ in self.channels.adapters})

    def get_adapter(self, manifest_type: str, version: int = 1) -> Any:
        missing = f"no adapter registered for {manifest_type!r}@v{version}"
        return required(self.channels.adapters, (manifest_type, version), missing)

    def adapter_for(self, channel_id: str) -> Any:
        return self.channels.adapter_required(self.channels.metadata(channel_id))

    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any:
        return self.channels.adapter_required(metadata)

    def adapter_state(self, channel_id: str) -> Any:
        return self.channels.states.get(channel_id)

    def register_expectation_evaluator(self, evaluator: Any) -> None:
        self.expectations.evaluators[evaluator.name] = evaluator

    def register_violation_handler(self, handler: Any) -> None:
        self.expectations.handlers[handler.name] = handler

    register_arbiter = forward("arbitration", Arbitration.register)

    @property
    def arbiter(self) -> HubArbiter:
        """The active arbiter (a ``RuleBasedArbiter`` until another is registered)."""
        return self.arbitration.current

    register_listener = forward("listeners", Listeners.add)
    unregister_listener = forward("listeners", Listeners.remove)

    @property
    def audit_log(self) -> Any:
        """The audit log every audit record of this hub goes through (``read_all``, ``subscribe``)."""
        return self.audit.log

    replace_audit_log = forward("audit", Audit.replace)

    @property
    def tracing(self) -> bool:
        """Whether this hub emits OpenTelemetry spans (it was given a ``tracer_provider``)."""
        return self.listeners.tracer is not None

    def register_remote_proxy(self, proxy: RemoteAgentProxy) -> None:
        """Route deliveries to ``remote_agent`` participants whose ``auth.scheme`` is ``proxy.scheme``
        through ``proxy`` (``hub.delivery.remote``); a later one at the same scheme replaces it."""
        self.delivery.remote.register(proxy)

    def unregister_remote_proxy(self, scheme: str) -> RemoteAgentProxy | None:
        """Remove and return the proxy of ``scheme`` (None if none); the hub does not close it."""
        return self.delivery.remote.unregister(scheme)

    def remote_proxy_for(self, scheme: str) -> RemoteAgentProxy | None:
        return self.delivery.remote.by_scheme.get(scheme)

    @property
    def auth_schemes(self) -> list[str]:
        """The auth schemes this hub accepts at registration and re-attach."""
        return list(self.auth.schemes())

    # ------------------------------------------------------------------ identities (``hub.identities``)

    register_identity = forward("identities", Identities.register_identity)

    async def register(
        self,
        agent: Any,
        passport: Passport | None = None,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        rule: Rule | None = None,
        attach_plugin: bool = True,
        link: Any = None,
        **kw: Any,
    ):
        """Register ``agent`` on a dedicated ``HubClient`` (in-process, or on ``link``); returns its
        ``AgentClient``. ``kw`` are ag2net's own ``HubClient.register`` options."""
        from ag2net.client.hub_client import HubClient

        client = HubClient(link, hub=self) if link is not None else HubClient.local(self)
        try:
            agent_client = await client.register(
                agent, passport, resume, skill_md=skill_md, rule=rule, attach_plugin=attach_plugin, **kw
            )
        except BaseException:
            await client.close()
            raise
        agent_client._owns_connection = True
        self._owned_clients.append(client)
        return agent_client

    async def unregister(self, agent_id: str) -> None:
        """The identity leaves the store and memory, then its deliveries go, then it is announced."""
        name = await self.identities.remove(agent_id)
        await self.delivery.forget(agent_id)
        await self.identities.announce_removed(agent_id, name)

    set_identity_secret = forward("identities", Identities.set_identity_secret)
    name_for = forward("identities", Identities.name_for)
    names_for = forward("identities", Identities.names_for)
    find_agent_id = forward("identities", Identities.find_agent_id)

    def name_to_id_map(self) -> dict[str, str]:
        return dict(self.identities.names)

    lookup_agent = forward("identities", Identities.lookup_agent)
    get_agent = forward(
        "identities",
        Identities.lookup_agent,
        awaitable=True,
        doc="The passport of an agent id (exact id wins) or name; ``NotFoundError`` when unknown.",
    )
    lookup_resume = forward("identities", Identities.lookup_resume)
    get_resume = forward("identities", Identities.lookup_resume, awaitable=True)
    get_rule = forward("identities", Identities.lookup_rule, awaitable=True)
    get_skill_info = forward("identities", Identities.get_skill_info)
    get_skill = forward("identities", Identities.skill, awaitable=True)
    list_agents = forward(
        "identities",
        Identities.query_agents,
        awaitable=True,
        doc="Registered passports, filtered (the awaitable form of ``query_agents``).",
    )

    def query_agents(self, **filters: Any) -> list[Passport]:
        """Registered passports, filtered; ``query`` matches name or resume summary (case-insensitive)."""
        return self.identities.query_agents(**filters)

    agents_with_capability = forward("identities", Identities.agents_with_capability)
    set_resume = forward("identities", Identities.set_resume)
    set_skill = forward("identities", Identities.set_skill)
    set_rule = forward("identities", Identities.set_rule)
    record_observation = forward("identities", Identities.record_observation)

    # ------------------------------------------------------------------ channels (``hub.channels``)

    lookup_channel = forward("channels", Channels.metadata)
    get_channel = forward(
        "channels",
        Channels.metadata,
        awaitable=True,
        doc='The channel\'s metadata (``NotFoundError("channel not found: ...")`` when unknown).',
    )
    query_channels = forward(
        "channels",
        Channels.query,
        doc="Channels in creation order, filtered (synchronous; ``list_channels`` is the awaitable form).",
    )

    async def list_channels(
        self,
        *,
        agent_id: str | None = None,
        state: ChannelState | str | None = None,
        limit: int | None = 50,
        include_terminal: bool = True,
    ) -> list[ChannelMetadata]:
        """Channels, filtered by participant and state, as ag2's ``Hub.list_channels`` (terminal ones
        included unless ``include_terminal=False``)."""
        return self.channels.query(
            agent_id=agent_id, state=state, include_terminal=include_terminal, limit=limit
        )

    channel_stats = forward("channels", Channels.stats)
    default_view_policy = forward("channels", Channels.default_view_policy)
    create_channel = forward("channels", Channels.create)
    close_channel = forward(
        "channels",
        Channels.close,
        doc="""Close a channel (no-op on a terminal one). Unknown id → ``NotFoundError`` (SPEC §3.19).

        ``Channels.close``: holding the channel's lock, open tasks expire (``hub.tasks``), the close
        envelope is appended (``hub.logs``) and the row written (store), the state folds, recipients get
        it (``hub.delivery``, asking ``hub.arbitration``), then observe, ``hub.audit`` and ``hub.listeners``.
        """,
    )
    expire_due = forward("channels", Channels.expire_due)
    tick_expectations = forward("expectations", Expectations.tick)

    # ------------------------------------------------------------------ admission (``hub.admission``)

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``.

        Not a forward of ``Admission.post``: its ``bypass`` (a breakpoint's release) is the hub's own."""
        return await self.admission.post(envelope)

    def can_send(self, channel_id: str, sender_id: str, *, event_type: str | None = None) -> bool:
        """Whether ``sender_id`` may send a substantive envelope on the channel now (synchronous, as in ag2)."""
        return self.admission.why_not_send(channel_id, sender_id, event_type=event_type)[0]

    explain_send = forward(
        "admission",
        Admission.why_not_send,
        awaitable=True,
        doc="Whether ``sender_id`` may send now, and if not, one sentence saying why.",
    )

    # ------------------------------------------------------------------ delivery (``hub.delivery``)

    attach_endpoint = forward("delivery", Delivery.attach)
    detach_endpoint = forward("delivery", Delivery.detach)
    bind_endpoint = forward("delivery", Delivery.bind)
    unbind_endpoint = forward("delivery", Delivery.unbind)
    presence = forward("delivery", Delivery.presence)

    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None:
        """A client acknowledged (or refused) one delivery (``Delivery.handle_receipt``).

        Written out rather than forwarded: it runs once per delivery, and a forward's lookup and
        argument packing cost as much as the receipt itself."""
        self.delivery.handle_receipt(endpoint, envelope_id, status, recipient_id, channel_id, reason)

    def _receipt_handler(self) -> Callable[..., None]:
        """What ``handle_receipt`` runs, for the in-process link's one receipt per delivery (``LocalLinkClient.
        receipt_handler``): the delivery book's own, one call fewer, unless a subclass overrides it."""
        if type(self).handle_receipt is Hub.handle_receipt:
            return self.delivery.handle_receipt
        return self.handle_receipt

    replay = forward("delivery", Delivery.replay)
    inbox_cursor = forward("delivery", Delivery.cursor)
    pending_inbox = forward("delivery", Delivery.pending)

    # ------------------------------------------------------------------ WAL reads (``hub.logs``)

    read_wal = forward("logs", ChannelLogs.read)
    read_wal_seq = forward("logs", ChannelLogs.read_seq)

    def wal_count(self, channel_id: str) -> int:
        return self.channels.wal_counts.get(channel_id, 0)

    read_wal_until = forward("logs", ChannelLogs.read_until)
    find_envelope_by_causation = forward("logs", ChannelLogs.find_by_causation)
    find_envelope = forward("logs", ChannelLogs.find)

    # ------------------------------------------------------------------ tasks (``hub.tasks``)

    observe_task = forward("tasks", Tasks.observe)
    update_task = forward("tasks", Tasks.update)
    get_task = forward(
        "tasks",
        Tasks.lookup,
        awaitable=True,
        doc='The task\'s metadata (``NotFoundError("task not found: ...")`` when unknown).',
    )
    lookup_task = forward("tasks", Tasks.lookup)
    list_tasks = forward(
        "tasks",
        Tasks.query,
        awaitable=True,
        doc="Tasks by owner, channel and state (the awaitable form of ``query_tasks``).",
    )

    def query_tasks(self, **filters: Any) -> list[TaskMetadata]:
        return self.tasks.query(**filters)

    fire_task_event = forward("tasks", Tasks.fire_event)

    async def checkpoint_task(self, task_id: str, state: dict[str, object]) -> None:
        """Persist ``state`` as the resume snapshot of ``task_id``; the last write wins, no history."""
        await write_checkpoint(self, task_id, state)

    async def read_task_checkpoint(self, task_id: str) -> dict[str, object] | None:
        """The snapshot last passed to ``checkpoint_task`` for ``task_id``, or None."""
        return await read_checkpoint(self, task_id)

    # ------------------------------------------------------------------ observe

    def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Every admitted envelope, lifecycle event and audit record after position ``since``."""
        return self.observe_log.follow(since)

    @property
    def observe_position(self) -> int:
        return self.observe_log.position

    # ------------------------------------------------------------------ turns

    pending_turns_for = forward("turns", Turns.pending_for)

    async def report_turn_failure(
        self,
        *,
        channel_id: str,
        agent_id: str,
        envelope_id: str,
        exc: BaseException | str,
        exc_type: str | None = None,
    ) -> None:
        """Audit a failed turn and give every listener's ``on_turn_failed`` the exception (``hub.turns``)."""
        await self.turns.report_failure(channel_id, agent_id, envelope_id, exc, exc_type)

    record_turn = forward("turns", Turns.record)
    list_turns = forward(
        "store",
        Store.list_turns,
        doc="Turn records, newest first; ``agent_ids`` keeps only those agents' records (callers' own).",
    )

    # ------------------------------------------------------------------ knowledge

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        self.identities.record(agent_id)
        return await self.store.add_knowledge(agent_id, text, source=source)

    search_knowledge = forward("store", Store.search_knowledge)

    # ------------------------------------------------------------------ health

    def health(self) -> dict[str, Any]:
        """An in-memory snapshot: ag2's keys (``active_channels`` … ``telemetry_log_bytes``) and ours.

        ``audit_log_bytes`` is the audit log's ``bytes_written`` (the records this process wrote, one JSON
        line each; it starts at 0 on every open, like ag2's); ``registered_listeners`` counts the audit log
        as ag2 does (it is listener #0 there); ``telemetry_log_bytes`` sums ``bytes_written`` of listeners that
        are telemetry listeners (they have ``channel_span_context``), 0 when there are none."""
        pending = [len(v) for v in self.delivery.unacked.values()]
        registered = self.listeners.registered
        telemetry = 0
        for listener in registered:
            written = getattr(listener, "bytes_written", None)
            if hasattr(listener, "channel_span_context") and isinstance(written, int):
                telemetry += written
        channels = self.channels
        return {
            "active_channels": sum(1 for md in channels.values() if not md.is_terminal()),
            "channels": len(channels),
            "registered_agents": len(self.identities.agents),
            "pending_inbox_total": sum(pending),
            "max_pending_inbox_depth": max(pending) if pending else None,
            "registered_listeners": len(registered) + 1,
            "adapters_loaded": len(channels.adapters),
            "audit_log_bytes": getattr(self.audit.log, "bytes_written", 0),
            "telemetry_log_bytes": telemetry,
            "envelopes": sum(channels.wal_counts.values()),
            "observe_position": self.observe_log.position,
            "wal_cache": self.logs.cache.stats(),
            "observe_buffer_bytes": self.observe_log.nbytes,
            "store": type(self.store).__name__,
            "durable": bool(getattr(self.store, "durable", False)),
        }

    # ------------------------------------------------------------------ ops (transport seam)

    def handle_op(self, endpoint: Any, op: str, params: dict[str, Any]) -> Coroutine[Any, Any, Any]:
        """Run op ``op`` for ``endpoint`` (awaited: ``run_op``'s coroutine itself, no frame of its own
        around it, since every op of every connection comes this way)."""
        if self._closed:
            return _closed_hub()
        return run_op(self, endpoint, op, params)

    def local_link(self) -> LocalLink:
        """An in-process link to this hub: ``HubClient(hub.local_link())`` (what ``HubClient.local`` does)."""
        return LocalLink(self)

    # ------------------------------------------------------------------ stepping in (docs/breakpoints.md)

    def _build_stepping(self, max_held_per_channel: int) -> None:
        """``hub.breakpoints`` (the table, step mode), ``hub.waiting`` (the inbox), ``hub.stepping`` (holding)."""
        self.stepping = Stepping.build(self, max_held_per_channel)
        self.breakpoints, self.waiting = self.stepping.breakpoints, self.stepping.waiting

    async def break_on(
        self, query: str, *, on: str = "envelope", enabled: bool = True, by: str = ""
    ) -> Breakpoint:
        """Set a breakpoint (``hub.breakpoints``): hold matching posts, or pause matching turns."""
        return await self.breakpoints.add(query, on=on, enabled=enabled, by=by)

    async def list_breakpoints(self) -> list[Breakpoint]:
        return list(self.breakpoints.table.values())

    async def set_breakpoint(self, breakpoint_id: str, enabled: bool) -> Breakpoint:
        return await self.breakpoints.set_enabled(breakpoint_id, enabled)

    async def remove_breakpoint(self, breakpoint_id: str) -> None:
        await self.breakpoints.remove(breakpoint_id)

    async def step_mode(self, channel_id: str | None = None, on: bool = True) -> dict[str, Any]:
        """Hold every substantive post of the channel (``None``: of the network) until released."""
        return {"step": await self.breakpoints.set_step(channel_id, on)}

    async def pause_expectations(self, channel_id: str, paused: bool = True) -> dict[str, Any]:
        """Pause (or resume) the channel's expectation clock; its deadlines shift by the time paused."""
        return self.stepping.pause_expectations(channel_id, paused)

    async def list_waiting(self, *, channel_id: str | None = None) -> list[WaitingItem]:
        return [self.stepping.refreshed(i) for i in self.waiting.listed(channel_id)]

    async def answer_waiting(self, item_id: str, action: str, **answer: Any) -> WaitingItem:
        """Answer one waiting item exactly once (``hub.stepping``); ``answer`` holds ``Decision``'s fields."""
        return await self.stepping.answer(item_id, action, answer)

    async def turn_gate(self, agent_id: str, channel_id: str, trigger_envelope_id: str = "") -> bool:
        """Whether a turn breakpoint pauses this agent's turn in the channel now (a dict lookup when none)."""
        return self.breakpoints.match_turn(agent_id, channel_id) is not None

    async def pause_turn(
        self, agent_id: str, channel_id: str, request: dict[str, Any], *, trigger_envelope_id: str = ""
    ) -> Decision:
        """Wait, before the agent's model call, for a person to decide this turn."""
        return await self.stepping.pause_turn(agent_id, channel_id, request, trigger_envelope_id)

    async def request_approval(
        self, agent_id: str, channel_id: str, tool: str, arguments: dict[str, Any], **why: str
    ) -> Decision:
        """Wait for a person to approve, deny or edit a tool call (``why``: ``reason``, ``call_id``)."""
        detail = {"tool": tool, "arguments": arguments, "reason": "", "call_id": "", **why}
        return await self.stepping.wait_for(APPROVAL, agent_id, channel_id, detail)


async def _closed_hub() -> Any:
    raise NetworkError("the hub is closed; reopen it with Hub.open(...)")


__all__ = ["SNAPSHOT_KEY", "AgentRecord", "Hub", "PendingTurn"]

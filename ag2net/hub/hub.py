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
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from ag2net.adapters import default_adapters
from ag2net.breakpoints import APPROVAL, DEFAULT_MAX_HELD_PER_CHANNEL, Breakpoint, Decision, WaitingItem
from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError, NotFoundError
from ag2net.hub.admission import Admission
from ag2net.hub.arbiter import Arbitration, HubArbiter
from ag2net.hub.audit import Audit
from ag2net.hub.auth import AuthRegistry
from ag2net.hub.checkpoints import read_checkpoint, write_checkpoint
from ag2net.hub.core import HubCore
from ag2net.hub.delivery import Delivery
from ag2net.hub.dispatch import Background
from ag2net.hub.expectations import default_evaluators
from ag2net.hub.hydrate import Hydration
from ag2net.hub.lifecycle import Channels
from ag2net.hub.listeners import BaseHubListener, Listeners
from ag2net.hub.local import LocalLink
from ag2net.hub.logs import ChannelLogs
from ag2net.hub.observe import ObservedEvent, ObserveLog
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
from ag2net.tasks import TaskMetadata, TaskState
from ag2net.views.wal import WalSlice

log = logging.getLogger(__name__)


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
        self.listeners = listeners = Listeners(self, tracer_provider)
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

    def register_sweeper(self, name: str, interval_seconds: float, fn: Callable[[], Any]) -> None:
        self.sweepers.register(name, interval_seconds, fn)

    async def unregister_sweeper(self, name: str) -> None:
        await self.sweepers.unregister(name)

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
        adapter = self.channels.adapters.get((manifest_type, version))
        if adapter is None:
            raise NotFoundError(f"no adapter registered for {manifest_type!r}@v{version}")
        return adapter

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

    def register_arbiter(self, arbiter: HubArbiter) -> None:
        """Replace the hub's arbiter (only one is active; the latest registration wins)."""
        self.arbitration.register(arbiter)

    @property
    def arbiter(self) -> HubArbiter:
        """The active arbiter (a ``RuleBasedArbiter`` until another is registered)."""
        return self.arbitration.current

    def register_listener(self, listener: Any) -> None:
        """Add ``listener`` (a ``HubListener``; methods it lacks are skipped); events reach it in
        registration order, after the hub's own hook methods."""
        self.listeners.add(listener)

    def unregister_listener(self, listener: Any) -> None:
        """Remove ``listener``; no-op if it is not registered."""
        self.listeners.remove(listener)

    @property
    def audit_log(self) -> Any:
        """The audit log every audit record of this hub goes through (``read_all``, ``subscribe``)."""
        return self.audit.log

    def replace_audit_log(self, audit_log: Any) -> None:
        """Send this hub's audit records to ``audit_log`` (an ``AuditLog`` or anything with an async
        ``append(record)``) from now on."""
        self.audit.replace(audit_log)

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

    async def register_identity(
        self,
        passport: Passport,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        rule: Rule | None = None,
        owner_id: str | None = None,
        secret_digest: str | None = None,
    ) -> Passport:
        """Register a new identity; stamps ``passport.agent_id`` and ``created_at`` (``Identities``)."""
        return await self.identities.register_identity(
            passport, resume, skill_md=skill_md, rule=rule, owner_id=owner_id, secret_digest=secret_digest
        )

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

    async def set_identity_secret(self, agent_id: str, secret_digest: str) -> None:
        await self.identities.set_identity_secret(agent_id, secret_digest)

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        return self.identities.name_for(agent_id, default=default)

    def names_for(self, agent_ids: list[str]) -> dict[str, str]:
        return self.identities.names_for(agent_ids)

    def find_agent_id(self, name: str) -> str | None:
        return self.identities.find_agent_id(name)

    def name_to_id_map(self) -> dict[str, str]:
        return dict(self.identities.names)

    def lookup_agent(self, name_or_id: str) -> Passport:
        """The passport of an agent id or name, synchronously (``NotFoundError`` when unknown)."""
        return self.identities.lookup_agent(name_or_id)

    async def get_agent(self, name_or_id: str) -> Passport:
        """The passport of an agent id (exact id wins) or name; ``NotFoundError`` when unknown."""
        return self.identities.lookup_agent(name_or_id)

    def lookup_resume(self, agent_id: str) -> Resume:
        return self.identities.lookup_resume(agent_id)

    async def get_resume(self, agent_id: str) -> Resume:
        return self.identities.lookup_resume(agent_id)

    async def get_rule(self, agent_id: str) -> Rule:
        return self.identities.lookup_rule(agent_id)

    def get_skill_info(self, agent_id: str) -> dict[str, Any]:
        """The stored skill, or the generated fallback (SPEC §3.5) with ``generated=True``."""
        return self.identities.get_skill_info(agent_id)

    async def get_skill(self, agent_id: str) -> str | None:
        return self.identities.skill(agent_id)

    async def list_agents(
        self,
        *,
        capability: str | None = None,
        query: str | None = None,
        kind: str | None = None,
        sort_by: str | None = None,
        limit: int | None = 50,
    ) -> list[Passport]:
        """Registered passports, filtered (the awaitable form of ``query_agents``)."""
        return self.identities.query_agents(
            capability=capability, query=query, kind=kind, sort_by=sort_by, limit=limit
        )

    def query_agents(self, **filters: Any) -> list[Passport]:
        """Registered passports, filtered; ``query`` matches name or resume summary (case-insensitive)."""
        return self.identities.query_agents(**filters)

    def agents_with_capability(self, capability: str) -> list[str]:
        return self.identities.agents_with_capability(capability)

    async def set_resume(self, agent_id: str, resume: Resume) -> Resume:
        return await self.identities.set_resume(agent_id, resume)

    async def set_skill(self, agent_id: str, skill_md: str | None) -> None:
        """Replace (or with ``None`` remove) an agent's skill; audited like ``set_resume`` (SPEC §3.7)."""
        await self.identities.set_skill(agent_id, skill_md)

    async def set_rule(self, agent_id: str, rule: Rule) -> Rule:
        return await self.identities.set_rule(agent_id, rule)

    async def record_observation(
        self,
        *,
        owner_id: str,
        capability: str,
        outcome: TaskState | str,
        latency_ms: float | None = None,
        task_id: str | None = None,
    ) -> None:
        await self.identities.record_observation(
            owner_id=owner_id, capability=capability, outcome=outcome, latency_ms=latency_ms, task_id=task_id
        )

    # ------------------------------------------------------------------ channels (``hub.channels``)

    def lookup_channel(self, channel_id: str) -> ChannelMetadata:
        """The channel's metadata, synchronously (``NotFoundError`` when unknown)."""
        return self.channels.metadata(channel_id)

    async def get_channel(self, channel_id: str) -> ChannelMetadata:
        """The channel's metadata (``NotFoundError("channel not found: ...")`` when unknown)."""
        return self.channels.metadata(channel_id)

    def query_channels(
        self,
        *,
        agent_id: str | None = None,
        state: ChannelState | str | None = None,
        include_terminal: bool = True,
        limit: int | None = 50,
    ) -> list[ChannelMetadata]:
        """Channels in creation order, filtered (synchronous; ``list_channels`` is the awaitable form)."""
        return self.channels.query(
            agent_id=agent_id, state=state, include_terminal=include_terminal, limit=limit
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

    def channel_stats(self) -> dict[str, dict[str, Any]]:
        return self.channels.stats()

    def default_view_policy(self, channel_id: str, participant_id: str) -> Any:
        """The view a participant of the channel gets by default (``NotFoundError`` for an unknown channel)."""
        return self.channels.default_view_policy(channel_id, participant_id)

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
        """Create a channel, invite every other participant and wait for their acks (``Channels.create``)."""
        return await self.channels.create(
            creator_id=creator_id,
            manifest_type=manifest_type,
            manifest_version=manifest_version,
            participants=participants,
            required_acks=required_acks,
            ttl=ttl,
            knobs=knobs,
            intent=intent,
            labels=labels,
        )

    async def close_channel(self, channel_id: str, *, reason: str = "") -> ChannelMetadata:
        """Close a channel (no-op on a terminal one). Unknown id → ``NotFoundError`` (SPEC §3.19).

        ``Channels.close``: holding the channel's lock, open tasks expire (``hub.tasks``), the close
        envelope is appended (``hub.logs``) and the row written (store), the state folds, recipients get
        it (``hub.delivery``, asking ``hub.arbitration``), then observe, ``hub.audit`` and ``hub.listeners``.
        """
        return await self.channels.close(channel_id, reason=reason)

    async def expire_due(self) -> int:
        """Expire channels and tasks whose ``expires_at`` has passed; returns how many channels expired."""
        return await self.channels.expire_due()

    async def tick_expectations(self) -> int:
        """Evaluate every active channel's expectations once; returns how many violations fired."""
        return await self.expectations.tick()

    # ------------------------------------------------------------------ admission (``hub.admission``)

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit one envelope (SPEC §4 checks + reference §3.6 order); returns its ``envelope_id``."""
        return await self.admission.post(envelope)

    def can_send(self, channel_id: str, sender_id: str, *, event_type: str | None = None) -> bool:
        """Whether ``sender_id`` may send a substantive envelope on the channel now (synchronous, as in ag2)."""
        return self.admission.why_not_send(channel_id, sender_id, event_type=event_type)[0]

    async def explain_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]:
        """Whether ``sender_id`` may send now, and if not, one sentence saying why."""
        return self.admission.why_not_send(channel_id, sender_id, event_type=event_type)

    # ------------------------------------------------------------------ delivery (``hub.delivery``)

    def attach_endpoint(self, endpoint: Any) -> None:
        self.delivery.attach(endpoint)

    async def detach_endpoint(self, endpoint: Any) -> None:
        await self.delivery.detach(endpoint)

    def bind_endpoint(self, endpoint_id: Any, agent_id: str | None) -> None:
        """Bind ``agent_id`` to an endpoint, given by the id of an attached one (as in ag2) or by the
        endpoint itself; a re-bind moves the agent to the new endpoint."""
        self.delivery.bind(endpoint_id, agent_id)

    def unbind_endpoint(self, endpoint: Any, agent_id: str) -> None:
        self.delivery.unbind(endpoint, agent_id)

    def presence(self, agent_ids: list[str] | None = None) -> dict[str, bool]:
        """``{agent_id: online}`` for every registered identity (or those of ``agent_ids``)."""
        return self.delivery.presence(agent_ids)

    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None:
        """A client acknowledged (or refused) one delivery (``Delivery.handle_receipt``)."""
        self.delivery.handle_receipt(endpoint, envelope_id, status, recipient_id, channel_id, reason)

    async def replay(self, endpoint: Any, agent_id: str, since_envelope_id: str) -> int:
        """Resend what ``agent_id`` missed in its active channels since a cursor; returns the count."""
        return await self.delivery.replay(endpoint, agent_id, since_envelope_id)

    def inbox_cursor(self, agent_id: str, channel_id: str) -> str:
        return self.delivery.cursor(agent_id, channel_id)

    def pending_inbox(self, agent_id: str) -> int:
        return self.delivery.pending(agent_id)

    # ------------------------------------------------------------------ WAL reads (``hub.logs``)

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[Envelope]:
        """The channel's envelopes in admission order, index-sliced ``[since:until]``; unknown → ``[]``."""
        return await self.logs.read(channel_id, since=since, until=until)

    async def read_wal_seq(
        self, channel_id: str, first_seq: int, last_seq: int
    ) -> list[tuple[int, Envelope]]:
        """Envelopes with ``first_seq <= seq <= last_seq`` (seq starts at 1), O(range)."""
        return await self.logs.read_seq(channel_id, first_seq, last_seq)

    def wal_count(self, channel_id: str) -> int:
        return self.channels.wal_counts.get(channel_id, 0)

    async def read_wal_until(self, channel_id: str, envelope_id: str) -> WalSlice | list[Envelope]:
        """The WAL strictly before ``envelope_id`` (the whole WAL if it is not found)."""
        return await self.logs.read_until(channel_id, envelope_id)

    async def find_envelope_by_causation(
        self, channel_id: str, *, sender_id: str, causation_id: str
    ) -> Envelope | None:
        return await self.logs.find_by_causation(channel_id, sender_id=sender_id, causation_id=causation_id)

    async def find_envelope(self, channel_id: str, envelope_id: str) -> tuple[int, Envelope] | None:
        """``(seq, envelope)`` of one envelope of the channel, or None."""
        return await self.logs.find(channel_id, envelope_id)

    # ------------------------------------------------------------------ tasks (``hub.tasks``)

    async def observe_task(self, metadata: TaskMetadata) -> TaskMetadata:
        return await self.tasks.observe(metadata)

    async def update_task(
        self,
        task_id: str,
        *,
        state: TaskState | str | None = None,
        progress: dict[str, Any] | None = None,
        result: Any = None,
        error: str | None = None,
    ) -> TaskMetadata:
        return await self.tasks.update(task_id, state=state, progress=progress, result=result, error=error)

    async def get_task(self, task_id: str) -> TaskMetadata:
        """The task's metadata (``NotFoundError("task not found: ...")`` when unknown)."""
        return self.tasks.lookup(task_id)

    def lookup_task(self, task_id: str) -> TaskMetadata:
        """The task's metadata, synchronously."""
        return self.tasks.lookup(task_id)

    async def list_tasks(
        self,
        *,
        agent_id: str | None = None,
        channel_id: str | None = None,
        state: TaskState | str | None = None,
        limit: int | None = 50,
    ) -> list[TaskMetadata]:
        """Tasks by owner, channel and state (the awaitable form of ``query_tasks``)."""
        return self.tasks.query(agent_id=agent_id, channel_id=channel_id, state=state, limit=limit)

    def query_tasks(self, **filters: Any) -> list[TaskMetadata]:
        return self.tasks.query(**filters)

    async def fire_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None:
        await self.tasks.fire_event(task_id, kind, payload)

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

    async def pending_turns_for(self, agent_id: str) -> list[PendingTurn]:
        """The turns the adapters expect of ``agent_id`` now; ``expected_at`` is the trigger's time."""
        return await self.turns.pending_for(agent_id)

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

    async def record_turn(self, record: dict[str, Any]) -> str:
        """Store one turn record under a fresh, hub-assigned ``turn_id`` and return that id."""
        return await self.turns.record(record)

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
        self.identities.record(agent_id)
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

    async def handle_op(self, endpoint: Any, op: str, params: dict[str, Any]) -> Any:
        from ag2net.hub.ops import run_op

        if self._closed:
            raise NetworkError("the hub is closed; reopen it with Hub.open(...)")

        return await run_op(self, endpoint, op, params)

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


__all__ = ["SNAPSHOT_KEY", "AgentRecord", "Hub", "PendingTurn"]

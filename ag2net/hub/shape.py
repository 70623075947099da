"""What the ``Hub``'s parts may rely on of each other: the type checker's view of one ``Hub``.

Only imported under ``TYPE_CHECKING`` (at run time each part's base is ``object``): every attribute
``Hub.__init__`` makes and every method one part calls on another is declared here, so a checker can
verify each part against the whole without a run-time base class.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ag2net.channel import ChannelManifest, ChannelMetadata, ChannelState
from ag2net.envelope import Envelope
from ag2net.hub.audit import AuditLog
from ag2net.hub.auth import AuthRegistry
from ag2net.hub.core import ChannelTable, DeliveryBook, HubCore, IdentityTable, TaskBook
from ag2net.hub.dispatch import Mailbox
from ag2net.hub.gate import ChannelGates
from ag2net.hub.observe import ObserveLog
from ag2net.hub.records import AgentRecord
from ag2net.hub.telemetry import EnvelopeTracer
from ag2net.hub.wal_cache import WalCache
from ag2net.ids import IdSource
from ag2net.store import Store
from ag2net.tasks import TaskMetadata, TaskState
from ag2net.views.wal import WalLog


class HubShape:
    # the components (ag2net.hub.core) and the aliases of their fields the parts use
    core: HubCore
    identities: IdentityTable
    channel_table: ChannelTable
    inboxes: DeliveryBook
    task_book: TaskBook
    agents: dict[str, AgentRecord]
    _names: dict[str, str]
    _reserved_names: set[str]
    channels: dict[str, ChannelMetadata]
    _states: dict[str, Any]
    _adapters: dict[tuple[str, int], Any]
    _wal_counts: dict[str, int]
    _last_activity: dict[str, str]
    _endpoints: dict[str, Any]
    _bindings: dict[str, Any]
    _mailboxes: dict[str, Mailbox]
    _unacked: dict[str, set[str]]
    _pressure_fired: set[str]
    _cursors: dict[str, dict[str, str]]
    _dirty_cursors: set[tuple[str, str]]
    _tasks: dict[str, TaskMetadata]
    _observed_outcomes: set[tuple[str, str]]
    _peer_cancellers: dict[str, set[str]]

    # the shell's own state
    store: Store
    auth: AuthRegistry
    clock: Callable[[], str]
    invite_ack_timeout: float
    allow_remote_agent_registration: bool
    observe_log: ObserveLog
    ids: IdSource
    _wal_cache: WalCache
    _gates: ChannelGates
    _append_group: Callable[[str, list[tuple[str, str]]], Awaitable[list[int]]] | None
    _evaluators: dict[str, Any]
    _violation_handlers: dict[str, Any]
    _fired: dict[str, set[tuple[int, str, str]]]
    _open_waiters: dict[str, asyncio.Future[ChannelMetadata]]
    _cursor_flush: asyncio.TimerHandle | None
    _agent_locks: dict[str, asyncio.Lock]
    _sweepers: dict[str, asyncio.Task[None]]
    _background: set[asyncio.Task[Any]]
    _owned_clients: list[Any]
    _remote_proxies: dict[str, Any]
    _closed: bool
    _started: bool
    _listeners: list[Any]
    _own_hooks: frozenset[str]
    _audit_log: AuditLog
    _tracer: EnvelopeTracer | None
    _arbiter_custom: Any
    _dispatch_denied: set[str] | None

    # methods one part calls on another
    def _spawn(self, coro: Any) -> asyncio.Task[Any]: ...
    def _stamp(self, env: Envelope) -> None: ...
    async def _append(self, md: ChannelMetadata, env: Envelope, text: str | None = None) -> int: ...
    async def post_envelope(self, envelope: Envelope) -> str: ...
    def _record(self, agent_id: str) -> AgentRecord: ...
    def name_for(self, agent_id: str, *, default: str | None = None) -> str: ...
    def get_adapter(self, manifest_type: str, version: int = 1) -> Any: ...
    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any: ...
    def _observe_channel(
        self, channel_id: str, kind: str, metadata: ChannelMetadata, **extra: Any
    ) -> None: ...
    def _observe_agent(self, agent_id: str, kind: str, **payload: Any) -> None: ...
    async def _ensure_wal(self, channel_id: str) -> WalLog: ...
    async def read_wal(
        self, channel_id: str, *, since: int = 0, until: int | None = None
    ) -> list[Envelope]: ...
    def _dispatch(self, md: ChannelMetadata, env: Envelope) -> Any: ...
    async def _dispatch_arbitrated(self, md: ChannelMetadata, env: Envelope) -> None: ...
    async def _dispatch_failed(self, env: Envelope, recipient_id: str, exc: BaseException) -> None: ...
    def handle_receipt(
        self,
        endpoint: Any,
        envelope_id: str,
        status: str,
        recipient_id: str,
        channel_id: str,
        reason: str = "",
    ) -> None: ...
    async def _arbitrate_send(self, arbiter: Any, env: Envelope, sender: AgentRecord) -> None: ...
    async def _arbitrate_inbox(
        self, arbiter: Any, env: Envelope, recipient: AgentRecord, pending: int
    ) -> None: ...
    async def _resolve_audience(
        self, md: ChannelMetadata, env: Envelope, participants: list[str]
    ) -> None: ...
    async def _authorize_channel_open(
        self, manifest: ChannelManifest, creator: AgentRecord, invitees: list[AgentRecord], active: int
    ) -> None: ...
    async def _handshake(self, md: ChannelMetadata, env: Envelope) -> None: ...
    async def _transition(self, channel_id: str, new_state: ChannelState, reason: str) -> None: ...
    async def _fan_out(self, method: str, *args: Any) -> None: ...
    async def _call_hook(self, owner: Any, fn: Any, method: str, args: tuple[Any, ...]) -> None: ...
    async def _audit(self, kind: str, **fields: Any) -> None: ...
    async def update_task(
        self,
        task_id: str,
        *,
        state: TaskState | str | None = None,
        progress: dict[str, Any] | None = None,
        result: Any = None,
        error: str | None = None,
    ) -> TaskMetadata: ...


__all__ = ["HubShape"]

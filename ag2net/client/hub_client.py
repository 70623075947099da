"""``HubClient``: one connection to a hub, spoken through a ``Link`` by op name.

It registers agents and humans, demultiplexes deliveries to them, and offers the read surface the
workbench uses (channels, WAL pages, agents, skills, turn records, the observe stream).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Sequence
from types import CoroutineType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.identity import Passport, Resume, Rule
from ag2net.ids import utc_now
from ag2net.protocol import ops
from ag2net.protocol.observe import ObservedEvent
from ag2net.protocol.ops import DEFAULT_LIMIT, OpSpec, Request, request_of
from ag2net.protocol.ports import HubPort, InProcessLink, Link, LinkFactory

if TYPE_CHECKING:
    from ag2net.client.agent_client import AgentClient
    from ag2net.client.human_client import HumanClient
    from ag2net.client.turns import TurnPreview, TurnRecord

log = logging.getLogger(__name__)
T = TypeVar("T")
P = ParamSpec("P")


class _NotRegisteredError(NotFoundError, ValueError):
    """``attach()`` of a name that is not registered, without the passport and resume to register it: a
    ``ValueError`` as in ag2, and a ``NotFoundError`` as ag2net raised before."""


#: How many channels' metadata a remote client remembers for ``adapter_for``/``default_view_policy``.
CHANNEL_META_CACHE = 10_000


def _op_method(
    request: Callable[P, Request[T]],
) -> Callable[Concatenate[HubClient, P], CoroutineType[Any, Any, T]]:
    """A ``HubClient`` method that runs one op: its arguments make the op's typed request (its signature
    is the request class's), its answer is the op's typed result."""

    async def method(self: HubClient, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.request(request(*args, **kwargs))

    spec: OpSpec = request.spec  # type: ignore[attr-defined]  # every request class has one
    method.__name__ = method.__qualname__ = spec.name
    signature = inspect.signature(request)
    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = signature.replace(  # type: ignore[attr-defined]  # what inspect shows
        parameters=[self_param, *signature.parameters.values()], return_annotation=inspect.Signature.empty
    )
    own = request.__doc__ or ""
    # a dataclass without a docstring of its own gets its signature as one: the op's line says more
    method.__doc__ = own if own and not own.startswith(f"{getattr(request, '__name__', '')}(") else spec.doc
    return method


async def _nothing() -> None:
    """A delivery to nobody on this connection (an identity it no longer holds)."""


class HubClient:
    """A connection to a hub. ``HubClient.local(hub)`` for in-process use."""

    #: Whether default-handler turns of agents on this connection store a turn record (off: benchmarks).
    record_turns: bool = True

    def __init__(
        self, link: Link | LinkFactory, *, hub: HubPort | None = None, rpc_timeout: float = 30.0
    ) -> None:
        """A client on ``link``: a ``LocalLink`` (shareable: this client takes its own connection from it
        with ``link.client()``), a ``LocalLinkClient``, or a ``WsLink``. ``hub`` names the in-process hub
        (ag2's signature); it must be the link's own hub when the link has one."""
        if isinstance(link, LinkFactory):  # LocalLink, WsLink: one connection per client
            link = link.client()  # type: ignore[assignment]  # their clients are Links too
        link_hub = getattr(link, "hub", None)
        if hub is not None and link_hub is not None and link_hub is not hub:
            raise ValueError(
                "HubClient(link, hub=...): hub is not the Hub this link connects to; pass the link's own hub "
                "or leave hub out"
            )
        self.link: Link = link  # type: ignore[assignment]
        # An in-process link takes a receipt synchronously: one coroutine fewer per delivery's ack.
        receipt_now = getattr(link, "receipt_now", None)
        receipt_handler = getattr(link, "receipt_handler", None)  # the same, one call fewer
        self._receipt_now: Callable[[str, str, str, str, str], None] | None = (
            receipt_handler() if receipt_handler is not None else receipt_now
        )
        self._hub = hub if hub is not None else link_hub
        # The in-process link answers ag2's synchronous lookups (names, adapters) without a round trip.
        self._in_process: InProcessLink | None = link if isinstance(link, InProcessLink) else None
        self.rpc_timeout = rpc_timeout
        # Turn records' wall-clock times and durations: the in-process hub's clock (so they agree with its
        # envelopes' created_at), else the system's; both can be replaced (reproducible demos, screenshots).
        hub_clock: Callable[[], str] | None = getattr(self._hub, "clock", None)
        self.clock: Callable[[], str] = hub_clock if hub_clock is not None else utc_now
        self.timer: Callable[[], float] = time.perf_counter
        self._clients: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self._nameless: set[str] = set()  # ids the hub had no name for (``learn_names`` asks once)
        self._ids_by_name: dict[str, str] = {}
        self._adapters: dict[tuple[str, int], Any] | None = None
        self._channel_meta: dict[str, ChannelMetadata] = {}  # newest metadata seen, bounded (remote links)
        self._open = False
        self._closed = False
        self._open_lock = asyncio.Lock()

    @classmethod
    def local(cls, hub: Any, **kwargs: Any) -> HubClient:
        """A client of the ``Hub`` in this process (through its in-process link)."""
        return cls(hub.local_link(), **kwargs)

    @classmethod
    def connect(
        cls,
        url: str | Sequence[str],
        *,
        token: str | None = None,
        operator_token: str | None = None,
        operator: bool | None = None,
        rpc_timeout: float = 30.0,
        identity_secrets: Any = None,
        **link_kwargs: Any,
    ) -> HubClient:
        """A client of the hub served at ``url`` (``ws://`` or ``wss://``); connects on first use, on
        ``open()``, or at once when awaited (``client = await HubClient.connect(url)``).

        Several URLs (a list, or one string with commas: ``"ws://a:8765,ws://b:8765"``) name an active hub
        and its standbys on one PostgreSQL database: the client uses whichever admits, skips one that
        answers standby or refuses, and after a drop reconnects to whichever is active then, replaying
        from its cursors (deliveries are de-duplicated by envelope id).

        A server started with ``--token`` issues each identity registered through it a secret that later
        attaches must present. ``identity_secrets`` says where they are kept, so re-attaching (another
        run, the workbench) just works: ``None`` (default) the user's data folder
        (``$XDG_DATA_HOME/ag2net/identity-secrets.json``, mode 0600), a path for another file, a
        ``SecretFile``, or ``False`` for this process's memory only.
        """
        from ag2net.transport.secret_file import SecretFile
        from ag2net.transport.ws import WsLink

        if identity_secrets is None:
            secrets: SecretFile | None = SecretFile()
        elif identity_secrets is False:
            secrets = None
        elif isinstance(identity_secrets, SecretFile):
            secrets = identity_secrets
        else:
            secrets = SecretFile(identity_secrets)
        link = WsLink(
            url,
            token=token,
            operator_token=operator_token,
            operator=operator,
            rpc_timeout=rpc_timeout,
            secrets=secrets,
            **link_kwargs,
        )
        return cls(link, rpc_timeout=rpc_timeout)

    @property
    def hub(self) -> Any:
        """The in-process ``Hub`` (of a local link, or given as ``hub=``); ``None`` when remote."""
        return self._hub

    @property
    def remote(self) -> bool:
        return not getattr(self.link, "local", False)

    def connection_state(self) -> dict[str, Any]:
        """What a UI shows about the connection: kind, url, connected, reconnects, operator."""
        link = self.link
        return {
            "kind": "remote" if self.remote else "in-process",
            "url": getattr(link, "url", None),
            "connected": bool(getattr(link, "connected", True)) and not self._closed,
            "reconnects": int(getattr(link, "reconnects", 0) or 0),
            "operator": bool(getattr(link, "is_operator", not self.remote)),
        }

    async def open(self) -> HubClient:
        if self._closed:
            raise RuntimeError("HubClient is closed")
        if not self._open:
            async with self._open_lock:
                if not self._open:
                    await self.link.open(self._on_notify)
                    self._open = True
        return self

    def __await__(self) -> Generator[Any, None, HubClient]:
        """``client = await HubClient.connect(url)`` opens the connection and gives the client, as
        ``await Hub.open()`` gives the hub (``HubClient.connect(url)`` alone still connects on first use,
        and ``async with HubClient.connect(url) as client`` closes it at the end)."""
        return self.open().__await__()

    async def __aenter__(self) -> HubClient:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for client in list(self._clients.values()):
            stop = getattr(client, "_stop_workers", None)
            if stop is not None:
                await stop()
        with contextlib.suppress(Exception):
            await self.link.close()

    async def shutdown(self) -> None:
        """Unregister every identity this client registered, then close."""
        for agent_id in list(self._clients):
            with contextlib.suppress(Exception):
                await self.request(ops.Unregister(agent_id=agent_id))
        await self.close()

    async def request(self, request: Request[T]) -> T:
        """Run one op on the hub: its typed request (``ag2net.protocol.ops``) in, its typed result out."""
        if self._closed:
            raise RuntimeError("HubClient is closed")
        if not self._open:
            await self.open()
        return await self.link.request(request)

    async def call(self, op: str, **params: Any) -> Any:
        """Run a control-plane op on the hub by name: ``params`` make the op's typed request."""
        return await self.request(request_of(op, params))

    # ------------------------------------------------------------------ deliveries

    def _on_notify(self, recipient_id: str, envelope: Envelope) -> Awaitable[None]:
        """A delivery: the recipient's own ``receive`` (its coroutine, awaited by the link: one coroutine
        per delivery fewer than an ``async`` forward)."""
        client = self._clients.get(recipient_id)
        if client is None:
            return _nothing()
        return client.receive(envelope)

    async def ack(self, envelope: Envelope, recipient_id: str, status: str = "ack", reason: str = "") -> None:
        if self.ack_now(envelope, recipient_id, status, reason):
            return
        try:
            await self.link.receipt(envelope.envelope_id, status, recipient_id, envelope.channel_id, reason)
        except Exception:  # an ack is best effort: a closed or broken link only loses this one
            pass

    def ack_now(self, envelope: Envelope, recipient_id: str, status: str = "ack", reason: str = "") -> bool:
        """``ack`` without a coroutine when it needs none: True when the receipt is done (taken at once by
        an in-process link, or nothing to send), False when it must go through ``await ack(...)``."""
        if not envelope.envelope_id or self._closed:
            return True
        receipt_now = self._receipt_now
        if receipt_now is None:
            return False
        # try/except rather than contextlib.suppress: this runs once per delivery
        try:
            receipt_now(envelope.envelope_id, status, recipient_id, envelope.channel_id, reason)
        except Exception:  # an ack is best effort: a closed or broken link only loses this one
            pass
        return True

    def _remember(self, passport: Passport) -> None:
        if passport.agent_id:
            self._names[passport.agent_id] = passport.name
            self._ids_by_name[passport.name] = passport.agent_id

    # ------------------------------------------------------------------ identities

    async def register(
        self,
        agent: Any,
        passport: Passport | None = None,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        rule: Rule | None = None,
        attach_plugin: bool = True,
        attach_default_handler: bool = True,
    ) -> AgentClient:
        """Register an LLM agent; returns its ``AgentClient`` (default handler attached unless told not to)."""
        if self._closed:
            raise RuntimeError("HubClient is closed")
        passport = passport or Passport(name=agent.name)
        if passport.kind == "human":
            raise ValueError(
                "register() is for agent-kind participants; use HubClient.register_human(...) for kind='human' passports"
            )
        resume = resume or Resume()
        stamped: Passport = await self.request(
            ops.Register(passport=passport, resume=resume, skill_md=skill_md, rule=rule)
        )
        passport.agent_id = stamped.agent_id
        passport.created_at = stamped.created_at
        self._remember(stamped)
        return self._seat_agent(
            agent, passport, resume, rule or Rule(), attach_plugin, attach_default_handler
        )

    async def _bound_identity(self, name: str) -> tuple[Passport, Resume, Rule]:
        """Bind this connection to the existing identity ``name``; its passport, resume and rule."""
        passport = await self.request(ops.Bind(name=name))
        self._remember(passport)
        agent_id = passport.agent_id or ""  # a bound identity is always stamped
        resume = await self.request(ops.GetResume(agent_id=agent_id))
        rule = await self.request(ops.GetRule(agent_id=agent_id))
        return passport, resume, rule

    def _new_agent_client(
        self, agent: Any, passport: Passport, resume: Resume, rule: Rule, attach_default_handler: bool
    ) -> AgentClient:
        from ag2net.client.agent_client import AgentClient

        return AgentClient(
            agent=agent,
            passport=passport,
            resume=resume,
            rule=rule,
            hub_client=self,
            attach_default_handler=attach_default_handler,
        )

    def _seat_agent(
        self,
        agent: Any,
        passport: Passport,
        resume: Resume,
        rule: Rule,
        attach_plugin: bool,
        attach_default_handler: bool,
    ) -> AgentClient:
        client = self._new_agent_client(agent, passport, resume, rule, attach_default_handler)
        self._clients[passport.agent_id] = client  # type: ignore[index]  # stamped by register/bind
        if attach_plugin:
            from ag2net.client.plugin import NetworkPlugin

            client.plugin = plugin = NetworkPlugin(client)
            plugin.apply(agent)
        return client

    def _seat_human(
        self, passport: Passport, resume: Resume, rule: Rule, auto_ack_invites: bool
    ) -> HumanClient:
        from ag2net.client.human_client import HumanClient

        human = HumanClient(
            passport=passport, resume=resume, rule=rule, hub_client=self, auto_ack_invites=auto_ack_invites
        )
        self._clients[passport.agent_id] = human  # type: ignore[index]  # stamped by register/bind
        return human

    async def attach(
        self,
        agent: Any,
        name: str,
        *,
        passport: Passport | None = None,
        resume: Resume | None = None,
        rule: Rule | None = None,
        skill_md: str | None = None,
        attach_plugin: bool = True,
        since_envelope_id: str | None = "",
        attach_default_handler: bool = True,
    ) -> AgentClient:
        """Bind ``agent`` to the identity ``name`` that already exists on the hub (e.g. after a restart).

        When ``name`` is not registered it falls back to ``register(agent, passport, resume, skill_md=,
        rule=)``, so ``passport`` and ``resume`` are required then. Over a remote link ``passport.auth``
        (when it carries a scheme or claim) is the credential presented for the existing identity, and
        ``since_envelope_id`` asks the hub to resend what this identity has not acknowledged: ``""``
        (default) everything past its delivery cursors, an envelope id only what comes after it, ``None``
        nothing. In-process it is ignored: nothing is lost between a local hub and its clients.
        """
        if self._closed:
            raise RuntimeError("HubClient is closed")
        if since_envelope_id is not None and not isinstance(since_envelope_id, str):
            raise TypeError(
                f"attach({name!r}): since_envelope_id must be an envelope id string, '' (resend everything "
                f"unacknowledged) or None (resend nothing); got {type(since_envelope_id).__name__}"
            )
        agent_id = await self.request(ops.FindAgentId(name=name))
        if agent_id is None:
            if passport is None or resume is None:
                raise _NotRegisteredError(
                    f"attach({name!r}): name is not registered; passport and resume are required to fall "
                    f"back to register() (pass passport=Passport(name={name!r}) and resume=Resume())"
                )
            return await self.register(
                agent,
                passport,
                resume,
                skill_md=skill_md,
                rule=rule,
                attach_plugin=attach_plugin,
                attach_default_handler=attach_default_handler,
            )
        # Seat the client before binding, so a delivery that arrives right after the bind (or a replayed
        # one) finds it.
        existing = await self.request(ops.GetAgent(name_or_id=agent_id))
        existing_resume = await self.request(ops.GetResume(agent_id=agent_id))
        existing_rule = await self.request(ops.GetRule(agent_id=agent_id))
        client = self._new_agent_client(
            agent, existing, existing_resume, existing_rule, attach_default_handler
        )
        self._clients[agent_id] = client
        try:
            bound: Passport = await self.request(
                ops.Bind(name=name, **self._bind_credentials(name, passport))
            )
            self._remember(bound)
            if self.remote and since_envelope_id is not None:
                await self._resend_unacked(agent_id, since_envelope_id)
        except BaseException:
            if self._clients.get(agent_id) is client:
                del self._clients[agent_id]
            raise
        if attach_plugin:
            from ag2net.client.plugin import NetworkPlugin

            client.plugin = plugin = NetworkPlugin(client)
            plugin.apply(agent)
        return client

    def _bind_credentials(self, name: str, passport: Passport | None) -> dict[str, Any]:
        """The ``bind`` params that present ``passport.auth`` for ``name``; none when it carries nothing
        (the link then presents what it holds: the server's token and the identity's secret)."""
        auth = passport.auth if passport is not None else None
        if auth is None or (auth.scheme in (None, "", "none") and not auth.claim):
            return {}
        claim = dict(auth.claim)
        secret_for = getattr(self.link, "secret_for", None)
        if "secret" not in claim and secret_for is not None:
            secret = secret_for(name)
            if secret is not None:
                claim["secret"] = secret
        return {"auth_scheme": auth.scheme, "auth_claim": claim}

    async def _resend_unacked(self, agent_id: str, since_envelope_id: str) -> None:
        """Ask a remote hub to resend what ``agent_id`` has not acknowledged past ``since_envelope_id``
        (a link without the hello handshake has nothing to resend through)."""
        resend = getattr(self.link, "resend_unacked", None)
        if resend is not None:
            await resend(agent_id, since_envelope_id)

    async def register_human(
        self,
        passport: Passport,
        *,
        resume: Resume | None = None,
        rule: Rule | None = None,
        auto_ack_invites: bool = True,
    ) -> HumanClient:
        """Register a person (or bridge) as a participant without an LLM."""
        if passport.kind not in (None, "human"):
            raise ValueError(f"register_human() requires kind='human' (or None); got {passport.kind!r}")
        passport.kind = "human"
        resume = resume or Resume()
        stamped = await self.request(ops.Register(passport=passport, resume=resume, rule=rule))
        passport.agent_id = stamped.agent_id
        passport.created_at = stamped.created_at
        self._remember(stamped)
        return self._seat_human(passport, resume, rule or Rule(), auto_ack_invites)

    async def attach_human(self, name: str, *, auto_ack_invites: bool = True) -> HumanClient:
        """Re-bind a human identity that already exists (a person reopening the same database)."""
        passport, resume, rule = await self._bound_identity(name)
        if passport.effective_kind != "human":
            raise ValueError(f"{name!r} is registered as kind {passport.effective_kind!r}, not 'human'")
        return self._seat_human(passport, resume, rule, auto_ack_invites)

    async def register_or_attach_human(self, name: str, **kwargs: Any) -> HumanClient:
        """Attach to the human ``name`` if it exists, else register it."""
        if await self.find_agent_id_remote(name):
            return await self.attach_human(name, **kwargs)
        return await self.register_human(Passport(name=name, kind="human"), **kwargs)

    def _forget(self, agent_id: str) -> None:
        self._clients.pop(agent_id, None)

    async def rotate_secret(self, name_or_agent_id: str) -> str:
        """Replace the identity secret of an identity this client holds on a ``--token`` server (an operator
        connection may rotate anyone's): returns the new secret, which the link keeps (in memory and its
        secret file) for re-attaching. From then on the old secret is refused, and every other connection
        holding the identity loses it and is told."""
        if not self.remote:
            raise ProtocolError(
                "rotate_secret: in-process identities have no secret; only a --token server issues them"
            )
        agent_id = self.find_agent_id(name_or_agent_id) or name_or_agent_id
        result = await self.request(ops.RotateSecret(agent_id=agent_id))
        return result["identity_secret"]

    async def unregister_agent(self, agent_id: str) -> None:
        await self.request(ops.Unregister(agent_id=agent_id))
        self._forget(agent_id)

    async def get_agent(self, name_or_id: str) -> Passport:
        passport = await self.request(ops.GetAgent(name_or_id=name_or_id))
        self._remember(passport)
        return passport

    get_resume = _op_method(ops.GetResume)
    get_rule = _op_method(ops.GetRule)
    get_skill = _op_method(ops.GetSkill)
    get_skill_info = _op_method(ops.GetSkillInfo)

    def find_agent_id(self, name: str) -> str | None:
        """Sync lookup from the local name cache (filled by every passport this client has seen)."""
        if self._in_process is not None:
            return self._in_process.find_agent_id(name)
        return self._ids_by_name.get(name)

    find_agent_id_remote = _op_method(ops.FindAgentId)

    async def names_for(self, agent_ids: list[str]) -> dict[str, str]:
        names = await self.request(ops.NamesFor(agent_ids=list(agent_ids)))
        for agent_id, name in names.items():
            if name != agent_id:
                self._names[agent_id] = name
                self._ids_by_name[name] = agent_id
        return names

    async def learn_names(self, agent_ids: Iterable[str]) -> None:
        """Cache the names of ``agent_ids`` this client does not know yet, so ``name_for`` (which cannot ask)
        names them: over a socket, one ``names_for`` for the unknown ones; in-process the hub is read
        directly and nothing is asked. A turn's projection calls this for the channel's participants: a
        remote agent invited into a discussion has seen none of its humans' passports."""
        if self._in_process is not None:  # ``name_for`` reads the hub itself
            return
        names, nameless = self._names, self._nameless
        unknown = [a for a in dict.fromkeys(agent_ids) if a not in names and a not in nameless]
        if not unknown:
            return
        found = await self.names_for(unknown)
        nameless.update(a for a in unknown if found.get(a, a) == a)

    def name_for(self, agent_id: str, *, default: str | None = None) -> str:
        """Sync: passport name for an id (cached; in-process reads the hub)."""
        name = self._names.get(agent_id)
        if name is None:
            name = self._in_process.known_name(agent_id) if self._in_process is not None else None
            if name is not None:
                self._names[agent_id] = name
        if name is not None:
            return name
        return default if default is not None else agent_id

    def name_to_id_map(self) -> dict[str, str]:
        return dict(self._ids_by_name)

    async def list_agents(
        self,
        *,
        capability: str | None = None,
        query: str | None = None,
        kind: str | None = None,
        sort_by: str | None = None,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[Passport]:
        result = await self.request(
            ops.ListAgents(capability=capability, query=query, kind=kind, sort_by=sort_by, limit=limit)
        )
        passports = [(p) for p in result]
        for p in passports:
            self._remember(p)
        return passports

    presence = _op_method(ops.Presence)
    set_resume = _op_method(ops.SetResume)
    set_skill = _op_method(ops.SetSkill)
    set_rule = _op_method(ops.SetRule)

    # ------------------------------------------------------------------ channels

    async def create_channel(
        self,
        *,
        creator_id: str,
        manifest_type: str,
        participants: list[str],
        manifest_version: int = 1,
        required_acks: int | None = None,
        ttl: Any = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
        labels: dict[str, Any] | None = None,
    ) -> ChannelMetadata:
        md: ChannelMetadata = await self.request(
            ops.CreateChannel(
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
        )
        if self.remote:
            await self.names_for(md.participant_ids())
        return self._cache_channel(md)

    async def get_channel(self, channel_id: str) -> ChannelMetadata:
        return self._cache_channel(await self.request(ops.GetChannel(channel_id=channel_id)))

    def _cache_channel(self, metadata: ChannelMetadata) -> ChannelMetadata:
        """Remember the newest metadata seen for a channel (``adapter_for``/``default_view_policy`` read it
        over a socket; in-process they ask the hub, so nothing is kept)."""
        if self._in_process is not None:
            return metadata
        cache = self._channel_meta
        cache.pop(metadata.channel_id, None)
        cache[metadata.channel_id] = metadata
        if len(cache) > CHANNEL_META_CACHE:
            del cache[next(iter(cache))]
        return metadata

    def _cached_channel(self, channel_id: str) -> ChannelMetadata:
        if self._in_process is not None:
            return self._in_process.lookup_channel(channel_id)
        metadata = self._channel_meta.get(channel_id)
        if metadata is None:
            raise NotFoundError(
                f"channel metadata not cached: {channel_id} (fetch it with get_channel() first)"
            )
        return metadata

    async def list_channels(
        self,
        *,
        agent_id: str | None = None,
        include_terminal: bool = False,
        limit: int | None = DEFAULT_LIMIT,
    ) -> list[ChannelMetadata]:
        """Channels of ``agent_id``; without it, every channel the hub lets this connection see (in-process:
        all of them; over a socket: those of the identities bound to it), as in ag2."""
        result = await self.request(
            ops.ListChannels(agent_id=agent_id, include_terminal=include_terminal, limit=limit)
        )
        return [self._cache_channel(m) for m in result]

    channel_stats = _op_method(ops.ChannelStats)
    close_channel = _op_method(ops.CloseChannel)

    async def post_envelope(self, envelope: Envelope) -> str:
        """Admit an envelope: durable when this returns its id (``ops.PostEnvelope``; ``request``'s steps
        in this one frame, since every post takes them)."""
        request = ops.PostEnvelope(envelope)
        if self._closed:
            raise RuntimeError("HubClient is closed")
        if not self._open:
            await self.open()
        return await self.link.request(request)

    read_wal = _op_method(ops.ReadWal)
    read_wal_seq = _op_method(ops.ReadWalSeq)
    read_wal_until = _op_method(ops.ReadWalUntil)
    wal_count = _op_method(ops.WalCount)
    find_envelope_by_causation = _op_method(ops.FindEnvelopeByCausation)
    can_send = _op_method(ops.CanSend)
    explain_send = _op_method(ops.ExplainSend)
    pending_turns_for = _op_method(ops.PendingTurnsFor)

    async def report_turn_failure(
        self, *, channel_id: str, agent_id: str, envelope_id: str, exc: BaseException | str
    ) -> None:
        """Tell the hub a turn failed. In-process the exception itself reaches the hub's listeners (as in
        ag2); over a socket its text and type name do."""
        local = self._in_process is not None and isinstance(exc, BaseException)
        await self.request(
            ops.ReportTurnFailure(
                channel_id=channel_id,
                agent_id=agent_id,
                envelope_id=envelope_id,
                exc_type=type(exc).__name__ if isinstance(exc, BaseException) else "Error",
                error=exc if local else str(exc),
            )
        )

    # ------------------------------------------------------------------ adapters (local helpers)

    def _adapter_registry(self) -> dict[tuple[str, int], Any]:
        if self._in_process is not None:
            return self._in_process.adapters()
        if self._adapters is None:
            from ag2net.adapters import default_adapters

            self._adapters = {(a.manifest.type, a.manifest.version): a for a in default_adapters()}
        return self._adapters

    def register_adapter(self, adapter: Any) -> None:
        if self._in_process is not None:
            self._in_process.register_adapter(adapter)
        else:
            self._adapter_registry()[(adapter.manifest.type, adapter.manifest.version)] = adapter

    def adapter_for_metadata(self, metadata: ChannelMetadata) -> Any:
        adapter = self._adapter_registry().get((metadata.manifest.type, metadata.manifest.version))
        if adapter is None:
            raise NotFoundError(
                f"no adapter registered for {metadata.manifest.type!r}@v{metadata.manifest.version}"
            )
        return adapter

    def adapter_for(self, channel_id: str) -> Any:
        """The adapter of a channel (synchronous, as in ag2): in-process from the hub, remote from the metadata
        this client has seen (``get_channel``/``create_channel``/``list_channels`` fill that cache)."""
        return self.adapter_for_metadata(self._cached_channel(channel_id))

    async def adapter_state(self, channel_id: str, metadata: ChannelMetadata | None = None) -> Any:
        """The channel's adapter state: folded locally from the WAL (works the same remote or local)."""
        if self._in_process is not None:
            state = self._in_process.adapter_state(channel_id)
            if state is not None:
                return state
        md = metadata or await self.get_channel(channel_id)
        adapter = self.adapter_for_metadata(md)
        state = adapter.initial_state(md)
        for env in await self.read_wal(channel_id):
            state = adapter.fold(env, state)
        return state

    def default_view_policy(self, channel_id: str | ChannelMetadata, participant_id: str) -> Any:
        """The view a participant gets by default (per-participant override, channel knob, adapter default);
        ``channel_id`` may also be the channel's metadata."""
        from ag2net.views.registry import resolve_view

        metadata = channel_id if isinstance(channel_id, ChannelMetadata) else self._cached_channel(channel_id)
        return resolve_view(metadata, participant_id, self.adapter_for_metadata(metadata))

    # ------------------------------------------------------------------ tasks

    get_task = _op_method(ops.GetTask)
    list_tasks = _op_method(ops.ListTasks)
    observe_task = _op_method(ops.ObserveTask)
    update_task = _op_method(ops.UpdateTask)
    record_observation = _op_method(ops.RecordObservation)
    fire_task_event = _op_method(ops.FireTaskEvent)
    checkpoint_task = _op_method(ops.CheckpointTask)
    read_task_checkpoint = _op_method(ops.ReadTaskCheckpoint)

    # ------------------------------------------------------------------ knowledge, turns, audit

    add_knowledge = _op_method(ops.AddKnowledge)
    search_knowledge = _op_method(ops.SearchKnowledge)

    async def record_turn(self, record: TurnRecord) -> str:
        """Store one turn record; the hub assigns its id, which is written back into ``record``."""
        turn_id = await self.request(ops.RecordTurn(record=record.to_dict()))
        if isinstance(turn_id, str) and turn_id:
            record.turn_id = turn_id
        return record.turn_id

    async def list_turns(
        self,
        *,
        channel_id: str | None = None,
        agent_id: str | None = None,
        trigger_envelope_id: str | None = None,
        limit: int = DEFAULT_LIMIT,
    ) -> list[TurnRecord]:
        from ag2net.client.turns import TurnRecord

        rows = await self.request(
            ops.ListTurns(
                channel_id=channel_id,
                agent_id=agent_id,
                trigger_envelope_id=trigger_envelope_id,
                limit=limit,
            )
        )
        return [TurnRecord.from_dict(r) for r in rows]

    async def preview_turn(self, channel_id: str, participant_id: str, view: Any = None) -> TurnPreview:
        from ag2net.client.turns import preview_turn

        return await preview_turn(self, channel_id, participant_id, view)

    list_audit = _op_method(ops.ListAudit)
    health = _op_method(ops.Health)
    adapter_types = _op_method(ops.AdapterTypes)

    # stepping in (ag2net.breakpoints): operators set breakpoints and answer what waits; an agent's
    # runtime asks before a paused turn's model call and before a tool that needs approval
    break_on = _op_method(ops.BreakOn)
    list_breakpoints = _op_method(ops.ListBreakpoints)
    set_breakpoint = _op_method(ops.SetBreakpoint)
    remove_breakpoint = _op_method(ops.RemoveBreakpoint)
    step_mode = _op_method(ops.StepMode)
    pause_expectations = _op_method(ops.PauseExpectations)
    list_waiting = _op_method(ops.ListWaiting)
    answer_waiting = _op_method(ops.AnswerWaiting)
    turn_gate = _op_method(ops.TurnGate)
    pause_turn = _op_method(ops.PauseTurn)
    request_approval = _op_method(ops.RequestApproval)

    # ------------------------------------------------------------------ observe

    observe_position = _op_method(ops.ObservePosition)

    async def observe(self, since: int | None = None) -> AsyncIterator[ObservedEvent]:
        """Every admitted envelope and lifecycle/audit event after position ``since`` (default: from now)."""
        await self.open()
        async for event in self.link.observe(since):
            if event.kind == "agent":
                name = event.payload.get("name")
                agent_id = event.payload.get("agent_id")
                if name and agent_id:
                    self._names[agent_id] = name
                    self._ids_by_name[name] = agent_id
            yield event


__all__ = ["HubClient"]

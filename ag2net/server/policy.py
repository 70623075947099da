"""Who may run which op over one WebSocket connection: the server's authorisation, as one policy object.

``serve_ws(hub, ..., policy=WirePolicy())`` hands it to the server (as websockets hands
``process_request`` to ``serve``). Every op's access rule is declared in the catalogue
(``ag2net.protocol.ops``): ``open``, ``directory``, ``agent``, ``channel`` and ``operator`` are read from
there; an op whose rule is ``policy`` has its own method here, named like the op (a test checks each one
has). ``narrow`` cuts a listing down to what a non-operator connection may see, and every read of envelopes
(``ENVELOPE_READS``) down to the envelopes one of its identities could see (``visible_to``: SPEC decision 25;
ag2 1.2.1 gives co-participants everything). Subclass it to tighten or loosen a rule; in-process callers never
pass through it.

This module is the one home of the socket-only rules (the checkpoint rule, ``authorize_checkpoint``,
included); the rules every caller meets, in-process ones too, are the hub's (``ag2net.hub.access``, for the
ops tagged ``caller``), checked after this policy. A test checks that the tags and both homes agree.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Collection
from typing import Any, Protocol

from ag2net.envelope import EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT, Envelope, visible_to
from ag2net.errors import AccessDeniedError, AuthError, NotFoundError, ProtocolError
from ag2net.hub.checkpoints import CheckpointHost, checkpoint_writers, record_checkpoint_writers
from ag2net.identity import Passport, check_resume_size, check_skill_size
from ag2net.protocol.ops import DEFAULT_LIMIT
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.tasks import TASK_ID_RE
from ag2net.tasks import check_task_id as require_task_id  # the store's own words for a bad id

#: The payload keys a remote ``fire_task_event`` (kind ``mirror_failed``) may carry.
MIRROR_FAILED_KEYS = frozenset({"op", "owner_id", "channel_id", "exc_type", "exc_message"})


class Connection(Protocol):
    """What the policy reads of a connection (``WsEndpoint`` is one)."""

    bound: set[str]
    operator: bool
    hub: Any
    server: Any

    @property
    def authenticated(self) -> bool: ...


def _param(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if not isinstance(value, str):
        raise ProtocolError(f"params.{name} must be a string")
    return value


def _envelope(params: dict[str, Any], op: str) -> Envelope:
    """``params.envelope`` as an ``Envelope`` (a JSON object is decoded and put back in ``params``)."""
    env = params.get("envelope")
    if isinstance(env, dict):
        env = Envelope.from_dict(env)
        params["envelope"] = env
    if not isinstance(env, Envelope):
        raise ProtocolError(f"{op} needs params.envelope as an envelope object")
    return env


def _nested(params: dict[str, Any], outer: str, name: str) -> Any:
    value = params.get(outer)
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def check_task_id(task_id: Any) -> None:
    if task_id is None:
        return
    if not isinstance(task_id, str) or TASK_ID_RE.fullmatch(task_id) is None:
        raise ProtocolError(f"invalid task_id {task_id!r}; use 1-128 of letters, digits, '.', '_' or '-'")


#: The params each op stores and serves to every reader, capped (SPEC decision 23), with their check.
SIZED: dict[str, tuple[tuple[str, Callable[[Any, str], None]], ...]] = {
    "register": (("skill_md", check_skill_size), ("resume", check_resume_size)),
    "set_skill": (("skill_md", check_skill_size),),
    "set_resume": (("resume", check_resume_size),),
}


def check_sizes(op: str, params: dict[str, Any]) -> None:
    """Skill markdown and resumes that would be kept (and served to every reader) are capped."""
    for name, check in SIZED.get(op, ()):
        check(params.get(name), f"params.{name}")


#: One lock per hub around a checkpoint's first-writer claim (``authorize_checkpoint``).
_CLAIM_LOCKS: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


async def authorize_checkpoint(
    hub: CheckpointHost, task_id: Any, *, bound: Collection[str], operator: bool, write: bool
) -> None:
    """Refuse a wire ``checkpoint_task`` (``write``) or ``read_task_checkpoint`` that these rules forbid:

    * a task the hub observes: its owner must be bound to the connection (operators may also read); when
      the checkpoint was written before the task was observed, the caller must also hold one of its writers;
    * a task the hub does not observe: the first ``checkpoint_task`` records the agents bound to the writing
      connection as its writers (``ag2net.hub.checkpoints.record_checkpoint_writers``); later reads and
      writes need one of them bound (operators may also read). An id nobody wrote reads as open: there is
      nothing to protect.

    In-process callers (the hub's own process) are not checked, as for every other ``policy`` rule.
    """
    require_task_id(task_id)
    bound = set(bound)
    reader_ok = operator and not write
    if not bound and not reader_ok:
        raise AccessDeniedError(
            "task checkpoints are read and written by a bound agent; register or attach an agent on this "
            "connection first"
        )
    task = hub.tasks.get(task_id)
    lock = _CLAIM_LOCKS.get(hub)
    if lock is None:
        lock = _CLAIM_LOCKS[hub] = asyncio.Lock()
    async with lock:
        writers = await checkpoint_writers(hub, task_id)
        if reader_ok:
            return
        if task is not None and task.owner_id not in bound:
            raise AccessDeniedError(
                f"the checkpoint of task '{task_id}' belongs to its owner; connect as the task's owner "
                "to read or write it"
            )
        if writers is None:
            if write and task is None:
                await record_checkpoint_writers(hub, task_id, bound)
            return
    if not bound & set(writers):
        raise AccessDeniedError(
            f"connection holds no writer of task '{task_id}''s checkpoint; "
            "connect as one of the agents that first wrote it"
        )


class WirePolicy:
    """The default authorisation of a remote connection (reference §7.4, SPEC decisions 21-23)."""

    async def authorize(self, conn: Connection, op: str, params: dict[str, Any]) -> None:
        """Refuse ``op`` unless ``conn`` may run it; a rule may narrow ``params`` (listing limits)."""
        check_task_id(params.get("task_id"))
        check_sizes(op, params)
        spec = CATALOGUE.get(op)
        access = spec.access if spec is not None else None
        rule = access.rule if access is not None else None
        if rule == "open":
            return
        if rule == "directory":
            if not self.may_read_directory(conn):
                raise AccessDeniedError(
                    f"{op!r} reads the directory, which this server shows only to authenticated connections; "
                    "connect with the server's token (HubClient.connect(url, token=...)) or ask its operator "
                    "for --public-directory"
                )
            return
        if rule == "agent":
            assert access is not None and access.param is not None
            if not (access.operators_too and conn.operator):
                self.require_bound(conn, params.get(access.param))
            return
        if rule == "channel":
            self.require_channel(conn, _param(params, "channel_id"))
            return
        if rule == "operator":
            self.require_operator(conn, op)
            return
        special = getattr(self, op, None) if rule == "policy" else None
        if special is not None:
            await special(conn, params)
            return
        if not conn.operator:
            raise AccessDeniedError(f"op {op!r} is not available over this connection")

    # ------------------------------------------------------------------ shared checks

    def may_read_directory(self, conn: Connection) -> bool:
        server = conn.server
        return server.token is None or server.public_directory or conn.authenticated or conn.operator

    def require_bound(self, conn: Connection, agent_id: Any) -> None:
        if not (isinstance(agent_id, str) and agent_id in conn.bound):
            raise AccessDeniedError(f"connection is not bound to agent '{agent_id}'")

    def require_operator(self, conn: Connection, what: str) -> None:
        if not conn.operator:
            raise AccessDeniedError(
                f"{what!r} needs the operator role; connect with operator_token=... (hello auth_scheme 'operator')"
            )

    def participates(self, conn: Connection, channel_id: str) -> bool:
        md = conn.hub.channels.get(channel_id)
        return md is not None and any(p in conn.bound for p in md.participant_ids())

    def require_channel(self, conn: Connection, channel_id: str) -> Any:
        md = conn.hub.lookup_channel(channel_id)
        if not conn.operator and not any(p in conn.bound for p in md.participant_ids()):
            raise AccessDeniedError(f"connection has no participant in channel '{channel_id}'")
        return md

    def task_visible(self, conn: Connection, task: Any) -> bool:
        return (
            conn.operator
            or task.owner_id in conn.bound
            or (task.channel_id is not None and self.participates(conn, task.channel_id))
        )

    def owned_task(self, conn: Connection, params: dict[str, Any]) -> Any:
        task_id = _param(params, "task_id")
        task = conn.hub.tasks.get(task_id)
        if task is None:
            raise NotFoundError(f"task not found: {task_id}")
        self.require_bound(conn, task.owner_id)
        return task

    # ------------------------------------------------------------------ the ops whose rule is "policy"

    async def register(self, conn: Connection, params: dict[str, Any]) -> None:
        hub, server = conn.hub, conn.server
        passport = params.get("passport")
        if isinstance(passport, dict):
            kind = passport.get("kind")
            auth = passport.get("auth")
            scheme = auth.get("scheme", "none") if isinstance(auth, dict) else "none"
        else:
            kind = getattr(passport, "kind", None)
            scheme = getattr(getattr(passport, "auth", None), "scheme", "none")
        if kind == "remote_agent":
            if not hub.allow_remote_agent_registration:
                raise AccessDeniedError(
                    "remote_agent registration is disabled on this hub; open it with allow_remote_agent_registration=True"
                )
            if not any(
                hub.identities.agents[a].passport.kind != "remote_agent"
                for a in conn.bound
                if a in hub.identities.agents
            ):
                raise AccessDeniedError(
                    "a remote_agent is registered by a connection that holds its owner agent"
                )
            return
        if scheme == "none" and not server.open_mode:
            raise AuthError(
                "this server requires authentication; register with the 'api_key' scheme "
                "(HubClient.connect(url, token=...))"
            )
        if (
            server.secrets is not None
            and not server.legacy_identities
            and params.get("_identity_secret") is not True
        ):
            if scheme in hub.auth and isinstance(passport, dict):
                # A wrong token is answered as such first: secrets only matter to a token holder.
                auth = passport.get("auth")
                claim = auth.get("claim") if isinstance(auth, dict) else None
                await hub.auth.get(scheme).validate(Passport.from_dict(passport), claim or {})
            raise AuthError(
                "this server gives every identity its own secret, and this client did not ask for one "
                "(ag2 1.2.1 clients cannot); register with ag2net's HubClient.connect(url, token=...), or ask "
                "the operator to start the server with --legacy-identities"
            )

    async def bind(self, conn: Connection, params: dict[str, Any]) -> None:
        passport = conn.hub.lookup_agent(_param(params, "name"))
        scheme = params.get("auth_scheme")
        await conn.server.check_identity(conn, passport, scheme, params.get("auth_claim") or {})

    async def post_envelope(self, conn: Connection, params: dict[str, Any]) -> None:
        env = _envelope(params, "post_envelope")
        self.require_bound(conn, env.sender_id)
        self.check_posted(conn, env)

    @staticmethod
    def check_posted(conn: Connection, env: Envelope) -> None:
        """What the server refuses in a posted envelope before the hub's admission sees it."""
        check_task_id(env.task_id)
        event_type = env.event_type
        if event_type.startswith("ag2.channel.") and event_type not in (
            EV_CHANNEL_INVITE_ACK,
            EV_CHANNEL_INVITE_REJECT,
        ):
            raise ProtocolError(f"'{event_type}' is emitted only by the hub")
        md = conn.hub.channels.get(env.channel_id)
        if env.audience is not None and md is not None:
            participants = set(md.participant_ids())
            if not all(a in participants for a in env.audience):
                raise ProtocolError("audience must list only participants of the channel")

    async def dry_run(self, conn: Connection, params: dict[str, Any]) -> None:
        """A participant dry-runs only as itself (an identity this connection holds); an operator as anyone."""
        env = _envelope(params, "dry_run")
        if not conn.operator:
            self.require_bound(conn, env.sender_id)
        # a post over this socket is refused here before the hub's admission: so is its dry run, in the
        # same words (the op answers with the error a post would get)
        self.check_posted(conn, env)

    async def report_turn_failure(self, conn: Connection, params: dict[str, Any]) -> None:
        self.require_bound(conn, params.get("agent_id"))
        channel_id = _param(params, "channel_id")
        md = conn.hub.lookup_channel(channel_id)
        if params.get("agent_id") not in md.participant_ids():
            raise AccessDeniedError(
                f"agent '{params.get('agent_id')}' does not participate in channel '{channel_id}'"
            )

    async def record_turn(self, conn: Connection, params: dict[str, Any]) -> None:
        record = params.get("record")
        if not isinstance(record, dict):
            raise ProtocolError("params.record must be a turn record object")
        self.require_bound(conn, record.get("agent_id"))

    async def record_observation(self, conn: Connection, params: dict[str, Any]) -> None:
        owner_id = params.get("owner_id")
        self.require_bound(conn, owner_id)
        task_id = params.get("task_id")
        task = conn.hub.tasks.get(task_id) if isinstance(task_id, str) else None
        if task is not None and task.owner_id != owner_id:
            raise AccessDeniedError(f"task '{task_id}' is not owned by '{owner_id}'")

    async def list_turns(self, conn: Connection, params: dict[str, Any]) -> None:
        if conn.operator:
            return
        channel_id = params.get("channel_id")
        agent_id = params.get("agent_id")
        if channel_id is None and agent_id is None:
            raise AccessDeniedError("list_turns needs channel_id or agent_id, or the operator role")
        if channel_id is not None:
            self.require_channel(conn, _param(params, "channel_id"))
        if agent_id is not None and channel_id is None:
            self.require_bound(conn, agent_id)

    async def list_channels(self, conn: Connection, params: dict[str, Any]) -> None:
        agent_id = params.get("agent_id")
        if agent_id is not None:
            if not conn.operator:
                self.require_bound(conn, agent_id)
            return
        if not conn.operator:
            params["_filter_limit"] = params.get("limit", DEFAULT_LIMIT)
            params["limit"] = None

    async def channel_stats(self, conn: Connection, params: dict[str, Any]) -> None:
        return None  # narrowed after the op for non-operators

    async def get_task(self, conn: Connection, params: dict[str, Any]) -> None:
        task_id = _param(params, "task_id")
        task = conn.hub.tasks.get(task_id)
        if task is None or not self.task_visible(conn, task):
            raise NotFoundError(f"task not found: {task_id}")

    async def list_tasks(self, conn: Connection, params: dict[str, Any]) -> None:
        if not conn.operator:
            params["_filter_limit"] = params.get("limit", DEFAULT_LIMIT)
            params["limit"] = None

    async def observe_task(self, conn: Connection, params: dict[str, Any]) -> None:
        task_id = _nested(params, "metadata", "task_id")
        owner_id = _nested(params, "metadata", "owner_id")
        channel_id = _nested(params, "metadata", "channel_id")
        check_task_id(task_id)
        self.require_bound(conn, owner_id)
        if channel_id is not None:
            md = conn.hub.lookup_channel(channel_id)
            if owner_id not in md.participant_ids():
                raise AccessDeniedError(
                    f"task channel '{channel_id}' does not include its owner '{owner_id}'"
                )
        existing = conn.hub.tasks.get(task_id) if isinstance(task_id, str) else None
        if existing is not None:
            self.require_bound(conn, existing.owner_id)

    async def update_task(self, conn: Connection, params: dict[str, Any]) -> None:
        self.owned_task(conn, params)

    async def fire_task_event(self, conn: Connection, params: dict[str, Any]) -> None:
        self.owned_task(conn, params)
        if params.get("kind") != "mirror_failed":
            raise ProtocolError("fire_task_event over the wire accepts only kind 'mirror_failed'")
        payload = params.get("payload") or {}
        if not isinstance(payload, dict) or not set(payload) <= MIRROR_FAILED_KEYS:
            raise ProtocolError(f"fire_task_event payload keys must be among {sorted(MIRROR_FAILED_KEYS)}")
        params["payload"] = {k: (v[:500] if isinstance(v, str) else v) for k, v in payload.items()}

    async def checkpoint_task(self, conn: Connection, params: dict[str, Any]) -> None:
        task_id = _param(params, "task_id")
        await authorize_checkpoint(conn.hub, task_id, bound=conn.bound, operator=conn.operator, write=True)

    async def read_task_checkpoint(self, conn: Connection, params: dict[str, Any]) -> None:
        task_id = _param(params, "task_id")
        await authorize_checkpoint(conn.hub, task_id, bound=conn.bound, operator=conn.operator, write=False)

    # ------------------------------------------------------------------ after the op

    def sees(self, conn: Connection, env: Envelope) -> bool:
        """Whether one of the connection's identities could see ``env`` (its sender or audience)."""
        return any(visible_to(env, agent_id) for agent_id in conn.bound)

    def narrow_envelopes(self, conn: Connection, op: str, result: Any) -> Any:
        """An envelope read cut down to what the connection's identities could see. A WAL page keeps the
        WAL's own positions and seqs: ``since``/``until`` and seqs still count every envelope of the channel,
        so a participant's page may be shorter than the range it asked for."""
        narrow = _ENVELOPE_NARROWS.get(op)
        return result if narrow is None else narrow(self, conn, result)

    def narrow(self, conn: Connection, op: str, params: dict[str, Any], result: Any) -> Any:
        """Cut a listing down to what a non-operator connection may see, and a read of envelopes down to
        those its identities could see."""
        if conn.operator:
            return result
        if op in _ENVELOPE_NARROWS:
            return self.narrow_envelopes(conn, op, result)
        narrow = _LISTING_NARROWS.get(op)
        return result if narrow is None else narrow(self, conn, params, result)


# ---------------------------------------------------------------------------------------------- after the op


def _page(policy: WirePolicy, conn: Connection, result: Any) -> Any:
    return [env for env in result if policy.sees(conn, env)]


def _seq_page(policy: WirePolicy, conn: Connection, result: Any) -> Any:
    return [(seq, env) for seq, env in result if policy.sees(conn, env)]


def _one(policy: WirePolicy, conn: Connection, result: Any) -> Any:
    return result if result is None or policy.sees(conn, result) else None


def _dry_run(policy: WirePolicy, conn: Connection, result: Any) -> Any:
    if isinstance(result, dict):
        # each participant's projection before and after is read from what that participant sees:
        # a participant is shown only its own identities' projections
        projections = result.get("projections") or {}
        result["projections"] = {pid: p for pid, p in projections.items() if pid in conn.bound}
    return result


def _limited(out: list[Any], params: dict[str, Any]) -> list[Any]:
    limit = params["_filter_limit"]
    return out if limit is None else out[: int(limit)]


def _channels(policy: WirePolicy, conn: Connection, params: dict[str, Any], result: Any) -> Any:
    if "_filter_limit" not in params:
        return result
    return _limited([md for md in result if any(p in conn.bound for p in md.participant_ids())], params)


def _tasks(policy: WirePolicy, conn: Connection, params: dict[str, Any], result: Any) -> Any:
    if "_filter_limit" not in params:
        return result
    return _limited([t for t in result if policy.task_visible(conn, t)], params)


def _stats(policy: WirePolicy, conn: Connection, params: dict[str, Any], result: Any) -> Any:
    return {cid: stats for cid, stats in result.items() if policy.participates(conn, cid)}


#: How each read of envelopes is narrowed to what a participant could see (a test checks that every op
#: of the catalogue whose result decodes an envelope is here).
_ENVELOPE_NARROWS: dict[str, Callable[[WirePolicy, Connection, Any], Any]] = {
    "read_wal": _page,
    "read_wal_until": _page,
    "read_wal_seq": _seq_page,
    "find_envelope_by_causation": _one,
    "dry_run": _dry_run,
}
ENVELOPE_READS = frozenset(_ENVELOPE_NARROWS)
#: How each listing is narrowed to what a non-operator connection may see.
_LISTING_NARROWS: dict[str, Callable[[WirePolicy, Connection, dict[str, Any], Any], Any]] = {
    "list_channels": _channels,
    "list_tasks": _tasks,
    "channel_stats": _stats,
}


__all__ = [
    "ENVELOPE_READS",
    "MIRROR_FAILED_KEYS",
    "SIZED",
    "Connection",
    "WirePolicy",
    "authorize_checkpoint",
    "check_sizes",
    "check_task_id",
]

"""The hub's behaviour for each op of the catalogue (``ag2net.protocol.ops``): the one door through which
every client (local or remote) reaches the hub.

``run_op`` looks the op up in the catalogue, checks the caller's access (the endpoint's ``authorize``:
a socket's ``WirePolicy``), parses the params into the op's typed request (an in-process caller may pass
the request itself), checks the hub's own rule for every caller (``ag2net.hub.access.CALLER_RULES``, for
the ops whose tag says ``caller``) and runs the op. Most ops are the hub's method of the same name, called
with the request's fields as keywords (``FORWARDED``); the few that need the calling connection have a handler here (``@handler``).
Results are Python values; the WebSocket server encodes them with the op's codec at its edge.

The hub is reached only through ``HubOps``, the narrow protocol of what this module calls.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope, check_text_tree
from ag2net.errors import ProtocolError
from ag2net.hub.access import CALLER_RULES, CallerHub, hub_log, turn_readers
from ag2net.hub.dry_run import dry_run as hub_dry_run
from ag2net.identity import Passport, Resume
from ag2net.protocol import ops as req
from ag2net.protocol.codec import Record, to_wire
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.protocol.ops import Request
from ag2net.tasks import TaskState


class _AuditStore(Protocol):
    async def read_audit(self, *, since: int = 0, limit: int | None = None) -> list[Any]: ...


class HubOps(CallerHub, Protocol):
    """What the op handlers need of a hub (``ag2net.hub.Hub`` is one; keyword options are the hub
    method's own), besides what the caller rules read (``CallerHub``); the forwarded ops (``FORWARDED``)
    call its methods of the ops' names besides."""

    store: _AuditStore

    @property
    def observe_position(self) -> int: ...

    async def register_identity(
        self, passport: Passport, resume: Resume | None, **options: Any
    ) -> Passport: ...

    def bind_endpoint(self, endpoint_id: Any, agent_id: str | None) -> None: ...

    def unbind_endpoint(self, endpoint: Any, agent_id: str) -> None: ...

    def lookup_agent(self, name_or_id: str) -> Passport: ...

    async def post_envelope(self, envelope: Envelope) -> str: ...

    def query_channels(self, **filters: Any) -> list[ChannelMetadata]: ...

    async def report_turn_failure(
        self, *, channel_id: str, agent_id: str, envelope_id: str, exc: Any, exc_type: str = "Error"
    ) -> None: ...

    async def record_turn(self, record: dict[str, Any]) -> str: ...

    async def list_turns(self, **filters: Any) -> list[dict[str, Any]]: ...

    async def update_task(self, task_id: str, **changes: Any) -> Any: ...

    async def fire_task_event(self, task_id: str, kind: str, payload: dict[str, Any]) -> None: ...


Handler = Callable[[Any, Any, Any], Awaitable[Any]]
#: The ops with a handler of their own; every other hub op is forwarded (``FORWARDED``).
HANDLERS: dict[str, Handler] = {}


def handler(name: str) -> Callable[[Handler], Handler]:
    """Register the hub's handler of the catalogue's op ``name``."""
    if name not in CATALOGUE or CATALOGUE[name].connection:
        raise ValueError(
            f"op {name!r} is not a hub op of the catalogue; declare it in ag2net/protocol/ops.py"
        )

    def register(fn: Handler) -> Handler:
        HANDLERS[name] = fn
        return fn

    return register


op = handler  # the name tests and readers knew

#: The params of each op left to admission's own text checks (``check_shape``, ``encode_envelope``):
#: its envelopes.
_ENVELOPES: dict[str, frozenset[str]] = {
    name: frozenset(p.name for p in spec.params if isinstance(p.codec, Record) and p.codec.cls is Envelope)
    for name, spec in CATALOGUE.items()
}
#: The ops whose every param is an envelope: a typed request of one skips the scan.
_TRUSTED_TEXT = frozenset(
    name
    for name, spec in CATALOGUE.items()
    if spec.params and _ENVELOPES[name] >= {p.name for p in spec.params}
)


def _check_text(name: str, params: Mapping[str, Any]) -> None:
    """Refuse any string the store cannot encode (a lone surrogate) before the op touches anything.

    An envelope is checked by admission (``check_shape`` and ``encode_envelope``).
    """
    envelopes = _ENVELOPES.get(name, frozenset())
    for key, value in params.items():
        if key in envelopes:
            continue
        if isinstance(value, (int, float, bool)) or value is None:
            continue
        check_text_tree(value, f"params.{key}")
        if isinstance(key, str) and not key.isascii():
            check_text_tree(key, "a key of params")


async def run_op(hub: Any, endpoint: Any, name: str, params: dict[str, Any] | Request[Any]) -> Any:
    """Run op ``name`` for ``endpoint``: ``params`` as JSON params or as the op's typed request."""
    spec = CATALOGUE.get(name)
    if spec is None or spec.connection:
        raise ProtocolError(f"unknown control-plane op: {name!r}")
    authorize = getattr(endpoint, "authorize", None)
    if isinstance(params, Request):
        request = params
        if authorize is not None or name not in _TRUSTED_TEXT:
            wire = request.to_params()
            _check_text(name, wire)
            if authorize is not None:  # a policy reads JSON params: let it, then read them again
                await authorize(hub, name, wire)
                request = spec.parse(wire)
    else:
        if not isinstance(params, dict):
            raise ProtocolError("params must be a JSON object")
        _check_text(name, params)
        if authorize is not None:
            await authorize(hub, name, params)
        request = spec.parse(params)
    rule = CALLER_RULES.get(name)
    if rule is not None:
        rule(hub, endpoint, request)
    own = HANDLERS.get(name)
    if own is not None:
        return await own(hub, endpoint, request)
    result = getattr(hub, FORWARDED[name])(**_fields(request))
    return await result if asyncio.iscoroutine(result) else result


def _fields(request: Request[Any]) -> dict[str, Any]:
    return {p.attr: getattr(request, p.attr) for p in request.spec.params}


# ---------------------------------------------------------------------------------------------- identities


@handler("register")
async def _register(hub: HubOps, endpoint: Any, r: req.Register) -> Passport:
    passport = r.passport
    assert passport is not None  # Register.check
    owner = None
    if passport.kind == "remote_agent":
        owner = next(iter(getattr(endpoint, "bound", ()) or ()), None)
    digest = r.secret_digest
    stamped = await hub.register_identity(
        passport,
        r.resume,
        skill_md=r.skill_md,
        rule=r.rule,
        owner_id=owner,
        secret_digest=digest if isinstance(digest, str) else None,
    )
    if endpoint is not None and r.bind:
        hub.bind_endpoint(endpoint, stamped.agent_id)
    hub_log.info("registered %s %r (%s)", stamped.effective_kind, stamped.name, stamped.agent_id)
    return stamped


@handler("bind")
async def _bind(hub: HubOps, endpoint: Any, r: req.Bind) -> Passport:
    """Re-bind an existing identity to this connection (a human reopening the same database)."""
    passport = hub.lookup_agent(r.name)
    hub.bind_endpoint(endpoint, passport.agent_id)
    return passport


@handler("unbind")
async def _unbind(hub: HubOps, endpoint: Any, r: req.Unbind) -> None:
    hub.unbind_endpoint(endpoint, r.agent_id)


# ---------------------------------------------------------------------------------------------- channels


@handler("post_envelope")
def _post_envelope(hub: HubOps, endpoint: Any, r: req.PostEnvelope) -> Awaitable[str]:
    return hub.post_envelope(r.envelope)  # the hot path: no forwarding step, no frame of its own


@handler("list_channels")
async def _list_channels(hub: HubOps, endpoint: Any, r: req.ListChannels) -> list[ChannelMetadata]:
    return hub.query_channels(
        agent_id=r.agent_id, state=r.state, include_terminal=r.include_terminal, limit=r.limit
    )


@handler("dry_run")
async def _dry_run(hub: HubOps, endpoint: Any, r: req.DryRun) -> dict[str, Any]:
    """What posting ``params.envelope`` would do now (``ag2net.hub.dry_run.dry_run``); nothing is written."""
    return await hub_dry_run(hub, r.envelope)  # type: ignore[arg-type]  # DryRunHost


# ---------------------------------------------------------------------------------------------- turns


@handler("report_turn_failure")
async def _report_turn_failure(hub: HubOps, endpoint: Any, r: req.ReportTurnFailure) -> None:
    await hub.report_turn_failure(
        channel_id=r.channel_id,
        agent_id=r.agent_id,
        envelope_id=r.envelope_id,
        exc=r.error or "",
        exc_type=r.exc_type or "Error",
    )


@handler("list_turns")
async def _list_turns(hub: HubOps, endpoint: Any, r: req.ListTurns) -> list[dict[str, Any]]:
    """Turn records, newest first: every agent's for operators, the caller's own agents' otherwise."""
    mine = turn_readers(hub, endpoint)  # the turn-record privacy rule (ag2net.hub.access)
    return await hub.list_turns(
        channel_id=r.channel_id,
        agent_id=r.agent_id,
        trigger_envelope_id=r.trigger_envelope_id,
        limit=req.DEFAULT_LIMIT if r.limit is None else r.limit,
        agent_ids=mine,
    )


# ---------------------------------------------------------------------------------------------- tasks, audit


@handler("update_task")
async def _update_task(hub: HubOps, endpoint: Any, r: req.UpdateTask) -> Any:
    return await hub.update_task(
        r.task_id,
        state=TaskState(r.state) if r.state else None,
        progress=r.progress,
        result=r.result,
        error=r.error,
    )


@handler("fire_task_event")
async def _fire_task_event(hub: HubOps, endpoint: Any, r: req.FireTaskEvent) -> None:
    await hub.fire_task_event(r.task_id, r.kind, dict(r.payload or {}))


@handler("names_for")
async def _names_for(hub: Any, endpoint: Any, r: req.NamesFor) -> dict[str, str]:
    return hub.names_for([str(i) for i in r.agent_ids or []])


@handler("list_audit")
async def _list_audit(hub: HubOps, endpoint: Any, r: req.ListAudit) -> list[Any]:
    return await hub.store.read_audit(since=r.since, limit=r.limit)


@handler("observe_position")
async def _observe_position(hub: HubOps, endpoint: Any, r: req.ObservePosition) -> int:
    return hub.observe_position


#: The hub method each remaining op calls with the request's fields as keywords: the op's own name.
FORWARDED: dict[str, str] = {
    name: name for name, spec in CATALOGUE.items() if not spec.connection and name not in HANDLERS
}
#: Every hub op, by name (its handler, or ``None`` for a forwarded one).
OPS: dict[str, Handler | None] = {name: HANDLERS.get(name) for name in (*HANDLERS, *FORWARDED)}


__all__ = [
    "FORWARDED",
    "HANDLERS",
    "OPS",
    "HubOps",
    "handler",
    "run_op",
    "to_wire",
]

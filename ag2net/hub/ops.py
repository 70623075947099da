"""The hub's behaviour for each op of the catalogue (``ag2net.protocol.ops``): the one door through which
every client (local or remote) reaches the hub.

``run_op`` looks the op up in the catalogue, checks the caller's access (the endpoint's ``authorize``),
decodes the typed params with the op's codecs (in-process callers pass objects through) and runs the
handler. Results are Python values; the WebSocket server encodes them with the op's codec at its edge.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import Envelope, check_text_tree
from ag2net.errors import AccessDeniedError, ProtocolError
from ag2net.hub.checkpoints import read_checkpoint, write_checkpoint
from ag2net.hub.local import LocalEndpoint
from ag2net.hub.probe import dry_run as probe_dry_run
from ag2net.identity import Passport, Resume, Rule
from ag2net.protocol.codec import to_wire
from ag2net.protocol.ops import OPS as CATALOGUE
from ag2net.tasks import TaskMetadata, TaskState

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub

Op = Callable[["Hub", Any, dict[str, Any]], Awaitable[Any]]

#: The hub's own log of registrations and refused posts (``ag2net.hub``, as ag2's hub logs them).
hub_log = logging.getLogger("ag2net.hub")
OPS: dict[str, Op] = {}


def op(name: str) -> Callable[[Op], Op]:
    """Register the hub's handler of the catalogue's op ``name``."""
    if name not in CATALOGUE or CATALOGUE[name].connection:
        raise ValueError(
            f"op {name!r} is not a hub op of the catalogue; declare it in ag2net/protocol/ops.py"
        )

    def register(fn: Op) -> Op:
        OPS[name] = fn
        return fn

    return register


def _record(value: Any, cls: type) -> Any:
    if value is None or isinstance(value, cls):
        return value
    if isinstance(value, dict):
        return cls.from_dict(value)
    raise ProtocolError(f"expected a {cls.__name__} object, got {type(value).__name__}")


def envelope_param(value: Any) -> Envelope:
    if isinstance(value, Envelope):
        return value
    if isinstance(value, dict):
        return Envelope.from_dict(value)
    raise ProtocolError("post_envelope needs params.envelope as an envelope object")


def _str(params: dict[str, Any], name: str, *, optional: bool = False) -> Any:
    value = params.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise ProtocolError(f"params.{name} must be a string")
    return value


def caller_is_operator(endpoint: Any) -> bool:
    """Whether the caller holds the operator role.

    The hub's own process is the operator of its hub: no endpoint (the hub calling itself) and an
    in-process link (the embedded workbench, demos, tests), unless that endpoint sets ``operator``
    to False. A remote connection is one only when its transport granted the role (``operator=True``).
    """
    if endpoint is None:
        return True
    if isinstance(endpoint, LocalEndpoint):
        return getattr(endpoint, "operator", True) is not False
    return getattr(endpoint, "operator", False) is True


def caller_agents(hub: Hub, endpoint: Any) -> set[str]:
    """The agents bound to ``endpoint`` now (the hub's binding table is the authority)."""
    return {agent_id for agent_id, bound in hub.inboxes.bindings.items() if bound is endpoint}


def _check_params_text(name: str, params: dict[str, Any]) -> None:
    """Refuse any string the store cannot encode (a lone surrogate) before the op touches anything.

    ``post_envelope``'s envelope is checked by admission (``check_shape`` and ``encode_envelope``).
    """
    for key, value in params.items():
        if name in ("post_envelope", "dry_run") and key == "envelope":
            continue
        if isinstance(value, (int, float, bool)) or value is None:
            continue
        check_text_tree(value, f"params.{key}")
        if isinstance(key, str) and not key.isascii():
            check_text_tree(key, "a key of params")


async def run_op(hub: Hub, endpoint: Any, name: str, params: dict[str, Any]) -> Any:
    fn = OPS.get(name)
    if fn is None:
        raise ProtocolError(f"unknown control-plane op: {name!r}")
    if not isinstance(params, dict):
        raise ProtocolError("params must be a JSON object")
    _check_params_text(name, params)
    authorize = getattr(endpoint, "authorize", None)
    if authorize is not None:
        await authorize(hub, name, params)
    return await fn(hub, endpoint, CATALOGUE[name].decode_params(params))


@op("register")
async def _register(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Passport:
    passport = _record(p.get("passport"), Passport)
    if passport is None:
        raise ProtocolError("register needs params.passport")
    owner = None
    if passport.kind == "remote_agent":
        owner = next(iter(getattr(endpoint, "bound", ()) or ()), None)
    stamped = await hub.register_identity(
        passport,
        _record(p.get("resume"), Resume),
        skill_md=p.get("skill_md"),
        rule=_record(p.get("rule"), Rule),
        owner_id=owner,
        # set by the WebSocket server only (a client's own "_secret_digest" is dropped before this)
        secret_digest=digest if isinstance(digest := p.get("_secret_digest"), str) else None,
    )
    if endpoint is not None and p.get("bind", True):
        hub.bind_endpoint(endpoint, stamped.agent_id)

    hub_log.info("registered %s %r (%s)", stamped.effective_kind, stamped.name, stamped.agent_id)
    return stamped


@op("bind")
async def _bind(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Passport:
    """Re-bind an existing identity to this connection (a human reopening the same database)."""
    passport = hub.lookup_agent(_str(p, "name"))
    hub.bind_endpoint(endpoint, passport.agent_id)
    return passport


@op("unbind")
async def _unbind(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    hub.unbind_endpoint(endpoint, _str(p, "agent_id"))


@op("get_agent")
async def _get_agent(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Passport:
    return await hub.get_agent(_str(p, "name_or_id"))


@op("get_resume")
async def _get_resume(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Resume:
    return await hub.get_resume(_str(p, "agent_id"))


@op("get_rule")
async def _get_rule(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Rule:
    return await hub.get_rule(_str(p, "agent_id"))


@op("get_skill")
async def _get_skill(hub: Hub, endpoint: Any, p: dict[str, Any]) -> str | None:
    return await hub.get_skill(_str(p, "agent_id"))


@op("get_skill_info")
async def _get_skill_info(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, Any]:
    return hub.get_skill_info(_str(p, "agent_id"))


@op("find_agent_id")
async def _find_agent_id(hub: Hub, endpoint: Any, p: dict[str, Any]) -> str | None:
    return hub.find_agent_id(_str(p, "name"))


@op("names_for")
async def _names_for(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, str]:
    ids = p.get("agent_ids") or []
    if not isinstance(ids, list):
        raise ProtocolError("params.agent_ids must be a list of ids")
    return hub.names_for([str(i) for i in ids])


@op("presence")
async def _presence(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, bool]:
    ids = p.get("agent_ids")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, str) for i in ids)):
        raise ProtocolError(
            "params.agent_ids must be a list of agent ids (strings) or null for every identity"
        )
    return hub.presence(ids)


@op("list_agents")
async def _list_agents(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[Passport]:
    for name in ("capability", "query", "kind", "sort_by"):
        _str(p, name, optional=True)
    limit = p.get("limit", 50)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ProtocolError("params.limit must be a non-negative integer or null")
    return await hub.list_agents(
        capability=p.get("capability"),
        query=p.get("query"),
        kind=p.get("kind"),
        sort_by=p.get("sort_by"),
        limit=limit,
    )


def _required(p: dict[str, Any], name: str, cls: type) -> Any:
    value = _record(p.get(name), cls)
    if value is None:
        raise ProtocolError(f"params.{name} is required: a {cls.__name__} object")
    return value


@op("set_resume")
async def _set_resume(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Resume:
    return await hub.set_resume(_str(p, "agent_id"), _required(p, "resume", Resume))


@op("set_skill")
async def _set_skill(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    await hub.set_skill(_str(p, "agent_id"), p.get("skill_md"))


@op("set_rule")
async def _set_rule(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Rule:
    return await hub.set_rule(_str(p, "agent_id"), _required(p, "rule", Rule))


@op("unregister")
async def _unregister(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    await hub.unregister(_str(p, "agent_id"))


@op("create_channel")
async def _create_channel(hub: Hub, endpoint: Any, p: dict[str, Any]) -> ChannelMetadata:
    participants = p.get("participants")
    if not isinstance(participants, list):
        raise ProtocolError("params.participants must be a list of agent ids")
    return await hub.create_channel(
        creator_id=_str(p, "creator_id"),
        manifest_type=_str(p, "manifest_type"),
        manifest_version=int(p.get("manifest_version", 1)),
        participants=participants,
        required_acks=p.get("required_acks"),
        ttl=p.get("ttl"),
        knobs=p.get("knobs"),
        intent=p.get("intent"),
        labels=p.get("labels"),
    )


@op("get_channel")
async def _get_channel(hub: Hub, endpoint: Any, p: dict[str, Any]) -> ChannelMetadata:
    return await hub.get_channel(_str(p, "channel_id"))


@op("list_channels")
async def _list_channels(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[ChannelMetadata]:
    state = _str(p, "state", optional=True)
    if state is not None and state not in {s.value for s in ChannelState}:
        allowed = ", ".join(s.value for s in ChannelState)
        raise ProtocolError(f"params.state must be one of {allowed}; got {state!r}")
    return hub.query_channels(
        agent_id=p.get("agent_id"),
        state=state,
        include_terminal=bool(p.get("include_terminal", False)),
        limit=p.get("limit", 50),
    )


@op("channel_stats")
async def _channel_stats(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, Any]:
    return hub.channel_stats()


@op("close_channel")
async def _close_channel(hub: Hub, endpoint: Any, p: dict[str, Any]) -> ChannelMetadata:
    return await hub.close_channel(_str(p, "channel_id"), reason=p.get("reason") or "")


def check_poster(hub: Hub, endpoint: Any, env: Envelope) -> None:
    """A post carries only an identity its own connection holds (SPEC decision 26), in-process as over the
    wire, operators and the embedded workbench included; the hub's binding table is the authority. The hub
    posting itself (no endpoint: invites, lifecycle envelopes, a sandbox replay) is not a connection. An
    unregistered sender is left to admission (``sender not registered``, as in ag2)."""
    if endpoint is None or env.sender_id not in hub.agents:
        return
    if hub.inboxes.bindings.get(env.sender_id) is endpoint:
        return
    name = hub.name_for(env.sender_id)
    hub_log.warning(
        "refused %s on channel %s: the posting connection does not hold %r (%s)",
        env.event_type,
        env.channel_id,
        name,
        env.sender_id,
    )
    raise AccessDeniedError(
        f"this connection does not hold '{name}' ({env.sender_id}): a post may carry only an identity its own "
        f"connection holds; post through the client that registered or attached '{name}'"
    )


@op("post_envelope")
async def _post_envelope(hub: Hub, endpoint: Any, p: dict[str, Any]) -> str:
    env = envelope_param(p.get("envelope"))
    check_poster(hub, endpoint, env)
    return await hub.post_envelope(env)


@op("read_wal")
async def _read_wal(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[Envelope]:
    return await hub.read_wal(_str(p, "channel_id"), since=int(p.get("since", 0)), until=p.get("until"))


@op("read_wal_seq")
async def _read_wal_seq(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[tuple[int, Envelope]]:
    return await hub.read_wal_seq(_str(p, "channel_id"), int(p["first_seq"]), int(p["last_seq"]))


@op("read_wal_until")
async def _read_wal_until(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Sequence[Envelope]:
    return await hub.read_wal_until(_str(p, "channel_id"), _str(p, "envelope_id"))


@op("wal_count")
async def _wal_count(hub: Hub, endpoint: Any, p: dict[str, Any]) -> int:
    return hub.wal_count(_str(p, "channel_id"))


@op("find_envelope_by_causation")
async def _find_by_causation(hub: Hub, endpoint: Any, p: dict[str, Any]) -> Envelope | None:
    return await hub.find_envelope_by_causation(
        _str(p, "channel_id"), sender_id=_str(p, "sender_id"), causation_id=_str(p, "causation_id")
    )


@op("can_send")
async def _can_send(hub: Hub, endpoint: Any, p: dict[str, Any]) -> bool:
    return hub.can_send(_str(p, "channel_id"), _str(p, "sender_id"), event_type=p.get("event_type"))


@op("explain_send")
async def _explain_send(hub: Hub, endpoint: Any, p: dict[str, Any]) -> tuple[bool, str]:
    ok, why = await hub.explain_send(
        _str(p, "channel_id"), _str(p, "sender_id"), event_type=p.get("event_type")
    )
    return (ok, why)


@op("dry_run")
async def _dry_run(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, Any]:
    """What posting ``params.envelope`` would do now (``ag2net.hub.probe.dry_run``); nothing is written."""
    env = p.get("envelope")
    if not isinstance(env, Envelope):
        raise ProtocolError("dry_run needs params.envelope as an envelope object")
    return await probe_dry_run(hub, env)


@op("pending_turns_for")
async def _pending_turns_for(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[Any]:
    return await hub.pending_turns_for(_str(p, "agent_id"))


@op("report_turn_failure")
async def _report_turn_failure(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    await hub.report_turn_failure(
        channel_id=_str(p, "channel_id"),
        agent_id=_str(p, "agent_id"),
        envelope_id=_str(p, "envelope_id"),
        exc=p.get("error") or "",
        exc_type=p.get("exc_type") or "Error",
    )


@op("record_turn")
async def _record_turn(hub: Hub, endpoint: Any, p: dict[str, Any]) -> str:
    """Store a turn record of one of the caller's agents; returns the hub-assigned ``turn_id``."""
    record = p.get("record")
    if not isinstance(record, dict):
        raise ProtocolError("params.record must be a turn record object")
    if not caller_is_operator(endpoint):
        agent_id = record.get("agent_id")
        if agent_id not in caller_agents(hub, endpoint):
            raise AccessDeniedError(
                f"a turn record may be written only by its own agent's connection; "
                f"this connection is not bound to agent '{agent_id}'"
            )
        channel_id = record.get("channel_id")
        if not isinstance(channel_id, str):
            raise ProtocolError("params.record.channel_id must be a string: the channel of the turn")
        md = hub.lookup_channel(channel_id)
        if agent_id not in md.participant_ids():
            raise AccessDeniedError(f"agent '{agent_id}' does not participate in channel '{md.channel_id}'")
    return await hub.record_turn(record)


def _limit(p: dict[str, Any], default: int) -> int:
    limit = p.get("limit", default)
    if limit is None:
        return default
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
        raise ProtocolError("params.limit must be a non-negative integer")
    return limit


@op("list_turns")
async def _list_turns(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[dict[str, Any]]:
    """Turn records, newest first: every agent's for operators, the caller's own agents' otherwise."""
    channel_id = _str(p, "channel_id", optional=True)
    agent_id = _str(p, "agent_id", optional=True)
    trigger = _str(p, "trigger_envelope_id", optional=True)
    mine = None
    if not caller_is_operator(endpoint):
        mine = caller_agents(hub, endpoint)
        if agent_id is not None and agent_id not in mine:
            raise AccessDeniedError(
                f"turn records of agent '{agent_id}' are private to its own connection and operators; "
                "attach with the operator token to read them"
            )
    return await hub.list_turns(
        channel_id=channel_id,
        agent_id=agent_id,
        trigger_envelope_id=trigger,
        limit=_limit(p, 50),
        agent_ids=mine,
    )


@op("get_task")
async def _get_task(hub: Hub, endpoint: Any, p: dict[str, Any]) -> TaskMetadata:
    return await hub.get_task(_str(p, "task_id"))


@op("list_tasks")
async def _list_tasks(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[TaskMetadata]:
    return await hub.list_tasks(
        agent_id=p.get("agent_id"),
        channel_id=p.get("channel_id"),
        state=p.get("state"),
        limit=p.get("limit", 50),
    )


@op("observe_task")
async def _observe_task(hub: Hub, endpoint: Any, p: dict[str, Any]) -> TaskMetadata:
    return await hub.observe_task(_record(p.get("metadata"), TaskMetadata))


@op("update_task")
async def _update_task(hub: Hub, endpoint: Any, p: dict[str, Any]) -> TaskMetadata:
    state = p.get("state")
    return await hub.update_task(
        _str(p, "task_id"),
        state=TaskState(state) if state else None,
        progress=p.get("progress"),
        result=p.get("result"),
        error=p.get("error"),
    )


@op("record_observation")
async def _record_observation(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    await hub.record_observation(
        owner_id=_str(p, "owner_id"),
        capability=_str(p, "capability"),
        outcome=p.get("outcome"),  # type: ignore[arg-type]  # the hub refuses a bad outcome itself
        latency_ms=p.get("latency_ms"),
        task_id=p.get("task_id"),
    )


@op("fire_task_event")
async def _fire_task_event(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    await hub.fire_task_event(_str(p, "task_id"), _str(p, "kind"), dict(p.get("payload") or {}))


@op("checkpoint_task")
async def _checkpoint_task(hub: Hub, endpoint: Any, p: dict[str, Any]) -> None:
    if not isinstance(p.get("state"), dict):
        raise ProtocolError("params.state must be a JSON object: the checkpoint to store")
    await write_checkpoint(hub, _str(p, "task_id"), p["state"])


@op("read_task_checkpoint")
async def _read_task_checkpoint(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, Any] | None:
    return await read_checkpoint(hub, _str(p, "task_id"))


@op("add_knowledge")
async def _add_knowledge(hub: Hub, endpoint: Any, p: dict[str, Any]) -> int:
    return await hub.add_knowledge(_str(p, "agent_id"), _str(p, "text"), source=p.get("source") or "")


@op("search_knowledge")
async def _search_knowledge(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[dict[str, Any]]:
    return await hub.search_knowledge(_str(p, "agent_id"), _str(p, "query"), int(p.get("limit", 10)))


@op("list_audit")
async def _list_audit(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[Any]:
    return await hub.store.read_audit(since=int(p.get("since", 0)), limit=p.get("limit"))


@op("health")
async def _health(hub: Hub, endpoint: Any, p: dict[str, Any]) -> dict[str, Any]:
    return hub.health()


@op("observe_position")
async def _observe_position(hub: Hub, endpoint: Any, p: dict[str, Any]) -> int:
    return hub.observe_position


@op("adapter_types")
async def _adapter_types(hub: Hub, endpoint: Any, p: dict[str, Any]) -> list[str]:
    return hub.adapter_types()


__all__ = ["OPS", "caller_agents", "caller_is_operator", "envelope_param", "op", "run_op", "to_wire"]

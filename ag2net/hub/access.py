"""Edge: the hub's own access rules, checked for every caller (in-process connections as well as sockets).

Each op's access is declared once, by its tag in the catalogue (``ag2net.protocol.ops.Access``), and each
rule's body has one home: the kinds the server reads from the tag (``open``, ``directory``, ``agent``,
``channel``, ``operator``) and the socket-only ``policy`` rules live in ``ag2net.server.policy``
(``WirePolicy``, which a socket passes before the hub sees the op); the rules every caller meets live
here, one per op tagged ``caller`` (``CALLER_RULES``, checked by ``run_op`` on the parsed request, after
the socket's policy):

* ``post_envelope``: a post carries only an identity its own connection holds (SPEC decision 26);
* ``record_turn``: a turn record is written by its own agent's connection, of a channel that agent is in;
* ``list_turns``: another agent's turn records are read by operators only (and a listing holds only the
  caller's own agents' records: ``turn_readers``).

The hub itself (no endpoint) and operators (``caller_is_operator``) pass the turn-record rules; the rest
is refused with ``AccessDeniedError``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.errors import AccessDeniedError, ProtocolError
from ag2net.protocol import ops as req
from ag2net.protocol.ops import OPS as CATALOGUE

#: The hub's own log of registrations and refused posts (``ag2net.hub``, as ag2's hub logs them).
hub_log = logging.getLogger("ag2net.hub")


class _Bindings(Protocol):
    bindings: Mapping[str, Any]


class _Agents(Protocol):
    agents: Mapping[str, Any]


class CallerHub(Protocol):
    """What the caller rules read of a hub (``ag2net.hub.Hub`` is one)."""

    identities: _Agents
    delivery: _Bindings

    def lookup_channel(self, channel_id: str) -> ChannelMetadata: ...

    def name_for(self, agent_id: str, *, default: str | None = None) -> str: ...


CallerRule = Callable[[Any, Any, Any], None]
#: The hub's own access rule of each op tagged ``caller`` (``Access.caller``), by op name.
CALLER_RULES: dict[str, CallerRule] = {}


def caller_rule(name: str) -> Callable[[CallerRule], CallerRule]:
    """Register the hub's access rule of the catalogue's op ``name`` (its tag must say ``caller``)."""
    spec = CATALOGUE.get(name)
    if spec is None or spec.connection or not spec.access.caller:
        raise ValueError(
            f"op {name!r} is not a hub op whose catalogue tag says caller=True; "
            "tag it in ag2net/protocol/ops.py (e.g. POLICY_AND_CALLER)"
        )

    def register(fn: CallerRule) -> CallerRule:
        CALLER_RULES[name] = fn
        return fn

    return register


def caller_is_operator(endpoint: Any) -> bool:
    """Whether the caller holds the operator role.

    The hub's own process is the operator of its hub: no endpoint (the hub calling itself) and an
    in-process link (the embedded workbench, demos, tests), unless that endpoint sets ``operator``
    to False. A remote connection is one only when its transport granted the role (``operator=True``).
    """
    if endpoint is None:
        return True
    if getattr(endpoint, "in_process", False):
        return getattr(endpoint, "operator", True) is not False
    return getattr(endpoint, "operator", False) is True


def caller_agents(hub: CallerHub, endpoint: Any) -> set[str]:
    """The agents bound to ``endpoint`` now (the hub's binding table is the authority)."""
    return {agent_id for agent_id, bound in hub.delivery.bindings.items() if bound is endpoint}


# ---------------------------------------------------------------------------------------------- posts


def check_poster(hub: CallerHub, endpoint: Any, env: Envelope) -> None:
    """A post carries only an identity its own connection holds (SPEC decision 26), in-process as over the
    wire, operators and the embedded workbench included; the hub's binding table is the authority. The hub
    posting itself (no endpoint: invites, lifecycle envelopes, a sandbox replay) is not a connection. An
    unregistered sender is left to admission (``sender not registered``, as in ag2)."""
    if endpoint is None or env.sender_id not in hub.identities.agents:
        return
    if hub.delivery.bindings.get(env.sender_id) is endpoint:
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


@caller_rule("post_envelope")
def _poster_holds_the_sender(hub: CallerHub, endpoint: Any, r: req.PostEnvelope) -> None:
    check_poster(hub, endpoint, r.envelope)


# ---------------------------------------------------------------------------------------------- turn records


@caller_rule("record_turn")
def _own_turn_record(hub: CallerHub, endpoint: Any, r: req.RecordTurn) -> None:
    """A turn record is written by its own agent's connection, of a channel that agent is in."""
    if caller_is_operator(endpoint):
        return
    record = r.record
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


@caller_rule("list_turns")
def _own_turn_listing(hub: CallerHub, endpoint: Any, r: req.ListTurns) -> None:
    """Another agent's turn records are read by operators only."""
    if (
        r.agent_id is not None
        and not caller_is_operator(endpoint)
        and r.agent_id not in caller_agents(hub, endpoint)
    ):
        raise AccessDeniedError(
            f"turn records of agent '{r.agent_id}' are private to its own connection and operators; "
            "attach with the operator token to read them"
        )


def turn_readers(hub: CallerHub, endpoint: Any) -> set[str] | None:
    """The agents whose turn records a ``list_turns`` of this caller holds: every agent's for operators
    (``None``), the caller's own agents' otherwise."""
    return None if caller_is_operator(endpoint) else caller_agents(hub, endpoint)


__all__ = [
    "CALLER_RULES",
    "CallerHub",
    "CallerRule",
    "caller_agents",
    "caller_is_operator",
    "caller_rule",
    "check_poster",
    "hub_log",
    "turn_readers",
]

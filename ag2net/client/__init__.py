"""Clients of the hub: ``HubClient`` (a connection), ``AgentClient``, ``HumanClient``, ``Channel``,
the default handler with its hooks, turn records and the network plugin."""

from ag2net.client.agent_client import AgentClient, handling_envelope
from ag2net.client.channel import Channel
from ag2net.client.handler import (
    default_handler,
    read_wal_until,
    resolve_view_policy,
    run_turn,
    stamp_dependencies,
)
from ag2net.client.hub_client import HubClient
from ag2net.client.human_client import HumanClient
from ag2net.client.plugin import NetworkPlugin
from ag2net.client.turns import TurnPreview, TurnRecord, preview_turn

__all__ = [
    "AgentClient",
    "Channel",
    "HubClient",
    "HumanClient",
    "NetworkPlugin",
    "TurnPreview",
    "TurnRecord",
    "default_handler",
    "handling_envelope",
    "preview_turn",
    "read_wal_until",
    "resolve_view_policy",
    "run_turn",
    "stamp_dependencies",
]

"""The hub: registry, channels, admission, WAL, dispatch, hydrate, expectations, tasks, observe stream."""

from ag2net.hub.audit import *
from ag2net.hub.auth import ApiKeyAuth, AuthRegistry, NoAuth
from ag2net.hub.hub import AgentRecord, Hub, PendingTurn
from ag2net.hub.observe import ObservedEvent, ObserveLog

__all__ = [
    "AgentRecord",
    "ApiKeyAuth",
    "AuthRegistry",
    "Hub",
    "NoAuth",
    "ObserveLog",
    "ObservedEvent",
    "PendingTurn",
]

"""The hub, in three rings (each module's docstring says which):

* core — pure decisions over the tables, no awaits: ``core`` (tables, one-call admission, routing),
  ``plans`` (opening a channel, registration checks), ``rules``, ``expectations``, ``records``;
* shell — the components that own the hub's state and await the store, the links and the listeners,
  reached by name from ``Hub`` (``hub.py``): ``identities``, ``channels``, ``admission``, ``delivery``,
  ``tasks``, ``expectations``/``sweepers``, ``logs``, ``audit``, ``listeners``, ``arbitration``,
  ``turns``, ``hydration``;
* edges — what other packages call, typed against narrow protocols: ``dry_run``, ``checkpoints``, ``access``, ``ops``,
  ``local``.
"""

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

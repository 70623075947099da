"""The debugger's headless library: who could see what, what the protocol thought at each seq, which
chain of causes and delegations led to an envelope, and what an envelope would do before it is sent.

- ``visibility(hub, channel_id)``: envelope x participant: delivered (and why not), projected, as which role.
- ``states_at(hub, channel_id)``: the adapter state after each seq, folded once and cached.
- ``causation_tree(hub, envelope_id)``: causes and consequences across channels (delegations included).
- ``dry_run(hub_or_client, envelope)``: the ``dry_run`` op: admission, recipients, projection deltas, state after.
- ``fork(hub_or_client, channel_id, at_seq)``: a sandbox hub holding the channel as it was at a seq;
  ``replay(source, sandbox, overrides=...)`` drives its agents on (replay models, which answer only a
  model request equal to a recorded one, and recorded tool results by default: a no-change replay at any
  seq reproduces the original) and ``compare(result)`` lines the transcripts and turns up, names what
  changed first and gives the verdict in words.

Everything here reads; nothing writes to the hub or its store. Each function runs the hub's own code
(admission, dispatch, the views, the adapters' folds, the expectation evaluators) on what it inspects.
"""

from ag2net.debug.causation import CausationNode, CausationTree, causation_tree
from ag2net.debug.dry_run import DryRun, dry_run
from ag2net.debug.fork import Sandbox, fork
from ag2net.debug.replay import (
    Comparison,
    Override,
    ReplayModel,
    ReplayResult,
    ToolPolicy,
    compare,
    network_tools,
    replay,
)
from ag2net.debug.scrubber import ProtocolState, Scrubber, states_at
from ag2net.debug.visibility import Cell, Row, VisibilityMatrix, visibility

__all__ = [
    "CausationNode",
    "CausationTree",
    "Cell",
    "Comparison",
    "DryRun",
    "Override",
    "ProtocolState",
    "ReplayModel",
    "ReplayResult",
    "Row",
    "Sandbox",
    "Scrubber",
    "ToolPolicy",
    "VisibilityMatrix",
    "causation_tree",
    "compare",
    "dry_run",
    "fork",
    "network_tools",
    "replay",
    "states_at",
    "visibility",
]

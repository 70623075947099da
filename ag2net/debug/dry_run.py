"""Composer dry-run: what posting an envelope would do now, without posting it.

``await dry_run(hub_or_client, envelope)`` runs the hub's ``dry_run`` op (``ag2net.hub.dry_run.dry_run``):
the admission a real post runs (``ag2net.hub.core.admit``, then the encoding check before the append), so a
refusal is the very message the post would raise; the recipients the hub's dispatch would queue it for
(``ag2net.hub.delivery.addressees``, the function the dispatch itself asks: none for an invite's ack or
reject; dispatch order, priority, whether each is connected and how many deliveries it has not acknowledged);
each participant's projection before and after (what its model would get on its next turn, as removed and
added events); and the adapter state after the fold (who is expected next, whether the channel would close).
Nothing is written, stamped or delivered. Over a socket a participant may dry-run only as an identity its
connection holds; an operator as anyone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.debug.fields import FieldsDict
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError, error_from_code


@dataclass(slots=True)
class DryRun(FieldsDict):
    """The ``dry_run`` op's answer, typed. ``refusal`` holds ``error``, ``code``, ``message``, ``advice``."""

    channel_id: str
    sender_id: str
    event_type: str
    admitted: bool
    refusal: dict[str, Any] | None = None
    recipients: list[dict[str, Any]] = field(default_factory=list)
    projections: dict[str, dict[str, Any]] = field(default_factory=dict)
    state_before: Any = None
    state_after: Any = None
    expected_before: dict[str, Any] | None = None
    expected_after: dict[str, Any] | None = None
    closes: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> DryRun:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})

    @property
    def message(self) -> str:
        """The refusal's message (what a post would raise), or ``""`` when admitted."""
        return str(self.refusal.get("message", "")) if self.refusal else ""

    def error(self) -> NetworkError | None:
        """The refusal as the exception a post would raise (its class by wire code), or None."""
        if not self.refusal:
            return None
        return error_from_code(str(self.refusal.get("code", "error")), self.message)

    @property
    def recipient_ids(self) -> list[str]:
        return [r["agent_id"] for r in self.recipients]

    def added_for(self, participant_id: str) -> list[dict[str, Any]]:
        """The events ``participant_id``'s next projection would gain."""
        return list(self.projections.get(participant_id, {}).get("added", []))


async def dry_run(hub_or_client: Any, envelope: Envelope) -> DryRun:
    """What posting ``envelope`` would do now, on a ``Hub`` (in-process) or through a ``HubClient``."""
    if hasattr(hub_or_client, "call"):  # a HubClient: the op, over whichever link it holds
        data = await hub_or_client.call("dry_run", envelope=envelope)
    else:
        data = await hub_or_client.handle_op(None, "dry_run", {"envelope": envelope})
    return DryRun.from_dict(data)


__all__ = ["DryRun", "dry_run"]

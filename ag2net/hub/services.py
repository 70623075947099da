"""Shell: ``Services`` — what every component of one hub uses: its store, clock and id source, the audit
trail, the listeners and the observe stream, and the stamp it puts on what it admits or makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ag2net.envelope import Envelope
    from ag2net.hub.audit import Audit
    from ag2net.hub.listeners import Listeners
    from ag2net.hub.observe import ObserveLog
    from ag2net.ids import IdSource
    from ag2net.store import Store


@dataclass(eq=False)
class Services:
    """One hub's shared services (no state of the network's own: the components hold that)."""

    store: Store
    clock: Callable[[], str]
    ids: IdSource
    _: KW_ONLY
    audit: Audit
    listeners: Listeners
    observe_log: ObserveLog

    def stamp(self, env: Envelope) -> None:
        """A fresh envelope id and the clock's time (reference §1.2), on what admission admits and on the
        lifecycle's own close (``ag2net.debug.fork`` replaces it on the instance to re-admit an envelope
        under its own id)."""
        env.envelope_id = self.ids.new_envelope_id()
        env.created_at = self.clock()


__all__ = ["Services"]

"""``list_turns`` as both built-in stores answer it: the filters read once, the matching left to each store."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from typing import Any

from ag2net.store.base import optional_text

TURN_COLUMNS = ("channel_id", "agent_id", "trigger_envelope_id")
"""The fields of a turn record a store indexes (each a string or absent) and ``list_turns`` filters on."""


class TurnListing(ABC):
    """``list_turns`` for the built-in stores: the filters are read here, once; a store answers
    ``_select_turns`` with them."""

    async def list_turns(
        self,
        *,
        channel_id: str | None = None,
        agent_id: str | None = None,
        trigger_envelope_id: str | None = None,
        limit: int = 50,
        agent_ids: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        given = dict(zip(TURN_COLUMNS, (channel_id, agent_id, trigger_envelope_id), strict=True))
        equal = {column: value for column, value in given.items() if value is not None}
        wanted = None if agent_ids is None else sorted({a for a in agent_ids if isinstance(a, str)})
        if wanted == [] or limit <= 0:
            return []
        return await self._select_turns(equal, wanted, limit)

    @staticmethod
    def turn_columns(record: dict) -> dict[str, str | None]:
        """The ``TURN_COLUMNS`` of a turn record: each a string, or None when absent or not a string."""
        return {key: optional_text(record, key) for key in TURN_COLUMNS}

    @abstractmethod
    async def _select_turns(
        self, equal: dict[str, str], agent_ids: list[str] | None, limit: int
    ) -> list[dict[str, Any]]:
        """The newest ``limit`` (1 or more) turn records whose ``channel_id`` / ``agent_id`` /
        ``trigger_envelope_id`` equal those in ``equal`` and, unless None, whose agent is one of
        ``agent_ids`` (sorted, never empty), newest first."""


__all__ = ["TURN_COLUMNS", "TurnListing"]

"""(No tests here.) What the turn-breakpoint and approval tests share: the hub they step into (the real
``Hub``, on SQLite) and how a person finds what waits for them (``list_waiting``)."""

from __future__ import annotations

from typing import Any

from support import quiet, until

from ag2net.breakpoints import WaitingItem
from ag2net.hub import Hub
from ag2net.store import SqliteStore


async def open_stepping_hub(tmp_path: Any, **settings: Any) -> Hub:
    """A hub on real SQLite (``tmp_path / "hub.db"``) with quiet settings (``settings`` over them)."""
    return await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet(invite_ack_timeout=3, **settings))


async def next_waiting(hub_or_client: Any, kind: str, timeout: float = 10.0) -> WaitingItem:
    """The first item of ``kind`` waiting on a person (waits until there is one)."""
    found: list[WaitingItem] = []

    async def look() -> bool:
        found[:] = [i for i in await hub_or_client.list_waiting() if i.kind == kind and i.state == "waiting"]
        return bool(found)

    await until(look, timeout, message=f"no {kind} item came to the inbox")
    return found[0]


__all__ = ["next_waiting", "open_stepping_hub"]

"""(No tests here.) What the turn-breakpoint and approval tests share: the hub they step into and how a person answers.

``stepping_hub`` opens the real ``Hub`` when it has the stepping-in ops (``turn_gate``, ``pause_turn``,
``request_approval``, ``break_on``, ``list_waiting``, ``answer_waiting``); while the hub side (issue 24, H1)
has not landed it opens ``StandInHub``: a real ``Hub`` subclass that implements those six methods simply
(turn specs ``agent:NAME`` / ``sender:NAME`` only, one future per waiting item). It is a STAND-IN, clearly
so, and goes away when the hub has the ops: the tests are written against the ops' signatures only.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from support import quiet, until

from ag2net.breakpoints import Breakpoint, Decision, WaitingItem
from ag2net.hub import Hub
from ag2net.store import SqliteStore

HUB_HAS_STEPPING = callable(getattr(Hub, "turn_gate", None))


class StandInHub(Hub):
    """STAND-IN for the hub side of issue 24 (used only while ``Hub`` has no ``turn_gate``)."""

    _ids = itertools.count(1)

    def _stand_in(self) -> dict[str, Any]:
        state = self.__dict__.get("_stand_in_state")
        if state is None:
            state = self.__dict__["_stand_in_state"] = {"turn_specs": [], "items": {}, "futures": {}}
        return state

    async def break_on(
        self, query: str, *, on: str = "envelope", enabled: bool = True, by: str = ""
    ) -> Breakpoint:
        assert on == "turn", "the stand-in hub only pauses turns"
        term, _, name = query.partition(":")
        assert term in ("agent", "sender") and name, f"the stand-in hub takes agent:NAME, not {query!r}"
        self._stand_in()["turn_specs"].append(name)
        return Breakpoint(f"bp{next(self._ids)}", query, on=on, enabled=enabled, created_by=by)

    async def turn_gate(self, agent_id: str, channel_id: str, trigger_envelope_id: str = "") -> bool:
        return self.name_for(agent_id) in self._stand_in()["turn_specs"]

    async def _wait(self, kind: str, agent_id: str, channel_id: str, detail: dict[str, Any]) -> Decision:
        state = self._stand_in()
        item = WaitingItem(f"w{next(self._ids)}", kind, channel_id, agent_id, "", detail)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        state["items"][item.item_id], state["futures"][item.item_id] = item, future
        return await future

    async def pause_turn(
        self, agent_id: str, channel_id: str, request: dict[str, Any], trigger_envelope_id: str = ""
    ) -> Decision:
        detail = {"request": request, "trigger_envelope_id": trigger_envelope_id}
        return await self._wait("turn", agent_id, channel_id, detail)

    async def request_approval(
        self,
        agent_id: str,
        channel_id: str,
        tool: str,
        arguments: dict[str, Any],
        reason: str = "",
        call_id: str = "",
    ) -> Decision:
        detail = {"tool": tool, "arguments": arguments, "reason": reason, "call_id": call_id}
        return await self._wait("approval", agent_id, channel_id, detail)

    async def list_waiting(self, *, channel_id: str | None = None) -> list[WaitingItem]:
        items = self._stand_in()["items"].values()
        return [i for i in items if i.state == "waiting" and channel_id in (None, i.channel_id)]

    async def answer_waiting(self, item_id: str, action: str, **answer: Any) -> WaitingItem:
        state = self._stand_in()
        item = state["items"][item_id]
        item.state, item.answer = "answered", {"action": action, **answer}
        state["futures"][item_id].set_result(Decision(action, **answer))
        return item


async def open_stepping_hub(tmp_path: Any) -> Hub:
    """A hub with the stepping-in ops on real SQLite (the real one, or the stand-in until it lands)."""
    cls = Hub if HUB_HAS_STEPPING else StandInHub
    return await cls.open(SqliteStore(tmp_path / "hub.db"), **quiet(invite_ack_timeout=3))


async def next_waiting(hub_or_client: Any, kind: str, timeout: float = 10.0) -> WaitingItem:
    """The first item of ``kind`` waiting on a person (waits until there is one)."""
    found: list[WaitingItem] = []

    async def look() -> bool:
        found[:] = [i for i in await hub_or_client.list_waiting() if i.kind == kind and i.state == "waiting"]
        return bool(found)

    await until(look, timeout, message=f"no {kind} item came to the inbox")
    return found[0]


__all__ = ["HUB_HAS_STEPPING", "StandInHub", "next_waiting", "open_stepping_hub"]

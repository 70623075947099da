"""A ``--network`` function for ``ag2net replay`` tests: registers the demo's drafter with its own tools
(``submit_for_review``), so ``--tool drafter.submit_for_review=live`` has the real function to call."""

from __future__ import annotations

from typing import Any

from ag2net import Agent, HubClient, Passport, Resume
from ag2net.demo import drafter_tools


async def register(hub: Any) -> None:
    hc = HubClient.local(hub)
    await hc.register(Agent("drafter", tools=drafter_tools()), Passport(name="drafter"), Resume())

"""Runs under a real ``ag2==1.2.1`` (the interop venv): an ag2 hub served with ag2's ``serve_ws``, with one
agent on a scripted model. Prints ``READY <port>`` when listening."""

from __future__ import annotations

import asyncio
import sys

from ag2 import Agent
from ag2.knowledge import MemoryKnowledgeStore
from ag2.network import Hub, HubClient, LocalLink, serve_ws
from ag2.testing import TestConfig


async def main(name: str, reply: str) -> None:
    hub = await Hub.open(MemoryKnowledgeStore(), ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient(LocalLink(hub))
    await local.register(Agent(name, "Answer briefly.", config=TestConfig(reply)))
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        print(f"READY {server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

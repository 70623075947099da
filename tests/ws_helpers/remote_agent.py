"""Subprocess: one scripted agent attached to a hub over WebSocket; prints ``READY <agent_id>`` when registered."""

from __future__ import annotations

import argparse
import asyncio

from ag2net import Agent, HubClient, ScriptedModel


async def main(url: str, name: str, reply: str) -> None:
    client = HubClient.connect(url)
    agent = await client.register(Agent(name, ScriptedModel(reply, loop=True)))
    print(f"READY {agent.agent_id}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await client.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("name")
    parser.add_argument("reply")
    args = parser.parse_args()
    asyncio.run(main(args.url, args.name, args.reply))

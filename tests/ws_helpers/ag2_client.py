"""Runs under a real ``ag2==1.2.1`` (the interop venv): an ag2 human asks an agent over ag2's own WsLink.

Prints one JSON line: the reply text, the channel id and its state as the ag2 client sees it.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ag2.network import EV_TEXT, HubClient, Passport, WsLink


async def main(url: str, target: str, question: str) -> None:
    client = HubClient(WsLink(url), rpc_timeout=20)
    try:
        human = await client.register_human(Passport(name="ag2-human", kind="human"))
        channel = await human.open(type="consulting", target=target)
        await human.send(channel.channel_id, question)
        reply = await human.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.channel_id == channel.channel_id, timeout=20
        )
        metadata = await client.get_channel(channel.channel_id)
        print(
            json.dumps(
                {
                    "reply": reply.event_data.get("text"),
                    "sender_id": reply.sender_id,
                    "channel_id": channel.channel_id,
                    "human_id": human.agent_id,
                    "state": getattr(metadata.state, "value", metadata.state),
                }
            ),
            flush=True,
        )
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))

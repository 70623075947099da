"""Runs under a real ``ag2==1.2.1`` (the interop venv): an ag2 human registers on a token server with the
shared key (ag2 has no identity secrets) and asks an agent once.

Prints one JSON line: the reply, or the error ag2 raised (its class name and message).
"""

from __future__ import annotations

import asyncio
import json
import sys

from ag2.network import EV_TEXT, AuthBlock, HubClient, Passport, WsLink


async def main(url: str, token: str, target: str, question: str) -> None:
    client = HubClient(WsLink(url), rpc_timeout=20)
    try:
        passport = Passport(
            name="ag2-human", kind="human", auth=AuthBlock(scheme="api_key", claim={"token": token})
        )
        try:
            human = await client.register_human(passport)
        except Exception as exc:
            print(json.dumps({"error": type(exc).__name__, "message": str(exc)}), flush=True)
            return
        channel = await human.open(type="consulting", target=target)
        await human.send(channel.channel_id, question)
        reply = await human.next_envelope(
            predicate=lambda e: e.event_type == EV_TEXT and e.channel_id == channel.channel_id, timeout=20
        )
        print(json.dumps({"reply": reply.event_data.get("text"), "human_id": human.agent_id}), flush=True)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))

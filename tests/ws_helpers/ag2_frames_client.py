"""Runs under a real ``ag2==1.2.1`` (the interop venv): ag2's own frame-level ``WsLink(url).client()``
speaks frames to a hub (``hello`` for a name, ``hello`` for an unknown name, one ``request``, a ``ping``)
and prints every frame it received as one JSON list (``encode_frame`` of each)."""

from __future__ import annotations

import asyncio
import json
import sys

from ag2.network import HelloFrame, PingFrame, RequestFrame, WsLink, encode_frame


async def main(url: str, name: str) -> None:
    client = WsLink(url, ping_interval=None).client()
    await client.open()
    frames = client.frames()
    received = []
    before = client.endpoint_id
    for frame in (
        HelloFrame(name),
        HelloFrame("nobody"),
        RequestFrame("r1", "get_agent", {"name_or_id": name}),
        PingFrame(),
    ):
        await client.send_frame(frame)
        received.append(encode_frame(await asyncio.wait_for(anext(frames), 10)))
    await client.close()
    print(
        json.dumps(
            {"endpoint_id_before": before, "endpoint_id_after": client.endpoint_id, "frames": received}
        )
    )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

"""Subprocess for the durability test: posts envelopes through a hub and prints each acknowledged id."""

from __future__ import annotations

import asyncio
import sys

from ag2net import HubClient, Passport
from ag2net.hub import Hub
from ag2net.store import SqliteStore


async def main(path: str) -> None:
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    await hc.register_human(Passport(name="ben", kind="human"))
    ch = await ana.open(type="conversation", target="ben")
    print(f"channel {ch.channel_id}", flush=True)
    out = sys.stdout

    async def writer(k: int) -> None:
        i = 0
        while True:
            envelope_id = await ana.send(ch.channel_id, f"w{k}-{i} " + "payload " * 8)
            out.write(f"ack {envelope_id}\n")
            out.flush()
            i += 1

    await asyncio.gather(*(writer(k) for k in range(8)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

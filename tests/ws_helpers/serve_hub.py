"""Subprocess: a hub on a SQLite file served over WebSocket on 127.0.0.1; prints ``READY <port>`` when up."""

from __future__ import annotations

import argparse
import asyncio

from ag2net.hub import Hub
from ag2net.server import serve_ws
from ag2net.store import SqliteStore


async def main(path: str, port: int, operator_token: str | None) -> None:
    hub = await Hub.open(SqliteStore(path), ttl_sweep_interval=0, expectation_sweep_interval=0)
    async with serve_ws(hub, "127.0.0.1", port, operator_token=operator_token) as server:
        print(f"READY {server.port}", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--operator-token", default=None)
    args = parser.parse_args()
    asyncio.run(main(args.db, args.port, args.operator_token))

"""Runs under a real ``ag2==1.2.1`` (the interop venv): ag2's ``HubBackedCheckpointStore`` over ag2's own
WsLink writes and reads a task checkpoint; a second ag2 connection tries to read and write it.

Prints one JSON line: what the owner read back and what the other connection was answered.
"""

from __future__ import annotations

import asyncio
import json
import sys

from ag2.network import HubBackedCheckpointStore, HubClient, Passport, WsLink


async def _outcome(coro) -> str:
    try:
        result = await coro
    except Exception as exc:  # the answer the server gave, by class name
        return type(exc).__name__
    return json.dumps(result)


async def main(url: str, task_id: str) -> None:
    owner = HubClient(WsLink(url), rpc_timeout=20)
    other = HubClient(WsLink(url), rpc_timeout=20)
    try:
        await owner.register_human(Passport(name="ag2-owner", kind="human"))
        await other.register_human(Passport(name="ag2-other", kind="human"))
        store = HubBackedCheckpointStore(owner)
        before = await store.read(task_id)
        await store.write(task_id, {"step": 1})
        await store.write(task_id, {"step": 2, "notes": ["resumable"]})
        print(
            json.dumps(
                {
                    "before": before,
                    "after": await store.read(task_id),
                    "other_read": await _outcome(other.read_task_checkpoint(task_id)),
                    "other_write": await _outcome(other.checkpoint_task(task_id, {"step": 666})),
                }
            ),
            flush=True,
        )
    finally:
        await other.close()
        await owner.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))

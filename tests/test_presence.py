"""Presence: the ``presence`` op says which identities are bound to a live connection now, and the observe
stream carries ``agent`` events ``bound`` / ``unbound`` as an identity gets or loses its connection.

Over the in-process link, over a real WebSocket server on 127.0.0.1 (a client that closes, a client
process that is killed) and, for a connection that may not read the directory, the refusal.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from support import until
from websockets.asyncio.client import connect as ws_connect

from ag2net import HubClient, Passport
from ag2net.errors import ProtocolError
from ag2net.hub import Hub
from ag2net.server import serve_ws

OPERATOR = "op-secret"


pytestmark = pytest.mark.hub(store="memory")


def presence_events(events: list[Any]) -> list[tuple[str, str | None, str | None]]:
    return [
        (ev.payload["kind"], ev.payload.get("name"), ev.payload.get("reason"))
        for ev in events
        if ev.kind == "agent" and ev.payload.get("kind") in ("bound", "unbound")
    ]


class Watcher:
    """Follows a client's observe stream into ``events`` (a task, cancelled by ``stop``)."""

    def __init__(self, client: HubClient, since: int) -> None:
        self.events: list[Any] = []

        async def run() -> None:
            async for ev in client.observe(since=since):
                self.events.append(ev)

        self.task = asyncio.create_task(run())

    def presence(self) -> list[tuple[str, str | None, str | None]]:
        return presence_events(self.events)

    async def stop(self) -> None:
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task


async def test_in_process_presence_follows_the_connection(hub: Hub) -> None:
    operator = HubClient.local(hub)
    start = hub.observe_position
    ana_client = HubClient.local(hub)
    ana = await ana_client.register_human(Passport(name="ana", kind="human"))
    # an identity registered without a connection (bind=False): known, but offline
    ghost = await operator.call("register", passport=Passport(name="ghost"), bind=False)
    assert await operator.call("presence") == {ana.agent_id: True, ghost.agent_id: False}
    assert await operator.call("presence", agent_ids=[ghost.agent_id, "no-such-id"]) == {
        ghost.agent_id: False
    }
    assert await operator.presence([ghost.agent_id]) == {ghost.agent_id: False}  # the client's method
    with pytest.raises(ProtocolError, match=r"params.agent_ids must be a list of agent ids"):
        await operator.call("presence", agent_ids="ana")

    await ana_client.close()  # the connection goes: ana is offline
    assert await operator.call("presence", agent_ids=[ana.agent_id]) == {ana.agent_id: False}
    events = [ev async for ev in _drain(hub, start)]
    assert presence_events(events) == [("bound", "ana", None), ("unbound", "ana", "disconnected")]
    unbound = next(ev for ev in events if ev.payload.get("kind") == "unbound")
    assert unbound.payload["agent_id"] == ana.agent_id
    await operator.close()


async def _drain(hub: Hub, since: int):
    """The observe log from ``since`` up to now."""
    end = hub.observe_position
    if end <= since:
        return
    async for ev in hub.observe(since):
        yield ev
        if ev.position >= end:
            return


async def test_the_unbind_op_and_a_rebind_say_unbound_then_bound(hub: Hub) -> None:
    client = HubClient.local(hub)
    ana = await client.register_human(Passport(name="ana", kind="human"))
    start = hub.observe_position
    await client.call("unbind", agent_id=ana.agent_id)
    assert hub.presence([ana.agent_id]) == {ana.agent_id: False}
    await client.call("bind", name="ana", auth_scheme="none", auth_claim={})
    assert hub.presence([ana.agent_id]) == {ana.agent_id: True}
    # binding again to the same (or another) live connection is no change of presence: no event
    await client.call("bind", name="ana", auth_scheme="none", auth_claim={})
    events = [ev async for ev in _drain(hub, start)]
    assert presence_events(events) == [("unbound", "ana", "unbind"), ("bound", "ana", None)]
    await client.close()


async def test_over_a_websocket_a_client_that_closes_goes_offline(hub: Hub) -> None:
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
        operator = HubClient.connect(
            server.url(), operator_token=OPERATOR, rpc_timeout=10, identity_secrets=False
        )
        watcher = Watcher(operator, await operator.observe_position())
        ben_client = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        ben = await ben_client.register_human(Passport(name="ben", kind="human"))
        assert await operator.call("presence") == {ben.agent_id: True}
        await until(lambda: watcher.presence() == [("bound", "ben", None)])

        await ben_client.close()
        await until(lambda: ("unbound", "ben", "disconnected") in watcher.presence())
        assert await operator.call("presence", agent_ids=[ben.agent_id]) == {ben.agent_id: False}
        await watcher.stop()
        await operator.close()


CLIENT_PROCESS = textwrap.dedent(
    """
    import asyncio, sys
    from ag2net import HubClient, Passport

    async def main():
        client = HubClient.connect(sys.argv[1], rpc_timeout=10, identity_secrets=False)
        await client.register_human(Passport(name="cai", kind="human"))
        print("registered", flush=True)
        await asyncio.sleep(60)

    asyncio.run(main())
    """
)


async def test_over_a_websocket_a_killed_client_process_goes_offline(hub: Hub, tmp_path) -> None:
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
        operator = HubClient.connect(
            server.url(), operator_token=OPERATOR, rpc_timeout=10, identity_secrets=False
        )
        watcher = Watcher(operator, await operator.observe_position())
        env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            CLIENT_PROCESS,
            server.url(),
            stdout=subprocess.PIPE,
            env=env,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 30)
            assert line.strip() == b"registered"
            cai = hub.find_agent_id("cai")
            assert cai is not None
            assert await operator.call("presence", agent_ids=[cai]) == {cai: True}
            proc.send_signal(signal.SIGKILL)
            await proc.wait()
            await until(lambda: ("unbound", "cai", "disconnected") in watcher.presence())
            assert await operator.call("presence", agent_ids=[cai]) == {cai: False}
            assert watcher.presence() == [("bound", "cai", None), ("unbound", "cai", "disconnected")]
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        await watcher.stop()
        await operator.close()


async def test_a_connection_that_may_not_read_the_directory_is_refused(hub: Hub) -> None:
    await HubClient.local(hub).register_human(Passport(name="ana", kind="human"))
    async with serve_ws(hub, "127.0.0.1", 0, token="s3cret") as server:
        anon = await ws_connect(server.url())
        await anon.send(json.dumps({"kind": "request", "request_id": "p", "op": "presence", "params": {}}))
        while True:
            frame = json.loads(await asyncio.wait_for(anon.recv(), 5))
            if frame.get("kind") == "response":
                break
        assert frame["ok"] is False and frame["error_code"] == "access_denied"
        assert frame["error_message"].startswith("'presence' reads the directory")
        await anon.close()
        member = HubClient.connect(server.url(), token="s3cret", rpc_timeout=10, identity_secrets=False)
        ana_id = hub.find_agent_id("ana")
        assert await member.call("presence") == {ana_id: True}
        await member.close()

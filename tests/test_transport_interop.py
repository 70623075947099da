"""Frame-level interoperability with the real ``ag2==1.2.1``, both ways: ag2's ``WsLinkClient`` speaking
frames to an ag2net ``serve_ws``, and ag2net's ``WsLinkClient`` speaking frames to an ag2 hub. Skipped,
saying why, only when the ag2 virtualenv cannot be built (see ``test_ws_interop``)."""

from __future__ import annotations

import asyncio
import json

import test_ws_interop as interop

from ag2net import (
    ErrorFrame,
    HelloFrame,
    Passport,
    PingFrame,
    PongFrame,
    RequestFrame,
    Resume,
    WelcomeFrame,
    WsLink,
    decode_frame,
)
from ag2net.hub import Hub
from ag2net.server import serve_ws

ag2_python = interop.ag2_python  # the fixture building (or finding) the ag2 1.2.1 virtualenv
HELPERS = interop.HELPERS


async def test_ag2s_frame_client_on_an_ag2net_server(ag2_python):
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        bob = await hub.register_identity(Passport(name="bob"), Resume())
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            out = await interop._run(ag2_python, "ag2_frames_client.py", server.url(), "bob")
            result = json.loads(out.strip().splitlines()[-1])
            frames = [decode_frame(f) for f in result["frames"]]  # ag2's encoding of what we sent
            welcome, unknown, response, pong = frames
            assert isinstance(welcome, WelcomeFrame) and welcome.endpoint_id
            assert result["endpoint_id_before"] == "" and result["endpoint_id_after"] == welcome.endpoint_id
            assert unknown == ErrorFrame("not_found", "unknown name: nobody")
            assert response.request_id == "r1" and response.ok
            assert (
                response.result["agent_id"] == bob.agent_id and response.result["auth"]["claim"] == {}
            )  # as ag2
            assert pong == PongFrame()
    finally:
        await hub.close()


async def test_ag2net_frame_client_on_an_ag2_hub(ag2_python):
    proc = await asyncio.create_subprocess_exec(
        str(ag2_python), str(HELPERS / "ag2_hub.py"), "ag2-helper", "hello", stdout=asyncio.subprocess.PIPE
    )
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line.startswith(b"READY "), line
        client = WsLink(f"ws://127.0.0.1:{line.split()[1].decode()}", ping_interval=None).client()
        await client.open()
        assert client.endpoint_id == ""
        frames = client.frames()

        async def ask(frame):
            await client.send_frame(frame)
            return await asyncio.wait_for(anext(frames), 10)

        welcome = await ask(HelloFrame("ag2-helper"))
        assert isinstance(welcome, WelcomeFrame) and client.endpoint_id == welcome.endpoint_id != ""
        assert await ask(HelloFrame("nobody")) == ErrorFrame("not_found", "unknown name: nobody")
        response = await ask(RequestFrame("r1", "get_agent", {"name_or_id": "ag2-helper"}))
        assert response.ok and response.result["name"] == "ag2-helper"
        missing = await ask(RequestFrame("r2", "get_agent", {"name_or_id": "nobody"}))
        assert (missing.ok, missing.error_code) == (False, "not_found")
        assert await ask(PingFrame()) == PongFrame()
        await client.close()
        assert [f async for f in frames] == []
    finally:
        proc.kill()
        await proc.wait()

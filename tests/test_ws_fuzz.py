"""Fuzzing the wire: ``decode_frame`` refuses bad input only with ``ProtocolError``, and no sequence of
messages on one connection crashes the server or disturbs another connection."""

from __future__ import annotations

import asyncio
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ag2net import HubClient, Passport
from ag2net.errors import ProtocolError
from ag2net.hub import Hub
from ag2net.hub.ops import OPS
from ag2net.protocol.frames import FRAME_TYPES, decode_frame, encode_frame
from ag2net.server import serve_ws

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
FIELDS = sorted(
    {
        "name", "auth_scheme", "auth_claim", "since_envelope_id", "endpoint_id", "hub_time", "request_id", "op",
        "params", "ok", "result", "error_code", "error_message", "code", "message", "envelope_id", "envelope",
        "recipient_id", "status", "channel_id", "reason", "extra",
    }
)  # fmt: skip
envelope_dicts = st.fixed_dictionaries(
    {
        "channel_id": st.text(max_size=8) | st.integers(),
        "sender_id": st.text(max_size=8),
        "audience": st.none() | st.lists(st.text(max_size=4) | st.integers(), max_size=3),
        "event_type": st.sampled_from(["ag2.msg.text", "ag2.channel.opened", "", "x"]) | st.integers(),
        "event_data": json_values,
    },
    optional={
        "priority": st.text(max_size=8),
        "depth": json_values,
        "task_id": json_values,
        "zz": json_values,
    },
)
frame_dicts = st.fixed_dictionaries(
    {"kind": st.sampled_from([*FRAME_TYPES, "observed", "zzz"]) | st.integers()},
    optional={name: (envelope_dicts | json_values) if name == "envelope" else json_values for name in FIELDS},
)
PARAMS = [
    "agent_id", "channel_id", "name", "name_or_id", "passport", "envelope", "since", "until", "first_seq",
    "last_seq", "task_id", "metadata", "limit", "participants", "creator_id", "manifest_type", "record",
    "subscription", "kind", "payload", "state", "text", "query", "resume", "rule", "agent_ids", "sender_id",
]  # fmt: skip
requests = st.fixed_dictionaries(
    {
        "kind": st.just("request"),
        "request_id": st.text(max_size=6),
        "op": st.sampled_from([*sorted(OPS), "observe", "unobserve", "nope"]),
        "params": st.dictionaries(st.sampled_from(PARAMS), json_values | envelope_dicts, max_size=5),
    }
)
messages = st.one_of(
    frame_dicts.map(json.dumps),
    requests.map(json.dumps),
    json_values.map(json.dumps),
    st.text(max_size=40),
    st.binary(max_size=40),
)


@given(st.one_of(frame_dicts, json_values))
@settings(max_examples=400, deadline=None)
def test_decode_frame_raises_only_protocol_error(data):
    try:
        frame = decode_frame(data)
    except ProtocolError:
        return
    # what decodes re-encodes to JSON
    json.dumps(encode_frame(frame))


@pytest.fixture(scope="module")
def live():
    """One loop, hub, server and a well-behaved client shared by every fuzz example."""
    loop = asyncio.new_event_loop()

    async def start():
        hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=0.3)
        cm = serve_ws(hub, "127.0.0.1", 0)
        server = await cm.__aenter__()
        good = HubClient.connect(server.url(), rpc_timeout=5)
        me = await good.register_human(Passport(name="steady", kind="human"))
        return hub, cm, server, good, me

    hub, cm, server, good, me = loop.run_until_complete(start())
    yield loop, hub, server, good, me

    async def finish():
        await good.close()
        await cm.__aexit__(None, None, None)
        await hub.close()

    loop.run_until_complete(finish())
    loop.close()


@given(st.lists(messages, min_size=1, max_size=6))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_message_sequence_crashes_the_server(live, batch):
    loop, hub, server, good, me = live

    async def run():
        async with ws_connect(server.url()) as ws:
            for message in batch:
                await ws.send(message)
            try:
                await ws.send(json.dumps({"kind": "ping"}))
                while True:  # drain replies until our pong: the connection survived
                    reply = json.loads(await asyncio.wait_for(ws.recv(), 5))
                    assert isinstance(reply, dict) and "kind" in reply
                    if reply["kind"] == "pong":
                        break
            except ConnectionClosed:
                # only an auth refusal or an oversized message may close it
                assert ws.close_code in (1008, 1009), ws.close_code
        # the well-behaved connection is untouched, and the server still accepts new ones
        assert (await good.get_agent("steady")).agent_id == me.agent_id
        assert good.link.connected and good.link.reconnects == 0
        async with ws_connect(server.url()) as probe:
            await probe.send(json.dumps({"kind": "ping"}))
            assert json.loads(await asyncio.wait_for(probe.recv(), 5)) == {"kind": "pong"}

    loop.run_until_complete(run())

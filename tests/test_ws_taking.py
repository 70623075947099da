"""Requests and receipts taken as they are parsed (``ag2net.server.connection``) keep arrival order: a
request that arrives behind a hello, in the same read, runs after the hello, never ahead of it; a burst of
requests in one read is answered in full; and, frame by frame, a message is taken only while the reader
waits with nothing queued ahead of it (fragments, binary frames, text that is not UTF-8 and messages the
endpoint refuses go to websockets' queue, in arrival order)."""

from __future__ import annotations

import asyncio
import json

import pytest
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.asyncio.messages import Assembler
from websockets.frames import Frame, Opcode
from websockets.server import ServerProtocol

from ag2net import HubClient, Passport
from ag2net.server import serve_ws
from ag2net.server.connection import TakingConnection

TOKEN = "taking-token"

pytestmark = pytest.mark.hub(store="memory")


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def write_at_once(ws: ClientConnection, *frames: dict) -> None:
    """Every frame in one socket write, so the server reads them in one go."""
    for frame in frames:
        ws.protocol.send_text(json.dumps(frame).encode())
    assert ws.transport is not None
    ws.transport.write(b"".join(ws.protocol.data_to_send()))


async def replies(ws: ClientConnection, count: int) -> list[dict]:
    return [json.loads(await asyncio.wait_for(ws.recv(), 5)) for _ in range(count)]


async def test_a_request_behind_a_hello_in_the_same_read_runs_after_it(hub):
    await HubClient.local(hub).register_human(Passport(name="ana", kind="human"))
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        for attempt in range(5):
            ws = await ws_connect(srv.url())
            await asyncio.sleep(0.05)  # the server's reader is waiting for the first message
            write_at_once(
                ws,
                {"kind": "hello", "name": "", "auth_scheme": "api_key", "auth_claim": {"token": TOKEN}},
                {"kind": "request", "request_id": f"r{attempt}", "op": "list_agents", "params": {}},
            )
            welcome, answer = await replies(ws, 2)
            assert welcome["kind"] == "welcome"
            # run ahead of the hello, the directory read would be refused as unauthenticated
            assert answer["kind"] == "response" and answer["ok"] is True, answer
            assert [p["name"] for p in answer["result"]] == ["ana"]
            await ws.close()


async def test_a_burst_of_requests_and_a_bad_frame_in_one_read_are_all_answered_in_order(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        ws = await ws_connect(srv.url())
        await asyncio.sleep(0.05)
        frames = [
            {"kind": "request", "request_id": f"q{i}", "op": "list_agents", "params": {}} for i in range(20)
        ]
        frames.insert(10, {"kind": "request", "request_id": "bad", "op": "list_agents", "params": [], "x": 1})
        write_at_once(ws, *frames)
        got = await replies(ws, 21)
        assert sorted(r["request_id"] for r in got) == sorted(f["request_id"] for f in frames)
        bad = next(r for r in got if r["request_id"] == "bad")
        assert bad["ok"] is False and bad["error_code"] == "protocol_error"
        assert all(r["ok"] for r in got if r["request_id"] != "bad")
        await ws.close()


# --- the connection's decision, frame by frame ----------------------------------------------------------


def taking_connection(took: list[str], verdict: bool = True) -> TakingConnection:
    conn = TakingConnection(ServerProtocol(), None, ping_interval=None)  # type: ignore[arg-type]
    conn.request = object()  # type: ignore[assignment]  # past the handshake: frames from here on
    conn.recv_messages = Assembler(pause=lambda: None, resume=lambda: None)  # what connection_made sets

    def taker(text: str) -> bool:
        took.append(text)
        return verdict

    conn.taker = taker
    return conn


async def queued_messages(conn: TakingConnection, count: int) -> list[str | bytes]:
    return [await asyncio.wait_for(conn.recv(), 1) for _ in range(count)]


async def test_a_message_is_taken_only_while_the_reader_waits_with_nothing_queued_ahead():
    took: list[str] = []
    conn = taking_connection(took)
    conn.process_event(Frame(Opcode.TEXT, b"a"))  # the reader is busy: queued
    conn.reader_waiting = True
    conn.process_event(Frame(Opcode.TEXT, b"b"))  # "a" still queued ahead: queued behind it
    assert took == [] and conn.queued == 2
    assert await queued_messages(conn, 2) == ["a", "b"]
    conn.message_read()
    conn.message_read()
    conn.process_event(Frame(Opcode.TEXT, b"c"))  # nothing ahead, reader waiting: taken
    assert took == ["c"] and conn.queued == 0


async def test_fragments_binary_frames_and_refused_messages_go_to_the_queue_in_order():
    took: list[str] = []
    conn = taking_connection(took, verdict=False)
    conn.reader_waiting = True
    conn.process_event(Frame(Opcode.TEXT, b"fi", fin=False))
    conn.process_event(Frame(Opcode.CONT, b"rst", fin=True))
    assert took == [] and conn.queued == 1
    conn.message_read()
    conn.process_event(Frame(Opcode.BINARY, b"\x00"))
    conn.message_read()
    conn.process_event(Frame(Opcode.TEXT, b"\xff"))  # not UTF-8: websockets' queue refuses it, as before
    conn.message_read()
    conn.process_event(Frame(Opcode.TEXT, b"refused"))  # offered, not taken: queued
    assert took == ["refused"] and conn.queued == 1
    assert await queued_messages(conn, 2) == ["first", b"\x00"]


# ---------------------------------------------------------------------------------- the client link's side


def notify_frame(n: int) -> dict:
    from ag2net.envelope import EV_TEXT, Envelope
    from ag2net.protocol.frames import NotifyFrame, encode_frame

    env = Envelope("ch", "sender", None, EV_TEXT, {"text": str(n)}, envelope_id=f"e{n}")
    return encode_frame(NotifyFrame(env, "r1"))


async def test_the_client_link_takes_deliveries_in_order_and_its_reader_answers_a_ping_between_them():
    """A hub that writes deliveries, a ping, a frame that is not JSON and more deliveries in one read: the
    link hands every delivery over in order (taken as parsed or read by its reader), skips the bad frame,
    and answers the ping with a pong (the reader's, which awaits its send)."""
    from websockets.asyncio.server import serve

    from ag2net.transport.ws import WsLinkClient
    from ag2net.transport.ws_taking import TakingClientConnection

    pongs: list[dict] = []
    burst_sent = asyncio.Event()

    async def hub(ws):
        hello = json.loads(await ws.recv())  # the operator hello, asked in passing: refused
        assert hello["kind"] == "hello"
        await ws.send(json.dumps({"kind": "error", "code": "not_found", "message": "no operators"}))
        for frame in [notify_frame(1), notify_frame(2), {"kind": "ping"}, "not json", notify_frame(3)]:
            ws.protocol.send_text((frame if isinstance(frame, str) else json.dumps(frame)).encode())
        ws.transport.write(b"".join(ws.protocol.data_to_send()))
        burst_sent.set()
        pongs.append(json.loads(await ws.recv()))
        ws.protocol.send_text(json.dumps(notify_frame(4)).encode())
        ws.transport.write(b"".join(ws.protocol.data_to_send()))
        await ws.wait_closed()

    got: list[str] = []
    four = asyncio.Event()

    async def on_notify(recipient_id, envelope):
        got.append(envelope.event_data["text"])
        if len(got) == 4:
            four.set()

    async with serve(hub, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        link = WsLinkClient(f"ws://127.0.0.1:{port}", operator=None, ping_deadline=None)
        await link.open(on_notify)
        try:
            assert isinstance(link._ws, TakingClientConnection)
            await asyncio.wait_for(four.wait(), 5)
            assert got == ["1", "2", "3", "4"]
            assert pongs == [{"kind": "pong"}]
        finally:
            await link.close()

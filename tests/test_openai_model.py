"""OpenAIChatModel against a real chat-completions server on 127.0.0.1, plus the history conversion."""

from __future__ import annotations

import importlib.util
import json
import socket
import sys
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from ag2net.agent import Agent, ModelCall, ModelError, tool
from ag2net.agent.openai_model import PLACEHOLDER_API_KEY, OpenAIChatModel, to_chat_messages
from ag2net.events import (
    CompactionSummary,
    DataInput,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)

needs_openai = pytest.mark.skipif(
    importlib.util.find_spec("openai") is None,
    reason="the 'openai' package is not installed (pip install 'ag2net[openai]')",
)

Responder = Callable[[dict[str, Any]], tuple[int, dict[str, Any]]]


class ChatServer:
    """A chat-completions endpoint on an ephemeral port: each request is answered by the next responder."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.responders: list[Responder] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
                owner.requests.append(
                    {
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body,
                    }
                )
                if owner.responders:
                    status, payload = owner.responders.pop(0)(body)
                else:
                    status, payload = 500, {"error": {"message": "no scripted response left"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reply(self, responder: Responder) -> None:
        self.responders.append(responder)


def completion(
    content: str | None = None, tool_calls: list[dict] | None = None, usage: dict | None = None
) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = tool_calls
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "local-model",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}
        ],
        "usage": usage or {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


@pytest.fixture
def server():
    srv = ChatServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _model(server: ChatServer, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key", "test-key")
    kw.setdefault("max_retries", 0)
    kw.setdefault("timeout", 10)
    return OpenAIChatModel("local-model", base_url=server.base_url, **kw)


@needs_openai
async def test_plain_reply(server):
    server.reply(lambda body: (200, completion("Hello from the server.")))
    model = _model(server, temperature=0.2)
    try:
        call = ModelCall(system="Be brief.", history=[ModelRequest([TextInput("hi")])])
        response = await model.complete(call)
    finally:
        await model.aclose()
    assert response.content == "Hello from the server."
    assert response.tool_calls == []
    assert response.usage == {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == "Bearer test-key"
    assert request["body"]["model"] == "local-model"
    assert request["body"]["temperature"] == 0.2
    assert "tools" not in request["body"]  # some local servers reject an empty tool list
    assert request["body"]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]
    assert model.name == "local-model"


@needs_openai
async def test_tool_call_round_trip_through_an_agent(server):
    def first(body: dict) -> tuple[int, dict]:
        assert body["tools"][0]["function"]["name"] == "add"
        call = {
            "id": "call_1",
            "type": "function",
            "function": {"name": "add", "arguments": '{"x": 2, "y": 3}'},
        }
        return 200, completion(
            None, [call], {"prompt_tokens": 40, "completion_tokens": 9, "total_tokens": 49}
        )

    def second(body: dict) -> tuple[int, dict]:
        messages = body["messages"]
        expected_tail = [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"x": 2, "y": 3}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "5"},
        ]
        if messages[-2:] != expected_tail:
            return 400, {"error": {"message": f"tool result missing: {messages}"}}
        return 200, completion(
            "The sum is 5.", None, {"prompt_tokens": 60, "completion_tokens": 5, "total_tokens": 65}
        )

    server.reply(first)
    server.reply(second)

    @tool
    def add(x: int, y: int) -> int:
        """Add two integers."""
        return x + y

    model = _model(server)
    try:
        reply = await Agent("calc", model, "You add numbers.", [add]).ask("2+3?")
    finally:
        await model.aclose()
    assert reply.body == "The sum is 5."
    assert [type(e).__name__ for e in reply.events] == [
        "ModelRequest",
        "ToolCallEvent",
        "ToolResultEvent",
        "ModelMessage",
    ]
    assert reply.events[1].id == "call_1"
    assert reply.usage == {"prompt_tokens": 100, "completion_tokens": 14, "total_tokens": 114}
    assert len(server.requests) == 2
    assert server.requests[0]["body"]["tools"][0] == {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x", "y"],
            },
        },
    }


@needs_openai
@pytest.mark.parametrize("status", [500, 401])
async def test_http_error_is_a_model_error_naming_endpoint_and_status(server, status):
    server.reply(lambda body: (status, {"error": {"message": "nope", "type": "server_error"}}))
    model = _model(server)
    try:
        with pytest.raises(ModelError) as info:
            await model.complete(ModelCall(system="", history=[ModelRequest([TextInput("hi")])]))
    finally:
        await model.aclose()
    message = str(info.value)
    assert f"HTTP {status}" in message
    assert server.base_url in message
    assert "'local-model'" in message
    assert message.endswith(": nope")  # the server's own message, once
    assert len(server.requests) == 1  # max_retries=0


@needs_openai
async def test_unreachable_endpoint_is_a_model_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = OpenAIChatModel("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=5)
    try:
        with pytest.raises(ModelError, match=r"cannot reach model endpoint http://127\.0\.0\.1"):
            await model.complete(ModelCall(system="", history=[ModelRequest([TextInput("hi")])]))
    finally:
        await model.aclose()


@needs_openai
async def test_empty_choices_is_a_model_error(server):
    server.reply(lambda body: (200, {**completion("x"), "choices": []}))
    model = _model(server)
    try:
        with pytest.raises(ModelError, match="returned no choices"):
            await model.complete(ModelCall(system="", history=[ModelRequest([TextInput("hi")])]))
    finally:
        await model.aclose()


@needs_openai
async def test_api_key_from_environment_else_placeholder(server, monkeypatch):
    server.reply(lambda body: (200, completion("a")))
    server.reply(lambda body: (200, completion("b")))
    call = ModelCall(system="", history=[ModelRequest([TextInput("hi")])])
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    with_env = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
    monkeypatch.delenv("OPENAI_API_KEY")
    without = OpenAIChatModel("m", base_url=server.base_url, max_retries=0)
    try:
        await with_env.complete(call)
        await without.complete(call)
    finally:
        await with_env.aclose()
        await without.aclose()
    assert [r["headers"]["authorization"] for r in server.requests] == [
        "Bearer from-env",
        f"Bearer {PLACEHOLDER_API_KEY}",
    ]


def test_missing_openai_package_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "openai", None)
    with pytest.raises(ImportError, match=r"pip install 'ag2net\[openai\]'"):
        OpenAIChatModel("m")


def test_history_conversion():
    history = [
        CompactionSummary("Earlier in this channel: 3 messages from A.", 3),
        ModelRequest([TextInput("[alice]: hello"), DataInput({"k": 1})]),
        ModelMessage("I will look it up."),
        ToolCallEvent("search", '{"q": "x"}', id="c1"),
        ToolCallEvent("lookup", "", id="c2"),
        ToolResultEvent("c1", "search", "found"),
        ToolResultEvent("c2", "lookup", "Error: boom", True),
        ToolCallEvent("search", '{"q": "y"}', id="c3"),
        ToolResultEvent("c3", "search", "more"),
        ModelMessage("Done."),
    ]
    assert to_chat_messages("SYS", history) == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "Earlier in this channel: 3 messages from A."},
        {"role": "user", "content": '[alice]: hello\n{"k": 1}'},
        {
            "role": "assistant",
            "content": "I will look it up.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "x"}'}},
                {"id": "c2", "type": "function", "function": {"name": "lookup", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "tool", "tool_call_id": "c2", "content": "Error: boom"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c3", "type": "function", "function": {"name": "search", "arguments": '{"q": "y"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c3", "content": "more"},
        {"role": "assistant", "content": "Done."},
    ]
    assert to_chat_messages("", [ModelRequest([TextInput("q")])]) == [{"role": "user", "content": "q"}]

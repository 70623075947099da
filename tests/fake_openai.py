"""A local OpenAI-compatible ``/v1/chat/completions`` server for tests: real HTTP on 127.0.0.1 (aiohttp), in
the test's own event loop, answering each request with the next scripted step.

Steps: ``reply(...)`` (a JSON completion with usage, cached and reasoning tokens when given), ``stream(...)``
(server-sent events: text and tool-call deltas, then a usage chunk when the request asked for it), ``fail(
status, message, headers)`` (an HTTP error with the server's error body, e.g. 429 with ``retry-after``) and
``drop(after=n)`` (a stream that sends ``n`` chunks and then closes the connection without ending the body, as
a crashed server or a cut network does). Every request's JSON body and headers are kept in ``requests``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


def usage(
    prompt: int, completion: int, cached: int | None = None, reasoning: int | None = None
) -> dict[str, Any]:
    """A chat-completions ``usage`` object, with the details OpenAI sends."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached is not None:
        out["prompt_tokens_details"] = {"cached_tokens": cached, "audio_tokens": 0}
    if reasoning is not None:
        out["completion_tokens_details"] = {"reasoning_tokens": reasoning, "audio_tokens": 0}
    return out


@dataclass
class Step:
    kind: str
    status: int = 200
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    message: str = ""
    after: int = 0
    response_id: str = "chatcmpl-1"


class FakeOpenAI:
    """The server; ``await start()`` binds an ephemeral port, ``base_url`` is what a client is given."""

    def __init__(self, model: str = "gpt-4o-mini") -> None:
        self.model = model
        self.steps: list[Step] = []
        self.requests: list[dict[str, Any]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> FakeOpenAI:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server  # the bound socket: the port the OS chose
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # ------------------------------------------------------------------ scripting

    def reply(
        self,
        content: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        response_id: str = "chatcmpl-1",
    ) -> None:
        self.steps.append(
            Step("reply", content=content, tool_calls=tool_calls or [], usage=usage, response_id=response_id)
        )

    def stream(
        self,
        content: str | None = None,
        *,
        tool_calls: list[dict[str, Any]] | None = None,
        usage: dict[str, Any] | None = None,
        response_id: str = "chatcmpl-s",
    ) -> None:
        self.steps.append(
            Step("stream", content=content, tool_calls=tool_calls or [], usage=usage, response_id=response_id)
        )

    def fail(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self.steps.append(Step("fail", status=status, message=message, headers=dict(headers or {})))

    def drop(self, after: int = 1, content: str = "partial answer that never ends") -> None:
        self.steps.append(Step("drop", content=content, after=after))

    # ------------------------------------------------------------------ serving

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append({"body": body, "headers": {k.lower(): v for k, v in request.headers.items()}})
        if not self.steps:
            return web.json_response({"error": {"message": "no scripted step left"}}, status=500)
        step = self.steps.pop(0)
        if step.kind == "fail":
            kind = "rate_limit_exceeded" if step.status == 429 else "server_error"
            return web.json_response(
                {"error": {"message": step.message, "type": kind, "code": kind}},
                status=step.status,
                headers=step.headers,
            )
        if step.kind == "reply":
            return web.json_response(self._completion(step))
        return await self._stream(request, step, body)

    def _completion(self, step: Step) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": step.content}
        if step.tool_calls:
            message["tool_calls"] = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": c["arguments"]},
                }
                for c in step.tool_calls
            ]
        out: dict[str, Any] = {
            "id": step.response_id,
            "object": "chat.completion",
            "created": 1_764_633_600,
            "model": self.model,
            "choices": [
                {"index": 0, "message": message, "finish_reason": "tool_calls" if step.tool_calls else "stop"}
            ],
        }
        if step.usage is not None:
            out["usage"] = step.usage
        return out

    def _chunk(self, step_id: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": step_id,
            "object": "chat.completion.chunk",
            "created": 1_764_633_600,
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    async def _stream(self, request: web.Request, step: Step, body: dict[str, Any]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        chunks: list[dict[str, Any]] = [self._chunk(step.response_id, {"role": "assistant", "content": ""})]
        text = step.content or ""
        for i in range(0, len(text), 8):
            chunks.append(self._chunk(step.response_id, {"content": text[i : i + 8]}))
        for n, call in enumerate(step.tool_calls):
            first = {
                "index": n,
                "id": call["id"],
                "type": "function",
                "function": {"name": call["name"], "arguments": ""},
            }
            chunks.append(self._chunk(step.response_id, {"tool_calls": [first]}))
            arguments = call["arguments"]
            half = len(arguments) // 2
            for part in (arguments[:half], arguments[half:]):
                chunks.append(
                    self._chunk(
                        step.response_id, {"tool_calls": [{"index": n, "function": {"arguments": part}}]}
                    )
                )
        if step.kind == "drop":
            for chunk in chunks[: step.after]:
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            transport = request.transport
            if transport is not None:
                transport.abort()  # the connection goes, mid-body: no final chunk, no [DONE]
            return response
        chunks.append(self._chunk(step.response_id, {}, "tool_calls" if step.tool_calls else "stop"))
        wants_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        if wants_usage and step.usage is not None:
            chunks.append(
                {
                    "id": step.response_id,
                    "object": "chat.completion.chunk",
                    "created": 1_764_633_600,
                    "model": self.model,
                    "choices": [],
                    "usage": step.usage,
                }
            )
        for chunk in chunks:
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

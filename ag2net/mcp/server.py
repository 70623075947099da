"""The MCP server of ``ag2net mcp``, on the official ``mcp`` SDK's low-level ``Server``: the tools of
``ag2net.mcp.tools`` in their fixed order, the resources (channels, peer cards), over stdio or streamable
HTTP. This is the only module of ag2net that imports the SDK (the ``mcp`` extra).

A tool's answer is one JSON text (also given as ``structuredContent``); a refusal is an error result whose
text is one sentence naming the fix.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server

from ag2net.cli.support import stopping_with
from ag2net.mcp.calls import RESOURCE_PAGE, call_tool, read_resource, resources
from ag2net.mcp.network import Network, Refusal
from ag2net.mcp.tools import listed

INSTRUCTIONS = (
    "ag2net's debugger over one agent network. To find out why an agent said something: list_channels, "
    "read_wal (filter 'sender:NAME') to find the envelope, turns for that participant's turn record, projection "
    "(at_seq, or with another view) for what its model got, envelope and causation for what shaped it, dry_run a "
    "fix, then replay with other views or models to prove it. Pages are small: pass next_cursor back with the "
    "same arguments. The skill ag2net/skills/debug-network/SKILL.md tells the whole method."
)


RESOURCE_TEMPLATES = [
    types.ResourceTemplate(
        uri_template="ag2net://channels/{label}",
        name="channel",
        description="A channel's metadata, participants and WAL length, by its label.",
        mime_type="application/json",
    ),
    types.ResourceTemplate(
        uri_template="ag2net://peers/{name}",
        name="peer",
        description="An agent's skill card (SKILL.md), by its name.",
        mime_type="text/markdown",
    ),
]


def sdk_tools(allow_post: bool) -> list[types.Tool]:
    """The tools as the SDK's ``Tool``s, in their fixed order."""
    return [
        types.Tool(
            name=spec.name,
            description=spec.description,
            input_schema=spec.input_schema,
            annotations=types.ToolAnnotations(read_only_hint=spec.read_only, open_world_hint=False),
        )
        for spec in listed(allow_post)
    ]


def build_server(net: Network, *, allow_post: bool = False) -> Server[Any]:
    """The SDK server answering from ``net``; ``post`` is listed and callable only with ``allow_post``."""
    from ag2net.version import __version__ as version

    tools = sdk_tools(allow_post)

    async def on_list_tools(ctx: ServerRequestContext[Any], params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def on_call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            answer = await call_tool(net, params.name, params.arguments, allow_post=allow_post)
        except Refusal as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(exc))], is_error=True
            )
        text = json.dumps(answer, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=json.loads(text)
        )

    async def on_list_resources(ctx: ServerRequestContext[Any], params: Any) -> types.ListResourcesResult:
        cursor = getattr(params, "cursor", None) if params is not None else None
        start = int(cursor) if cursor and str(cursor).isdigit() else 0
        found = await resources(net)
        shown = found[start : start + RESOURCE_PAGE]
        more = start + RESOURCE_PAGE < len(found)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=r["uri"], name=r["name"], description=r["description"], mime_type=r["mime_type"]
                )
                for r in shown
            ],
            next_cursor=str(start + RESOURCE_PAGE) if more else None,
        )

    async def on_list_resource_templates(
        ctx: ServerRequestContext[Any], params: Any
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=RESOURCE_TEMPLATES)

    async def on_read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        from mcp.shared.exceptions import MCPError

        uri = str(params.uri)
        try:
            mime, text = await read_resource(net, uri)
        except Refusal as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=uri, mime_type=mime, text=text)]
        )

    return Server(
        "ag2net",
        version=version,
        instructions=INSTRUCTIONS,
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        on_list_resources=on_list_resources,
        on_list_resource_templates=on_list_resource_templates,
        on_read_resource=on_read_resource,
    )


async def serve_stdio(net: Network, *, allow_post: bool = False) -> None:
    """Answer one client on stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(net, allow_post=allow_post)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class _BearerToken:
    """ASGI wrapper: an HTTP request without ``Authorization: Bearer <token>`` is answered 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        import hmac

        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                body = b'{"error": "unauthorized: send the --http-token as Authorization: Bearer TOKEN"}'
                headers = [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")]
                await send({"type": "http.response.start", "status": 401, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


class _QuietServer(uvicorn.Server):
    """uvicorn's server, leaving SIGINT and SIGTERM to the command (``run_until_stopped``): a stop signal
    ends the serving loop through ``should_exit``, and the hub closes after it."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_http(
    net: Network, host: str, port: int, *, token: str | None, allow_post: bool = False, ready: Any = None
) -> None:
    """Serve streamable HTTP at ``http://HOST:PORT/mcp`` until stopped; with ``token`` every request must
    carry it as a bearer token. ``ready(port)`` is called once the socket listens."""
    server = build_server(net, allow_post=allow_post)
    app: Any = server.streamable_http_app(host=host)
    if token:
        app = _BearerToken(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    web = _QuietServer(config)
    sock = listening_socket(host, port)
    if ready is not None:
        original = web.startup

        async def startup(sockets: Any = None) -> None:
            await original(sockets=sockets)
            if web.started:
                ready(sock.getsockname()[1])

        web.startup = startup  # type: ignore[method-assign]
    try:
        with stopping_with(lambda: setattr(web, "should_exit", True)):
            await web.serve(sockets=[sock])
    finally:
        sock.close()


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening; a ``Refusal`` naming the reason otherwise."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, UnicodeError) as exc:
        raise Refusal(
            f"--http {host}:{port}: {host!r} is not an address here ({exc}); give 127.0.0.1 or a local address"
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise Refusal(
            f"--http {host}:{port}: cannot listen there ({reason}); choose another port or address"
        ) from None
    sock.set_inheritable(False)
    return sock


__all__ = [
    "INSTRUCTIONS",
    "RESOURCE_TEMPLATES",
    "build_server",
    "listening_socket",
    "sdk_tools",
    "serve_http",
    "serve_stdio",
]

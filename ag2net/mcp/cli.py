"""The ``ag2net mcp`` command: the debugger as an MCP server for coding agents (the ``mcp`` extra).

``ag2net/cli/commands.py`` mounts ``app`` (a Typer app with exactly this one command) by name, so
``import ag2net.cli`` loads nothing of it; the SDK itself is imported only when the server starts.
``python -m ag2net.mcp.cli`` runs the same command on its own. Every mistake is one sentence on stderr and
exit code 2; stdout belongs to the MCP protocol over stdio.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.cli.support import (
    ConnectOperatorToken,
    ConnectToken,
    Stopped,
    UsageProblem,
    check_name,
    conventional_metavars,
    default_human_name,
    fail,
    run_until_stopped,
    usage_sentence,
)

app = typer.Typer(add_completion=False)

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
EXTRA_HINT = "install it with pip install 'ag2net[mcp]'"


def parse_http(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → ``(host, port)``; a ``UsageProblem`` otherwise."""
    match = re.fullmatch(r"\[([0-9a-fA-F:]+)\]:(\d+)|([^\s:\[\]]+):(\d+)", text.strip())
    if match is None:
        raise UsageProblem(f"--http {text!r} must look like HOST:PORT, e.g. --http 127.0.0.1:8770")
    host = match.group(1) or match.group(3)
    port = int(match.group(2) or match.group(4))
    if port > 65535:
        raise UsageProblem(f"--http {text!r}: port {port} is not a TCP port; give one from 0 to 65535")
    return host, port


def server_args(
    db: str | None, connect: str | None, http: str | None, allow_post: bool, as_name: str | None
) -> list[str]:
    """The arguments of ``ag2net mcp`` that start this same server (tokens never: they come from the environment)."""
    args = ["mcp"]
    if db is not None:
        args += ["--db", str(Path(db).expanduser().resolve())]
    if connect is not None:
        args += ["--connect", connect]
    if http is not None:
        args += ["--http", http]
    if allow_post:
        args.append("--allow-post")
    if as_name is not None:
        args += ["--as", as_name]
    return args


def skill_path() -> str:
    """Where the installed skill for coding agents is (``ag2net/skills/debug-network/SKILL.md``)."""
    from importlib.resources import files

    return str(files("ag2net").joinpath("skills", "debug-network", "SKILL.md"))


def config_text(args: list[str], http: tuple[str, int] | None, http_token: bool) -> str:
    """The snippets that register this server with common coding agents, and where the skill is."""
    name = "ag2net"
    skill = f"# the skill that tells an agent how to use it: copy {skill_path()} to .claude/skills/debug-network/SKILL.md"
    if http is not None:
        host, port = http
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/mcp"
        entry: dict[str, Any] = {"type": "http", "url": url}
        if http_token:
            entry["headers"] = {"Authorization": "Bearer ${AG2NET_MCP_TOKEN}"}
        start = "ag2net " + shlex.join(args)
        lines = [
            f"# start the server first: {start}",
            "# Claude Code:",
            f"claude mcp add --transport http {name} {url}"
            + (' --header "Authorization: Bearer $AG2NET_MCP_TOKEN"' if http_token else ""),
            "# .mcp.json (Claude Code), .cursor/mcp.json (Cursor), .vscode/mcp.json (VS Code: 'servers' for 'mcpServers'):",
            json.dumps({"mcpServers": {name: entry}}, indent=2),
            skill,
        ]
        return "\n".join(lines)
    entry = {"command": "ag2net", "args": args}
    lines = [
        "# Claude Code:",
        f"claude mcp add {name} -- ag2net {shlex.join(args)}",
        "# .mcp.json (Claude Code), .cursor/mcp.json (Cursor), .vscode/mcp.json (VS Code: 'servers' for 'mcpServers'):",
        json.dumps({"mcpServers": {name: entry}}, indent=2),
        "# ~/.codex/config.toml (Codex):",
        f"[mcp_servers.{name}]",
        'command = "ag2net"',
        "args = [" + ", ".join(json.dumps(a) for a in args) + "]",
        skill,
    ]
    return "\n".join(lines)


def _check(
    db: str | None, connect: str | None, http: str | None, http_token: str | None, allow_post: bool
) -> tuple[str, int] | None:
    if db is None and connect is None:
        raise UsageProblem(
            "give --db PATH (a database, opened read-only) or --connect ws://HOST:PORT (a running hub)"
        )
    if db is not None and connect is not None:
        raise UsageProblem("--db and --connect cannot be used together; choose one")
    if connect is not None and not all(re.match(r"^wss?://[^\s/,]+", p.strip()) for p in connect.split(",")):
        raise UsageProblem(f"--connect {connect!r} must be a URL like ws://127.0.0.1:8765")
    if allow_post and connect is None:
        raise UsageProblem(
            "--allow-post posts into a running hub and a --db is opened read-only; give --connect ws://HOST:PORT"
        )
    address = parse_http(http) if http is not None else None
    if http_token is not None and address is None:
        raise UsageProblem(
            "--http-token protects the HTTP server; add --http HOST:PORT, or leave it out for stdio"
        )
    if address is not None and address[0] not in LOOPBACK and not http_token:
        raise UsageProblem(
            f"--http {http}: {address[0]} is not loopback and anyone who can reach it could read the network; "
            "set --http-token (or AG2NET_MCP_TOKEN), or listen on 127.0.0.1"
        )
    return address


async def _run(
    db: str | None,
    connect: str | None,
    token: str | None,
    operator_token: str | None,
    human: str,
    address: tuple[str, int] | None,
    http_token: str | None,
    allow_post: bool,
) -> None:
    from ag2net.mcp.network import Network, Refusal
    from ag2net.mcp.server import serve_http, serve_stdio

    try:
        if db is not None:
            net = await Network.on_database(db)
        else:
            assert connect is not None
            net = await Network.on_hub(connect, token=token, operator_token=operator_token, human_name=human)
    except Refusal as exc:
        raise UsageProblem(str(exc)) from None
    try:
        if address is None:
            await serve_stdio(net, allow_post=allow_post)
        else:

            def ready(port: int) -> None:
                host = f"[{address[0]}]" if ":" in address[0] else address[0]
                sys.stderr.write(f"ag2net mcp: streamable HTTP at http://{host}:{port}/mcp\n")
                sys.stderr.flush()

            try:
                await serve_http(
                    net, address[0], address[1], token=http_token, allow_post=allow_post, ready=ready
                )
            except Refusal as exc:
                raise UsageProblem(str(exc)) from None
    finally:
        await net.close()


@app.command("mcp")
def mcp(
    db: Annotated[
        str | None,
        typer.Option(
            help="Database to debug, opened read-only: an ag2net SQLite file (ag2net tui, serve or demo wrote)."
        ),
    ] = None,
    connect: Annotated[
        str | None, typer.Option(help="Debug the hub served at this URL, e.g. ws://127.0.0.1:8765.")
    ] = None,
    token: ConnectToken = None,
    operator_token: ConnectOperatorToken = None,
    http: Annotated[
        str | None, typer.Option(help="Serve streamable HTTP at HOST:PORT (path /mcp) instead of stdio.")
    ] = None,
    http_token: Annotated[
        str | None,
        typer.Option(
            help="Bearer token every HTTP request must carry (or AG2NET_MCP_TOKEN); needed off loopback.",
            envvar="AG2NET_MCP_TOKEN",
        ),
    ] = None,
    allow_post: Annotated[
        bool,
        typer.Option(
            "--allow-post", help="Offer the post tool: post texts as the workbench's human (--connect)."
        ),
    ] = False,
    as_name: Annotated[
        str | None,
        typer.Option("--as", help="The human to post as with --allow-post (default: your OS user name)."),
    ] = None,
    print_config: Annotated[
        bool,
        typer.Option(
            "--print-config",
            help="Print the snippets that register this server with coding agents, and exit.",
        ),
    ] = False,
) -> None:
    """Serve the debugger to coding agents over MCP (stdio by default): channels, WAL, turns, projections, replay."""
    try:
        address = _check(db, connect, http, http_token, allow_post)
        human = check_name(as_name) if as_name is not None else check_name(default_human_name())
        if print_config:
            typer.echo(
                config_text(server_args(db, connect, http, allow_post, as_name), address, bool(http_token))
            )
            return
        try:
            import mcp as _sdk  # noqa: F401
        except ImportError:
            raise UsageProblem(f"ag2net mcp needs the 'mcp' extra; {EXTRA_HINT}") from None
        run_until_stopped(_run(db, connect, token, operator_token, human, address, http_token, allow_post))
    except UsageProblem as exc:
        fail(str(exc))
    except Stopped:
        raise typer.Exit(0) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def main(argv: list[str] | None = None) -> None:
    """``python -m ag2net.mcp.cli``: the command on its own, with usage errors in one sentence (exit 2)."""
    from typer._click.exceptions import UsageError

    args = list(sys.argv[1:] if argv is None else argv)
    command = conventional_metavars(typer.main.get_command(app))
    try:
        code = command.main(args, prog_name="ag2net mcp", standalone_mode=False)
    except UsageError as exc:
        typer.echo(f"Error: {usage_sentence(exc, args)}", err=True)
        sys.exit(2)
    except typer.Abort:
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


__all__ = ["app", "config_text", "main", "mcp", "parse_http", "server_args"]


if __name__ == "__main__":
    main()

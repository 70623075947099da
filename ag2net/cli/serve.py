"""``ag2net serve``: check the options, open the hub (or wait for a PostgreSQL database's leadership), serve it.

Each step is a function of its own: ``check_options`` (every bad combination is one sentence before anything
is opened), ``open_served_hub`` (a SQLite file or memory, or the leadership lock of ``ag2net.server.leadership``),
``serve_hub`` (the ``--network`` agents, the demo, the WebSocket server) and ``serve_options`` (the command's
errors and exit codes around them).
"""

from __future__ import annotations

import asyncio
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ag2net.cli.support import (
    Stopped,
    UsageProblem,
    check_paths,
    fail,
    load_network,
    open_hub,
    run_network,
    run_until_stopped,
)

if TYPE_CHECKING:
    from ag2net.server.leadership import Leadership

GC_MODES = ("latency", "default")


@dataclass(frozen=True)
class ServeOptions:
    """``ag2net serve``'s options as given on the command line."""

    db: str | None
    host: str
    port: int
    network: str | None
    demo: bool
    token: str | None
    operator_token: str | None
    allow_unauthenticated: bool
    fsync: bool
    public_directory: bool
    legacy_identities: bool
    auth_timeout: float
    send_timeout: float
    max_connections: int
    max_connections_per_address: int
    max_unauthenticated: int
    max_unauthenticated_per_address: int
    cache_mb: float
    lease: float
    approvals: bool = False
    gc: str = "latency"


def check_options(o: ServeOptions) -> None:
    """Every bad option or combination ends here in one sentence (exit code 2), before anything is opened."""
    if not 0 <= o.port <= 65535:
        fail(f"--port {o.port} is out of range; use 0-65535")
    for option, value in (
        ("--auth-timeout", o.auth_timeout),
        ("--send-timeout", o.send_timeout),
        ("--max-connections", o.max_connections),
        ("--max-connections-per-address", o.max_connections_per_address),
        ("--max-unauthenticated", o.max_unauthenticated),
        ("--max-unauthenticated-per-address", o.max_unauthenticated_per_address),
        ("--cache-mb", o.cache_mb),
    ):
        if not value > 0:
            fail(f"{option} must be more than 0, got {value}")
    if o.token is None and not o.allow_unauthenticated:
        from ag2net.server import LOOPBACK_HOSTS

        if o.host not in LOOPBACK_HOSTS:
            fail(
                f"--host {o.host} is not loopback: without a token anyone who can reach it could act as any agent; "
                "set --token (or AG2NET_TOKEN), serve on 127.0.0.1, or pass --allow-unauthenticated"
            )
    if o.gc not in GC_MODES:
        fail(f"--gc {o.gc!r} is not a collector setting; use one of: {', '.join(GC_MODES)}")
    if o.approvals and not o.demo:
        fail("--approvals makes the demo's reviewer ask before it approves; add --demo")
    if o.token is None:
        for option, given in (
            ("--public-directory", o.public_directory),
            ("--legacy-identities", o.legacy_identities),
        ):
            if given:
                fail(f"{option} applies to a server started with --token; add --token (or AG2NET_TOKEN)")


async def open_served_hub(o: ServeOptions, path: Path | str | None) -> tuple[Any, Leadership | None]:
    """The hub to serve and, on PostgreSQL, the leadership it holds.

    PostgreSQL: one hub of the database admits; this one stands by until it holds the lock
    (``ag2net.server.leadership``), and exits with code 3 if it loses it.
    """
    if not isinstance(path, str):
        return await open_hub(path, fsync=o.fsync, cache_mb=o.cache_mb), None
    from ag2net.server.leadership import Leadership

    leadership = Leadership(
        path,
        o.host,
        o.port,
        echo=typer.echo,
        token=o.token,
        allow_unauthenticated=o.allow_unauthenticated,
        lease=o.lease,
    )
    try:
        return await leadership.take(cache_mb=o.cache_mb), leadership
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None


async def serve_hub(o: ServeOptions, hub: Any, leadership: Leadership | None) -> int:
    """Start the demo if asked, then serve ``hub`` over WebSocket until stopped (or the leadership is lost)."""
    demo_task = None
    if o.demo:
        from ag2net.demo import start_demo

        network_obj = await start_demo(hub, pace=0.5, approvals=o.approvals)
        demo_task = asyncio.create_task(network_obj.run())
    server = importlib.import_module("ag2net.server")
    try:
        serving = server.serve_cli(
            hub,
            o.host,
            o.port if leadership is None else leadership.port,
            token=o.token,
            operator_token=o.operator_token,
            allow_unauthenticated=o.allow_unauthenticated,
            public_directory=o.public_directory,
            legacy_identities=o.legacy_identities,
            auth_timeout=o.auth_timeout,
            send_timeout=o.send_timeout,
            max_connections=o.max_connections,
            max_connections_per_address=o.max_connections_per_address,
            max_unauthenticated=o.max_unauthenticated,
            max_unauthenticated_per_address=o.max_unauthenticated_per_address,
        )
        if leadership is not None:
            return await leadership.hold(serving)
        await serving
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"cannot serve on {o.host}:{o.port}: {exc}") from None
    finally:
        if demo_task is not None:
            demo_task.cancel()
    return 0


async def run_served(o: ServeOptions, path: Path | str | None, network: Any) -> int:
    """Open the hub, load the ``--network`` agents on it, serve it; the hub is closed however this ends."""
    hub, leadership = await open_served_hub(o, path)
    try:
        if network is not None:
            await run_network(network, hub)
        if o.gc == "latency":
            from ag2net.server.gc_tuning import tune_for_latency

            tune_for_latency()  # the hub's state is loaded: freeze it, keep collections short
        return await serve_hub(o, hub, leadership)
    finally:
        await (hub.close() if leadership is None else leadership.close(hub))


def serve_options(o: ServeOptions) -> None:
    """Run ``ag2net serve`` with checked options: a usage problem is one sentence, Ctrl-C or SIGTERM exit 0."""
    try:
        path = check_paths(o.db, o.db is None)
        network = load_network(o.network) if o.network else None
        code = run_until_stopped(run_served(o, path, network))  # SIGTERM closes the hub as Ctrl-C does
    except UsageProblem as exc:
        fail(str(exc))
    except (Stopped, KeyboardInterrupt):
        raise typer.Exit(0) from None
    if code:
        raise typer.Exit(code)


def serve(
    db: Annotated[
        str | None,
        typer.Option(
            help="Database the hub keeps: a SQLite file or postgresql://user[:password]@host[:port]/dbname "
            "(or AG2NET_DATABASE_URL; default: in memory).",
            envvar="AG2NET_DATABASE_URL",
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port (0 picks a free one).")] = 8765,
    network: Annotated[
        str | None, typer.Option(help="Load agents: module:function, called with the hub.")
    ] = None,
    demo: Annotated[
        bool, typer.Option("--demo", help="Run the scripted demo network on the served hub.")
    ] = False,
    approvals: Annotated[
        bool,
        typer.Option(
            "--approvals",
            help="With --demo: the reviewer's approve waits for a person's OK (the workbench's inbox).",
        ),
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(help="API key required from agents (or AG2NET_TOKEN).", envvar="AG2NET_TOKEN"),
    ] = None,
    operator_token: Annotated[
        str | None,
        typer.Option(
            help="Token granting the operator role (or AG2NET_OPERATOR_TOKEN).",
            envvar="AG2NET_OPERATOR_TOKEN",
        ),
    ] = None,
    allow_unauthenticated: Annotated[
        bool, typer.Option(help="Allow the 'none' auth scheme on a non-loopback host (warns).")
    ] = False,
    fsync: Annotated[bool, typer.Option(help="fsync every commit (durable against power loss).")] = False,
    public_directory: Annotated[
        bool,
        typer.Option(help="With --token: let connections that have not authenticated read the directory."),
    ] = False,
    legacy_identities: Annotated[
        bool,
        typer.Option(
            help="With --token: admit ag2 1.2.1 clients, which cannot present an identity secret "
            "(their identities are protected by the shared token only)."
        ),
    ] = False,
    auth_timeout: Annotated[
        float, typer.Option(help="With --token: seconds a connection has to authenticate.")
    ] = 5.0,
    send_timeout: Annotated[
        float, typer.Option(help="Seconds a connection may take to accept one message before it is closed.")
    ] = 10.0,
    max_connections: Annotated[int, typer.Option(help="Connections the hub holds at most.")] = 2000,
    max_connections_per_address: Annotated[
        int, typer.Option(help="Connections one remote address may hold at most.")
    ] = 256,
    max_unauthenticated: Annotated[
        int,
        typer.Option(
            help="With --token: connections not yet authenticated the hub holds at most (a budget of their "
            "own; when full the oldest is closed)."
        ),
    ] = 64,
    max_unauthenticated_per_address: Annotated[
        int, typer.Option(help="With --token: connections not yet authenticated one address may hold.")
    ] = 8,
    cache_mb: Annotated[
        float,
        typer.Option(
            help="MiB of envelopes the hub keeps in memory (recent WAL of live channels and the observe "
            "buffer); older ones are read back from the database."
        ),
    ] = 128.0,
    lease: Annotated[
        float,
        typer.Option(
            help="PostgreSQL: seconds within which the active hub must renew its leadership; the database "
            "ends the lock of a frozen one after that, and a standby takes over."
        ),
    ] = 2.0,
    gc: Annotated[
        str,
        typer.Option(
            help="Garbage collector: 'latency' freezes the loaded hub and keeps collections short (pauses of "
            "a few ms instead of CPython's full sweeps of 40 ms and more); 'default' keeps CPython's."
        ),
    ] = "latency",
) -> None:
    """Serve a hub over WebSocket so agents in other processes (and the workbench) can attach."""
    options = ServeOptions(
        db=db,
        host=host,
        port=port,
        network=network,
        demo=demo,
        token=token,
        operator_token=operator_token,
        allow_unauthenticated=allow_unauthenticated,
        fsync=fsync,
        public_directory=public_directory,
        legacy_identities=legacy_identities,
        auth_timeout=auth_timeout,
        send_timeout=send_timeout,
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
        max_unauthenticated=max_unauthenticated,
        max_unauthenticated_per_address=max_unauthenticated_per_address,
        cache_mb=cache_mb,
        lease=lease,
        approvals=approvals,
        gc=gc,
    )
    check_options(options)
    serve_options(options)


__all__ = ["ServeOptions", "check_options", "serve"]

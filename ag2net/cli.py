"""The ``ag2net`` command: ``tui`` (the workbench), ``demo``, ``serve``, ``wal``, ``replay``.

Every mistake a user can make here ends in one sentence on stderr and exit code 2, never a traceback.
The shared helpers (the error sentence, database paths, ``--network``, opening a hub) live in
``ag2net.cli_support``. The ``tui`` command belongs to the workbench (``tui/cli.py``): the command group loads
it by name only when it resolves ``tui`` or lists its commands for ``--help``, so importing this module loads
nothing of ``tui`` or textual, and ``tui`` never imports this module (no import circle).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from ag2net.cli_replay import replay_cmd
from ag2net.cli_support import (
    Stopped,
    UsageProblem,
    check_name,
    check_paths,
    conventional_metavars,
    default_db_path,
    default_human_name,
    fail,
    load_network,
    open_hub,
    run_network,
    run_until_stopped,
    usage_sentence,
)

MOUNTED: dict[str, str] = {"tui": "tui.cli:app", "web": "tui.web:app"}
"""Commands other packages own: name → ``module:typer_app`` (a Typer app with exactly that one command)."""


class Commands(TyperGroup):
    """The ``ag2net`` command group: its own commands plus the mounted ones, imported when first needed."""

    def list_commands(self, ctx: Any) -> list[str]:
        own = super().list_commands(ctx)
        return [*MOUNTED, *(name for name in own if name not in MOUNTED)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name in MOUNTED and cmd_name not in self.commands:
            module_name, attr = MOUNTED[cmd_name].split(":")
            command = typer.main.get_command(getattr(importlib.import_module(module_name), attr))
            command.name = cmd_name
            self.commands[cmd_name] = command
        return conventional_metavars(super().get_command(ctx, cmd_name), ctx)

    def get_params(self, ctx: Any) -> Any:
        conventional_metavars(self, ctx)  # the group's own --version and --help
        return super().get_params(ctx)

    def main(
        self,
        args: Any = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        """As Typer's, but a usage error the parser finds (``--port abc``, an unknown option, a missing
        ``--db``) is one sentence on stderr with exit code 2, like every other bad option, not a box."""
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        given = list(sys.argv[1:] if args is None else args)
        try:
            result = super().main(given, prog_name, complete_var, False, **extra)
        except typer.Abort:
            typer.echo("Aborted.", err=True)
            sys.exit(1)
        except UsageError as exc:
            if isinstance(exc, NoArgsIsHelpError):  # plain `ag2net`: the help, as Typer shows it
                from typer import rich_utils

                rich_utils.rich_format_error(exc)
            else:
                typer.echo(f"Error: {usage_sentence(exc, given)}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(result if isinstance(result, int) else 0)

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands:
            # a mounted command, or a typo: load the mounted ones so "Did you mean 'tui'?" still works
            for name in MOUNTED:
                self.get_command(ctx, name)
        return super().resolve_command(ctx, args)


app = typer.Typer(
    cls=Commands,
    add_completion=False,
    no_args_is_help=True,
    help="ag2net: an AG2 agent network (hub, channels, WAL, LLM agents) and a terminal workbench for its humans.",
)


def show_version(given: bool) -> None:
    if given:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"ag2net {version('ag2net')}")
        except PackageNotFoundError:  # run from a source tree that was never installed
            typer.echo("ag2net (not installed: no version)")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version of ag2net and exit.", callback=show_version, is_eager=True
        ),
    ] = False,
) -> None:
    """ag2net: an AG2 agent network (hub, channels, WAL, LLM agents) and a terminal workbench for its humans."""


@app.command("demo")
def demo_cmd(
    model: Annotated[
        str | None,
        typer.Option(help="Run the demo on a real model: openai:MODEL (needs the 'openai' extra)."),
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible endpoint, e.g. http://localhost:11434/v1.")
    ] = None,
) -> None:
    """Run the scripted demo network once and print what happens (no API key needed)."""
    if model is not None and (not model.startswith("openai:") or not model.removeprefix("openai:")):
        fail(f"--model {model!r} must look like openai:MODEL_NAME, e.g. openai:gpt-4o-mini")
    if base_url is not None and model is None:
        fail("--base-url names the endpoint of a real model; add --model openai:MODEL_NAME, or leave it out")
    from ag2net.agent.models import ModelError
    from ag2net.demo import run_demo_cli

    try:
        code = asyncio.run(run_demo_cli(print_fn=typer.echo, model=model, base_url=base_url))
    except ImportError as exc:
        fail(str(exc))
    except ModelError as exc:
        fail(f"--model {model}: {exc}")
    except BrokenPipeError:
        reader_left()
    raise typer.Exit(code)


def reader_left() -> NoReturn:
    """The reader of our pipe stopped (``| head``): nothing is wrong; end quietly with exit code 0."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    raise typer.Exit(0)


@app.command()
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
) -> None:
    """Serve a hub over WebSocket so agents in other processes (and the workbench) can attach."""
    if not 0 <= port <= 65535:
        fail(f"--port {port} is out of range; use 0-65535")
    for option, value in (
        ("--auth-timeout", auth_timeout),
        ("--send-timeout", send_timeout),
        ("--max-connections", max_connections),
        ("--max-connections-per-address", max_connections_per_address),
        ("--max-unauthenticated", max_unauthenticated),
        ("--max-unauthenticated-per-address", max_unauthenticated_per_address),
        ("--cache-mb", cache_mb),
    ):
        if not value > 0:
            fail(f"{option} must be more than 0, got {value}")
    if token is None and not allow_unauthenticated:
        from ag2net.server import LOOPBACK_HOSTS

        if host not in LOOPBACK_HOSTS:
            fail(
                f"--host {host} is not loopback: without a token anyone who can reach it could act as any agent; "
                "set --token (or AG2NET_TOKEN), serve on 127.0.0.1, or pass --allow-unauthenticated"
            )
    if token is None:
        for option, given in (
            ("--public-directory", public_directory),
            ("--legacy-identities", legacy_identities),
        ):
            if given:
                fail(f"{option} applies to a server started with --token; add --token (or AG2NET_TOKEN)")
    try:
        path = check_paths(db, db is None)
        func = load_network(network) if network else None

        async def main() -> int:
            leadership = None
            if isinstance(path, str):
                # PostgreSQL: one hub of the database admits; this one stands by until it holds the lock
                # (ag2net.server.leadership), and exits with code 3 if it loses it.
                from ag2net.server.leadership import Leadership

                leadership = Leadership(
                    path,
                    host,
                    port,
                    echo=typer.echo,
                    token=token,
                    allow_unauthenticated=allow_unauthenticated,
                    lease=lease,
                )
                try:
                    hub = await leadership.take(cache_mb=cache_mb)
                except ValueError as exc:
                    raise UsageProblem(str(exc)) from None
            else:
                hub = await open_hub(path, fsync=fsync, cache_mb=cache_mb)
            try:
                if func is not None:
                    await run_network(func, hub)
                demo_task = None
                if demo:
                    from ag2net.demo import start_demo

                    network_obj = await start_demo(hub, pace=0.5)
                    demo_task = asyncio.create_task(network_obj.run())
                server = importlib.import_module("ag2net.server")
                try:
                    serving = server.serve_cli(
                        hub,
                        host,
                        port if leadership is None else leadership.port,
                        token=token,
                        operator_token=operator_token,
                        allow_unauthenticated=allow_unauthenticated,
                        public_directory=public_directory,
                        legacy_identities=legacy_identities,
                        auth_timeout=auth_timeout,
                        send_timeout=send_timeout,
                        max_connections=max_connections,
                        max_connections_per_address=max_connections_per_address,
                        max_unauthenticated=max_unauthenticated,
                        max_unauthenticated_per_address=max_unauthenticated_per_address,
                    )
                    if leadership is not None:
                        return await leadership.hold(serving)
                    await serving
                except (OSError, ValueError) as exc:
                    raise UsageProblem(f"cannot serve on {host}:{port}: {exc}") from None
                finally:
                    if demo_task is not None:
                        demo_task.cancel()
            finally:
                await (hub.close() if leadership is None else leadership.close(hub))
            return 0

        code = run_until_stopped(main())  # SIGTERM closes the hub as Ctrl-C does
    except UsageProblem as exc:
        fail(str(exc))
    except (Stopped, KeyboardInterrupt):
        raise typer.Exit(0) from None
    if code:
        raise typer.Exit(code)


@app.command()
def wal(
    db: Annotated[
        str,
        typer.Option(
            help="Database to read, opened read-only: a SQLite file or postgresql://user@host/dbname "
            "(or AG2NET_DATABASE_URL).",
            envvar="AG2NET_DATABASE_URL",
        ),
    ],
    channel: Annotated[
        str | None,
        typer.Argument(
            help="Channel: its label (discussion·7d80, or discussion.7d80), the id's last digits, the id or a "
            "unique prefix; omit to list channels."
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many of the newest envelopes.")] = 50,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="One JSON object per line for piping: each envelope as stored (or each channel's metadata "
            "with its label, WAL count and participant names).",
        ),
    ] = False,
) -> None:
    """List a database's channels, or print one channel's WAL (event_data as JSON); never writes the file."""
    from ag2net.cli_wal import PostgresWalReader, WalReader, WalReadError, envelope_json
    from ag2net.store import is_database_url

    path = None if is_database_url(db) else Path(db)
    if path is not None and not path.exists():
        fail(f"--db {db!r} does not exist; give the path of an ag2net database")
    if path is not None and path.is_dir():
        fail(f"--db {db!r} is a directory; give the path of an ag2net database file")
    if limit < 1:
        fail(f"--limit must be 1 or more, got {limit}")
    try:
        with WalReader(path) if path is not None else PostgresWalReader(db) as reader:
            if channel is None:
                width = max((len(label) for label in reader.labels.values()), default=0)
                for md in reader.channels:
                    typer.echo(reader.channel_json(md) if as_json else reader.channel_line(md, width))
                return
            md = reader.resolve(channel)
            total = reader.wal_count(md.channel_id)
            first = max(1, total - limit + 1)
            if not as_json:
                names = ", ".join(reader.name_for(p) for p in md.participant_ids())
                shown = f"{first}-{total} of {total}" if total else "none"
                typer.echo(
                    f"{reader.label_for(md.channel_id)}  {md.state.value}  {names}  (envelopes {shown})"
                )
            for seq, data in reader.envelopes(md.channel_id, first, total):
                typer.echo(envelope_json(data) if as_json else reader.envelope_line(seq, data))
    except WalReadError as exc:
        fail(str(exc))
    except BrokenPipeError:
        reader_left()


app.command("replay")(replay_cmd)


def main() -> None:
    app()


__all__ = [
    "MOUNTED",
    "Commands",
    "UsageProblem",
    "app",
    "check_name",
    "check_paths",
    "default_db_path",
    "default_human_name",
    "fail",
    "load_network",
    "main",
    "open_hub",
    "run_network",
]


if __name__ == "__main__":
    main()

"""The ``ag2net`` command: ``tui`` (the workbench), ``demo``, ``serve``, ``wal``.

Every mistake a user can make here ends in one sentence on stderr and exit code 2, never a traceback.
The workbench package is imported by name at run time so the library stays headless.
"""

from __future__ import annotations

import asyncio
import functools
import getpass
import importlib
import inspect
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.errors import NetworkError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="ag2net: an AG2 agent network (hub, channels, WAL, LLM agents) and a terminal workbench for its humans.",
)


class UsageProblem(Exception):
    """A bad option or input: reported as one sentence with exit code 2."""


def fail(message: str) -> None:
    typer.echo(f"Error: {message}", err=True)
    raise typer.Exit(2)


def default_db_path() -> Path:
    """Per-user default database: ``$XDG_DATA_HOME/ag2net/workbench.db`` (``~/.local/share`` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ag2net" / "workbench.db"


def default_human_name() -> str:
    try:
        name = getpass.getuser()
    except Exception:
        name = ""
    name = re.sub(r"[^A-Za-z0-9._-]", "", name or "") or "me"
    return name


def load_network(spec: str) -> Any:
    """``module:function`` → the function (a clear UsageProblem when it cannot be found)."""
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise UsageProblem(f"--network {spec!r} must look like module:function, e.g. mypkg.agents:register")
    module_name, func_name = spec.split(":")
    sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageProblem(
            f"--network module {module_name!r} cannot be imported ({exc}); check the name and PYTHONPATH"
        ) from None
    except Exception as exc:
        raise UsageProblem(
            f"--network module {module_name!r} failed while importing: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        sys.path.pop(0)
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UsageProblem(f"--network: {module_name!r} has no function {func_name!r}")
    return func


async def run_network(func: Any, hub: Any) -> Any:
    try:
        result = func(hub)
        if inspect.isawaitable(result):
            result = await result
        return result
    except NetworkError as exc:
        raise UsageProblem(f"--network function failed: {exc}") from None


def check_paths(db: Path | None, memory: bool, *, default: Path | None = None) -> Path | None:
    """The database to open: ``--db`` (its folder must exist) or the default (its folder is created)."""
    if db is not None and memory:
        raise UsageProblem("--db and --memory cannot be used together; choose one")
    if memory:
        return None
    path = db or default or default_db_path()
    if path.exists() and path.is_dir():
        raise UsageProblem(f"--db {str(path)!r} is a directory; give a database file path")
    if db is not None and not path.parent.exists():
        raise UsageProblem(
            f"--db: the folder {str(path.parent)!r} does not exist; create it or choose another path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


async def open_hub(path: Path | None, *, fsync: bool = False, cache_mb: float | None = None) -> Any:
    from ag2net.hub import Hub
    from ag2net.store import SqliteStore
    from ag2net.store.base import StoreError

    def progress(done: int, total: int) -> None:
        # The terminal is still ours before the workbench starts: say what the wait is for.
        if sys.stderr.isatty():
            end = "\n" if done >= total else ""
            sys.stderr.write(f"\rreading the WAL of {path}: {done:,} / {total:,} envelopes{end}")
            sys.stderr.flush()

    try:
        store = None if path is None else SqliteStore(path, fsync=fsync)
        extra = {} if cache_mb is None else {"cache_mb": cache_mb}
        return await Hub.open(store, progress=progress, **extra)
    except StoreError as exc:
        raise UsageProblem(str(exc)) from None


def check_name(name: str) -> str:
    from ag2net.identity import check_agent_name

    try:
        check_agent_name(name)
    except (NetworkError, ValueError) as exc:
        raise UsageProblem(f"--as {name!r}: {exc}") from None
    return name


@app.command()
def tui(
    db: Annotated[
        Path | None, typer.Option(help="SQLite database to open (default: the per-user workbench.db).")
    ] = None,
    memory: Annotated[bool, typer.Option("--memory", help="Use an in-memory hub; nothing is saved.")] = False,
    as_name: Annotated[
        str | None, typer.Option("--as", help="Your participant name (default: your OS user name).")
    ] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Start the scripted demo network right away.")] = False,
    network: Annotated[
        str | None, typer.Option(help="Load your own agents: module:function, called with the hub.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option(help="Settings TOML file (default: the per-user settings.toml).")
    ] = None,
    connect: Annotated[
        str | None, typer.Option(help="Attach to a running hub at ws://HOST:PORT instead of embedding one.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(help="API key for --connect (or AG2NET_TOKEN); never echoed.", envvar="AG2NET_TOKEN"),
    ] = None,
    operator_token: Annotated[
        str | None,
        typer.Option(
            help="Operator token for --connect (or AG2NET_OPERATOR_TOKEN).", envvar="AG2NET_OPERATOR_TOKEN"
        ),
    ] = None,
    cache_mb: Annotated[
        float,
        typer.Option(
            help="MiB of envelopes the hub keeps in memory (recent WAL of live channels and the observe "
            "buffer); older ones are read back from the database."
        ),
    ] = 128.0,
) -> None:
    """Open the workbench: channels, live WAL tail, what each agent sees, peer cards, chat and envelope composer."""
    try:
        settings_mod = importlib.import_module("tui.settings")
        try:
            settings = settings_mod.load_settings(config)
        except settings_mod.SettingsError as exc:
            raise UsageProblem(str(exc)) from None
        name = check_name(as_name or default_human_name())
        if not cache_mb > 0:
            raise UsageProblem(f"--cache-mb must be more than 0, got {cache_mb}")
        if connect is not None:
            if not re.match(r"^wss?://[^\s/]+", connect):
                raise UsageProblem(f"--connect {connect!r} must be a URL like ws://127.0.0.1:8765")
            if db is not None or memory or demo or network:
                raise UsageProblem(
                    "--connect attaches to a running hub; --db, --memory, --demo and --network do not apply"
                )
            path = None
        else:
            path = check_paths(db, memory, default=Path(settings.database).expanduser())
        func = load_network(network) if network else None
        launch = importlib.import_module("tui.launch")
        asyncio.run(
            launch.launch(
                settings=settings,
                db_path=path,
                human_name=name,
                start_demo=demo,
                network=func,
                connect=connect,
                token=token,
                operator_token=operator_token,
                open_hub=functools.partial(open_hub, cache_mb=cache_mb),
                run_network=run_network,
            )
        )
    except UsageProblem as exc:
        fail(str(exc))


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
    if model is not None and not model.startswith("openai:"):
        fail(f"--model {model!r} must look like openai:MODEL_NAME, e.g. openai:gpt-4o-mini")
    from ag2net.demo import run_demo_cli

    try:
        code = asyncio.run(run_demo_cli(print_fn=typer.echo, model=model, base_url=base_url))
    except ImportError as exc:
        fail(str(exc))
    raise typer.Exit(code)


@app.command()
def serve(
    db: Annotated[
        Path | None, typer.Option(help="SQLite database the hub keeps (default: in memory).")
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
    cache_mb: Annotated[
        float,
        typer.Option(
            help="MiB of envelopes the hub keeps in memory (recent WAL of live channels and the observe "
            "buffer); older ones are read back from the database."
        ),
    ] = 128.0,
) -> None:
    """Serve a hub over WebSocket so agents in other processes (and the workbench) can attach."""
    if not 0 <= port <= 65535:
        fail(f"--port {port} is out of range; use 0-65535")
    for option, value in (
        ("--auth-timeout", auth_timeout),
        ("--send-timeout", send_timeout),
        ("--max-connections", max_connections),
        ("--max-connections-per-address", max_connections_per_address),
        ("--cache-mb", cache_mb),
    ):
        if not value > 0:
            fail(f"{option} must be more than 0, got {value}")
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

        async def main() -> None:
            hub = await open_hub(path, fsync=fsync, cache_mb=cache_mb)
            try:
                if func is not None:
                    await run_network(func, hub)
                demo_task = None
                if demo:
                    from ag2net.demo import start_demo

                    network_obj = await start_demo(hub, pace=0.5)
                    demo_task = asyncio.create_task(network_obj.run())
                server = importlib.import_module("ag2net.transport.server")
                try:
                    await server.serve_cli(
                        hub,
                        host,
                        port,
                        token=token,
                        operator_token=operator_token,
                        allow_unauthenticated=allow_unauthenticated,
                        public_directory=public_directory,
                        legacy_identities=legacy_identities,
                        auth_timeout=auth_timeout,
                        send_timeout=send_timeout,
                        max_connections=max_connections,
                        max_connections_per_address=max_connections_per_address,
                    )
                except (OSError, ValueError) as exc:
                    raise UsageProblem(f"cannot serve on {host}:{port}: {exc}") from None
                finally:
                    if demo_task is not None:
                        demo_task.cancel()
            finally:
                await hub.close()

        asyncio.run(main())
    except UsageProblem as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(0) from None


@app.command()
def wal(
    db: Annotated[Path, typer.Option(help="SQLite database to read.")],
    channel: Annotated[
        str | None, typer.Argument(help="Channel id (or a unique prefix); omit to list channels.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Show at most this many of the newest envelopes.")] = 50,
) -> None:
    """List a database's channels, or print one channel's WAL."""
    if not db.exists():
        fail(f"--db {str(db)!r} does not exist; give the path of an ag2net database")
    if limit < 1:
        fail(f"--limit must be 1 or more, got {limit}")

    async def main() -> None:
        hub = await open_hub(db)
        try:
            if channel is None:
                stats = hub.channel_stats()
                for md in hub.query_channels(limit=None):
                    names = ", ".join(hub.name_for(p) for p in md.participant_ids())
                    count = stats[md.channel_id]["wal_count"]
                    typer.echo(
                        f"{md.channel_id}  {md.manifest.type:<12} {md.state.value:<8} {count:>6}  {names}"
                    )
                return
            matches = [cid for cid in hub.channels if cid.startswith(channel)]
            if len(matches) != 1:
                raise UsageProblem(
                    f"channel {channel!r} matches {len(matches)} channels; give more of the id"
                    if matches
                    else f"channel {channel!r} not found in {db}"
                )
            cid = matches[0]
            total = hub.wal_count(cid)
            first = max(1, total - limit + 1)
            for seq, env in await hub.read_wal_seq(cid, first, total):
                text = env.event_data.get("text") if isinstance(env.event_data.get("text"), str) else ""
                preview = (text or str(env.event_data)).replace("\n", " ")[:80]
                typer.echo(
                    f"{seq:>6}  {env.created_at[11:23]}  {hub.name_for(env.sender_id):<12} {env.event_type:<26} {preview}"
                )
        finally:
            await hub.close()

    try:
        asyncio.run(main())
    except UsageProblem as exc:
        fail(str(exc))


def main() -> None:
    app()


if __name__ == "__main__":
    main()

"""The ``ag2net tui`` command: options → settings → :func:`tui.launch.launch`.

``ag2net/cli/commands.py`` mounts this command by name when its command group resolves ``tui`` (or lists
its commands for ``--help``), so ``import ag2net.cli`` loads nothing of the workbench. This module imports the
library's command-line helpers (``ag2net.cli.support``), never the command group itself: the command line has
no import circle.
Textual itself is loaded only when the workbench starts (``tui.launch`` imports the app inside ``launch``).
``python -m tui.cli`` runs the same command on its own.
"""

from __future__ import annotations

import functools
from typing import Annotated

import typer

from ag2net.cli.support import (
    Stopped,
    UsageProblem,
    check_demo_seat,
    fail,
    load_network,
    open_hub,
    run_network,
    run_until_stopped,
    stopping_with,
)
from ag2net.errors import NetworkError
from tui.launch import LaunchError, launch, take_leadership
from tui.options import ConfigFile, Memory, NetworkSpec, check_cache, hub_path, seat_name, settings_from

app = typer.Typer(add_completion=False)


@app.command()
def tui(
    db: Annotated[
        str | None,
        typer.Option(
            help="Database to open: a SQLite file or postgresql://user[:password]@host[:port]/dbname "
            "(or AG2NET_DATABASE_URL; default: the per-user workbench.db).",
            envvar="AG2NET_DATABASE_URL",
        ),
    ] = None,
    memory: Memory = False,
    as_name: Annotated[
        str | None, typer.Option("--as", help="Your participant name (default: your OS user name).")
    ] = None,
    demo: Annotated[bool, typer.Option("--demo", help="Start the scripted demo network right away.")] = False,
    approvals: Annotated[
        bool,
        typer.Option(
            "--approvals",
            help="The demo's reviewer asks a person before it approves (answered in Waiting for you, w).",
        ),
    ] = False,
    network: NetworkSpec = None,
    config: ConfigFile = None,
    connect: Annotated[
        str | None,
        typer.Option(
            help="Attach to a running hub at ws://HOST:PORT instead of embedding one; several separated by "
            "commas (ws://a:8765,ws://b:8765: an active hub and its standbys) use whichever admits."
        ),
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
    open_file: Annotated[
        str | None,
        typer.Option(
            "--open",
            help="Show a repro bundle (.ag2b) or traces (an OTLP JSON file or directory: ag2net export, AG2's "
            "spans.jsonl) offline, read-only: an in-memory copy, nothing is saved.",
        ),
    ] = None,
) -> None:
    """Open the workbench: channels, live WAL tail, what each agent sees, peer cards, chat and envelope composer."""
    try:
        settings = settings_from(config)
        name = seat_name(as_name, settings)
        check_cache(cache_mb)
        if demo:
            check_demo_seat(name)
        opened = None
        if open_file is not None:
            from tui.open_file import check_open

            opened = check_open(
                open_file, **{"--connect": connect, "--memory": memory, "--demo": demo, "--network": network}
            )
            path = None
        else:
            path = hub_path(
                settings, connect=connect, db=db, memory=memory, demo=demo, network=network, several=True
            )
        if approvals and (connect is not None or not demo):
            raise UsageProblem(
                "--approvals applies to the demo of an embedded hub (add --demo); with --connect, start the hub "
                "with 'ag2net serve --demo --approvals'"
            )
        func = load_network(network) if network else None
        run_until_stopped(  # SIGTERM (or SIGINT) ends the app as quitting does, then the hub closes
            launch(
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
                # a postgresql:// URL: the database's leadership lock, or a refusal when a hub holds it
                lead=functools.partial(take_leadership, cache_mb=cache_mb),
                stop_with=stopping_with,
                open_path=opened,
                demo_approvals=approvals,
            )
        )
    except (UsageProblem, LaunchError, NetworkError) as exc:
        # NetworkError: the hub cannot be reached or refused the workbench; LaunchError: --as names an agent.
        fail(str(exc))
    except Stopped:
        raise typer.Exit(0) from None


__all__ = ["app", "tui"]


if __name__ == "__main__":
    app()

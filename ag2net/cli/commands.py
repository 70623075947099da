"""The ``ag2net`` command: ``tui`` (the workbench), ``demo``, ``serve``, ``wal``, ``replay``.

Every mistake a user can make here ends in one sentence on stderr and exit code 2, never a traceback.
``serve`` lives in ``ag2net.cli.serve``, ``replay`` in ``ag2net.cli.replay``, ``wal``'s readers in
``ag2net.cli.wal``; the shared helpers (the error sentence, database paths, ``--network``, opening a hub) in
``ag2net.cli.support``. The ``tui`` command belongs to the workbench (``tui/cli.py``): the command group loads
it by name only when it resolves ``tui`` or lists its commands for ``--help``, so importing this module loads
nothing of ``tui`` or textual, and ``tui`` never imports this module (no import circle).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from typing import Annotated, Any, NoReturn

import typer
from typer._click.exceptions import NoArgsIsHelpError, UsageError
from typer.core import TyperGroup

from ag2net.cli.replay import replay_cmd
from ag2net.cli.serve import serve
from ag2net.cli.support import ReadOnlyDb, conventional_metavars, fail, usage_sentence

MOUNTED: dict[str, str] = {
    "tui": "tui.cli:app",
    "web": "tui.web:app",
    "mcp": "ag2net.mcp.cli:app",
    "export": "ag2net.cli.export:app",
    "bundle": "ag2net.cli.bundle:app",
    "eval": "ag2net.eval.cli:app",
}
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
        if args and args[0] in MOUNTED:  # a mounted command: load that one only (get_command)
            self.get_command(ctx, args[0])
        elif args and args[0] not in self.commands:
            # a typo: load the mounted ones so "Did you mean 'tui'?" still works
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


app.command("serve")(serve)


@app.command()
def wal(
    db: ReadOnlyDb,
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
    from ag2net.cli.wal import WalReadError, envelope_json, open_reader

    if limit < 1:
        fail(f"--limit must be 1 or more, got {limit}")
    try:
        with open_reader(db) as reader:
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


__all__ = ["MOUNTED", "Commands", "app", "main", "reader_left"]


if __name__ == "__main__":
    main()

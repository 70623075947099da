"""What every ``ag2net`` command shares: the one-sentence error, the database path rules, ``--as`` and
``--network`` checks, and opening a hub from the command line.

The library's commands (``ag2net/cli/commands.py``, ``serve.py``, ``replay.py``) and the workbench's
``tui/cli.py`` (``tui``) and ``tui/web.py`` (``web``) import this module; it imports none of them, so the
command line has no import circle. Headless: no UI imports.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import importlib
import inspect
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Annotated, Any, NoReturn, TypeVar

import typer

from ag2net.errors import NetworkError

_LINE_BREAKS = re.compile(r"\s*[\r\n]+\s*")


#: ``--db`` of the commands that read a database without writing to it (``wal``, ``replay``).
ReadOnlyDb = Annotated[
    str,
    typer.Option(
        help="Database to read, opened read-only: a SQLite file or postgresql://user@host/dbname "
        "(or AG2NET_DATABASE_URL).",
        envvar="AG2NET_DATABASE_URL",
    ),
]


#: ``--token`` of the commands that attach to a running hub with ``--connect`` (``mcp``, the workbench).
ConnectToken = Annotated[
    str | None,
    typer.Option(help="API key for --connect (or AG2NET_TOKEN); never echoed.", envvar="AG2NET_TOKEN"),
]

#: ``--operator-token`` of the commands that attach to a running hub with ``--connect``.
ConnectOperatorToken = Annotated[
    str | None,
    typer.Option(
        help="Operator token for --connect (or AG2NET_OPERATOR_TOKEN): needed to read other agents' turns.",
        envvar="AG2NET_OPERATOR_TOKEN",
    ),
]


class UsageProblem(Exception):
    """A bad option or input: reported as one sentence with exit code 2."""


def fail(message: str) -> NoReturn:
    """Print ``Error: <message>`` on stderr, on one line, and end the command with exit code 2."""
    typer.echo(f"Error: {_LINE_BREAKS.sub(' ', message.strip())}", err=True)
    raise typer.Exit(2)


T = TypeVar("T")

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""SIGHUP too: the terminal that started the command closed; the hub is closed as on Ctrl-C."""
STOP_GRACE = 10.0
"""Seconds a command has, after a stop signal, to close its hub before it exits without finishing."""


class Stopped(Exception):
    """SIGINT or SIGTERM stopped the command and its clean-up ran (the hub closed): exit as for Ctrl-C."""


_stoppers: list[Callable[[], Any]] = []


@contextlib.contextmanager
def stopping_with(stop: Callable[[], Any]) -> Iterator[None]:
    """While inside, a stop signal calls ``stop`` (a Textual app's ``exit``) instead of cancelling the
    command's coroutine: the app then ends as when its user quits, and the code after it closes the hub."""
    _stoppers.append(stop)
    try:
        yield
    finally:
        _stoppers.remove(stop)


def run_until_stopped(main: Coroutine[Any, Any, T], *, grace: float = STOP_GRACE) -> T:
    """``asyncio.run(main)``, where SIGTERM (and SIGHUP) stop the command exactly as SIGINT does.

    The first of either signal cancels ``main`` (or calls the innermost ``stopping_with`` callback), so its
    ``finally`` blocks close the hub (the clean-shutdown snapshot, the cursors, the checkpoint), and then
    ``Stopped`` is raised. Stopping is bounded: if it is not done ``grace`` seconds later, one sentence goes
    to stderr and the process exits with code 1 (what was acknowledged is committed already). A second
    signal stops at once, as a second Ctrl-C does (``KeyboardInterrupt``)."""
    signalled: list[int] = []
    timer: list[threading.Timer] = []

    def overdue() -> None:
        sys.stderr.write(
            f"Error: stopping took longer than {grace:g} s, so the command exits without finishing its clean-up; "
            "every acknowledged write is already committed\n"
        )
        sys.stderr.flush()
        os._exit(1)

    async def guarded() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop(signum: int) -> None:
            if signalled:
                raise KeyboardInterrupt
            signalled.append(signum)
            watchdog = threading.Timer(grace, overdue)
            watchdog.daemon = True
            watchdog.start()
            timer.append(watchdog)
            if _stoppers:
                _stoppers[-1]()
            else:
                task.cancel()

        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, stop, signum)
        try:
            result = await main
        except asyncio.CancelledError:
            if not signalled:
                raise
            task.uncancel()
            raise Stopped from None
        finally:
            for signum in STOP_SIGNALS:
                loop.remove_signal_handler(signum)
        if signalled:
            raise Stopped
        return result

    try:
        return asyncio.run(guarded())
    finally:
        for watchdog in timer:
            watchdog.cancel()


def usage_sentence(exc: Any, args: list[str]) -> str:
    """The one sentence for a usage error the command line's parser raised (a click ``UsageError``): the
    option, what is wrong with it and where the help is, instead of Typer's box.

    ``args`` are the command's arguments, to quote the value a type refused (``--port abc``)."""
    from typer._click import exceptions as click

    ctx = getattr(exc, "ctx", None)
    where = f"see '{ctx.command_path} --help'" if ctx is not None else "see --help"
    if isinstance(exc, click.NoSuchOption):
        maybe = f" (did you mean {' or '.join(exc.possibilities)}?)" if exc.possibilities else ""
        return f"no such option {exc.option_name}{maybe}; {where}"
    param = getattr(exc, "param", None)
    if isinstance(exc, click.MissingParameter) or not isinstance(exc, click.BadParameter) or param is None:
        return f"{exc.format_message().strip().rstrip('.')}; {where}"
    name = next((o for o in getattr(param, "opts", ()) if o.startswith("--")), None) or (param.name or "?")
    value = given_value(args, list(getattr(param, "opts", ())))
    got = f", got {value!r}" if value is not None else ""
    kind = _type_of(param)
    default = getattr(param, "default", None)
    example = default if isinstance(default, int | float) and not isinstance(default, bool) else 1
    if kind == "int":
        return f"{name} must be a whole number{got}; give one like {name} {example}"
    if kind == "float":
        return f"{name} must be a number{got}; give one like {name} {example}"
    return f"{name}: {exc.message.strip().rstrip('.')}{got}; {where}"


def given_value(args: list[str], opts: list[str]) -> str | None:
    """The value ``args`` give an option (``--port abc`` or ``--port=abc``); None when it is not there."""
    for i, arg in enumerate(args):
        for opt in opts:
            if arg == opt and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(f"{opt}="):
                return arg.removeprefix(f"{opt}=")
    return None


def conventional_metavars(command: Any, ctx: Any = None) -> Any:
    """Give ``command``'s options the metavars ``--help`` conventionally shows (``TEXT``, ``INTEGER``,
    ``FLOAT``, ``PATH``; nothing after a flag, ``--help`` included) instead of Typer's ``<str>``,
    ``<bool>``; returns it. ``ctx``: the context its ``--help`` option is made for."""
    params = list(getattr(command, "params", ()))
    if ctx is not None and hasattr(command, "get_help_option"):
        params.append(command.get_help_option(ctx))
    for param in params:
        if param is None:
            continue
        if getattr(param, "metavar", "set") is not None:
            continue
        if getattr(param, "is_flag", False):
            param.metavar = ""
        elif getattr(param, "param_type_name", "") == "option":
            param.metavar = _METAVARS.get(_type_of(param), "TEXT")
        elif getattr(param, "param_type_name", "") == "argument" and param.name:
            # the name column says CHANNEL; the type column says TEXT, not <str>
            param.metavar = param.name.upper()
            shown = _METAVARS.get(_type_of(param), "TEXT")
            setattr(param, "display_type_rich", lambda ctx=None, shown=shown: shown)  # noqa: B010
    return command


_METAVARS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "Path": "PATH"}


def _type_of(param: Any) -> str:
    """The Python type name of a Typer parameter (``str``, ``int``, ``float``, ``Path``, ``bool``)."""
    bare = getattr(param, "bare_type", None)
    return str(bare() if callable(bare) else getattr(getattr(param, "type", None), "name", ""))


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


def import_user_module(module_name: str, what: str) -> Any:
    """The module ``module_name`` a command-line option (``what``, e.g. ``--network``) names, imported with
    the current folder on ``sys.path``; a UsageProblem in one sentence when it is missing or fails."""
    sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except ImportError as exc:
        raise UsageProblem(
            f"{what} module {module_name!r} cannot be imported ({exc}); check the name and PYTHONPATH"
        ) from None
    except Exception as exc:
        raise UsageProblem(
            f"{what} module {module_name!r} failed while importing: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        sys.path.pop(0)


def output_file(output: str, hint: str) -> Path:
    """``-o OUTPUT`` as the path of one file to write: not a directory (``hint`` says what to give instead),
    in a directory that exists."""
    path = Path(output).expanduser()
    if path.is_dir():
        raise UsageProblem(f"-o {output!r} is a directory; {hint}")
    if not path.parent.is_dir():
        raise UsageProblem(f"-o {output!r}: the directory {str(path.parent)!r} does not exist")
    return path


def load_network(spec: str) -> Any:
    """``module:function`` → the function (a clear UsageProblem when it cannot be found)."""
    if spec.count(":") != 1 or not all(spec.split(":")):
        raise UsageProblem(f"--network {spec!r} must look like module:function, e.g. mypkg.agents:register")
    module_name, func_name = spec.split(":")
    module = import_user_module(module_name, "--network")
    func = getattr(module, func_name, None)
    if not callable(func):
        raise UsageProblem(f"--network: {module_name!r} has no function {func_name!r}")
    return func


async def run_network(func: Any, hub: Any) -> Any:
    """Call a ``--network`` function with the hub (awaiting it when it is a coroutine function)."""
    try:
        result = func(hub)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:  # the user's code: any failure is theirs to fix, told in one sentence
        raise UsageProblem(
            f"--network function {network_name(func)} raised {type(exc).__name__}: {exc}; fix it, or start "
            "without --network"
        ) from None


def network_name(func: Any) -> str:
    """``module:function`` of a ``--network`` function, as the user wrote it."""
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return f"{module}:{name}"


def check_paths(db: Path | str | None, memory: bool, *, default: Path | None = None) -> Path | str | None:
    """The database to open: ``--db`` (a ``postgresql://`` URL, kept as text; or a file whose folder must
    exist) or the default (its folder is created)."""
    from ag2net.store import is_database_url

    if db is not None and memory:
        raise UsageProblem("--db and --memory cannot be used together; choose one")
    if memory:
        return None
    if isinstance(db, str):
        if is_database_url(db):
            return db  # the store checks the scheme, the server and the credentials when it opens
        db = Path(db)
    path = db or default or default_db_path()
    if path.exists() and path.is_dir():
        raise UsageProblem(f"--db {str(path)!r} is a directory; give a database file path")
    if db is not None and not path.parent.exists():
        raise UsageProblem(
            f"--db: the folder {str(path.parent)!r} does not exist; create it or choose another path"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


async def open_hub(path: Path | str | None, *, fsync: bool = False, cache_mb: float | None = None) -> Any:
    """Open a hub on ``path`` (None: in memory; a ``postgresql://`` URL: that database); a database that
    cannot be used is a UsageProblem."""
    from ag2net.hub import Hub
    from ag2net.store import open_store
    from ag2net.store.base import StoreError
    from ag2net.store.postgres import redact_url

    where = redact_url(path) if isinstance(path, str) else path

    def progress(done: int, total: int) -> None:
        # The terminal is still ours before the workbench starts: say what the wait is for.
        if sys.stderr.isatty():
            end = "\n" if done >= total else ""
            sys.stderr.write(f"\rreading the WAL of {where}: {done:,} / {total:,} envelopes{end}")
            sys.stderr.flush()

    try:
        store = None if path is None else open_store(path, fsync=fsync)
        extra: dict[str, Any] = {} if cache_mb is None else {"cache_mb": cache_mb}
        return await Hub.open(store, progress=progress, **extra)
    except StoreError as exc:
        raise UsageProblem(str(exc)) from None


def check_demo_seat(name: str) -> None:
    """With ``--demo``: the human's name may not be one of the demo agents' (they would fail to register)."""
    from ag2net.demo import ROLES

    roles = [role.name for role in ROLES]
    if name in roles:
        raise UsageProblem(
            f"you would be seated as {name!r}, the name of one of the demo's agents ({', '.join(roles)}); "
            "with --demo choose another name with --as, e.g. --as ana"
        )


def check_name(name: str) -> str:
    """``--as NAME``: a valid participant name, or a UsageProblem naming it."""
    from ag2net.identity import check_agent_name

    if not name.strip():
        raise UsageProblem(f"--as {name!r} is empty; give the name to seat you under, e.g. --as ana")
    try:
        check_agent_name(name)
    except (NetworkError, ValueError) as exc:
        raise UsageProblem(f"--as {name!r}: {exc}") from None
    return name


__all__ = [
    "STOP_GRACE",
    "ReadOnlyDb",
    "Stopped",
    "UsageProblem",
    "check_demo_seat",
    "check_name",
    "check_paths",
    "conventional_metavars",
    "default_db_path",
    "default_human_name",
    "fail",
    "load_network",
    "network_name",
    "open_hub",
    "run_network",
    "run_until_stopped",
    "stopping_with",
    "usage_sentence",
]

"""The ``ag2net web`` command: the workbench in a browser, served by textual-serve (the ``web`` extra).

Each browser tab that opens the page gets its own workbench process, ``ag2net tui --connect`` to one
shared hub, with its screen relayed to xterm.js in the page. The hub is either embedded here (``--db`` /
``--memory`` / ``--demo`` / ``--network`` mean what they mean for ``ag2net tui``; it is served over WebSocket
on a free loopback port, as ``ag2net serve`` serves one) or a running one (``--connect``).

The page listens on loopback by default. A non-loopback ``--host`` needs a token, the rule ``ag2net serve``
follows; with a token the page asks for it before it starts a workbench (``tui.web_server``), and the
embedded hub requires it too. Every mistake ends in one sentence and exit code 2 before anything is served;
Ctrl-C (or SIGTERM) stops the tabs' workbenches, the demo, then the hub.

An embedded hub on a PostgreSQL URL takes the database's leadership lock as ``ag2net tui`` does
(``tui.launch.take_leadership``): refused in one sentence while another hub holds it; if it loses the lock
it stops writing, the tabs are stopped, and the command exits with code 3 after one sentence.

``ag2net/cli/commands.py`` mounts this command by name (``MOUNTED``), so importing the library loads none
of it, and textual-serve (aiohttp) is imported only when the command runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import secrets
import shlex
import signal
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.cli.support import (
    UsageProblem,
    check_demo_seat,
    fail,
    load_network,
    open_hub,
    run_network,
)
from ag2net.errors import NetworkError
from tui.launch import DEMO_PACE, EMBEDDED, LaunchError, dial, take_leadership
from tui.options import ConfigFile, Memory, NetworkSpec, check_cache, hub_path, seat_name, settings_from

NOT_INSTALLED = "textual-serve is not installed; install the web extra: pip install 'ag2net[web]'"

TAB_ENV = ("AG2NET_TOKEN", "AG2NET_OPERATOR_TOKEN", "AG2NET_DATABASE_URL")
"""Variables the tab's ``ag2net tui --connect`` would read from the environment: set by this command only."""

app = typer.Typer(add_completion=False)


@app.command()
def web(
    host: Annotated[
        str, typer.Option(help="Interface the page listens on; anything but loopback needs --token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="TCP port of the page (0 picks a free one).")] = 8000,
    db: Annotated[
        str | None,
        typer.Option(
            help="Database of the embedded hub: a SQLite file or postgresql://user[:password]@host[:port]/dbname "
            "(or AG2NET_DATABASE_URL; default: the per-user workbench.db).",
            envvar="AG2NET_DATABASE_URL",
        ),
    ] = None,
    memory: Memory = False,
    as_name: Annotated[
        str | None,
        typer.Option("--as", help="The participant name every tab uses (default: your OS user name)."),
    ] = None,
    demo: Annotated[
        bool,
        typer.Option("--demo", help="Start the scripted demo network once the first tab has seated you."),
    ] = False,
    network: NetworkSpec = None,
    config: ConfigFile = None,
    connect: Annotated[
        str | None,
        typer.Option(help="Attach the tabs to a running hub at ws://HOST:PORT instead of embedding one."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Token the page asks for, and the hub's API key (or AG2NET_TOKEN); never echoed.",
            envvar="AG2NET_TOKEN",
        ),
    ] = None,
    operator_token: Annotated[
        str | None,
        typer.Option(
            help="Operator token: of the --connect hub, or for the embedded one (or AG2NET_OPERATOR_TOKEN).",
            envvar="AG2NET_OPERATOR_TOKEN",
        ),
    ] = None,
    cache_mb: Annotated[
        float,
        typer.Option(
            help="MiB of envelopes the embedded hub keeps in memory; older ones are read back from the database."
        ),
    ] = 128.0,
    open_file: Annotated[
        str | None,
        typer.Option(
            "--open",
            help="Serve a repro bundle (.ag2b) or traces (an OTLP JSON file or directory) read-only: an "
            "in-memory copy, nothing is saved.",
        ),
    ] = None,
) -> None:
    """Serve the workbench to a browser: each tab runs its own workbench on one shared hub."""
    try:
        try:
            import textual_serve  # noqa: F401  (the web extra)
        except ImportError:
            raise UsageProblem(NOT_INSTALLED) from None
        from ag2net.server import LOOPBACK_HOSTS

        if not 0 <= port <= 65535:
            raise UsageProblem(f"--port {port} is out of range; use 1-65535 (or 0 for a free one)")
        check_host_text(host)
        loopback = host in LOOPBACK_HOSTS
        if token is not None and not token:
            raise UsageProblem("--token is empty; give the token the page should ask for, or leave it out")
        if not loopback and token is None:
            raise UsageProblem(
                f"--host {host} is not loopback: anyone who can reach it could open a workbench; set --token "
                "(or AG2NET_TOKEN), which the page then asks for, or serve on 127.0.0.1"
            )
        settings = settings_from(config)
        name = seat_name(as_name, settings)
        if demo:
            check_demo_seat(name)
        check_cache(cache_mb)
        opened = None
        if open_file is not None:
            from tui.open_file import check_open

            opened = check_open(
                open_file, **{"--connect": connect, "--memory": memory, "--demo": demo, "--network": network}
            )
            path = None
        else:
            path = hub_path(
                settings, connect=connect, db=db, memory=memory, demo=demo, network=network, several=False
            )
        func = load_network(network) if network else None
        sock = listen(host, port)
        try:
            code = asyncio.run(
                serve_web(
                    sock=sock,
                    host=host,
                    loopback=loopback,
                    name=name,
                    path=path,
                    demo=demo,
                    network=func,
                    connect=connect,
                    token=token,
                    operator_token=operator_token,
                    cache_mb=cache_mb,
                    config=config,
                    opened=opened,
                )
            )
        finally:
            sock.close()
    except (UsageProblem, NetworkError) as exc:
        fail(str(exc))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)


def check_host_text(host: str) -> None:
    if not host or any(c.isspace() or c in "/@?#[]" for c in host) or len(host) > 253:
        raise UsageProblem(
            f"--host {host!r} is not a host name or address; give one like 127.0.0.1, 0.0.0.0 or ::1"
        )


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or the one sentence saying why there cannot be one."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageProblem(
            f"--host {host!r} is not an address of this machine or a name it can resolve ({reason}); give one "
            "like 127.0.0.1 or 0.0.0.0"
        ) from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # not past a listener: only TIME_WAIT
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageProblem(
                f"--port {port} is taken on {host} (another program listens there); choose another --port"
            ) from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise UsageProblem(
                f"--host {host} is not an address of this machine; use one of its addresses, 0.0.0.0 for all "
                "of them, or 127.0.0.1"
            ) from None
        if exc.errno == errno.EACCES:
            raise UsageProblem(
                f"--port {port} needs privileges this user does not have; choose a port from 1024 up"
            ) from None
        raise UsageProblem(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.setblocking(False)
    return sock


def tab_command(hub_url: str, name: str, config: Path | None) -> str:
    """The shell command textual-serve runs for each tab: this Python's workbench, attached to the hub.

    ``-P`` keeps the current folder off ``sys.path`` (a folder named ``tui`` there cannot shadow the
    workbench); tokens go through the environment, never the command line."""
    argv = [sys.executable, "-P", "-m", "tui.cli", "--connect", hub_url, "--as", name]
    if config is not None:
        argv += ["--config", str(config.expanduser().resolve())]
    return shlex.join(argv)


def say(line: str) -> None:
    print(line, flush=True)


async def demo_once_seated(hub: Any, name: str) -> None:
    """Start the demo when the first tab has seated the human (the planner's question is addressed to
    them), and keep it running until cancelled."""
    from ag2net.demo import start_demo

    while hub.find_agent_id(name) is None:
        await asyncio.sleep(0.1)
    try:
        demo = await start_demo(hub, human_name=name, pace=DEMO_PACE)
    except Exception as exc:
        say(f"the demo network could not start: {exc}")
        return
    say("the demo network is running")
    try:
        await demo.run()
        await asyncio.Event().wait()
    finally:
        await demo.close()


async def serve_web(
    *,
    sock: socket.socket,
    host: str,
    loopback: bool,
    name: str,
    path: Path | str | None,
    demo: bool,
    network: Callable[..., Any] | None,
    connect: str | None,
    token: str | None,
    operator_token: str | None,
    cache_mb: float,
    config: Path | None,
    opened: Path | None = None,
) -> int:
    """Open or check the hub, serve the page on ``sock`` until SIGINT/SIGTERM, then stop in order:
    the tabs' workbenches, the demo, the hub's server, the hub. The exit code: 0, or 3 when the embedded
    hub lost the leadership of its PostgreSQL database."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    leadership: Any = None
    hub: Any = None
    async with contextlib.AsyncExitStack() as stack:
        if connect is not None:
            await check_hub(connect, token, operator_token)
            hub_url, operator = connect, operator_token
        else:
            hub, leadership = await embedded_hub(stack, path, cache_mb, opened)
            if network is not None:
                await run_network(network, hub)
            hub_url, operator = await serve_hub(stack, hub, token, operator_token)
            if demo:
                task = asyncio.create_task(demo_once_seated(hub, name))
                stack.push_async_callback(cancelled, task)
        env: dict[str, str] = {}
        if token is not None:
            env["AG2NET_TOKEN"] = token
        if operator is not None:
            env["AG2NET_OPERATOR_TOKEN"] = operator
        await serve_page(
            stack, sock, hub_url, name=name, config=config, token=token, loopback=loopback, env=env
        )
        say_where(sock, hub_url, name=name, token=token, loopback=loopback)
        if await stopped_or_lost(stop, leadership):
            await leadership.close(hub)  # the store and the lock session first: nothing more of it lands
        else:
            leadership = None
        say("stopping: the tabs' workbenches, then the hub")
    if leadership is not None:
        return lost_exit(leadership)
    say("stopped")
    return 0


async def check_hub(url: str, token: str | None, operator_token: str | None) -> None:
    """``--connect``: the hub at ``url`` admits these tokens (else the one sentence why not)."""
    try:
        client = await dial(url, token=token, operator_token=operator_token)
    except LaunchError as exc:
        raise UsageProblem(str(exc)) from None
    await client.close()


async def embedded_hub(
    stack: contextlib.AsyncExitStack, path: Path | str | None, cache_mb: float, opened: Path | None = None
) -> tuple[Any, Any]:
    """(hub, leadership) of the embedded hub, closed when ``stack`` closes; the leadership of its
    PostgreSQL database (None for a file or memory). ``opened`` (``--open``): a bundle or traces on an
    in-memory hub, a read-only copy (``tui.open_file``)."""
    if opened is not None:
        from tui.open_file import open_file

        shown = await open_file(opened)
        stack.push_async_callback(shown.hub.close)
        say(shown.opening_sentence())
        return shown.hub, None
    if isinstance(path, str):  # PostgreSQL: the database's one writer, or refused
        try:
            hub, leadership = await take_leadership(path, holder=f"{EMBEDDED} ag2net web", cache_mb=cache_mb)
        except LaunchError as exc:
            raise UsageProblem(str(exc)) from None
        stack.push_async_callback(leadership.close, hub)  # the hub (unless lost), then the lock
        return hub, leadership
    hub = await open_hub(path, cache_mb=cache_mb)
    stack.push_async_callback(hub.close)
    return hub, None


async def serve_hub(
    stack: contextlib.AsyncExitStack, hub: Any, token: str | None, operator_token: str | None
) -> tuple[str, str | None]:
    """Serve ``hub`` over WebSocket on a free loopback port until ``stack`` closes: (its URL, the operator
    token the tabs use)."""
    from ag2net.server import serve_ws

    # with a token the hub is a token server; the tabs are its operator, as the local workbench is
    operator = operator_token or (secrets.token_urlsafe(24) if token is not None else None)
    try:
        served = await stack.enter_async_context(
            serve_ws(hub, "127.0.0.1", 0, token=token, operator_token=operator)
        )
    except (OSError, ValueError) as exc:
        raise UsageProblem(f"cannot serve the embedded hub: {exc}") from None
    return served.url(), operator


async def serve_page(
    stack: contextlib.AsyncExitStack,
    sock: socket.socket,
    hub_url: str,
    *,
    name: str,
    config: Path | None,
    token: str | None,
    loopback: bool,
    env: dict[str, str],
) -> None:
    """Serve the page on ``sock`` until ``stack`` closes: each tab a workbench attached to ``hub_url``."""
    from aiohttp import web as aioweb

    from tui.web_server import QUIT_GRACE, WorkbenchServer

    server = WorkbenchServer(
        lambda seat: tab_command(hub_url, seat or name, config),
        title=f"ag2net workbench · {name}",
        token=token,
        loopback=loopback,
        env=env,
        unset_env=TAB_ENV,
        echo=say,
    )
    runner = aioweb.AppRunner(
        server.make_app(), handle_signals=False, shutdown_timeout=QUIT_GRACE + 2, access_log=None
    )
    await runner.setup()
    stack.push_async_callback(runner.cleanup)
    await aioweb.SockSite(runner, sock).start()


def say_where(sock: socket.socket, hub_url: str, *, name: str, token: str | None, loopback: bool) -> None:
    shown = sock.getsockname()
    where = shown[0] if loopback else "<this machine's address>"
    if ":" in where:
        where = f"[{where}]"
    say(f"ag2net web: open http://{where}:{shown[1]}/ in a browser")
    say(f"each tab runs its own workbench as {name!r} (/?as=NAME for another name) on the hub at {hub_url}")
    if token is not None:
        say("the page asks for the token (--token / AG2NET_TOKEN) before it starts a workbench")
    say("ctrl+c stops the workbenches and the hub")


async def stopped_or_lost(stop: asyncio.Event, leadership: Any) -> bool:
    """Wait for ``stop`` or the loss of ``leadership``; True when the leadership was lost."""
    waits = [asyncio.ensure_future(stop.wait())]
    if leadership is not None:
        waits.append(asyncio.ensure_future(leadership.lost.wait()))
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiting in waits:
            waiting.cancel()
    return leadership is not None and leadership.lost.is_set()


def lost_exit(leadership: Any) -> int:
    """Say that the embedded hub lost its database's leadership; the exit code that says so."""
    from ag2net.server.leadership import LOST_EXIT_CODE

    sys.stderr.write(
        f"Error: the embedded hub lost the leadership of {leadership.where} ({leadership.reason}) and no "
        f"longer writes there, so the tabs' workbenches were stopped (exit code {LOST_EXIT_CODE}): serve "
        "the database with ag2net serve and give ag2net web --connect ws://HOST:PORT\n"
    )
    sys.stderr.flush()
    return LOST_EXIT_CODE


async def cancelled(task: asyncio.Task[Any]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


__all__ = ["NOT_INSTALLED", "app", "check_host_text", "listen", "seat_name", "tab_command", "web"]


if __name__ == "__main__":
    app()

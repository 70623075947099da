"""From ``ag2net tui`` options to a running workbench: open or attach the hub, seat the human, run the app.

A hub embedded on a PostgreSQL URL takes part in the database's leadership, as ``ag2net serve`` does
(``ag2net.server.leadership``): the workbench takes the lock and is fenced, or, when another hub holds it,
refuses to start (attach to that hub with ``--connect`` instead), so a database never has two writers.
If it loses the lock while it runs it stops writing there and says so, and stays up read-only: its store
stays open for reading, and every write (a post, a channel, a registration) fails with one sentence naming
the fix (``read_only_sentence``) in the chat line or wherever the write was asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ag2net import HubClient, HumanClient
from ag2net.errors import NetworkError
from tui.collector import IdleCollector
from tui.settings import Settings, SettingsError, check_keymap

DEMO_PACE = 1.5  # seconds between scripted demo steps: slow enough to watch


class LaunchError(Exception):
    """The workbench cannot start for a reason the user can fix; the message is one sentence."""


def log_to_file(db_path: Path | str | None) -> Path:
    """Send library logging to a file next to the database (a URL's: the per-user folder): the terminal
    belongs to the workbench."""
    folder = db_path.parent if isinstance(db_path, Path) else Settings().database.parent
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "workbench.log"
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    return path


def is_new_database(path: Path | str | None) -> bool:
    if isinstance(path, str):  # a postgresql:// URL: no first-run demo offer on a database server
        return False
    return path is None or not path.exists() or path.stat().st_size == 0


def demo_starter(
    hub: Any, human_name: str, tasks: set[asyncio.Task[Any]], networks: list[Any], *, approvals: bool = False
) -> Callable[[], Awaitable[Any]]:
    """A callable the app runs to start the demo network in the background (once); ``approvals``: the
    reviewer's approve waits for a person (``start_demo(approvals=True)``)."""

    async def start() -> Any:
        from ag2net.demo import start_demo

        try:
            network = await start_demo(hub, human_name=human_name, pace=DEMO_PACE, approvals=approvals)
        except NetworkError:
            raise  # the app says it in a notification
        except Exception as exc:  # e.g. a human holds a demo agent's name: a notification, never a traceback
            logging.getLogger("tui.launch").warning("the demo could not start", exc_info=True)
            raise NetworkError(str(exc) or type(exc).__name__) from exc
        networks.append(network)
        task = asyncio.get_running_loop().create_task(network.run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return network

    return start


async def dial(url: str, *, token: str | None, operator_token: str | None) -> HubClient:
    """A ``HubClient`` connected to the hub at ``url``; a hub that cannot be reached is a ``LaunchError``."""
    from ag2net.transport.ws import ConnectionLostError  # the WebSocket client: only to dial a hub

    hub_client = HubClient.connect(url, token=token, operator_token=operator_token)
    try:
        await hub_client.open()  # connect() builds the client; open() dials the hub
    except ConnectionLostError as exc:
        await _quietly_close(hub_client)
        because = str(exc).removeprefix(f"cannot connect to {url}: ")
        if "Connect call failed" in because or "refused" in because.lower():
            because = "nothing is listening there"
        raise LaunchError(
            f"--connect {url}: cannot reach a hub ({because}); start one with 'ag2net serve' or check the "
            "address"
        ) from None
    except ValueError as exc:  # not a WebSocket URL the client can dial
        await _quietly_close(hub_client)
        raise LaunchError(
            f"--connect {url!r} is not an address to dial ({exc}); give a URL like ws://127.0.0.1:8765"
        ) from None
    except BaseException:
        await _quietly_close(hub_client)
        raise
    return hub_client


async def _quietly_close(hub_client: HubClient) -> None:
    with contextlib.suppress(Exception):
        await hub_client.close()


EMBEDDED = "embedded in"
EMBEDDED_HOLDER = f"{EMBEDDED} ag2net tui"
"""What the leader row says of a workbench's hub, after its host and pid: "vm pid 42 embedded in ag2net tui"."""


async def take_leadership(url: str, *, holder: str = EMBEDDED_HOLDER, **hub_kwargs: Any) -> tuple[Any, Any]:
    """The hub embedded on the PostgreSQL database at ``url`` and the ``Leadership`` it holds.

    It takes the database's leadership lock as ``ag2net serve`` does, and is fenced the same way; when
    another hub holds the lock it does not stand by: a ``LaunchError`` names the holder and the fix."""
    from ag2net.server.leadership import Leadership, LeadershipError, LeadershipHeld

    leadership = Leadership(
        url,
        "127.0.0.1",
        0,
        echo=lambda _line: None,
        standby=False,
        holder=holder,
        refusal=read_only_sentence,
    )
    hub_kwargs.setdefault("progress", _wal_progress(leadership.where))
    try:
        hub = await leadership.take(**hub_kwargs)
    except LeadershipHeld as exc:
        if EMBEDDED in exc.holder:  # another workbench: nothing to attach to
            fix = (
                "quit that workbench, or serve the database with ag2net serve and attach every workbench to "
                "it with --connect ws://HOST:PORT"
            )
        else:
            fix = "attach to that hub with --connect ws://HOST:PORT (where it serves) instead of embedding another"
        raise LaunchError(f"{exc} and a database has one writer: {fix}") from None
    except LeadershipError as exc:
        raise LaunchError(str(exc)) from None
    return hub, leadership


def _wal_progress(where: str) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        # The terminal is still ours before the workbench starts: say what the wait is for.
        if sys.stderr.isatty():
            end = "\n" if done >= total else ""
            sys.stderr.write(f"\rreading the WAL of {where}: {done:,} / {total:,} envelopes{end}")
            sys.stderr.flush()

    return progress


def read_only_sentence(leadership: Any) -> str:
    """What a write of a workbench whose embedded hub lost the database's leadership fails with (a post's
    chat line shows it): what happened, that nothing was saved, and the fix. The URL without its password."""
    return (
        f"this workbench lost the leadership of {leadership.where}: it is read-only now and did not save this; "
        "attach to the hub that serves the database with --connect ws://HOST:PORT"
    )


def lost_sentence(leadership: Any) -> str:
    """What a workbench says when its embedded hub lost the database's leadership."""
    return (
        f"This workbench lost the leadership of {leadership.where} ({leadership.reason}): it is read-only now, "
        "showing what is stored; to write, quit and attach to the hub that serves the database with "
        "--connect ws://HOST:PORT."
    )


async def watch_leadership(leadership: Any, app: Any, stop_background: Callable[[], Awaitable[None]]) -> None:
    """When the embedded hub loses the leadership: its store already refuses every write (nothing more of
    this hub can land; each write fails with ``read_only_sentence``) and stays open for reading, so the
    panes keep showing what is stored; end the lock session, stop the demo, and tell the person at the
    keyboard, in a notification and in the status bar. The hub is closed only on the way out, and then
    not the hub itself (its closing writes would be refused): its store and lock session."""
    await leadership.lost.wait()
    await leadership.step_down()
    await stop_background()
    sentence = lost_sentence(leadership)
    logging.getLogger("tui.launch").warning("%s", sentence)
    while not getattr(app, "ready", True):  # the status bar exists once the app is mounted
        await asyncio.sleep(0.1)
    app.status.connection = "in-process hub · lost the leadership: read-only"
    app.status.connected = False
    app.notify(
        sentence,
        title="Not the database's writer any more",
        severity="error",
        timeout=60,
    )


async def announce_copy(opened: Any, app: Any) -> None:
    """Once the workbench shows: the status bar names the file as a read-only copy, and a notification says
    what the file lacks."""
    while not getattr(app, "ready", True):
        await asyncio.sleep(0.05)
    app.notify(opened.opening_sentence(), title="Read-only copy", timeout=30)
    app.status.connection = opened.copy_label


async def launch(
    *,
    settings: Settings,
    db_path: Path | str | None,
    human_name: str,
    start_demo: bool,
    network: Any,
    connect: str | None,
    token: str | None,
    operator_token: str | None,
    open_hub: Callable[[Path | str | None], Awaitable[Any]],
    run_network: Callable[[Any, Any], Awaitable[Any]],
    lead: Callable[[str], Awaitable[tuple[Any, Any]]] = take_leadership,
    stop_with: Callable[[Callable[[], Any]], AbstractContextManager[Any]] | None = None,
    open_path: Path | None = None,
    demo_approvals: bool = False,
) -> None:
    """Run the workbench until the user quits; everything opened here is closed on the way out.

    ``open_path`` (``--open``): a bundle or traces on an in-memory hub (``tui.open_file``), a read-only copy
    labelled as such; nothing is written to the file or next to it.

    A ``NetworkError`` from the hub, or a ``LaunchError`` (the human's name belongs to an agent), propagates
    after the clean-up; ``tui.cli`` reports it as one sentence. This module never imports the command line.

    ``db_path`` a ``postgresql://`` URL: the hub is ``lead(url)``'s (``take_leadership``), not ``open_hub``'s.
    ``stop_with(app.exit)`` is entered while the app runs: the command line's ``stopping_with``, so SIGTERM
    (or SIGINT) ends the app as quitting does and the hub is closed below.
    """
    collector = IdleCollector()
    collector.hold()  # no collections until the first page is painted (the app settles it): see tui.collector
    try:
        from tui.app import WorkbenchApp

        try:  # before anything is opened: a [keys] entry naming no binding is the settings file's mistake
            if settings.keys:
                check_keymap(settings, WorkbenchApp.binding_ids())
        except SettingsError as exc:
            raise LaunchError(str(exc)) from None
        log_to_file(None if open_path is not None else db_path)
        background: set[asyncio.Task[Any]] = set()
        networks: list[Any] = []
        stop_background = background_stopper(background, networks)
        hub = None
        leadership = None
        opened = None
        if connect is not None:
            hub_client = await dial(connect, token=token, operator_token=operator_token)
            demo = None
            offer = False
        elif open_path is not None:
            from tui.open_file import open_file

            opened = await open_file(open_path)
            hub, demo, offer = opened.hub, None, False
            hub_client = HubClient.local(hub)
        else:
            offer = is_new_database(db_path)
            if isinstance(db_path, str):
                hub, leadership = await lead(db_path)
            else:
                hub = await open_hub(db_path)
            hub_client = HubClient.local(hub)
            demo = demo_starter(hub, human_name, background, networks, approvals=demo_approvals)
        try:
            human = await seat(hub_client, human_name)
            if network is not None and hub is not None:
                await run_network(network, hub)
            app = WorkbenchApp(hub_client, human, settings, demo=demo, collector=collector)
            app.autostart_demo = bool(start_demo and demo is not None)
            app.offer_demo = bool(offer and not start_demo and demo is not None)
            if opened is not None:
                app.sub_title = opened.title
                shown = asyncio.get_running_loop().create_task(announce_copy(opened, app))
                background.add(shown)
                shown.add_done_callback(background.discard)
            if leadership is not None:
                watcher = asyncio.get_running_loop().create_task(
                    watch_leadership(leadership, app, stop_background)
                )
                background.add(watcher)
                watcher.add_done_callback(background.discard)
            if (
                hub is not None
            ):  # an embedded hub answers at once; a remote one may be slow: the app shows that
                await app.read_first_page()
            with contextlib.nullcontext() if stop_with is None else stop_with(app.exit):
                await app.run_async()
        finally:
            await stop_background()
            await hub_client.close()
            if leadership is not None:
                # closes the hub (unless it lost the lock), then the store and the lock session
                await leadership.close(hub)
            elif hub is not None:
                await hub.close()

    finally:
        collector.release()  # the app released it when it ran; this is for a start that failed before


def background_stopper(
    background: set[asyncio.Task[Any]], networks: list[Any]
) -> Callable[[], Awaitable[None]]:
    """What stops the workbench's background work: its tasks (not the one calling), then the networks
    it started (the demo agents' turns stop before their hub goes away)."""

    async def stop_background() -> None:
        current = asyncio.current_task()
        for task in list(background):
            if task is not current:
                task.cancel()
        for task in list(background):
            if task is not current:
                with contextlib.suppress(BaseException):
                    await task
        for network in networks:
            with contextlib.suppress(Exception):
                await network.close()
        networks.clear()

    return stop_background


async def seat(hub_client: HubClient, human_name: str) -> HumanClient:
    """The human's client on the hub, registered or attached as ``human_name``; the names of the agents
    known already are cached (the tail and the channel list show names, not ids)."""
    try:
        human = await hub_client.register_or_attach_human(human_name)
    except ValueError as exc:  # the name belongs to an agent
        raise LaunchError(
            f"cannot seat you as {human_name!r}: {exc}; choose another name with --as"
        ) from None
    # Names of agents registered before we attached: warm the client's cache (the observe stream only
    # announces later arrivals).
    await hub_client.list_agents(limit=None)
    return human


__all__ = [
    "LaunchError",
    "demo_starter",
    "dial",
    "is_new_database",
    "launch",
    "lost_sentence",
    "read_only_sentence",
    "take_leadership",
    "watch_leadership",
]

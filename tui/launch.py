"""From ``ag2net tui`` options to a running workbench: open or attach the hub, seat the human, run the app."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ag2net import ConnectionLostError, HubClient
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
    hub: Any, human_name: str, tasks: set[asyncio.Task[Any]], networks: list[Any]
) -> Callable[[], Awaitable[Any]]:
    """A callable the app runs to start the demo network in the background (once)."""

    async def start() -> Any:
        from ag2net.demo import start_demo

        network = await start_demo(hub, human_name=human_name, pace=DEMO_PACE)
        networks.append(network)
        task = asyncio.get_running_loop().create_task(network.run())
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return network

    return start


async def dial(url: str, *, token: str | None, operator_token: str | None) -> HubClient:
    """A ``HubClient`` connected to the hub at ``url``; a hub that cannot be reached is a ``LaunchError``."""
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
) -> None:
    """Run the workbench until the user quits; everything opened here is closed on the way out.

    A ``NetworkError`` from the hub, or a ``LaunchError`` (the human's name belongs to an agent), propagates
    after the clean-up; ``tui.cli`` reports it as one sentence. This module never imports the command line.
    """
    from tui.app import WorkbenchApp

    try:  # before anything is opened: a [keys] entry naming no binding is the settings file's mistake
        check_keymap(settings, WorkbenchApp.binding_ids())
    except SettingsError as exc:
        raise LaunchError(str(exc)) from None
    log_to_file(db_path)
    background: set[asyncio.Task[Any]] = set()
    networks: list[Any] = []
    hub = None
    if connect is not None:
        hub_client = await dial(connect, token=token, operator_token=operator_token)
        demo = None
        offer = False
    else:
        offer = is_new_database(db_path)
        hub = await open_hub(db_path)
        hub_client = HubClient.local(hub)
        demo = demo_starter(hub, human_name, background, networks)
    try:
        try:
            human = await hub_client.register_or_attach_human(human_name)
        except ValueError as exc:  # the name belongs to an agent
            raise LaunchError(
                f"cannot seat you as {human_name!r}: {exc}; choose another name with --as"
            ) from None
        # Names of agents registered before we attached: warm the client's cache so the tail and
        # the channel list show names, not ids (the observe stream only announces later arrivals).
        await hub_client.list_agents(limit=None)
        if network is not None and hub is not None:
            await run_network(network, hub)
        app = WorkbenchApp(hub_client, human, settings, demo=demo)
        app.autostart_demo = bool(start_demo and demo is not None)
        app.offer_demo = bool(offer and not start_demo and demo is not None)
        await app.run_async()
    finally:
        for task in list(background):
            task.cancel()
        for task in list(background):
            with contextlib.suppress(BaseException):
                await task
        for network in networks:  # stops the demo agents' turns before their hub goes away
            with contextlib.suppress(Exception):
                await network.close()
        await hub_client.close()
        if hub is not None:
            await hub.close()


__all__ = ["LaunchError", "demo_starter", "dial", "is_new_database", "launch"]

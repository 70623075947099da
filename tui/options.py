"""The options ``ag2net tui`` and ``ag2net web`` share: the ones declared alike (``Memory``, ``NetworkSpec``,
``ConfigFile``) and the checks of them, each ending in one sentence (``UsageProblem``) before anything
starts: the settings file, the name the human is seated as, the hub cache's size, and ``--connect``
against the options of an embedded hub.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from ag2net.cli.support import UsageProblem, check_name, check_paths, default_human_name
from ag2net.errors import NetworkError
from ag2net.identity import check_agent_name
from tui.settings import Settings, SettingsError, load_settings

Memory = Annotated[bool, typer.Option("--memory", help="Use an in-memory hub; nothing is saved.")]
NetworkSpec = Annotated[
    str | None, typer.Option(help="Load your own agents: module:function, called with the hub.")
]
ConfigFile = Annotated[
    Path | None, typer.Option(help="Settings TOML file (default: the per-user settings.toml).")
]


def settings_from(config: Path | None) -> Settings:
    """The settings of ``config`` (default: the per-user settings.toml)."""
    try:
        return load_settings(config)
    except SettingsError as exc:
        raise UsageProblem(str(exc)) from None


def seat_name(as_name: str | None, settings: Settings) -> str:
    """The name the human is seated as: ``--as``, the settings file's ``human_name``, the OS user."""
    if as_name is not None:
        return check_name(as_name)
    if "human_name" in settings.file_keys:
        try:
            check_agent_name(settings.human_name)
        except (NetworkError, ValueError) as exc:
            raise UsageProblem(
                f"human_name {settings.human_name!r} in {settings.source} cannot be used ({exc}); change it, or "
                "pass --as NAME"
            ) from None
        return settings.human_name
    return check_name(default_human_name())


def check_cache(cache_mb: float) -> None:
    if not cache_mb > 0:
        raise UsageProblem(f"--cache-mb must be more than 0, got {cache_mb}")


def hub_path(
    settings: Settings,
    *,
    connect: str | None,
    db: str | None,
    memory: bool,
    demo: bool,
    network: str | None,
    several: bool,
) -> Path | str | None:
    """Where the embedded hub keeps its WAL (a file, a ``postgresql://`` URL, None in memory), or None with
    ``--connect`` (``several``: a comma-separated list of hubs is allowed), which no hub option goes with."""
    if connect is None:
        return check_paths(db, memory, default=Path(settings.database).expanduser())
    if several:
        if not all(re.match(r"^wss?://[^\s/,]+", part.strip()) for part in connect.split(",")):
            raise UsageProblem(
                f"--connect {connect!r} must be a URL like ws://127.0.0.1:8765, or several separated by "
                "commas (ws://a:8765,ws://b:8765)"
            )
    elif not re.match(r"^wss?://[^\s/]+", connect):
        raise UsageProblem(f"--connect {connect!r} must be a URL like ws://127.0.0.1:8765")
    if db is not None or memory or demo or network:
        raise UsageProblem(
            "--connect attaches to a running hub; --db, --memory, --demo and --network do not apply"
        )
    return None


__all__ = ["ConfigFile", "Memory", "NetworkSpec", "check_cache", "hub_path", "seat_name", "settings_from"]

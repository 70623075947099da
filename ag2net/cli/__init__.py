"""The ``ag2net`` command line: the command group in ``commands``, ``serve`` in ``serve``, ``replay`` and
``wal`` in modules of their own, and what they share (the one-sentence error, paths, opening a hub) in
``support``.

The workbench imports ``ag2net.cli.support`` (which runs this file), so this file stays light: the command
group and its names load on first use (PEP 562), e.g. ``from ag2net.cli import app``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ag2net.cli.commands import MOUNTED, Commands, app, main
    from ag2net.cli.support import (
        UsageProblem,
        check_name,
        check_paths,
        default_db_path,
        default_human_name,
        fail,
        load_network,
        open_hub,
        run_network,
    )

_HOMES = {
    "MOUNTED": "commands",
    "Commands": "commands",
    "app": "commands",
    "main": "commands",
    "UsageProblem": "support",
    "check_name": "support",
    "check_paths": "support",
    "default_db_path": "support",
    "default_human_name": "support",
    "fail": "support",
    "load_network": "support",
    "open_hub": "support",
    "run_network": "support",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'ag2net.cli' has no attribute {name!r}")
    return getattr(importlib.import_module(f"ag2net.cli.{home}"), name)


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

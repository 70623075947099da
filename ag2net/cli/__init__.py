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

#: module of this package → the names it gives this package (space-separated)
_MODULES: dict[str, str] = {
    "commands": "MOUNTED Commands app main",
    "support": (
        "UsageProblem check_name check_paths default_db_path default_human_name fail load_network open_hub "
        "run_network"
    ),
}
_HOMES = {name: module for module, names in _MODULES.items() for name in names.split()}


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

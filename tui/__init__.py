"""The ag2net workbench: a Textual UI over ag2net's public client API (``ag2net tui``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tui.app import WorkbenchApp, build_app, run_workbench
    from tui.settings import Settings, SettingsError, load_settings

__all__ = ["Settings", "SettingsError", "WorkbenchApp", "build_app", "load_settings", "run_workbench"]


def __getattr__(name: str) -> Any:
    # Lazy: ``import tui`` stays cheap for the CLI until the workbench is actually started.
    if name in ("WorkbenchApp", "build_app", "run_workbench"):
        from tui import app

        return getattr(app, name)
    if name in ("Settings", "SettingsError", "load_settings"):
        from tui import settings

        return getattr(settings, name)
    raise AttributeError(f"module 'tui' has no attribute {name!r}")

"""The ag2net workbench: a Textual UI over ag2net's public client API (``ag2net tui``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

#: Frames per second the workbench allows Textual (``TEXTUAL_FPS``, which Textual reads once, when it is
#: first imported; an explicit ``TEXTUAL_FPS`` wins). At Textual's default of 60 a key pressed just after
#: a frame waits up to 16.7 ms for the next one: measured with ``bench/tui.py --only keys`` (1,000
#: envelopes/s arriving), p95 key-to-frame 29-34 ms at 60 and 14-25 ms at 120. Frames are drawn only when
#: something changed, so an idle workbench draws no more than before.
FRAMES_PER_SECOND = 120
os.environ.setdefault("TEXTUAL_FPS", str(FRAMES_PER_SECOND))

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

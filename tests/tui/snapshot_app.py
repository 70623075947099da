"""The snapshot-app factory: the workbench on the deterministic demo network, with frozen time and ids.

The app itself lives in ``tui.screenshots`` (the README pictures use the same one). ``snap_compare`` runs
an app on its own event loop, so the hub and the demo are built inside the app's ``Load`` handler, on that
loop. Live observing and history loading are off: the screen shows exactly the demo's finished WAL.
"""

from __future__ import annotations

from tui.screenshots import DemoWorkbench, still

SNAPSHOT_SIZE = (160, 44)


__all__ = ["SNAPSHOT_SIZE", "DemoWorkbench", "still"]

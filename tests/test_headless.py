"""The library is headless: importing ag2net and every submodule pulls in neither textual nor tui."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import json, pkgutil, sys, traceback
    import ag2net
    for extra in sys.argv[1:]:
        __import__(extra)

    imported, failed = ["ag2net"], {}

    def onerror(name):
        failed[name] = traceback.format_exc(limit=1)

    for info in pkgutil.walk_packages(ag2net.__path__, "ag2net.", onerror=onerror):
        try:
            __import__(info.name)
            imported.append(info.name)
        except Exception:
            failed[info.name] = traceback.format_exc(limit=1)

    ui = sorted(
        m for m in sys.modules
        if m in ("textual", "tui") or m.startswith(("textual.", "tui."))
    )
    print(json.dumps({"imported": imported, "failed": failed, "ui": ui}))
    """
)


def _probe(*extra_imports: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *extra_imports],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_every_ag2net_module_loads_no_ui() -> None:
    result = _probe()
    assert result["failed"] == {}, "modules that failed to import:\n" + "\n".join(
        f"{name}: {tb}" for name, tb in result["failed"].items()
    )
    # the walk really covered the package, not just the top level
    assert {"ag2net.envelope", "ag2net.identity", "ag2net.skills", "ag2net.hub.expectations"} <= set(
        result["imported"]
    )
    assert result["ui"] == [], f"ag2net imported UI modules: {result['ui']}"


def test_importing_ag2net_alone_loads_no_ui() -> None:
    code = (
        "import sys, ag2net; print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_probe_would_notice_a_ui_import() -> None:
    result = _probe("textual.widget")
    assert "textual" in result["ui"] and "textual.widget" in result["ui"]

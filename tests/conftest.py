"""Shared fixtures: a hub on each store (real SQLite in a temp dir, and the memory store), and per-user
folders (HOME and the XDG ones) in temp dirs, so the suite never writes outside its temporary folders.

The real folders are read once, when this module is imported (before any fixture moves them): the ag2
1.2.1 virtualenv of the interop tests stays in the real ``~/.cache/ag2net-interop`` (handed on through
``AG2NET_INTEROP_DIR``), and at the end of the session the real folders' ``ag2net`` entries are compared
with what they were: anything the run created or changed there fails the session, naming the path.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ag2net.hub import Hub
from ag2net.store import MemoryStore, SqliteStore


@pytest.fixture(params=["sqlite", "memory"])
def store_factory(request, tmp_path):
    """Builds a fresh store of the parametrised kind; SQLite reopenable on the same file."""
    path = tmp_path / "hub.db"

    def make():
        return SqliteStore(path) if request.param == "sqlite" else MemoryStore()

    make.kind = request.param
    make.path = path
    return make


@pytest.fixture
async def hub(store_factory):
    h = await Hub.open(
        store_factory(), ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    yield h
    await h.close()


@pytest.fixture
async def hc(hub):
    """An in-process ``HubClient`` on whichever ``hub`` the test module uses."""
    from ag2net import HubClient

    client = HubClient.local(hub)
    yield client
    await client.close()


USER_DIR_VARS = ("XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
REAL_HOME = Path(os.environ.get("HOME") or Path.home())
"""HOME as the suite found it (before ``private_home`` points it at a temp dir)."""
_DEFAULTS = {
    "XDG_DATA_HOME": ".local/share",
    "XDG_CONFIG_HOME": ".config",
    "XDG_STATE_HOME": ".local/state",
    "XDG_CACHE_HOME": ".cache",
}
REAL_USER_DIRS = {var: Path(os.environ.get(var) or REAL_HOME / default) for var, default in _DEFAULTS.items()}
"""The real per-user folders, as the workbench and the library would resolve them without the fixtures."""
os.environ.setdefault("AG2NET_INTEROP_DIR", str(REAL_USER_DIRS["XDG_CACHE_HOME"] / "ag2net-interop"))
INTEROP_DIR = Path(os.environ["AG2NET_INTEROP_DIR"])
"""The interop tests' ag2 virtualenv: kept in the real cache folder, on purpose (building it takes minutes)."""


def real_ag2net_entries() -> dict[str, tuple[int, int]]:
    """Every file or folder under the real per-user folders whose path names ag2net: path → (size, mtime)."""
    found: dict[str, tuple[int, int]] = {}
    roots = {REAL_HOME, *REAL_USER_DIRS.values()}
    for root in roots:
        try:
            tops = [entry for entry in root.iterdir() if "ag2net" in entry.name]
        except OSError:
            continue
        if root == REAL_HOME:  # only the dot-folders ag2net could write straight into HOME
            tops = [entry for entry in tops if entry.name.startswith(".")]
        for top in tops:
            if top == INTEROP_DIR or INTEROP_DIR in top.parents:
                continue
            paths = [top, *top.rglob("*")] if top.is_dir() else [top]
            for path in paths:
                try:
                    stat = path.lstat()
                except OSError:
                    continue
                found[str(path)] = (stat.st_size if path.is_file() else 0, stat.st_mtime_ns)
    return found


REAL_ENTRIES_AT_START = real_ag2net_entries()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when it created or changed anything of ag2net's in the real per-user folders."""
    after = real_ag2net_entries()
    changed = sorted(path for path, seen in after.items() if REAL_ENTRIES_AT_START.get(path) != seen)
    if changed:
        shown = ", ".join(changed[:5]) + (" …" if len(changed) > 5 else "")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (
            f"the test run wrote outside its temporary folders: {shown}; point the code that wrote it at the "
            "per-user folders (HOME, XDG_*) the tests set"
        )
        if reporter is not None:
            reporter.write_line(f"ERROR: {message}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session", autouse=True)
def private_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """HOME and the XDG folders point at one temp dir for the whole session (subprocesses inherit them)."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        for var, default in _DEFAULTS.items():
            patch.setenv(var, str(home / default))
        yield home


@pytest.fixture(autouse=True)
def private_user_dirs(tmp_path_factory, monkeypatch):
    """Each test gets its own per-user data, config, state and cache folders (no test sees another's draft)."""
    base = tmp_path_factory.mktemp("xdg")
    for var in USER_DIR_VARS:
        monkeypatch.setenv(var, str(base / var.lower()))

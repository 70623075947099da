"""Shared fixtures: a hub on each store (real SQLite in a temp dir, and the memory store), and per-user
folders (HOME and the XDG ones) in temp dirs, so the suite never writes outside its temporary folders.

The real folders are read once, when this module is imported (before any fixture moves them): the ag2
1.2.1 virtualenv of the interop tests stays in the real ``~/.cache/ag2net-interop`` (handed on through
``AG2NET_INTEROP_DIR``). What the test processes themselves write there fails the session, naming the path:
an audit hook (``sys.addaudithook``, the source in ``GUARD_SOURCE``) in this process, in every xdist worker and,
through a ``sitecustomize`` on ``PYTHONPATH``, in every Python subprocess the tests start, records each write
(open for writing, mkdir, rename, remove, a SQLite connection…) under the real folders' ``ag2net`` entries in
one log; the session fails when the log is not empty. Writes of other processes (a workbench the developer
has open) are not the run's and never count.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ag2net.hub import Hub
from ag2net.store import MemoryStore, SqliteStore

STORE_KINDS = ("sqlite", "memory")
"""The stores a test of ``store_factory`` (and so of ``hub``) runs on, unless its ``hub`` mark names one."""
HUB_MARK = (
    "hub(store=..., **settings): the hub the `hub` fixture (and `make_hub`) opens for these tests: `store` is "
    "'memory', 'sqlite' or a store class called with a path (default: each test once on SQLite and once on "
    "the memory store); `settings` are Hub.open's keywords over support.quiet()"
)


def _hub_mark(node: pytest.Item) -> dict[str, Any]:
    mark = node.get_closest_marker("hub")
    return dict(mark.kwargs) if mark is not None else {}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``store_factory`` runs its tests on each of ``STORE_KINDS``, unless a ``hub(store=...)`` mark (a module's
    ``pytestmark``) names the one store they use."""
    if "store_factory" in metafunc.fixturenames and "store" not in _hub_mark(metafunc.definition):
        metafunc.parametrize("store_factory", STORE_KINDS, indirect=True)


@pytest.fixture
def store_factory(request, tmp_path):
    """Builds a fresh store of the test's kind (the parametrised one, or its ``hub`` mark's); SQLite (and a
    store class of the test's own) reopenable on the same file."""
    path = tmp_path / "hub.db"
    kind = getattr(request, "param", None) or _hub_mark(request.node)["store"]

    def make():
        if kind == "sqlite":
            return SqliteStore(path)
        if kind == "memory":
            return MemoryStore()
        return kind(path)

    make.kind = kind
    make.path = path
    return make


@pytest.fixture
async def make_hub(request):
    """Opens hubs (``await make_hub(store, **settings)``) with ``support.quiet()`` settings, the test's ``hub``
    mark's over them and ``settings`` over both; closes every one it opened after the test, last first."""
    from support import quiet  # here, not at the top: test_user_dirs*.py run this file without its neighbours

    marked = {key: value for key, value in _hub_mark(request.node).items() if key != "store"}
    opened: list[Hub] = []

    async def make(store: Any = None, **settings: Any) -> Hub:
        hub = await Hub.open(store, **quiet(**{**marked, **settings}))
        opened.append(hub)
        return hub

    yield make
    for hub in reversed(opened):
        await hub.close()


@pytest.fixture
async def hub(store_factory, make_hub):
    """A quiet hub on the test's store (both kinds, or its ``hub`` mark's), closed after the test."""
    return await make_hub(store_factory())


@pytest.fixture
async def sqlite_hub(make_hub, tmp_path):
    """A quiet hub on a real SQLite file (``tmp_path / "hub.db"``): every write a real commit."""
    return await make_hub(SqliteStore(tmp_path / "hub.db"))


@pytest.fixture(scope="session")
def pg_server():
    """The session's throwaway PostgreSQL server (tests/pg_server.py), started by the first test that asks;
    ``await pg_server.fresh_url()`` is a fresh schema on it. Skips the test, with the reason, without one."""
    from pg_server import pg_server_fixture  # here: test_user_dirs*.py run this file without its neighbours

    yield from pg_server_fixture()


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


GUARD_SOURCE = r'''
"""The test run's write guard (written by tests/conftest.py): records writes under the real per-user folders."""
import json
import os
import sys

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC
_PATH_EVENTS = {
    "os.mkdir": (0,), "os.remove": (0,), "os.rmdir": (0,), "os.truncate": (0,), "os.chmod": (0,),
    "os.utime": (0,), "os.rename": (0, 1), "os.replace": (0, 1), "os.symlink": (1,), "os.link": (1,),
    "shutil.copyfile": (1,), "shutil.copytree": (1,), "shutil.move": (0, 1), "shutil.rmtree": (0,),
}


def install(log, roots, home, interop):
    roots = [os.path.abspath(root) for root in roots]
    home = os.path.abspath(home)
    interop = os.path.abspath(interop)
    busy = []

    def watched(path):
        if isinstance(path, int) or path is None:
            return None
        try:
            text = os.path.abspath(os.fsdecode(path))
        except (TypeError, ValueError):
            return None
        if text == interop or text.startswith(interop + os.sep):
            return None
        for root in roots:
            if text.startswith(root + os.sep):
                top = text[len(root) + 1 :].split(os.sep, 1)[0]
                if "ag2net" in top and (root != home or top.startswith(".")):
                    return text
        return None

    def record(event, path):
        if busy:
            return
        busy.append(1)
        try:
            with open(log, "a", encoding="utf-8") as out:
                out.write(json.dumps([os.getpid(), event, path]) + "\n")
        except OSError:
            pass  # the session is over (its log is gone): nobody is counting any more
        finally:
            busy.clear()

    def hook(event, args):
        try:
            check(event, args)
        except Exception:
            pass  # a guard must never break the operation it watches

    def check(event, args):
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing:
                found = watched(path)
                if found:
                    record(event, found)
        elif event == "sqlite3.connect":
            target = args[0] if args else None
            if isinstance(target, (str, bytes, os.PathLike)):
                text = os.fsdecode(target)
                if text.startswith("file:"):
                    if "mode=ro" in text:
                        return
                    text = text[5:].split("?", 1)[0].removeprefix("//")
                found = watched(text)
                if found:
                    record(event, found)
        elif event in _PATH_EVENTS:
            for index in _PATH_EVENTS[event]:
                if index < len(args):
                    found = watched(args[index])
                    if found:
                        record(event, found)

    sys.addaudithook(hook)


def install_from_env():
    log = os.environ.get("AG2NET_WRITE_GUARD_LOG")
    if log and hasattr(sys, "addaudithook"):
        install(
            log,
            json.loads(os.environ["AG2NET_WRITE_GUARD_ROOTS"]),
            os.environ["AG2NET_WRITE_GUARD_HOME"],
            os.environ["AG2NET_WRITE_GUARD_INTEROP"],
        )


try:
    install_from_env()
except Exception:  # a Python this guard cannot watch (another virtualenv's): run it unwatched, never broken
    pass
'''
"""The write guard: installed in-process and, as ``sitecustomize``, in every Python subprocess of the tests."""

GUARD_VARS = (
    "AG2NET_WRITE_GUARD_LOG",
    "AG2NET_WRITE_GUARD_ROOTS",
    "AG2NET_WRITE_GUARD_HOME",
    "AG2NET_WRITE_GUARD_INTEROP",
)
_guard_folder: Path | None = None


def pytest_configure(config: pytest.Config) -> None:
    """The session (or, in an xdist worker, its controller's) write guard: a log, the hook in this process,
    and the ``sitecustomize`` every Python subprocess loads through ``PYTHONPATH``."""
    global _guard_folder
    config.addinivalue_line("markers", HUB_MARK)
    if not hasattr(config, "workerinput"):  # the controller (or -n0): a guard of its own, even inside a test
        import json
        import tempfile

        _guard_folder = Path(tempfile.mkdtemp(prefix="ag2net-write-guard-"))
        (_guard_folder / "sitecustomize.py").write_text(GUARD_SOURCE, encoding="utf-8")
        (_guard_folder / "writes.log").write_text("", encoding="utf-8")
        os.environ["AG2NET_WRITE_GUARD_LOG"] = str(_guard_folder / "writes.log")
        os.environ["AG2NET_WRITE_GUARD_ROOTS"] = json.dumps(
            [str(REAL_HOME), *map(str, REAL_USER_DIRS.values())]
        )
        os.environ["AG2NET_WRITE_GUARD_HOME"] = str(REAL_HOME)
        os.environ["AG2NET_WRITE_GUARD_INTEROP"] = str(INTEROP_DIR)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(_guard_folder), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
    namespace: dict[str, object] = {"__name__": "ag2net_write_guard"}
    exec(compile(GUARD_SOURCE, "<ag2net write guard>", "exec"), namespace)  # installs the hook (env above)


def guarded_writes() -> list[str]:
    """The paths under the real per-user folders the test processes wrote, in order, once each."""
    import json

    log = os.environ.get("AG2NET_WRITE_GUARD_LOG")
    if not log or not Path(log).exists():
        return []
    paths = [
        json.loads(line)[2] for line in Path(log).read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    return list(dict.fromkeys(paths))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when its own processes created or changed anything of ag2net's in the real folders."""
    if hasattr(session.config, "workerinput"):
        return  # the controller reads the one log when every worker is done
    written = guarded_writes()
    if _guard_folder is not None:
        import shutil

        shutil.rmtree(_guard_folder, ignore_errors=True)
    if written:
        shown = ", ".join(written[:5]) + (" …" if len(written) > 5 else "")
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

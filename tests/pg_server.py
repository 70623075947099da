"""A throwaway PostgreSQL server for the tests (imported as ``pg_server``: pytest puts ``tests/`` on the path).

``PgServer`` runs Debian's own binaries (``/usr/lib/postgresql/<version>/bin``, which are not on PATH, or
``pg_config --bindir``, or PATH): ``initdb`` into a fresh temp dir, ``pg_ctl start`` on a free loopback
port (its Unix socket in the same temp dir), a database created in it, ``pg_ctl stop`` and the temp dir
removed at the end. Logins over TCP need the password ``initdb`` was given (scram-sha-256), so a test can
also see a wrong password refused.

``initdb`` and the server refuse to run as root: as root they run as the ``postgres`` user (Debian's
package creates it) through ``runuser``, with the temp dir owned by that user.

tests/conftest.py declares the suite's one fixture::

    @pytest.fixture(scope="session")
    def pg_server():
        yield from pg_server_fixture()

Every fixture that does so shares one server per pytest process (reference counted), and it is stopped
when the last of them is torn down (or at interpreter exit, whichever comes first). Tests get a fresh
schema each (``await pg_server.fresh_url()``) so no test sees another's tables.

The shared server runs with ``fsync=off``: the tests kill client processes, never the machine, so what
the server acknowledged stays acknowledged, and creating a schema's tables or committing does not wait
for the disk of a machine that other test runs share. ``PgServer(bindir)`` alone keeps PostgreSQL's
defaults (bench/store.py uses it that way).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

DATABASE = "ag2net_test"
USER = "ag2net"


def find_bindir() -> Path | None:
    """The folder holding ``initdb`` and ``pg_ctl``, newest PostgreSQL first; None when there is none."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: [int(x) if x.isdigit() else 0 for x in p.parent.parent.name.split(".")],
        reverse=True,
    )
    if found:
        return found[0].parent
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10)
            bindir = Path(out.stdout.strip())
            if (bindir / "initdb").exists():
                return bindir
        except (OSError, subprocess.SubprocessError):
            pass
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def skip_reason() -> str | None:
    """Why no PostgreSQL server can be started here, or None when one can."""
    try:
        import asyncpg  # noqa: F401
    except ImportError:
        return "asyncpg is not installed (pip install -e '.[postgres]')"
    bindir = find_bindir()
    if bindir is None or not (bindir / "pg_ctl").exists():
        return (
            "no PostgreSQL server binaries (initdb, pg_ctl) in /usr/lib/postgresql/*/bin or on PATH; "
            "apt-get install postgresql"
        )
    if os.geteuid() == 0 and (_service_user() is None or shutil.which("runuser") is None):
        return "running as root, and there is no 'postgres' user and runuser to run initdb as"
    return None


def _service_user() -> pwd.struct_passwd | None:
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgServer:
    """One PostgreSQL cluster in a temp dir, serving ``127.0.0.1:<port>`` until ``stop()``."""

    def __init__(self, bindir: Path, settings: dict[str, str] | None = None) -> None:
        self.bindir = bindir
        self.settings = dict(settings or {})
        self.password = secrets.token_hex(12)
        self.port = 0
        self.root = Path(tempfile.mkdtemp(prefix="ag2net-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as: list[str] = []
        self._running = False
        self._schemas = itertools.count(1)
        if os.geteuid() == 0:
            user = _service_user()
            assert user is not None, "skip_reason() said a service user exists"
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as = ["runuser", "-u", user.pw_name, "--"]

    # --- running the binaries ---

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*self._as, *args], capture_output=True, text=True, timeout=timeout, cwd=self.root, check=False
        )

    def _fail(self, what: str, result: subprocess.CompletedProcess[str]) -> RuntimeError:
        log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
        return RuntimeError(
            f"{what} failed (exit {result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}\n{log}"
        )

    def start(self) -> None:
        pwfile = self.root / "pwfile"
        pwfile.write_text(self.password + "\n")
        os.chmod(pwfile, 0o600)
        if self._as:
            os.chown(pwfile, os.stat(self.root).st_uid, os.stat(self.root).st_gid)
        result = self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        pwfile.unlink()
        if result.returncode != 0:
            raise self._fail("initdb", result)
        for _ in range(5):
            self.port = _free_port()
            options = (
                f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} "
                "-c max_connections=200"
            )
            options += "".join(f" -c {key}={value}" for key, value in self.settings.items())
            result = self._run(
                str(self.bindir / "pg_ctl"), "start", "-w", "-t", "60", "-D", str(self.data),
                "-l", str(self.log), "-o", options,
            )  # fmt: skip
            if result.returncode == 0:
                break
            if "could not bind" not in self.log.read_text(errors="replace"):
                raise self._fail("pg_ctl start", result)
        else:
            raise self._fail("pg_ctl start (no free port)", result)
        self._running = True
        createdb = [str(self.bindir / "createdb"), "-h", str(self.root), "-p", str(self.port), "-U", USER]
        # A natural-language collation ('Zed' sorts after 'é'), as a production database often has, so
        # the store's code-point ordering of ids is tested against one; the C locale where ICU is missing.
        result = self._run(*createdb, "--locale-provider=icu", "--icu-locale=en", "-T", "template0", DATABASE)
        if result.returncode != 0:
            result = self._run(*createdb, DATABASE)
        if result.returncode != 0:
            self.stop()
            raise self._fail("createdb", result)

    def stop(self) -> None:
        if self._running:
            self._running = False
            self._run(
                str(self.bindir / "pg_ctl"), "stop", "-D", str(self.data), "-m", "fast", "-w", timeout=60
            )
        shutil.rmtree(self.root, ignore_errors=True)

    # --- addresses ---

    def url(self, database: str = DATABASE, *, password: str | None = None, schema: str | None = None) -> str:
        """``postgresql://ag2net:<password>@127.0.0.1:<port>/<database>`` (optionally with a search_path)."""
        secret = self.password if password is None else password
        url = f"postgresql://{USER}:{quote(secret, safe='')}@127.0.0.1:{self.port}/{database}"
        return url if schema is None else f"{url}?search_path={schema}"

    async def fresh_url(self) -> str:
        """The URL of a new, empty schema of the test database (its tables are this test's alone)."""
        import asyncpg

        schema = f"t{os.getpid()}_{next(self._schemas)}"
        conn = await asyncpg.connect(self.url())
        try:
            await conn.execute(f"CREATE SCHEMA {schema}")
        finally:
            await conn.close()
        return self.url(schema=schema)


_lock = threading.Lock()
_shared: PgServer | None = None
_users = 0


def _acquire() -> PgServer:
    global _shared, _users
    with _lock:
        if _shared is None:
            bindir = find_bindir()
            assert bindir is not None
            # fsync=off: the tests kill clients, never the machine, and a commit the server acknowledged
            # survives a killed client (or server) process without it; bench/store.py measures with fsync on.
            server = PgServer(bindir, {"fsync": "off"})
            try:
                server.start()
            except BaseException:
                server.stop()
                raise
            atexit.register(server.stop)
            _shared = server
        _users += 1
        return _shared


def _release() -> None:
    global _shared, _users
    with _lock:
        _users -= 1
        if _users == 0 and _shared is not None:
            server, _shared = _shared, None
            server.stop()
            with contextlib.suppress(Exception):
                atexit.unregister(server.stop)


def pg_server_fixture() -> Iterator[PgServer]:
    """The body of a session-scoped fixture: the shared server, or the test skipped with the reason."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    server = _acquire()
    try:
        yield server
    finally:
        _release()


__all__ = ["DATABASE", "USER", "PgServer", "find_bindir", "pg_server_fixture", "skip_reason"]

"""asyncpg as the PostgreSQL store uses it: typed (asyncpg ships no type information), PostgreSQL URLs and
how they are shown without the password, a failed connection told in one sentence, and a connection of its
own for the store's one synchronous read."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from ag2net.store.base import StoreError

SCHEMES = ("postgresql", "postgres")

# --- asyncpg, typed as far as the store uses it ---


class Record(Protocol):
    def __getitem__(self, key: int | str, /) -> Any: ...


class Transaction(Protocol):
    async def __aenter__(self) -> Any: ...
    async def __aexit__(self, *exc: object) -> Any: ...


class Connection(Protocol):
    async def execute(self, query: str, *args: Any, timeout: float | None = None) -> str: ...
    async def executemany(self, command: str, args: Any, *, timeout: float | None = None) -> None: ...
    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Record]: ...
    async def fetchval(
        self, query: str, *args: Any, column: int = 0, timeout: float | None = None
    ) -> Any: ...
    def transaction(self) -> Transaction: ...
    def is_closed(self) -> bool: ...
    async def close(self, *, timeout: float | None = None) -> None: ...
    def terminate(self) -> None: ...


class Pool(Protocol):
    async def fetch(self, query: str, *args: Any, timeout: float | None = None) -> list[Record]: ...
    async def acquire(self, *, timeout: float | None = None) -> Connection: ...
    async def release(self, connection: Connection, *, timeout: float | None = None) -> None: ...
    async def close(self) -> None: ...
    def terminate(self) -> None: ...


def load_asyncpg() -> Any:
    try:
        import asyncpg
    except ImportError:
        raise StoreError(
            "a postgresql:// database needs the asyncpg package, which is not installed; "
            "pip install 'ag2net[postgres]'"
        ) from None
    return asyncpg


# --- URLs ---


def is_postgres_url(text: str) -> bool:
    """True for ``postgresql://…`` and ``postgres://…``."""
    scheme, sep, _ = text.partition("://")
    return bool(sep) and scheme.lower() in SCHEMES


def redact_url(url: str) -> str:
    """``url`` without its password (in the user part or a ``password=`` query parameter), for messages."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "postgresql://…"
    rest, _, _fragment = rest.partition("#")
    rest, qmark, query = rest.partition("?")
    slash = rest.find("/")
    netloc, path = (rest, "") if slash < 0 else (rest[:slash], rest[slash:])
    userinfo, at, hosts = netloc.rpartition("@")
    if at:
        user = userinfo.partition(":")[0]
        netloc = f"{user}@{hosts}" if user else hosts
    if qmark:
        kept = [(k, v) for k, v in parse_qsl(query, keep_blank_values=True) if k.lower() != "password"]
        query = urlencode(kept, safe="/,:")
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


def _where(url: str) -> tuple[str, str, str]:
    """(user, host, database) named by ``url``, for messages (empty when the URL leaves them out)."""
    try:
        parts = urlsplit(url)
        return unquote(parts.username or ""), parts.hostname or "", unquote(parts.path.lstrip("/"))
    except ValueError:
        return "", "", ""


def first_line(exc: BaseException, default: str = "") -> str:
    """The first line of ``exc``'s message, for a one-sentence error (``default``, else its type, when empty)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else default or type(exc).__name__


def open_error(exc: BaseException, url: str) -> StoreError:
    """One sentence for a database that cannot be used: what went wrong, with the URL, and the fix."""
    if isinstance(exc, StoreError):
        return exc
    where = redact_url(url)
    user, _, database = _where(url)
    asyncpg = load_asyncpg()
    errors = asyncpg.exceptions
    detail = first_line(exc)
    if isinstance(exc, errors.InvalidPasswordError) or (
        isinstance(exc, errors.InvalidAuthorizationSpecificationError) and "password" in detail
    ):
        return StoreError(
            f"the PostgreSQL server refused the login of {where} ({detail}); fix the user name and "
            "password in the URL (or PGPASSWORD, ~/.pgpass)"
        )
    if isinstance(exc, errors.InvalidAuthorizationSpecificationError):
        return StoreError(
            f"the PostgreSQL server refused the login of {where} ({detail}); use a user the server "
            "knows and admits (its pg_hba.conf) in the URL"
        )
    if isinstance(exc, errors.InvalidCatalogNameError):
        return StoreError(
            f"the PostgreSQL database {database or '(default)'!r} of {where} does not exist ({detail}); "
            f"create it (createdb {database or 'NAME'}) or name an existing one in the URL"
        )
    if isinstance(exc, errors.InsufficientPrivilegeError):
        return StoreError(
            f"the PostgreSQL user {user or '(default)'!r} may not create the store's tables in "
            f"{where} ({detail}); grant it CREATE on the schema or use a database it owns"
        )
    if isinstance(exc, errors.TooManyConnectionsError | errors.CannotConnectNowError):
        return StoreError(
            f"the PostgreSQL server at {where} takes no connection now ({detail}); wait and retry, "
            "or raise its max_connections"
        )
    if isinstance(exc, OSError | TimeoutError | asyncio.TimeoutError):
        return StoreError(
            f"cannot reach the PostgreSQL server at {where} ({detail or 'timed out'}); start the server "
            "or fix the host and port in the URL"
        )
    if isinstance(exc, ValueError | TypeError):
        return StoreError(
            f"the database URL {where} is not valid ({detail}); write it as "
            "postgresql://user[:password]@host[:port]/dbname"
        )
    return StoreError(
        f"cannot use the PostgreSQL database {where} ({detail}); check the URL, the server and "
        "the user's rights"
    )


class BlockReader:
    """A connection of its own, driven by a daemon thread's event loop, for synchronous reads."""

    def __init__(self, connect: Callable[[], Awaitable[Any]]) -> None:
        self._connect = connect
        self._conn: Any = None
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="ag2net-pg-block-reader", daemon=True
        )
        self._thread.start()

    async def _fetch(self, sql: str, args: tuple) -> list:
        if self._conn is None or self._conn.is_closed():
            self._conn = await self._connect()
        return await self._conn.fetch(sql, *args)

    def fetch(self, sql: str, *args: Any, timeout: float) -> list:
        return asyncio.run_coroutine_threadsafe(self._fetch(sql, args), self._loop).result(timeout)

    async def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await conn.close(timeout=5)
            except Exception:
                conn.terminate()

    def close(self) -> None:
        try:
            asyncio.run_coroutine_threadsafe(self._close_conn(), self._loop).result(10)
        except Exception:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._thread.is_alive():
            self._loop.close()

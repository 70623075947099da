"""Persistence for the hub: the Store protocol, SqliteStore (durable, the default), PostgresStore (a
PostgreSQL server, ``postgresql://…``) and MemoryStore (tests). The two SQL stores share their table
operations and queries (``sql.SqlStore``); each keeps its connections, writer and schema."""

from __future__ import annotations

import os
import re

from ag2net.store.base import Store, StoreError
from ag2net.store.memory import MemoryStore
from ag2net.store.postgres import PostgresStore, is_postgres_url, redact_url
from ag2net.store.sqlite import SqliteStore

# The environment variable the command line reads a database (a path or a postgresql:// URL) from.
DATABASE_URL_ENV = "AG2NET_DATABASE_URL"

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def is_database_url(text: str) -> bool:
    """True when ``text`` is written as a URL (``scheme://…``), whichever the scheme: not a file path."""
    return bool(_URL.match(text))


def open_store(path_or_store: str | os.PathLike[str] | Store | None = None, *, fsync: bool = False) -> Store:
    """A store for ``path_or_store``: None or ``":memory:"`` → MemoryStore, ``postgresql://…`` (or
    ``postgres://…``) → PostgresStore, a path → SqliteStore, a Store → itself.

    The store is returned unopened; ``await store.open()`` (idempotent) before use. ``fsync`` applies to
    SQLite; a PostgreSQL server's durability is its own (``synchronous_commit``).
    """
    if path_or_store is None or path_or_store == ":memory:":
        return MemoryStore()
    if isinstance(path_or_store, str) and is_database_url(path_or_store):
        if is_postgres_url(path_or_store):
            return PostgresStore(path_or_store)
        scheme = path_or_store.partition("://")[0]
        raise StoreError(
            f"the database URL {redact_url(path_or_store)} has the scheme {scheme!r}, which ag2net cannot "
            "use; give a file path, ':memory:' or postgresql://user[:password]@host[:port]/dbname"
        )
    if isinstance(path_or_store, str | os.PathLike):
        if not os.fspath(path_or_store):
            raise StoreError("the store path is empty; give a file path, ':memory:' or a Store")
        return SqliteStore(path_or_store, fsync=fsync)
    if isinstance(path_or_store, Store):
        return path_or_store
    raise StoreError(
        f"cannot use {type(path_or_store).__name__} as a store; give a file path, ':memory:' or a Store"
    )


__all__ = [
    "DATABASE_URL_ENV",
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "StoreError",
    "is_database_url",
    "open_store",
]

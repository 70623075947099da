"""Persistence for the hub: the Store protocol, SqliteStore (durable, the default) and MemoryStore (tests)."""

from __future__ import annotations

import os

from ag2net.store.base import Store, StoreError
from ag2net.store.memory import MemoryStore
from ag2net.store.sqlite import SqliteStore


def open_store(path_or_store: str | os.PathLike[str] | Store | None = None, *, fsync: bool = False) -> Store:
    """A store for ``path_or_store``: None or ``":memory:"`` → MemoryStore, a path → SqliteStore, a Store → itself.

    The store is returned unopened; ``await store.open()`` (idempotent) before use.
    """
    if path_or_store is None or path_or_store == ":memory:":
        return MemoryStore()
    if isinstance(path_or_store, str | os.PathLike):
        if not os.fspath(path_or_store):
            raise StoreError("the store path is empty; give a file path, ':memory:' or a Store")
        return SqliteStore(path_or_store, fsync=fsync)
    if isinstance(path_or_store, Store):
        return path_or_store
    raise StoreError(
        f"cannot use {type(path_or_store).__name__} as a store; give a file path, ':memory:' or a Store"
    )


__all__ = ["MemoryStore", "SqliteStore", "Store", "StoreError", "open_store"]

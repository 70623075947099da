"""The SQLite store's read connection, served by one daemon thread: reads and background checkpoints run
there, off the event loop, and a crash interrupts them safely."""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _settle(future: asyncio.Future, ok: bool, result: Any) -> None:
    if future.cancelled():
        return
    if ok:
        future.set_result(result)
    else:
        future.set_exception(result)


class ReaderThread:
    """The store's read connection, served by one daemon thread (so it never blocks interpreter exit).

    Calls are queued in order and answered on the caller's event loop. ``ValueError`` after close,
    ``sqlite3.Error`` as raised by the query.
    """

    def __init__(self, path: Path) -> None:
        self._path = path
        self._jobs: queue.SimpleQueue[tuple[asyncio.Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._serve, name="ag2net-store-reader", daemon=True)

    async def start(self) -> None:
        self._thread.start()
        try:
            await self._call(self._connect)
        except BaseException:
            self._stop()
            raise

    def _connect(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False, timeout=5.0)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    def _serve(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            future, call = job
            try:
                ok, result = True, call()
            except BaseException as exc:  # handed to the caller
                ok, result = False, exc
            try:
                future.get_loop().call_soon_threadsafe(_settle, future, ok, result)
            except RuntimeError:
                pass  # the caller's loop is closed: nobody is waiting

    async def _call(self, call: Callable[[], Any]) -> Any:
        if self._closed:
            raise ValueError("the store's reader is closed")
        future = asyncio.get_running_loop().create_future()
        self._jobs.put((future, call))
        return await future

    async def execute_fetchall(self, sql: str, params: tuple = ()) -> list:
        return await self._call(lambda: self._require().execute(sql, params).fetchall())

    def _require(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError("the store's reader is closed")
        return self._conn

    def _close_conn(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _stop(self) -> None:
        self._closed = True
        self._jobs.put(None)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self._call(self._close_conn)
        finally:
            self._stop()

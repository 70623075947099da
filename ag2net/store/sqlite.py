"""SqliteStore: the durable Store on one SQLite file in WAL journal mode, with group-committed writes.

Writes (every ``append``/``put_*``/``set_*``/``add_*``) go through one ordered writer on a plain
``sqlite3`` connection; reads and background checkpoints go through a second connection served by a
reader thread (``store/sqlite_reader.py``). Why the writes bypass that thread: an append must be committed
before it returns, so a one-at-a-time loop pays one commit per call, and a thread round trip (queue
to the thread, wake the event loop back) costs more than the commit itself. The writer therefore runs its batch where it is cheapest:

* ``writer="inline"`` (the default without ``fsync``): the first append of an event-loop iteration
  becomes the batch leader, yields once so every append issued in the same iteration joins, then runs
  one ``executemany`` + ``COMMIT`` on the loop thread and resolves the others' futures. With
  ``synchronous=NORMAL`` a commit is a ``write()`` into the OS page cache (microseconds, and enough to
  survive ``kill -9``); the slow part of WAL mode, checkpointing with its fsyncs, is switched off on
  this connection and run in the background on the reader thread instead.
* ``writer="thread"`` (the default with ``fsync=True``): a commit waits for an ``fsync``, which must not
  stall the event loop, so batches run on a dedicated writer thread. Appends issued while a batch is
  being committed queue up and form the next batch (group commit).

Store threads never keep the process alive: the reader thread is a daemon (it only reads and runs
checkpoints, which a crash interrupts safely), and the writer thread is an executor worker that exits
at interpreter shutdown. A program that crashes before ``close()`` exits; acknowledged writes are
committed already.

Either way one writer orders all writes, so a channel's metadata row and its WAL rows land in call
order, and each caller resumes only after the transaction holding its write has committed. Sequence
numbers (per channel), audit positions and knowledge ids are assigned by the writer from in-memory
counters, loaded lazily from ``MAX(...)``, so they follow call order and never leave gaps. One process
at a time may write a store file.

A one-envelope commit costs what the pages it rewrites cost, so a WAL row is written to one b-tree only
(``wal``, in pos order): the writer keeps the ids of recent rows in memory and moves them into ``wal_ids``,
and their ``(channel_id, seq)`` into ``wal_seq``, in bulk (every ``ids_batch`` appends); on open, rows past
the last bulk move are read back into memory, and reads by seq find them by a scan of the table's end
(``store/sqlite_schema.py``).
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import types
from collections.abc import Callable, Collection, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from time import perf_counter
from typing import Any

from ag2net.ids import utc_now
from ag2net.store.base import StoreError, duplicate_envelope
from ag2net.store.sql import (
    APPEND,
    APPEND_GROUP,
    APPENDS,
    AUDIT,
    BARRIER,
    DELETE_AGENT,
    KNOWLEDGE,
    UPSERT_SQL,
    Op,
    SqlStore,
    resolve,
    runs,
)
from ag2net.store.sqlite_reader import ReaderThread
from ag2net.store.sqlite_schema import (
    MOVE_RECENT_ROWS,
    READ_AFTER,
    READ_ALL_AFTER,
    READ_FROM,
    READ_RANGE,
    UPGRADES,
    WAL_COUNT,
    WAL_HEADS,
)


def schema_version() -> int:
    """The schema version this code writes (the number of upgrade steps)."""
    return len(UPGRADES)


# --- the writer's state ---

# Counter keys beside the per-channel seq counters (which are keyed by channel id strings).
_AUDIT_KEY = 0
_KNOWLEDGE_KEY = 1
_POS_KEY = 2

_INSERT_WAL = "INSERT INTO wal (pos, channel_id, seq, envelope_id, envelope) VALUES (?, ?, ?, ?, ?)"
#: Rows one multi-row INSERT writes at most: a group's rows go in one statement (one step of SQLite's, which
#: the sqlite3 module runs without the GIL) instead of one step per row, each taking the GIL back in
#: between; 64 rows are 320 parameters, far under SQLite's limit (32,766).
_ROWS_PER_INSERT = 64
_INSERT_WAL_ROWS = {n: _INSERT_WAL + ", (?, ?, ?, ?, ?)" * (n - 1) for n in range(1, _ROWS_PER_INSERT + 1)}


class _DuplicateEnvelope(sqlite3.IntegrityError):
    """An append whose envelope id is stored already; handled like a UNIQUE violation."""

    def __init__(self, envelope_id: str) -> None:
        super().__init__(f"envelope_id {envelope_id!r} is stored already")
        self.envelope_id = envelope_id


_WRITERS = ("auto", "inline", "thread")


@types.coroutine
def _one_iteration() -> Generator[None, None, None]:
    """``asyncio.sleep(0)`` without its wrapper: a bare yield, which the task reads as "run me again in the
    next iteration of the loop" (one call less per batch leader)."""
    yield


class SqliteStore(SqlStore):
    """The Store on a SQLite file: ``SqliteStore(path, fsync=False)``.

    ``fsync=False`` (``synchronous=NORMAL``): an acknowledged write survives the process being killed.
    ``fsync=True`` (``synchronous=FULL``): it also survives power loss, at the cost of an fsync per batch.
    """

    _NO_LIMIT = -1
    _WAL_HEADS = WAL_HEADS
    _WAL_COUNT = WAL_COUNT
    _READ_RANGE = _READ_SEQ_RANGE = READ_RANGE
    _READ_FROM = READ_FROM
    _READ_AFTER = READ_AFTER
    _READ_ALL_AFTER = READ_ALL_AFTER

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        fsync: bool = False,
        writer: str = "auto",
        clock: Callable[[], str] | None = None,
        batch_limit: int = 2048,
        iter_batch: int = 4096,
        ids_batch: int = 1024,
        checkpoint_bytes: int = 16 << 20,
    ) -> None:
        if writer not in _WRITERS:
            raise StoreError(f"writer must be one of {', '.join(_WRITERS)}, got {writer!r}")
        self.path = Path(path)
        self.fsync = fsync
        self.writer = ("thread" if fsync else "inline") if writer == "auto" else writer
        self._clock = clock or utc_now
        self._batch_limit = max(1, batch_limit)
        self._iter_batch = max(1, iter_batch)
        self._ids_batch = max(1, ids_batch)
        self._checkpoint_bytes = checkpoint_bytes
        self._open_lock = asyncio.Lock()
        self._conn: sqlite3.Connection | None = None
        self._reader: ReaderThread | None = None
        self._block_reader: sqlite3.Connection | None = None  # read_wal_block's, opened on first use
        self._executor: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The writer's time inside transactions (seconds, fsync included) and their number, since
        #: construction: what ``bench/hub.py`` compares with the event loop's time (a pipelining ceiling).
        self.commit_seconds = 0.0
        self.commits = 0
        self._reset_writer_state()

    def _reset_writer_state(self) -> None:
        self._accepting = False
        self._pending: list[Op] = []
        self._flush_scheduled = False  # inline: a leader is waiting to flush
        self._kick_scheduled = False  # thread: a batch start is queued on the loop
        self._busy = False  # thread: a batch is on the writer thread
        self._last: dict[Any, int] = {}  # committed counters: channel id -> last seq, audit, knowledge, pos
        # Committed WAL rows not yet in wal_ids: envelope id -> (channel_id, seq, pos).
        self._tail: dict[str, tuple[str, int, int]] = {}
        self._ids_max = ""  # the greatest envelope id stored: a larger one needs no lookup
        self._idle: asyncio.Future | None = None  # thread: set when the batch in flight is done
        self._paused = False  # a checkpoint is finishing: batches wait (they keep growing meanwhile)
        self._wal_estimate = 0  # bytes written to SQLite's WAL file since the last checkpoint, roughly
        self._checkpoint_task: asyncio.Task | None = None

    def __repr__(self) -> str:
        state = "open" if self._conn is not None else "closed"
        return f"SqliteStore({str(self.path)!r}, fsync={self.fsync}, writer={self.writer!r}, {state})"

    # --- open / close ---

    async def open(self) -> None:
        async with self._open_lock:
            if self._conn is not None:
                return
            self._reset_writer_state()
            conn = await asyncio.to_thread(self._connect_writer)
            reader = ReaderThread(self.path)
            try:
                await reader.start()
            except sqlite3.Error as exc:
                conn.close()
                raise self._open_error(exc) from exc
            self._loop = asyncio.get_running_loop()
            self._conn = conn
            self._reader = reader
            if self.writer == "thread":
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="ag2net-store-writer")
                self._submit = self._submit_thread
            else:
                self._submit = self._submit_inline
            self._accepting = True

    def _connect_writer(self) -> sqlite3.Connection:
        if self.path.is_file() and self.path.stat().st_size == 0:
            # SQLite would take it for an empty database; it is more likely a store a failed copy or a full
            # disk truncated (or a file touch made) than one to fill: never adopt it silently.
            raise StoreError(
                f"the store database '{self.path}' is an empty file (0 bytes), not an ag2net store; delete it "
                "to start a new store there, or choose another path"
            )
        try:
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=5.0)
        except sqlite3.Error as exc:
            raise self._open_error(exc) from exc
        try:
            self._inspect(conn)  # before anything is written: another application's file stays as it was
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise StoreError(
                    f"the store database '{self.path}' cannot use SQLite's WAL journal (got {mode!r}); "
                    "put it on a local file system"
                )
            conn.execute(f"PRAGMA synchronous = {'FULL' if self.fsync else 'NORMAL'}")
            # Checkpoints (with their fsyncs) run in the background on the reader, never in a commit.
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute("PRAGMA journal_size_limit = 67108864")
            self._upgrade(conn)
            self._load_tail(conn)
            if self.fsync:
                self._preallocate_wal()
        except sqlite3.Error as exc:
            conn.close()
            raise self._open_error(exc) from exc
        except BaseException:
            conn.close()
            raise
        return conn

    def _preallocate_wal(self) -> None:
        """Zero-fill SQLite's ``-wal`` file past its end up to ``checkpoint_bytes`` (the size it cycles in:
        a checkpoint lets the writer start over at its beginning), as PostgreSQL zero-fills its WAL segments.
        A commit then overwrites blocks the file already has, so its ``fdatasync`` flushes no change of size:
        a 63-row commit measured 220 µs instead of 310-420 µs. Frames of zeros are never valid (page 0, no
        matching salt or checksum), so recovery stops at the last commit as before. Runs at open, before the
        reader or the writer thread exists; skipped (the store works as without it) when the disk is short."""
        wal = Path(f"{self.path}-wal")
        try:
            size = wal.stat().st_size
            if size >= self._checkpoint_bytes:
                return
            disk = os.statvfs(wal.parent)
            if disk.f_bavail * disk.f_frsize < 16 * self._checkpoint_bytes:
                return
            with open(wal, "r+b") as file:  # never truncates: only bytes past the end are written
                file.seek(size)
                zeros = bytes(1 << 20)
                while size < self._checkpoint_bytes:
                    size += file.write(zeros[: self._checkpoint_bytes - size])
                file.flush()
                os.fsync(file.fileno())
        except OSError:
            return

    def _inspect(self, conn: sqlite3.Connection) -> None:
        """Refuse, by reading only, a database this code must not change: another application's (tables
        but no ag2net schema) or one of a newer ag2net. ``_upgrade`` checks again inside its transaction."""
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
        if version > schema_version():
            raise self._newer_error(version)
        if (version == 0 and tables) or (version > 0 and not {"agents", "channels", "wal"} <= tables):
            raise self._foreign_error(tables)

    def _newer_error(self, version: int) -> StoreError:
        return StoreError(
            f"the store database '{self.path}' has schema version {version}, newer than the version "
            f"{schema_version()} this ag2net understands; upgrade ag2net or open another file"
        )

    def _foreign_error(self, tables: Collection[str]) -> StoreError:
        shown = ", ".join(sorted(tables)[:5]) or "none"
        return StoreError(
            f"'{self.path}' is a SQLite database of another application (tables: {shown}); choose another "
            "path for the ag2net store"
        )

    def _upgrade(self, conn: sqlite3.Connection) -> None:
        target = schema_version()
        while True:
            conn.execute("BEGIN IMMEDIATE")
            try:
                version = conn.execute("PRAGMA user_version").fetchone()[0]
                if version > target:
                    raise self._newer_error(version)
                if version == target:
                    conn.execute("COMMIT")
                    return
                if version == 0:
                    tables = [
                        row[0]
                        for row in conn.execute(
                            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                        )
                    ]
                    if tables:
                        raise self._foreign_error(tables)
                UPGRADES[version](conn)
                conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise

    def _load_tail(self, conn: sqlite3.Connection) -> None:
        row = conn.execute("SELECT value FROM store_state WHERE key = 'wal_ids_upto'").fetchone()
        self._tail = {
            envelope_id: (channel_id, seq, pos)
            for envelope_id, channel_id, seq, pos in conn.execute(
                "SELECT envelope_id, channel_id, seq, pos FROM wal WHERE pos > ? ORDER BY pos",
                (row[0] if row else 0,),
            )
        }
        top = conn.execute("SELECT MAX(envelope_id) FROM wal_ids").fetchone()[0] or ""
        self._ids_max = max(top, max(self._tail, default=""))

    def _open_error(self, exc: BaseException) -> StoreError:
        if self.path.is_dir():
            return StoreError(
                f"cannot open the store database '{self.path}': it is a directory; give a file path"
            )
        parent = self.path.parent
        if not parent.is_dir():
            return StoreError(
                f"cannot open the store database '{self.path}': the directory '{parent}' does not exist; "
                "create it or choose another path"
            )
        return StoreError(
            f"cannot open the store database '{self.path}' ({exc}); check that it is an ag2net SQLite "
            "store you may read and write, or choose another path"
        )

    async def close(self) -> None:
        async with self._open_lock:
            if self._conn is None:
                return
            self._accepting = False
            try:
                if self._checkpoint_task is not None:
                    await asyncio.gather(self._checkpoint_task, return_exceptions=True)
                await self._drain()
            finally:
                reader, self._reader = self._reader, None
                conn, self._conn = self._conn, None
                executor, self._executor = self._executor, None
                if reader is not None:
                    await reader.close()
                block_reader, self._block_reader = self._block_reader, None
                if block_reader is not None:
                    block_reader.close()
                if executor is not None:
                    executor.shutdown(wait=True)
                # The last connection to close checkpoints the WAL into the database file.
                await asyncio.to_thread(conn.close)

    async def _drain(self) -> None:
        if self.writer == "inline":
            self._flush_inline()
            return
        loop = self._loop
        assert loop is not None, "the writer runs only while the store is open"
        while self._pending or self._busy:
            fut = loop.create_future()
            self._pending.append((BARRIER, (), fut))
            if not self._busy and not self._kick_scheduled:
                self._kick_thread()
            await fut

    def _closed_error(self) -> StoreError:
        return StoreError(f"the store '{self.path}' is not open; await store.open() first")

    # --- the writer: submission ---

    async def _submit(self, kind: int, params: tuple) -> Any:
        raise self._closed_error()

    def _enqueue(self, kind: int, params: tuple) -> tuple[asyncio.AbstractEventLoop, asyncio.Future]:
        loop = self._loop
        if not self._accepting or loop is None:
            raise self._closed_error()
        fut = loop.create_future()
        self._pending.append((kind, params, fut))
        return loop, fut

    async def _submit_inline(self, kind: int, params: tuple) -> Any:
        loop, fut = self._enqueue(kind, params)
        if self._flush_scheduled:
            return await fut
        # Lead the batch: yield once so every write issued in this loop iteration joins it.
        self._flush_scheduled = True
        try:
            await _one_iteration()
        except asyncio.CancelledError:
            fut.cancel()
            if not self._paused:
                loop.call_soon(self._flush_inline)
            raise
        if self._paused:
            return await fut  # the end of the checkpoint flushes
        self._flush_inline()
        return fut.result()

    def _flush_inline(self) -> None:
        if self._paused:
            return
        self._flush_scheduled = False
        pending = self._pending
        if not pending:
            return
        self._pending = []
        limit = self._batch_limit
        for start in range(0, len(pending), limit):
            batch = pending if len(pending) <= limit else pending[start : start + limit]
            resolve(batch, self._write_batch(batch))
        self._maybe_checkpoint()

    async def _submit_thread(self, kind: int, params: tuple) -> Any:
        loop, fut = self._enqueue(kind, params)
        if not self._busy and not self._kick_scheduled:
            self._kick_scheduled = True
            loop.call_soon(self._kick_thread)
        return await fut

    def _kick_thread(self) -> None:
        self._kick_scheduled = False
        if self._busy or self._paused or not self._pending:
            return
        limit = self._batch_limit
        batch, self._pending = self._pending[:limit], self._pending[limit:]
        executor, loop = self._executor, self._loop
        assert executor is not None and loop is not None, (
            "the writer thread runs only while the store is open"
        )
        self._busy = True
        done = executor.submit(self._write_batch, batch)
        done.add_done_callback(lambda f: loop.call_soon_threadsafe(self._finish_thread, batch, f))

    def _finish_thread(self, batch: list[Op], done: Any) -> None:
        self._busy = False
        try:
            results = done.result()
        except BaseException as exc:
            results = [self._write_error(exc) for _ in batch]
        resolve(batch, results)
        self._maybe_checkpoint()
        if self._paused:
            if self._idle is not None and not self._idle.done():
                self._idle.set_result(None)
        elif self._pending:
            self._kick_thread()

    # --- the writer: execution (loop thread or writer thread, never both) ---

    def _write_batch(self, ops: list[Op]) -> list:
        """``_write_transaction``, timed (``commit_seconds``, ``commits``); only the writer updates them."""
        start = perf_counter()
        try:
            return self._write_transaction(ops)
        finally:
            self.commit_seconds += perf_counter() - start
            self.commits += 1

    def _write_transaction(self, ops: list[Op]) -> list:
        """Apply ``ops`` in one transaction; if it fails for any reason, retry them one by one.

        One caller's bad write (a constraint, text SQLite cannot bind, a fault raised by the database)
        must never fail the other callers' writes that happened to share its group commit.
        """
        if len(ops) == 1 and ops[0][0] == APPEND and len(self._tail) + 1 < self._ids_batch:
            return self._write_lone_append(ops)
        try:
            conn = self._begin()
        except Exception as exc:
            return [self._write_error(exc) for _ in ops]
        try:
            counters: dict[Any, int] = {}
            new_ids: dict[str, tuple[str, int, int]] = {}
            results = self._apply(ops, counters, new_ids)
            indexed = self._index_ids_if_due(new_ids)
            conn.execute("COMMIT")
        except Exception:
            self._rollback()
            return self._write_one_by_one(ops)
        self._committed(counters, new_ids, indexed)
        return results

    def _write_lone_append(self, ops: list[Op]) -> list:
        """One append alone, with no bulk move of ids due: its single INSERT, which SQLite commits as a
        transaction of its own (the connection is in autocommit mode). ``BEGIN IMMEDIATE`` and ``COMMIT``
        around it would add a fifth to the cost of the commit; the row is as durable either way. A failed
        INSERT wrote nothing: the op is retried as in any failed batch, for its own error."""
        counters: dict[Any, int] = {}
        new_ids: dict[str, tuple[str, int, int]] = {}
        try:
            results = self._apply_appends(ops, counters, new_ids)
        except Exception:
            self._rollback()
            return self._write_one_by_one(ops)
        self._committed(counters, new_ids, False)
        return results

    def _begin(self) -> sqlite3.Connection:
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        conn.execute("BEGIN IMMEDIATE")
        return conn

    def _rollback(self) -> None:
        conn = self._conn
        if conn is not None and conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _write_one_by_one(self, ops: list[Op]) -> list:
        """After a failed batch: each op in its own savepoint, so only the faulty ones fail; the rest commit."""
        try:
            conn = self._begin()
        except Exception as exc:
            return [self._write_error(exc) for _ in ops]
        counters: dict[Any, int] = {}
        new_ids: dict[str, tuple[str, int, int]] = {}
        results: list = []
        try:
            for op in ops:
                trial_counters, trial_ids = dict(counters), dict(new_ids)
                conn.execute("SAVEPOINT op")
                try:
                    results.extend(self._apply([op], trial_counters, trial_ids))
                except Exception as exc:
                    if not conn.in_transaction:
                        raise  # SQLite rolled the whole transaction back (I/O error, disk full...)
                    conn.execute("ROLLBACK TO op")
                    results.append(self._op_error(op, exc))
                else:
                    counters, new_ids = trial_counters, trial_ids
                conn.execute("RELEASE op")
            indexed = self._index_ids_if_due(new_ids)
            conn.execute("COMMIT")
        except Exception as exc:
            self._rollback()
            return [self._write_error(exc) for _ in ops]
        self._committed(counters, new_ids, indexed)
        return results

    def _op_error(self, op: Op, exc: Exception) -> StoreError:
        """The error of one op that failed on its own (the others of its batch were committed)."""
        if isinstance(exc, sqlite3.IntegrityError):
            return self._integrity_error(op, exc)
        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, UnicodeEncodeError):
            return StoreError(
                "cannot write to the store: the record holds a lone surrogate, which is not valid Unicode "
                "text and has no UTF-8 form; pass well-formed strings"
            )
        return StoreError(
            f"cannot write to the store database '{self.path}' ({exc}); this write was not saved"
        )

    def _index_ids_if_due(self, new_ids: dict[str, tuple[str, int, int]]) -> bool:
        """Move the in-memory rows' envelope ids into wal_ids and their seqs into wal_seq once enough have
        gathered (inside the batch): the WAL rows after the mark, which are those rows, read back by SQLite
        itself (``MOVE_RECENT_ROWS``: no parameters to build, and no GIL held by the writer thread)."""
        if len(self._tail) + len(new_ids) < self._ids_batch:
            return False
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        for statement in MOVE_RECENT_ROWS:
            conn.execute(statement)
        return True

    def _committed(
        self, counters: dict[Any, int], new_ids: dict[str, tuple[str, int, int]], indexed: bool
    ) -> None:
        self._last.update(counters)
        if indexed:
            self._tail = {}  # rebound, not cleared: a reader holding the old dict still finds its ids
        elif new_ids:
            self._tail.update(new_ids)
        if new_ids:
            top = max(new_ids)
            if top > self._ids_max:
                self._ids_max = top
        # Each commit rewrites whole pages: the table's last leaf and one seq-index leaf per channel
        # touched; the payload itself is counted on insert.
        self._wal_estimate += (len(counters) + 1) * 4096

    def _apply(
        self, ops: list[Op], counters: dict[Any, int], new_ids: dict[str, tuple[str, int, int]]
    ) -> list:
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        results: list = []
        for kind, run in runs(ops, appends_together=False):
            if kind == APPEND:
                results.extend(self._apply_appends(run, counters, new_ids))
            elif kind == APPEND_GROUP:
                for _, (channel_id, items), _ in run:
                    group = [(APPEND, (channel_id, envelope_id, text), None) for envelope_id, text in items]
                    results.append(self._apply_appends(group, counters, new_ids))
            elif kind in UPSERT_SQL:
                conn.executemany(UPSERT_SQL[kind], [op[1] for op in run])
                results.extend([None] * len(run))
            elif kind == AUDIT:
                rows = [(self._next(_AUDIT_KEY, counters), op[1][0]) for op in run]
                conn.executemany("INSERT INTO audit (pos, record) VALUES (?, ?)", rows)
                results.extend(row[0] for row in rows)
            elif kind == KNOWLEDGE:
                rows = [(self._next(_KNOWLEDGE_KEY, counters), *op[1]) for op in run]
                conn.executemany(
                    "INSERT INTO knowledge (id, agent_id, text, source, at) VALUES (?, ?, ?, ?, ?)", rows
                )
                results.extend(row[0] for row in rows)
            elif kind == DELETE_AGENT:
                params = [op[1] for op in run]
                conn.executemany("DELETE FROM agents WHERE agent_id = ?", params)
                conn.executemany("DELETE FROM cursors WHERE agent_id = ?", params)
                results.extend([None] * len(run))
            else:  # BARRIER
                results.extend([None] * len(run))
        return results

    def _apply_appends(
        self,
        run: Sequence[tuple[int, tuple, Any]],
        counters: dict[Any, int],
        new_ids: dict[str, tuple[str, int, int]],
    ) -> list[int]:
        rows = []
        size = 0
        last = self._last
        tail = self._tail
        ids_max = self._ids_max
        pos = counters.get(_POS_KEY)
        if pos is None:
            pos = last.get(_POS_KEY)
            if pos is None:
                pos = last[_POS_KEY] = self._load_last(_POS_KEY)
        for _, (channel_id, envelope_id, envelope_json), _ in run:
            # Hub ids grow monotonically, so the lookup in wal_ids almost never runs.
            if (
                envelope_id in new_ids
                or envelope_id in tail
                or (envelope_id <= ids_max and self._id_stored(envelope_id))
            ):
                raise _DuplicateEnvelope(envelope_id)
            seq = counters.get(channel_id)
            if seq is None:
                seq = last.get(channel_id)
                if seq is None:
                    seq = last[channel_id] = self._load_last(channel_id)
            seq += 1
            pos += 1
            counters[channel_id] = seq
            rows.append((pos, channel_id, seq, envelope_id, envelope_json))
            new_ids[envelope_id] = (channel_id, seq, pos)
            size += len(envelope_json)
        counters[_POS_KEY] = pos
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        if len(rows) == 1:
            conn.execute(_INSERT_WAL, rows[0])
        else:
            for start in range(0, len(rows), _ROWS_PER_INSERT):
                chunk = rows[start : start + _ROWS_PER_INSERT]
                conn.execute(_INSERT_WAL_ROWS[len(chunk)], [value for row in chunk for value in row])
        self._wal_estimate += size
        return [row[2] for row in rows]

    def _id_stored(self, envelope_id: str) -> bool:
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        return (
            conn.execute("SELECT 1 FROM wal_ids WHERE envelope_id = ?", (envelope_id,)).fetchone() is not None
        )

    def _next(self, key: Any, counters: dict[Any, int]) -> int:
        value = counters.get(key)
        if value is None:
            value = self._last.get(key)
            if value is None:
                value = self._last[key] = self._load_last(key)
        value += 1
        counters[key] = value
        return value

    def _load_last(self, key: Any) -> int:
        conn = self._conn
        assert conn is not None, "the writer runs only while the store is open"
        if key == _AUDIT_KEY:
            row = conn.execute("SELECT COALESCE(MAX(pos), 0) FROM audit").fetchone()
        elif key == _KNOWLEDGE_KEY:
            row = conn.execute("SELECT COALESCE(MAX(id), 0) FROM knowledge").fetchone()
        elif key == _POS_KEY:
            row = conn.execute("SELECT COALESCE(MAX(pos), 0) FROM wal").fetchone()
        else:
            row = conn.execute(WAL_COUNT, (key,)).fetchone()
        return row[0]

    def _integrity_error(self, op: Op, exc: sqlite3.IntegrityError) -> StoreError:
        kind, params, _ = op
        if isinstance(exc, _DuplicateEnvelope):
            return duplicate_envelope(exc.envelope_id)
        if kind in APPENDS:
            # Our counters disagree with the file: someone else wrote to it. Reload before the next try.
            self._last.pop(params[0], None)
            self._last.pop(_POS_KEY, None)
            return StoreError(
                f"channel {params[0]!r} already has WAL rows this store did not write; another process is "
                f"writing to '{self.path}' — only one hub may open a store file"
            )
        return self._write_error(exc)

    def _write_error(self, exc: BaseException) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        return StoreError(
            f"cannot write to the store database '{self.path}' ({exc}); nothing of this batch was saved"
        )

    def _maybe_checkpoint(self) -> None:
        if self._wal_estimate < self._checkpoint_bytes or self._reader is None or not self._accepting:
            return
        if self._checkpoint_task is not None and not self._checkpoint_task.done():
            return
        loop = self._loop
        assert loop is not None, "a checkpoint runs only while the store is open"
        self._wal_estimate = 0
        self._checkpoint_task = loop.create_task(self._checkpoint())

    async def _checkpoint(self) -> None:
        """Copy the WAL into the database off the loop, so SQLite can restart the WAL file from its start.

        The first pass runs beside the writer. SQLite restarts the WAL only after a pass that caught
        up with the last commit, which never happens while commits keep coming, so the second pass
        holds new batches back for its (short) duration; they queue and go out as one batch after.
        """
        reader, loop = self._reader, self._loop
        if reader is None or loop is None:
            return
        try:
            await reader.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
            self._paused = True
            if self._busy:
                self._idle = loop.create_future()
                await self._idle
            await reader.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
        except (sqlite3.Error, ValueError):
            pass  # a busy or closing database: the next checkpoint will try again
        finally:
            self._idle = None
            if self._paused:
                self._paused = False
                if self.writer == "inline":
                    self._flush_inline()
                elif self._pending and not self._kick_scheduled:
                    self._kick_thread()

    # --- reads (the reader thread) ---

    async def _fetch(self, sql: str, *args: Any) -> list:
        reader = self._reader
        if reader is None:
            raise self._closed_error()
        try:
            return await reader.execute_fetchall(sql, args)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the store database '{self.path}' ({exc})") from exc

    # --- reads the engine answers its own way ---

    async def wal_count(self, channel_id: str) -> int:
        if self._reader is None:
            raise self._closed_error()
        known = self._last.get(channel_id)
        if known is not None:
            return known
        return await super().wal_count(channel_id)

    def read_wal_block(self, channel_id: str, first_seq: int, last_seq: int) -> list[str]:
        """``read_wal_seq``'s JSON texts, read synchronously on the caller's thread.

        For the hub's bounded WAL cache: a view that reaches envelopes the cache gave back reads one
        block of them here, an indexed range scan of at most a few hundred rows.
        """
        if last_seq < first_seq:
            return []
        conn = self._block_reader
        if conn is None:
            if self._conn is None:
                raise self._closed_error()
            try:
                conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=5.0)
                conn.execute("PRAGMA query_only = 1")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot read the store database '{self.path}' ({exc})") from exc
            self._block_reader = conn
        try:
            rows = conn.execute(READ_RANGE, (channel_id, first_seq, last_seq)).fetchall()
        except sqlite3.Error as exc:
            raise StoreError(f"cannot read the store database '{self.path}' ({exc})") from exc
        return [row[1] for row in rows]

    async def find_seq(self, channel_id: str, envelope_id: str) -> int | None:
        if self._reader is None:
            raise self._closed_error()
        # The recent ids first: the writer puts ids into wal_ids (committed) before dropping them here.
        recent = self._tail.get(envelope_id)
        if recent is not None:
            return recent[1] if recent[0] == channel_id else None
        rows = await self._fetch(
            "SELECT seq FROM wal_ids WHERE envelope_id = ? AND channel_id = ?", envelope_id, channel_id
        )
        return rows[0][0] if rows else None


__all__ = ["UPGRADES", "SqliteStore", "schema_version"]

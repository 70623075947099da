"""PostgresStore: the durable Store on a PostgreSQL database (asyncpg), with group-committed writes.

``PostgresStore("postgresql://user[:password]@host[:port]/dbname")`` keeps the same tables as SqliteStore
(agents, channels, wal, audit, tasks, cursors, knowledge, turns, meta) in the database's current schema
(the first of its ``search_path``; ``?search_path=name`` in the URL picks another), with the same
semantics:

* Writes go through one ordered writer task: every write issued while a batch is being committed waits
  and goes out with the next batch, in one transaction (group commit), and each caller resumes only
  after the transaction holding its write has committed (with the server's ``synchronous_commit`` on,
  the default, that is after PostgreSQL flushed it to its WAL on disk).
* Per-channel seqs, audit positions and knowledge ids are computed inside the inserting statement from
  the committed rows (``MAX(...) + n``, an index lookup), never from a sequence: a failed write leaves no
  gap, and a writer that is not alone hits the primary key and fails instead of writing over a number.
* Envelope ids are unique (``UNIQUE (envelope_id)``): a duplicate fails only its own caller; if one write
  of a batch fails, the batch is retried op by op in savepoints so the others still commit.
* ``append_group`` is one op: all of its envelopes or none.
* Schema versions: ``ag2net_schema.version`` counts the steps of ``UPGRADES`` that ran; opening runs the
  missing ones in order, each in its own transaction (PostgreSQL's DDL is transactional, so a failed step
  leaves the database at its old version), serialised between processes by an advisory lock. A database
  of a newer version is refused with one sentence.
* Reads come from a connection pool (``min_connections``..``max_connections``); ``read_wal_block``, the
  one synchronous read (the hub's WAL cache reads older envelopes back through it), runs on a dedicated
  connection served by its own daemon thread and event loop, and blocks the caller for one indexed
  range scan, as SqliteStore's does.

Text columns that hold ids are ``COLLATE "C"`` so ``iter_wal`` and ``wal_counts`` order channels by code
point whatever the database's locale, as SQLite does. PostgreSQL text cannot hold U+0000: a raw string
holding it (an id, a meta value, knowledge text) is refused at the call; JSON records escape it.

Fencing (active/standby hubs on one database, ``ag2net.server.leadership``): ``await store.fence(holder)``
makes this store the database's one writer. It creates the ``ag2net_leader`` row and the ``ag2net_fence``
function when they are missing, bumps the row's epoch (waiting for the write transactions of the previous
holder that hold the row, so none of them commits after it) and from then on every write transaction
of this store first checks, holding the row ``FOR SHARE`` inside that same transaction, that the epoch is
still its own. A store fenced out by a later ``fence`` of another process fails that write and every
later one with ``StoreFenced`` and calls ``on_fenced`` once; nothing of it commits. Stores that never
call ``fence`` write as before.

``store.refuse_writes(reason)`` fences a store from this side: every later write fails with
``StoreFenced(reason)`` before it reaches the database, while reads keep working (a hub that lost the
leadership stays open read-only; ``reason`` is the one sentence its users see).

Every error is a StoreError of one sentence that names the URL without its password.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ag2net.ids import utc_now
from ag2net.store.base import StoreError, check_text, duplicate_envelope
from ag2net.store.pg_driver import (
    BlockReader,
    Connection,
    Pool,
    Record,
    first_line,
    is_postgres_url,
    load_asyncpg,
    open_error,
    redact_url,
)
from ag2net.store.sql import (
    APPEND,
    APPENDS,
    AUDIT,
    DELETE_AGENT,
    KNOWLEDGE,
    READ_RANGE,
    UPSERT_SQL,
    Op,
    SqlStore,
    numbered,
    resolve,
    runs,
)

# --- schema: step i upgrades a database from version i to i + 1 ---

_ID = 'TEXT COLLATE "C"'


def _records_table(name: str, key: str, *columns: str) -> str:
    """``CREATE TABLE`` of records kept in insertion order: ``ord`` numbers them, ``key`` is each one's id."""
    lines = ("ord BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", f"{key} {_ID} NOT NULL UNIQUE", *columns)
    return f"CREATE TABLE {name} (\n        " + ",\n        ".join(lines) + ")"


_SCHEMA_V1 = (
    _records_table("agents", "agent_id", "name TEXT NOT NULL", "kind TEXT NOT NULL", "record TEXT NOT NULL"),
    _records_table("channels", "channel_id", "metadata TEXT NOT NULL"),
    # The primary key gives the O(range) seq reads and the per-channel MAX(seq); the unique envelope
    # id is one more index entry per row (SQLite's store moves ids to an index in bulk instead).
    f"""CREATE TABLE wal (
        channel_id {_ID} NOT NULL,
        seq BIGINT NOT NULL,
        envelope_id {_ID} NOT NULL,
        envelope TEXT NOT NULL,
        PRIMARY KEY (channel_id, seq),
        CONSTRAINT wal_envelope_id_unique UNIQUE (envelope_id))""",
    "CREATE TABLE audit (pos BIGINT PRIMARY KEY, record TEXT NOT NULL)",
    _records_table("tasks", "task_id", "record TEXT NOT NULL"),
    f"""CREATE TABLE cursors (
        agent_id {_ID} NOT NULL,
        channel_id {_ID} NOT NULL,
        envelope_id {_ID} NOT NULL,
        PRIMARY KEY (agent_id, channel_id))""",
    f"""CREATE TABLE knowledge (
        id BIGINT PRIMARY KEY,
        agent_id {_ID} NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        at TEXT NOT NULL)""",
    "CREATE INDEX knowledge_agent ON knowledge (agent_id, id)",
    _records_table(
        "turns",
        "turn_id",
        f"channel_id {_ID}",
        f"agent_id {_ID}",
        f"trigger_envelope_id {_ID}",
        "record TEXT NOT NULL",
    ),
    "CREATE INDEX turns_channel ON turns (channel_id, ord)",
    "CREATE INDEX turns_agent ON turns (agent_id, ord)",
    "CREATE INDEX turns_trigger ON turns (trigger_envelope_id, ord)",
    f"CREATE TABLE meta (key {_ID} PRIMARY KEY, value TEXT NOT NULL)",
)

_Step = Callable[[Any], Awaitable[None]]


def _run_statements(statements: tuple[str, ...]) -> _Step:
    async def step(conn: Any) -> None:
        for statement in statements:
            await conn.execute(statement)

    return step


# Append a step to evolve the schema; never edit a step that has shipped.
UPGRADES: tuple[_Step, ...] = (_run_statements(_SCHEMA_V1),)

# pg_advisory_xact_lock key serialising schema upgrades between processes ("ag2net-u").
_UPGRADE_LOCK = 0x6167326E65742D75
_VERSION_TABLE = "ag2net_schema"


def schema_version() -> int:
    """The schema version this code writes (the number of upgrade steps)."""
    return len(UPGRADES)


# --- the writer's statements ---

_UPSERT_SQL = {kind: numbered(sql) for kind, sql in UPSERT_SQL.items()}

# One statement per run of appends: each channel's head read once (the primary key's last entry), the
# rows numbered from it in call order.
_INSERT_WAL = """
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY AS u (channel_id, envelope_id, envelope, n)
), heads AS (
    SELECT c.channel_id, COALESCE((SELECT MAX(w.seq) FROM wal w WHERE w.channel_id = c.channel_id), 0) AS head
    FROM (SELECT DISTINCT channel_id FROM input) c
)
INSERT INTO wal (channel_id, seq, envelope_id, envelope)
SELECT i.channel_id, h.head + row_number() OVER (PARTITION BY i.channel_id ORDER BY i.n), i.envelope_id, i.envelope
FROM input i JOIN heads h ON h.channel_id = i.channel_id
ORDER BY i.n
RETURNING envelope_id, seq
"""
# The same statement checking the fence in the same transaction (autocommit: the statement is one).
_INSERT_WAL_FENCED = _INSERT_WAL.replace(
    "WITH input AS (", "WITH fence AS (SELECT ag2net_fence($4::bigint) AS ok), input AS (", 1
).replace("ORDER BY i.n\nRETURNING", "CROSS JOIN fence f WHERE f.ok\nORDER BY i.n\nRETURNING", 1)
_INSERT_AUDIT = """
INSERT INTO audit (pos, record)
SELECT (SELECT COALESCE(MAX(pos), 0) FROM audit) + u.n, u.record
FROM unnest($1::text[]) WITH ORDINALITY AS u (record, n)
RETURNING pos
"""
_INSERT_KNOWLEDGE = """
INSERT INTO knowledge (id, agent_id, text, source, at)
SELECT (SELECT COALESCE(MAX(id), 0) FROM knowledge) + u.n, u.agent_id, u.text, u.source, u.at
FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) WITH ORDINALITY AS u (agent_id, text, source, at, n)
RETURNING id
"""
# Each channel's count by a skip scan of the primary key: one index probe per channel, not a table scan.
_WAL_HEADS = """
WITH RECURSIVE heads (channel_id) AS (
    (SELECT channel_id FROM wal ORDER BY channel_id LIMIT 1)
    UNION ALL
    SELECT (SELECT w.channel_id FROM wal w WHERE w.channel_id > heads.channel_id ORDER BY w.channel_id LIMIT 1)
    FROM heads WHERE heads.channel_id IS NOT NULL
)
SELECT channel_id, (SELECT MAX(seq) FROM wal WHERE wal.channel_id = heads.channel_id)
FROM heads WHERE channel_id IS NOT NULL
"""
_READ_BLOCK = numbered(READ_RANGE)

# --- fencing: the leader row and the check every write transaction of a fenced store runs first ---

_FENCE_SQLSTATE = "AGF01"
_LEADER_TABLE = "ag2net_leader"
_FENCE_SETUP = (
    f"""CREATE TABLE IF NOT EXISTS {_LEADER_TABLE} (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        epoch BIGINT NOT NULL,
        holder TEXT NOT NULL,
        since TEXT NOT NULL)""",
    f"INSERT INTO {_LEADER_TABLE} (id, epoch, holder, since) VALUES (1, 0, '', '') ON CONFLICT (id) DO NOTHING",
    # FOR SHARE: the next holder's epoch UPDATE waits for every transaction that passed this check to end,
    # and one that checks after that UPDATE committed reads the new epoch (and raises).
    f"""CREATE OR REPLACE FUNCTION ag2net_fence(mine BIGINT) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
    DECLARE current BIGINT;
    BEGIN
        SELECT epoch INTO current FROM {_LEADER_TABLE} WHERE id = 1 FOR SHARE;
        IF current IS DISTINCT FROM mine THEN
            RAISE EXCEPTION 'fenced: the leader epoch is %, not this writer''s %', current, mine
                USING ERRCODE = '{_FENCE_SQLSTATE}';
        END IF;
        RETURN TRUE;
    END $$""",
)
_BUMP_EPOCH = (
    f"UPDATE {_LEADER_TABLE} SET epoch = epoch + 1, holder = $1, since = $2 WHERE id = 1 RETURNING epoch"
)


class StoreFenced(StoreError):
    """A write of a fenced store: another process took the database's leadership (``fence``) since this
    store's own ``fence``; nothing of the write was saved, and no later write of this store will be."""


class _Unsaved(Exception):
    """The writer's connection failed; ``committing`` when it failed during COMMIT (outcome unknown)."""

    def __init__(self, cause: BaseException, committing: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.committing = committing


def _no_nul(what: str, value: Any, *, empty_ok: bool = False) -> str:
    text = check_text(what, value, empty_ok=empty_ok)
    if "\x00" in text:
        raise StoreError(
            f"{what} holds the character U+0000, which PostgreSQL text cannot store; remove it or encode it"
        )
    return text


class PostgresStore(SqlStore):
    """The Store on a PostgreSQL database: ``PostgresStore("postgresql://user@host/dbname")``.

    ``durable`` is True: an acknowledged write is committed in the database.
    """

    _WAL_HEADS = _WAL_HEADS
    _CHECK_ALL_TEXT = True  # U+0000 is ASCII
    _arg = staticmethod(_no_nul)
    _column = staticmethod(_no_nul)

    def __init__(
        self,
        url: str,
        *,
        clock: Callable[[], str] | None = None,
        min_connections: int = 1,
        max_connections: int = 8,
        batch_limit: int = 2048,
        iter_batch: int = 4096,
        connect_timeout: float = 10.0,
        command_timeout: float | None = 60.0,
        read_only: bool = False,
    ) -> None:
        if not isinstance(url, str) or not is_postgres_url(url):
            raise StoreError(
                f"{url!r} is not a PostgreSQL URL; write it as postgresql://user[:password]@host[:port]/dbname"
            )
        if not 1 <= min_connections <= max_connections:
            raise StoreError(
                f"min_connections ({min_connections}) must be at least 1 and at most max_connections "
                f"({max_connections})"
            )
        self.url = url
        self.where = redact_url(url)
        self._clock = clock or utc_now
        self._min_connections = min_connections
        self._max_connections = max_connections
        self._batch_limit = max(1, batch_limit)
        self._iter_batch = max(1, iter_batch)
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self.read_only = read_only
        self._open_lock = asyncio.Lock()
        self._pool: Pool | None = None
        self._writer_conn: Connection | None = None
        self._block_reader: BlockReader | None = None
        self._block_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._accepting = False
        self._pending: list[Op] = []
        self._writer_task: asyncio.Task | None = None
        self._fence_epoch: int | None = None
        self._fenced: StoreFenced | None = None
        self._on_fenced: Callable[[StoreFenced], Any] | None = None
        self._transaction_timeout_ms = 5000

    def __repr__(self) -> str:
        state = "open" if self._pool is not None else "closed"
        return f"PostgresStore({self.where!r}, {state})"

    # --- open / close ---

    def _connect_kwargs(self, **server_settings: str) -> dict[str, Any]:
        kwargs: dict[str, Any] = {
            "dsn": self.url,
            "timeout": self._connect_timeout,
            "command_timeout": self._command_timeout,
        }
        if self.read_only:
            # The server refuses every write of these sessions, whatever this code does.
            server_settings = {**server_settings, "default_transaction_read_only": "on"}
        if server_settings:
            kwargs["server_settings"] = server_settings
        return kwargs

    def _writer_settings(self) -> dict[str, str]:
        # A fenced writer's transaction left open (its process paused) ends on the server within the lease
        # (``fence(lease=)``, else 5 s), so the next holder's epoch UPDATE, which waits for it, does not
        # wait longer than the lock the paused process held.
        if self._fence_epoch is None:
            return {}
        return {"idle_in_transaction_session_timeout": f"{self._transaction_timeout_ms}ms"}

    async def connect(self, **server_settings: str) -> Any:
        """A new asyncpg connection to this store's database, outside the pool (the caller closes it):
        for a session of its own, such as the one holding the leadership lock."""
        try:
            return await load_asyncpg().connect(**self._connect_kwargs(**server_settings))
        except Exception as exc:
            raise open_error(exc, self.url) from None

    # --- fencing ---

    @property
    def fence_epoch(self) -> int | None:
        """The leader epoch this store writes under (``fence``), or None when it is not fenced."""
        return self._fence_epoch

    @property
    def fenced(self) -> StoreFenced | None:
        """Why this store may no longer write (another process fenced it out, or ``refuse_writes``), or None."""
        return self._fenced

    def refuse_writes(self, reason: str) -> None:
        """From now on every write of this store fails with ``StoreFenced(reason)``; reads keep working.

        ``reason`` is the one sentence the writer's caller gets (say what happened and the fix; never the
        password). Writes waiting for the next batch fail with it too; a batch already being committed
        finishes, under the fence check of its own transaction. Calling it again replaces the sentence, and
        ``fence`` (taking the leadership again) lifts it. Nothing is sent to the database."""
        if not isinstance(reason, str) or not reason.strip():
            raise StoreError(
                "refuse_writes needs a reason: the sentence every later write of the store fails with"
            )
        self._fenced = StoreFenced(reason.strip())

    async def fence(
        self,
        holder: str = "",
        *,
        on_fenced: Callable[[StoreFenced], Any] | None = None,
        lease: float | None = None,
    ) -> int:
        """Make this store the database's one writer and return its epoch; see the module's "Fencing".

        Call it while holding the leadership (``ag2net.server.leadership`` holds a session advisory lock),
        before the first write. It waits for the write transactions of the previous holder that are
        still open to end. ``on_fenced(error)`` is called once, from the writer, when a later holder's
        ``fence`` fences this store out. ``lease`` (seconds, default 5) bounds on the server how long a
        write transaction of this store may stay idle (``idle_in_transaction_session_timeout``): a
        paused process cannot hold the leader row, and so delay the next holder's fence, for longer."""
        if self._pool is None or self.read_only:
            raise self._closed_error()
        _no_nul("fence holder", holder, empty_ok=True)
        if lease is not None and not (isinstance(lease, int | float) and lease > 0):
            raise StoreError(f"the fence's lease must be a number of seconds more than 0, got {lease!r}")
        try:
            conn = await self.connect()
            try:
                async with conn.transaction():
                    await conn.execute("SELECT pg_advisory_xact_lock($1)", _UPGRADE_LOCK)
                    for statement in _FENCE_SETUP:
                        await conn.execute(statement)
                epoch = int(await conn.fetchval(_BUMP_EPOCH, holder, self._clock()))
            finally:
                await conn.close()
        except StoreError:
            raise
        except Exception as exc:
            detail = first_line(exc)
            raise StoreError(f"cannot take the leadership of {self.where} ({detail})") from exc
        self._fence_epoch = epoch
        self._fenced = None
        self._on_fenced = on_fenced
        self._transaction_timeout_ms = 5000 if lease is None else max(1, round(lease * 1000))
        writer = self._writer_conn
        if writer is not None and not writer.is_closed():
            await writer.execute(f"SET idle_in_transaction_session_timeout = {self._transaction_timeout_ms}")
        return epoch

    def _is_fence_error(self, exc: BaseException) -> bool:
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            seen.add(id(exc))
            if getattr(exc, "sqlstate", None) == _FENCE_SQLSTATE:
                return True
            exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
        return False

    def _fenced_out(self, exc: BaseException) -> StoreFenced:
        """Record that another holder fenced this store out; tell ``on_fenced`` once."""
        if self._fenced is None:
            detail = first_line(exc, "fenced")
            self._fenced = StoreFenced(
                f"another hub took the leadership of {self.where} ({detail}); this hub may no longer write "
                "there, and this write was not saved"
            )
            callback = self._on_fenced
            if callback is not None:
                try:
                    callback(self._fenced)
                except Exception:
                    pass
        return StoreFenced(str(self._fenced))

    async def open(self) -> None:
        async with self._open_lock:
            if self._pool is not None:
                return
            asyncpg = load_asyncpg()
            try:
                pool = await asyncpg.create_pool(
                    min_size=self._min_connections, max_size=self._max_connections, **self._connect_kwargs()
                )
            except Exception as exc:
                raise open_error(exc, self.url) from None
            try:
                conn = await pool.acquire()
                try:
                    await (self._check_version(conn) if self.read_only else self._upgrade(conn))
                finally:
                    await pool.release(conn)
                # The writer's own connection, outside the pool: a pooled one is taken back by the pool
                # when its server session ends, and the writer reconnects on its own instead.
                writer = (
                    None
                    if self.read_only
                    else await asyncpg.connect(**self._connect_kwargs(**self._writer_settings()))
                )
            except BaseException as exc:
                pool.terminate()
                if isinstance(exc, StoreError):
                    raise
                if isinstance(exc, Exception):
                    raise open_error(exc, self.url) from None
                raise
            self._loop = asyncio.get_running_loop()
            self._pool = pool
            self._writer_conn = writer
            self._pending = []
            self._accepting = not self.read_only

    async def _check_version(self, conn: Connection) -> None:
        """Read-only: the database must hold an ag2net store of this code's schema version."""
        target = schema_version()
        schema = await conn.fetchval("SELECT current_schema()")
        exists = schema is not None and await conn.fetchval(
            "SELECT count(*) FROM pg_tables WHERE schemaname = $1 AND tablename = $2", schema, _VERSION_TABLE
        )
        if not exists:
            raise StoreError(
                f"the PostgreSQL database {self.where} holds no ag2net store (no {_VERSION_TABLE} table in "
                f"schema {schema!r}); give the URL of a database ag2net serve or ag2net tui wrote"
            )
        version = int(await conn.fetchval(f"SELECT COALESCE(MAX(version), 0) FROM {_VERSION_TABLE}"))
        if version > target:
            raise StoreError(
                f"the PostgreSQL database {self.where} has schema version {version}, newer than the "
                f"version {target} this ag2net understands; upgrade ag2net or use another database"
            )
        if version < target:
            raise StoreError(
                f"the PostgreSQL database {self.where} has schema version {version}, older than the version "
                f"{target} this ag2net reads; open it once with ag2net serve or ag2net tui to upgrade it"
            )

    async def _upgrade(self, conn: Connection) -> None:
        target = schema_version()
        while True:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock($1)", _UPGRADE_LOCK)
                schema = await conn.fetchval("SELECT current_schema()")
                if schema is None:
                    raise StoreError(
                        f"the PostgreSQL database {self.where} has no schema to keep the store in (its "
                        "search_path names none that exists and the user may use); create the schema, grant "
                        "the user USAGE and CREATE on it, or fix ?search_path= in the URL"
                    )
                tables = [
                    row[0]
                    for row in await conn.fetch(
                        "SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename", schema
                    )
                ]
                if _VERSION_TABLE in tables:
                    version = await conn.fetchval(f"SELECT version FROM {_VERSION_TABLE}")
                    version = 0 if version is None else int(version)
                else:
                    if tables:
                        raise StoreError(
                            f"the schema {schema!r} of the PostgreSQL database {self.where} holds tables of "
                            f"another application ({', '.join(tables[:5])}); give ag2net a database or schema "
                            "of its own (?search_path=name in the URL)"
                        )
                    await conn.execute(f"CREATE TABLE {_VERSION_TABLE} (version INTEGER NOT NULL)")
                    await conn.execute(f"INSERT INTO {_VERSION_TABLE} (version) VALUES (0)")
                    version = 0
                if version > target:
                    raise StoreError(
                        f"the PostgreSQL database {self.where} has schema version {version}, newer than the "
                        f"version {target} this ag2net understands; upgrade ag2net or use another database"
                    )
                if version == target:
                    return
                await UPGRADES[version](conn)
                await conn.execute(f"UPDATE {_VERSION_TABLE} SET version = $1", version + 1)

    async def close(self) -> None:
        async with self._open_lock:
            pool = self._pool
            if pool is None:
                return
            self._accepting = False
            try:
                task = self._writer_task
                if task is not None:
                    await asyncio.shield(task)
            finally:
                self._pool = None
                writer, self._writer_conn = self._writer_conn, None
                try:
                    await asyncio.wait_for(pool.close(), 10)
                except Exception:
                    pool.terminate()
                if writer is not None:
                    try:
                        await writer.close(timeout=5)
                    except Exception:
                        writer.terminate()
                with self._block_lock:
                    block_reader, self._block_reader = self._block_reader, None
                if block_reader is not None:
                    await asyncio.to_thread(block_reader.close)

    def _closed_error(self) -> StoreError:
        if self.read_only and self._pool is not None:
            return StoreError(f"the store {self.where} is open read-only; open it without read_only to write")
        return StoreError(f"the store {self.where} is not open; await store.open() first")

    # --- the writer ---

    async def _submit(self, kind: int, params: tuple) -> Any:
        loop = self._loop
        if not self._accepting or loop is None:
            raise self._closed_error()
        if self._fenced is not None:
            raise StoreFenced(str(self._fenced))
        fut = loop.create_future()
        self._pending.append((kind, params, fut))
        if self._writer_task is None:
            # Starts on the next loop iteration: every write issued in this one joins the first batch.
            self._writer_task = loop.create_task(self._write_loop())
        return await fut

    async def _write_loop(self) -> None:
        batch: list[Op] = []
        try:
            while self._pending:
                limit = self._batch_limit
                batch, self._pending = self._pending[:limit], self._pending[limit:]
                resolve(batch, await self._write_batch(batch))
                batch = []
        except BaseException as exc:
            # Only a cancelled loop gets here (the event loop shutting down): nobody must wait forever.
            error = exc if isinstance(exc, StoreError) else self._write_error(exc, False)
            for _, _, fut in [*batch, *self._pending]:
                if not fut.done():
                    fut.set_exception(error)
            self._pending = []
            raise
        finally:
            self._writer_task = None

    async def _writer(self) -> Connection:
        conn = self._writer_conn
        if conn is not None and not conn.is_closed():
            return conn
        if self._pool is None:
            raise self._closed_error()
        self._writer_conn = None
        if conn is not None:
            conn.terminate()
        conn = await load_asyncpg().connect(**self._connect_kwargs(**self._writer_settings()))
        self._writer_conn = conn
        return conn

    async def _write_batch(self, ops: list[Op]) -> list:
        """Apply ``ops`` in one transaction; if it fails, retry them one by one in savepoints.

        One caller's bad write must never fail the other callers' writes that shared its group commit.
        """
        try:
            conn = await self._writer()
        except Exception as exc:
            error = self._write_error(exc, False)
            return [error for _ in ops]
        if self._fenced is not None:
            return [StoreFenced(str(self._fenced)) for _ in ops]
        try:
            return await self._transaction(conn, ops)
        except _Unsaved as exc:
            error = self._write_error(exc.cause, exc.committing)
            return [error for _ in ops]
        except Exception as exc:
            if self._is_fence_error(exc):
                return [self._fenced_out(exc) for _ in ops]
        try:
            return await self._one_by_one(conn, ops)
        except _Unsaved as exc:
            error = self._write_error(exc.cause, exc.committing)
        except Exception as exc:
            if self._is_fence_error(exc):
                return [self._fenced_out(exc) for _ in ops]
            error = self._write_error(exc, False)
        return [error for _ in ops]

    def _begin(self) -> str:
        """BEGIN, and for a fenced store the fence check, in one round trip (simple query protocol)."""
        epoch = self._fence_epoch
        return "BEGIN" if epoch is None else f"BEGIN; SELECT ag2net_fence({int(epoch)})"

    async def _transaction(self, conn: Connection, ops: list[Op]) -> list:
        if not self._one_statement(ops):
            return await self._in_transaction(conn, lambda: self._apply(conn, ops))
        # A single statement commits on its own (atomically): one round trip instead of three.
        try:
            return await self._apply(conn, ops)
        except Exception as exc:
            if conn.is_closed():
                raise _Unsaved(exc, True) from exc
            raise

    async def _in_transaction(self, conn: Connection, body: Callable[[], Awaitable[list]]) -> list:
        """``body()`` between BEGIN (with the fence check) and COMMIT; ``_Unsaved`` when the connection fails."""
        committing = False
        try:
            await conn.execute(self._begin())
            try:
                results = await body()
            except BaseException:
                if not conn.is_closed():
                    await conn.execute("ROLLBACK")
                raise
            committing = True
            await conn.execute("COMMIT")
            return results
        except Exception as exc:
            if conn.is_closed():
                raise _Unsaved(exc, committing) from exc
            raise

    def _one_statement(self, ops: list[Op]) -> bool:
        """True when ``_apply`` runs ``ops`` as one SQL statement: a run of appends and append groups,
        of audit records or of knowledge items, or a single upsert. For a fenced store only a run of
        appends, whose statement checks the fence itself."""
        first = ops[0][0]
        if first in APPENDS:
            return all(op[0] in APPENDS for op in ops)
        if self._fence_epoch is not None:
            return False
        if first in (AUDIT, KNOWLEDGE):
            return all(op[0] == first for op in ops)
        return len(ops) == 1 and first in _UPSERT_SQL

    async def _one_by_one(self, conn: Connection, ops: list[Op]) -> list:
        return await self._in_transaction(conn, lambda: self._each_in_a_savepoint(conn, ops))

    async def _each_in_a_savepoint(self, conn: Connection, ops: list[Op]) -> list:
        asyncpg = load_asyncpg()
        results: list = []
        for op in ops:
            await conn.execute("SAVEPOINT op")
            try:
                results.extend(await self._apply(conn, [op]))
            except (asyncpg.PostgresError, StoreError) as exc:
                if conn.is_closed():
                    raise
                await conn.execute("ROLLBACK TO SAVEPOINT op")
                results.append(self._op_error(op, exc))
            await conn.execute("RELEASE SAVEPOINT op")
        return results

    def _op_error(self, op: Op, exc: Exception) -> StoreError:
        """The error of one op that failed on its own (the others of its batch were committed)."""
        if isinstance(exc, StoreError):
            return exc
        kind, params, _ = op
        constraint = getattr(exc, "constraint_name", None) or ""
        detail = getattr(exc, "detail", None) or ""
        if kind in APPENDS:
            if constraint == "wal_envelope_id_unique":
                found = re.search(r"\(envelope_id\)=\((.*)\) already exists", detail)
                if found:
                    return duplicate_envelope(found.group(1))
                return duplicate_envelope(params[1] if kind == APPEND else params[1][0][0])
            if constraint == "wal_pkey":
                return StoreError(
                    f"channel {params[0]!r} got WAL rows from another writer during this append; only one "
                    f"hub may write to {self.where} at a time"
                )
        return StoreError(f"cannot write to the store {self.where} ({exc}); this write was not saved")

    def _write_error(self, exc: BaseException, committing: bool) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        detail = first_line(exc)
        if committing:
            return StoreError(
                f"the connection to {self.where} was lost while committing ({detail}); the write may or may "
                "not be saved: read it back before writing it again"
            )
        return StoreError(
            f"cannot write to the store {self.where} ({detail}); nothing of this batch was saved"
        )

    async def _apply(self, conn: Connection, ops: Sequence[Op]) -> list:
        results: list = []
        for kind, run in runs(ops, appends_together=True):
            if kind in APPENDS:
                results.extend(await self._apply_appends(conn, run))
            elif kind in _UPSERT_SQL:
                await conn.executemany(_UPSERT_SQL[kind], [op[1] for op in run])
                results.extend([None] * len(run))
            elif kind == AUDIT:
                rows = await conn.fetch(_INSERT_AUDIT, [op[1][0] for op in run])
                results.extend(sorted(row[0] for row in rows))
            elif kind == KNOWLEDGE:
                columns = [list(column) for column in zip(*(op[1] for op in run), strict=True)]
                rows = await conn.fetch(_INSERT_KNOWLEDGE, *columns)
                results.extend(sorted(row[0] for row in rows))
            elif kind == DELETE_AGENT:
                ids = [op[1][0] for op in run]
                await conn.execute("DELETE FROM agents WHERE agent_id = ANY($1::text[])", ids)
                await conn.execute("DELETE FROM cursors WHERE agent_id = ANY($1::text[])", ids)
                results.extend([None] * len(run))
            else:  # BARRIER
                results.extend([None] * len(run))
        return results

    async def _apply_appends(self, conn: Connection, run: Sequence[Op]) -> list:
        channels: list[str] = []
        ids: list[str] = []
        texts: list[str] = []
        for kind, params, _ in run:
            if kind == APPEND:
                channels.append(params[0])
                ids.append(params[1])
                texts.append(params[2])
            else:
                channel_id, items = params
                for envelope_id, text in items:
                    channels.append(channel_id)
                    ids.append(envelope_id)
                    texts.append(text)
        epoch = self._fence_epoch
        if epoch is None:
            rows = await conn.fetch(_INSERT_WAL, channels, ids, texts)
        else:
            rows = await conn.fetch(_INSERT_WAL_FENCED, channels, ids, texts, epoch)
        seqs = {row[0]: row[1] for row in rows}
        if len(seqs) != len(ids):
            raise StoreError("an envelope id appears twice in one batch")  # a duplicate inside the batch
        results: list = []
        for kind, params, _ in run:
            if kind == APPEND:
                results.append(seqs[params[1]])
            else:
                results.append([seqs[envelope_id] for envelope_id, _ in params[1]])
        return results

    # --- reads (the pool) ---

    async def _fetch(self, sql: str, *args: Any) -> list[Record]:
        pool = self._pool
        if pool is None:
            raise self._closed_error()
        try:
            return await pool.fetch(numbered(sql), *args)
        except Exception as exc:
            if self._pool is None:
                raise self._closed_error() from None
            detail = first_line(exc)
            raise StoreError(f"cannot read the store {self.where} ({detail})") from exc

    def _any(self, column: str, values: list[str]) -> tuple[str, list]:
        return f"{column} = ANY(?::text[])", [values]

    # --- reads the engine answers its own way ---

    def read_wal_block(self, channel_id: str, first_seq: int, last_seq: int) -> list[str]:
        """``read_wal_seq``'s JSON texts, read synchronously: the caller's thread waits for one indexed
        range scan on the store's block-reading connection (its own thread and event loop)."""
        if last_seq < first_seq:
            return []
        with self._block_lock:
            if self._pool is None:
                raise self._closed_error()
            reader = self._block_reader
            if reader is None:
                asyncpg = load_asyncpg()
                kwargs = self._connect_kwargs()
                reader = self._block_reader = BlockReader(lambda: asyncpg.connect(**kwargs))
        try:
            rows = reader.fetch(
                _READ_BLOCK, channel_id, first_seq, last_seq, timeout=(self._command_timeout or 60.0) + 5
            )
        except Exception as exc:
            detail = first_line(exc)
            raise StoreError(f"cannot read the store {self.where} ({detail})") from exc
        return [row[0] for row in rows]

    async def find_seq(self, channel_id: str, envelope_id: str) -> int | None:
        rows = await self._fetch(
            "SELECT seq FROM wal WHERE envelope_id = ? AND channel_id = ?", envelope_id, channel_id
        )
        return int(rows[0][0]) if rows else None


__all__ = ["UPGRADES", "PostgresStore", "StoreFenced", "is_postgres_url", "redact_url", "schema_version"]

"""What SqliteStore and PostgresStore share, written once: the writer's ops, the table operations and the
queries, over a few engine hooks (huey's ``BaseSqlStorage`` shape).

An engine subclasses ``SqlStore`` and keeps only what is its own: its connections and how a batch of ops
is committed (locking, fencing), how its placeholders are written, how the schema is created and upgraded.
Queries here are written with ``?`` placeholders; an engine whose driver numbers them (``$1``) converts
them with ``numbered``.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from abc import abstractmethod
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any, Self

from ag2net.store.base import (
    StoreError,
    check_text,
    duplicate_envelope,
    encode,
    record_key,
    slice_seqs,
)
from ag2net.store.turns import TurnListing

# --- the writer's operations: what a write call queues for the next batch ---

APPEND, AGENT, DELETE_AGENT, CHANNEL, AUDIT, TASK, CURSOR, KNOWLEDGE, TURN, META, BARRIER = range(11)
APPEND_GROUP = 11  # several envelopes of one channel, all or none (one op, so one savepoint on a retry)
APPENDS = (APPEND, APPEND_GROUP)

# (kind, params, the caller's future)
Op = tuple[int, tuple, asyncio.Future]

# The ops that write one row each, keyed by their own column(s): upserts, so a replaced row keeps its place.
UPSERT_SQL = {
    AGENT: "INSERT INTO agents (agent_id, name, kind, record) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (agent_id) DO UPDATE SET name = excluded.name, kind = excluded.kind, "
    "record = excluded.record",
    CHANNEL: "INSERT INTO channels (channel_id, metadata) VALUES (?, ?) "
    "ON CONFLICT (channel_id) DO UPDATE SET metadata = excluded.metadata",
    TASK: "INSERT INTO tasks (task_id, record) VALUES (?, ?) "
    "ON CONFLICT (task_id) DO UPDATE SET record = excluded.record",
    CURSOR: "INSERT INTO cursors (agent_id, channel_id, envelope_id) VALUES (?, ?, ?) "
    "ON CONFLICT (agent_id, channel_id) DO UPDATE SET envelope_id = excluded.envelope_id",
    TURN: "INSERT INTO turns (turn_id, channel_id, agent_id, trigger_envelope_id, record) "
    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (turn_id) DO UPDATE SET channel_id = excluded.channel_id, "
    "agent_id = excluded.agent_id, trigger_envelope_id = excluded.trigger_envelope_id, "
    "record = excluded.record",
    META: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
}

READ_RANGE = "SELECT envelope FROM wal WHERE channel_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"
#: a channel's last seq, and its ``(seq, envelope)`` rows in a seq range, on a wal table indexed by
#: ``(channel_id, seq)`` (PostgreSQL's, and SQLite's schema 1, which ``ag2net wal`` still reads)
WAL_COUNT = "SELECT COALESCE(MAX(seq), 0) FROM wal WHERE channel_id = ?"
READ_SEQ_RANGE = "SELECT seq, envelope FROM wal WHERE channel_id = ? AND seq BETWEEN ? AND ? ORDER BY seq"

_PLACEHOLDER = re.compile(r"\?")


@functools.lru_cache(maxsize=512)
def numbered(sql: str) -> str:
    """``sql`` with its ``?`` placeholders written ``$1``, ``$2``… (PostgreSQL's form), in order."""
    count = 0

    def number(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return f"${count}"

    return _PLACEHOLDER.sub(number, sql)


def runs(ops: Sequence[Op], *, appends_together: bool) -> Iterator[tuple[int, Sequence[Op]]]:
    """``ops`` cut into runs of one kind, in order, so each run is one statement (or one ``executemany``).

    With ``appends_together`` appends and append groups form one run (an engine that numbers them in one
    statement); without, each kind its own.
    """
    count = len(ops)
    i = 0
    while i < count:
        kind = ops[i][0]
        merge = appends_together and kind in APPENDS
        j = i + 1
        while j < count and (ops[j][0] == kind or (merge and ops[j][0] in APPENDS)):
            j += 1
        yield kind, (ops if j - i == count else ops[i:j])
        i = j


def resolve(batch: Sequence[Op], results: list) -> None:
    """Hand each op's result (or error) to its caller."""
    for (_, _, fut), result in zip(batch, results, strict=True):
        if fut.done():
            continue  # the caller was cancelled; its write still happened
        if isinstance(result, BaseException):
            fut.set_exception(result)
        else:
            fut.set_result(result)


def _as_is(what: str, value: str, *, empty_ok: bool = False) -> str:
    return value


class SqlStore(TurnListing):
    """The Store's table operations over an engine's hooks: ``_fetch`` (a read), ``_submit`` (a write op
    queued for the engine's writer), ``_arg``/``_column`` (what text the engine can take) and the SQL an
    engine writes its own way (``_WAL_HEADS``, ``_NO_LIMIT``, ``_any``)."""

    durable = True

    # Each channel's WAL count by an index skip scan (the engines' SQL differs).
    _WAL_HEADS: str
    #: how a channel's rows are read by seq (SQLite's schema 2 has its own, ``store/sqlite_schema.py``);
    #: each read's rows end with the envelope text
    _WAL_COUNT = WAL_COUNT
    _READ_RANGE = READ_RANGE
    _READ_FROM = "SELECT envelope FROM wal WHERE channel_id = ? AND seq >= ? ORDER BY seq"
    _READ_SEQ_RANGE = READ_SEQ_RANGE
    _READ_AFTER = "SELECT seq, envelope FROM wal WHERE channel_id = ? AND seq > ? ORDER BY seq LIMIT ?"
    _READ_ALL_AFTER = (
        "SELECT channel_id, seq, envelope FROM wal WHERE (channel_id, seq) > (?, ?) "
        "ORDER BY channel_id, seq LIMIT ?"
    )
    # The LIMIT parameter meaning "no limit".
    _NO_LIMIT: Any = None
    # True when every text argument must go through ``_arg`` (a check the engine cannot skip for ASCII).
    _CHECK_ALL_TEXT = False
    _iter_batch: int
    _clock: Callable[[], str]

    @abstractmethod
    async def _fetch(self, sql: str, *args: Any) -> list:
        """The rows of one read, ``sql`` written with ``?`` placeholders."""

    @abstractmethod
    async def _submit(self, kind: int, params: tuple) -> Any:
        """Queue one op for the writer; return its result once the batch holding it has committed."""

    # A text argument of a call, checked: ``_arg(what, value, empty_ok=False)`` returns it or raises a
    # StoreError naming ``what``. Static, so the hot calls pay no extra frame.
    _arg = staticmethod(check_text)
    # Text of a record that also goes in a column of its own (the record's JSON is checked apart): the
    # engine's extra check, none by default.
    _column = staticmethod(_as_is)

    def _any(self, column: str, values: list[str]) -> tuple[str, list]:
        """A WHERE clause matching ``column`` against any of ``values``, and its parameters."""
        return f"{column} IN ({', '.join('?' * len(values))})", values

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @abstractmethod
    async def open(self) -> None:
        """Connect (and create or upgrade the schema); the engine's own."""

    @abstractmethod
    async def close(self) -> None:
        """Commit what is queued and disconnect; the engine's own."""

    async def flush(self) -> None:
        """Wait until every write submitted so far is committed."""
        await self._submit(BARRIER, ())

    # --- whole records kept as JSON text, keyed by one of their fields ---

    async def _put_record(self, op: int, what: str, record: dict, key: str) -> None:
        record_id = self._column(key, record_key(what, record, key))
        await self._submit(op, (record_id, encode(f"{what} {record_id!r}", record)))

    async def _load_records(self, sql: str) -> list[dict]:
        return [json.loads(row[0]) for row in await self._fetch(sql)]

    # --- agents ---

    async def put_agent(self, record: dict) -> None:
        agent_id = self._column("agent_id", record_key("agent record", record, "agent_id"))
        text = encode(f"agent record {agent_id!r}", record)
        name = record.get("name")
        kind = record.get("kind")
        await self._submit(
            AGENT,
            (
                agent_id,
                self._column("agent name", name) if isinstance(name, str) and name else "",
                self._column("agent kind", kind) if isinstance(kind, str) and kind else "",
                text,
            ),
        )

    async def delete_agent(self, agent_id: str) -> None:
        self._arg("agent_id", agent_id)
        await self._submit(DELETE_AGENT, (agent_id,))

    async def load_agents(self) -> list[dict]:
        return await self._load_records("SELECT record FROM agents ORDER BY ord")

    # --- channels ---

    async def put_channel(self, metadata: dict) -> None:
        await self._put_record(CHANNEL, "channel metadata", metadata, "channel_id")

    async def load_channels(self) -> list[dict]:
        return await self._load_records("SELECT metadata FROM channels ORDER BY ord")

    # --- WAL ---

    async def append(self, channel_id: str, envelope_id: str, envelope_json: str) -> int:
        if (
            type(channel_id) is not str
            or type(envelope_id) is not str
            or type(envelope_json) is not str
            or not channel_id
            or not envelope_id
            or not envelope_json
            or not envelope_json.isascii()  # the hub's JSON is ASCII-escaped: this costs nothing
            or self._CHECK_ALL_TEXT
        ):
            self._arg("channel_id", channel_id)
            self._arg("envelope_id", envelope_id)
            self._arg("envelope_json", envelope_json)
        return await self._submit(APPEND, (channel_id, envelope_id, envelope_json))

    async def append_group(self, channel_id: str, items: list[tuple[str, str]]) -> list[int]:
        """Append ``(envelope_id, envelope_json)`` pairs to one channel's WAL, all or none, in order;
        returns their seqs. They commit with whatever else shares the batch, as ``append`` does."""
        seen: set[str] = set()
        for envelope_id, envelope_json in items:
            if (
                self._CHECK_ALL_TEXT
                or type(envelope_id) is not str
                or not envelope_id
                or type(envelope_json) is not str
                or not envelope_json
            ):
                self._arg("envelope_id", envelope_id)
                self._arg("envelope_json", envelope_json)
            elif not envelope_json.isascii():
                self._arg("envelope_json", envelope_json)
            if envelope_id in seen:
                raise duplicate_envelope(envelope_id)
            seen.add(envelope_id)
        self._arg("channel_id", channel_id)
        if not items:
            return []
        return await self._submit(APPEND_GROUP, (channel_id, tuple(items)))

    async def wal_count(self, channel_id: str) -> int:
        rows = await self._fetch(self._WAL_COUNT, channel_id)
        return int(rows[0][0])

    async def wal_counts(self) -> dict[str, int]:
        return {row[0]: int(row[1]) for row in await self._fetch(self._WAL_HEADS)}

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[str]:
        if since >= 0 and (until is None or until >= 0):
            first, last = since + 1, until  # no count needed: seq = index + 1
        else:
            first, last = slice_seqs(await self.wal_count(channel_id), since, until)
        if last is None:
            rows = await self._fetch(self._READ_FROM, channel_id, first)
        elif last < first:
            return []
        else:
            rows = await self._fetch(self._READ_RANGE, channel_id, first, last)
        return [row[-1] for row in rows]

    async def read_wal_seq(self, channel_id: str, first_seq: int, last_seq: int) -> list[tuple[int, str]]:
        if last_seq < first_seq:
            return []
        rows = await self._fetch(self._READ_SEQ_RANGE, channel_id, first_seq, last_seq)
        return [(int(row[0]), row[1]) for row in rows]

    async def iter_wal(self, channel_ids: list[str] | None = None) -> AsyncIterator[tuple[str, int, str]]:
        size = self._iter_batch
        if channel_ids is None:
            # Keyset pagination on (channel_id, seq): each batch is one indexed range scan, and no read
            # transaction stays open between batches.
            after: tuple[str, int] = ("", 0)
            while True:
                rows = await self._fetch(self._READ_ALL_AFTER, *after, size)
                for row in rows:
                    yield row[0], int(row[1]), row[2]
                if len(rows) < size:
                    return
                after = (rows[-1][0], int(rows[-1][1]))
        for channel_id in channel_ids:
            seq = 0
            while True:
                rows = await self._fetch(self._READ_AFTER, channel_id, seq, size)
                for row in rows:
                    yield channel_id, int(row[0]), row[1]
                if len(rows) < size:
                    break
                seq = int(rows[-1][0])

    # --- audit ---

    async def append_audit(self, record: dict) -> int:
        if not isinstance(record, dict):
            raise StoreError(f"audit record must be a dict, got {type(record).__name__}")
        return await self._submit(AUDIT, (encode("audit record", record),))

    async def read_audit(self, *, since: int = 0, limit: int | None = None) -> list[tuple[int, dict]]:
        rows = await self._fetch(
            "SELECT pos, record FROM audit WHERE pos > ? ORDER BY pos LIMIT ?",
            since,
            self._NO_LIMIT if limit is None else max(limit, 0),
        )
        return [(int(row[0]), json.loads(row[1])) for row in rows]

    # --- tasks ---

    async def put_task(self, record: dict) -> None:
        await self._put_record(TASK, "task record", record, "task_id")

    async def load_tasks(self) -> list[dict]:
        return await self._load_records("SELECT record FROM tasks ORDER BY ord")

    # --- delivery cursors ---

    async def set_cursor(self, agent_id: str, channel_id: str, envelope_id: str) -> None:
        self._arg("agent_id", agent_id)
        self._arg("channel_id", channel_id)
        self._arg("envelope_id", envelope_id, empty_ok=True)
        await self._submit(CURSOR, (agent_id, channel_id, envelope_id))

    async def load_cursors(self) -> dict[str, dict[str, str]]:
        cursors: dict[str, dict[str, str]] = {}
        for row in await self._fetch(
            "SELECT agent_id, channel_id, envelope_id FROM cursors ORDER BY agent_id, channel_id"
        ):
            cursors.setdefault(row[0], {})[row[1]] = row[2]
        return cursors

    # --- knowledge ---

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        self._arg("agent_id", agent_id)
        self._arg("knowledge text", text, empty_ok=True)
        self._arg("knowledge source", source, empty_ok=True)
        return await self._submit(KNOWLEDGE, (agent_id, text, source, self._clock()))

    async def search_knowledge(self, agent_id: str, query: str, limit: int = 10) -> list[dict]:
        # Filtered here, not in SQL: SQLite's lower()/LIKE fold ASCII only, casefold() folds all of Unicode,
        # so every store finds the same items.
        needle = query.casefold()
        found = [item for item in await self.list_knowledge(agent_id) if needle in item["text"].casefold()]
        return found[: max(limit, 0)]

    async def list_knowledge(self, agent_id: str) -> list[dict]:
        rows = await self._fetch(
            "SELECT id, text, source, at FROM knowledge WHERE agent_id = ? ORDER BY id", agent_id
        )
        return [{"id": int(row[0]), "text": row[1], "source": row[2], "at": row[3]} for row in rows]

    # --- turn records ---

    async def put_turn(self, record: dict) -> None:
        turn_id = self._column("turn_id", record_key("turn record", record, "turn_id"))
        text = encode(f"turn record {turn_id!r}", record)
        columns = [
            None if value is None else self._column(f"turn record {key}", value, empty_ok=True)
            for key, value in self.turn_columns(record).items()
        ]
        await self._submit(TURN, (turn_id, *columns, text))

    async def _select_turns(
        self, equal: dict[str, str], agent_ids: list[str] | None, limit: int
    ) -> list[dict[str, Any]]:
        where = [f"{column} = ?" for column in equal]
        params: list[Any] = list(equal.values())
        if agent_ids is not None:
            clause, values = self._any("agent_id", agent_ids)
            where.append(clause)
            params.extend(values)
        sql = "SELECT record FROM turns"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY ord DESC LIMIT ?"
        params.append(limit)
        return [json.loads(row[0]) for row in await self._fetch(sql, *params)]

    # --- settings ---

    async def get_meta(self, key: str) -> str | None:
        rows = await self._fetch("SELECT value FROM meta WHERE key = ?", key)
        return rows[0][0] if rows else None

    async def set_meta(self, key: str, value: str) -> None:
        self._arg("meta key", key)
        self._arg(f"meta value for {key!r}", value, empty_ok=True)
        await self._submit(META, (key, value))


__all__ = ["SqlStore"]

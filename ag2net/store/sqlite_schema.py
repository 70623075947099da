"""The SQLite store's schema, its upgrade steps, and the SQL that reads a channel's WAL rows by seq.

Schema 1 indexed every WAL row by ``(channel_id, seq)`` in the commit that wrote it: a second b-tree page
in every commit, which measured 25 µs against 15 µs for a one-envelope commit without it (a third of a
one-at-a-time post's whole cost). Schema 2 indexes ``(channel_id, seq)`` the way envelope ids always were:
in bulk, in ``wal_seq``, by the writer's move of its recent rows (every ``ids_batch`` appends, in the
same transaction as ``wal_ids`` and ``store_state['wal_ids_upto']``). Every WAL row at or below that pos is
in ``wal_seq``; the rows after it, at most a move's worth, are found by a scan of the end of ``wal``
(its rowid order). Each read below asks both in one statement, so it sees one snapshot of the two.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

#: The last pos the bulk moves put into ``wal_seq``; the WAL rows after it are the tail.
_UPTO = "COALESCE((SELECT value FROM store_state WHERE key = 'wal_ids_upto'), 0)"

# --- schema: step i upgrades a database from user_version i to i + 1 ---

_SCHEMA_V1 = (
    """CREATE TABLE agents (
        ord INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        kind TEXT NOT NULL,
        record TEXT NOT NULL)""",
    """CREATE TABLE channels (
        ord INTEGER PRIMARY KEY,
        channel_id TEXT NOT NULL UNIQUE,
        metadata TEXT NOT NULL)""",
    # A rowid table appends every batch at the end of one b-tree, which measured 3x faster for
    # interleaved channels than a WITHOUT ROWID table clustered on (channel_id, seq); the unique
    # index gives the O(range) seq lookups. Envelope ids are indexed in bulk (wal_ids, below).
    """CREATE TABLE wal (
        pos INTEGER PRIMARY KEY,
        channel_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        envelope_id TEXT NOT NULL,
        envelope TEXT NOT NULL)""",
    "CREATE UNIQUE INDEX wal_channel_seq ON wal (channel_id, seq)",
    # Every WAL row up to store_state['wal_ids_upto'] (a pos); later rows are held in memory and
    # re-read from wal at open. An index on wal.envelope_id instead would add one more page to
    # every commit, a fifth of the cost of a one-envelope commit.
    """CREATE TABLE wal_ids (
        envelope_id TEXT PRIMARY KEY,
        channel_id TEXT NOT NULL,
        seq INTEGER NOT NULL) WITHOUT ROWID""",
    "CREATE TABLE store_state (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID",
    "CREATE TABLE audit (pos INTEGER PRIMARY KEY, record TEXT NOT NULL)",
    """CREATE TABLE tasks (
        ord INTEGER PRIMARY KEY,
        task_id TEXT NOT NULL UNIQUE,
        record TEXT NOT NULL)""",
    """CREATE TABLE cursors (
        agent_id TEXT NOT NULL,
        channel_id TEXT NOT NULL,
        envelope_id TEXT NOT NULL,
        PRIMARY KEY (agent_id, channel_id)) WITHOUT ROWID""",
    """CREATE TABLE knowledge (
        id INTEGER PRIMARY KEY,
        agent_id TEXT NOT NULL,
        text TEXT NOT NULL,
        source TEXT NOT NULL,
        at TEXT NOT NULL)""",
    "CREATE INDEX knowledge_agent ON knowledge (agent_id, id)",
    """CREATE TABLE turns (
        ord INTEGER PRIMARY KEY,
        turn_id TEXT NOT NULL UNIQUE,
        channel_id TEXT,
        agent_id TEXT,
        trigger_envelope_id TEXT,
        record TEXT NOT NULL)""",
    "CREATE INDEX turns_channel ON turns (channel_id, ord)",
    "CREATE INDEX turns_agent ON turns (agent_id, ord)",
    "CREATE INDEX turns_trigger ON turns (trigger_envelope_id, ord)",
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
)

_SCHEMA_V2 = (
    """CREATE TABLE wal_seq (
        channel_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        pos INTEGER NOT NULL,
        PRIMARY KEY (channel_id, seq)) WITHOUT ROWID""",
    # the rows the bulk moves reached so far; the later ones stay in the tail, as their ids do
    f"INSERT INTO wal_seq (channel_id, seq, pos) SELECT channel_id, seq, pos FROM wal WHERE pos <= {_UPTO} "
    "ORDER BY channel_id, seq",
    "DROP INDEX wal_channel_seq",
)


def _run_statements(statements: tuple[str, ...]) -> Callable[[sqlite3.Connection], None]:
    def step(conn: sqlite3.Connection) -> None:
        for statement in statements:
            conn.execute(statement)

    return step


# Append a step to evolve the schema; never edit a step that has shipped.
UPGRADES: tuple[Callable[[sqlite3.Connection], None], ...] = (
    _run_statements(_SCHEMA_V1),
    _run_statements(_SCHEMA_V2),
)

# --- reading by seq (schema 2 and later) ---


def _channel_rows(seq_is: str, tail: str = "") -> str:
    """``(seq, envelope)`` of the WAL rows of channel ``?1`` whose seq meets ``seq_is`` (``{seq}`` stands for
    the column; its other parameters are ``?2``…), in seq order: those ``wal_seq`` finds, then the tail's
    (SQLite merges the two ordered halves; only the tail's few rows are sorted)."""
    return (
        "SELECT s.seq, w.envelope FROM wal_seq s JOIN wal w ON w.pos = s.pos "
        f"WHERE s.channel_id = ?1 AND {seq_is.format(seq='s.seq')} "
        f"UNION ALL SELECT seq, envelope FROM wal WHERE pos > {_UPTO} AND channel_id = ?1 "
        f"AND {seq_is.format(seq='seq')} ORDER BY 1{tail}"
    )


#: channel ``?1``'s last seq (0 for none)
WAL_COUNT = (
    "SELECT max(COALESCE((SELECT MAX(seq) FROM wal_seq WHERE channel_id = ?1), 0), "
    f"COALESCE((SELECT MAX(seq) FROM wal WHERE pos > {_UPTO} AND channel_id = ?1), 0))"
)
#: ``(channel_id, first_seq, last_seq)`` -> ``(seq, envelope)`` rows; ``READ_FROM``: ``(channel_id, first_seq)``;
#: ``READ_AFTER``: ``(channel_id, after_seq, limit)``
READ_RANGE = _channel_rows("{seq} BETWEEN ?2 AND ?3")
READ_FROM = _channel_rows("{seq} >= ?2")
READ_AFTER = _channel_rows("{seq} > ?2", " LIMIT ?3")
#: every channel's rows after ``(?1, ?2)`` in (channel_id, seq) order, at most ``?3``: keyset pagination
READ_ALL_AFTER = (
    "SELECT channel_id, seq, envelope FROM ("
    "SELECT s.channel_id AS channel_id, s.seq AS seq, w.envelope AS envelope "
    "FROM wal_seq s JOIN wal w ON w.pos = s.pos WHERE (s.channel_id, s.seq) > (?1, ?2) "
    f"UNION ALL SELECT channel_id, seq, envelope FROM wal WHERE pos > {_UPTO} AND (channel_id, seq) > (?1, ?2)"
    ") ORDER BY channel_id, seq LIMIT ?3"
)
#: The writer's bulk move (inside a batch's transaction): every WAL row after the mark, which are the rows
#: it holds in memory, into wal_ids and wal_seq (each in its key order), then the mark moved to the last.
MOVE_RECENT_ROWS = (
    "INSERT INTO wal_ids (envelope_id, channel_id, seq) "
    f"SELECT envelope_id, channel_id, seq FROM wal WHERE pos > {_UPTO} ORDER BY envelope_id",
    f"INSERT INTO wal_seq (channel_id, seq, pos) SELECT channel_id, seq, pos FROM wal WHERE pos > {_UPTO} "
    "ORDER BY channel_id, seq",
    "INSERT INTO store_state (key, value) VALUES ('wal_ids_upto', (SELECT MAX(pos) FROM wal)) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
)
#: every channel's last seq: a skip scan of ``wal_seq``'s channels, then the tail's
WAL_HEADS = f"""
WITH RECURSIVE heads (channel_id) AS (
    SELECT MIN(channel_id) FROM wal_seq
    UNION ALL
    SELECT (SELECT MIN(channel_id) FROM wal_seq WHERE channel_id > heads.channel_id)
    FROM heads WHERE heads.channel_id IS NOT NULL
)
SELECT channel_id, MAX(head) FROM (
    SELECT channel_id, (SELECT MAX(seq) FROM wal_seq WHERE wal_seq.channel_id = heads.channel_id) AS head
    FROM heads WHERE channel_id IS NOT NULL
    UNION ALL
    SELECT channel_id, MAX(seq) FROM wal WHERE pos > {_UPTO} GROUP BY channel_id
) GROUP BY channel_id
"""

__all__ = [
    "MOVE_RECENT_ROWS",
    "READ_AFTER",
    "READ_ALL_AFTER",
    "READ_FROM",
    "READ_RANGE",
    "UPGRADES",
    "WAL_COUNT",
    "WAL_HEADS",
]

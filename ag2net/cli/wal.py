"""``ag2net wal``'s reader: a store database opened read-only, so looking never changes the file.

SQLite opens the file through a ``file:…?mode=ro`` URI: no schema is created (a 0-byte file stays 0 bytes
and is reported as not an ag2net database), nothing is upgraded or checkpointed, and a hub may keep
writing the same file meanwhile. Channels are named by their short label (``discussion·7d80``, see
``ag2net.naming``), and a channel argument may be a label, a tail, an id or an id prefix.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.naming import ChannelRefError, channel_labels, resolve_channel_ref
from ag2net.store import sql, sqlite_schema
from ag2net.store.sqlite import schema_version


class WalReadError(Exception):
    """The database cannot be read as an ag2net store; the message is one sentence naming the file."""


class WalReader:
    """Read-only access to an ag2net SQLite store: its channels, their WALs and the agents' names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        uri = f"{path.resolve().as_uri()}?mode=ro"
        if not Path(f"{path}-wal").exists():
            # No -wal file: no connection has the database open (SQLite keeps it while one does) and
            # nothing waits to be checkpointed, so read the file as it is, without SQLite making the
            # -wal and -shm files a read-only connection to a WAL database otherwise leaves behind.
            uri += "&immutable=1"
        try:
            self._conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=5.0)
        except sqlite3.Error as exc:
            raise WalReadError(f"--db {str(path)!r} cannot be opened for reading ({exc})") from None
        try:
            self._check()
            self.names: dict[str, str] = dict(self._conn.execute("SELECT agent_id, name FROM agents"))
            self.channels: list[ChannelMetadata] = [
                ChannelMetadata.from_dict(json.loads(row[0]))
                for row in self._conn.execute("SELECT metadata FROM channels ORDER BY ord")
            ]
        except sqlite3.Error as exc:
            self.close()
            raise WalReadError(f"--db {str(path)!r} cannot be read as an ag2net database ({exc})") from None
        except BaseException:
            self.close()
            raise
        self.labels = channel_labels((md.manifest.type, md.channel_id) for md in self.channels)

    def _check(self) -> None:
        where = f"--db {str(self.path)!r}"
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                row[0]
                for row in self._conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            }
        except sqlite3.DatabaseError:
            raise WalReadError(
                f"{where} is not an ag2net database (not a SQLite file); give the path of a database "
                "ag2net tui or ag2net serve wrote"
            ) from None
        if version == 0 and not tables:
            raise WalReadError(
                f"{where} is not an ag2net database (it holds no tables"
                + (", the file is empty" if self.path.stat().st_size == 0 else "")
                + "); give the path of a database ag2net tui or ag2net serve wrote"
            )
        if version > schema_version():
            raise WalReadError(
                f"{where} has schema version {version}, newer than the version {schema_version()} this "
                "ag2net understands; upgrade ag2net"
            )
        # schema 1 indexed every row by (channel_id, seq); later schemas index them in bulk (wal_seq)
        if "wal_seq" in tables:
            self._wal_count_sql, self._read_range_sql = sqlite_schema.WAL_COUNT, sqlite_schema.READ_RANGE
        else:
            self._wal_count_sql, self._read_range_sql = sql.WAL_COUNT, sql.READ_SEQ_RANGE
        if not {"agents", "channels", "wal"} <= tables:
            raise WalReadError(
                f"{where} is a SQLite database of another application (tables: "
                f"{', '.join(sorted(tables)[:5])}); give the path of an ag2net database"
            )

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> WalReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ reading

    def name_for(self, agent_id: str) -> str:
        return self.names.get(agent_id, agent_id)

    def label_for(self, channel_id: str) -> str:
        return self.labels.get(channel_id, channel_id)

    def resolve(self, ref: str) -> ChannelMetadata:
        """The channel ``ref`` names (a label, a tail, an id or an id prefix); ``WalReadError`` otherwise."""
        try:
            channel_id = resolve_channel_ref(ref, ((md.manifest.type, md.channel_id) for md in self.channels))
        except ChannelRefError as exc:
            of_type = [md for md in self.channels if md.manifest.type == ref.strip()]
            if len(of_type) == 1:  # a bare type names the one channel of that type
                return of_type[0]
            if of_type:
                shown = ", ".join(self.label_for(md.channel_id) for md in of_type[:5])
                raise WalReadError(
                    f"channel {ref!r} names {len(of_type)} {ref.strip()} channels ({shown}"
                    f"{' …' if len(of_type) > 5 else ''}): give one's label"
                ) from None
            raise WalReadError(f"{exc} ('ag2net wal --db {self.path}' lists them)") from None
        return next(md for md in self.channels if md.channel_id == channel_id)

    def wal_count(self, channel_id: str) -> int:
        return int(self._conn.execute(self._wal_count_sql, (channel_id,)).fetchone()[0])

    def envelopes(
        self, channel_id: str, first_seq: int, last_seq: int
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        """``(seq, envelope as stored)`` for ``first_seq <= seq <= last_seq``, in order."""
        rows = self._conn.execute(self._read_range_sql, (channel_id, first_seq, last_seq))
        for seq, text in rows:
            yield int(seq), json.loads(text)

    # ------------------------------------------------------------------ lines

    def channel_line(self, md: ChannelMetadata, width: int) -> str:
        names = ", ".join(self.name_for(p) for p in md.participant_ids())
        count = self.wal_count(md.channel_id)
        return f"{self.label_for(md.channel_id):<{width}}  {md.state.value:<8} {count:>6}  {names}"

    def channel_json(self, md: ChannelMetadata) -> str:
        record = {
            "label": self.label_for(md.channel_id),
            "wal_count": self.wal_count(md.channel_id),
            "participant_names": [self.name_for(p) for p in md.participant_ids()],
            **md.to_dict(),
        }
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))

    def envelope_line(self, seq: int, data: dict[str, Any]) -> str:
        env = Envelope(**data)
        event_data = json.dumps(env.event_data, ensure_ascii=False, sort_keys=True)
        return (
            f"{seq:>6}  {env.created_at[11:23]}  {self.name_for(env.sender_id):<12} {env.event_type:<26} "
            f"{event_data}"
        )


class PostgresWalReader(WalReader):
    """``WalReader`` on a PostgreSQL store (``postgresql://…``), opened read-only: the server refuses any
    write of its session, nothing is created or upgraded."""

    def __init__(self, url: str) -> None:
        from ag2net.store import open_store
        from ag2net.store.base import StoreError
        from ag2net.store.postgres import PostgresStore, redact_url

        self.path = redact_url(url)  # type: ignore[assignment]  # named in messages, never opened as a file
        self._loop = asyncio.new_event_loop()
        try:
            open_store(url)  # a URL of another scheme: one sentence naming it
            self._store = PostgresStore(url, read_only=True, min_connections=1, max_connections=1)
            self._loop.run_until_complete(self._store.open())
            self.names = {a["agent_id"]: a.get("name", "") for a in self._run(self._store.load_agents())}
            self.channels = [ChannelMetadata.from_dict(md) for md in self._run(self._store.load_channels())]
        except StoreError as exc:
            self._loop.close()
            raise WalReadError(f"--db: {exc}") from None
        self.labels = channel_labels((md.manifest.type, md.channel_id) for md in self.channels)

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        if not self._loop.is_closed():
            self._run(self._store.close())
            self._loop.close()

    def wal_count(self, channel_id: str) -> int:
        return self._run(self._store.wal_count(channel_id))

    def envelopes(
        self, channel_id: str, first_seq: int, last_seq: int
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        for seq, text in self._run(self._store.read_wal_seq(channel_id, first_seq, last_seq)):
            yield seq, json.loads(text)


def open_reader(db: str) -> WalReader:
    """A read-only reader of ``db``: a PostgreSQL URL's, else the database file's. A path that is missing
    or a directory is a ``WalReadError`` naming ``--db``, as are the readers' own refusals."""
    from ag2net.store import is_database_url

    if is_database_url(db):
        return PostgresWalReader(db)
    path = Path(db)
    if not path.exists():
        raise WalReadError(f"--db {db!r} does not exist; give the path of an ag2net database")
    if path.is_dir():
        raise WalReadError(f"--db {db!r} is a directory; give the path of an ag2net database file")
    return WalReader(path)


def envelope_json(data: dict[str, Any]) -> str:
    """One stored envelope as one line of JSON (``json.loads`` gives it back)."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


__all__ = ["PostgresWalReader", "WalReadError", "WalReader", "envelope_json"]

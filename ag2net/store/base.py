"""The Store protocol the hub persists through, its error, and the checks both stores share.

A store deals in plain JSON-able dicts and JSON strings; it never imports hub types.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Collection
from typing import Any, Protocol, runtime_checkable

from ag2net.envelope import find_bad_text
from ag2net.errors import NetworkError


class StoreError(NetworkError):
    """The store cannot do what was asked: unreadable file, schema too new, bad record, duplicate id."""


@runtime_checkable
class Store(Protocol):
    """Everything the hub keeps: agents, channels, per-channel WAL, audit, tasks, cursors, knowledge, turns.

    A write call returns only once the write is committed (durably, for a ``durable`` store), and every
    read sees every write whose call has returned.
    """

    durable: bool

    async def open(self) -> None:
        """Idempotent: connect, create the schema or upgrade it."""
        ...

    async def close(self) -> None:
        """Write out everything still pending, then release the file."""
        ...

    async def put_agent(self, record: dict) -> None:
        """Insert or replace the agent ``record["agent_id"]``; a replaced agent keeps its place in the order."""
        ...

    async def delete_agent(self, agent_id: str) -> None:
        """Forget the agent record and its delivery cursors (its WAL rows, knowledge and turns stay)."""
        ...

    async def load_agents(self) -> list[dict]:
        """Every agent record, in first-registration order."""
        ...

    async def put_channel(self, metadata: dict) -> None:
        """Insert or replace the channel ``metadata["channel_id"]``."""
        ...

    async def load_channels(self) -> list[dict]:
        """Every channel's metadata, in creation order."""
        ...

    async def append(self, channel_id: str, envelope_id: str, envelope_json: str) -> int:
        """Append one envelope to the channel's WAL and return its ``seq`` (1, 2, 3... per channel)."""
        ...

    async def wal_count(self, channel_id: str) -> int:
        """How many envelopes the channel's WAL holds (0 for an unknown channel)."""
        ...

    async def wal_counts(self) -> dict[str, int]:
        """``{channel_id: count}`` for every channel that has a WAL row."""
        ...

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[str]:
        """``wal[since:until]`` with Python slice semantics (0-based indices, negatives count from the end)."""
        ...

    async def read_wal_seq(self, channel_id: str, first_seq: int, last_seq: int) -> list[tuple[int, str]]:
        """``(seq, json)`` for ``first_seq <= seq <= last_seq``, at a cost proportional to the range."""
        ...

    def iter_wal(self, channel_ids: list[str] | None = None) -> AsyncIterator[tuple[str, int, str]]:
        """Every ``(channel_id, seq, json)``, channel by channel, each in seq order, fetched in batches.

        With ``channel_ids`` the channels come in that order; without, in channel-id order.
        """
        ...

    async def find_seq(self, channel_id: str, envelope_id: str) -> int | None:
        """The seq of ``envelope_id`` in the channel's WAL, or None."""
        ...

    async def append_audit(self, record: dict) -> int:
        """Append an audit record; return its global position (1, 2, 3...)."""
        ...

    async def read_audit(self, *, since: int = 0, limit: int | None = None) -> list[tuple[int, dict]]:
        """``(position, record)`` for positions greater than ``since``, oldest first, at most ``limit``."""
        ...

    async def put_task(self, record: dict) -> None:
        """Insert or replace the task ``record["task_id"]``."""
        ...

    async def load_tasks(self) -> list[dict]:
        """Every task record, in creation order."""
        ...

    async def set_cursor(self, agent_id: str, channel_id: str, envelope_id: str) -> None:
        """Record the last envelope the agent acknowledged in the channel."""
        ...

    async def load_cursors(self) -> dict[str, dict[str, str]]:
        """``{agent_id: {channel_id: envelope_id}}``."""
        ...

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        """Store a piece of text in the agent's knowledge; return its id."""
        ...

    async def search_knowledge(self, agent_id: str, query: str, limit: int = 10) -> list[dict[str, Any]]:
        """The agent's knowledge items whose text contains ``query`` (case-insensitive), oldest first."""
        ...

    async def list_knowledge(self, agent_id: str) -> list[dict]:
        """Every knowledge item of the agent, oldest first: ``{"id", "text", "source", "at"}``."""
        ...

    async def put_turn(self, record: dict) -> None:
        """Insert or replace the turn record ``record["turn_id"]``."""
        ...

    async def list_turns(
        self,
        *,
        channel_id: str | None = None,
        agent_id: str | None = None,
        trigger_envelope_id: str | None = None,
        limit: int = 50,
        agent_ids: Collection[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Turn records matching every given filter, newest first, at most ``limit``.

        ``agent_ids`` keeps the records of those agents only (an empty collection matches nothing).
        """
        ...

    async def get_meta(self, key: str) -> str | None:
        """A hub setting, or None."""
        ...

    async def set_meta(self, key: str, value: str) -> None:
        """Set a hub setting."""
        ...


# --- checks and encoding shared by both stores (run in the caller, before anything is queued) ---


def encode(what: str, record: Any) -> str:
    """``record`` as compact JSON text, or a StoreError naming ``what`` when it is not JSON-able.

    Text SQLite cannot take (a lone surrogate, which has no UTF-8 form) is refused here, in the
    caller, so it never reaches a group commit where it would fail other callers' writes.
    """
    try:
        text = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{what} is not JSON-serialisable ({exc}); pass plain dicts, lists, strings and numbers"
        ) from exc
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            found = find_bad_text(record, "record")
            raise StoreError(_unencodable(what, *(found or ("a string", text)))) from None
    return text


def _unencodable(what: str, where: str | None, value: str) -> str:
    bad = next((ch for ch in value if "\ud800" <= ch <= "\udfff"), "\ud800")
    subject = f"{what} cannot be stored: {where}" if where else what
    return (
        f"{subject} holds the lone surrogate U+{ord(bad):04X}, which is not valid Unicode text; "
        "pass well-formed strings"
    )


def record_key(what: str, record: Any, key: str) -> str:
    """``record[key]`` when ``record`` is a dict holding a non-empty string there."""
    if not isinstance(record, dict):
        raise StoreError(f"{what} must be a dict, got {type(record).__name__}")
    value = record.get(key)
    if not isinstance(value, str) or not value:
        raise StoreError(f"{what} needs a non-empty string {key!r}, got {value!r}")
    return value


def check_text(what: str, value: Any, *, empty_ok: bool = False) -> str:
    """``value`` when it is a string (non-empty unless ``empty_ok``)."""
    if not isinstance(value, str) or (not value and not empty_ok):
        kind = "a string" if empty_ok else "a non-empty string"
        raise StoreError(f"{what} must be {kind}, got {value!r}")
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise StoreError(_unencodable(what, None, value)) from None
    return value


def optional_text(record: dict, key: str) -> str | None:
    """``record[key]`` if it is a string, else None (for the indexed columns of a turn record)."""
    value = record.get(key)
    return value if isinstance(value, str) else None


def slice_seqs(count: int, since: int, until: int | None) -> tuple[int, int]:
    """The inclusive seq range ``(first, last)`` that ``wal[since:until]`` covers in a WAL of ``count`` rows.

    Seqs are 1..count, so list index ``i`` is seq ``i + 1``. An empty slice gives ``first > last``.
    """
    start, stop, _ = slice(since, until).indices(count)
    return start + 1, stop


def duplicate_envelope(envelope_id: str) -> StoreError:
    return StoreError(f"envelope id {envelope_id!r} is already in the WAL; every envelope needs a fresh id")


@runtime_checkable
class BlockReader(Protocol):
    """Optional: a store that can read a seq range synchronously. With it the hub keeps only each live
    channel's newest envelopes in memory and reads older ones back here (``Hub(cache_mb=...)``);
    without it the hub can only drop whole channels from its cache."""

    def read_wal_block(self, channel_id: str, first_seq: int, last_seq: int) -> list[str]:
        """The JSON of envelopes ``first_seq <= seq <= last_seq``, in seq order."""
        ...


__all__ = ["BlockReader", "Store", "StoreError"]

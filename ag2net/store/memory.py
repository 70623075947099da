"""MemoryStore: the Store protocol on dicts and lists, for tests and throwaway hubs (nothing survives the process).

Records are kept as JSON text, exactly as the SQLite store keeps them, so both behave the same: a caller
mutating a dict after ``put_*`` changes nothing stored, and non-JSON values fail at the call. The data
outlives ``close()``, so a test can restart a hub on the same MemoryStore object.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from ag2net.ids import utc_now
from ag2net.store.base import (
    StoreError,
    check_text,
    duplicate_envelope,
    encode,
    record_key,
)
from ag2net.store.turns import TurnListing


def _put_record(table: dict[str, str], what: str, record: dict, key: str) -> None:
    """Keep ``record`` as JSON text under its ``key`` field (``what`` names it in errors)."""
    record_id = record_key(what, record, key)
    table[record_id] = encode(f"{what} {record_id!r}", record)


def _load_records(table: dict[str, str]) -> list[dict]:
    return [json.loads(text) for text in table.values()]


class MemoryStore(TurnListing):
    """A Store held in process memory (``durable`` is False)."""

    durable = False

    def __init__(self, *, clock: Callable[[], str] | None = None) -> None:
        self._clock = clock or utc_now
        self._agents: dict[str, str] = {}
        self._channels: dict[str, str] = {}
        self._wal: dict[str, list[str]] = {}
        self._envelopes: dict[str, tuple[str, int]] = {}
        self._audit: list[str] = []
        self._tasks: dict[str, str] = {}
        self._cursors: dict[str, dict[str, str]] = {}
        self._knowledge: dict[str, list[dict]] = {}
        self._knowledge_last_id = 0
        self._turns: dict[str, tuple[dict[str, str | None], str]] = {}
        self._meta: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"MemoryStore(channels={len(self._wal)}, envelopes={len(self._envelopes)})"

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    # --- agents ---

    async def put_agent(self, record: dict) -> None:
        _put_record(self._agents, "agent record", record, "agent_id")

    async def delete_agent(self, agent_id: str) -> None:
        self._agents.pop(agent_id, None)
        self._cursors.pop(agent_id, None)

    async def load_agents(self) -> list[dict]:
        return _load_records(self._agents)

    # --- channels ---

    async def put_channel(self, metadata: dict) -> None:
        _put_record(self._channels, "channel metadata", metadata, "channel_id")

    async def load_channels(self) -> list[dict]:
        return _load_records(self._channels)

    # --- WAL ---

    async def append(self, channel_id: str, envelope_id: str, envelope_json: str) -> int:
        check_text("channel_id", channel_id)
        check_text("envelope_id", envelope_id)
        check_text("envelope_json", envelope_json)
        if envelope_id in self._envelopes:
            raise duplicate_envelope(envelope_id)
        wal = self._wal.get(channel_id)
        if wal is None:
            wal = self._wal[channel_id] = []
        wal.append(envelope_json)
        seq = len(wal)
        self._envelopes[envelope_id] = (channel_id, seq)
        return seq

    async def append_group(self, channel_id: str, items: list[tuple[str, str]]) -> list[int]:
        """Append ``(envelope_id, envelope_json)`` pairs to one channel's WAL, all or none, in order."""
        check_text("channel_id", channel_id)
        seen: set[str] = set()
        for envelope_id, envelope_json in items:
            check_text("envelope_id", envelope_id)
            check_text("envelope_json", envelope_json)
            if envelope_id in self._envelopes or envelope_id in seen:
                raise duplicate_envelope(envelope_id)
            seen.add(envelope_id)
        wal = self._wal.setdefault(channel_id, []) if items else []
        seqs = []
        for envelope_id, envelope_json in items:
            wal.append(envelope_json)
            self._envelopes[envelope_id] = (channel_id, len(wal))
            seqs.append(len(wal))
        return seqs

    async def wal_count(self, channel_id: str) -> int:
        return len(self._wal.get(channel_id, ()))

    async def wal_counts(self) -> dict[str, int]:
        return {channel_id: len(wal) for channel_id, wal in sorted(self._wal.items())}

    async def read_wal(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[str]:
        return self._wal.get(channel_id, [])[since:until]

    async def read_wal_seq(self, channel_id: str, first_seq: int, last_seq: int) -> list[tuple[int, str]]:
        wal = self._wal.get(channel_id, [])
        first = max(first_seq, 1)
        last = min(last_seq, len(wal))
        return [(seq, wal[seq - 1]) for seq in range(first, last + 1)]

    def read_wal_block(self, channel_id: str, first_seq: int, last_seq: int) -> list[str]:
        """``read_wal_seq``'s JSON texts, synchronously (the hub's bounded WAL cache reads back here)."""
        return self._wal.get(channel_id, [])[max(first_seq, 1) - 1 : max(last_seq, 0)]

    async def iter_wal(self, channel_ids: list[str] | None = None) -> AsyncIterator[tuple[str, int, str]]:
        for channel_id in sorted(self._wal) if channel_ids is None else channel_ids:
            # Index by seq rather than iterating the list, so appends made while a consumer is
            # between items are either seen in order or not at all, never an error.
            wal = self._wal.get(channel_id, [])
            seq = 0
            while seq < len(wal):
                seq += 1
                yield channel_id, seq, wal[seq - 1]

    async def find_seq(self, channel_id: str, envelope_id: str) -> int | None:
        found = self._envelopes.get(envelope_id)
        return found[1] if found is not None and found[0] == channel_id else None

    # --- audit ---

    async def append_audit(self, record: dict) -> int:
        if not isinstance(record, dict):
            raise StoreError(f"audit record must be a dict, got {type(record).__name__}")
        self._audit.append(encode("audit record", record))
        return len(self._audit)

    async def read_audit(self, *, since: int = 0, limit: int | None = None) -> list[tuple[int, dict]]:
        start = max(since, 0)
        stop = None if limit is None else start + max(limit, 0)
        return [(start + i + 1, json.loads(text)) for i, text in enumerate(self._audit[start:stop])]

    # --- tasks ---

    async def put_task(self, record: dict) -> None:
        _put_record(self._tasks, "task record", record, "task_id")

    async def load_tasks(self) -> list[dict]:
        return _load_records(self._tasks)

    # --- delivery cursors ---

    async def set_cursor(self, agent_id: str, channel_id: str, envelope_id: str) -> None:
        check_text("agent_id", agent_id)
        check_text("channel_id", channel_id)
        check_text("envelope_id", envelope_id, empty_ok=True)
        self._cursors.setdefault(agent_id, {})[channel_id] = envelope_id

    async def load_cursors(self) -> dict[str, dict[str, str]]:
        return {agent_id: dict(sorted(by.items())) for agent_id, by in sorted(self._cursors.items())}

    # --- knowledge ---

    async def add_knowledge(self, agent_id: str, text: str, *, source: str = "") -> int:
        check_text("agent_id", agent_id)
        check_text("knowledge text", text, empty_ok=True)
        check_text("knowledge source", source, empty_ok=True)
        self._knowledge_last_id += 1
        item = {"id": self._knowledge_last_id, "text": text, "source": source, "at": self._clock()}
        self._knowledge.setdefault(agent_id, []).append(item)
        return item["id"]

    async def search_knowledge(self, agent_id: str, query: str, limit: int = 10) -> list[dict]:
        needle = query.casefold()
        found = [
            dict(item) for item in self._knowledge.get(agent_id, []) if needle in item["text"].casefold()
        ]
        return found[: max(limit, 0)]

    async def list_knowledge(self, agent_id: str) -> list[dict]:
        return [dict(item) for item in self._knowledge.get(agent_id, [])]

    # --- turn records ---

    async def put_turn(self, record: dict) -> None:
        turn_id = record_key("turn record", record, "turn_id")
        columns = self.turn_columns(record)
        self._turns[turn_id] = (columns, encode(f"turn record {turn_id!r}", record))

    async def _select_turns(
        self, equal: dict[str, str], agent_ids: list[str] | None, limit: int
    ) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for columns, text in reversed(self._turns.values()):
            if len(found) >= limit:
                break
            if any(columns[column] != value for column, value in equal.items()):
                continue
            if agent_ids is not None and columns["agent_id"] not in agent_ids:
                continue
            found.append(json.loads(text))
        return found

    # --- settings ---

    async def get_meta(self, key: str) -> str | None:
        return self._meta.get(key)

    async def set_meta(self, key: str, value: str) -> None:
        check_text("meta key", key)
        check_text(f"meta value for {key!r}", value, empty_ok=True)
        self._meta[key] = value


__all__ = ["MemoryStore"]

"""Shell: ``ChannelLogs`` (``hub.logs``) — the channels' WALs in memory and the reads of them.

A bounded cache over the store (``ag2net.hub.wal_cache.WalCache``: the newest envelopes of recently used
live channels); a channel's log is loaded holding its lock, as every append runs, so one load installs
one log. Reads are served from the cache when it holds the range, else from the store.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope
from ag2net.ids import is_id
from ag2net.views.visibility_indexes import restore_channel_indexes
from ag2net.views.wal import ENVELOPE_OVERHEAD, WalLog, WalSlice

if TYPE_CHECKING:
    from ag2net.hub.core import ChannelTable
    from ag2net.hub.locks import ChannelLocks
    from ag2net.hub.services import Services
    from ag2net.hub.wal_cache import WalCache

log = logging.getLogger(__name__)


class ChannelLogs:
    """The cached logs of the channels, their loading, appends and reads."""

    __slots__ = ("cache", "channels", "index_entries", "locks", "services")

    def __init__(
        self, services: Services, cache: WalCache, *, channels: ChannelTable, locks: ChannelLocks
    ) -> None:
        self.services = services
        self.cache = cache
        self.channels = channels
        self.locks = locks
        # the visibility indexes the last hub kept for channels whose log is not loaded yet (installed by
        # the load: a reopened hub's first windowed projection need not scan every stored envelope)
        self.index_entries: dict[str, Any] = {}

    # ------------------------------------------------------------------ appends

    def remember(self, cid: str, env: Envelope, text: str, seq: int) -> None:
        """Cache an appended envelope (when its channel's log is cached) and publish it to observers."""
        cache = self.cache
        wal = cache.peek(cid)  # an uncached channel is read from the store when next needed
        if wal is not None:
            if len(wal) == seq - 1:
                cache.appended(cid, wal, wal.append(env, len(text)))
            else:
                log.warning("channel %s: cached WAL out of step (%d, seq %d); dropped", cid, len(wal), seq)
                cache.discard(cid)
        self.services.observe_log.append_envelope(cid, seq, env, len(text) + ENVELOPE_OVERHEAD)

    async def append(self, md: ChannelMetadata, env: Envelope, text: str | None = None) -> int:
        """Durably append one stamped envelope, then count and cache it; returns its seq.

        The caller holds the channel's lock. Nothing in memory changes until the store has committed,
        so a failed append leaves ``wal_count``, the cache and the adapter state as they were.
        """
        cid = md.channel_id
        if text is None:
            text = env.to_json()
        await self.services.store.append(cid, env.envelope_id, text)
        seq = self.channels.note_appended(cid, env)
        self.remember(cid, env, text, seq)
        return seq

    # ------------------------------------------------------------------ loading

    def restore_indexes(self, channel_id: str, wal: WalLog) -> None:
        """Install the visibility indexes the last hub kept for the channel in its freshly loaded log."""
        entry = self.index_entries.pop(channel_id, None)
        if entry is None:
            return
        md = self.channels.get(channel_id)
        adapter = None if md is None else self.channels.adapter_of(md)
        if adapter is None:
            return
        try:
            restore_channel_indexes(wal, adapter.render_envelope, entry)
        except Exception:  # the slow path (a scan) answers the same
            log.warning("visibility indexes kept for channel %s unusable", channel_id, exc_info=True)

    async def load(self, channel_id: str) -> WalLog:
        """The channel's cached log, loading its newest envelopes from the store when absent.

        Single-flight: loads run holding the channel's lock, as every append does, so one load installs
        one log, no append can land between the store read and the install, and a second caller finds
        the log the first one installed.
        """
        cache = self.cache
        wal = cache.get(channel_id)
        if wal is not None:
            return wal
        async with self.locks(channel_id):
            wal = cache.get(channel_id)
            if wal is None:
                wal = await self._read_log(channel_id)
                cache.install(channel_id, wal)
                self.restore_indexes(channel_id, wal)
        return wal

    async def _read_log(self, channel_id: str) -> WalLog:
        count = await self.services.store.wal_count(channel_id)
        keep = self.cache.load_start
        base = max(0, count - keep) if keep else 0
        texts = await self.services.store.read_wal(channel_id, since=base)
        loads = json.loads
        wal = self.cache.new_log(channel_id, base=base)
        for text in texts:
            wal.append(Envelope(**loads(text)), len(text))
        wal_counts = self.channels.wal_counts
        if len(wal) != wal_counts.get(channel_id, 0):
            log.warning(
                "channel %s: the store holds %d envelopes, the hub counted %d; the store wins",
                channel_id,
                len(wal),
                wal_counts.get(channel_id, 0),
            )
            wal_counts[channel_id] = len(wal)
        return wal

    async def for_read(self, channel_id: str) -> WalLog | None:
        """The cached log of a known channel (loaded if live); None for an uncached terminal channel."""
        md = self.channels.get(channel_id)
        if md is None:
            return None
        wal = self.cache.get(channel_id)
        if wal is None and not md.is_terminal():
            wal = await self.load(channel_id)
        return wal

    # ------------------------------------------------------------------ reads

    async def _read_store(self, channel_id: str, start: int, stop: int | None) -> list[Envelope]:
        loads = json.loads
        return [
            Envelope(**loads(t))
            for t in await self.services.store.read_wal(channel_id, since=start, until=stop)
        ]

    async def read(self, channel_id: str, *, since: int = 0, until: int | None = None) -> list[Envelope]:
        """The channel's envelopes in admission order, index-sliced ``[since:until]``; unknown → ``[]``."""
        if channel_id not in self.channels:
            return []
        wal = await self.for_read(channel_id)
        if wal is None:
            return await self._read_store(channel_id, since, until)
        start, stop, _ = slice(since, until).indices(len(wal))
        if start >= wal.base:
            return wal[start:stop]
        return await self._read_store(channel_id, start, stop) if stop > start else []

    async def read_seq(self, channel_id: str, first_seq: int, last_seq: int) -> list[tuple[int, Envelope]]:
        """Envelopes with ``first_seq <= seq <= last_seq`` (seq starts at 1), O(range)."""
        if channel_id not in self.channels:
            return []
        first_seq = max(1, first_seq)
        wal = self.cache.get(channel_id)
        if wal is not None and first_seq - 1 >= wal.base:
            return [(first_seq + i, env) for i, env in enumerate(wal[first_seq - 1 : max(last_seq, 0)])]
        rows = await self.services.store.read_wal_seq(channel_id, first_seq, last_seq)
        loads = json.loads
        return [(seq, Envelope(**loads(text))) for seq, text in rows]

    async def read_until(self, channel_id: str, envelope_id: str) -> WalSlice | list[Envelope]:
        """The WAL strictly before ``envelope_id`` (the whole WAL if it is not found).

        For a live channel this is a ``WalSlice`` of the cached log, so windowed views cost O(window);
        envelopes older than the cache's window are read back from the store when a view reaches them.
        """
        wal = await self.for_read(channel_id)
        if wal is None:
            if channel_id not in self.channels:
                return []
            seq = await self.services.store.find_seq(channel_id, envelope_id)
            return await self._read_store(channel_id, 0, None if seq is None else seq - 1)
        pos = wal.index_of(envelope_id)
        if pos is None and wal.base:
            seq = await self.services.store.find_seq(channel_id, envelope_id)
            if seq is not None:
                pos = seq - 1
        return wal.prefix(pos)

    async def find_by_causation(
        self, channel_id: str, *, sender_id: str, causation_id: str
    ) -> Envelope | None:
        md = self.channels.get(channel_id)
        if md is None or md.is_terminal():
            return None
        # Walk back from the newest envelope only as far as the cause: ids grow in admission order, so
        # an answer to ``causation_id`` sits after it (older envelopes come back from the store only if
        # the walk reaches them).
        bounded = is_id(causation_id)
        for env in reversed((await self.load(channel_id)).prefix()):
            if bounded and env.envelope_id <= causation_id:
                break
            if env.causation_id == causation_id and env.sender_id == sender_id:
                return env
        return None

    async def find(self, channel_id: str, envelope_id: str) -> tuple[int, Envelope] | None:
        """``(seq, envelope)`` of one envelope of the channel, or None."""
        if channel_id not in self.channels:
            return None
        wal = self.cache.get(channel_id)
        pos = wal.index_of(envelope_id) if wal is not None else None
        if wal is not None and pos is not None:
            return pos + 1, wal[pos]
        seq = await self.services.store.find_seq(channel_id, envelope_id)
        if seq is None:
            return None
        rows = await self.read_seq(channel_id, seq, seq)
        return rows[0] if rows else None


__all__ = ["ChannelLogs"]

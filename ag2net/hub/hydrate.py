"""Shell: ``Hydration`` (``hub.hydration``) — rebuilding the hub's memory from its store, and the snapshot a
clean close leaves so the next open need not fold every WAL.

``load`` reads agents, channels, WAL counts, tasks and cursors; a live channel's adapter state comes from
the snapshot when its seq still matches the store, else from folding its WAL (which also fills its cached
log). ``snapshot`` is the JSON text ``close`` stores under ``SNAPSHOT_KEY``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ag2net.channel import ChannelMetadata, ChannelState
from ag2net.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED, EV_TASK_CANCEL_REQUEST, Envelope
from ag2net.hub.records import SNAPSHOT_KEY, AgentRecord
from ag2net.identity import Passport, Resume, Rule
from ag2net.tasks import TaskMetadata
from ag2net.views.visibility_indexes import channel_indexes

if TYPE_CHECKING:
    from ag2net.hub.core import HubCore
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.services import Services
    from ag2net.views.wal import WalLog

log = logging.getLogger(__name__)

INDEX_SNAPSHOT_BYTES = 1 << 20
"""The most the hydrate snapshot spends on visibility index summaries (JSON; ~2 KB per participant)."""


class Hydration:
    """Loads the tables from the store, and writes the snapshot that speeds up the next load."""

    __slots__ = ("core", "logs", "progress", "services")

    def __init__(
        self,
        services: Services,
        core: HubCore,
        logs: ChannelLogs,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.services = services
        self.core = core  # the tables it fills
        self.logs = logs
        self.progress = progress  # (envelopes folded, envelopes to fold) while hydrating

    async def load(self) -> None:
        """Rebuild every in-memory table from the store (idempotent)."""
        await self.services.store.open()
        self.core.identities.clear()
        channels = self.core.channels
        channels.by_id.clear()
        channels.states.clear()
        self.logs.cache.clear()
        self.core.tasks.tasks.clear()
        self.core.tasks.peer_cancellers.clear()
        for rec in await self.services.store.load_agents():
            self.core.identities.add(_agent_record(rec))
        channels.wal_counts.clear()
        channels.wal_counts.update(await self.services.store.wal_counts())
        live = await self._load_channels()
        self.logs.index_entries.clear()
        live = self._restore_snapshot(await self.services.store.get_meta(SNAPSHOT_KEY), live)
        if live:
            await self._fold(live)
        for data in await self.services.store.load_tasks():
            md = TaskMetadata.from_dict(data)
            self.core.tasks.tasks[md.task_id] = md
        self.core.delivery.cursors.clear()
        self.core.delivery.cursors.update(await self.services.store.load_cursors())

    async def _load_channels(self) -> list[str]:
        """Every stored channel into the table; returns the live ones whose adapter is registered."""
        channels = self.core.channels
        live: list[str] = []
        for data in await self.services.store.load_channels():
            md = ChannelMetadata.from_dict(data)
            channels.by_id[md.channel_id] = md
            channels.last_activity[md.channel_id] = md.closed_at or md.created_at
            if not md.is_terminal() and channels.adapter_of(md) is not None:
                live.append(md.channel_id)
        return live

    async def _fold(self, live: list[str]) -> None:
        """Fold the WALs of ``live`` channels into their adapter states, filling their cached logs."""
        channels, cache = self.core.channels, self.logs.cache
        folds = {cid: channels.adapter_of(channels.by_id[cid]) for cid in live}
        logs: dict[str, WalLog] = {}
        for cid in live:
            channels.states[cid] = folds[cid].initial_state(channels.by_id[cid])
            logs[cid] = cache.new_log(cid)
        loads = json.loads
        progress = self.progress
        total = sum(channels.wal_counts.get(cid, 0) for cid in live)
        done = 0
        window = cache.window
        states, peer_cancellers = channels.states, self.core.tasks.peer_cancellers
        async for cid, _seq, text in self.services.store.iter_wal(live):
            if progress is not None:
                done += 1
                if done % 5000 == 0 or done == total:
                    progress(done, total)
            env = Envelope(**loads(text))
            wal = logs[cid]
            wal.append(env, len(text))
            if wal.resident > 2 * window and wal.can_trim:
                wal.trim(window)
            states[cid] = folds[cid].fold(env, states[cid])
            self.services.ids.observe(env.envelope_id)
            if env.event_type == EV_TASK_CANCEL_REQUEST and env.task_id:
                peer_cancellers.setdefault(env.task_id, set()).add(env.sender_id)
        for cid in live:
            wal = logs[cid]
            if len(wal):
                channels.last_activity[cid] = wal[-1].created_at
                if await self._finish_interrupted_close(cid, wal[-1]):
                    self.logs.index_entries.pop(cid, None)
                    continue
            cache.install(cid, wal)
            self.logs.restore_indexes(cid, wal)

    async def _finish_interrupted_close(self, channel_id: str, last: Envelope) -> bool:
        """A live channel whose WAL ends with its close or expiry envelope was closed by a hub that stopped
        before it wrote the channel's row: write it now. Returns whether the channel was terminal."""
        if last.event_type not in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED):
            return False
        md = self.core.channels.by_id[channel_id]
        md.state = ChannelState.EXPIRED if last.event_type == EV_CHANNEL_EXPIRED else ChannelState.CLOSED
        reason = last.event_data.get("reason") if isinstance(last.event_data, dict) else None
        md.close_reason = reason if isinstance(reason, str) else ""
        md.closed_at = last.created_at
        await self.services.store.put_channel(md.to_dict())
        self.core.channels.states.pop(channel_id, None)
        return True

    def _restore_snapshot(self, text: str | None, live: list[str]) -> list[str]:
        """Take adapter states from a clean shutdown's snapshot; returns the channels still to fold.

        A channel's snapshot is used only when its seq equals the WAL length in the store, so anything
        appended after the snapshot (or a crash after a restart) falls back to folding the WAL.
        Restored channels load their WAL lazily, on first read.
        """
        if not text:
            return live
        try:
            snapshot = json.loads(text)
            high = snapshot.get("max_envelope_id") or ""
            if high:
                self.services.ids.observe(high)
            for task_id, senders in (snapshot.get("peer_cancellers") or {}).items():
                self.core.tasks.peer_cancellers.setdefault(task_id, set()).update(senders)
            entries = snapshot.get("channels") or {}
        except (ValueError, AttributeError):
            return live
        channels = self.core.channels
        remaining = []
        for cid in live:
            entry = entries.get(cid)
            if isinstance(entry, dict) and entry.get("indexes") is not None:
                # valid for any WAL extending the one they were taken over (checked when installed)
                self.logs.index_entries[cid] = entry["indexes"]
            if not isinstance(entry, dict) or entry.get("seq") != channels.wal_counts.get(cid, 0):
                remaining.append(cid)
                continue
            try:
                adapter = channels.adapter_required(channels.by_id[cid])
                channels.states[cid] = adapter.state_from_dict(entry["state"])
            except Exception:
                log.warning("snapshot of channel %s unusable; folding its WAL", cid)
                remaining.append(cid)
                continue
            if entry.get("last_activity"):
                channels.last_activity[cid] = entry["last_activity"]
        return remaining

    def snapshot(self) -> str:
        """Adapter states of live channels, so the next open need not fold every WAL, and the visibility
        indexes of their logs (``_index_snapshot``)."""
        channels = self.core.channels
        entries: dict[str, Any] = {}
        high = ""
        for cid, md in channels.by_id.items():
            state = channels.states.get(cid)
            if md.is_terminal() or state is None:
                continue
            adapter = channels.adapter_of(md)
            if adapter is None:
                continue
            try:
                entries[cid] = {
                    "seq": channels.wal_counts.get(cid, 0),
                    "state": adapter.state_to_dict(state),
                    "last_activity": channels.last_activity.get(cid, ""),
                }
            except Exception:
                log.warning("adapter state of channel %s cannot be snapshotted", cid)
        for wal in self.logs.cache.logs():
            if wal.resident and wal[-1].envelope_id > high:
                high = wal[-1].envelope_id
        self._index_snapshot(entries)
        return json.dumps(
            {
                "max_envelope_id": max(high, self.services.ids.last_envelope_id()),
                "peer_cancellers": {t: sorted(s) for t, s in self.core.tasks.peer_cancellers.items()},
                "channels": entries,
            },
            default=str,
        )

    def _index_snapshot(self, entries: dict[str, Any]) -> None:
        """Add to the snapshot's channel entries the summaries of their logs' visibility indexes under the
        channel's renderer (``ag2net.views.visibility_indexes.channel_indexes``; a channel whose log is not loaded keeps
        what the last hub left), longest channels first while they fit in ``INDEX_SNAPSHOT_BYTES``: a
        reopened hub installs them when it loads the log, and its first windowed projection (a dry run's)
        reads the window instead of every stored envelope."""
        found: list[tuple[int, str, Any, int]] = []
        for cid, entry in entries.items():
            md = self.core.channels.by_id[cid]
            wal = self.logs.cache.peek(cid)
            indexes: Any = None
            if wal is not None and len(wal) == entry["seq"]:
                adapter = self.core.channels.adapter_of(md)
                try:
                    indexes = channel_indexes(wal, adapter.render_envelope)
                except Exception:
                    log.warning("visibility indexes of channel %s cannot be snapshotted", cid, exc_info=True)
            elif wal is None:
                indexes = self.logs.index_entries.get(cid)
            if not isinstance(indexes, dict):
                continue
            length = indexes.get("length")
            size = len(json.dumps(indexes, default=str))
            found.append((length if isinstance(length, int) else 0, cid, indexes, size))
        budget = INDEX_SNAPSHOT_BYTES
        for _length, cid, indexes, size in sorted(found, key=lambda f: -f[0]):
            if size <= budget:
                entries[cid]["indexes"] = indexes
                budget -= size


def _agent_record(rec: dict[str, Any]) -> AgentRecord:
    return AgentRecord(
        passport=Passport.from_dict(rec["passport"]),
        resume=Resume.from_dict(rec.get("resume") or {}),
        rule=Rule.from_dict(rec["rule"]) if rec.get("rule") else Rule(),
        skill_md=rec.get("skill_md"),
        owners=list(rec.get("owners") or []),
        secret_digest=rec.get("secret_digest") or None,
    )


__all__ = ["INDEX_SNAPSHOT_BYTES", "Hydration"]

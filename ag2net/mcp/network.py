"""The network ``ag2net mcp`` looks at: a database (opened read-only) or a running hub (``--connect``).

A database is never written. A SQLite file is checked with ``ag2net wal``'s reader, then copied through
SQLite's online backup from a read-only connection into a private temporary file, and a hub is opened on
the copy with its sweepers off: the debugger's functions (``ag2net.debug``) need a hub, and this one can
change nothing the user owns. When the file changes (a hub serving it keeps writing), the next call
takes a fresh copy. A running hub is reached with the workbench's tokens (``HubClient.connect``); the
functions that need a hub in this process run on a fork of the channel (``ag2net.debug.fork``).

Every mistake of the caller is a ``Refusal``: one sentence naming the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ag2net.channel import ChannelMetadata
from ag2net.envelope import Envelope

CLIP = 400
"""Characters a text keeps in an answer unless the caller asks for more (``max_chars``)."""


class Refusal(Exception):
    """A call the server will not answer; the message is one sentence naming the fix."""


def clip(text: Any, limit: int = CLIP) -> Any:
    """``text`` cut to ``limit`` characters (with ``…``); anything else as it is."""
    if isinstance(text, str) and len(text) > limit:
        return text[: max(limit - 1, 0)] + "…"
    return text


def clipped(value: Any, limit: int = CLIP, items: int = 30) -> Any:
    """A JSON-able copy of ``value`` with every text clipped and every list cut to ``items`` entries."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        return {str(k): clipped(v, limit, items) for k, v in value.items()}
    if isinstance(value, list | tuple):
        out = [clipped(v, limit, items) for v in list(value)[:items]]
        if len(value) > items:
            out.append(f"… {len(value) - items} more")
        return out
    if value is None or isinstance(value, bool | int | float):
        return value
    to_dict = getattr(value, "to_dict", None)
    return clipped(to_dict(), limit, items) if callable(to_dict) else clip(str(value), limit)


def _signature(path: Path) -> tuple[Any, ...]:
    """What changes when a hub writes the file: size and time of the database and its ``-wal`` file."""
    out: list[Any] = []
    for p in (path, Path(f"{path}-wal")):
        try:
            st = p.stat()
            out += [st.st_size, st.st_mtime_ns]
        except OSError:
            out += [None, None]
    return tuple(out)


class Network:
    """One hub to look at, through a ``HubClient``; ``hub`` is the in-process hub (``--db``) or None."""

    def __init__(self) -> None:
        self.hc: Any = None
        self.hub: Any = None
        self.db: Path | None = None
        self.url: str | None = None
        self.human_name = "me"
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._signature: tuple[Any, ...] = ()
        self._human: Any = None
        self._labels: dict[str, str] = {}
        self.lock = asyncio.Lock()

    # ------------------------------------------------------------------ opening

    @classmethod
    async def on_database(cls, db: str) -> Network:
        """The database ``db`` names (a SQLite file), opened read-only; a ``Refusal`` when it cannot be."""
        from ag2net.store import is_database_url

        if is_database_url(db):
            raise Refusal(
                f"--db {db!r}: ag2net mcp reads SQLite files only; serve that database with 'ag2net serve' "
                "and give ag2net mcp --connect ws://HOST:PORT"
            )
        net = cls()
        net.db = Path(db)
        await net._snapshot()
        return net

    @classmethod
    async def on_hub(
        cls, url: str, *, token: str | None, operator_token: str | None, human_name: str
    ) -> Network:
        """The hub served at ``url``, with the workbench's tokens; a ``Refusal`` when it cannot be reached."""
        from ag2net.client import HubClient

        net = cls()
        net.url = url
        net.human_name = human_name
        client = HubClient.connect(url, token=token, operator_token=operator_token)
        try:
            await client.open()
        except Exception as exc:  # a hub that cannot be reached, or refuses the token: said in one line
            with contextlib.suppress(Exception):
                await client.close()
            because = " ".join(str(exc).split()) or type(exc).__name__
            raise Refusal(
                f"--connect {url}: cannot reach a hub ({because}); start one with 'ag2net serve' or check the "
                "address and the tokens"
            ) from None
        net.hc = client
        await client.list_agents(limit=None)  # names for ids
        return net

    async def _snapshot(self) -> None:
        """Copy the database (read-only) into a private file and open a hub on the copy."""
        from ag2net.cli.wal import WalReader, WalReadError
        from ag2net.client import HubClient
        from ag2net.hub import Hub
        from ag2net.store import SqliteStore

        assert self.db is not None
        path = self.db
        if not path.exists():
            raise Refusal(f"--db {str(path)!r} does not exist; give the path of an ag2net database")
        if path.is_dir():
            raise Refusal(f"--db {str(path)!r} is a directory; give the path of an ag2net database file")
        signature = _signature(path)
        try:
            WalReader(path).close()  # the same checks and sentences as 'ag2net wal'
        except WalReadError as exc:
            raise Refusal(str(exc)) from None
        tmp = tempfile.TemporaryDirectory(prefix="ag2net-mcp-")
        copy = Path(tmp.name) / "snapshot.db"
        await asyncio.to_thread(_backup, path, copy)
        hub = await Hub.open(SqliteStore(copy), ttl_sweep_interval=0, expectation_sweep_interval=0)
        client = HubClient.local(hub)
        await client.list_agents(limit=None)
        await self._close_hub()
        self.hub, self.hc, self._tmp, self._signature = hub, client, tmp, signature
        self._labels = {}

    async def refresh(self) -> None:
        """With ``--db``: take a fresh copy when the file changed since the last one."""
        if self.db is not None and _signature(self.db) != self._signature:
            await self._snapshot()

    async def _close_hub(self) -> None:
        if self.hc is not None:
            with contextlib.suppress(Exception):
                await self.hc.close()
        if self.hub is not None:
            with contextlib.suppress(Exception):
                await self.hub.close()
        if self._tmp is not None:
            self._tmp.cleanup()
        self.hc = self.hub = self._tmp = None
        self._human = None

    async def close(self) -> None:
        await self._close_hub()

    @property
    def where(self) -> str:
        return f"--db {self.db}" if self.db is not None else f"--connect {self.url}"

    # ------------------------------------------------------------------ names and channels

    def name_for(self, agent_id: str) -> str:
        return self.hc.name_for(agent_id)

    def names(self, ids: list[str] | None) -> list[str] | None:
        return None if ids is None else [self.name_for(a) for a in ids]

    async def channels(self) -> list[ChannelMetadata]:
        channels = await self.hc.list_channels(include_terminal=True, limit=None)
        from ag2net.naming import channel_labels

        self._labels = channel_labels((md.manifest.type, md.channel_id) for md in channels)
        return channels

    def label_for(self, channel_id: str) -> str:
        return self._labels.get(channel_id, channel_id)

    async def channel(self, ref: str) -> ChannelMetadata:
        """The channel ``ref`` names: a label (``conversation·ae2a``), a type with one channel, an id's tail,
        an id or a unique prefix; a ``Refusal`` naming ``list_channels`` otherwise."""
        from ag2net.naming import ChannelRefError, resolve_channel_ref

        channels = await self.channels()
        try:
            cid = resolve_channel_ref(ref, ((md.manifest.type, md.channel_id) for md in channels))
        except ChannelRefError as exc:
            of_type = [md for md in channels if md.manifest.type == ref.strip()]
            if len(of_type) == 1:
                return of_type[0]
            if of_type:
                shown = ", ".join(self.label_for(md.channel_id) for md in of_type[:5])
                raise Refusal(
                    f"channel {ref!r} names {len(of_type)} channels ({shown}); give one's label"
                ) from None
            if self.url is not None and not self.hc.connection_state().get("operator"):
                raise Refusal(
                    f"{str(exc).rstrip('.')}; without an operator token this connection sees only its own "
                    "channels, so start ag2net mcp with --operator-token (or AG2NET_OPERATOR_TOKEN)"
                ) from None
            raise Refusal(f"{str(exc).rstrip('.')}; call list_channels for the labels") from None
        return next(md for md in channels if md.channel_id == cid)

    def agent(self, name: str, md: ChannelMetadata | None = None) -> str:
        """The id of the agent called ``name`` (or with that id), if need be a participant of ``md``."""
        agent_id = self.hc.find_agent_id(name) or (name if self.hc.name_for(name, default="") else None)
        if md is not None:
            people = md.participant_ids()
            if agent_id not in people:
                names = ", ".join(self.name_for(p) for p in people)
                raise Refusal(
                    f"{name!r} is not a participant of {self.label_for(md.channel_id)}; give one of {names}"
                )
        if agent_id is None:
            raise Refusal(
                f"no agent is called {name!r}; read the peers resources (ag2net://peers/…) for names"
            )
        return agent_id

    async def wal(self, channel_id: str, first: int, last: int) -> list[tuple[int, Envelope]]:
        if last < first:
            return []
        return list(await self.hc.read_wal_seq(channel_id, first, last))

    async def wal_count(self, channel_id: str) -> int:
        return int(await self.hc.wal_count(channel_id))

    # ------------------------------------------------------------------ a hub for the debugger

    @contextlib.asynccontextmanager
    async def debug_hub(self, channel_id: str) -> AsyncIterator[Any]:
        """A hub holding the channel: the in-process one (``--db``), or a fork of the channel at its
        current length (``--connect``), closed after."""
        if self.hub is not None:
            yield self.hub
            return
        from ag2net.debug import fork

        count = await self.wal_count(channel_id)
        async with await fork(self.hc, channel_id, count) as box:
            yield box.hub

    async def human(self) -> Any:
        """The workbench's human on the connected hub (registered or attached on first use)."""
        if self._human is None:
            self._human = await self.hc.register_or_attach_human(self.human_name)
        return self._human


def _backup(source: Path, target: Path) -> None:
    """SQLite's online backup of ``source``, read through a read-only connection, into ``target``."""
    src = sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    try:
        dst = sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            dst.close()
    finally:
        src.close()


def envelope_row(net: Network, seq: int, env: Envelope, limit: int = CLIP) -> dict[str, Any]:
    """One envelope, small: seq, id, sender's name, type, audience's names, its text (or data), cause."""
    data = {k: v for k, v in (env.event_data or {}).items() if k != "channel_id"}
    row: dict[str, Any] = {
        "seq": seq,
        "envelope_id": env.envelope_id,
        "sender": net.name_for(env.sender_id),
        "event_type": env.event_type,
        "audience": net.names(env.audience),
    }
    text = data.get("text")
    if isinstance(text, str):
        row["text"] = clip(text, limit)
    elif data:
        row["data"] = clip(json.dumps(data, ensure_ascii=False, sort_keys=True), limit)
    if env.causation_id:
        row["causation_id"] = env.causation_id
    row["created_at"] = env.created_at
    return row


__all__ = ["CLIP", "Network", "Refusal", "clip", "clipped", "envelope_row"]

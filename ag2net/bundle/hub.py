"""A bundle as a hub: its records in a ``MemoryStore``, a ``Hub`` opened on them, nothing written anywhere.

``hub = await open_bundle_hub("repro.ag2b")`` (or a ``Bundle``) gives an in-process hub holding the
bundle's identities, channels (their lifecycle as recorded: a closed channel stays closed), WALs, turn
records and tasks, with no sweeps, so it changes nothing by itself. It is a throwaway copy: whatever is
done on it (a post, a fork) lives in memory until it closes; the file is only ever read.

A channel whose bundle holds a slice of its WAL from seq ``first_seq`` > 1 is numbered from 1 here (the
header's ``channels[].first_seq`` says where the slice began). The replay API works on the hub as on any:
``await fork(hub, channel_id, at)`` then ``await replay(hub, sandbox)`` answers every turn from the
recorded answers, with no model and no API key.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ag2net.bundle.format import Bundle, read_bundle
from ag2net.store import MemoryStore


async def bundle_store(bundle: Bundle) -> MemoryStore:
    """The bundle's records in a new ``MemoryStore``."""
    store = MemoryStore()
    for record in bundle.agents:
        await store.put_agent(record)
    for md in bundle.channels:
        await store.put_channel(md)
    for row in bundle.envelopes:
        data = row["envelope"]
        await store.append(
            row["channel_id"], str(data.get("envelope_id")), json.dumps(data, ensure_ascii=False)
        )
    for record in bundle.turns:
        await store.put_turn(record)
    for record in bundle.tasks:
        await store.put_task(record)
    return store


async def open_bundle_hub(bundle: Bundle | str | Path, **hub_options: Any) -> Any:
    """An in-memory ``Hub`` holding the bundle (a ``Bundle`` or a path, read with ``read_bundle``)."""
    from ag2net.hub.hub import Hub

    if not isinstance(bundle, Bundle):
        bundle = read_bundle(bundle)
    store = await bundle_store(bundle)
    options: dict[str, Any] = {"ttl_sweep_interval": 0, "expectation_sweep_interval": 0, **hub_options}
    return await Hub.open(store, **options)


__all__ = ["bundle_store", "open_bundle_hub"]

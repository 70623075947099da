"""Making a bundle: what a channel needs to be seen and replayed elsewhere, read from a database.

``collect(store, channel_id)`` picks from a store (``ag2net bundle`` reads the database once, read-only,
into a ``MemoryStore`` first: ``ag2net.cli.bundle.read_source``):

* the channel's WAL (``first_seq``..``last_seq`` of it, or all), and with ``follow_causation`` the whole
  WAL of every channel causally linked to it (``ag2net.debug.causation``: replies, acks, the consulting
  channels a ``delegate`` opened, the channel that delegated), followed until no new channel turns up;
* the identities they need (participants, senders, audiences, the agents of the turns): passport, resume,
  rule and skill card;
* every turn record of those channels (for the sliced channel: the turns its slice triggered or
  answered), with the request as sent, the tools offered, the reply, the tool calls and their results,
  the usage and the model's parameters;
* the channels' task records.

Everything goes through a ``Redactor``: fields named like secrets always, the ``--redact`` rules when
given. A turn record the redaction changed gets its first model request's digest recomputed over the
redacted text (so the replay model still recognises the request), and its later rounds' digests dropped
(a replay does not check them then); no digest of a secret is kept.
"""

from __future__ import annotations

import json
from typing import Any

from ag2net.agent.models import turn_request_digest
from ag2net.bundle.format import FORMAT, VERSION, Bundle, BundleError
from ag2net.bundle.redact import Redactor
from ag2net.ids import utc_now
from ag2net.store import MemoryStore
from ag2net.store.base import Store

ALL = 10_000_000

NETWORK_TOOLS = frozenset({"delegate", "peers", "channels", "tasks", "context", "say"})
"""The tools a replay offers with the schemas of its own code (``ag2net.cli.replay.NETWORK_TOOLS``)."""


async def linked_channels(store: Store, channel_id: str, first_seq: int, last_seq: int) -> list[str]:
    """``channel_id`` and every channel causally linked to it (through its envelopes ``first_seq``..
    ``last_seq``, then transitively through the whole of each channel found), in the order found."""
    from ag2net.debug.causation import causation_tree
    from ag2net.envelope import Envelope
    from ag2net.hub.hub import Hub

    # a hub over a copy of the records, so whatever opening it does never reaches the bundle's records
    scratch = MemoryStore()
    for record in await store.load_agents():
        await scratch.put_agent(record)
    for md in await store.load_channels():
        await scratch.put_channel(md)
    async for cid, _seq, text in store.iter_wal():
        await scratch.append(cid, Envelope.from_json(text).envelope_id, text)
    for record in reversed(await store.list_turns(limit=ALL)):
        await scratch.put_turn(record)
    hub = await Hub.open(scratch, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        chosen = [channel_id]
        todo = [channel_id]
        covered: set[str] = set()
        family: dict[str, list[str]] = {}  # parent_channel_id links, both ways
        for cid, md in hub.channels.items():
            if md.parent_channel_id:
                family.setdefault(cid, []).append(md.parent_channel_id)
                family.setdefault(md.parent_channel_id, []).append(cid)
        while todo:
            cid = todo.pop(0)
            rows = (
                await hub.read_wal_seq(cid, first_seq, last_seq)
                if cid == channel_id
                else [(0, e) for e in await hub.read_wal(cid)]
            )
            for linked in family.get(cid, []):
                if linked not in chosen and linked in hub.channels:
                    chosen.append(linked)
                    todo.append(linked)
            for _seq, env in rows:
                if env.envelope_id in covered:
                    continue
                tree = await causation_tree(hub, env.envelope_id, channel_id=cid)
                covered.update(tree.nodes)
                for linked in tree.channels:
                    if linked not in chosen:
                        chosen.append(linked)
                        todo.append(linked)
        return chosen
    finally:
        await hub.close()


async def collect(
    store: Store,
    channel_id: str,
    *,
    follow_causation: bool = False,
    first_seq: int | None = None,
    last_seq: int | None = None,
    redactor: Redactor | None = None,
    labels: dict[str, str] | None = None,
) -> Bundle:
    """The bundle of ``channel_id`` from ``store`` (see the module docstring); ``BundleError`` for a seq
    range outside the channel's WAL or an unknown channel."""
    metadata = {md["channel_id"]: md for md in await store.load_channels()}
    if channel_id not in metadata:
        raise BundleError(f"channel {channel_id!r} is not in the database")
    total = await store.wal_count(channel_id)
    first = 1 if first_seq is None else first_seq
    last = total if last_seq is None else last_seq
    if (total and not 1 <= first <= last <= total) or (not total and (first_seq or last_seq)):
        raise BundleError(
            f"--from {first} --to {last} is not a range of the channel's WAL: give seqs with "
            f"1 <= --from <= --to <= {total}"
        )
    chosen = await linked_channels(store, channel_id, first, last) if follow_causation else [channel_id]
    redactor = redactor or Redactor()
    envelopes, info, people, ids = await _slices(
        store, chosen, channel_id, (first, last), metadata, labels or {}
    )
    turns = []
    for record in reversed(await store.list_turns(limit=ALL)):
        cid = record.get("channel_id")
        if cid not in chosen:
            continue
        sliced = cid == channel_id and (first, last) != (1, total)
        if (
            sliced
            and record.get("trigger_envelope_id") not in ids
            and record.get("reply_envelope_id") not in ids
        ):
            continue
        people.setdefault(str(record.get("agent_id")))
        turns.append(record)
    agents = [a for a in await store.load_agents() if a.get("agent_id") in people]
    tasks = [t for t in await store.load_tasks() if t.get("channel_id") in chosen]
    bundle = Bundle(
        header={},
        agents=[redactor.value(a) for a in agents],
        channels=[redactor.value(metadata[c]) for c in chosen],
        envelopes=[redactor.value(row) for row in envelopes],
        turns=[_rehashed(t, redactor.value(t)) for t in turns],
        tasks=[redactor.value(t) for t in tasks],
    )
    bundle.header = _header(bundle, redactor, channel_id, info, follow_causation)
    leaks = redactor.leaks([bundle.header, *bundle.records()])
    if leaks:  # never expected: the redaction missed something its own check finds
        raise BundleError(
            f"the bundle still holds text its --redact rules match ({', '.join(leaks)}); nothing was written"
        )
    return bundle


async def _slices(
    store: Store,
    chosen: list[str],
    channel_id: str,
    seqs: tuple[int, int],
    metadata: dict[str, dict[str, Any]],
    labels: dict[str, str],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, None], set[str]]:
    """The WAL rows of the chosen channels (``seqs`` of ``channel_id``'s, all of the others'), each channel's
    header entry, the agents they name and the envelope ids taken."""
    envelopes: list[dict[str, Any]] = []
    info: list[dict[str, Any]] = []
    people: dict[str, None] = {}
    ids: set[str] = set()
    for cid in chosen:
        count = await store.wal_count(cid)
        lo, hi = seqs if cid == channel_id else (1, count)
        for seq, text in await store.read_wal_seq(cid, lo, hi):
            data = json.loads(text)
            ids.add(str(data.get("envelope_id")))
            for pid in [data.get("sender_id"), *(data.get("audience") or [])]:
                if isinstance(pid, str):
                    people.setdefault(pid)
            envelopes.append({"channel_id": cid, "seq": seq, "envelope": data})
        md = metadata[cid]
        members = [p.get("agent_id") for p in md.get("participants") or [] if isinstance(p, dict)]
        for pid in [md.get("creator_id"), *members]:
            if isinstance(pid, str) and pid:
                people.setdefault(pid)
        info.append(
            {
                "channel_id": cid,
                "label": labels.get(cid, cid),
                "type": (md.get("manifest") or {}).get("type"),
                "first_seq": lo if count else 0,
                "last_seq": hi if count else 0,
                "wal_count": count,
            }
        )
    return envelopes, info, people, ids


def _header(
    bundle: Bundle, redactor: Redactor, channel_id: str, info: list[dict[str, Any]], follow_causation: bool
) -> dict[str, Any]:
    from ag2net.version import __version__

    return {
        "format": FORMAT,
        "version": VERSION,
        "channel_id": redactor.value(channel_id),
        "channels": redactor.value(info),
        "follow_causation": follow_causation,
        "written_at": utc_now(),
        "ag2net_version": __version__,
        "redaction": redactor.summary(),
        "counts": {
            "agents": len(bundle.agents),
            "channels": len(bundle.channels),
            "envelopes": len(bundle.envelopes),
            "turns": len(bundle.turns),
            "tasks": len(bundle.tasks),
        },
        "not_included": "hub settings and secrets, audit, delivery cursors, knowledge",
    }


def _tool_name(schema: Any) -> str:
    return str(((schema or {}).get("function") or {}).get("name") or "") if isinstance(schema, dict) else ""


def _rehashed(original: dict[str, Any], redacted: dict[str, Any]) -> dict[str, Any]:
    """``redacted`` with the digests of its model requests made over the redacted text.

    A replay offers the network's own tools (``delegate``, ``peers`` …) with the schemas of the code it runs,
    and an agent's own tools with the schemas the record holds: the first request's digest is computed the
    same way (the network tools' schemas are ag2net's code, not the network's data)."""
    if redacted == original:
        return redacted
    was = list(original.get("tools") or [])
    now = list(redacted.get("tools") or [])
    tools = (
        [w if _tool_name(w) in NETWORK_TOOLS else n for w, n in zip(was, now, strict=False)]
        if len(was) == len(now)
        else now
    )
    rounds = redacted.get("rounds") or []
    for n, entry in enumerate(rounds):
        if isinstance(entry, dict):
            entry["request"] = turn_request_digest(redacted, tools) if n == 0 else ""
    return redacted


__all__ = ["NETWORK_TOOLS", "collect", "linked_channels"]

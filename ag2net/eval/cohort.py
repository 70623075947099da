"""Cohorts: the recorded channels of a database an evaluation replays, chosen by a ``Selector``.

``read_cohort(db, selector)`` opens the database once, read-only (``ag2net wal``'s readers: a SQLite file with
``mode=ro``, or ``postgresql://…``), picks the channels the selector matches, takes each into a
``SnapshotSource`` (its metadata, WAL, turn records and the agents' records) and closes the reader before
anything runs: the replays never touch the source database.

A selector matches a channel when every field it sets matches: ``types`` (the channel type, any of them),
``since``/``until`` (its ``created_at``, ISO-8601 UTC, inclusive), ``participants`` (names or ids, all of
them take part), ``labels`` (``{key: value}``, all of them on the channel's labels), ``tags`` (each one is a
label key, or a word of the ``tags`` label), ``channels`` (labels or ids, as ``ag2net wal`` takes them),
``failed`` (``(scorer key, run file)``: the channels that scorer failed in that run), then the first
``limit`` channels in the database's order.

``fork_point(envelopes, at)`` is where a channel is forked: after its first substantive envelope (not an
invite, ack, reject or ``opened``), or the first of a type (``type:ag2.msg.text``) or sender
(``sender:critic``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag2net.cli.replay import SnapshotSource
from ag2net.cli.support import UsageProblem
from ag2net.envelope import (
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    Envelope,
)

LIFECYCLE = frozenset({EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_CHANNEL_INVITE_REJECT, EV_CHANNEL_OPENED})
"""What opens a channel: not substantive (a fork after it replays nothing the agents said)."""


class SelectionError(UsageProblem):
    """A selector no channel matches, or a field that cannot be read (one sentence, naming the field)."""


@dataclass(slots=True)
class Selector:
    """Which recorded channels a cohort holds (see the module docstring); empty fields match everything."""

    types: list[str] = field(default_factory=list)
    since: str | None = None
    until: str | None = None
    participants: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    channels: list[str] = field(default_factory=list)
    failed: tuple[str, str] | None = None
    limit: int | None = None

    def describe(self) -> str:
        """The selector in words, for the sentence that says it matched nothing."""
        parts = [f"type {'/'.join(self.types)}"] if self.types else []
        if self.since or self.until:
            parts.append(f"created {self.since or '…'} to {self.until or '…'}")
        parts += [f"participant {p}" for p in self.participants]
        parts += [f"label {k}={v}" for k, v in self.labels.items()]
        parts += [f"tag {t}" for t in self.tags]
        parts += [f"channel {c}" for c in self.channels]
        if self.failed:
            parts.append(f"failed {self.failed[0]} in {self.failed[1]}")
        return ", ".join(parts) or "any channel"


@dataclass(slots=True)
class Member:
    """One channel of a cohort: its snapshot and its label (``conversation·71b2``)."""

    source: SnapshotSource
    label: str

    @property
    def channel_id(self) -> str:
        return str(self.source.metadata.channel_id)

    @property
    def channel_type(self) -> str:
        return str(self.source.metadata.manifest.type)


def failed_in_run(path: str, key: str) -> set[str]:
    """The channel ids whose task in the run file ``path`` has a ``key`` feedback that failed."""
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SelectionError(
            f"--failed {key}@{path}: cannot read the run file ({exc}); give a run JSON"
        ) from None
    failed: set[str] = set()
    keys: set[str] = set()
    for task in doc.get("tasks") or []:
        for fb in task.get("feedback") or []:
            keys.add(str(fb.get("key")))
            if fb.get("key") == key and fb.get("score") is False:
                failed.add(str((task.get("inputs") or {}).get("channel_id") or task.get("task_id")))
    if key not in keys:
        raise SelectionError(
            f"--failed {key}@{path}: the run has no scorer {key!r} (its scorers: {', '.join(sorted(keys)) or 'none'})"
        )
    return failed


def _tag_words(labels: dict[str, Any]) -> set[str]:
    raw = labels.get("tags")
    words = set(raw) if isinstance(raw, list) else set(str(raw or "").replace(",", " ").split())
    return {str(w) for w in words} | set(labels)


def _matches(md: Any, sel: Selector, ids: dict[str, str], failed: set[str] | None, wanted: set[str]) -> bool:
    labels = dict(md.labels or {})
    people = set(md.participant_ids())
    created = str(md.created_at or "")
    return (
        (not sel.types or md.manifest.type in sel.types)
        and (sel.since is None or created >= sel.since)
        and (sel.until is None or created[: len(sel.until)] <= sel.until)
        and all(ids.get(p, p) in people for p in sel.participants)
        and all(str(labels.get(k)) == v for k, v in sel.labels.items())
        and all(t in _tag_words(labels) for t in sel.tags)
        and (not sel.channels or md.channel_id in wanted)
        and (failed is None or md.channel_id in failed)
    )


def read_cohort(db: str, selector: Selector) -> list[Member]:
    """The channels of ``db`` the selector matches, each read into a snapshot (see the module docstring)."""
    from ag2net.cli.wal import PostgresWalReader, WalReadError, open_reader

    failed = failed_in_run(selector.failed[1], selector.failed[0]) if selector.failed else None
    try:
        with open_reader(db) as reader:
            return _read(reader, selector, failed, isinstance(reader, PostgresWalReader))
    except WalReadError as exc:
        raise SelectionError(str(exc)) from None


def _read(reader: Any, sel: Selector, failed: set[str] | None, postgres: bool) -> list[Member]:
    ids = {name: agent_id for agent_id, name in reader.names.items()}
    wanted = {reader.resolve(c).channel_id for c in sel.channels}
    chosen = [md for md in reader.channels if _matches(md, sel, ids, failed, wanted)]
    if sel.limit is not None:
        chosen = chosen[: sel.limit]
    if not chosen:
        raise SelectionError(
            f"no channel of the database matches the selector ({sel.describe()}); "
            "list its channels with `ag2net wal --db DB` and loosen the selector"
        )
    if postgres:
        agents = reader._run(reader._store.load_agents())
    else:
        agents = [json.loads(r[0]) for r in reader._conn.execute("SELECT record FROM agents ORDER BY ord")]
    by_id = {a["agent_id"]: a for a in agents}
    members = []
    for md in chosen:
        cid = md.channel_id
        envelopes = [Envelope(**data) for _, data in reader.envelopes(cid, 1, reader.wal_count(cid))]
        if postgres:
            turns = reader._run(reader._store.list_turns(channel_id=cid, limit=1_000_000))
        else:
            rows = reader._conn.execute("SELECT record FROM turns WHERE channel_id = ? ORDER BY ord", (cid,))
            turns = [json.loads(r[0]) for r in rows]
        members.append(Member(SnapshotSource(md, envelopes, by_id, list(turns)), reader.label_for(cid)))
    return members


async def _op(source: Any, name: str, **params: Any) -> Any:
    if hasattr(source, "call"):  # a HubClient (the workbench's operator client), over whichever link
        return await source.call(name, **params)
    return await source.handle_op(None, name, params)


async def snapshot(source: Any, channel_id: str, label: str = "") -> Member:
    """One channel of a live hub (a ``Hub`` or an operator ``HubClient``) read into a snapshot, through the
    ordinary read ops, as ``read_cohort`` reads one from a database: the workbench's cohorts."""
    from ag2net.naming import channel_label

    md = await _op(source, "get_channel", channel_id=channel_id)
    envelopes = list(await _op(source, "read_wal", channel_id=channel_id, since=0, until=None))
    turns = list(await _op(source, "list_turns", channel_id=channel_id, limit=1_000_000))
    people = list(md.participant_ids())
    people += [e.sender_id for e in envelopes if e.sender_id not in people]
    agents: dict[str, dict[str, Any]] = {}
    for pid in people:
        try:
            passport = await _op(source, "get_agent", name_or_id=pid)
        except Exception:
            continue  # an agent that has left: its envelopes stay, its identity is gone
        resume = await _op(source, "get_resume", agent_id=pid)
        rule = await _op(source, "get_rule", agent_id=pid)
        agents[pid] = {
            "agent_id": pid,
            "name": passport.name,
            "passport": passport.to_dict(),
            "resume": resume.to_dict(),
            "rule": rule.to_dict(),
            "skill_md": await _op(source, "get_skill", agent_id=pid),
        }
    turns.sort(key=lambda t: (t.get("started_at") or "", t.get("turn_id") or ""))
    src = SnapshotSource(md, envelopes, agents, turns)
    return Member(src, label or channel_label(md.manifest.type, channel_id))


def fork_point(envelopes: list[Envelope], at: str | None = None, names: dict[str, str] | None = None) -> int:
    """The seq to fork at (the prefix holds envelopes 1..seq): after the first substantive envelope, or
    after the first of ``at`` = ``type:EVENT_TYPE`` / ``sender:NAME``; 0 when there is none."""
    kind, _, want = (at or "").partition(":")
    for i, env in enumerate(envelopes):
        if kind == "type" and env.event_type == want:
            return i + 1
        if kind == "sender" and want in (env.sender_id, (names or {}).get(env.sender_id)):
            return i + 1
        if not kind and env.event_type not in LIFECYCLE:
            return i + 1
    return 0


def parse_fork_at(text: str | None) -> str | None:
    """``type:EVENT_TYPE`` or ``sender:NAME`` (or None: the first substantive envelope)."""
    if text is None:
        return None
    kind, colon, want = text.partition(":")
    if kind not in ("type", "sender") or not colon or not want.strip():
        raise UsageProblem(f"--fork-at {text!r} must look like type:EVENT_TYPE or sender:NAME")
    return f"{kind}:{want.strip()}"


__all__ = [
    "LIFECYCLE",
    "Member",
    "SelectionError",
    "Selector",
    "failed_in_run",
    "fork_point",
    "parse_fork_at",
    "read_cohort",
    "snapshot",
]

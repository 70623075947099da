"""The ``ag2net bundle`` command: one channel of a database (and, with ``--follow-causation``, the channels
causally linked to it) as a repro bundle file, redacted on request (``ag2net.bundle``).

``ag2net/cli/commands.py`` mounts ``app`` (a Typer app with exactly this one command) by name, so
``import ag2net.cli`` loads nothing of it. The database is read once, read-only. Every mistake is one
sentence on stderr and exit code 2.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.bundle import Bundle, BundleError, Redactor, collect
from ag2net.cli.support import ReadOnlyDb, UsageProblem, fail, output_file
from ag2net.store import MemoryStore

app = typer.Typer(add_completion=False)

ALL = 10_000_000


@dataclass(slots=True)
class Source:
    """A database's records, read once: ``channel_id`` is the channel the bundle is for."""

    channel_id: str
    labels: dict[str, str]
    agents: list[dict[str, Any]]
    channels: list[dict[str, Any]]
    wal: dict[str, list[dict[str, Any]]]
    turns: list[dict[str, Any]]
    tasks: list[dict[str, Any]]

    async def store(self) -> MemoryStore:
        """The records in a ``MemoryStore`` (``collect`` reads them there)."""
        store = MemoryStore()
        for record in self.agents:
            await store.put_agent(record)
        for md in self.channels:
            await store.put_channel(md)
        for channel_id, rows in self.wal.items():
            for data in rows:
                await store.append(
                    channel_id, str(data.get("envelope_id")), json.dumps(data, ensure_ascii=False)
                )
        for record in self.turns:
            await store.put_turn(record)
        for record in self.tasks:
            await store.put_task(record)
        return store


def read_source(db: str, channel: str, *, everything: bool = True) -> Source:
    """The records of the database at ``db`` (a path or a URL), read once read-only, for the channel
    ``channel`` names (a label, a tail, an id or a prefix); ``BundleError`` (one sentence) otherwise.
    Without ``everything`` only that channel's WAL and turn records are read (no causation to follow)."""
    from ag2net.cli.wal import PostgresWalReader, WalReadError, open_reader

    try:
        with open_reader(db) as reader:
            cid = reader.resolve(channel).channel_id
            only = None if everything else cid
            if isinstance(reader, PostgresWalReader):
                agents = reader._run(reader._store.load_agents())
                turns = list(reversed(reader._run(reader._store.list_turns(channel_id=only, limit=ALL))))
                tasks = reader._run(reader._store.load_tasks())
            else:
                conn = reader._conn
                agents = [json.loads(r[0]) for r in conn.execute("SELECT record FROM agents ORDER BY ord")]
                query = "SELECT record FROM turns WHERE ? IS NULL OR channel_id = ? ORDER BY ord"
                turns = [json.loads(r[0]) for r in conn.execute(query, (only, only))]
                tasks = [json.loads(r[0]) for r in conn.execute("SELECT record FROM tasks ORDER BY ord")]
            wal = {
                md.channel_id: [
                    data for _, data in reader.envelopes(md.channel_id, 1, reader.wal_count(md.channel_id))
                ]
                for md in reader.channels
                if everything or md.channel_id == cid
            }
            channels = [md.to_dict() for md in reader.channels]
            labels = dict(reader.labels)
    except WalReadError as exc:
        raise BundleError(str(exc)) from None
    return Source(cid, labels, agents, channels, wal, turns, tasks)


async def make_bundle(
    db: str,
    channel: str,
    *,
    follow_causation: bool = False,
    first_seq: int | None = None,
    last_seq: int | None = None,
    redact: str | list[str] | None = None,
) -> Bundle:
    """The bundle of ``channel`` (a label, a tail, an id or a prefix) of the database ``db`` (a SQLite path or a
    ``postgresql://`` URL, opened read-only); write it with ``ag2net.bundle.write_bundle``."""
    redactor = Redactor.parse(redact)
    source = await asyncio.to_thread(read_source, db, channel, everything=follow_causation)
    return await collect(
        await source.store(),
        source.channel_id,
        follow_causation=follow_causation,
        first_seq=first_seq,
        last_seq=last_seq,
        redactor=redactor,
        labels=source.labels,
    )


def _check_output(output: str) -> Path:
    return output_file(output, "give the path of the bundle file to write, e.g. repro.ag2b")


def _check_range(first: int | None, last: int | None) -> None:
    if first is not None and first < 1:
        raise UsageProblem(f"--from must be a seq, 1 or more; got {first}")
    if last is not None and last < 1:
        raise UsageProblem(f"--to must be a seq, 1 or more; got {last}")
    if first is not None and last is not None and first > last:
        raise UsageProblem(
            f"--from {first} is after --to {last}; give --from SEQ --to SEQ with --from <= --to"
        )


@app.command("bundle")
def bundle_cmd(
    channel: Annotated[
        str,
        typer.Argument(
            help="Channel: its label (discussion·7d80, or discussion.7d80), the id's last digits, the id or a "
            "unique prefix.",
            show_default=False,
        ),
    ],
    db: ReadOnlyDb,
    output: Annotated[
        str,
        typer.Option(
            "--output", "-o", help="The bundle file to write (e.g. repro.ag2b).", show_default=False
        ),
    ],
    follow_causation: Annotated[
        bool,
        typer.Option(
            "--follow-causation",
            help="Also take the channels causally linked to it (replies, delegated consultations, the channel "
            "that delegated), followed until no new one turns up.",
        ),
    ] = False,
    first_seq: Annotated[
        int | None, typer.Option("--from", help="First seq of the channel's WAL to take (default 1).")
    ] = None,
    last_seq: Annotated[
        int | None, typer.Option("--to", help="Last seq of the channel's WAL to take (default: the newest).")
    ] = None,
    redact: Annotated[
        str | None,
        typer.Option(
            "--redact",
            help="Replace, everywhere in the bundle: keys (API keys, bearer tokens, this environment's "
            "secrets), emails, or a regular expression; comma-separated, e.g. --redact keys,emails,'ACME-\\d+'.",
        ),
    ] = None,
) -> None:
    """Write a channel of a database as a repro bundle to share (redacted on request); never writes the database.

    The bundle holds its WAL, the identities, skills and rules it needs, every turn record and the recorded
    tool results; open it with: ag2net tui --open FILE."""
    from ag2net.bundle import RedactionError, write_bundle

    try:
        path = _check_output(output)
        _check_range(first_seq, last_seq)
        Redactor.parse(redact)  # a bad pattern is refused before the database is read
        bundle = asyncio.run(
            make_bundle(
                db,
                channel,
                follow_causation=follow_causation,
                first_seq=first_seq,
                last_seq=last_seq,
                redact=redact,
            )
        )
        write_bundle(bundle, path)
    except (UsageProblem, BundleError, RedactionError) as exc:
        fail(str(exc))
    counts = bundle.header["counts"]
    shown = ", ".join(c["label"] for c in bundle.header["channels"])
    said = bundle.header["redaction"]
    redacted = f"; redacted {said['replaced']} match(es)" if said["kinds"] else ""
    typer.echo(
        f"wrote {path}: {counts['channels']} channel(s) ({shown}), {counts['envelopes']} envelopes, "
        f"{counts['turns']} turn records, {counts['agents']} identities{redacted}",
        err=True,
    )


__all__ = ["Source", "app", "bundle_cmd", "make_bundle", "read_source"]


if __name__ == "__main__":
    app()

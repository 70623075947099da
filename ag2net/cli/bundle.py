"""The ``ag2net bundle`` command: one channel of a database (and, with ``--follow-causation``, the channels
causally linked to it) as a repro bundle file, redacted on request (``ag2net.bundle``).

``ag2net/cli/commands.py`` mounts ``app`` (a Typer app with exactly this one command) by name, so
``import ag2net.cli`` loads nothing of it. The database is read once, read-only. Every mistake is one
sentence on stderr and exit code 2.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from ag2net.cli.support import ReadOnlyDb, UsageProblem, fail

app = typer.Typer(add_completion=False)


def _check_output(output: str) -> Path:
    path = Path(output).expanduser()
    if path.is_dir():
        raise UsageProblem(f"-o {output!r} is a directory; give the path of the bundle file to write, e.g. repro.ag2b")
    if not path.parent.is_dir():
        raise UsageProblem(f"-o {output!r}: the directory {str(path.parent)!r} does not exist")
    return path


def _check_range(first: int | None, last: int | None) -> None:
    if first is not None and first < 1:
        raise UsageProblem(f"--from must be a seq, 1 or more; got {first}")
    if last is not None and last < 1:
        raise UsageProblem(f"--to must be a seq, 1 or more; got {last}")
    if first is not None and last is not None and first > last:
        raise UsageProblem(f"--from {first} is after --to {last}; give --from SEQ --to SEQ with --from <= --to")


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
        str, typer.Option("--output", "-o", help="The bundle file to write (e.g. repro.ag2b).", show_default=False)
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
    """Write one channel of a database as a repro bundle: its WAL, the identities, skills and rules it needs,
    every turn record and the recorded tool results; open it with ag2net tui --open FILE. Never writes the
    database."""
    from ag2net.bundle import BundleError, RedactionError, Redactor, collect, read_source, write_bundle

    try:
        path = _check_output(output)
        _check_range(first_seq, last_seq)
        redactor = Redactor.parse(redact)
        source = read_source(db, channel)

        async def build():  # noqa: ANN202
            return await collect(
                await source.store(),
                source.channel_id,
                follow_causation=follow_causation,
                first_seq=first_seq,
                last_seq=last_seq,
                redactor=redactor,
                labels=source.labels,
            )

        bundle = asyncio.run(build())
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


__all__ = ["app", "bundle_cmd"]


if __name__ == "__main__":
    app()

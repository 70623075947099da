"""The ``ag2net export`` command: a database's channels as traces, as OTLP JSON or AG2 eval's trace directory.

``ag2net/cli/commands.py`` mounts ``app`` (a Typer app with exactly this one command) by name, so
``import ag2net.cli`` loads nothing of it. The database is read once, read-only (``ag2net wal``'s readers):
the channels, their WALs, the turn records, the agents' names and the tasks; the traces are built by
``ag2net.traces.otlp`` with no tracer and no OpenTelemetry. Message content goes in only with
``--capture-content`` (or ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``). Every mistake is one
sentence on stderr and exit code 2.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from ag2net.cli.support import ReadOnlyDb, UsageProblem, fail, output_file

app = typer.Typer(add_completion=False)

FORMATS = ("otlp-json", "ag2-eval")


def _check_output(fmt: str, output: str | None) -> Path | None:
    if fmt not in FORMATS:
        raise UsageProblem(f"--format {fmt!r} is not one of {', '.join(FORMATS)}; e.g. --format otlp-json")
    path = None if output in (None, "-") else Path(str(output)).expanduser()
    if fmt == "ag2-eval":
        if path is None:
            raise UsageProblem("--format ag2-eval writes a directory of trace files; name it with -o DIR")
        if path.exists() and not path.is_dir():
            raise UsageProblem(
                f"-o {output!r} is a file; --format ag2-eval writes a directory, give its path"
            )
    elif path is not None:
        path = output_file(str(output), "--format otlp-json writes one file, give its path")
    return path


def read_database(db: str, channels: list[str]) -> list[dict[str, Any]]:
    """What the export needs of each channel ``channels`` name (all when empty), read once, read-only:
    ``{"metadata", "label", "envelopes", "turns", "tasks", "names"}`` per channel."""
    from ag2net.cli.wal import PostgresWalReader, WalReadError, open_reader

    try:
        with open_reader(db) as reader:
            chosen = [reader.resolve(ref) for ref in channels] if channels else list(reader.channels)
            if isinstance(reader, PostgresWalReader):
                tasks = reader._run(reader._store.load_tasks())
            else:
                tasks = [
                    json.loads(r[0]) for r in reader._conn.execute("SELECT record FROM tasks ORDER BY ord")
                ]
            out = []
            seen: set[str] = set()
            for md in chosen:
                cid = md.channel_id
                if cid in seen:
                    continue
                seen.add(cid)
                total = reader.wal_count(cid)
                envelopes = [data for _, data in reader.envelopes(cid, 1, total)]
                if isinstance(reader, PostgresWalReader):
                    newest_first = reader._run(reader._store.list_turns(channel_id=cid, limit=10_000_000))
                    turns = list(reversed(newest_first))
                else:
                    rows = reader._conn.execute(
                        "SELECT record FROM turns WHERE channel_id = ? ORDER BY ord", (cid,)
                    )
                    turns = [json.loads(r[0]) for r in rows]
                out.append(
                    {
                        "metadata": md.to_dict(),
                        "label": reader.label_for(cid),
                        "envelopes": envelopes,
                        "turns": turns,
                        "tasks": [t for t in tasks if t.get("channel_id") == cid],
                        "names": dict(reader.names),
                    }
                )
            return out
    except WalReadError as exc:
        raise UsageProblem(str(exc)) from None


def build_traces(channels: list[dict[str, Any]], options: Any) -> list[tuple[str, list[Any], dict[str, Any]]]:
    """``[(trace id, span specs, metadata), …]``, one trace per channel."""
    from ag2net.traces.otlp import channel_spans, trace_id_of

    traces = []
    for ch in channels:
        md = ch["metadata"]
        names = ch["names"]
        specs = channel_spans(
            md,
            ch["envelopes"],
            ch["turns"],
            name_for=lambda agent_id, names=names: names.get(agent_id) or agent_id,
            options=options,
            tasks=ch["tasks"],
            label=ch["label"],
        )
        meta = {
            "channel_id": md["channel_id"],
            "label": ch["label"],
            "type": (md.get("manifest") or {}).get("type"),
            "turns": len(ch["turns"]),
            "envelopes": len(ch["envelopes"]),
            "content_captured": bool(options.capture_content),
        }
        traces.append((trace_id_of(md["channel_id"]), specs, meta))
    return traces


def write_export(traces: list[tuple[str, list[Any], dict[str, Any]]], fmt: str, path: Path | None) -> str:
    """Write the traces; returns the sentence saying what was written where."""
    from ag2net.traces.otlp import eval_document, otlp_document

    spans = sum(len(specs) for _, specs, _ in traces)
    if fmt == "ag2-eval":
        assert path is not None
        path.mkdir(parents=True, exist_ok=True)
        for trace_id, specs, meta in traces:
            doc = eval_document(trace_id, specs, meta)
            (path / f"{trace_id}.json").write_text(
                json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8"
            )
        return f"wrote {len(traces)} trace file(s), {spans} spans, to {path}"
    text = json.dumps(otlp_document([(tid, specs) for tid, specs, _ in traces]), ensure_ascii=False)
    if path is None:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return ""
    path.write_text(text + "\n", encoding="utf-8")
    return f"wrote {len(traces)} trace(s), {spans} spans, to {path}"


@app.command("export")
def export_cmd(
    db: ReadOnlyDb,
    channels: Annotated[
        list[str] | None,
        typer.Argument(
            help="Channels to export (a label such as discussion·7d80, the id's last digits, the id or a unique "
            "prefix); omit for every channel.",
            show_default=False,
        ),
    ] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="otlp-json (one OTLP JSON file) or ag2-eval (AG2 eval's trace directory)."
        ),
    ] = "otlp-json",
    output: Annotated[
        str | None,
        typer.Option(
            "--output",
            "-o",
            help="Where to write: a file for otlp-json (default: stdout), a directory for ag2-eval.",
        ),
    ] = None,
    capture_content: Annotated[
        bool,
        typer.Option(
            "--capture-content",
            help="Include message content: prompts, messages, tool definitions, tool arguments and results "
            "(default: OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT, else off).",
        ),
    ] = False,
) -> None:
    """Write a database's channels as traces (one per channel) in OpenTelemetry's GenAI conventions: OTLP JSON
    for any tracing backend, or the trace directory AG2's ag2.eval reads; never writes the database."""
    from ag2net.traces.genai import TraceOptions

    try:
        path = _check_output(fmt, output)
        read = read_database(db, list(channels or []))
        options = TraceOptions.from_env(True if capture_content else None, os.environ)
        said = write_export(build_traces(read, options), fmt, path)
    except UsageProblem as exc:
        fail(str(exc))
    except BrokenPipeError:  # the reader of our pipe stopped (| head): nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None
    except OSError as exc:
        fail(f"-o {output!r} cannot be written ({exc.strerror or exc})")
    if said:
        typer.echo(said, err=True)


__all__ = ["FORMATS", "app", "build_traces", "export_cmd", "read_database", "write_export"]


if __name__ == "__main__":
    app()

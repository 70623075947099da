"""The repro bundle file (``.ag2b``): JSON lines, UTF-8, uncompressed, versioned.

Line 1 is the header ``{"format": "ag2net-bundle", "version": 1, …}``: what the bundle holds (its channels,
each with the seq range of its WAL slice and its label), when and by which ag2net it was written, and what
its redaction replaced (counts and kinds only, never a pattern). Every further line is one record,
``{"kind": K, …}``, in this order:

* ``agent``: an identity as the store keeps it (``record``: passport, resume, rule, skill card);
* ``channel``: a channel's metadata (``metadata``);
* ``envelope``: one WAL row (``channel_id``, ``seq`` in the original WAL, ``envelope`` as stored);
* ``turn``: a turn record (``record``: the request as sent: system prompt, history, inputs, tools
  offered, view; the reply, the tool calls with their recorded results, usage, the model's parameters);
* ``task``: a task record of one of the channels (``record``);
* ``end``: the last line, ``{"kind": "end", "records": N}`` (a file cut short is refused).

Uncompressed on purpose: what is in the file is what ``grep`` sees, so a redacted bundle can be checked
for a secret with any tool, and no encoding can hide one. A reader refuses a bundle of a newer
``version`` in one sentence.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMAT = "ag2net-bundle"
VERSION = 1
SUFFIX = ".ag2b"
KINDS = ("agent", "channel", "envelope", "turn", "task")


class BundleError(Exception):
    """A bundle cannot be written or read; the message is one sentence naming the file and the fix."""


@dataclass(slots=True)
class Bundle:
    """A bundle's contents, as plain JSON-able records (see the module docstring)."""

    header: dict[str, Any]
    agents: list[dict[str, Any]] = field(default_factory=list)
    channels: list[dict[str, Any]] = field(default_factory=list)
    envelopes: list[dict[str, Any]] = field(default_factory=list)
    """``{"channel_id", "seq", "envelope"}`` per WAL row, each channel's rows in seq order."""
    turns: list[dict[str, Any]] = field(default_factory=list)
    tasks: list[dict[str, Any]] = field(default_factory=list)

    @property
    def channel_id(self) -> str:
        """The channel the bundle was made for (the others are causally linked to it)."""
        return str(self.header.get("channel_id") or "")

    def channel_info(self, channel_id: str) -> dict[str, Any]:
        return next((c for c in self.header.get("channels") or [] if c.get("channel_id") == channel_id), {})

    def records(self) -> Iterator[dict[str, Any]]:
        for record in self.agents:
            yield {"kind": "agent", "record": record}
        for metadata in self.channels:
            yield {"kind": "channel", "metadata": metadata}
        for row in self.envelopes:
            yield {"kind": "envelope", **row}
        for record in self.turns:
            yield {"kind": "turn", "record": record}
        for record in self.tasks:
            yield {"kind": "task", "record": record}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def encode_bundle(bundle: Bundle) -> bytes:
    """The bundle's bytes: the header line, one line per record, the end line."""
    header = {
        "format": FORMAT,
        "version": VERSION,
        **{k: v for k, v in bundle.header.items() if k not in ("format", "version")},
    }
    lines = [dumps(header)]
    count = 0
    for record in bundle.records():
        lines.append(dumps(record))
        count += 1
    lines.append(dumps({"kind": "end", "records": count}))
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_bundle(bundle: Bundle, path: str | Path) -> Path:
    """Write ``bundle`` to ``path`` (whole or not at all: a temporary file renamed into place)."""
    target = Path(path).expanduser()
    data = encode_bundle(bundle)
    scratch = target.with_name(f".{target.name}.partial")
    try:
        scratch.write_bytes(data)
        scratch.replace(target)
    except OSError as exc:
        scratch.unlink(missing_ok=True)
        raise BundleError(f"-o {str(path)!r} cannot be written ({exc.strerror or exc})") from None
    return target


def looks_like_bundle(path: str | Path) -> bool:
    """Whether the file at ``path`` starts as a bundle does (its suffix, or its first bytes)."""
    p = Path(path)
    if p.suffix == SUFFIX:
        return True
    try:
        with p.open("rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.lstrip().startswith(b'{"format":"' + FORMAT.encode() + b'"')


def read_bundle(path: str | Path) -> Bundle:
    """The bundle at ``path``; ``BundleError`` (one sentence) for a file that is not one, a newer version,
    a record of an unknown kind or a file cut short. Never writes the file."""
    where = str(path)
    try:
        raw = Path(path).expanduser().read_bytes()
    except FileNotFoundError:
        raise BundleError(
            f"{where!r} does not exist; give the path of a bundle ag2net bundle wrote"
        ) from None
    except IsADirectoryError:
        raise BundleError(f"{where!r} is a directory; give the path of a bundle file (.ag2b)") from None
    except OSError as exc:
        raise BundleError(f"{where!r} cannot be read ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BundleError(
            f"{where!r} is not a bundle (not UTF-8 text); give a file ag2net bundle wrote"
        ) from None
    lines = text.splitlines()
    header = _json_line(where, lines[0] if lines else "", 1)
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise BundleError(
            f'{where!r} is not an ag2net bundle (its first line has no "format": "{FORMAT}"); give a file '
            "ag2net bundle wrote"
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise BundleError(
            f"{where!r} has no valid bundle version ({version!r}); it is damaged, write it again"
        )
    if version > VERSION:
        raise BundleError(
            f"{where!r} is a bundle of format version {version}, newer than the version {VERSION} this ag2net "
            "reads; upgrade ag2net to open it"
        )
    bundle = Bundle(header=header)
    ended = False
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        if ended:
            raise BundleError(f"{where!r} has lines after its end record (line {number}); it is damaged")
        record = _json_line(where, line, number)
        if not isinstance(record, dict):
            raise BundleError(f"{where!r} line {number} is not a record (a JSON object); it is damaged")
        kind = record.get("kind")
        try:
            ended = _take(bundle, kind, record) or ended
        except (KeyError, TypeError, ValueError, AttributeError):
            raise BundleError(
                f"{where!r} line {number} is a {kind} record without its fields; it is damaged"
            ) from None
        if kind not in (*KINDS, "end"):
            raise BundleError(
                f"{where!r} line {number} is a record of kind {kind!r}, which bundle version {version} does not "
                f"have (kinds: {', '.join(KINDS)}); it is damaged"
            )
    if not ended:
        raise BundleError(f"{where!r} is cut short (no end record); copy the whole file again")
    return bundle


def _take(bundle: Bundle, kind: Any, record: dict[str, Any]) -> bool:
    """Add ``record`` to ``bundle``; True for the end record."""
    if kind == "end":
        return True
    if kind == "agent":
        bundle.agents.append(dict(record["record"]))
    elif kind == "channel":
        bundle.channels.append(dict(record["metadata"]))
    elif kind == "envelope":
        bundle.envelopes.append(
            {
                "channel_id": record["channel_id"],
                "seq": int(record["seq"]),
                "envelope": dict(record["envelope"]),
            }
        )
    elif kind == "turn":
        bundle.turns.append(dict(record["record"]))
    elif kind == "task":
        bundle.tasks.append(dict(record["record"]))
    return False


def _json_line(where: str, line: str, number: int) -> Any:
    try:
        return json.loads(line)
    except ValueError:
        raise BundleError(
            f"{where!r} is not an ag2net bundle (line {number} is not JSON); give a file ag2net bundle wrote"
        ) from None


__all__ = [
    "FORMAT",
    "SUFFIX",
    "VERSION",
    "Bundle",
    "BundleError",
    "encode_bundle",
    "looks_like_bundle",
    "read_bundle",
    "write_bundle",
]

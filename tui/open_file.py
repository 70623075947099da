"""``ag2net tui --open FILE`` (and ``ag2net web --open``): a repro bundle or traces, shown offline, read-only.

The file is read once (``ag2net.bundle.read_bundle`` for a bundle, ``ag2net.bundle.traces_in`` for an OTLP
JSON file or directory: ag2net's own ``ag2net export``, AG2's ``telemetry/spans.jsonl``, an AG2 eval trace
directory) into an in-memory hub (``open_bundle_hub``) that the ordinary screens show: channels, tail,
agent view per turn, turn diff, causation. Nothing is ever written to the file or next to it.

Read-only means a throwaway copy: the workbench seats you on the in-memory hub, and what you post, fork or
replay there lives only until you quit. The header and the status bar say so (``copy_label``), and what the
file lacks (a trace's envelopes have no content; turns exported without content) is said in a
notification when it opens.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag2net.cli.support import UsageProblem


@dataclass(slots=True)
class Opened:
    """The in-memory hub holding the file, and what to tell the person about it."""

    hub: Any
    path: Path
    kind: str  # "bundle" or "traces"
    notes: list[str] = field(default_factory=list)
    channels: int = 0

    @property
    def copy_label(self) -> str:
        """The status bar's connection text: what is open and that nothing is saved."""
        return f"{self.kind} {self.path.name} · read-only: an in-memory copy, nothing is saved"

    @property
    def title(self) -> str:
        what = "repro bundle" if self.kind == "bundle" else "traces"
        return f"{what} {self.path.name} (read-only copy: posts are not saved)"

    def opening_sentence(self) -> str:
        text = (
            f"Opened {self.path.name} read-only: {self.channels} channel(s) in an in-memory copy; what you post "
            "or replay here is not saved to the file."
        )
        return " ".join([text, *self.notes])


def check_open(path: str, **conflicting: Any) -> Path:
    """``--open``'s path, checked; ``UsageProblem`` (one sentence) for a missing path or an option that
    does not go with it (``conflicting``: option name → its value)."""
    given = [name for name, value in conflicting.items() if value]
    if given:
        raise UsageProblem(
            f"--open shows a file on its own in-memory hub; {', '.join(given)} do(es) not apply: leave "
            f"{'it' if len(given) == 1 else 'them'} out"
        )
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageProblem(
            f"--open {path!r} does not exist; give a bundle (.ag2b), an OTLP JSON file or a directory of them"
        )
    return p


async def open_file(path: Path) -> Opened:
    """The file at ``path`` on an in-memory hub; ``UsageProblem`` (one sentence) when it cannot be read."""
    from ag2net.bundle import BundleError, looks_like_bundle, open_bundle_hub, read_bundle
    from ag2net.bundle.traces_in import bundle_from_traces

    try:
        if path.is_file() and looks_like_bundle(path):
            bundle, kind = read_bundle(path), "bundle"
        else:
            bundle, kind = bundle_from_traces(path), "traces"
    except BundleError as exc:
        text = str(exc)
        raise UsageProblem(text if text.startswith("--open") else f"--open: {text}") from None
    notes = list(bundle.header.get("notes") or [])
    for info in bundle.header.get("channels") or []:
        if info.get("first_seq", 1) > 1:
            notes.append(
                f"{info.get('label')} holds seqs {info['first_seq']}–{info['last_seq']} of {info['wal_count']}: "
                f"its seq 1 here is seq {info['first_seq']} there."
            )
    hub = await open_bundle_hub(bundle)
    return Opened(hub=hub, path=path, kind=kind, notes=notes, channels=len(bundle.channels))


__all__ = ["Opened", "check_open", "open_file"]

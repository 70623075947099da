"""What the WAL tail's lines say, without a widget: cells fitted to a width, the columns' widths, and the
text of the header, a row and the "older / newer envelopes" marker rows (``EnvelopeTail`` renders them).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text

from ag2net.envelope import Envelope
from tui.formatting import audience_label, event_family, preview, short_time, short_type
from tui.models import TailRow
from tui.tail_model import TailModel

HELD_MARK = "⏸ held"
"""What a held post's row says where an admitted envelope's time goes."""

Item = tuple[Envelope, int | None, str]
"""(envelope, seq, channel label): what the tail is given (a seq may be unknown)."""


def fit(text: str, width: int) -> str:
    """``text`` cut or padded to exactly ``width`` cells, with an ellipsis when cut."""
    return _fit(text, width, from_left=False)


def fit_left(text: str, width: int) -> str:
    """Like ``fit`` but cuts from the left, so the end (an event type's last dotted part) stays visible."""
    return _fit(text, width, from_left=True)


def _fit(text: str, width: int, *, from_left: bool) -> str:
    if width <= 0:
        return ""
    length = cell_len(text)
    if length <= width:
        return text + " " * (width - length)
    out: list[str] = []
    used = 0
    for ch in reversed(text) if from_left else text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    pad = " " * (width - 1 - used)
    return "…" + "".join(reversed(out)) + pad if from_left else "".join(out) + "…" + pad


def fit_label(label: str, width: int) -> str:
    """A channel label in ``width`` cells: the type is shortened first (``consul…·cb2c``), so the id's
    tail, the part that tells channels apart, stays visible as long as it fits at all."""
    if cell_len(label) <= width:
        return fit(label, width)
    kind, sep, tail = label.rpartition("·")
    if not sep or cell_len(tail) + 2 > width:
        return fit_left(label, width)
    room = width - cell_len(tail) - 1  # the type's cells, its ellipsis included
    return fit(kind, room) + sep + tail if room >= 2 else fit_left(label, width)


def fit_type(event_type: str, width: int) -> str:
    """An event type in ``width`` cells: built-in types without ``ag2.``, dropping leading dotted parts
    when narrow ("…invite.ack"); custom types cut in the middle, keeping their namespace and the end of
    the rest (``myapp.…request``), or from the left when even the namespace does not fit."""
    shown = short_type(event_type)
    if cell_len(shown) <= width:
        return fit(shown, width)
    if shown != event_type:
        parts = shown.split(".")
        while len(parts) > 1 and cell_len("…" + ".".join(parts)) > width:
            parts.pop(0)
        return fit_left("…" + ".".join(parts), width)
    namespace, dot, rest = event_type.partition(".")
    room = width - cell_len(namespace) - 2  # the dot and the ellipsis
    if dot and rest and room >= 3:
        return namespace + dot + "…" + fit_left(rest, room + 1)[1:]
    return fit_left(shown, width)


@dataclass(slots=True)
class Columns:
    """The cells each column of the tail takes (0: the column is not shown); the preview gets the rest."""

    seq: int
    time: int
    channel: int
    sender: int
    etype: int
    audience: int

    def preview_width(self, width: int) -> int:
        used = self.seq + 1 + self.time + 1 + self.sender + 1 + self.etype + 1
        used += (self.channel + 1 if self.channel else 0) + (self.audience + 1 if self.audience else 0)
        return max(0, width - used)


class ColumnWidths:
    """The widest sender name and event type held: the sender and type columns widen to them, never
    narrow (a column that jumps back and forth as rows come and go is hard to read)."""

    def __init__(self) -> None:
        self.sender = 0
        self.etype = 0
        self._seen: set[str] = set()

    def note(self, items: Iterable[Item], name_for: Callable[[str], str]) -> bool:
        """Widen to ``items``' senders and types; True when a column got wider."""
        fresh = {env.sender_id for env, _s, _l in items} | {"\0" + env.event_type for env, _s, _l in items}
        fresh -= self._seen
        if not fresh:
            return False
        self._seen |= fresh
        sender, etype = self.sender, self.etype
        for key in fresh:
            if key.startswith("\0"):
                etype = max(etype, cell_len(short_type(key[1:])))
            else:
                sender = max(sender, cell_len(name_for(key)))
        if (sender, etype) == (self.sender, self.etype):
            return False
        self.sender, self.etype = sender, etype
        return True

    def columns(self, width: int, *, show_channel: bool) -> Columns:
        """Column widths for ``width`` cells: drop or narrow columns until the preview has room."""
        # sender and type are as wide as the widest held (within bounds): the rest goes to the preview
        sender = min(12, max(6, self.sender or 12))
        etype = min(18, max(10, self.etype or 18))
        cols = Columns(
            seq=6, time=12, channel=17 if show_channel else 0, sender=sender, etype=etype, audience=12
        )
        # the channel column survives longest: with every channel shown it says where a row belongs
        steps = (
            ("audience", 0),
            ("channel", 12 if show_channel else 0),
            ("time", 8),
            ("sender", min(9, sender)),
            ("etype", min(14, etype)),
            ("channel", 9 if show_channel else 0),  # con…·9272: the id's tail stays
            ("channel", 0),
        )
        for name, value in steps:
            # the channel narrows before the preview gets short, and goes only when the preview would
            # be nearly gone: in the all-channels tail it is what tells the rows' channels apart
            wanted = {9: 14, 0: 6}.get(value, 28) if name == "channel" else 28
            if cols.preview_width(width) >= wanted:
                break
            setattr(cols, name, value)
        return cols


def header_text(c: Columns, width: int, summary: str) -> str:
    """The header line: the columns' names, and ``summary`` at the right end when it fits (narrow: the
    search's position first, then what is not held, then the rest, as many as fit)."""
    parts = ["seq".ljust(c.seq), " ", fit("time", c.time), " "]
    if c.channel:
        parts += [fit("channel", c.channel), " "]
    parts += [fit("sender", c.sender), " ", fit("event type", c.etype), " "]
    if c.audience:
        parts += [fit("audience", c.audience), " "]
    rest = c.preview_width(width)
    if cell_len(summary) + 9 > rest and " · " in summary:
        # narrow: the search's position first, then what is not held ("87,500 older"), then the rest
        pieces = summary.split(" · ")
        ordered = sorted(pieces, key=lambda p: 0 if "match" in p else 1 if p.endswith("older") else 2)
        summary = ordered[0]
        for part in ordered[1:]:
            if cell_len(summary) + 3 + cell_len(part) + 9 > rest:
                break
            summary += " · " + part
    if cell_len(summary) + 9 <= rest:
        parts.append("preview" + summary.rjust(rest - 7))
    else:
        parts.append(fit("preview", rest))
    return "".join(parts)


def row_text(
    row: TailRow,
    c: Columns,
    width: int,
    *,
    label: str,
    name_for: Callable[[str], str],
    matched: bool,
    styles: dict[str, Style],
    held: bool = False,
) -> Text:
    """One envelope's row: seq, time, channel ``label``, sender, type, audience and a preview in what is left.

    A ``held`` row is a post held at a breakpoint: its would-be seq, and ``⏸ held`` where the time goes."""
    env = row.envelope
    text = Text(style=styles["base"], no_wrap=True, end="")
    seq = "·" if row.seq is None else str(row.seq)
    text.append(seq.rjust(c.seq)[-c.seq :], styles["match"] if matched else styles["seq"])
    text.append(" ")
    if held:
        text.append(fit(HELD_MARK, c.time), styles["held"])
    else:
        text.append(fit(short_time(env.created_at)[: c.time], c.time), styles["time"])
    text.append(" ")
    if c.channel:
        text.append(fit_label(label, c.channel), styles["label"])
        text.append(" ")
    text.append(fit(name_for(env.sender_id), c.sender), styles["sender"])
    text.append(" ")
    text.append(fit_type(env.event_type, c.etype), styles[event_family(env.event_type)])
    text.append(" ")
    if c.audience:
        text.append(fit(audience_label(env, name_for), c.audience), styles["audience"])
        text.append(" ")
    rest = c.preview_width(width)
    if rest:
        text.append(fit(preview(env, rest + 1), rest), styles["preview"])
    return text


def tail_summary(model: TailModel, *, pending: int, match: tuple[int, int], older: int) -> str:
    """What the header's right end says: rows ``pending`` below a paused tail, the search's position
    (``match``: k of n), rows shown (of held), and how many ``older`` are reachable but not held."""
    parts = []
    if pending:
        parts.append(f"paused · {pending:,} new")
    if not model.search_spec.empty:
        k, n = match
        if not n:
            parts.append("no match")
        elif k:
            parts.append(f"match {k:,} of {n:,}")
        else:
            parts.append(f"{n:,} match{'es' if n != 1 else ''}")
    shown = model.channel_filter
    if not model.filter_spec.empty:
        held = model.held_of(shown) if shown is not None else model.row_count
        parts.append(f"{model.visible_count:,} of {held:,} rows")
    else:  # the channel shown (or every channel): its rows held
        parts.append(f"{model.visible_count:,} row{'s' if model.visible_count != 1 else ''}")
    if older:  # reachable, not held: ↑ or g reads them
        parts.append(f"{older:,} older")
    return " · ".join(parts)


def older_text(paging: str, searched: int, older: int) -> str:
    """The marker row above the rows: a read under way, or how many older envelopes are not held."""
    if paging == "older":
        return "⋯ loading older…"
    if paging == "search":
        return f"⋯ searching older… ({searched:,} read)"
    if paging == "newest":
        return "⋯ loading the newest envelopes…"
    if not older:
        return ""
    return f"▲ {older:,} older envelope{'s' if older != 1 else ''} · ↑ or g reads them"


def newer_text(paging: str, searched: int, newer: int) -> str:
    """The marker row below the rows of a window paged away from live."""
    if paging == "newer":
        return "⋯ loading newer…"
    if paging == "search-newer":
        return f"⋯ searching newer… ({searched:,} read)"
    what = f"{newer:,} newer envelope{'s' if newer != 1 else ''}" if newer else "newer envelopes"
    return f"▼ {what} · ↓ reads them · End returns to live"


__all__ = [
    "ColumnWidths",
    "Columns",
    "Item",
    "fit",
    "fit_label",
    "fit_left",
    "fit_type",
    "header_text",
    "newer_text",
    "older_text",
    "row_text",
    "tail_summary",
]

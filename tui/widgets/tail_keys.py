"""The WAL tail's help text, keys, component classes and default styles (``EnvelopeTail`` takes them)."""

from __future__ import annotations

from textual.binding import Binding, BindingType

from tui.formatting import FAMILIES

TAIL_HELP = """\
## WAL tail

Every envelope the hub admits, in order. While **following**, new rows scroll in; moving up or
scrolling up pauses and counts *N new*; **End** (or **f**) resumes.

**Enter** opens an envelope · **/** filter · **s** search, then **n** / **N** · **x** clears · **:** go to seq

The tail reaches the whole WAL: **g**, **:** *seq*, scrolling and search read older (or newer) pages
from the store on demand (a *loading older…* row shows meanwhile); **End** comes back to live.
**:** *label* (`:discussion·7d80`) shows that channel.

Query terms (ANDed, `-` negates, commas mean OR): `type:ag2.msg` `family:custom`
`sender:planner` `to:critic` `to:all` `text:"two words"` `re:/x.+y/i` `seq:10-20`
`channel:discussion·7d80` (a label as the channel column shows it; `.` works for `·`).
The header's right end counts the rows shown and says *match k of n* while searching.

Posts held at a breakpoint show at the end as **⏸ held** with the seq they would get; **w** opens
"Waiting for you" to release, edit, drop or redirect them; **b** breaks on posts like the one under
the cursor.
"""

TAIL_BINDINGS: list[BindingType] = [
    Binding("up,k", "cursor_up", "Up", show=False, id="tail.cursor_up"),
    Binding("down,j", "cursor_down", "Down", show=False, id="tail.cursor_down"),
    Binding("pageup", "page_up", "Page up", show=False, id="tail.page_up"),
    Binding("pagedown", "page_down", "Page down", show=False, id="tail.page_down"),
    Binding("home,g", "cursor_home", "First", show=False, id="tail.home"),
    Binding("end,G", "cursor_end", "Last + follow", show=False, id="tail.end"),
    Binding("enter", "open_envelope", "Open", id="tail.open", tooltip="Open the envelope under the cursor"),
    Binding(
        "f",
        "toggle_follow",
        "Follow",
        id="tail.follow",
        tooltip="Follow new envelopes (or pause following)",
    ),
    Binding(
        "slash",
        "request_query('filter')",
        "Filter",
        id="tail.filter",
        tooltip="Filter rows by a query",
        priority=True,  # resolved when the app reads it: the keys typed after it reach the bar
    ),
    Binding(
        "s",
        "request_query('search')",
        "Search",
        id="tail.search",
        tooltip="Search rows (then n / N)",
        priority=True,
    ),
    Binding("n", "search_next", "Next match", id="tail.search_next", tooltip="Next search match"),
    Binding("N", "search_prev", "Prev match", show=False, id="tail.search_prev", tooltip="Previous match"),
    Binding(
        "x", "clear_query", "Clear filter", id="tail.clear_filter", tooltip="Clear the filter and search"
    ),
    Binding(
        "colon",
        "request_query('goto')",
        "Go to seq",
        id="tail.goto",
        tooltip="Jump to a sequence number",
        priority=True,
    ),
]

TAIL_COMPONENT_CLASSES: set[str] = {
    "envelope-tail--header",
    "envelope-tail--cursor",
    "envelope-tail--seq",
    "envelope-tail--time",
    "envelope-tail--label",
    "envelope-tail--sender",
    "envelope-tail--audience",
    "envelope-tail--preview",
    "envelope-tail--match",
    "envelope-tail--held",
    *(f"envelope-tail--{family}" for family in FAMILIES),
}

TAIL_CSS = """
EnvelopeTail {
    background: $surface;
    color: $foreground;
    overflow-x: hidden;
    overflow-y: auto;
    &:focus { background-tint: $foreground 4%; }
    & > .envelope-tail--header { background: $panel; color: $text-muted; text-style: bold; }
    & > .envelope-tail--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
    }
    &:focus > .envelope-tail--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    & > .envelope-tail--seq { color: $text-muted; }
    & > .envelope-tail--time { color: $text-muted; }
    & > .envelope-tail--label { color: $text-secondary; }
    & > .envelope-tail--sender { color: $foreground; text-style: bold; }
    & > .envelope-tail--audience { color: $text-muted; text-style: italic; }
    & > .envelope-tail--preview { color: $foreground; }
    & > .envelope-tail--match { color: $text-warning; text-style: bold reverse; }
    & > .envelope-tail--held { color: $text-warning; text-style: bold; }
    & > .envelope-tail--text { color: $text-primary; }
    & > .envelope-tail--packet { color: $text-secondary; }
    & > .envelope-tail--channel { color: $text-muted; }
    & > .envelope-tail--task { color: $text-warning; }
    & > .envelope-tail--expectation { color: $text-error; }
    & > .envelope-tail--context { color: $text-success; }
    & > .envelope-tail--custom { color: $text-accent; }
}
"""

__all__ = ["TAIL_BINDINGS", "TAIL_COMPONENT_CLASSES", "TAIL_CSS", "TAIL_HELP"]

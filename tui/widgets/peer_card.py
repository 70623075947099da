"""Peer cards from skill markdown, and the Peers pane that searches them by capability and text.

A card shows the skill's front matter as a table, its body as Markdown, a *generated* badge when the
hub rendered the fallback skill, the passport and resume fields and the capabilities (claimed and
observed). Malformed front matter is shown with the parser's error, never hidden.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from ag2net.skills import parse_skill_frontmatter
from tui.models import PeerInfo
from tui.wording import plural


def _cell(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (str, int, float)) for v in value):
        return ", ".join(str(v) for v in value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _grid(rows: list[tuple[str, str]]) -> Table:
    """Key/value rows whose values wrap instead of scrolling sideways."""
    table = Table.grid(padding=(0, 2), expand=True)
    table.add_column(style="dim", no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    for key, value in rows:
        table.add_row(key, value)
    return table


def presence_text(online: bool | None) -> str:
    if online is None:
        return "not reported by this hub"
    return "online (bound to a live connection)" if online else "offline (no live connection)"


class PeerCard(VerticalScroll):
    """One peer: front matter table, body Markdown, passport/resume fields, capabilities."""

    DEFAULT_CSS = """
    PeerCard {
        height: 1fr;
        padding: 0 1;
        & #peer-title { height: auto; margin-bottom: 1; }
        & .peer-badge { margin-left: 1; padding: 0 1; height: 1; }
        & .peer-badge.-generated { background: $warning-muted; color: $text-warning; }
        & .peer-badge.-kind { background: $primary-muted; color: $text-primary; }
        & .peer-badge.-online { background: $success-muted; color: $text-success; }
        & .peer-badge.-offline { background: $panel; color: $text-muted; }
        & #peer-name { text-style: bold; color: $text-primary; }
        & #peer-error { color: $text-error; border-left: thick $error; padding-left: 1; height: auto; }
        & #peer-error.-empty { display: none; }
        & .peer-section { color: $text-muted; text-style: bold; margin-top: 1; }
        & #peer-frontmatter, & #peer-fields { height: auto; }
        & #peer-capabilities { height: auto; }
        & Markdown { margin: 0; padding: 0; background: $surface; }
    }
    """

    peer: reactive[PeerInfo | None] = reactive(None, recompose=True)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.frontmatter_rows: list[tuple[str, str]] = []
        self.field_rows: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        peer = self.peer
        if peer is None:
            yield Label("Select a peer to see its card.", classes="peer-section")
            return
        parsed = parse_skill_frontmatter(peer.skill_md or "")
        with Horizontal(id="peer-title"):
            yield Label(peer.name, id="peer-name")
            yield Label(peer.passport.effective_kind, classes="peer-badge -kind")
            if peer.online is not None:
                state = "online" if peer.online else "offline"
                yield Label(state, classes=f"peer-badge -{state}", id="peer-presence").with_tooltip(
                    "Bound to a live connection of the hub: envelopes reach it now."
                    if peer.online
                    else "Registered, but no live connection: envelopes wait for it."
                )
            if peer.generated:
                yield Label("generated", classes="peer-badge -generated", id="peer-generated").with_tooltip(
                    "No skill was registered; the hub rendered this card from the passport and resume."
                )
        error = parsed.error or ""
        yield Static(
            f"Front matter ignored: {error}" if error else "",
            id="peer-error",
            classes="" if error else "-empty",
        )
        yield Label("Front matter", classes="peer-section")
        self.frontmatter_rows = [(str(k), _cell(v)) for k, v in parsed.frontmatter.items()] or [
            ("—", "(none)")
        ]
        yield Static(_grid(self.frontmatter_rows), id="peer-frontmatter")
        yield Label("Capabilities", classes="peer-section")
        yield Static(self._capabilities_text(peer), id="peer-capabilities")
        yield Label("Passport and resume", classes="peer-section")
        self.field_rows = self._fields(peer)
        yield Static(_grid(self.field_rows), id="peer-fields")
        yield Label("Skill", classes="peer-section")
        from textual.widgets import Markdown  # on the first card: Markdown is slow to import

        yield Markdown(parsed.body or "_(empty body)_", id="peer-body")

    @staticmethod
    def _capabilities_text(peer: PeerInfo) -> Text:
        text = Text()
        observed = peer.resume.observed
        for cap in peer.capabilities():
            if text:
                text.append("  ")
            stat = observed.get(cap)
            label = f" {cap} " if stat is None else f" {cap} ✓{stat.completed} ✗{stat.failed} "
            text.append(label, style="reverse" if cap in peer.resume.claimed_capabilities else "italic")
        if not text:
            text.append("none claimed or observed", style="dim")
        return text

    @staticmethod
    def _fields(peer: PeerInfo) -> list[tuple[str, str]]:
        p = peer.passport
        r = peer.resume
        rows = [
            ("agent_id", p.agent_id or "—"),
            ("kind", p.effective_kind),
            ("presence", presence_text(peer.online)),
            ("owner", p.owner or "—"),
            ("provider / model", f"{p.provider or '—'} / {p.model or '—'}"),
            ("region", p.region or "—"),
            ("registered", p.created_at or "—"),
            ("passport version", str(p.version)),
            ("summary", r.summary or "—"),
            ("domains", ", ".join(r.domains) or "—"),
            ("resume version", f"{r.version} ({r.last_updated or 'never updated'})"),
        ]
        if p.cost is not None:
            rows.append(
                (
                    "cost",
                    f"in {p.cost.input_per_mtok} / out {p.cost.output_per_mtok} per Mtok, {p.cost.latency_tier or '—'}",
                )
            )
        for example in r.examples:
            rows.append(("example", f"{example.title} — {example.outcome or 'no outcome'}"))
        return rows


class PeersPane(Vertical):
    """Search registered peers by capability (``cap:research``) and text; shows the selected card."""

    HELP = """\
## Peers

Every registered agent and human with its skill card.

- Type in the search box: words match name, summary, capabilities and skill text;
  `cap:research` requires a capability, `kind:human` a kind, `is:online` / `is:offline` presence.
- **●** online (bound to a live connection of the hub), **○** offline; no mark when the hub does not
  report presence.
- **Up/Down** in the list picks a peer; the card shows its front matter, capabilities,
  passport and resume, and the skill body. A **generated** badge marks a card the hub
  rendered because the peer registered no skill.
"""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "ctrl+f",
            "focus_search",
            "Search peers",
            id="peers.search",
            tooltip="Search by capability or text",
            priority=True,  # the keys typed right after it go to the search box, not to the list
        ),
    ]

    DEFAULT_CSS = """
    PeersPane {
        height: 1fr;
        & #peers-search { margin: 0 0 0 0; }
        & #peers-list { height: 8; border: none; background: $surface; }
        & #peers-count { color: $text-muted; height: 1; padding: 0 1; }
        & PeerCard { border-top: hkey $panel-lighten-1; }
    }
    """

    class PeerSelected(Message):
        """A peer was highlighted in the list."""

        def __init__(self, peer: PeerInfo) -> None:
            super().__init__()
            self.peer = peer

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._peers: list[PeerInfo] = []
        self._shown: list[PeerInfo] = []

    def compose(self) -> ComposeResult:
        yield Input(
            placeholder="search: words, cap:research, kind:human, is:online", compact=True, id="peers-search"
        )
        yield Label("", id="peers-count")
        yield OptionList(id="peers-list", compact=True)
        yield PeerCard(id="peer-card")

    @property
    def peers(self) -> list[PeerInfo]:
        return list(self._peers)

    @property
    def shown(self) -> list[PeerInfo]:
        return list(self._shown)

    @property
    def card(self) -> PeerCard:
        return self.query_one(PeerCard)

    def set_peers(self, peers: Sequence[PeerInfo]) -> None:
        """Replace the peer list (keeps the current selection when that peer is still there)."""
        current = self.card.peer.agent_id if self.card.peer else None
        self._peers = sorted(peers, key=lambda p: (p.passport.effective_kind != "agent", p.name.lower()))
        self._apply_search(keep=current)

    def search(self, query: str) -> None:
        self.query_one("#peers-search", Input).value = query
        self._apply_search(keep=None)

    def select(self, name_or_id: str) -> bool:
        for index, peer in enumerate(self._shown):
            if name_or_id in (peer.name, peer.agent_id):
                self.query_one(OptionList).highlighted = index
                self._show(peer)
                return True
        return False

    def action_focus_search(self) -> None:
        field = self.query_one("#peers-search", Input)
        field.screen.set_focus(field)  # at once: the keys typed after ctrl+f are queued already

    @on(Input.Changed, "#peers-search")
    def _search_changed(self) -> None:
        self._apply_search(keep=None)

    @on(Input.Submitted, "#peers-search")
    def _search_submitted(self) -> None:
        self.query_one(OptionList).focus()

    @on(OptionList.OptionHighlighted, "#peers-list")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        if 0 <= event.option_index < len(self._shown):
            self._show(self._shown[event.option_index])

    def _apply_search(self, keep: str | None) -> None:
        query = self.query_one("#peers-search", Input).value
        self._shown = [p for p in self._peers if p.matches(query)]
        options = self.query_one(OptionList)
        options.clear_options()
        options.add_options([Option(self._option_label(p), id=p.agent_id or p.name) for p in self._shown])
        total = len(self._peers)
        online = sum(1 for p in self._peers if p.online)
        presence = f" · {online} online" if any(p.online is not None for p in self._peers) else ""
        self.query_one("#peers-count", Label).update(
            (f"{len(self._shown)} of {plural(total, 'peer')}" if query.strip() else plural(total, "peer"))
            + presence
        )
        if not self._shown:
            self.card.peer = None
            return
        index = next((i for i, p in enumerate(self._shown) if p.agent_id == keep), 0)
        options.highlighted = index
        self._show(self._shown[index])

    def _show(self, peer: PeerInfo) -> None:
        if self.card.peer is not peer:
            self.card.peer = peer
            self.post_message(self.PeerSelected(peer))

    @staticmethod
    def _option_label(peer: PeerInfo) -> Content:
        kind = peer.passport.effective_kind
        caps = ", ".join(peer.capabilities()[:4])
        dot = {True: ("● ", "$text-success"), False: ("○ ", "$text-muted"), None: ("", "")}[peer.online]
        return Content.assemble(
            dot,
            (peer.name, "bold"),
            (f" ({kind})" if kind != "agent" else "", "$text-muted"),
            (f"  {caps}" if caps else "", "italic $text-secondary"),
            ("  · generated" if peer.generated else "", "$text-warning"),
        )


__all__ = ["PeerCard", "PeerInfo", "PeersPane", "presence_text"]

"""The causation tree of an envelope (``ag2net.debug.causation_tree``): its chain of causes up to the root
and everything the root led to, across channels: replies under what they answer, a delegate-opened
consulting channel under the envelope the delegating agent was handling (an inferred link is marked).

Each line names the channel by its label, the seq, the sender and a short text. Enter closes the screen
and moves the tail to that envelope in its channel; Escape closes. It needs the embedded hub.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Footer, Static, Tree

from ag2net.envelope import Envelope
from ag2net.errors import NetworkError
from ag2net.views.wal import WalLog
from tui.formatting import preview, short_type

if TYPE_CHECKING:  # ag2net.debug loads the hub: imported when the tree is asked for (issue 28)
    from ag2net.debug import CausationNode, CausationTree

NEEDS_HUB = "The causation tree needs the embedded hub (run ag2net tui without --connect)."

LINKS = {
    "causation": "",
    "delegate": "⇢ delegated",
    "delegate_inferred": "⇢ delegated (inferred)",
}


class Jump(tuple[str, str, int]):
    """Where Enter asks the tail to go: ``(channel_id, envelope_id, seq)``."""

    __slots__ = ()

    @property
    def channel_id(self) -> str:
        return self[0]

    @property
    def envelope_id(self) -> str:
        return self[1]

    @property
    def seq(self) -> int:
        return self[2]


class CausationTreeScreen(ModalScreen[Jump | None]):
    """The tree around ``envelope_id``; dismisses with a ``Jump`` (Enter) or None (Escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss(None)", "Close", id="causation.close", tooltip="Back without moving"),
        Binding(
            "enter", "go", "Go to", id="causation.go", tooltip="Show this envelope in its channel's tail"
        ),
        Binding("space", "toggle", "Fold", id="causation.fold", tooltip="Fold or unfold this branch"),
    ]

    DEFAULT_CSS = """
    CausationTreeScreen {
        background: $surface;
        & #ct-title { height: 1; padding: 0 1; background: $panel; text-style: bold; }
        & #ct-tree { height: 1fr; }
        & #ct-info { height: auto; max-height: 6; padding: 0 1; color: $text-muted; }
    }
    """

    def __init__(
        self,
        hub: Any,
        envelope_id: str,
        *,
        channel_id: str | None = None,
        name_for: Callable[[str], str],
        label_for: Callable[[str], str],
    ) -> None:
        super().__init__()
        self.hub = hub
        self.envelope_id = envelope_id
        self.channel_id = channel_id
        self.name_for = name_for
        self.label_for = label_for
        self.result: CausationTree | None = None
        self.nodes: dict[str, Any] = {}
        """Tree nodes by envelope id."""

    def compose(self) -> ComposeResult:
        yield Static("Causation · loading…", id="ct-title")
        tree: Tree[CausationNode] = Tree("causes", id="ct-tree")
        tree.show_root = False
        tree.auto_expand = False
        tree.guide_depth = 3
        yield tree
        yield Static(id="ct-info")
        yield Footer()

    @property
    def tree(self) -> Tree[CausationNode]:
        return self.query_one("#ct-tree", Tree)

    def on_mount(self) -> None:
        self.tree.focus()
        self._load()

    @work(exclusive=True, group="causation")
    async def _load(self) -> None:
        from ag2net.debug import causation_tree
        from ag2net.hub.dry_run import channel_log

        try:
            result = await causation_tree(self.hub, self.envelope_id, channel_id=self.channel_id)
        except NetworkError as exc:
            self.query_one("#ct-title", Static).update(f"Causation · {escape(str(exc))}")
            return
        logs: dict[str, WalLog] = {}
        for cid in result.channels:
            logs[cid] = await channel_log(self.hub, cid)
        self.result = result
        self._fill(result, logs)

    def line(self, node: CausationNode, env: Envelope | None) -> Text:
        """One node's label: channel, seq, sender, short text, the link to its parent, its task."""
        text = Text(no_wrap=True, overflow="ellipsis")
        if node.envelope_id == self.envelope_id:
            text.append("▶ ", "bold")
        text.append(self.label_for(node.channel_id), "dim")
        text.append(f" #{node.seq} ", "bold")
        link = LINKS.get(node.link, "")
        if link:
            text.append(f"{link} ", "italic yellow" if node.link == "delegate_inferred" else "italic cyan")
        start = len(text)
        text.append(self.name_for(node.sender_id), "bold")
        body = preview(env, 60) if env is not None else ""
        text.append(": " + (body or short_type(node.event_type)))
        if node.task_id and self.result is not None:
            title = self.result.tasks.get(node.task_id, {}).get("title") or node.task_id[:8]
            text.append(f"  task: {title}", "magenta")
        if node.envelope_id == self.envelope_id:
            text.stylize("reverse", start, len(text))
        elif self.result is not None and node.envelope_id in self.result.chain:
            text.stylize("underline", start, len(text))
        return text

    def _fill(self, result: CausationTree, logs: dict[str, WalLog]) -> None:
        tree = self.tree
        tree.clear()
        self.nodes = {}

        def env_of(node: CausationNode) -> Envelope | None:
            log = logs.get(node.channel_id)
            return log[node.seq - 1] if log is not None and 0 < node.seq <= len(log) else None

        for _level, node in result.walk():
            parent = self.nodes.get(node.parent or "", tree.root)
            label = self.line(node, env_of(node))
            if node.children:
                self.nodes[node.envelope_id] = parent.add(label, node, expand=True)
            else:
                self.nodes[node.envelope_id] = parent.add_leaf(label, node)
        tree.root.expand()
        channels = result.channels
        title = (
            f"Causation · {len(result.nodes)} envelope{'s' if len(result.nodes) != 1 else ''} in "
            f"{len(channels)} channel{'s' if len(channels) != 1 else ''} · chain of {len(result.chain)}"
        )
        if result.truncated:
            title += " · truncated"
        self.query_one("#ct-title", Static).update(escape(title))
        info = [
            "▶ this envelope · [u]underlined[/]: its chain of causes · ⇢ opened a consulting channel by "
            "delegate · enter: show it in its channel's tail · space folds"
        ]
        for task_id, task in result.tasks.items():
            owner = self.name_for(task["owner_id"]) if task.get("owner_id") else "?"
            info.append(escape(f"task {task.get('title') or task_id[:8]} · {owner} · {task.get('state')}"))
        self.query_one("#ct-info", Static).update("\n".join(info))
        target = self.nodes.get(self.envelope_id)
        if target is not None:
            self.call_after_refresh(tree.move_cursor, target)

    def action_go(self) -> None:
        node = self.tree.cursor_node
        if node is None or node.data is None:
            return
        data = node.data
        self.dismiss(Jump((data.channel_id, data.envelope_id, data.seq)))

    def action_toggle(self) -> None:
        node = self.tree.cursor_node
        if node is not None and node.allow_expand:
            node.toggle()

    @on(Tree.NodeSelected, "#ct-tree")
    def _selected(self, event: Tree.NodeSelected[CausationNode]) -> None:
        event.stop()
        self.action_go()


__all__ = ["NEEDS_HUB", "CausationTreeScreen", "Jump"]

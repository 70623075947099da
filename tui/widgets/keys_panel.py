"""The help panels: F1's help for the focused pane, scrolling as one page, and the keys panel (``?``):
every key that applies where the focus is, with its binding id.

The id is what ``[keys]`` in the settings file remaps (``"tail.follow" = "F"``); a key without an id
cannot be remapped and shows none.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import HelpPanel, KeyPanel, Static


class BindingIdsTable(Static):
    """The keys of the focused widget and its ancestors, grouped by where they come from, each with its
    description and (dim, below) the binding id to remap it with."""

    DEFAULT_CSS = """
    BindingIdsTable { width: auto; height: auto; }
    """

    def render(self) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_column(justify="right", style="bold")
        table.add_column(overflow="fold")
        seen: set[tuple[int, str]] = set()
        last_group: object = None
        for node, binding, enabled, tooltip in self.screen.active_bindings.values():
            if binding.system or (id(node), binding.action) in seen:
                continue
            seen.add((id(node), binding.action))
            if last_group is not None and node is not last_group:
                table.add_row("", "")
            last_group = node
            keys = self._keys_for(node, binding)
            text = Text(binding.description or binding.action, style="" if enabled else "dim")
            if tooltip or binding.tooltip:
                text.append(f" {tooltip or binding.tooltip}", style="dim")
            if binding.id:
                text.append(f"\n{binding.id}", style="italic dim")
            table.add_row(Text(keys, style="bold" if enabled else "dim"), text)
        return table

    def _keys_for(self, node: object, binding: Binding) -> str:
        """Every key bound to ``binding``'s action on ``node`` (``up k``), as the footer writes them."""
        keys = [
            self.app.get_key_display(other)
            for owner, other, _, _ in self.screen.active_bindings.values()
            if owner is node and other.action == binding.action
        ]
        return " ".join(dict.fromkeys(keys))


class BindingIdsPanel(KeyPanel):
    """``?``: the keys that apply here and the id of each, so that a user can remap it in ``[keys]``."""

    DEFAULT_CSS = """
    BindingIdsPanel { min-width: 38; }
    """

    def compose(self) -> ComposeResult:
        yield BindingIdsTable(shrink=True, expand=False)


class ScrollingHelpPanel(HelpPanel):
    """F1: the focused pane's help and its keys as one page that scrolls (the mouse wheel, the scrollbar),
    never cut: Textual's panel gives the text at most half its height and clips the rest, which at 80x24
    leaves a pane's help at its first sentence."""

    DEFAULT_CSS = """
    ScrollingHelpPanel {
        overflow-y: auto;
        scrollbar-size-vertical: 1;
        & #widget-help { max-height: initial; height: auto; }
        & KeyPanel#keys-help { height: auto; overflow-y: hidden; }
    }
    """

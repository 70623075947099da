"""Command-palette provider: the workbench's domain commands, which depend on the current state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from textual.command import DiscoveryHit, Hit, Hits, Provider

if TYPE_CHECKING:
    from tui.app import WorkbenchApp


@dataclass(slots=True)
class DomainCommand:
    title: str
    help: str
    callback: Callable[[], object]
    discover: bool = True


class WorkbenchCommands(Provider):
    """Open/close channels, compose envelopes, go to a seq, switch the agent view, start the demo."""

    def _commands(self) -> list[DomainCommand]:
        app: WorkbenchApp = self.app  # type: ignore[assignment]
        return app.domain_commands()

    async def discover(self) -> Hits:
        for command in self._commands():
            if command.discover:
                yield DiscoveryHit(command.title, partial(command.callback), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(
                    score, matcher.highlight(command.title), partial(command.callback), help=command.help
                )


__all__ = ["DomainCommand", "WorkbenchCommands"]

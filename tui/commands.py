"""Command-palette provider: the workbench's domain commands, which depend on the current state."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Protocol

from textual.command import DiscoveryHit, Hit, Hits, Provider


class CommandSource(Protocol):
    """What the provider needs of its app (``WorkbenchApp`` is one): the commands that apply now."""

    def domain_commands(self) -> list[DomainCommand]: ...


@dataclass(slots=True)
class DomainCommand:
    title: str
    help: str
    callback: Callable[[], object]
    discover: bool = True


class WorkbenchCommands(Provider):
    """Open/close channels, compose envelopes, go to a seq, switch the agent view, start the demo."""

    def _commands(self) -> list[DomainCommand]:
        app: CommandSource = self.app  # type: ignore[assignment]
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

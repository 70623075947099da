"""``FittedFooter``: Textual's ``Footer``, but an item that does not fit is left out whole, never cut.

Textual's footer lays its keys out in one row and clips the last one at the edge ("Open channe" before
the palette key at 120 columns). This one measures its items after each layout and hides, from the end,
those that do not fit next to the command-palette key (keys of ``pinned_actions`` last); when any is
hidden it ends with "…" (its tooltip says where the rest are: the keys panel and the palette list every
binding).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from textual import events
from textual.app import ComposeResult
from textual.geometry import Size
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer
from textual.widgets._footer import FooterKey, FooterLabel

ELLIPSIS = "…"
_WIDE = Size(10_000, 1)


class FooterMore(FooterLabel):
    """The "…" that ends a footer whose items do not all fit."""

    DEFAULT_CSS = """
    FooterMore { width: auto; display: none; }
    FooterMore.-shown { display: block; }
    """


class FittedFooter(Footer):
    """A ``Footer`` that hides, whole, the items that do not fit and ends with "…" when it does."""

    DEFAULT_CSS = """
    FittedFooter > FooterMore.-more { margin: 0 1 0 1; }
    """

    def __init__(
        self,
        *args: object,
        more_tooltip: str = "",
        pinned_actions: Iterable[str] = (),
        **kwargs: object,
    ) -> None:
        """``pinned_actions``: the actions whose keys stay while any item fits (help, say); the others
        are left out from the end."""
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.pinned_actions = frozenset(pinned_actions)
        self.more_tooltip = (
            more_tooltip or "More keys: ? lists the keys that apply here, ctrl+p every command"
        )
        self.hidden_items: list[Widget] = []
        """The items left out at the current width (for tests and the curious)."""
        self._requested: Hashable = None
        self.recomposes = 0
        """How many times the items were built (for tests: unchanged bindings build nothing)."""

    def _shown_bindings(self, screen: Screen) -> Hashable:
        """What the items are made of: every shown binding as the footer would draw it."""
        return (
            self.show_command_palette,
            self.compact,
            tuple(
                (
                    binding.key,
                    binding.action,
                    binding.description,
                    binding.key_display,
                    binding.group,
                    enabled,
                    tooltip,
                )
                for (_node, binding, enabled, tooltip) in screen.active_bindings.values()
                if binding.show or binding.key == self.app.COMMAND_PALETTE_BINDING
            ),
        )

    def bindings_changed(self, screen: Screen) -> None:
        """Rebuild the items only when what they show changed: a focus move that keeps the same keys,
        or the same change signalled again before the rebuild ran, builds nothing (at startup that was
        four builds of a dozen keys)."""
        if not (screen.app.app_focus and self.is_attached and screen is self.screen):
            super().bindings_changed(screen)
            return
        shown = self._shown_bindings(screen)
        if self._bindings_ready and shown == self._requested:
            return
        self._requested = shown
        super().bindings_changed(screen)

    def compose(self) -> ComposeResult:
        if self._bindings_ready:
            self.recomposes += 1
        yield from super().compose()
        if self._bindings_ready:
            more = FooterMore(ELLIPSIS, classes="-more")
            more.tooltip = self.more_tooltip
            yield more

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def on_mount(self) -> None:
        super().on_mount()
        self.call_after_refresh(self.fit)

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.fit)

    @staticmethod
    def _outer_width(widget: Widget) -> int:
        styles = widget.styles
        return widget.get_content_width(_WIDE, _WIDE) + styles.gutter.width + styles.margin.width

    def fit(self) -> None:
        """Show the items, in order, that fit beside the palette key; hide the rest and show "…"."""
        if not self.is_attached:
            return
        items: list[Widget] = []
        reserved = 0
        more: FooterMore | None = None
        for child in self.children:
            if isinstance(child, FooterMore):
                more = child
            elif child.has_class("-command-palette"):
                reserved += self._outer_width(child)
            else:
                items.append(child)
        available = self.size.width - reserved
        widths = [self._outer_width(item) for item in items]
        hidden: list[Widget] = []
        if sum(widths) > available:
            budget = available - (self._outer_width(more) if more is not None else 0)
            pinned = [isinstance(item, FooterKey) and item.action in self.pinned_actions for item in items]
            pinned_width = sum(w for w, p in zip(widths, pinned, strict=True) if p)
            if pinned_width > budget:  # not even the pinned keys fit: plain order for all
                pinned = [False] * len(items)
                pinned_width = 0
            used = pinned_width
            full = False
            for item, width, keep in zip(items, widths, pinned, strict=True):
                if keep:
                    continue
                if full or used + width > budget:
                    full = True  # no gaps: once one is left out, so is every later one
                    hidden.append(item)
                else:
                    used += width
        for item in items:
            item.display = item not in hidden
        if more is not None:
            more.set_class(bool(hidden), "-shown")
        self.hidden_items = hidden


__all__ = ["ELLIPSIS", "FittedFooter", "FooterMore"]

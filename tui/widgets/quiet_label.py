"""A label for text refreshed on every batch of envelopes: it repaints only when the text changes."""

from __future__ import annotations

from rich.cells import cell_len
from textual.widgets import Label


class QuietLabel(Label):
    """``show(text)`` skips an unchanged text: each ``update`` is a layout pass over the whole screen,
    and the status bar and the channel list refresh their labels on every batch of envelopes."""

    def __init__(self, text: str = "", **kwargs) -> None:
        super().__init__(text, **kwargs)
        self._text = text

    @property
    def text(self) -> str:
        return self._text

    def show(self, text: str, *, layout: bool | None = None) -> None:
        """Set the text. A layout pass runs only when the text's width changes (``layout=None``), or as
        told (``False`` when the label's width does not follow its text)."""
        if text == self._text:
            return
        if layout is None:
            layout = cell_len(text) != cell_len(self._text)
        self._text = text
        self.update(text, layout=layout)


__all__ = ["QuietLabel"]

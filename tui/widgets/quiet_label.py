"""A label for text refreshed on every batch of envelopes: it repaints only when the text changes."""

from __future__ import annotations

from typing import Literal

from rich.cells import cell_len
from textual.widgets import Label


class QuietLabel(Label):
    """``show(text)`` skips an unchanged text: each ``update`` is a layout pass over the whole screen,
    and the status bar and the channel list refresh their labels on every batch of envelopes."""

    def __init__(self, text: str = "", **kwargs) -> None:
        super().__init__(text, **kwargs)
        self._text = text
        self._shown = text

    @property
    def text(self) -> str:
        """The text last given to ``show`` (without the padding ``keep_width`` adds)."""
        return self._text

    def show(
        self,
        text: str,
        *,
        layout: bool | None = None,
        keep_width: bool = False,
        min_width: int = 0,
        align: Literal["left", "right"] = "left",
    ) -> None:
        """Set the text. A layout pass runs only when the width shown changes (``layout=None``), or as
        told (``False`` when the label's width does not follow its text).

        ``keep_width``: never show it narrower than what is shown now, padding it with spaces (on the
        right, or on the left for ``align="right"``): a figure that changes every second (a rate, a
        count) then lays out the screen only when it needs more room, not each time it has fewer digits.
        ``min_width``: likewise pad it to at least this many cells (room reserved for more digits).
        """
        shown = text
        width = max(min_width, cell_len(self._shown) if keep_width else 0)
        if width:
            room = width - cell_len(text)
            if room > 0:
                shown = " " * room + text if align == "right" else text + " " * room
        self._text = text
        if shown == self._shown:
            return
        if layout is None:
            layout = cell_len(shown) != cell_len(self._shown)
        self._shown = shown
        self.update(shown, layout=layout)


__all__ = ["QuietLabel"]

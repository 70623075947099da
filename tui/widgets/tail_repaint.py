"""Repainting as little as the WAL tail can: a ScrollView whose virtual size grows without a layout pass,
whose scrollbar thumb moves at most every ``THUMB_INTERVAL`` under a stream of rows, and whose border
subtitle changes without a repaint when no border shows it.

``EnvelopeTail`` inherits ``QuietRepaint`` (it is not a widget of its own).
"""

from __future__ import annotations

from time import monotonic
from typing import TYPE_CHECKING, cast

from textual.geometry import Region, Size
from textual.reactive import Reactive
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar, ScrollBarRender
from textual.widget import Widget

if TYPE_CHECKING:
    from typing import Self

    from textual.timer import Timer

THUMB_INTERVAL = 2.0
"""While paused under a stream of envelopes, the scrollbar's thumb moves at most this often (seconds)."""

VIRTUAL_SIZE = cast("Reactive[Size]", vars(Widget)["virtual_size"])
"""The widget's ``virtual_size`` reactive itself (the class attribute reads as a Size to a type checker)."""


class QuietRepaint(ScrollView):
    """The repaint economy of ``EnvelopeTail`` (a base of it)."""

    _quiet = False
    """Set while ``border_subtitle`` changes without a border to show it (no repaint then)."""

    def _init_repaint(self) -> None:
        self._thumb_timer: Timer | None = None
        self._thumb_moved = -THUMB_INTERVAL

    def _set_virtual_size(self, size: Size, *, repaint: bool) -> None:
        """Set the virtual size (rows changed); ``repaint`` False: the caller repaints what changed."""
        old = self.virtual_size
        if size != old:
            height = self.size.height
            if size.width == old.width and old.height > height and size.height > height:
                # the scrollbar was and stays shown: only its thumb moves, so no layout pass over the
                # whole screen (which setting ``virtual_size`` does) on every batch of envelopes
                self.set_reactive(VIRTUAL_SIZE, size)
                if repaint:
                    self._scroll_update(size)
                elif not self._thumb_moves(size.height):
                    # the thumb is drawn where it was: nothing of the scrollbar to repaint
                    self.vertical_scrollbar.set_reactive(ScrollBar.window_virtual_size, size.height)
                else:
                    self._move_thumb_soon()
            else:
                self.virtual_size = size

    def _move_thumb_soon(self) -> None:
        """Move the scrollbar's thumb to where the rows added below a paused tail put it, now or at
        most ``THUMB_INTERVAL`` after it last moved that way (a repaint of the scrollbar repaints the
        tail's full height: under a stream of envelopes that was a third of the frames)."""
        if self._thumb_timer is not None:
            return
        wait = self._thumb_moved + THUMB_INTERVAL - monotonic()
        if wait <= 0:
            self._move_thumb()
        else:
            self._thumb_timer = self.set_timer(wait, self._move_thumb, name="tail scrollbar")

    def _move_thumb(self) -> None:
        self._thumb_timer = None
        self._thumb_moved = monotonic()
        if self.is_mounted:
            self._scroll_update(self.virtual_size)

    def _thumb_moves(self, virtual_height: int) -> bool:
        """Whether the scrollbar's thumb is drawn differently for this virtual height (it is drawn in
        eighths of a cell: most batches of rows added below a paused tail do not move it)."""
        bar = self.vertical_scrollbar
        if not bar.display:
            return True
        size = bar.size.height
        window = bar.window_size

        def cells(virtual: int) -> object:
            shown = window if window < virtual else 0
            return ScrollBarRender.render_bar(size, virtual, shown, bar.position).segments

        return cells(bar.window_virtual_size) != cells(virtual_height)

    def _set_subtitle(self, text: str) -> None:
        edge, _color = self.styles.border_bottom
        if edge in ("", "none", "hidden"):
            # no border to show it in (the pane around the tail has one): setting the subtitle would
            # repaint every row, on every batch while paused
            self._quiet = True
        try:
            self.border_subtitle = text
        finally:
            self._quiet = False

    def refresh(
        self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False
    ) -> Self:
        if self._quiet and not regions and not layout and not recompose:
            return self
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)


__all__ = ["THUMB_INTERVAL", "VIRTUAL_SIZE", "QuietRepaint"]

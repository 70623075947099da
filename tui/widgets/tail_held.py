"""Posts held at a breakpoint, shown in the WAL tail where they would land: after the admitted rows, each
with its would-be seq and ``⏸ held`` (issue 24). They are not in the WAL, so not in the tail's model:
``EnvelopeTail`` draws them as extra lines below its rows (after the "newer envelopes" row of a window
paged away from live), filtered like the rows. Released, a held row goes and the admitted envelope
arrives as any other; dropped, it goes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from ag2net.envelope import Envelope
from tui.models import TailRow

if TYPE_CHECKING:
    from tui.tail_model import TailModel


class HeldRow(NamedTuple):
    """One held post: the inbox key of its waiting item, the envelope as it would be admitted, its
    would-be seq (None when the hub did not say) and its channel's label."""

    key: str
    envelope: Envelope
    seq: int | None
    channel: str

    def as_row(self) -> TailRow:
        return TailRow(self.seq, self.envelope, self.channel)


class HeldLines:
    """The held rows of a tail (a base of ``EnvelopeTail``): which are shown under its filters."""

    if TYPE_CHECKING:
        model: TailModel

        def _after_change(self, *, repaint: bool = True) -> None: ...
        def _scroll_to_end(self) -> None: ...

        @property
        def following(self) -> bool: ...

    def _init_held(self) -> None:
        self._held: list[HeldRow] = []
        self._held_shown: list[HeldRow] | None = None

    @property
    def held_rows(self) -> list[HeldRow]:
        """The held rows that pass the channel filter and the filter, oldest first."""
        if self._held_shown is None:
            self._held_shown = [h for h in self._held if self.model.accepts(h.as_row())]
        return self._held_shown

    @property
    def held_count(self) -> int:
        return len(self.held_rows)

    def set_held(self, rows: list[HeldRow]) -> None:
        """Show exactly ``rows`` as held (the inbox's held posts); a no-op when nothing changed."""
        if rows == self._held:
            return
        self._held = list(rows)
        self._held_shown = None
        self._after_change()
        if self.following:
            self._scroll_to_end()

    def _held_filters_changed(self) -> None:
        self._held_shown = None

    def held_at(self, line: int, first: int) -> HeldRow | None:
        """The held row drawn on virtual line ``line`` when the held rows start at ``first``."""
        index = line - first
        rows = self.held_rows
        return rows[index] if 0 <= index < len(rows) else None


__all__ = ["HeldLines", "HeldRow"]

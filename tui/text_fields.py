"""Whether a widget is a text field, without importing Textual's editor to ask."""

from __future__ import annotations

import sys

from textual.widgets import Input


def is_text_field(widget: object) -> bool:
    """``widget`` is an input or an editor. ``TextArea`` is looked up only once something imported it (its
    module is slow to import and the first frame has none): before that, no widget can be one."""
    if isinstance(widget, Input):
        return True
    text_area = sys.modules.get("textual.widgets._text_area")
    return text_area is not None and isinstance(widget, text_area.TextArea)


__all__ = ["is_text_field"]

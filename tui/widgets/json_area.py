"""A JSON ``TextArea`` with syntax highlighting that survives being reloaded.

Textual's bundled JSON highlight query carries ``#set!`` predicates that make tree-sitter 0.26 crash
(segfault) the second time the query is compiled, which ``TextArea`` does on every ``load_text``. We
register the JSON language with the same captures minus those predicates.
"""

from __future__ import annotations

from typing import Any

from textual.widgets import TextArea

JSON_HIGHLIGHTS = """
[
 (true)
 (false)
] @boolean

(null) @json.null

(number) @number

(pair key: (string) @json.label)
(pair value: (string) @string)

(array (string) @string)

(ERROR) @json.error

["," ":"] @punctuation.delimiter

[
 "[" "]"
 "{" "}"
] @punctuation.bracket

(escape_sequence) @string.escape
"""

_language: Any = None


def _json_language() -> Any:
    global _language
    if _language is None:
        try:
            import tree_sitter
            import tree_sitter_json
        except ImportError:
            return None
        _language = tree_sitter.Language(tree_sitter_json.language())
    return _language


class JsonTextArea(TextArea):
    """A ``TextArea`` whose syntax colours follow the app's theme: Textual's default (``css``) colours JSON
    as on a dark background whatever the theme, so on a light theme punctuation, numbers and ``null``
    are pale grey on white; a light theme gets ``github_light``."""

    def on_mount(self) -> None:
        self._follow_theme()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._follow_theme())

    def _follow_theme(self) -> None:
        self.theme = "css" if self.app.current_theme.dark else "github_light"


def json_text_area(text: str = "", **kwargs: Any) -> TextArea:
    """A ``TextArea`` highlighting JSON (plain text when tree-sitter is not installed)."""
    area = JsonTextArea(text, **kwargs)
    language = _json_language()
    if language is not None:
        area.register_language("json", language, JSON_HIGHLIGHTS)
        area.language = "json"
    return area


__all__ = ["JsonTextArea", "json_text_area"]

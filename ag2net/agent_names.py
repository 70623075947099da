"""What makes an identity's name: one spelling per name, no invisible characters, no lookalikes (SPEC
decision 27).

A directory that can list two "alice"s — one with a trailing space, one with a Cyrillic ``а``, one with a
zero-width joiner — lets anyone pose as anyone to a person reading it. So:

* :func:`normalize_agent_name` is the name as it is stored and looked up: NFKC (compatibility forms such as
  fullwidth letters fold to their plain form) and trimmed of surrounding white space.
* :func:`refused_character` finds the first character a name may not hold: control, format (zero-width
  joiners and spaces, bidi overrides and isolates, soft hyphens), line and paragraph separators, private
  use, surrogates and unassigned code points. A name is text a person reads; these change what is shown
  without being seen.
* :func:`name_skeleton` is the name as it *looks*, in the spirit of Unicode TR39's confusable skeletons:
  case folded, accents dropped, and the letters that are drawn alike in common fonts (Cyrillic and Greek
  homoglyphs of Latin letters, ``0``/``o``, ``1``/``l``/``I``, ``rn``/``m``, ``vv``/``w``) mapped to one
  prototype. Two names with one skeleton are confusable; the hub refuses the second.

The table is a deliberately small subset of TR39's data, covering the scripts and shapes that pass for
Latin; it errs on the side of refusing (``Bob`` and ``bob`` are one name to a reader).
"""

from __future__ import annotations

import functools
import unicodedata

#: Categories a name may not hold: control, format, separators that break lines, private use,
#: surrogates, unassigned.
REFUSED_CATEGORIES = {
    "Cc": "a control character",
    "Cf": "a format character (invisible: it changes how text is shown or joined)",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Co": "a private-use character",
    "Cs": "a surrogate",
    "Cn": "an unassigned code point",
}

# Lookalikes of Latin letters and digits, each mapped to the Latin prototype it is drawn like (applied
# before case folding, for the capitals of other scripts, and after it).
_HOMOGLYPHS = {
    # Cyrillic
    "а": "a", "в": "b", "е": "e", "ё": "e", "һ": "h", "і": "l", "ї": "l", "ј": "j", "к": "k",
    "м": "m", "н": "h", "о": "o", "р": "p", "с": "c", "т": "t", "у": "y", "х": "x", "ѕ": "s",
    "ԁ": "d", "ԛ": "q", "ԝ": "w", "ӏ": "l", "ɡ": "g", "ү": "y", "ѵ": "v", "ь": "b",
    "А": "a", "В": "b", "Е": "e", "Н": "h", "І": "l", "Ј": "j", "К": "k", "М": "m", "О": "o",
    "Р": "p", "С": "c", "Т": "t", "Х": "x", "Ѕ": "s", "Ү": "y", "Ӏ": "l",
    # Greek
    "α": "a", "β": "b", "ε": "e", "η": "n", "ι": "l", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w",
    "Α": "a", "Β": "b", "Ε": "e", "Η": "h", "Ι": "l", "Κ": "k", "Μ": "m", "Ν": "n", "Ο": "o",
    "Ρ": "p", "Τ": "t", "Υ": "y", "Χ": "x", "Ζ": "z",
    # Latin letters and digits drawn like others (after case folding: ``I`` is ``i`` by then)
    "0": "o", "1": "l", "i": "l", "|": "l", "ı": "l", "ł": "l", "ø": "o", "đ": "d", "ħ": "h",
}  # fmt: skip
_SEQUENCES = (("rn", "m"), ("vv", "w"))


def normalize_agent_name(name: str) -> str:
    """The stored and looked-up spelling of ``name``: NFKC, surrounding white space trimmed."""
    return unicodedata.normalize("NFKC", name).strip()


def refused_character(name: str) -> str | None:
    """A sentence naming the first character ``name`` may not hold, or ``None``."""
    for ch in name:
        kind = REFUSED_CATEGORIES.get(unicodedata.category(ch))
        if kind is not None:
            label = unicodedata.name(ch, "")
            return f"U+{ord(ch):04X}{' ' + label if label else ''}, {kind}"
    return None


def _fold(ch: str) -> str:
    return _HOMOGLYPHS.get(ch, ch)


@functools.lru_cache(maxsize=65536)
def name_skeleton(name: str) -> str:
    """What ``name`` looks like: two names with the same skeleton are confusable. Cached: a registration
    compares the new name's skeleton with every registered name's."""
    text = "".join(_fold(ch) for ch in normalize_agent_name(name))
    text = "".join(_fold(ch) for ch in text.casefold())
    text = "".join(ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch))
    text = "".join(_fold(ch) for ch in text)
    text = " ".join(text.split())
    for seq, prototype in _SEQUENCES:
        text = text.replace(seq, prototype)
    return text


def lookalike_detail(name: str, other: str) -> str:
    """Which characters of ``name`` make it read as ``other`` (for the refusal sentence)."""
    if name.casefold() == other.casefold():
        return "it differs only in letter case"
    odd = [ch for ch in name if not ch.isascii()]
    if odd:
        ch = odd[0]
        return f"U+{ord(ch):04X} {unicodedata.name(ch, '')} looks like '{name_skeleton(ch)}'".replace(
            "  ", " "
        )
    return "they are drawn alike"


__all__ = [
    "REFUSED_CATEGORIES",
    "lookalike_detail",
    "name_skeleton",
    "normalize_agent_name",
    "refused_character",
]

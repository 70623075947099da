"""Names people read instead of hex: the short channel label and the text that names ids.

A channel's label is its type and the tail of its id (ids start with a time prefix, so channels
opened together share their first digits; the last 16 hex digits are random): ``discussion·7d80``.
Four digits are used unless two channels of a set share them, then as many as tell them apart.
:func:`resolve_channel_ref` takes a label back (also typed with ``.``, ``:``, ``-`` or ``/`` for
``·``, in any case: ``Discussion·7D80``), a bare tail, a full id or an id prefix.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

SEPARATOR = "·"
MIN_TAIL = 4
_ASCII_SEPARATORS = ".:-/"
_ID_IN_TEXT = re.compile(r"'?\b([0-9a-f]{32})\b'?")


def channel_label(channel_type: str, channel_id: str, tail: int = MIN_TAIL) -> str:
    """``type·tail``: the channel's type and the last ``tail`` hex digits of its id."""
    return f"{channel_type}{SEPARATOR}{channel_id[-tail:]}"


def channel_labels(channels: Iterable[tuple[str, str]]) -> dict[str, str]:
    """``{channel_id: label}`` for ``(channel_type, channel_id)`` pairs, each label unique within the set.

    Every label uses the same number of tail digits: the fewest (at least four) that keep the set's
    labels apart, so a column of them stays aligned and never shows two equal labels.
    """
    pairs = list(dict.fromkeys(channels))
    ids = {cid for _, cid in pairs}
    tail = MIN_TAIL
    longest = max((len(cid) for cid in ids), default=MIN_TAIL)
    while tail < longest:
        seen = {(t, cid[-tail:]) for t, cid in pairs}
        if len(seen) == len(pairs):
            break
        tail += 1
    return {cid: channel_label(t, cid, tail) for t, cid in pairs}


class ChannelRefError(ValueError):
    """A channel reference that names no channel, or more than one."""


def _split_ref(ref: str) -> tuple[str | None, str]:
    for sep in SEPARATOR + _ASCII_SEPARATORS:
        head, found, tail = ref.rpartition(sep)
        if found and head and tail:
            return head, tail
    return None, ref


def resolve_channel_ref(ref: str, channels: Iterable[tuple[str, str]]) -> str:
    """The channel id ``ref`` names among ``(channel_type, channel_id)`` pairs.

    Accepted: a full id, a unique id prefix, a label (``discussion·7d80``, or with ``.``, ``:``,
    ``-``, ``/`` instead of ``·``), or a bare tail (``7d80``), in any letter case (``Discussion·7D80``; a type
    written exactly as it is wins over one that differs only in case). Raises :class:`ChannelRefError` with one
    sentence naming the reference and the fix when nothing or more than one channel matches.
    """
    pairs = list(dict.fromkeys(channels))
    text = ref.strip()
    if not text:
        raise ChannelRefError(
            "channel reference is empty: give a channel label such as discussion·7d80, or an id"
        )
    by_id = {cid: t for t, cid in pairs}
    if text in by_id:
        return text
    by_lower = {cid.lower(): cid for cid in by_id}
    if text.lower() in by_lower:
        return by_lower[text.lower()]
    kind, tail = _split_ref(text)
    tail_lower = tail.lower()
    if kind is not None:
        matches = [cid for t, cid in pairs if t == kind and cid.lower().endswith(tail_lower)]
        if not matches:
            folded = kind.casefold()
            matches = [cid for t, cid in pairs if t.casefold() == folded and cid.lower().endswith(tail_lower)]
    else:
        matches = [cid for t, cid in pairs if cid.endswith(tail_lower)]
        if not matches:
            matches = [cid for t, cid in pairs if cid.startswith(tail_lower)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise ChannelRefError(
            f"channel {ref!r} matches no channel: give a label such as discussion·7d80 (type and the id's last digits) or an id"
        )
    labels = channel_labels((by_id[cid], cid) for cid in matches)
    shown = ", ".join(sorted(labels.values())[:5]) + (" …" if len(labels) > 5 else "")
    raise ChannelRefError(
        f"channel {ref!r} matches {len(matches)} channels ({shown}): give more digits of the id"
    )


def name_ids(text: str, names: Mapping[str, str]) -> str:
    """``text`` with every 32-hex id found in ``names`` (quoted or not) replaced by its name.

    ``names`` maps ids to what to show: agent names, channel labels. Ids it does not know stay as
    they are (the text must never claim a name it cannot vouch for).
    """

    def swap(match: re.Match[str]) -> str:
        name = names.get(match.group(1))
        return match.group(0) if name is None else name

    return _ID_IN_TEXT.sub(swap, text)


__all__ = [
    "SEPARATOR",
    "ChannelRefError",
    "channel_label",
    "channel_labels",
    "name_ids",
    "resolve_channel_ref",
]

"""Stepping into a live network: the records of breakpoints and of what waits for a person.

Shared by the hub (which holds them), its clients (which ask and answer over the op door) and the
workbench (which lists them). The rules are in ``docs/breakpoints.md``.

* ``Breakpoint``: a spec in the tail's filter language (``ag2net.filtering``) plus ``channel.type:`` and
  ``node:`` terms, that holds matching posts before they are appended (``on="envelope"``) or pauses a
  matching agent's turn before its model call (``on="turn"``). Kept in the store: a restarted hub keeps them.
* ``WaitingItem``: one thing waiting on a person (the inbox): a held post (``kind="held"``), a paused
  turn (``"turn"``), a tool call waiting for approval (``"approval"``). Answered exactly once, by an
  operator, with one of the kind's ``ACTIONS``.
* ``Decision``: how an item was answered, as the waiting side (the sender, the agent's runtime) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ag2net.record import Record

#: What a breakpoint stops: a post before admission appends it, or an agent's turn before its model call.
BREAK_ON = ("envelope", "turn")

HELD = "held"
TURN = "turn"
APPROVAL = "approval"
#: The kinds of waiting items, as the inbox lists them.
KINDS = (HELD, TURN, APPROVAL)

#: The answers each kind of item takes.
ACTIONS: dict[str, tuple[str, ...]] = {
    HELD: ("release", "edit", "drop", "redirect"),
    TURN: ("continue", "edit", "answer", "skip"),
    APPROVAL: ("approve", "deny", "edit"),
}

#: How many posts one channel may have held at once, unless the hub is told otherwise
#: (``Hub(max_held_per_channel=...)``); beyond it a matching post is refused with a sentence naming it.
DEFAULT_MAX_HELD_PER_CHANNEL = 100


@dataclass(slots=True)
class Breakpoint(Record):
    """A breakpoint: ``spec`` in the filter language; ``on`` one of ``BREAK_ON``."""

    breakpoint_id: str
    spec: str
    on: str = "envelope"
    enabled: bool = True
    created_by: str = ""
    created_at: str = ""
    #: How many posts (or turns) it has held since it was set.
    hits: int = 0


@dataclass(slots=True)
class WaitingItem(Record):
    """One thing waiting on a person.

    ``detail`` by kind:

    * ``held``: ``envelope`` (the post as it would be admitted), ``would_be_seq``, ``reason``
      (``"breakpoint"`` or ``"step"``), ``breakpoint_id``, ``refused`` (why the last edit was refused, or
      ``""``), ``deadlines`` (``[{"kind": "reply_within", "expectation_id": …, "seconds_left": 42.0}]``);
    * ``turn``: ``request`` (``system_prompt``, ``messages`` — the projected history as event dicts —,
      ``inputs``, ``tools`` offered, ``model``, ``token_budget``), ``trigger_envelope_id``, ``breakpoint_id``;
    * ``approval``: ``tool``, ``arguments``, ``reason`` (the agent's text beside the call), ``call_id``.
    """

    item_id: str
    kind: str
    channel_id: str
    #: The sender of a held post; the agent of a paused turn or an approval.
    agent_id: str
    created_at: str
    detail: dict[str, Any] = field(default_factory=dict)
    #: ``waiting`` until answered, then ``answered`` (or ``cancelled``: the waiter went away, the hub stopped).
    state: str = "waiting"
    answer: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Decision(Record):
    """How a waiting item was answered, for the side that waits.

    ``action``: one of the item's ``ACTIONS``; ``by``: the name of who answered; ``reason``: a drop's or a
    denial's reason. Edits carry what replaces the original: ``envelope`` (a held post), ``audience``
    (a redirect), ``messages``/``system_prompt`` (a turn), ``text`` (an answer in the agent's place),
    ``arguments`` (an approval)."""

    _wire_strict = False

    action: str
    by: str = ""
    reason: str = ""
    envelope: dict[str, Any] | None = None
    audience: list[str] | None = None
    messages: list[dict[str, Any]] | None = None
    system_prompt: str | None = None
    text: str | None = None
    arguments: dict[str, Any] | None = None


__all__ = [
    "ACTIONS",
    "APPROVAL",
    "BREAK_ON",
    "DEFAULT_MAX_HELD_PER_CHANNEL",
    "HELD",
    "KINDS",
    "TURN",
    "Breakpoint",
    "Decision",
    "WaitingItem",
]

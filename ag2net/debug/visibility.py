"""The visibility matrix: for each envelope and each participant, was it delivered, and what does that
participant's model get of it.

``await visibility(hub, channel_id, first_seq=1, last_seq=None, preview_view=None)`` answers, per cell:

- ``delivered``: whether the hub's dispatch addressed the envelope to the participant. The function the
  hub's ``Delivery.dispatch`` asks decides (``ag2net.hub.core.recipients``, through
  ``ag2net.hub.dry_run.addressed``), run against the channel's participants as they were when the envelope
  was created (``joined_at``), as if everyone were connected; a registered arbiter is asked as a post asks
  it. ``reason`` says why not: ``handshake`` (an invite's ack or reject: the hub consumes it, nobody receives
  it), ``sender`` (its own envelope, not listed in the audience), ``audience`` (not listed),
  ``not_yet_participant`` (joined after it), ``left`` (no longer a participant, or no longer registered),
  ``inbound_from`` (the recipient's rule refuses the sender) or ``arbiter``.
- ``projected``: what the participant's model gets of it on its next turn, under the view in force (and,
  given ``preview_view``, under that one): ``shown`` (as ``role`` ``user``/``assistant``, with ``text`` as the
  model reads it), ``elided`` (the view left it out, e.g. a window's summary counts it), ``hidden`` (not
  visible to the participant: audience) or ``not_rendered`` (the adapter renders it to nothing). The view's
  own ``project`` runs with the adapter's renderer, wrapped to tag each rendered text with its envelope id
  (the tag is stripped again): no rule of a view is restated here.

Cost of a page. The two transcripts (``FullTranscript``, ``NamedTranscript``, exactly those classes) turn
each envelope into its own event, whatever comes before or after it, so they are run over the page's
envelopes only: the same cells as over the whole WAL in O(page) instead of O(n) per participant.

The two windowed views (``WindowedSummary``, ``NamedWindowedSummary``, exactly those classes) show the last
``recent_n`` visible rendered envelopes of the WAL and count the rest in a summary the cells never read.
Over the whole WAL they cost O(window) once the log's visibility index for that participant exists, but
building it is a scan of every envelope (on 100,000 stored envelopes, seconds of reading the store back).
So, while the log keeps no index for the pair, the view is run over a suffix of the WAL that grows (4x,
read in slices that yield to the event loop) until its projection elides something: from then on the
window lies inside the suffix, and the suffix shows exactly the envelopes the whole WAL shows, as the same
roles and texts. A participant who sees fewer than ``recent_n`` of the last ``_SUFFIX_CAP`` envelopes gets
the index instead, built ``_SLICE`` envelopes at a time between yields, then kept by the log for the next
pages (and the agents' turns). Whichever way, the cells are those of the whole-WAL projection (tests pin
the equality on edge cases). Any other view, a subclass of those included, is projected over the whole WAL
as before.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag2net.debug.fields import FieldsDict
from ag2net.envelope import Envelope, visible_to
from ag2net.events import BaseEvent, CompactionSummary, ModelMessage, ModelRequest, TextInput
from ag2net.hub.core import HANDSHAKE_ANSWERS
from ag2net.hub.dry_run import addressed, arbiter_denials, channel_log
from ag2net.views.registry import resolve_view, view_from_spec, view_spec
from ag2net.views.visibility_indexes import PER_ENVELOPE, SLICE, WINDOWED, build_indexes
from ag2net.views.wal import WalLog

if TYPE_CHECKING:
    from ag2net.channel import ChannelMetadata
    from ag2net.hub.hub import Hub

_MARK = "\u2063"  # INVISIBLE SEPARATOR: brackets the envelope id in a tagged rendering
_TAGGED = re.compile(f"{_MARK}([^{_MARK}]*){_MARK}")


@dataclass(slots=True)
class Cell(FieldsDict):
    """One participant's view of one envelope."""

    participant_id: str
    delivered: bool
    reason: str
    projected: str
    role: str | None = None
    text: str | None = None
    preview: str | None = None
    preview_role: str | None = None
    preview_text: str | None = None


@dataclass(slots=True)
class Row(FieldsDict):
    """One envelope and its cells, by participant id."""

    seq: int
    envelope_id: str
    sender_id: str
    event_type: str
    audience: list[str] | None
    created_at: str
    cells: dict[str, Cell] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out = FieldsDict.to_dict(self)
        out["cells"] = {pid: cell.to_dict() for pid, cell in self.cells.items()}
        return out


@dataclass(slots=True)
class VisibilityMatrix:
    """Rows (envelopes ``first_seq``..``last_seq``) by columns (participants, then former ones)."""

    channel_id: str
    participants: list[str]
    views: dict[str, dict[str, Any]]
    preview_view: dict[str, Any] | None
    wal_length: int
    rows: list[Row]

    def cell(self, seq: int, participant_id: str) -> Cell:
        for row in self.rows:
            if row.seq == seq:
                return row.cells[participant_id]
        raise KeyError(f"seq {seq} is not in this page of the matrix")

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "participants": list(self.participants),
            "views": dict(self.views),
            "preview_view": self.preview_view,
            "wal_length": self.wal_length,
            "rows": [row.to_dict() for row in self.rows],
        }


class _Tagged:
    """The adapter's renderer with each text prefixed by its envelope id between two ``_MARK``s.

    It renders ``None`` exactly where the adapter's renderer does, so it compares and hashes equal to it: a
    ``WalLog`` then answers it from the visibility index it already keeps for the adapter's renderer (the
    one the agents' windowed views use), instead of scanning the channel again."""

    __slots__ = ("render",)

    def __init__(self, render: Any) -> None:
        self.render = render

    def __call__(self, env: Envelope) -> Any:
        text = self.render(env)
        if isinstance(text, str):
            return f"{_MARK}{env.envelope_id}{_MARK}{text}"
        return text

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Tagged):
            return other.render == self.render
        return self.render == other

    def __hash__(self) -> int:
        return hash(self.render)


def _untag(text: str) -> tuple[list[str], str]:
    return _TAGGED.findall(text), _TAGGED.sub("", text)


def shown_in(events: list[BaseEvent]) -> dict[str, tuple[str, str]]:
    """``{envelope_id: (role, text)}`` for every tagged rendering in a projection."""
    out: dict[str, tuple[str, str]] = {}
    for event in events:
        if isinstance(event, ModelMessage):
            ids, text = _untag(event.content)
            for eid in ids:
                out[eid] = ("assistant", text)
        elif isinstance(event, ModelRequest):
            for part in event.parts:
                if isinstance(part, TextInput):
                    ids, text = _untag(part.content)
                    for eid in ids:
                        out[eid] = ("user", text)
        elif isinstance(event, CompactionSummary):
            continue
    return out


def _participants_at(md: ChannelMetadata, created_at: str) -> ChannelMetadata:
    """The channel as it was when an envelope was created: participants who had joined by then."""
    if not created_at or all(not p.joined_at or p.joined_at <= created_at for p in md.participants):
        return md
    then = md.copy()
    then.participants = [p for p in then.participants if not p.joined_at or p.joined_at <= created_at]
    return then


def _why_not(
    hub: Hub, md: ChannelMetadata, then: ChannelMetadata, env: Envelope, pid: str, denied: Any
) -> str:
    """Why the dispatch did not address ``env`` to ``pid`` (it decided; this names the cause)."""
    audience = env.audience
    if pid == env.sender_id and (audience is None or pid not in audience):
        return "sender"  # its own envelope, handshake or not: shown as the sender's own event
    if env.event_type in HANDSHAKE_ANSWERS:
        return "handshake"
    if audience is not None and pid not in audience:
        return "sender" if pid == env.sender_id else "audience"
    if audience is None and pid == env.sender_id:
        return "sender"
    if pid not in hub.identities.agents or md.participant(pid) is None:
        return "left"
    if audience is None and then.participant(pid) is None:
        return "not_yet_participant"
    if denied is not None and pid in denied:
        return "arbiter"
    return "inbound_from"


_PER_ENVELOPE = PER_ENVELOPE
"""Views whose event for an envelope depends on that envelope alone (one event per visible rendered one)."""


def per_envelope(policy: Any) -> bool:
    """True for the built-in transcripts (exactly those classes): projecting the page alone gives the cells
    projecting the whole WAL would."""
    return type(policy) in _PER_ENVELOPE


_WINDOWED = WINDOWED
"""Views that show the last ``recent_n`` visible rendered envelopes and summarise the rest."""

_SUFFIX_CAP = 8192
"""The longest suffix a windowed view is run over before the log's index is built instead."""

_SLICE = SLICE
"""Envelopes read back or indexed between two yields to the event loop."""


def windowed(policy: Any) -> bool:
    """True for the built-in windowed views (exactly those classes): a suffix of the WAL that elides
    something shows what the whole WAL shows."""
    return type(policy) in _WINDOWED


async def _read_back(log: WalLog, start: int, stop: int) -> list[Envelope]:
    """``log[start:stop]``, read ``_SLICE`` envelopes at a time with a yield between two slices."""
    out: list[Envelope] = []
    pos = start
    while pos < stop:
        if pos > start:
            await asyncio.sleep(0)
        end = min(stop, pos + _SLICE)
        out.extend(log.iter_range(pos, end))
        pos = end
    return out


async def _shown_from_suffix(
    policy: Any, log: WalLog, n: int, kwargs: dict[str, Any]
) -> dict[str, tuple[str, str]] | None:
    """What a windowed view shows of ``log[:n]``, from the shortest suffix (growing 4x) whose projection
    elides something or is the whole WAL; None past ``_SUFFIX_CAP`` envelopes."""
    size = min(n, 4 * policy.recent_n + 64)
    suffix: list[Envelope] = []
    while True:
        suffix = [*await _read_back(log, n - size, n - len(suffix)), *suffix]
        events = await policy.project(suffix, **kwargs)
        if size == n or any(isinstance(event, CompactionSummary) for event in events):
            return shown_in(events)
        if size >= _SUFFIX_CAP:
            return None
        size = min(n, 4 * size, _SUFFIX_CAP)
        await asyncio.sleep(0)


async def _shown(
    policy: Any,
    log: WalLog,
    n: int,
    pid: str,
    page: list[Envelope] | None,
    kwargs: dict[str, Any],
) -> dict[str, tuple[str, str]]:
    """``{envelope_id: (role, text)}`` of what ``policy`` shows ``pid`` of ``log[:n]``."""
    if page is not None and per_envelope(policy):
        return shown_in(await policy.project(page, **kwargs))
    if windowed(policy):
        render = kwargs["render_envelope"]
        if log.indexed(pid, render) is None:
            shown = await _shown_from_suffix(policy, log, n, kwargs)
            if shown is not None:
                return shown
        await build_indexes(log, [(pid, render, policy.recent_n)], n, step=_SLICE)
    return shown_in(await policy.project(log.prefix(n), **kwargs))


async def _projections(
    hub: Hub,
    md: ChannelMetadata,
    adapter: Any,
    log: WalLog,
    n: int,
    pids: list[str],
    view: Any | None,
    page: list[Envelope] | None = None,
) -> tuple[dict[str, dict[str, tuple[str, str]]], dict[str, dict[str, Any]]]:
    tagged = _Tagged(adapter.render_envelope)
    shown: dict[str, dict[str, tuple[str, str]]] = {}
    specs: dict[str, dict[str, Any]] = {}
    for pid in pids:
        policy = view if view is not None else resolve_view(md, pid, adapter)
        specs[pid] = view_spec(policy)
        kwargs = {"participant_id": pid, "channel": md, "render_envelope": tagged, "name_for": hub.name_for}
        shown[pid] = await _shown(policy, log, n, pid, page, kwargs)
        await asyncio.sleep(0)
    return shown, specs


def _projected(
    adapter: Any, env: Envelope, pid: str, shown: dict[str, tuple[str, str]]
) -> tuple[str, Any, Any]:
    hit = shown.get(env.envelope_id)
    if hit is not None:
        return "shown", hit[0], hit[1]
    if not visible_to(env, pid):
        return "hidden", None, None
    if adapter.render_envelope(env) is None:
        return "not_rendered", None, None
    return "elided", None, None


async def visibility(
    hub: Hub,
    channel_id: str,
    *,
    first_seq: int = 1,
    last_seq: int | None = None,
    preview_view: Any = None,
) -> VisibilityMatrix:
    """The matrix for envelopes ``first_seq``..``last_seq`` (all by default) of a channel."""
    md = hub.lookup_channel(channel_id)
    adapter = hub.adapter_for_metadata(md)
    log = await channel_log(hub, channel_id)
    n = len(log)
    stop = n if last_seq is None else max(0, min(n, last_seq))
    start = max(1, first_seq)
    page = [(seq, log[seq - 1]) for seq in range(start, stop + 1)]
    current = md.participant_ids()
    former: list[str] = []
    for _, env in page:
        for pid in [env.sender_id, *(env.audience or ())]:
            if pid not in current and pid not in former:
                former.append(pid)
    columns = current + former
    envelopes = [env for _, env in page]
    shown, views = await _projections(hub, md, adapter, log, n, current, None, envelopes)
    preview = view_from_spec(preview_view) if preview_view is not None else None
    preview_shown: dict[str, dict[str, tuple[str, str]]] = {}
    if preview is not None:
        preview_shown, _ = await _projections(hub, md, adapter, log, n, current, preview, envelopes)
    rows: list[Row] = []
    for seq, env in page:
        then = _participants_at(md, env.created_at)
        denied = await arbiter_denials(hub, then, env)
        reached = set(addressed(hub, then, env, denied))
        row = Row(seq, env.envelope_id, env.sender_id, env.event_type, env.audience, env.created_at)
        for pid in columns:
            delivered = pid in reached
            reason = "delivered" if delivered else _why_not(hub, md, then, env, pid, denied)
            if pid in shown:
                projected, role, text = _projected(adapter, env, pid, shown[pid])
            else:
                projected, role, text = "not_a_participant", None, None
            cell = Cell(pid, delivered, reason, projected, role, text)
            if pid in preview_shown:
                cell.preview, cell.preview_role, cell.preview_text = _projected(
                    adapter, env, pid, preview_shown[pid]
                )
            row.cells[pid] = cell
        rows.append(row)
    return VisibilityMatrix(
        channel_id=channel_id,
        participants=columns,
        views=views,
        preview_view=view_spec(preview) if preview is not None else None,
        wal_length=n,
        rows=rows,
    )


__all__ = ["Cell", "Row", "VisibilityMatrix", "per_envelope", "shown_in", "visibility", "windowed"]

"""Every call the workbench makes to the network, in one place, over ag2net's public client API only.

The same code serves an in-process hub (``HubClient.local``) and a remote one (``HubClient.connect``).
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ag2net.breakpoints import Breakpoint, WaitingItem
from ag2net.channel import ChannelMetadata, ParticipantRole
from ag2net.client import HubClient, HumanClient
from ag2net.client.turns import project_for
from ag2net.envelope import (
    EV_CHANNEL_INVITE_REJECT,
    EV_TEXT,
    Envelope,
    invite_ack,
)
from ag2net.errors import AccessDeniedError, NetworkError, ProtocolError
from ag2net.views import view_from_spec
from tui.formatting import channel_label, channel_labels
from tui.models import ActivityLedger, ChannelRow, PeerInfo, ProjectionData, TailItem

if TYPE_CHECKING:  # ag2net.debug and ag2net.hub load the hub: imported where they are used (issue 28)
    from ag2net.debug import DryRun
    from ag2net.hub import ObservedEvent

TURN_LIMIT = 200
"""The agent view reads at most this many of a participant's newest turns on a channel."""


def channel_row(md: ChannelMetadata, name_for: Any, count: int = 0, last: str = "") -> ChannelRow:
    ids = md.participant_ids()
    return ChannelRow(
        channel_id=md.channel_id,
        type=md.manifest.type,
        state=md.state.value if hasattr(md.state, "value") else str(md.state),
        participants=[name_for(a) for a in ids],
        count=count,
        last_activity=last or md.created_at,
        close_reason=md.close_reason,
        participant_ids=ids,
    )


class HubSource:
    """The workbench's view of one hub: an operator ``HubClient`` and the human at the keyboard."""

    def __init__(self, hub_client: HubClient, human: HumanClient) -> None:
        self.hc = hub_client
        self.human = human
        self.metadata: dict[str, ChannelMetadata] = {}
        self.activity = ActivityLedger()
        """What the channel list shows of each channel's size and last activity (see ``ActivityLedger``)."""
        self._labels: dict[str, str] = {}
        self._labels_of = 0

    # ------------------------------------------------------------------ names and channels

    def name_for(self, agent_id: str) -> str:
        return self.hc.name_for(agent_id)

    @property
    def human_id(self) -> str:
        return self.human.agent_id

    @property
    def connection_label(self) -> str:
        if not self.hc.remote:
            return "in-process hub"
        url = self.hc.connection_state().get("url")
        return f"remote hub {url}" if url else "remote hub"

    def connection_state(self) -> dict[str, Any]:
        """``{"kind", "url", "connected", "reconnects", "operator"}``; an in-process hub is always connected."""
        return self.hc.connection_state()

    def labels(self) -> dict[str, str]:
        """``{channel_id: label}`` for every channel known, each label unique among them."""
        if self._labels_of != len(self.metadata):  # channels are only ever added
            self._labels = channel_labels((md.manifest.type, cid) for cid, md in self.metadata.items())
            self._labels_of = len(self.metadata)
        return self._labels

    def label_for(self, channel_id: str) -> str:
        """The channel's label, unique among the channels known (``channel·…`` for an unknown one)."""
        label = self.labels().get(channel_id)
        return label if label is not None else channel_label("channel", channel_id)

    def participants(self, channel_id: str) -> list[tuple[str, str]]:
        md = self.metadata.get(channel_id)
        if md is None:
            return []
        return [(a, self.name_for(a)) for a in md.participant_ids()]

    def addressed_to_human(self, envelope: Envelope) -> bool:
        """A text from someone else naming the human in its audience, or a question in a consulting channel
        where the human is the respondent."""
        human = self.human_id
        if envelope.event_type != EV_TEXT or envelope.sender_id == human:
            return False
        if envelope.audience and human in envelope.audience:
            return True
        md = self.metadata.get(envelope.channel_id)
        return (
            md is not None
            and md.manifest.type == "consulting"
            and md.role_of(human) == ParticipantRole.RESPONDENT
        )

    async def load_channels(self) -> list[ChannelRow]:
        channels = await self.hc.list_channels(include_terminal=True, limit=None)
        stats = await self.hc.channel_stats()
        rows = []
        for md in channels:
            self.metadata[md.channel_id] = md
            stat = stats.get(md.channel_id, {})
            row = channel_row(
                md, self.name_for, int(stat.get("wal_count", 0)), str(stat.get("last_activity") or "")
            )
            # the rows are shown as they are returned: never less than the list already counted
            row.count, row.last_activity = self.activity.absorb(md.channel_id, row.count, row.last_activity)
            rows.append(row)
        return rows

    def remember(self, metadata: ChannelMetadata) -> ChannelRow:
        """Keep ``metadata`` and make its row: count 0 and the creation time, until the feed's
        ``ChannelChanged`` settles them against what the list shows (``ActivityLedger``)."""
        self.metadata[metadata.channel_id] = metadata
        return channel_row(metadata, self.name_for)

    async def health(self) -> dict[str, Any]:
        return await self.hc.health()

    async def channel_types(self) -> list[str]:
        return await self.hc.adapter_types()

    # ------------------------------------------------------------------ the tail

    async def observe_position(self) -> int:
        return await self.hc.observe_position()

    def observe(self, since: int | None) -> AsyncIterator[ObservedEvent]:
        return self.hc.observe(since=since)

    async def last_page(self, rows: list[ChannelRow], count: int) -> list[TailItem]:
        """The newest ``count`` envelopes across all channels, oldest first."""
        return await self.newest_until({r.channel_id: r.count for r in rows if r.count}, count)

    async def newest_until(self, tops: dict[str, int], count: int) -> list[TailItem]:
        """The newest ``count`` envelopes with, per channel, a seq at most ``tops[channel]``; oldest first.

        One read for a single channel; across channels a reverse merge that reads a small slice from the
        end of each, then more only from channels whose oldest slice is still newer than the cut-off, so
        the cost is about ``count`` envelopes, not the WAL.
        """
        tops = {cid: top for cid, top in tops.items() if top >= 1}
        if not tops or count <= 0:
            return []
        if len(tops) == 1:
            ((cid, top),) = tops.items()
            return await self.channel_range(cid, max(1, top - count + 1), top)
        chunk = max(20, (2 * count) // len(tops))
        held: dict[str, list[TailItem]] = {cid: [] for cid in tops}
        low = {cid: top + 1 for cid, top in tops.items()}
        need = list(tops)
        merged: list[TailItem] = []
        while need:
            reads = await asyncio.gather(
                *(self.channel_range(cid, max(1, low[cid] - chunk), low[cid] - 1) for cid in need)
            )
            for cid, items in zip(need, reads, strict=True):
                held[cid][0:0] = items
                low[cid] = max(1, low[cid] - chunk)
            merged = heapq.nlargest(count, (item for items in held.values() for item in items), key=_order)
            cutoff = _order(merged[-1]) if len(merged) == count else None
            # a channel may hold more rows above the cut-off only if even its oldest held row is above it
            need = [
                cid
                for cid, items in held.items()
                if low[cid] > 1 and items and (cutoff is None or _order(items[0]) > cutoff)
            ]
            chunk *= 2
        merged.reverse()
        return merged

    async def older_pages(
        self, rows: list[ChannelRow], loaded: dict[str, int], limit: int, page: int = 5000
    ) -> AsyncIterator[tuple[list[TailItem], int, int]]:
        """Older envelopes in pages (newest pages first) until ``limit`` rows are held: (items, done, total).

        ``loaded`` maps channel id to the lowest seq already held. A reverse k-way merge over per-channel
        read buffers, so every envelope is read once.
        """
        sizes = {r.channel_id: r.count for r in rows if r.count}
        total = min(limit, sum(sizes.values()))
        low = {cid: loaded.get(cid, size + 1) for cid, size in sizes.items()}
        held = sum(size - low[cid] + 1 for cid, size in sizes.items())
        chunk = max(50, page // max(1, len(sizes)))
        buffers: dict[str, list[TailItem]] = {cid: [] for cid in sizes}

        async def refill(cid: str) -> None:
            first = max(1, low[cid] - chunk)
            buffers[cid] = await self.channel_range(cid, first, low[cid] - 1)
            low[cid] = first

        await asyncio.gather(*(refill(cid) for cid in sizes if low[cid] > 1))
        heap = [(_Newest(_order(items[-1])), cid) for cid, items in buffers.items() if items]
        heapq.heapify(heap)
        while held < total and heap:
            batch: list[TailItem] = []
            want = min(page, total - held)
            while heap and len(batch) < want:
                _, cid = heapq.heappop(heap)
                items = buffers[cid]
                batch.append(items.pop())
                if not items and low[cid] > 1:
                    await refill(cid)
                    items = buffers[cid]  # refill puts a new list there
                if items:
                    heapq.heappush(heap, (_Newest(_order(items[-1])), cid))
            batch.reverse()
            held += len(batch)
            yield batch, held, total

    async def channel_range(self, channel_id: str, first: int, last: int) -> list[TailItem]:
        """Seqs ``first``..``last`` of one channel as tail items (empty when ``last < first``)."""
        if last < first:
            return []
        label = self.label_for(channel_id)
        return [(env, seq, label) for seq, env in await self.hc.read_wal_seq(channel_id, first, last)]

    async def find_envelope(self, channel_id: str, envelope_id: str) -> tuple[int, Envelope] | None:
        count = await self.hc.wal_count(channel_id)
        for seq, env in await self.hc.read_wal_seq(channel_id, 1, count):
            if env.envelope_id == envelope_id:
                return seq, env
        return None

    # ------------------------------------------------------------------ acting as the human

    async def send_text(self, channel_id: str, text: str, audience: list[str] | None) -> str:
        return await self.human.send(channel_id, text, audience=audience or None)

    async def can_send(self, channel_id: str) -> tuple[bool, str]:
        return await self.human.can_send(channel_id)

    async def post_envelope(self, envelope: Envelope) -> str:
        return await self.human.post_envelope(envelope)

    async def dry_run(self, envelope: Envelope) -> DryRun:
        """What posting ``envelope`` would do now (the hub's ``dry_run`` op, local or remote); nothing is
        written or delivered."""
        from ag2net.debug import dry_run

        return await dry_run(self.hc, envelope)

    async def open_channel(
        self,
        channel_type: str,
        targets: list[str],
        knobs: dict[str, Any],
        ttl: int | None,
        intent: str | None,
    ) -> str:
        channel = await self.human.open(
            type=channel_type, target=targets, ttl=ttl, knobs=knobs or None, intent=intent
        )
        return channel.channel_id

    async def close_channel(self, channel_id: str, reason: str = "closed_from_workbench") -> None:
        await self.hc.close_channel(channel_id, reason=reason)

    # ------------------------------------------------------------------ peers and views

    async def presence(self) -> dict[str, bool] | None:
        """``{agent_id: online}`` from the hub's ``presence`` op, or None when the hub does not answer it
        (an older hub: unknown op; a connection that may not read the directory)."""
        try:
            answer = await self.hc.presence()
        except (ProtocolError, AccessDeniedError):
            return None
        if not isinstance(answer, dict):
            return None
        return {str(k): v is True for k, v in answer.items()}

    async def load_peers(self) -> list[PeerInfo]:
        """Every identity with its résumé, skill card and presence.

        Presence (``PeerInfo.online``) comes from the hub's ``presence`` op: True while the identity is
        bound to a live connection; it stays None when the hub does not report it. The feed reloads the
        peers on the ``agent`` observe events ``bound`` / ``unbound``, so it follows live.
        """
        passports, online = await asyncio.gather(self.hc.list_agents(limit=10_000), self.presence())

        async def one(passport: Any) -> PeerInfo | None:
            agent_id = passport.agent_id or ""
            try:
                resume, info = await asyncio.gather(
                    self.hc.get_resume(agent_id), self.hc.get_skill_info(agent_id)
                )
            except NetworkError:
                return None
            return PeerInfo(
                passport,
                resume,
                info.get("skill_md") or "",
                bool(info.get("generated")),
                online=None if online is None else online.get(agent_id, False),
            )

        return [p for p in await asyncio.gather(*(one(p) for p in passports)) if p is not None]

    async def load_projection(
        self,
        channel_id: str,
        participant_id: str,
        spec: dict[str, Any] | None,
        *,
        turn_id: str | None = None,
    ) -> ProjectionData:
        """The projection now (in force and under ``spec``), the participant's recorded turns on the
        channel, and turn ``turn_id`` (default: the newest) re-projected over the WAL it saw."""
        in_force = await self.hc.preview_turn(channel_id, participant_id)
        preview = (
            in_force if spec is None else await self.hc.preview_turn(channel_id, participant_id, view=spec)
        )
        try:
            newest_first = await self.hc.list_turns(
                channel_id=channel_id, agent_id=participant_id, limit=TURN_LIMIT
            )
        except AccessDeniedError:
            # Another agent's turns, and this connection is not an operator: the pane says so.
            newest_first = []
            in_force.turns_private = preview.turns_private = True
        turns = newest_first[::-1]
        turn = next((t for t in turns if t.turn_id == turn_id), turns[-1] if turns else None)
        replay = None
        if turn is not None and turn.trigger_envelope_id:
            md = await self.hc.get_channel(channel_id)
            wal = await self.hc.read_wal_until(channel_id, turn.trigger_envelope_id)
            replay = await project_for(self.hc, md, participant_id, wal, view_from_spec(preview.view))
        return ProjectionData(
            channel_id,
            participant_id,
            in_force.view,
            preview,
            turn,
            replay,
            turns=turns,
            turns_capped=len(newest_first) >= TURN_LIMIT,
            seq_of=await self._seq_of_slides(channel_id, turns),
        )

    async def _seq_of_slides(self, channel_id: str, turns: list[Any]) -> Any:
        """A ``seq_of`` for the Cost tab, read only when a window slide explains a fall of the cache read
        (one read of the channel's WAL, rendered as the adapter renders it); None otherwise."""
        from ag2net.cache_diff import cache_drops, seq_finder

        if not any(d.change.kind == "window" for d in cache_drops(turns)):
            return None
        md = await self.hc.get_channel(channel_id)
        render = self.hc.adapter_for_metadata(md).render_envelope
        count = await self.hc.wal_count(channel_id)
        pairs = []
        for seq, env in await self.hc.read_wal_seq(channel_id, 1, count):
            text = render(env)
            if text is not None:
                pairs.append((seq, text))
        return seq_finder(pairs)

    async def recent_turn_records(self) -> list[Any]:
        """The newest recorded turns of every channel (the channel list's cost figures are priced from them)."""
        return await self.hc.list_turns(limit=TURN_LIMIT * 10)

    # ------------------------------------------------------------------ stepping in (issue 24)
    # Breakpoints, step mode and what waits on a person. Every answer names the human at the keyboard as
    # ``by`` (the WebSocket server puts the connection's identity there anyway).

    @property
    def by(self) -> str:
        """Who answers from this workbench: the human's name."""
        return self.human.name

    async def break_on(self, spec: str, *, on: str = "envelope", enabled: bool = True) -> Breakpoint:
        """Set a breakpoint (bad spec: the hub's one sentence, as a ``ProtocolError``)."""
        return await self.hc.break_on(spec, on=on, enabled=enabled, by=self.by)

    async def list_breakpoints(self) -> list[Breakpoint]:
        return await self.hc.list_breakpoints()

    async def set_breakpoint(self, breakpoint_id: str, enabled: bool) -> Breakpoint:
        return await self.hc.set_breakpoint(breakpoint_id, enabled)

    async def remove_breakpoint(self, breakpoint_id: str) -> None:
        await self.hc.remove_breakpoint(breakpoint_id)

    async def step_mode(self, channel_id: str | None, on: bool) -> dict[str, Any]:
        """Hold every substantive post of ``channel_id`` (None: of the network) until released."""
        answer = await self.hc.step_mode(channel_id, on)
        return answer if isinstance(answer, dict) else {}

    async def pause_expectations(self, channel_id: str, paused: bool) -> dict[str, Any]:
        answer = await self.hc.pause_expectations(channel_id, paused)
        return answer if isinstance(answer, dict) else {}

    async def list_waiting(self, channel_id: str | None = None) -> list[WaitingItem]:
        return await self.hc.list_waiting(channel_id=channel_id)

    async def answer_waiting(self, item_id: str, action: str, **fields: Any) -> WaitingItem:
        """Answer one waiting item as the human (``fields``: reason, envelope, audience, messages,
        system_prompt, text, arguments; an envelope given as a dict is read as one)."""
        envelope = fields.get("envelope")
        if isinstance(envelope, dict):
            fields["envelope"] = Envelope.from_dict(envelope)
        fields.pop("by", None)
        return await self.hc.answer_waiting(item_id, action, by=self.by, **fields)

    async def pending_turns(self) -> list[Any]:
        """The channels where the hub expects the human to speak (``PendingTurn`` records or dicts)."""
        return await self.hc.pending_turns_for(self.human_id)

    async def edited_envelopes(self, limit: int = 10_000) -> dict[str, str]:
        """``{envelope_id: "edited at a breakpoint by NAME"}`` of the envelopes admitted by an edit (or a
        redirect) at a breakpoint: the audit log's ``held_edited`` / ``held_redirected`` records, the
        newest ``limit`` of them at most."""
        try:
            rows = await self.hc.list_audit(since=0, limit=None)
        except (ProtocolError, AccessDeniedError):
            return {}
        edited: dict[str, str] = {}
        for _position, record in rows[-limit:] if len(rows) > limit else rows:
            note = operator_note(record)
            if note:
                edited[str(record["envelope_id"])] = note
        return edited

    async def accept_invite(self, invite: Envelope) -> str:
        return await self.human.post_envelope(invite_ack(invite, self.human_id))

    async def decline_invite(self, invite: Envelope, reason: str = "") -> str:
        return await self.human.post_envelope(
            Envelope(
                channel_id=invite.channel_id,
                sender_id=self.human_id,
                audience=None,
                event_type=EV_CHANNEL_INVITE_REJECT,
                event_data={"channel_id": invite.channel_id, "reason": reason or "declined"},
                causation_id=invite.envelope_id,
            )
        )


def operator_note(record: dict[str, Any]) -> str:
    """ "edited at a breakpoint by NAME" for an audit record of an envelope admitted by an edit (or
    "redirected at a breakpoint by NAME"); '' for any other record."""
    kind = record.get("kind")
    if kind not in ("held_edited", "held_redirected") or not record.get("envelope_id"):
        return ""
    verb = "edited" if kind == "held_edited" else "redirected"
    return f"{verb} at a breakpoint by {record.get('by') or 'an operator'}"


class _Newest(str):
    """Orders strings in reverse, so ``heapq`` pops the newest envelope id first."""

    __slots__ = ()

    def __lt__(self, other: str) -> bool:  # type: ignore[override]
        return str.__gt__(self, other)


def _order(item: TailItem) -> str:
    # envelope ids are minted monotonically by the hub: lexical order is admission order
    return item[0].envelope_id


__all__ = ["TURN_LIMIT", "HubSource", "channel_row", "operator_note"]

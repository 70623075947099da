"""Shell: ``Waiting`` (``hub.waiting``) — the inbox of what waits on a person, each item with its future.

``add`` makes an item (a held post, a paused turn, an approval) and the future its waiter awaits;
``answer`` settles it exactly once (a second answer: "item X was already answered by NAME"); ``cancel``
ends it when its waiter went away or the hub stops (state ``cancelled``). Every change is shown on the
observe stream as kind ``"waiting"``: ``{"change": "added"|"answered"|"cancelled"|"updated", "item": …}``.

``HELD_NOTICE`` is how a transport learns that the request it is running now waits on a person: the
WebSocket server sets it (a callback taking the item) around an ag2net client's ``post_envelope``, so the
client's RPC timeout does not fire while the post is held.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ag2net.breakpoints import ACTIONS, APPROVAL, HELD, TURN, Decision, WaitingItem
from ag2net.envelope import Envelope
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub.core import Refused, admit, required
from ag2net.hub.expectations import ExpectationClock, deadlines
from ag2net.ids import parse_time

if TYPE_CHECKING:
    from ag2net.hub.breakpoints import Breakpoints
    from ag2net.hub.core import HubCore
    from ag2net.hub.lifecycle import Channels
    from ag2net.hub.logs import ChannelLogs
    from ag2net.hub.services import Services

#: What a held post's sender reads when the hub stops before an operator answered it.
STOPPED_HELD = "the hub stopped while this post was held at a breakpoint; it was not admitted"

#: Set by a transport around one request: called with the item when that request's post is held.
HELD_NOTICE: contextvars.ContextVar[Callable[[WaitingItem], None] | None] = contextvars.ContextVar(
    "ag2net_held_notice", default=None
)


class Waiting:
    """The waiting items by id (oldest first), their futures, and who is answering one right now."""

    __slots__ = ("answering", "futures", "items", "services")

    def __init__(self, services: Services) -> None:
        self.services = services
        self.items: dict[str, WaitingItem] = {}
        self.futures: dict[str, asyncio.Future[Any]] = {}
        #: Items an answer is being applied to (an edit being admitted): a second answer is refused meanwhile.
        self.answering: set[str] = set()

    def add(self, kind: str, channel_id: str, agent_id: str, detail: dict[str, Any]) -> WaitingItem:
        item = WaitingItem(
            self.services.ids.new_id(), kind, channel_id, agent_id, self.services.clock(), detail
        )
        self.items[item.item_id] = item
        self.futures[item.item_id] = asyncio.get_running_loop().create_future()
        self.show("added", item)
        return item

    def future(self, item_id: str) -> asyncio.Future[Any]:
        return self.futures[item_id]

    def get(self, item_id: str) -> WaitingItem:
        return required(
            self.items, item_id, f"no waiting item {item_id!r}; list_waiting names the ones there are"
        )

    def open_item(self, item_id: str) -> WaitingItem:
        """The item, still waiting and not being answered; else the sentence saying why not."""
        item = self.get(item_id)
        if item.state != "waiting":
            by = item.answer.get("by") or "the hub"
            word = "answered" if item.state == "answered" else "cancelled"
            raise NetworkError(f"item {item_id} was already {word} by {by}")
        if item_id in self.answering:
            raise NetworkError(f"item {item_id} is being answered by someone else right now")
        return item

    def listed(self, channel_id: str | None = None) -> list[WaitingItem]:
        return [
            i
            for i in self.items.values()
            if i.state == "waiting" and (channel_id is None or i.channel_id == channel_id)
        ]

    def held_in(self, channel_id: str) -> int:
        return sum(
            1
            for i in self.items.values()
            if i.kind == HELD and i.channel_id == channel_id and i.state == "waiting"
        )

    def settle(self, item: WaitingItem, answer: dict[str, Any], outcome: Any) -> None:
        """Answered: ``outcome`` (a value, or an exception to raise in the waiter) goes to its future."""
        item.state = "answered"
        item.answer = answer
        self._finish(item, outcome)
        self.show("answered", item)

    def cancel(self, item_id: str, error: BaseException | None = None) -> None:
        item = self.items.get(item_id)
        if item is None or item.state != "waiting":
            return
        item.state = "cancelled"
        self._finish(item, error if error is not None else asyncio.CancelledError())
        self.show("cancelled", item)

    def _finish(self, item: WaitingItem, outcome: Any) -> None:
        self.answering.discard(item.item_id)
        fut = self.futures.pop(item.item_id, None)
        # answered items stay listed only while waiting: keep a bounded trail of the finished ones
        self.items.pop(item.item_id, None)
        self._finished_trail(item)
        if fut is None or fut.done():
            return
        if isinstance(outcome, BaseException):
            if isinstance(outcome, NetworkError):
                outcome.held_answer = True  # type: ignore[attr-defined]  # reported already, or not a refusal
            fut.set_exception(outcome)
            fut.exception()  # a waiter gone meanwhile must not leave a warning behind
        else:
            fut.set_result(outcome)

    def _finished_trail(self, item: WaitingItem) -> None:
        done = [i for i in self.items.values() if i.state != "waiting"]
        for old in done[: max(0, len(done) - 256)]:
            self.items.pop(old.item_id, None)
        self.items[item.item_id] = item  # kept (at the end) so a second answer names who answered

    def show(self, change: str, item: WaitingItem) -> None:
        self.services.observe_log.append(
            "waiting", channel_id=item.channel_id, payload={"change": change, "item": item.to_dict()}
        )

    def stop(self, message_for: Callable[[WaitingItem], str]) -> None:
        """The hub stops: every waiting item is cancelled, its waiter raising ``message_for(item)``."""
        for item in list(self.items.values()):
            if item.state == "waiting":
                self.cancel(item.item_id, NetworkError(message_for(item)))


# ---------------------------------------------------------------------------------------------- stepping in

PostFn = Callable[[Envelope], Any]


class Stepping:
    """Holding posts, pausing turns and asking approvals: the hub's side of stepping into a network.

    ``hold`` runs in the sender's task: admission's checks under the channel's lock (a refusal is raised
    as any post's), then the item, then — without the lock — the wait for an operator. ``answer`` applies
    an operator's decision: a release or an edit is admitted now (in the operator's task, so the WAL order
    is the release order), bypassing breakpoints; a drop fails the sender's post."""

    __slots__ = (
        "breakpoints",
        "channels",
        "clock",
        "core",
        "logs",
        "max_held_per_channel",
        "post",
        "services",
        "waiting",
    )

    def __init__(
        self,
        services: Services,
        core: HubCore,
        *,
        breakpoints: Breakpoints,
        waiting: Waiting,
        channels: Channels,
        logs: ChannelLogs,
        clock: ExpectationClock,
        max_held_per_channel: int,
    ) -> None:
        self.services, self.core, self.breakpoints, self.waiting = services, core, breakpoints, waiting
        self.channels, self.logs, self.clock = channels, logs, clock
        self.max_held_per_channel = max_held_per_channel
        self.post: Callable[[Envelope], Any] | None = None  # admission's post bypassing breakpoints

    @classmethod
    def build(cls, hub: Any, max_held_per_channel: int) -> Stepping:
        """The hub's stepping-in components, wired: admission asks the breakpoints before every post."""
        from ag2net.hub.breakpoints import Breakpoints
        from ag2net.hub.expectations import PausableEvaluators

        clock = ExpectationClock()
        hub.expectations.evaluators = PausableEvaluators(clock, hub.expectations.evaluators)
        stepping = cls(
            hub.services,
            hub.core,
            breakpoints=Breakpoints(hub.services, hub.core),
            waiting=Waiting(hub.services),
            channels=hub.channels,
            logs=hub.logs,
            clock=clock,
            max_held_per_channel=max_held_per_channel,
        )
        admission = hub.admission
        stepping.post = lambda env: admission.post(env, bypass=True)
        admission.gate = stepping
        return stepping

    def pause_expectations(self, channel_id: str, paused: bool) -> dict[str, Any]:
        self.channels.metadata(channel_id)  # NotFoundError for an unknown channel
        shift = self.clock.pause(channel_id, self._now(), paused)
        return {"channel_id": channel_id, "paused": paused, "shifted_seconds": round(shift, 3)}

    async def pause_turn(
        self, agent_id: str, channel_id: str, request: dict[str, Any], trigger_envelope_id: str
    ) -> Decision:
        bp_id = self.breakpoints.match_turn(agent_id, channel_id) or ""
        if bp_id:
            await self.breakpoints.hit(bp_id)
        detail = {"request": request, "trigger_envelope_id": trigger_envelope_id, "breakpoint_id": bp_id}
        return await self.wait_for(TURN, agent_id, channel_id, detail)

    def _now(self) -> float:
        return parse_time(self.services.clock()).timestamp()

    async def _audit(self, kind: str, **fields: Any) -> None:
        await self.services.audit.record(kind, **fields)

    # ------------------------------------------------------------ held posts

    async def hold(self, env: Envelope, reason: str, breakpoint_id: str) -> str:
        """Hold ``env`` (it would be admitted) until an operator answers; returns the admitted envelope's id."""
        cid = env.channel_id
        async with self.channels.locks(cid):
            verdict = admit(self.core, env)
            if isinstance(verdict, Refused):
                raise verdict.error
            limit = self.max_held_per_channel
            if self.waiting.held_in(cid) >= limit:
                raise NetworkError(
                    f"channel '{cid}' already holds {limit} posts at breakpoints, the hub's "
                    f"max_held_per_channel; release or drop some of them, or raise the limit"
                )
            would_be = self.channels.wal_counts.get(cid, 0) + 1
            item = self.waiting.add(
                HELD,
                cid,
                env.sender_id,
                {
                    "envelope": env.to_dict(),
                    "would_be_seq": would_be,
                    "reason": reason,
                    "breakpoint_id": breakpoint_id,
                    "refused": "",
                    "deadlines": [],
                },
            )
        future = self.waiting.future(item.item_id)
        if breakpoint_id:
            await self.breakpoints.hit(breakpoint_id)
        notice = HELD_NOTICE.get()
        if notice is not None:
            notice(item)
        try:
            item.detail["deadlines"] = await self._deadlines(cid, env.sender_id)
            await self._audit(
                "post_held",
                channel_id=cid,
                item_id=item.item_id,
                sender_id=env.sender_id,
                reason=reason,
                breakpoint_id=breakpoint_id,
                envelope=env.to_dict(),
            )
            return await future
        except asyncio.CancelledError:
            self.waiting.cancel(item.item_id)
            raise

    async def _deadlines(self, cid: str, sender_id: str) -> list[dict[str, Any]]:
        md = self.channels.by_id.get(cid)
        if md is None or not md.manifest.expectations:
            return []
        wal = (await self.logs.load(cid)).prefix()
        now = self.clock.now(cid, self._now())
        return deadlines(md, wal, sender_id, now)

    def refreshed(self, item: WaitingItem) -> WaitingItem:
        """A held item's would-be seq and seconds left, as of now."""
        if item.kind == HELD:
            cid = item.channel_id
            item.detail["would_be_seq"] = self.channels.wal_counts.get(cid, 0) + 1
            now = self.clock.now(cid, self._now())
            for d in item.detail.get("deadlines", []):
                d["seconds_left"] = round(d["due"] - now, 3)
        return item

    async def answer(self, item_id: str, action: str, fields: dict[str, Any]) -> WaitingItem:
        """Apply an operator's answer (``fields``: ``Decision``'s, an ``Envelope`` for an edit)."""
        envelope = fields.pop("envelope", None)
        if isinstance(envelope, Envelope):
            envelope = envelope.to_dict()
        decision = Decision(action, **fields, envelope=envelope)
        if not any(action in actions for actions in ACTIONS.values()):
            known = sorted({a for actions in ACTIONS.values() for a in actions})
            raise ProtocolError(f"params.action must be one of {', '.join(known)}, not {action!r}")
        item = self.waiting.open_item(item_id)
        actions = ACTIONS[item.kind]
        if decision.action not in actions:
            raise ProtocolError(
                f"a {item.kind} item is answered with one of {', '.join(actions)}, not {decision.action!r}"
            )
        decision.by = decision.by or "operator"
        if item.kind == TURN and decision.action == "answer" and not (decision.text or "").strip():
            raise ProtocolError("params.text: an answer in the agent's place needs the text to post")
        if item.kind == HELD:
            return await self._answer_held(item, decision)
        answer = {k: v for k, v in decision.to_dict().items() if v not in (None, "")}
        kind = "turn_decided" if item.kind == TURN else "approval_decided"
        await self._audit(
            kind, channel_id=item.channel_id, item_id=item.item_id, agent_id=item.agent_id, **answer
        )
        self.waiting.settle(item, answer, decision)
        return item

    async def _answer_held(self, item: WaitingItem, d: Decision) -> WaitingItem:
        original = Envelope.from_dict(item.detail["envelope"])
        base = {"channel_id": item.channel_id, "item_id": item.item_id, "by": d.by}
        if d.action == "drop":
            error = NetworkError(f"dropped at a breakpoint by {d.by}: {d.reason or 'no reason given'}")
            await self._audit("held_dropped", reason=d.reason, envelope=original.to_dict(), **base)
            self.waiting.settle(item, {"action": "drop", "by": d.by, "reason": d.reason}, error)
            return item
        edited = self._edited(original, d)
        self.waiting.answering.add(item.item_id)
        assert self.post is not None
        try:
            envelope_id = await self.post(edited if edited is not None else original)
        except NetworkError as exc:
            self.waiting.answering.discard(item.item_id)
            if edited is not None:  # a refused edit stays held and says why
                item.detail["refused"] = str(exc)
                self.waiting.show("updated", item)
                raise
            await self._audit("held_released", refused=str(exc), envelope_id="", **base)
            self.waiting.settle(item, {"action": "release", "by": d.by, "refused": str(exc)}, exc)
            return item
        answer: dict[str, Any] = {"action": d.action, "by": d.by, "envelope_id": envelope_id}
        if edited is None:
            await self._audit("held_released", envelope_id=envelope_id, **base)
        else:
            kind = "held_redirected" if d.action == "redirect" else "held_edited"
            await self._audit(
                kind,
                original=original.to_dict(),
                edited=edited.to_dict(),
                envelope_id=envelope_id,
                **base,
            )
        self.waiting.settle(item, answer, envelope_id)
        return item

    def _edited(self, original: Envelope, d: Decision) -> Envelope | None:
        """The envelope an edit or a redirect admits in the original's place (its channel and sender kept)."""
        if d.action == "edit":
            if d.envelope is None:
                raise ProtocolError("an edit of a held post gives the edited envelope (params.envelope)")
            data = dict(d.envelope)
        elif d.action == "redirect":
            if d.audience is None:
                raise ProtocolError(
                    "a redirect gives the new audience (params.audience: agent names or ids, [] for everyone)"
                )
            data = original.to_dict()
            data["audience"] = [self._agent_id(a) for a in d.audience] or None
        else:
            return None
        data["channel_id"], data["sender_id"] = original.channel_id, original.sender_id
        return Envelope.from_dict(data)

    def _agent_id(self, name_or_id: str) -> str:
        if name_or_id in self.core.identities.agents:
            return name_or_id
        found = self.core.identities.names.get(name_or_id)
        if found is None:
            raise NotFoundError(f"params.audience names {name_or_id!r}, which is not a registered agent")
        return found

    # ------------------------------------------------------------ turns and approvals

    async def wait_for(self, kind: str, agent_id: str, channel_id: str, detail: dict[str, Any]) -> Decision:
        key, what = (
            ("request", "the model request") if kind == TURN else ("arguments", "the tool call's arguments")
        )
        if not isinstance(detail[key], dict):
            raise ProtocolError(f"params.{key} must be {what} as an object")
        item = self.waiting.add(kind, channel_id, agent_id, detail)
        future = self.waiting.future(item.item_id)
        audit_kind = "turn_paused" if kind == TURN else "approval_requested"
        try:
            await self._audit(
                audit_kind, channel_id=channel_id, item_id=item.item_id, agent_id=agent_id, detail=detail
            )
            return await future
        except asyncio.CancelledError:
            self.waiting.cancel(item.item_id)
            raise

    def stop(self) -> None:
        """The hub stops: held posts fail (not admitted), paused turns and approvals are cancelled."""

        def message(item: WaitingItem) -> str:
            if item.kind == HELD:
                return STOPPED_HELD
            what = "turn was paused" if item.kind == TURN else "tool call waited for approval"
            return f"the hub stopped while this {what}; nobody answered it"

        self.waiting.stop(message)


__all__ = ["APPROVAL", "HELD_NOTICE", "STOPPED_HELD", "Stepping", "Waiting"]

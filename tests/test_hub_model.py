"""A model-based stateful test of the hub: a real ``Hub`` on a real SQLite file against a small model.

Hypothesis drives a ``RuleBasedStateMachine`` through registrations (humans over ``HubClient.local``,
agents through the hub's API), channel opens of every type (consulting, conversation with ``max_turns``,
discussion, workflow; invites acked or rejected by hand, so channels also stay pending), posts that are
valid, refused (wrong turn, closed or pending channel, non-participant) and concurrent (one
``asyncio.gather`` of posts, a close, ``read_wal`` calls and a write the store cannot take), closes, TTL
expiry on a ``ManualClock``, skill and resume updates, clean restarts (close and reopen the same file,
also straight into a burst while the WALs are not loaded yet) and crash restarts (a subprocess opens the
file, writes, and is SIGKILLed, while three writers post when an open conversation allows; every post
it acknowledged must be there after the next open). Humans acknowledge every delivery; each check first
waits until none is outstanding.

After every step the hub must agree with the model on the identities (memory and store: no ghosts after
refused writes), the channels and their states, the adapter state (also against a fresh fold of the
stored WAL), every WAL's contents and order (``read_wal``, ``read_wal_seq``, ``find_envelope``,
``store.read_wal``, ``wal_count``, ids increasing), and ``pending_turns_for``.

Concurrent steps are checked for linearisability: the WAL must be the serial application, in WAL order, of
exactly the operations that succeeded, and each refused operation must be refused by the model at some
point of that serial order. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import inspect
import json
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from support import quiet, until

from ag2net import HubClient, Passport, Resume
from ag2net.adapters.transitions import TransitionGraph
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_TEXT,
    Envelope,
)
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub import Hub
from ag2net.ids import ManualClock, add_seconds
from ag2net.naming import channel_label
from ag2net.store import SqliteStore

START = "2026-03-01T09:00:00.000000Z"
NAMES = ["ana", "ben", "cy", "dee", "eli", "fay"]
KINDS = ["consulting", "conversation", "discussion", "workflow"]
TERMINAL = ("closed", "expired")
DEFAULT_TTL = 7200.0  # the default Rule's channel_ttl_default ("2h")
ANY = "any"  # MEnv.audience: not compared
POISON = "\ud800"  # a lone surrogate: no store can write it as UTF-8
NAME_OF: dict[str, str] = {}  # agent id -> name: the hub's refusals name participants (issue 22 item 7)
HUB_KW = quiet(invite_ack_timeout=3600)

# The crash-restart worker: opens the same file, runs a plan, prints each outcome, then (optionally)
# keeps three writers posting into one conversation until the parent SIGKILLs it.
WORKER = r"""
import asyncio, json, sys
from ag2net import Passport, Resume
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.hub import Hub
from ag2net.ids import ManualClock
from ag2net.store import SqliteStore

async def main():
    cfg = json.loads(sys.argv[1])
    hub = await Hub.open(SqliteStore(cfg["path"]), clock=ManualClock(cfg["now"]), **cfg["hub"])
    out = sys.stdout

    def emit(obj):
        out.write(json.dumps(obj) + "\n")
        out.flush()

    for op in cfg["plan"]:
        try:
            kind = op["op"]
            if kind == "text":
                result = await hub.post_envelope(
                    Envelope(op["cid"], op["sender"], None, EV_TEXT, {"text": op["text"]})
                )
            elif kind == "close":
                result = (await hub.close_channel(op["cid"], reason=op["text"])).state.value
            elif kind == "register":
                result = (await hub.register_identity(Passport(name=op["name"], kind="agent"))).agent_id
            elif kind == "resume":
                await hub.set_resume(op["sender"], Resume(summary=op["text"]))
                result = None
            emit({"ok": True, "result": result})
        except Exception as exc:
            emit({"ok": False, "mro": [c.__name__ for c in type(exc).__mro__], "msg": str(exc)})
    emit({"done": True})
    tail = cfg.get("tail")
    if not tail:
        await asyncio.Event().wait()
    cid, senders = tail

    async def writer(k):
        i = 0
        while True:
            text = f"tail{k}-{i}"
            eid = await hub.post_envelope(Envelope(cid, senders[k % 2], None, EV_TEXT, {"text": text}))
            emit({"tail": k, "i": i, "id": eid})
            i += 1

    await asyncio.gather(*(writer(k) for k in range(3)))

try:
    asyncio.run(main())
finally:
    import os, traceback
    traceback.print_exc()
    sys.stderr.flush()
    os._exit(3)  # never linger: the parent expects to kill a live worker
"""


# ---------------------------------------------------------------------------------------------- model


@dataclass
class MEnv:
    """One expected WAL entry; ``None`` data/id and ``ANY`` audience are not compared."""

    event_type: str
    sender_id: str
    data: dict[str, Any] | None
    envelope_id: str | None = None
    audience: Any = ANY


@dataclass
class MChannel:
    cid: str
    kind: str
    participants: list[str]  # channel order: creator first
    state: str = "pending"
    close_reason: str = ""
    pending_acks: list[str] = field(default_factory=list)
    rejected_by: list[str] = field(default_factory=list)
    max_turns: int | None = None
    expires_at: str | None = None
    wal: list[MEnv] = field(default_factory=list)
    turn_count: int = 0
    initiator_sent: bool = False
    respondent_replied: bool = False
    last_text_id: str | None = None

    @property
    def creator(self) -> str:
        return self.participants[0]

    def expected_turn(self) -> tuple[str, str | None] | None:
        """Who the adapter expects next and the envelope that triggered it (``pending_turns_for``)."""
        if self.state != "active":
            return None
        if self.kind == "consulting":
            if not self.initiator_sent:
                return self.creator, None
            if not self.respondent_replied:
                return self.participants[1], self.last_text_id
            return None
        if self.kind in ("discussion", "workflow"):
            return self.participants[self.turn_count % len(self.participants)], self.last_text_id
        return None

    def close(self, state: str, reason: str) -> None:
        self.state, self.close_reason = state, reason
        event = EV_CHANNEL_EXPIRED if state == "expired" else EV_CHANNEL_CLOSED
        self.wal.append(
            MEnv(
                event, self.creator, {"reason": reason, "channel_id": self.cid}, None, list(self.participants)
            )
        )


@dataclass
class Ident:
    name: str
    agent_id: str
    kind: str  # "human" | "agent"
    summary: str = ""
    skill: str | None = None


@dataclass
class Refusal:
    """The error the model expects: the class and a piece of its message."""

    cls: type[BaseException]
    key: str
    alias: str | None = None  # another wording of the same refusal

    def matches(self, exc: BaseException) -> bool:
        names = exc.mro if isinstance(exc, RemoteError) else [c.__name__ for c in type(exc).__mro__]
        text = str(exc)
        return self.cls.__name__ in names and (self.key in text or bool(self.alias and self.alias in text))

    def __str__(self) -> str:
        return f"{self.cls.__name__} containing {self.key!r}"


class RemoteError(Exception):
    """An error the crash worker reported (class names of its MRO and the message)."""

    def __init__(self, mro: list[str], msg: str) -> None:
        super().__init__(msg)
        self.mro = mro


@dataclass
class Op:
    """One channel operation of a step: ``text``, ``ack``, ``reject`` or ``close`` (``text`` = reason)."""

    kind: str
    cid: str
    sender: str
    text: str = ""
    result: Any = None
    exc: BaseException | None = None

    def __str__(self) -> str:
        return f"{self.kind}(sender={self.sender[:8]}, text={self.text!r})"


def refuse(ch: MChannel, op: Op) -> Refusal | None:
    """Why the model refuses ``op`` on ``ch`` now (``None``: it is admitted)."""
    cid = ch.cid
    if op.kind == "close":
        return None  # a close of a terminal channel is a no-op, never an error
    if ch.state in TERMINAL:
        done = ch.kind == "consulting" and ch.close_reason == "consulting_complete" and op.kind == "text"
        # a post checked between the reply and its auto-close may be told the consultation is complete
        label = channel_label(ch.kind, cid)  # the hub names the channel by its label
        return Refusal(ProtocolError, f"{label} is {ch.state}", "already complete" if done else None)
    if op.kind == "text" and ch.state != "active":
        return Refusal(ProtocolError, f"{channel_label(ch.kind, cid)} not active (state={ch.state})")
    if op.sender not in ch.participants:
        return Refusal(ProtocolError, "only accepts sends from participants")
    if op.kind != "text":
        return None
    if ch.kind == "consulting":
        if not ch.initiator_sent and op.sender != ch.creator:
            return Refusal(ProtocolError, "expects first send from initiator")
        if ch.initiator_sent and op.sender != ch.participants[1]:
            return Refusal(ProtocolError, "expects reply from respondent")
    elif ch.kind in ("discussion", "workflow"):
        expected = ch.participants[ch.turn_count % len(ch.participants)]
        if op.sender != expected:
            return Refusal(ProtocolError, f"expects {NAME_OF.get(expected, expected)} to speak")
    return None


def apply(ch: MChannel, op: Op, envelope_id: str | None) -> None:
    """The model's effect of an admitted ``op`` (its own WAL entry and any it causes)."""
    if op.kind == "close":
        if ch.state not in TERMINAL:
            ch.close("closed", op.text)
        return
    if op.kind in ("ack", "reject"):
        event = EV_CHANNEL_INVITE_ACK if op.kind == "ack" else EV_CHANNEL_INVITE_REJECT
        ch.wal.append(MEnv(event, op.sender, {"channel_id": ch.cid}, envelope_id, None))
        if ch.state != "pending" or op.sender not in ch.pending_acks:
            return
        if op.kind == "ack":
            ch.pending_acks.remove(op.sender)
            if not ch.pending_acks and not ch.rejected_by:
                ch.state = "active"
                ch.wal.append(
                    MEnv(EV_CHANNEL_OPENED, ch.creator, {"channel_id": ch.cid}, None, list(ch.participants))
                )
        else:
            ch.rejected_by.append(op.sender)
            ch.close("closed", "invite_rejected")
        return
    ch.wal.append(MEnv(EV_TEXT, op.sender, {"text": op.text}, envelope_id, None))
    ch.turn_count += 1
    ch.last_text_id = envelope_id
    if ch.kind == "consulting":
        if not ch.initiator_sent:
            ch.initiator_sent = True
        else:
            ch.respondent_replied = True
            ch.close("closed", "consulting_complete")
    elif ch.kind in ("conversation", "workflow") and ch.max_turns and ch.turn_count >= ch.max_turns:
        ch.close("closed", "max_turns")


def mismatch(expected: MEnv, stored: dict[str, Any]) -> str | None:
    for what, want, got in (
        ("event_type", expected.event_type, stored.get("event_type")),
        ("sender_id", expected.sender_id, stored.get("sender_id")),
        ("event_data", expected.data, stored.get("event_data")),
        ("envelope_id", expected.envelope_id, stored.get("envelope_id")),
        ("audience", expected.audience, stored.get("audience")),
    ):
        if want is None and what in ("event_data", "envelope_id"):
            continue
        if want == ANY and what == "audience":
            continue
        if want != got:
            return f"{what} is {got!r}, the model expects {want!r}"
    return None


def brief(entry: dict[str, Any]) -> str:
    return f"{entry.get('event_type')} from {str(entry.get('sender_id'))[:8]} {entry.get('event_data')}"


def linearize(ch0: MChannel, ops: list[Op], stored: list[dict[str, Any]]) -> MChannel:
    """The model after ``ops`` ran concurrently on ``ch0``, if the stored WAL is a serial order of them.

    Raises AssertionError naming the first disagreement.
    """
    ch = copy.deepcopy(ch0)
    snapshots = [copy.deepcopy(ch)]
    by_id = {op.result: op for op in ops if op.exc is None and op.kind != "close"}
    closes = [op for op in ops if op.exc is None and op.kind == "close"]
    pos = len(ch.wal)
    while pos < len(stored):
        entry = stored[pos]
        op = by_id.pop(entry.get("envelope_id"), None)
        if op is None and entry.get("event_type") == EV_CHANNEL_CLOSED:
            reason = (entry.get("event_data") or {}).get("reason")
            op = next((c for c in closes if c.text == reason), None)
            if op is not None:
                closes.remove(op)
        assert op is not None, (
            f"channel {ch.cid} ({ch.kind}): WAL entry {pos + 1} ({brief(entry)}) belongs to no operation "
            f"that succeeded in this step (ops: {', '.join(map(str, ops))})"
        )
        refusal = refuse(ch, op)
        assert refusal is None, (
            f"channel {ch.cid} ({ch.kind}): {op} was admitted at WAL position {pos + 1}, but after the "
            f"{pos} entries before it the model refuses it ({refusal})"
        )
        apply(ch, op, entry.get("envelope_id"))
        for k in range(pos, len(ch.wal)):
            assert k < len(stored), (
                f"channel {ch.cid} ({ch.kind}): after {op} the model expects entry {k + 1} "
                f"({ch.wal[k].event_type} {ch.wal[k].data}), the WAL ends at {len(stored)}"
            )
            problem = mismatch(ch.wal[k], stored[k])
            assert problem is None, f"channel {ch.cid} ({ch.kind}): WAL entry {k + 1} after {op}: {problem}"
        pos = len(ch.wal)
        snapshots.append(copy.deepcopy(ch))
    assert not by_id, (
        f"channel {ch.cid} ({ch.kind}): {', '.join(map(str, by_id.values()))} returned an envelope id "
        f"that is not in the stored WAL"
    )
    for op in closes:
        assert any(s.state in TERMINAL for s in snapshots), (
            f"channel {ch.cid}: {op} returned but left no closed envelope in the WAL"
        )
    for op in ops:
        if op.exc is None:
            continue
        verdicts = [refuse(s, op) for s in snapshots]
        assert any(v is not None and v.matches(op.exc) for v in verdicts), (
            f"channel {ch.cid} ({ch.kind}): {op} failed with {type(op.exc).__name__}: {op.exc}; "
            f"at no point of the serial order does the model refuse it that way "
            f"(model: {[str(v) if v else 'admit' for v in verdicts]})"
        )
    return ch


def serial(ch0: MChannel, ops: list[Op], stored: list[dict[str, Any]]) -> MChannel:
    """The model after ``ops`` ran one after another on ``ch0``; the stored WAL must begin with their entries."""
    ch = copy.deepcopy(ch0)
    for op in ops:
        refusal = refuse(ch, op)
        if op.exc is not None:
            assert refusal is not None and refusal.matches(op.exc), (
                f"channel {ch.cid} ({ch.kind}): {op} failed with {op.exc!r}; the model expects "
                f"{refusal or 'it to be admitted'}"
            )
            continue
        assert refusal is None, (
            f"channel {ch.cid} ({ch.kind}): {op} was admitted; the model expects {refusal}"
        )
        pos = len(ch.wal)
        apply(ch, op, op.result if op.kind != "close" else None)
        for k in range(pos, len(ch.wal)):
            assert k < len(stored), f"channel {ch.cid}: after {op} the WAL ends at {len(stored)}"
            problem = mismatch(ch.wal[k], stored[k])
            assert problem is None, f"channel {ch.cid} ({ch.kind}): WAL entry {k + 1} after {op}: {problem}"
    return ch


# ---------------------------------------------------------------------------------------------- machine


class HubModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="hub-model-"))
        self.path = self.dir / "hub.db"
        self.loop = asyncio.new_event_loop()
        self.clock = ManualClock(START)
        self.hub: Hub | None = None
        self.idents: dict[str, Ident] = {}
        self.humans: dict[str, Any] = {}  # name -> HumanClient (each on its own HubClient)
        self.channels: dict[str, MChannel] = {}
        self.open_tasks: dict[str, asyncio.Task] = {}
        self.touched: set[str] = set()  # channels whose hub-side WAL may be read (see check)
        self.counter = 0
        self.crashes = 0
        self.worker: asyncio.subprocess.Process | None = None

    # -- plumbing --------------------------------------------------------------------------------

    def run(self, coro: Any, timeout: float = 60.0) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def by_id(self) -> dict[str, Ident]:
        return {i.agent_id: i for i in self.idents.values()}

    async def _open_hub(self) -> None:
        self.hub = await Hub.open(SqliteStore(self.path), clock=self.clock, **HUB_KW)
        self.touched = set()
        for name, ident in self.idents.items():
            if ident.kind == "human":
                self.humans[name] = await HubClient.local(self.hub).attach_human(name, auto_ack_invites=False)

    async def _close_hub(self) -> None:
        for human in self.humans.values():
            await human.hub_client.close()
        self.humans.clear()
        if self.hub is not None:
            await self.hub.close()
        tasks = list(self.open_tasks.values())
        self.open_tasks.clear()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _settle(self) -> None:
        for _ in range(3):
            await asyncio.sleep(0)
        hub = self.hub
        humans = [self.idents[n].agent_id for n in self.humans]
        await until(lambda: all(hub.pending_inbox(a) == 0 for a in humans), timeout=5)

    async def _post(self, op: Op) -> None:
        """Run one channel op through the hub (humans via their HubClient, agents via the Hub)."""
        ident = self.by_id().get(op.sender)
        human = self.humans.get(ident.name) if ident else None
        try:
            if op.kind == "close":
                if human is not None:
                    op.result = await human.close_channel(op.cid, reason=op.text)
                else:
                    op.result = await self.hub.close_channel(op.cid, reason=op.text)
                return
            if op.kind == "text":
                env = Envelope(op.cid, op.sender, None, EV_TEXT, {"text": op.text})
            else:
                event = EV_CHANNEL_INVITE_ACK if op.kind == "ack" else EV_CHANNEL_INVITE_REJECT
                env = Envelope(op.cid, op.sender, None, event, {"channel_id": op.cid})
            if human is not None:
                op.result = await human.post_envelope(env)
            else:
                op.result = await self.hub.post_envelope(env)
        except NetworkError as exc:
            op.exc = exc

    async def _apply_ops(self, ops: list[Op]) -> None:
        """Check ``ops`` (already run) against the model, channel by channel, and advance the model."""
        for cid in dict.fromkeys(op.cid for op in ops):
            stored = [json.loads(t) for t in await self.hub.store.read_wal(cid)]
            mine = [op for op in ops if op.cid == cid]
            self.channels[cid] = linearize(self.channels[cid], mine, stored)
            self._reap(cid)

    def _reap(self, cid: str) -> None:
        task = self.open_tasks.get(cid)
        if task is not None and task.done():
            del self.open_tasks[cid]
            if not task.cancelled():
                task.exception()

    # -- rules -----------------------------------------------------------------------------------

    @initialize()
    def start(self) -> None:
        async def go() -> None:
            await self._open_hub()
            await self._register("ana", "human")
            await self._register("ben", "agent")
            await self._register("cy", "human")
            ana, ben, cy = (self.idents[n] for n in ("ana", "ben", "cy"))
            await self._open(ana, "conversation", [ben.agent_id], None, {}, None, None, None, [ben.agent_id])
            others = [ana.agent_id, ben.agent_id]
            await self._open(cy, "discussion", others, 600, {}, None, None, None, others)

        self.run(go())

    async def _register(self, name: str, kind: str) -> None:
        taken = name in self.idents
        try:
            if kind == "human":
                hc = HubClient.local(self.hub)
                try:
                    human = await hc.register_human(Passport(name=name, kind="human"), auto_ack_invites=False)
                except BaseException:
                    await hc.close()
                    raise
                agent_id = human.agent_id
            else:
                agent_id = (await self.hub.register_identity(Passport(name=name, kind="agent"))).agent_id
        except NetworkError as exc:
            if POISON in name:
                return  # refused: the check verifies it left no ghost behind
            assert taken, f"registering {kind} {name!r} failed: {type(exc).__name__}: {exc}"
            assert isinstance(exc, ProtocolError) and "already registered" in str(exc), str(exc)
            return
        assert not taken, f"a second {kind} named {name!r} was registered"
        assert POISON not in name, f"a name with a lone surrogate was registered as {agent_id}"
        self.idents[name] = Ident(name, agent_id, kind)
        NAME_OF[agent_id] = name
        if kind == "human":
            self.humans[name] = human

    @precondition(lambda self: len(self.idents) < len(NAMES))
    @rule(name=st.sampled_from(NAMES), kind=st.sampled_from(["human", "agent"]), poison=st.booleans())
    def register(self, name: str, kind: str, poison: bool) -> None:
        self.run(self._register(f"x{POISON}{name}" if poison else name, kind))

    @precondition(lambda self: len(self.idents) >= 2)
    @rule(data=st.data())
    def open_channel(self, data: st.DataObject) -> None:
        names = list(self.idents)
        kind = data.draw(st.sampled_from(KINDS), label="kind")
        creator = self.idents[data.draw(st.sampled_from(names), label="creator")]
        others_pool = [n for n in names if n != creator.name]
        variant = data.draw(
            st.sampled_from(["ok", "ok", "ok", "ok", "duplicate", "three_party", "bad_knob", "poison"]),
            label="variant",
        )
        if kind in ("consulting", "conversation"):
            count = 1
        else:
            count = data.draw(st.integers(1, min(3, len(others_pool))), label="others")
        others = data.draw(st.permutations(others_pool), label="order")[:count]
        other_ids = [self.idents[n].agent_id for n in others]
        ids = [creator.agent_id, *other_ids]
        ttl = data.draw(st.sampled_from([None, 30, 90, 600]), label="ttl")
        knobs: dict[str, Any] = {}
        max_turns = None
        if kind == "conversation":
            max_turns = data.draw(st.sampled_from([3, 2, 1, None]), label="max_turns")
            if max_turns is not None:
                knobs["max_turns"] = max_turns
        elif kind == "workflow":
            max_turns = data.draw(st.sampled_from([3, 5, 2, None]), label="max_turns")
            knobs["graph"] = TransitionGraph.round_robin(ids, max_turns).to_dict()
        intent = None
        expected: Refusal | None = None
        participants = list(other_ids)
        if variant == "duplicate":
            participants = [other_ids[0], other_ids[0]]
            expected = Refusal(ProtocolError, "participant listed twice")
        elif variant == "three_party" and kind in ("consulting", "conversation") and len(others_pool) >= 2:
            participants = [self.idents[n].agent_id for n in others_pool[:2]]
            expected = Refusal(ProtocolError, f"{kind} requires exactly one respondent")
        elif variant == "bad_knob" and kind == "conversation":
            knobs["max_turns"] = 0
            expected = Refusal(ProtocolError, "max_turns must be a positive integer")
        elif variant == "poison":
            intent = f"plan{POISON}"
            expected = Refusal(NetworkError, "")
        acks = data.draw(st.permutations(other_ids), label="ack_order")
        if data.draw(st.sampled_from(["all", "all", "all", "some"]), label="acks") == "some":
            acks = acks[: data.draw(st.integers(0, len(acks) - 1), label="acks_now")]
        self.run(self._open(creator, kind, participants, ttl, knobs, intent, expected, max_turns, acks))

    async def _open(
        self,
        creator: Ident,
        kind: str,
        participants: list[str],
        ttl: int | None,
        knobs: dict[str, Any],
        intent: str | None,
        expected: Refusal | None,
        max_turns: int | None,
        acks: list[str],
    ) -> None:
        hub = self.hub
        before = set(hub.channels)
        human = self.humans.get(creator.name)
        create = human.hub_client.create_channel if human is not None else hub.create_channel
        now = self.clock()
        task = asyncio.get_running_loop().create_task(
            create(
                creator_id=creator.agent_id,
                manifest_type=kind,
                participants=participants,
                ttl=ttl,
                knobs=knobs or None,
                intent=intent,
            )
        )
        new: list[str] = []

        async def started() -> bool:
            new[:] = [c for c in hub.channels if c not in before]
            if task.done() or not new:
                return task.done()
            return len(await hub.store.read_wal(new[0])) >= len(participants)

        await until(started, message="the channel's invites were not stored")
        if expected is not None:
            assert task.done(), f"open of {kind} with bad input ({expected}) did not fail"
            exc = task.exception()
            assert exc is not None and expected.matches(exc), (
                f"open of {kind}: expected {expected}, got {type(exc).__name__}: {exc}"
            )
            return  # the check verifies no (ghost) channel was left behind
        if task.done() and task.exception() is not None:
            exc = task.exception()
            raise AssertionError(f"a valid open of {kind} failed: {type(exc).__name__}: {exc}")
        assert len(new) == 1, f"one open created {len(new)} channels"
        cid = new[0]
        ch = MChannel(
            cid,
            kind,
            [creator.agent_id, *participants],
            pending_acks=list(participants),
            max_turns=max_turns,
            expires_at=add_seconds(now, float(ttl) if ttl is not None else DEFAULT_TTL),
        )
        invite_data = {
            "channel_id": cid,
            "manifest_type": kind,
            "manifest_version": 1,
            "creator_id": creator.agent_id,
            "knobs": json.loads(json.dumps(knobs)),
            "labels": {},
        }
        for pid in participants:
            ch.wal.append(MEnv(EV_CHANNEL_INVITE, creator.agent_id, invite_data, None, [pid]))
        self.channels[cid] = ch
        self.open_tasks[cid] = task
        self.touched.add(cid)
        for pid in acks:
            op = Op("ack", cid, pid)
            await self._post(op)
            await self._apply_ops([op])
        if self.channels[cid].state == "active":
            md = await asyncio.wait_for(task, 5)
            assert md.channel_id == cid

    @precondition(lambda self: self.channels)
    @rule(data=st.data())
    def ack(self, data: st.DataObject) -> None:
        pending = [c for c, ch in self.channels.items() if ch.state == "pending"]
        cid = data.draw(st.sampled_from(pending or list(self.channels)), label="channel")
        ch = self.channels[cid]
        ids = [i.agent_id for i in self.idents.values()]
        sender = data.draw(st.sampled_from(ch.pending_acks or ids), label="sender")
        kind = data.draw(st.sampled_from(["ack", "ack", "ack", "reject"]), label="kind")
        op = Op(kind, cid, sender)

        async def go() -> None:
            await self._post(op)
            await self._apply_ops([op])

        self.run(go())
        self.touched.add(cid)

    @precondition(lambda self: self.channels)
    @rule(data=st.data())
    def post(self, data: st.DataObject) -> None:
        op = self._draw_text(data)

        async def go() -> None:
            await self._post(op)
            await self._apply_ops([op])

        self.run(go())
        self.touched.add(op.cid)

    def live_first(self) -> list[str]:
        """Channel ids, active ones first (Hypothesis favours the first choices)."""
        return sorted(self.channels, key=lambda c: self.channels[c].state != "active")

    def _draw_text(self, data: st.DataObject, cids: list[str] | None = None, ahead: Any = None) -> Op:
        """A text post, mostly into an active channel by whoever may speak (sometimes anything).

        ``ahead`` counts the posts a burst already drew per channel, so a burst's posts mostly take turns.
        """
        if cids is None:
            live = [c for c in self.live_first() if self.channels[c].state == "active"]
            wild = not live or data.draw(st.sampled_from([False, False, False, True]), label="wild")
            cids = self.live_first() if wild else live
        cid = data.draw(st.sampled_from(cids), label="channel")
        ch = self.channels[cid]
        later = ahead[cid] if ahead is not None else 0
        if ahead is not None:
            ahead[cid] += 1
        if ch.kind in ("discussion", "workflow"):
            speakers = [ch.participants[(ch.turn_count + later) % len(ch.participants)]]
        elif ch.kind == "consulting" and int(ch.initiator_sent) + later < 2:
            speakers = [ch.participants[int(ch.initiator_sent) + later]]
        else:
            speakers = list(ch.participants)
        everyone = list(ch.participants) + [i.agent_id for i in self.idents.values()]
        choices = speakers * (12 // len(speakers)) + everyone
        sender = data.draw(st.sampled_from(choices), label="sender")
        return Op("text", cid, sender, self.fresh("m"))

    @precondition(lambda self: self.channels)
    @rule(data=st.data())
    def concurrent(self, data: st.DataObject) -> None:
        """Posts, closes and reads at once (one ``asyncio.gather``), maybe with a write the store refuses."""
        live = [c for c, ch in self.channels.items() if ch.state == "active"] or list(self.channels)
        self.run(self._concurrent(*self._draw_burst(data, live)))

    @precondition(lambda self: any(ch.wal for ch in self.channels.values()))
    @rule(data=st.data())
    def restart_then_burst(self, data: st.DataObject) -> None:
        """A clean restart, then a burst is the first thing to touch channels whose WAL is not loaded yet."""
        live = [c for c, ch in self.channels.items() if ch.state == "active"] or list(self.channels)
        burst = self._draw_burst(data, live)

        async def go() -> None:
            await self._close_hub()
            await self._open_hub()
            await self._concurrent(*burst)

        self.run(go())

    def _draw_burst(
        self, data: st.DataObject, pool: list[str]
    ) -> tuple[list[Op], list[str], str | None, str]:
        cids = data.draw(
            st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True), label="channels"
        )
        ahead: collections.Counter[str] = collections.Counter()
        ops = [
            self._draw_text(data, cids, ahead)
            for _ in range(data.draw(st.integers(2, 6).map(lambda n: 8 - n), label="posts"))
        ]
        if data.draw(st.booleans(), label="with_close"):
            cid = data.draw(st.sampled_from(cids), label="close_channel")
            ops.insert(
                data.draw(st.integers(0, len(ops)).map(lambda i: len(ops) - i), label="close_at"),
                Op("close", cid, self.channels[cid].creator, self.fresh("stop")),
            )
        reads = data.draw(st.lists(st.sampled_from(cids), max_size=3), label="reads")
        poison = data.draw(st.sampled_from([None, "resume", "register"]), label="poison")
        victim = data.draw(st.sampled_from(sorted(self.idents)), label="victim")
        return ops, reads, poison, victim

    async def _concurrent(self, ops: list[Op], reads: list[str], poison: str | None, victim: str) -> None:
        hub = self.hub
        before = {cid: len(self.channels[cid].wal) for cid in dict.fromkeys(op.cid for op in ops)}
        read_results: list[tuple[str, list[Envelope]]] = []

        async def read(cid: str) -> None:
            read_results.append((cid, await hub.read_wal(cid)))

        async def bad_write() -> None:
            try:
                if poison == "resume":
                    await hub.set_resume(self.idents[victim].agent_id, Resume(summary=f"bad{POISON}"))
                else:
                    await hub.register_identity(Passport(name=f"g{POISON}{self.counter}", kind="agent"))
            except NetworkError:
                return
            raise AssertionError(f"a {poison} with a lone surrogate was accepted")

        jobs = [self._post(op) for op in ops] + [read(c) for c in reads]
        if poison:
            jobs.append(bad_write())
        await asyncio.gather(*jobs)
        await self._apply_ops(ops)
        for cid, got in read_results:
            stored = [json.loads(t) for t in await hub.store.read_wal(cid)]
            n = len(got)
            assert before.get(cid, 0) <= n <= len(stored), (
                f"a concurrent read_wal of channel {cid} returned {n} envelopes; the WAL had "
                f"{before.get(cid, 0)} before the step and {len(stored)} after"
            )
            assert [e.to_dict() for e in got] == stored[:n], (
                f"a concurrent read_wal of channel {cid} is not a prefix of the stored WAL"
            )
        self.touched.update(before)
        self.touched.update(reads)

    @precondition(lambda self: self.channels)
    @rule(data=st.data())
    def close(self, data: st.DataObject) -> None:
        ended = [c for c, ch in self.channels.items() if ch.state in TERMINAL]
        live = [c for c in self.channels if c not in ended]
        cid = data.draw(st.sampled_from([*ended, "0" * 32, *reversed(live)]), label="channel")
        actor = data.draw(st.sampled_from([i.agent_id for i in self.idents.values()]), label="actor")
        op = Op("close", cid, actor, self.fresh("bye"))

        async def go() -> None:
            await self._post(op)
            if cid not in self.channels:
                assert isinstance(op.exc, NotFoundError) and "channel not found" in str(op.exc), op.exc
                return
            assert op.exc is None, f"close of channel {cid} failed: {op.exc}"
            await self._apply_ops([op])

        self.run(go())
        self.touched.add(cid)

    @rule(seconds=st.sampled_from([10, 31, 61, 700, 8000]))
    def expire(self, seconds: int) -> None:
        self.clock.advance(seconds)
        now = self.clock()
        due = [
            ch
            for ch in self.channels.values()
            if ch.state not in TERMINAL and ch.expires_at and ch.expires_at <= now
        ]

        async def go() -> None:
            count = await self.hub.expire_due()
            assert count == len(due), f"expire_due expired {count} channels, the model expects {len(due)}"
            for ch in due:
                ch.close("expired", "ttl_expired")
                self._reap(ch.cid)

        self.run(go())

    @rule(data=st.data())
    def skill_or_resume(self, data: st.DataObject) -> None:
        ident = self.idents[data.draw(st.sampled_from(sorted(self.idents)), label="who")]
        what = data.draw(st.sampled_from(["skill", "no_skill", "resume"]), label="what")
        poison = data.draw(st.booleans(), label="poison")
        text = self.fresh("card ") + (POISON if poison else "")
        human = self.humans.get(ident.name)

        async def go() -> None:
            try:
                if what == "resume":
                    if human is not None:
                        await human.set_resume(Resume(summary=text))
                    else:
                        await self.hub.set_resume(ident.agent_id, Resume(summary=text))
                else:
                    skill = None if what == "no_skill" else f"---\nname: {ident.name}\n---\n{text}\n"
                    if human is not None:
                        await human.set_skill(skill)
                    else:
                        await self.hub.set_skill(ident.agent_id, skill)
            except NetworkError as exc:
                assert poison and what != "no_skill", f"set {what} failed: {type(exc).__name__}: {exc}"
                return
            assert not (poison and what != "no_skill"), f"a {what} with a lone surrogate was accepted"
            if what == "resume":
                ident.summary = text
            else:
                ident.skill = skill

        self.run(go())

    @rule()
    def read_everything(self) -> None:
        """Read every channel's WAL through the hub at once (concurrent lazy loads after a restart)."""

        async def go() -> None:
            cids = list(self.channels)
            got = await asyncio.gather(*(self.hub.read_wal(c) for c in cids))
            for cid, envs in zip(cids, got, strict=True):
                stored = [json.loads(t) for t in await self.hub.store.read_wal(cid)]
                assert [e.to_dict() for e in envs] == stored, f"read_wal of {cid} differs from the store"

        self.run(go())
        self.touched.update(self.channels)

    @rule()
    def clean_restart(self) -> None:
        async def go() -> None:
            await self._close_hub()
            await self._open_hub()

        self.run(go())

    @precondition(lambda self: self.crashes < 1)
    @rule(data=st.data())
    def crash_restart(self, data: st.DataObject) -> None:
        """Close, let a subprocess open the same file, write, and die by SIGKILL mid-write; reopen."""
        self.crashes += 1
        plan: list[Op] = []
        names: list[str] = []
        for _ in range(data.draw(st.integers(0, 5), label="plan_size")):
            kind = data.draw(
                st.sampled_from(["text", "text", "text", "close", "register", "resume"]), label="op"
            )
            if kind in ("text", "close") and not self.channels:
                continue
            if kind == "text":
                plan.append(self._draw_text(data))
            elif kind == "close":
                cid = data.draw(st.sampled_from(list(self.channels)), label="channel")
                plan.append(Op("close", cid, "", self.fresh("crashclose")))
            elif kind == "register":
                name = data.draw(st.sampled_from(NAMES), label="name")
                names.append(name)
                plan.append(Op("register", "", "", name))
            else:
                who = data.draw(st.sampled_from(sorted(self.idents)), label="who")
                plan.append(Op("resume", "", self.idents[who].agent_id, self.fresh("crash card ")))
        tails = sorted(
            c
            for c, ch in self.channels.items()
            if ch.kind == "conversation"
            and ch.state == "active"
            and not ch.max_turns
            and not any(op.kind == "close" and op.cid == c for op in plan)
        )
        tail = data.draw(st.sampled_from([*tails, None]), label="tail") if tails else None
        tail_acks = data.draw(st.integers(0, 12), label="tail_acks")
        self.run(self._crash(plan, tail, tail_acks))

    async def _crash(self, plan: list[Op], tail: str | None, tail_acks: int) -> None:
        await self._close_hub()
        self.hub = None
        spec = []
        for op in plan:
            item = {"op": op.kind, "cid": op.cid, "sender": op.sender, "text": op.text}
            if op.kind == "register":
                item["name"] = op.text
            spec.append(item)
        senders = self.channels[tail].participants if tail else None
        cfg = {
            "path": str(self.path),
            "now": self.clock(),
            "hub": HUB_KW,
            "plan": spec,
            "tail": [tail, senders] if tail else None,
        }
        proc = self.worker = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            WORKER,
            json.dumps(cfg),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        lines: list[dict[str, Any]] = []
        acked: list[dict[str, Any]] = []
        try:
            while True:
                raw = await asyncio.wait_for(proc.stdout.readline(), 30)
                if not raw:
                    err = (await proc.stderr.read()).decode(errors="replace")
                    raise AssertionError(f"the crash worker died before it was killed:\n{err[-3000:]}")
                line = json.loads(raw)
                if "tail" in line:
                    acked.append(line)
                    if len(acked) >= tail_acks:
                        break
                elif line.get("done"):
                    if not tail or tail_acks == 0:
                        break
                else:
                    lines.append(line)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGKILL)
            await proc.wait()
            self.worker = None
        assert proc.returncode == -signal.SIGKILL, f"worker exit code {proc.returncode}"
        assert len(lines) == len(plan), f"the worker reported {len(lines)} of {len(plan)} plan steps"
        await self._open_hub()  # hydrate from a crash: no snapshot of this session's writes
        for op, line in zip(plan, lines, strict=True):
            if line["ok"]:
                op.result = line["result"]
            else:
                op.exc = RemoteError(line["mro"], line["msg"])
            if op.kind == "register":
                taken = op.text in self.idents
                if taken:
                    assert op.exc is not None and Refusal(ProtocolError, "already registered").matches(op.exc)
                else:
                    assert op.exc is None, f"crash worker: registering {op.text!r} failed: {op.exc}"
                    self.idents[op.text] = Ident(op.text, op.result, "agent")
                    NAME_OF[op.result] = op.text  # the hub's refusals name it (as _register records)
            elif op.kind == "resume":
                assert op.exc is None, f"crash worker: set_resume failed: {op.exc}"
                self.by_id()[op.sender].summary = op.text
        for cid in dict.fromkeys(op.cid for op in plan if op.cid):
            stored = [json.loads(t) for t in await self.hub.store.read_wal(cid)]
            self.channels[cid] = serial(self.channels[cid], [op for op in plan if op.cid == cid], stored)
        if tail:
            await self._adopt_tail(tail, acked)

    async def _adopt_tail(self, cid: str, acked: list[dict[str, Any]]) -> None:
        """The WAL must hold every acknowledged tail post, each writer's in order, then nothing else."""
        ch = self.channels[cid]
        stored = [json.loads(t) for t in await self.hub.store.read_wal(cid)]
        extra = stored[len(ch.wal) :]
        seen: dict[int, int] = {}
        for entry in extra:
            text = (entry.get("event_data") or {}).get("text", "")
            assert entry.get("event_type") == EV_TEXT and text.startswith("tail"), (
                f"after the crash, channel {cid} holds an unexpected entry {brief(entry)}"
            )
            k, i = (int(x) for x in text[4:].split("-"))
            assert i == seen.get(k, -1) + 1, f"tail writer {k}: {text} follows post {seen.get(k, -1)}"
            assert entry["sender_id"] == ch.participants[k % 2]
            seen[k] = i
            apply(ch, Op("text", cid, entry["sender_id"], text), entry["envelope_id"])
        ids = {e["envelope_id"] for e in extra}
        lost = [a for a in acked if a["id"] not in ids]
        assert not lost, f"acknowledged before the SIGKILL but missing after the restart: {lost}"

    # -- the check after every step ----------------------------------------------------------------

    @invariant()
    def agrees_with_model(self) -> None:
        if self.hub is not None:
            self.run(self._check())

    async def _check(self) -> None:
        await self._settle()
        hub = self.hub
        store = hub.store
        # identities: memory and store, no ghosts
        want = {i.name: i.agent_id for i in self.idents.values()}
        got = {p.name: p.agent_id for p in hub.query_agents(limit=None)}
        assert got == want, f"hub identities {sorted(got)} differ from the model's {sorted(want)}"
        stored_agents = {r["passport"]["name"]: r for r in await store.load_agents()}
        assert {n: r["agent_id"] for n, r in stored_agents.items()} == want, (
            f"stored identities {sorted(stored_agents)} differ from the model's {sorted(want)}"
        )
        for ident in self.idents.values():
            assert hub.find_agent_id(ident.name) == ident.agent_id
            assert hub.lookup_resume(ident.agent_id).summary == ident.summary, f"{ident.name}'s resume"
            assert (stored_agents[ident.name].get("resume") or {}).get("summary", "") == ident.summary
            info = hub.get_skill_info(ident.agent_id)
            assert info["generated"] is (ident.skill is None), f"{ident.name}'s skill: {info}"
            if ident.skill is not None:
                assert info["skill_md"] == ident.skill
            assert stored_agents[ident.name].get("skill_md") == ident.skill
        # channels: metadata in memory and in the store
        listed = {md.channel_id for md in hub.query_channels(include_terminal=True, limit=None)}
        assert listed == set(self.channels), (
            f"the hub lists channels {sorted(listed - set(self.channels))} the model does not have, and "
            f"misses {sorted(set(self.channels) - listed)}"
        )
        stored_channels = {d["channel_id"]: d for d in await store.load_channels()}
        assert set(stored_channels) == set(self.channels), "stored channels differ from the model's"
        stats = hub.channel_stats()
        walls: dict[str, list[dict[str, Any]]] = {}
        for cid, ch in self.channels.items():
            md = hub.lookup_channel(cid)
            where = f"channel {cid} ({ch.kind})"
            assert md.state.value == ch.state, f"{where}: state {md.state.value}, model {ch.state}"
            assert stored_channels[cid]["state"] == ch.state, f"{where}: stored state differs"
            assert md.close_reason == ch.close_reason, f"{where}: close reason {md.close_reason!r}"
            assert md.participant_ids() == ch.participants, f"{where}: participants"
            assert sorted(md.pending_acks) == sorted(ch.pending_acks), f"{where}: pending acks"
            assert md.expires_at == ch.expires_at, f"{where}: expires_at {md.expires_at}"
            n = len(ch.wal)
            assert hub.wal_count(cid) == n, f"{where}: wal_count {hub.wal_count(cid)}, model {n}"
            assert stats[cid]["wal_count"] == n, f"{where}: channel_stats wal_count"
            assert await store.wal_count(cid) == n, f"{where}: store.wal_count {await store.wal_count(cid)}"
            stored = [json.loads(t) for t in await store.read_wal(cid)]
            assert len(stored) == n, f"{where}: store.read_wal has {len(stored)} rows, model {n}"
            for k, (expected, entry) in enumerate(zip(ch.wal, stored, strict=True)):
                problem = mismatch(expected, entry)
                assert problem is None, f"{where}: stored WAL entry {k + 1}: {problem}"
            ids = [e["envelope_id"] for e in stored]
            assert ids == sorted(set(ids)), f"{where}: envelope ids are not increasing in WAL order"
            seqs = [s for s, _ in await store.read_wal_seq(cid, 1, n)]
            assert seqs == list(range(1, n + 1)), f"{where}: store seqs {seqs}"
            walls[cid] = stored
            if ch.state in TERMINAL:
                continue
            state = hub.adapter_state(cid)
            assert state is not None, f"{where}: no adapter state"
            adapter = hub.adapter_for(cid)
            fresh = adapter.initial_state(md)
            for entry in stored:
                fresh = adapter.fold(Envelope(**entry), fresh)
            live = adapter.state_to_dict(state)
            assert live == adapter.state_to_dict(fresh), (
                f"{where}: adapter state {live} differs from a fresh fold of the stored WAL "
                f"{adapter.state_to_dict(fresh)}"
            )
            for key, value in (
                ("turn_count", ch.turn_count),
                ("last_envelope_id", ch.last_text_id),
                ("initiator_sent", ch.initiator_sent),
                ("respondent_replied", ch.respondent_replied),
            ):
                if key in live:
                    assert live[key] == value, f"{where}: adapter {key} {live[key]!r}, model {value!r}"
            turn = ch.expected_turn()
            if "expected_next_speaker" in live and turn is not None:
                assert live["expected_next_speaker"] == turn[0], f"{where}: expected speaker"
        assert hub.health()["envelopes"] == sum(len(ch.wal) for ch in self.channels.values())
        # pending turns (before anything below loads a WAL into the hub's cache)
        created = {e["envelope_id"]: e["created_at"] for wal in walls.values() for e in wal}
        for ident in self.idents.values():
            want_turns = set()
            for cid, ch in self.channels.items():
                turn = ch.expected_turn()
                if turn is not None and turn[0] == ident.agent_id:
                    trigger = turn[1]
                    want_turns.add((cid, trigger, created[trigger] if trigger else self.clock()))
            turns = hub.pending_turns_for(ident.agent_id)
            if inspect.isawaitable(turns):
                turns = await turns
            got_turns = {(t.channel_id, t.triggering_envelope_id, t.expected_at) for t in turns}
            assert got_turns == want_turns, (
                f"pending_turns_for({ident.name}): {got_turns}, model {want_turns}"
            )
        # the hub's own reads, for channels already used since the last (re)open: reading the others
        # would load their WALs now and hide races between lazy loads and the next step's posts
        for cid in self.touched & set(self.channels):
            stored = walls[cid]
            n = len(stored)
            envs = [e.to_dict() for e in await hub.read_wal(cid)]
            assert envs == stored, f"channel {cid}: read_wal ({len(envs)}) differs from the store ({n})"
            pairs = await hub.read_wal_seq(cid, 1, n)
            assert [(s, e.to_dict()) for s, e in pairs] == list(enumerate(stored, 1)), (
                f"channel {cid}: read_wal_seq differs from the store"
            )
            if n:
                found = await hub.find_envelope(cid, stored[-1]["envelope_id"])
                assert found is not None and found[0] == n, f"channel {cid}: find_envelope seq {found}"
        # open() returns once its quorum acked (or fails once the channel ends while pending)
        for cid, task in list(self.open_tasks.items()):
            if self.channels[cid].state != "pending":
                with contextlib.suppress(BaseException):
                    await asyncio.wait_for(asyncio.shield(task), 5)
                assert task.done(), (
                    f"open of channel {cid} still waits, the channel is {self.channels[cid].state}"
                )
                self._reap(cid)

    def teardown(self) -> None:
        try:
            if self.worker is not None:
                with contextlib.suppress(ProcessLookupError):
                    self.worker.kill()
                self.run(self.worker.wait())
            self.run(self._close_hub())
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)


HubModel.TestCase.settings = settings(
    max_examples=12,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)
TestHubModel = HubModel.TestCase

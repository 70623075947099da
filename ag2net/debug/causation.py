"""The causation map: which envelopes caused which, across channels.

``await causation_tree(hub, envelope_id)`` follows three kinds of link, from the envelope up to its root
cause and then down to everything the root led to:

- ``causation``: an envelope's ``causation_id`` (a reply names the envelope it answers, an ack its invite);
- ``delegate``: the prompt that opens a consulting channel made by ``delegate`` (its ``depth`` one more than
  the envelope the delegating agent was handling) hangs under that envelope. The link comes from the
  delegating agent's turn record (the turn triggered by that envelope called ``delegate`` with this very
  prompt); without a record, from the envelopes the agent could see in its other channels: the newest one
  at ``depth - 1`` created before the prompt (marked ``delegate_inferred``);
- tasks: each node carries its ``task_id``; the tree lists the tasks it touches with their owner, channel
  and state.

Every node knows its channel and seq. The tree is flat (``nodes`` by envelope id, each with its ``parent``
and ``children``), so a chain of any length is walked without recursion.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ag2net.debug.fields import FieldsDict
from ag2net.envelope import EV_TEXT, Envelope, visible_to
from ag2net.hub.dry_run import channel_log

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub
    from ag2net.views.wal import WalLog

CONSULTING = "consulting"
_SLICE = 1024  # envelopes indexed between two yields to the event loop (a few ms of CPU, two cold blocks)


@dataclass(slots=True)
class CausationNode(FieldsDict):
    envelope_id: str
    channel_id: str
    seq: int
    sender_id: str
    event_type: str
    depth: int
    created_at: str
    task_id: str | None = None
    causation_id: str | None = None
    link: str = "root"  # how it hangs under its parent: root, causation, delegate, delegate_inferred
    parent: str | None = None
    children: list[str] = field(default_factory=list)


@dataclass(slots=True)
class CausationTree:
    """``chain``: envelope ids from the root cause down to ``envelope_id``; ``nodes``: the whole tree."""

    envelope_id: str
    root: str
    chain: list[str]
    nodes: dict[str, CausationNode]
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    truncated: bool = False

    @property
    def channels(self) -> list[str]:
        seen: dict[str, None] = {}
        for node in self.nodes.values():
            seen.setdefault(node.channel_id, None)
        return list(seen)

    def walk(self) -> list[tuple[int, CausationNode]]:
        """``(level, node)`` in depth-first order from the root (iterative)."""
        out: list[tuple[int, CausationNode]] = []
        stack = [(0, self.root)]
        while stack:
            level, eid = stack.pop()
            node = self.nodes[eid]
            out.append((level, node))
            stack.extend((level + 1, child) for child in reversed(node.children))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {
            "envelope_id": self.envelope_id,
            "root": self.root,
            "chain": list(self.chain),
            "nodes": {eid: node.to_dict() for eid, node in self.nodes.items()},
            "tasks": dict(self.tasks),
            "truncated": self.truncated,
        }


class _ChannelIndex:
    """One channel's envelopes by id (with seq) and the envelopes answering each id (causation).

    Only the envelopes that answer another (a ``causation_id``) are kept beside their seq; the others are
    read back from the log when a tree reaches them (a root, a delegate prompt): a long channel's index
    then holds few objects, so the garbage collector's full collections stay short (keeping 100,000
    decoded envelopes made each one pause the event loop ~0.5 s)."""

    __slots__ = ("by_id", "children", "log", "scanned")

    def __init__(self, log: WalLog) -> None:
        self.log = log
        self.by_id: dict[str, tuple[int, Envelope | None]] = {}
        self.children: dict[str, list[str]] = {}
        self.scanned = 0

    async def refresh(self) -> None:
        """Index the envelopes appended since the last refresh, ``_SLICE`` at a time with a yield to the
        event loop between slices (a long channel's first index would otherwise freeze the loop for
        seconds). ``scanned`` only ever counts what was indexed, so a refresh cancelled at a yield (or
        stopped by a failing cold read) leaves a valid index the next refresh continues."""
        by_id, children = self.by_id, self.children
        while True:
            n = len(self.log)
            start = pos = self.scanned  # read afresh each slice: another refresh may have advanced it
            if n <= pos:
                return
            try:
                for env in self.log.iter_range(pos, min(n, pos + _SLICE)):
                    if env.causation_id:
                        by_id[env.envelope_id] = (pos + 1, env)
                        children.setdefault(env.causation_id, []).append(env.envelope_id)
                    else:
                        by_id[env.envelope_id] = (pos + 1, None)
                    pos += 1
            finally:
                self.scanned = pos
            if pos == start:
                return  # the log gave nothing back (it never shrinks): nothing more to index now
            if pos < n:
                await asyncio.sleep(0)

    def get(self, envelope_id: str) -> tuple[int, Envelope] | None:
        """``(seq, envelope)`` of an indexed envelope, or None."""
        hit = self.by_id.get(envelope_id)
        if hit is None:
            return None
        seq, env = hit
        return seq, env if env is not None else self.log[seq - 1]


#: Channel indexes kept per hub between calls (they only ever extend: the WAL is append-only).
_INDEXES: weakref.WeakKeyDictionary[Any, dict[str, _ChannelIndex]] = weakref.WeakKeyDictionary()


class _Map:
    """The envelopes of the channels a tree reaches, indexed once per call."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub
        index = _INDEXES.get(hub)
        if index is None:
            index = _INDEXES[hub] = {}
        self.index: dict[str, _ChannelIndex] = index
        self._delegates: dict[str, tuple[str, str]] | None = None  # prompt id -> (parent id, link)
        self._delegated: dict[str, list[tuple[str, str]]] = {}  # parent id -> [(prompt id, link)]
        self._turns: dict[str, list[dict[str, Any]]] = {}

    async def channel(self, channel_id: str) -> _ChannelIndex:
        idx = self.index.get(channel_id)
        if idx is not None and idx.scanned == self.hub.wal_count(channel_id):
            return idx
        log = await channel_log(self.hub, channel_id)
        if idx is None or len(log) < idx.scanned:
            idx = self.index[channel_id] = _ChannelIndex(log)
        idx.log = log  # the WAL only grows: what was indexed from an older log object stays right
        await idx.refresh()
        return idx

    async def find(self, envelope_id: str, hint: str | None = None) -> tuple[str, int, Envelope] | None:
        """``(channel_id, seq, envelope)`` for an id: the hinted and indexed channels first, then the store."""
        order = [c for c in (hint, *self.index) if c]
        for cid in dict.fromkeys(order):
            if cid not in self.hub.channels:
                continue
            hit = (await self.channel(cid)).get(envelope_id)
            if hit is not None:
                return cid, hit[0], hit[1]
        for cid in self.hub.channels:
            if cid in self.index:
                continue
            found = await self.hub.find_envelope(cid, envelope_id)
            if found is not None:
                await self.channel(cid)
                return cid, found[0], found[1]
        return None

    async def _turns_of(self, agent_id: str) -> list[dict[str, Any]]:
        turns = self._turns.get(agent_id)
        if turns is None:
            turns = self._turns[agent_id] = await self.hub.list_turns(agent_id=agent_id, limit=10_000)
        return turns

    async def delegates(self) -> dict[str, tuple[str, str]]:
        """Each delegate-opened consulting channel's prompt id -> (the envelope it was delegated from, link)."""
        if self._delegates is not None:
            return self._delegates
        links: dict[str, tuple[str, str]] = {}
        for cid, md in list(self.hub.channels.items()):
            if md.manifest.type != CONSULTING:
                continue
            rows = await self.hub.read_wal_seq(cid, 1, 16)
            prompt = next((e for _, e in rows if e.event_type == EV_TEXT), None)
            if prompt is None or prompt.depth < 1 or prompt.causation_id:
                continue
            parent = await self._delegated_from(prompt)
            if parent is not None:
                links[prompt.envelope_id] = parent
        self._delegates = links
        for prompt_id, (parent_id, link) in links.items():
            self._delegated.setdefault(parent_id, []).append((prompt_id, link))
        return links

    async def delegated_under(self, envelope_id: str) -> list[tuple[str, str]]:
        await self.delegates()
        return self._delegated.get(envelope_id, [])

    async def _delegated_from(self, prompt: Envelope) -> tuple[str, str] | None:
        text = prompt.event_data.get("text")
        for turn in await self._turns_of(prompt.sender_id):
            for call in turn.get("tool_calls") or ():
                if call.get("name") != "delegate":
                    continue
                try:
                    args = json.loads(call.get("arguments") or "{}")
                except ValueError:
                    continue
                if isinstance(args, dict) and args.get("prompt") == text and turn.get("trigger_envelope_id"):
                    return str(turn["trigger_envelope_id"]), "delegate"
        # no turn record: the newest envelope at depth - 1 the delegating agent could see before the prompt
        best: Envelope | None = None
        for cid, md in self.hub.channels.items():
            if cid == prompt.channel_id or prompt.sender_id not in md.participant_ids():
                continue
            log = await channel_log(self.hub, cid)
            for env in reversed(log.prefix()):
                if env.created_at and prompt.created_at and env.created_at > prompt.created_at:
                    continue
                if (
                    env.depth == prompt.depth - 1
                    and env.sender_id != prompt.sender_id
                    and env.event_type == EV_TEXT
                    and visible_to(env, prompt.sender_id)
                ):
                    if best is None or env.created_at > best.created_at:
                        best = env
                    break
        return (best.envelope_id, "delegate_inferred") if best is not None else None


def _node(cid: str, seq: int, env: Envelope) -> CausationNode:
    return CausationNode(
        envelope_id=env.envelope_id,
        channel_id=cid,
        seq=seq,
        sender_id=env.sender_id,
        event_type=env.event_type,
        depth=env.depth,
        created_at=env.created_at,
        task_id=env.task_id,
        causation_id=env.causation_id,
    )


async def causation_tree(
    hub: Hub, envelope_id: str, *, channel_id: str | None = None, limit: int = 100_000
) -> CausationTree:
    """The chain from the root cause to ``envelope_id`` and the tree under that root (at most ``limit``
    nodes; ``truncated`` says when more were left out). ``channel_id`` saves looking the envelope up."""
    from ag2net.errors import NotFoundError

    space = _Map(hub)
    found = await space.find(envelope_id, channel_id)
    if found is None:
        raise NotFoundError(f"envelope not found in any channel: {envelope_id}")
    chain = await _chain_up(space, found, envelope_id)
    root_cid, root_seq, root_env, _ = chain[0]
    related = _related_channels(hub, root_cid)
    for c in related:
        await space.channel(c)
    root = _node(root_cid, root_seq, root_env)
    nodes, truncated = await _tree_down(space, root, related, limit)
    return CausationTree(
        envelope_id=envelope_id,
        root=root.envelope_id,
        chain=[c[2].envelope_id for c in chain],
        nodes=nodes,
        tasks=_tasks_of(hub, nodes),
        truncated=truncated,
    )


async def _chain_up(
    space: _Map, found: tuple[str, int, Envelope], envelope_id: str
) -> list[tuple[str, int, Envelope, str]]:
    """Up: the chain of causes, root first; each entry names the link to the next one."""
    cid, seq, env = found
    chain: list[tuple[str, int, Envelope, str]] = [(cid, seq, env, "root")]
    seen = {envelope_id}
    while True:
        cid, seq, env, _ = chain[-1]
        parent: tuple[str, int, Envelope] | None = None
        link = "causation"
        if env.causation_id:
            parent = await space.find(env.causation_id, cid)
        if parent is None and env.event_type == EV_TEXT and env.depth >= 1:
            delegated = (await space.delegates()).get(env.envelope_id)
            if delegated is not None:
                parent = await space.find(delegated[0])
                link = delegated[1]
        if parent is None or parent[2].envelope_id in seen:
            break
        seen.add(parent[2].envelope_id)
        chain[-1] = (cid, seq, env, link)
        chain.append((*parent, "root"))
    chain.reverse()
    return chain


def _related_channels(hub: Hub, root_cid: str) -> list[str]:
    """Where the root's consequences may lie: its channel and every channel sharing a participant with it
    (a causation_id may name an envelope of another channel)."""
    members = set(hub.lookup_channel(root_cid).participant_ids())
    return [root_cid] + [
        c
        for c, md in list(hub.channels.items())
        if c != root_cid and members.intersection(md.participant_ids())
    ]


async def _tree_down(
    space: _Map, root: CausationNode, related: list[str], limit: int
) -> tuple[dict[str, CausationNode], bool]:
    """Down: everything the root led to, breadth first (at most ``limit`` nodes; and whether some were cut)."""
    nodes = {root.envelope_id: root}
    queue = [root]
    truncated = False
    at = 0
    while at < len(queue):
        node = queue[at]
        at += 1
        own = node.channel_id
        if own not in space.index:
            await space.channel(own)
        kids: list[tuple[str, str, str]] = []
        for c in related if own in related else [own, *related]:
            kids += [(c, kid, "causation") for kid in space.index[c].children.get(node.envelope_id, ())]
        for prompt_id, link in await space.delegated_under(node.envelope_id):
            hit = await space.find(prompt_id)
            if hit is not None:
                kids.append((hit[0], prompt_id, link))
        for kid_cid, kid_id, link in kids:
            if kid_id in nodes:
                continue
            if len(nodes) >= limit:
                truncated = True
                break
            hit = (await space.channel(kid_cid)).get(kid_id)
            assert hit is not None  # indexed: its channel's index lists it as a child
            kid_seq, kid_env = hit
            child = _node(kid_cid, kid_seq, kid_env)
            child.link, child.parent = link, node.envelope_id
            node.children.append(kid_id)
            nodes[kid_id] = child
            queue.append(child)
    return nodes, truncated


def _tasks_of(hub: Hub, nodes: dict[str, CausationNode]) -> dict[str, dict[str, Any]]:
    """The tasks the nodes carry: owner, channel, state and title (``unknown`` for one the hub lost)."""
    tasks: dict[str, dict[str, Any]] = {}
    for node in nodes.values():
        if node.task_id and node.task_id not in tasks:
            task = hub.tasks.get(node.task_id)
            tasks[node.task_id] = (
                {
                    "owner_id": task.owner_id,
                    "channel_id": task.channel_id,
                    "state": task.state.value,
                    "title": task.spec.title,
                }
                if task is not None
                else {"owner_id": None, "channel_id": None, "state": "unknown", "title": ""}
            )
    return tasks


__all__ = ["CausationNode", "CausationTree", "causation_tree"]

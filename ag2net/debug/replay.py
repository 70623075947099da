"""Replay and compare: drive a forked channel's agents again and line the result up with the original.

``result = await replay(source, sandbox, overrides=...)`` attaches an ``AgentClient`` to the sandbox for
every agent that took turns in the original channel (the default handler, turn records and plugin tools
of the real network), with the system prompt its turn records show, its own tools rebuilt from the
schemas its turns were offered, and a ``ReplayModel`` unless an override gives another model.

Each agent starts at its first turn after the fork seq, with its turn count and history as they were
then: turns whose output lies in the prefix are done; a turn that started before the fork point and
answered after it (the ack of an invite, the answer to the last question) is run again, on the same
envelope, delivered again through the agent's endpoint as the hub delivers.

Then it walks the original envelopes after the fork point in order:

- those the network makes by itself (the hub's ``opened``/``closed``, an attached agent's invite ack, a
  replayed turn's reply or what its tools posted) are awaited from the sandbox;
- the rest (posted by a script, a person or the hub's ``create_channel``: the invites, the first
  question, a human's answer) are posted again, as their sender, once everything before them is there.

While the replay is faithful, each agent handles an envelope only once the sandbox holds what the
original held when that agent started on it (so acks and turns land in the original order, whatever the
scheduler does). It stops at the first divergence (the sandbox made something else at that position, or
nothing within ``step_timeout``), then lets the sandbox run on until the channel closes, ``turn_budget``
turns have been taken or ``timeout`` passes.

Tools. A tool call is answered by its tool policy, per agent and tool (``Override.tools``, key ``"*"``
for all of an agent's tools): ``recorded`` (the default) answers with the result the original call
got, and does again what that call did to the channel (an envelope it posted, a close), so the next
model request is the recorded one; a workflow's ``Handoff``/``Finish`` is rebuilt from the round's
routing. ``live`` calls the real function: the network plugin's tools always exist in the sandbox, an
agent's own tools only when ``replay(functions=...)`` provides them. ``static:JSON`` answers with that
value. A call no recording answers runs live when the tool exists, else fails and the verdict says so.

A ``ReplayModel`` answers a turn only when the whole model request (system prompt, messages, tools
offered, model parameters: ``ModelCall.digest``) equals a recorded one, with that turn's tool calls and
reply. A changed request gets no answer: the turn fails and the verdict says, in words, which agent needs
a real model (``scripted`` or ``openai``) to go on.

``compare(result)`` (``ag2net.debug.replay_compare``) aligns the two transcripts envelope by envelope and the
turns per agent, and gives the verdict: "completed: 20 of 20 envelopes reproduced" or "stopped early at seq N
because …".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.adapters.transitions import Finish, Handoff
from ag2net.agent import Agent
from ag2net.agent.agent import result_text
from ag2net.agent.tool import Tool, as_tool
from ag2net.client import HubClient
from ag2net.client.handler import default_handler
from ag2net.debug.fork import Sandbox
from ag2net.debug.replay_compare import Comparison, ReplayResult, compare, same_post
from ag2net.debug.replay_model import (
    CLOSES,
    HANDLER_MADE,
    HUB_MADE,
    PlacedTurn,
    ReplayDiverged,
    ReplayModel,
    place_turns,
)
from ag2net.envelope import (
    EV_PACKET,
    Envelope,
)
from ag2net.errors import ProtocolError
from ag2net.events import ToolCallEvent, ToolResultEvent
from ag2net.hub.hub import Hub
from ag2net.views.registry import (
    VIEW_POLICIES_KNOB,
    registered_views,
    resolve_view,
    view_from_spec,
    view_spec,
)

TOOL_POLICIES = "recorded, live or static:JSON"


# ----------------------------------------------------------------------------------------- tool policy


@dataclass(frozen=True, slots=True)
class ToolPolicy:
    """How a tool call is answered in the replay: ``recorded``, ``live`` or ``static`` (with ``value``)."""

    kind: str = "recorded"
    value: Any = None

    @classmethod
    def parse(cls, text: str | ToolPolicy) -> ToolPolicy:
        """``recorded``, ``live`` or ``static:JSON``; ``ValueError`` (one sentence) otherwise."""
        if isinstance(text, ToolPolicy):
            return text
        if not isinstance(text, str):
            raise ValueError(f"a tool policy is one of {TOOL_POLICIES}; got {text!r}")
        word, colon, rest = text.strip().partition(":")
        if word in ("recorded", "live") and not colon:
            return cls(word)
        if word == "static" and colon:
            try:
                return cls("static", json.loads(rest))
            except ValueError as exc:
                raise ValueError(f'static:{rest} is not JSON ({exc}); write e.g. static:"done"') from None
        raise ValueError(f"tool policy {text!r} is not one of {TOOL_POLICIES}")

    def __str__(self) -> str:
        if self.kind == "static":
            return "static:" + json.dumps(self.value, ensure_ascii=False)
        return self.kind


@dataclass(slots=True)
class Override:
    """What to change for one agent in the replay (None keeps the original).

    ``tools``: tool name (or ``"*"``) → tool policy (``ToolPolicy`` or its text); unnamed tools are
    ``recorded``. ``live``: the model a turn no recording answers calls (minimal replay; ``model`` instead
    answers every turn); ``attach_plugin=False`` attaches the agent without the network plugin;
    ``skill_md`` replaces its skill card in the sandbox."""

    view: Any = None
    system_prompt: str | None = None
    model: Any = None
    tools: dict[str, Any] = field(default_factory=dict)
    live: Any = None
    attach_plugin: bool | None = None
    skill_md: str | None = None


# ----------------------------------------------------------------------------------------- tools


def _stub(schema: dict[str, Any]) -> Tool:
    """A tool offered with exactly the recorded schema; its function exists only in the original process."""
    function = schema.get("function") or {}
    name = str(function.get("name") or "")

    def absent(**_kwargs: Any) -> Any:
        raise RuntimeError(f"tool {name!r} is not in this process")

    return Tool(name, str(function.get("description") or ""), dict(function.get("parameters") or {}), absent)


def _with_function(stub: Tool, real: Tool) -> Tool:
    """The recorded schema (so the request stays the recorded one) with the real function behind it."""
    return Tool(stub.name, stub.description, stub.parameters, real.fn, dict(real.injected), real.middleware)


def network_tools(hub: Any) -> dict[str, list[Tool]]:
    """The tools of every agent an in-process hub has a live client for (agent name → its tools): what a
    ``live`` tool policy calls when ``replay`` runs in the process of the network that made the channel."""
    found: dict[str, list[Tool]] = {}
    for agent_id, endpoint in list(getattr(getattr(hub, "delivery", None), "bindings", {}).items()):
        owner = getattr(getattr(endpoint, "_on_notify", None), "__self__", None)
        client = (getattr(owner, "_clients", None) or {}).get(agent_id)
        tools = getattr(getattr(client, "agent", None), "tools", None)
        if isinstance(tools, list):
            found[hub.name_for(agent_id)] = [t for t in tools if isinstance(t, Tool)]
    return found


@dataclass(eq=False)
class _ToolPolicies:
    """Agent middleware: answers each tool call by the agent's tool policy (see the module docstring)."""

    driver: _Driver
    agent_id: str
    policies: dict[str, ToolPolicy]
    real: set[str]  # tools whose function this process has
    used: set[tuple[str, str]] = field(default_factory=set)  # (turn id, call id) answered from the recording

    def policy(self, name: str) -> ToolPolicy:
        return self.policies.get(name) or self.policies.get("*") or ToolPolicy()

    async def on_tool_execution(self, call_next: Any, event: Any, context: Any) -> Any:
        if not isinstance(event, ToolCallEvent):
            return await call_next(event, context)
        policy = self.policy(event.name)
        if policy.kind == "static":
            return ToolResultEvent(event.id, event.name, result_text(policy.value), False, policy.value)
        if policy.kind == "live":
            if event.name not in self.real:
                return self._missing(event, "live")
            return await call_next(event, context)
        found = self._recorded(event)
        if found is None:
            if event.name in self.real:
                return await call_next(event, context)
            return self._missing(event, "recorded")
        turn, call = found
        await self.driver.reenact(self.agent_id, turn, str(call.get("id")))
        result = str(call.get("result") if call.get("result") is not None else "")
        return ToolResultEvent(
            event.id, event.name, result, bool(call.get("is_error")), self.driver.value_of(turn, call, result)
        )

    def _missing(self, event: ToolCallEvent, kind: str) -> ToolResultEvent:
        name = self.driver.name_for(self.agent_id)
        why = "no recorded result answers this call" if kind == "recorded" else "its policy is live"
        self.driver.missing.setdefault(
            self.agent_id,
            f"{name}'s tool {event.name!r} is not in this process and {why}; load the network that has it "
            f"(--network module:function, or replay(functions=...)) or give it static:JSON",
        )
        return ToolResultEvent(
            event.id, event.name, f"Error: tool {event.name!r} is not in this process", True, None
        )

    def _recorded(self, event: ToolCallEvent) -> tuple[PlacedTurn, dict[str, Any]] | None:
        model = self.driver.models.get(self.agent_id)
        current = getattr(model, "current", None) if isinstance(model, ReplayModel) else None
        turns = [t for t in self.driver.turns if t.agent_id == self.agent_id]
        if current is not None:
            turn = next((t for t in turns if t.record is current), None)
            call = next((c for c in current.get("tool_calls") or [] if c.get("id") == event.id), None)
            if turn is not None and call is not None and (turn.turn_id, event.id) not in self.used:
                self.used.add((turn.turn_id, event.id))
                return turn, call
        for turn in turns:  # another model asked the same thing: the same answer (what it did, done once)
            for call in turn.record.get("tool_calls") or []:
                if call.get("name") == event.name and (call.get("arguments") or "{}") == event.arguments:
                    return turn, call
        return None


# ----------------------------------------------------------------------------------------- the driver


async def _turns(source: Any, channel_id: str) -> list[dict[str, Any]]:
    if hasattr(source, "call"):
        return await source.call("list_turns", channel_id=channel_id, limit=100_000)
    return await source.list_turns(channel_id=channel_id, limit=100_000)


class _Driver:
    """The state one replay shares between its walk, its agents' handlers and their tool policies."""

    def __init__(self, hub: Hub, cid: str, wal: list[Envelope], turns: list[PlacedTurn], start: int) -> None:
        self.hub = hub
        self.cid = cid
        self.original = wal
        self.turns = turns
        self.start = start
        self.faithful = True  # while True, agents wait for their original moment
        self.ids: dict[str, str] = {e.envelope_id: e.envelope_id for e in wal[:start]}
        self.models: dict[str, Any] = {}
        self.clients: dict[str, Any] = {}
        self.missing: dict[str, str] = {}
        self.done_effects: set[int] = set()
        self.positions: dict[str, int] = {}
        # (agent, original envelope id) → how many envelopes the WAL held when the agent started on it
        self.release: dict[tuple[str, str], int] = {}
        for i, env in enumerate(wal):
            if env.event_type in HANDLER_MADE and env.causation_id:
                self.release.setdefault((env.sender_id, env.causation_id), i)
        for turn in turns:
            trigger = str(turn.record.get("trigger_envelope_id") or "")
            if turn.replayed and trigger:
                key = (turn.agent_id, trigger)
                self.release[key] = min(self.release.get(key, turn.start_pos), turn.start_pos)

    def name_for(self, agent_id: str) -> str:
        return self.hub.name_for(agent_id)

    async def handle(self, client: Any, envelope: Envelope) -> None:
        """The agent's handler: while faithful, wait until the sandbox is where the original was."""
        if self.faithful:
            pos = await self._position(envelope.envelope_id)
            if pos is not None and pos < len(self.original) and same_post(self.original[pos], envelope):
                wanted = self.release.get((client.agent_id, self.original[pos].envelope_id))
                while wanted is not None and self.faithful and self.hub.wal_count(self.cid) < wanted:
                    await asyncio.sleep(0.002)
        await default_handler(envelope, client)

    async def _position(self, envelope_id: str) -> int | None:
        """The 0-based position of a sandbox envelope (read once per new envelope, not per delivery)."""
        if envelope_id not in self.positions:
            known = len(self.positions)
            for i, env in enumerate(await self.hub.read_wal(self.cid, since=known), known):
                self.positions[env.envelope_id] = i
        return self.positions.get(envelope_id)

    async def reenact(self, agent_id: str, turn: PlacedTurn, call_id: str) -> None:
        """Do again what a recorded tool call did to the channel (what is in the prefix is done)."""
        client = self.clients[agent_id]
        for pos in turn.effects.get(call_id, []):
            if pos < self.start or pos in self.done_effects:
                continue
            self.done_effects.add(pos)
            env = self.original[pos]
            if env.event_type in CLOSES:
                await client.hub_client.close_channel(self.cid, reason=str(env.event_data.get("reason", "")))
                continue
            copy = env.copy()
            copy.envelope_id, copy.created_at = "", ""
            copy.causation_id = self.ids.get(env.causation_id or "", env.causation_id)
            await client.send_envelope(copy)

    def value_of(self, turn: PlacedTurn, call: dict[str, Any], result: str) -> Any:
        """A recorded result as the tool's value: a workflow's Handoff/Finish from the round's routing,
        else the JSON it reads as, else the text."""
        if turn.reply_pos is not None:
            reply = self.original[turn.reply_pos]
            routing = reply.event_data.get("routing") if reply.event_type == EV_PACKET else None
            if isinstance(routing, dict) and routing.get("tool") == call.get("name"):
                if routing.get("kind") == "finish":
                    return Finish(
                        summary=str(routing.get("summary") or ""), reason=str(routing.get("reason") or "")
                    )
                if routing.get("kind") == "handoff" and routing.get("target"):
                    return Handoff(target=str(routing["target"]), reason=str(routing.get("reason") or ""))
        try:
            return json.loads(result)
        except ValueError:
            return result

    def made_here(self, pos: int) -> bool:
        env = self.original[pos]
        if env.event_type in HUB_MADE:
            return True
        if env.event_type in HANDLER_MADE:
            return env.sender_id in self.clients
        return any(t.replayed and t.agent_id in self.clients and pos in t.outputs for t in self.turns)


async def replay(
    source: Any,
    sandbox: Sandbox,
    *,
    overrides: dict[str, Override] | None = None,
    functions: dict[str, list[Any]] | None = None,
    turn_budget: int = 1000,
    step_timeout: float = 10.0,
    timeout: float = 60.0,
) -> ReplayResult:
    """Drive the sandbox's channel on from its fork point (see the module docstring).

    ``functions``: agent name or id → tools (``Tool`` or functions) this process has for that agent, for
    the ``live`` policy of its own tools."""
    hub: Hub = sandbox.hub
    cid = sandbox.channel_id
    original, placed = await _read_original(source, cid, sandbox.at_seq)
    start = sandbox.at_seq
    md = hub.lookup_channel(cid)
    keyed = _apply_overrides(hub, md, overrides)
    if functions is None and isinstance(source, Hub):
        functions = network_tools(source)
    real_tools = {
        agent_id: [as_tool(f) for f in fs]
        for k, fs in (functions or {}).items()
        if (agent_id := k if k in hub.identities.agents else hub.find_agent_id(k)) is not None
    }
    agents = [a for a in dict.fromkeys(t.agent_id for t in placed) if a in hub.identities.agents]
    driver = _Driver(hub, cid, original, placed, start)
    client = HubClient.local(hub)
    adapter = hub.adapter_for_metadata(md)
    states_at = _adapter_states(adapter, md, original, placed)
    _note_missing_views(driver, md, adapter, agents)
    turns_before: dict[str, int] = {}
    try:
        for agent_id in agents:
            turns_before[agent_id] = await _attach(
                driver,
                client,
                agent_id,
                keyed.get(agent_id, Override()),
                lambda a=agent_id: _adapter_tool_names(client, adapter, md, placed, states_at, a),
                real_tools,
            )
        await _deliver_again(driver)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        stopped, first = await _walk(driver, deadline, step_timeout)
        driver.faithful = False
        if first is not None:  # let the sandbox run on by itself
            stopped = await _run_on(driver, deadline, turn_budget, stopped)
        if stopped not in ("turn budget", "timeout"):  # else the agents stop now, mid-conversation
            for c in driver.clients.values():
                await c.idle()
    finally:
        driver.faithful = False
        # cancelled or failed too: the attached agents stop (a model call in flight ends with them)
        await client.close()
    replayed_turns = sorted(
        await hub.list_turns(channel_id=cid, limit=100_000),
        key=lambda t: (t.get("started_at") or "", t.get("turn_id") or ""),
    )
    return ReplayResult(
        sandbox=sandbox,
        original=original,
        replayed=await hub.read_wal(cid),
        fork_at=start,
        stopped=stopped,
        first_divergence=first,
        models=driver.models,
        original_turns=[t.record for t in placed if t.replayed],
        replayed_turns=replayed_turns,
        turns_before=turns_before,
        missing=dict(driver.missing),
        names={a: hub.name_for(a) for a in {*agents, *(e.sender_id for e in original)}},
    )


async def _read_original(source: Any, cid: str, start: int) -> tuple[list[Envelope], list[PlacedTurn]]:
    """The original channel's envelopes and its turns placed among them (``replayed``: after ``start``)."""
    if hasattr(source, "call"):
        original: list[Envelope] = list(await source.call("read_wal", channel_id=cid, since=0, until=None))
    else:
        original = await source.read_wal(cid)
    records = sorted(
        await _turns(source, cid), key=lambda t: (t.get("started_at") or "", t.get("turn_id") or "")
    )
    placed = place_turns(original, records)
    for turn in placed:
        turn.replayed = any(p >= start for p in turn.outputs) if turn.outputs else turn.start_pos >= start
    return original, placed


def _apply_overrides(hub: Hub, md: Any, overrides: dict[str, Override] | None) -> dict[str, Override]:
    """The overrides by agent id; a view override goes into the sandbox channel's view knob."""
    keyed: dict[str, Override] = {}
    for key, override in (overrides or {}).items():
        agent_id = key if key in hub.identities.agents else hub.find_agent_id(key)
        if agent_id is None:
            raise ValueError(f"override names {key!r}, which is not an agent of the sandbox")
        keyed[agent_id] = override
        if override.view is not None:
            policies = dict(md.knobs.get(VIEW_POLICIES_KNOB) or {})
            policies[agent_id] = view_spec(view_from_spec(override.view))
            md.knobs[VIEW_POLICIES_KNOB] = policies
    return keyed


def _adapter_states(
    adapter: Any, md: Any, original: list[Envelope], placed: list[PlacedTurn]
) -> dict[int, Any]:
    """The adapter's state where each recorded turn started (empty when the fold fails)."""
    wanted_at = sorted({t.start_pos for t in placed})
    states_at: dict[int, Any] = {}
    try:
        state = adapter.initial_state(md)
        for pos in range(len(original) + 1):
            if pos in wanted_at:
                states_at[pos] = state
            if pos < len(original):
                state = adapter.fold(original[pos], state)
    except Exception:
        return {}
    return states_at


def _adapter_tool_names(
    client: HubClient,
    adapter: Any,
    md: Any,
    placed: list[PlacedTurn],
    states_at: dict[int, Any],
    agent_id: str,
) -> set[str]:
    """The adapter's per-turn tools of the agent's recorded turns (as the adapter offered them then)."""
    from ag2net.client.turns import _ProbeClient

    probe = _ProbeClient(client, f"replay:{agent_id}")
    names = {"say"}
    for turn in placed:
        if turn.agent_id == agent_id and turn.start_pos in states_at:
            try:
                names |= {t.name for t in adapter.tools_for(probe, md, states_at[turn.start_pos], agent_id)}
            except Exception:
                continue
    return names


def _note_missing_views(driver: _Driver, md: Any, adapter: Any, agents: list[str]) -> None:
    """A view this process does not have: no turn of that agent could run, say so now."""
    for agent_id in agents:
        try:
            resolve_view(md, agent_id, adapter)
        except ProtocolError as exc:
            name = driver.hub.name_for(agent_id)
            spec = (md.knobs.get(VIEW_POLICIES_KNOB) or {}).get(agent_id) or md.knobs.get("view_policy")
            view = spec.get("name") if isinstance(spec, dict) else spec
            unknown = isinstance(view, str) and view not in registered_views()
            what = (
                f"view {view!r} is not registered in this process"
                if unknown
                else f"view cannot be built ({exc})"
            )
            driver.missing[agent_id] = (
                f"{name}'s {what}; load the network that registers it (--network module:function) or give "
                f"{name} another view (--view {name}=NAME)"
            )


async def _attach(
    driver: _Driver,
    client: HubClient,
    agent_id: str,
    override: Override,
    adapter_tools: Callable[[], set[str]],
    real_tools: dict[str, list[Tool]],
) -> int:
    """Attach the agent to the sandbox with its model, prompt, tools and tool policies; returns how many
    of its turns lie before the fork. ``adapter_tools`` names the adapter's tools it was offered."""
    hub = driver.hub
    mine = [t for t in driver.turns if t.agent_id == agent_id]
    done = next((i for i, t in enumerate(mine) if t.replayed), len(mine))
    name = hub.name_for(agent_id)
    recorded = [t.record for t in mine]
    model = override.model or ReplayModel(
        recorded, name=f"replay-{name}", start=done, agent_name=name, live=override.live
    )
    driver.models[agent_id] = model
    basis = recorded[min(done, len(recorded) - 1)]
    system = override.system_prompt if override.system_prompt is not None else _own_prompt(basis, name)
    agent = Agent(name, model, system_prompt=system)
    if override.skill_md is not None:
        await hub.set_skill(agent_id, override.skill_md)
    plugin = override.attach_plugin is not False
    agent_client = await client.attach(agent, name, attach_default_handler=False, attach_plugin=plugin)
    plugin_names = {t.name for t in agent.tools}
    adapter_names = adapter_tools()
    own = _own_tools(recorded, plugin_names | adapter_names)
    seen = {t.name for t in own}
    given = {t.name: t for t in real_tools.get(agent_id, []) if t.name in seen}
    own = [_with_function(t, given[t.name]) if t.name in given else t for t in own]
    agent.tools = [*own, *[t for t in agent.tools if t.name not in seen]]
    policies = {k: ToolPolicy.parse(v) for k, v in override.tools.items()}
    real = plugin_names | adapter_names | set(given)
    agent.hooks.middleware.append(_ToolPolicies(driver, agent_id, policies, real))
    agent_client.on_envelope(lambda env, c=agent_client: driver.handle(c, env))
    driver.clients[agent_id] = agent_client
    return done


def _own_tools(recorded: list[dict[str, Any]], others: set[str]) -> list[Tool]:
    """Stubs of the agent's own tools: every schema its turns were offered that is not in ``others``."""
    own: list[Tool] = []
    seen: set[str] = set()
    for rec in recorded:
        for schema in rec.get("tools") or []:
            tname = str((schema.get("function") or {}).get("name") or "")
            if tname and tname not in others and tname not in seen:
                seen.add(tname)
                own.append(_stub(schema))
    return own


async def _deliver_again(driver: _Driver) -> None:
    """What the attached agents answered after the fork although it lies before it: deliver it again."""
    original, start = driver.original, driver.start
    index = {e.envelope_id: i for i, e in enumerate(original)}
    again: list[tuple[int, int, str, str]] = []
    for i, env in enumerate(original[start:], start):
        if env.event_type in HANDLER_MADE and env.sender_id in driver.clients:
            trigger = index.get(env.causation_id or "")
            if trigger is not None and trigger < start:
                again.append((i, trigger, env.sender_id, original[trigger].envelope_id))
    for turn in driver.turns:
        trigger = index.get(str(turn.record.get("trigger_envelope_id") or ""))
        if turn.replayed and turn.agent_id in driver.clients and trigger is not None and trigger < start:
            again.append((turn.start_pos, trigger, turn.agent_id, original[trigger].envelope_id))
    for _when, trigger, agent_id, _env_id in sorted(again):
        endpoint = driver.hub.delivery.bindings.get(agent_id)
        if endpoint is not None:
            await endpoint.notify(agent_id, original[trigger])


async def _walk(driver: _Driver, deadline: float, step_timeout: float) -> tuple[str, int | None]:
    """Walk the original after the fork: await what the network makes, post the rest again; stop at the
    first divergence. Returns why it stopped and the first diverging position."""
    hub, cid, original = driver.hub, driver.cid, driver.original
    loop = asyncio.get_running_loop()
    for pos in range(driver.start, len(original)):
        env = original[pos]
        if not driver.made_here(pos):
            await _settle(hub, cid, pos, loop.time() + step_timeout)
            if hub.wal_count(cid) != pos:
                return "the replay made something the original did not", pos
            copy = env.copy()
            copy.envelope_id, copy.created_at = "", ""
            copy.causation_id = driver.ids.get(env.causation_id or "", env.causation_id)
            await hub.post_envelope(copy)
        else:
            await _settle(hub, cid, pos + 1, min(deadline, loop.time() + step_timeout), exact=False)
        wal = await hub.read_wal(cid)
        if len(wal) <= pos or not same_post(wal[pos], env):
            return "diverged", pos
        driver.ids[env.envelope_id] = wal[pos].envelope_id
        if loop.time() > deadline:
            return "timeout", None
    return "original replayed", None


async def _run_on(driver: _Driver, deadline: float, turn_budget: int, stopped: str) -> str:
    """After a divergence the sandbox runs on by itself until the channel closes, it goes quiet, the turn
    budget is spent or the deadline passes."""
    hub, cid = driver.hub, driver.cid
    loop = asyncio.get_running_loop()
    while loop.time() < deadline and not hub.lookup_channel(cid).is_terminal():
        taken = len(await hub.list_turns(channel_id=cid, limit=turn_budget + 1))
        if taken >= turn_budget:
            return "turn budget"
        before = hub.wal_count(cid)
        await asyncio.sleep(0.01)
        quiet = hub.wal_count(cid) == before and not any(len(m) for m in hub.delivery.mailboxes.values())
        if quiet and all(not c._workers for c in driver.clients.values()):
            break
    return stopped


def _own_prompt(record: dict[str, Any], name: str) -> str:
    """The agent's own system prompt, as its turn record shows it (the plugin's identity line put back
    by the plugin itself)."""
    prompt = str(record.get("system_prompt") or "")
    head, sep, rest = prompt.partition("\n\n")
    if sep and head.startswith(f"You are {name} (agent_id: "):
        return rest
    return "" if prompt.startswith(f"You are {name} (agent_id: ") else prompt


async def _settle(hub: Hub, cid: str, count: int, deadline: float, *, exact: bool = True) -> None:
    """Wait until the channel holds ``count`` envelopes (at least, unless ``exact``) and nothing is queued;
    or more than ``count`` (the envelopes up to it are then fixed, however busy the agents stay)."""
    loop = asyncio.get_running_loop()
    while loop.time() < deadline:
        n = hub.wal_count(cid)
        if n > count:
            return
        if n >= count and not any(len(m) for m in hub.delivery.mailboxes.values()):
            await asyncio.sleep(0.002)
            if hub.wal_count(cid) == n:
                return
        await asyncio.sleep(0.002)


__all__ = [
    "TOOL_POLICIES",
    "Comparison",
    "Override",
    "ReplayDiverged",
    "ReplayModel",
    "ReplayResult",
    "ToolPolicy",
    "compare",
    "network_tools",
    "replay",
]

"""The demo network: the six agents registered on a hub, and the script that drives traffic between them
through every channel type.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.adapters import AgentTarget, FromSpeaker, TerminateTarget, Transition, TransitionGraph
from ag2net.agent import Agent, ModelError, ScriptedModel
from ag2net.agent.budget import model_name_of
from ag2net.agent.tool import CHANNEL_DEP, Tool
from ag2net.client.agent_client import AgentClient
from ag2net.client.handler import default_handler, run_turn
from ag2net.client.hub_client import HubClient
from ag2net.demo.brains import Brains
from ag2net.demo.cast import ROLES, Role
from ag2net.demo.tools import drafter_tools, reviewer_tools
from ag2net.envelope import EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED, EV_TEXT, Envelope
from ag2net.errors import NetworkError
from ag2net.events import ToolCallEvent
from ag2net.identity import Passport, Resume

OPENINGS = {
    "consult_research": "What do we know about offline-first sync for mobile apps?",
    "consult_estimate": "Please estimate the offline sync work: operation log, conflict screen, fault tests.",
    "discussion": "Topic: how do we ship offline sync? One view each, then I'll wrap up.",
    "workflow": "Draft a short announcement of offline sync for our users.",
    "pairing": "Pairing on the sync engine design, point by point: where do we start?",
}
"""What the opener of each step of the script posts first, by step."""

CONVERSATION_TURNS = 16
"""Long enough for the conversation's ``WindowedSummary(recent_n=10)`` to elide turns."""

WRAP_UP_GRACE = 5.0
"""Seconds a discussion may stay open after the planner's wrap-up before the script closes it."""

WAITING_POLL = 0.25
"""Seconds between the script's looks at what waits on a person (``list_waiting``): while anything does, its
step clock stands still, so a held post, a paused turn or a pending approval is never closed under the person."""

ModelFactory = Callable[[str], Any]

ToolCallTap = Callable[[str, str, ToolCallEvent], Any]
"""Told of every tool call a demo agent's model makes, as it is made: ``(agent name, channel id, call)``."""


@dataclass(eq=False)
class _ToolCallWatch:
    """Agent middleware that tells ``tap`` of each tool call before the tool runs (the turn goes on as is)."""

    agent_name: str
    tap: ToolCallTap

    async def on_tool_execution(self, call_next: Callable[..., Any], event: Any, context: Any) -> Any:
        channel = (context.dependencies if context is not None else {}).get(CHANNEL_DEP)
        channel_id = getattr(channel, "channel_id", None)
        if isinstance(event, ToolCallEvent) and isinstance(channel_id, str):
            self.tap(self.agent_name, channel_id, event)
        return await call_next(event, context)


@dataclass(eq=False)
class _ModelWatch:
    """Agent middleware that reports a real model's failure to the demo, which then stops (``run`` raises
    it) instead of waiting out its step timeouts in silence."""

    demo: DemoNetwork

    async def on_llm_call(self, call_next: Callable[..., Any], events: Any, context: Any) -> Any:
        try:
            return await call_next(events, context)
        except ModelError as exc:
            self.demo.fail(exc)
            raise


@dataclass
class DemoNetwork:
    """The registered demo agents and the scripted traffic between them."""

    hub_client: HubClient
    agents: dict[str, AgentClient]
    human_name: str | None = None
    pace: float = 0.0
    step_timeout: float = 30.0
    human_timeout: float = 3600.0
    steps: dict[str, str] = field(default_factory=dict)
    """channel id → the demo step that opened it (brains read it to pick their behaviour)."""
    task_channels: set[str] = field(default_factory=set)
    human_answer: str | None = None
    approvals: bool = False
    """The reviewer's ``approve`` waits for a person's OK (``requires_approval``); off by default."""
    owns_client: bool = False
    _script: asyncio.Task[None] | None = None
    _human: asyncio.Task[None] | None = None
    failure: ModelError | None = None
    """The first failure of a real model (``model_factory``): ``run`` stops the script and raises it."""
    _failed: asyncio.Event = field(default_factory=asyncio.Event)
    _may_list_waiting: bool = True

    def __getitem__(self, name: str) -> AgentClient:
        return self.agents[name]

    def start(self) -> None:
        """Start the scripted traffic (``start_demo`` does this); idempotent."""
        if self._script is None:
            self._script = asyncio.get_running_loop().create_task(self._run_script())
        if self.human_name and self._human is None:
            self._human = asyncio.get_running_loop().create_task(self._ask_human())

    async def run(self) -> None:
        """Wait until the scripted traffic is done (the question to the human may still be open). A real
        model's failure stops the script and is raised here (``ModelError``)."""
        self.start()
        assert self._script is not None
        failed = asyncio.ensure_future(self._failed.wait())
        try:
            await asyncio.wait({self._script, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            failed.cancel()
        if self.failure is not None and not self._script.done():
            self._script.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._script
            raise self.failure
        await self._script

    def fail(self, exc: ModelError) -> None:
        """Record a real model's failure (the first one counts) and wake ``run``."""
        if self.failure is None:
            self.failure = exc
            self._failed.set()

    async def wait_for_human(self) -> str | None:
        """Wait for the question to the human to be answered and thanked (None if it never was)."""
        if self._human is not None:
            await asyncio.wait([self._human])  # a cancelled question (close()) just ends the wait
        return self.human_answer

    async def close(self) -> None:
        """Stop the traffic, the question to the human, and the demo's own connection."""
        for task in (self._script, self._human):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.owns_client:
            await self.hub_client.close()

    # ------------------------------------------------------------------ the script

    async def _pause(self) -> None:
        if self.pace > 0:
            await asyncio.sleep(self.pace)

    async def _settle(self) -> None:
        for client in self.agents.values():
            await client.idle()

    async def someone_deciding(self) -> bool:
        """Whether anything in the network waits on a person (a held post, a paused turn, an approval).

        False when the demo's client may not ask (``list_waiting`` is for operators: a demo started over a
        participant's connection keeps its plain step timeouts)."""
        if not self._may_list_waiting:
            return False
        try:
            items = await self.hub_client.list_waiting()
        except NetworkError:
            self._may_list_waiting = False
            return False
        return any(item.state == "waiting" for item in items)

    async def _until_closed(self, channel_id: str, *, text_limit: int | None = None) -> None:
        """Wait for the channel to end, then for the agents to finish their turns.

        A channel that never ends by itself (a real model may not close the discussion) is closed past
        ``step_timeout``, or once it holds more than ``text_limit`` texts (or exactly that many for
        ``WRAP_UP_GRACE`` seconds), so the demo always moves on. Those clocks stand still while anything
        waits on a person (``someone_deciding``): they count from the last moment something did.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.step_timeout
        reached_at: float | None = None
        looked_at = loop.time()
        while not (await self.hub_client.get_channel(channel_id)).is_terminal():
            now = loop.time()
            reason = "demo_step_timeout" if now > deadline else None
            if text_limit is not None and reason is None:
                texts = sum(1 for e in await self.hub_client.read_wal(channel_id) if e.event_type == EV_TEXT)
                if texts >= text_limit and reached_at is None:
                    reached_at = now
                if texts > text_limit or (reached_at is not None and now - reached_at > WRAP_UP_GRACE):
                    reason = "wrap_up"
            if reason is not None or now - looked_at >= WAITING_POLL:
                looked_at = now
                if await self.someone_deciding():  # a person is deciding: the clocks start again after
                    deadline = now + self.step_timeout
                    reached_at = None if reached_at is None else now
                    reason = None
            if reason is not None:
                await self.hub_client.close_channel(channel_id, reason=reason)
                break
            await asyncio.sleep(0.01)
        await self._settle()

    async def _step(
        self, step: str, opener: str, *, text_limit: int | None = None, task: bool = False, **kwargs: Any
    ) -> None:
        """One step of the script: ``opener`` opens a channel (``kwargs``: type, target, knobs, intent), posts
        the step's ``OPENINGS`` text in it, and the step lasts until the channel ends (see ``_until_closed``).
        ``task``: the channel is one the task tool reports on."""
        channel = await self.agents[opener].open(**kwargs)
        self.steps[channel.channel_id] = step
        if task:
            self.task_channels.add(channel.channel_id)
        await self._say(channel, OPENINGS[step])
        await self._until_closed(channel.channel_id, text_limit=text_limit)

    async def _say(self, channel: Any, text: str) -> None:
        """Post a step's opening text. A person may drop it at a breakpoint: the step's channel is closed
        then (reason ``opening_dropped``) and the script goes on with the next step."""
        try:
            await channel.send(text)
        except NetworkError as exc:
            if "dropped at a breakpoint" not in str(exc):
                raise
            await self.hub_client.close_channel(channel.channel_id, reason="opening_dropped")

    async def _run_script(self) -> None:
        a = self.agents
        # 1. consulting, with a delegate inside the researcher's turn
        await self._step(
            "consult_research", "planner", type="consulting", target="researcher", intent="research"
        )
        await self._pause()
        # 2. consulting into a task: the coder reports progress with the tasks tool
        await self._step(
            "consult_estimate", "planner", task=True, type="consulting", target="coder", intent="estimate"
        )
        await self._pause()
        # 3. a round-robin discussion; the planner looks at peers and tasks before wrapping up
        talkers = ["researcher", "critic", "coder"]
        # closed past five texts: the topic, three views, the wrap-up
        await self._step(
            "discussion",
            "planner",
            text_limit=5,
            type="discussion",
            target=talkers,
            intent="offline sync plan",
        )
        await self._pause()
        # 4. a workflow routed by handoff tools, with a custom event type on the way
        graph = TransitionGraph(
            initial_speaker=a["planner"].agent_id,
            transitions=[Transition(FromSpeaker(a["planner"].agent_id), AgentTarget(a["drafter"].agent_id))],
            default_target=TerminateTarget("review_done"),
            max_turns=8,
        )
        knobs = {"graph": graph.to_dict()}
        await self._step(
            "workflow",
            "planner",
            type="workflow",
            target=["drafter", "reviewer"],
            knobs=knobs,
            intent="announcement",
        )
        await self._pause()
        # 5. a long conversation: the window elides early turns; the coder speaks once through say
        knobs = {"max_turns": CONVERSATION_TURNS}
        await self._step(
            "pairing", "coder", type="conversation", target="critic", knobs=knobs, intent="pairing"
        )

    async def _ask_human(self) -> None:
        planner = self.agents["planner"]
        human = await self.hub_client.get_agent(self.human_name or "")
        human_id = human.agent_id
        assert human_id is not None, "the hub returns registered passports, which carry their id"
        ch = await planner.open(type="consulting", target=human_id, intent="question for you")
        self.steps[ch.channel_id] = "ask_human"
        planner.ensure_channel_inbox(ch.channel_id)
        try:
            await ch.send(
                f"Hi {human.name}, a quick question from the demo team: should we ship offline sync before or "
                "after the new onboarding flow? Reply here whenever you like."
            )
            reply = await planner.wait_for_channel_event(
                channel_id=ch.channel_id,
                predicate=lambda e: (
                    (e.event_type == EV_TEXT and e.sender_id == human_id)
                    or e.event_type in (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED)
                ),
                timeout=self.human_timeout,
            )
        except TimeoutError:
            return
        finally:
            planner.discard_channel_inbox(ch.channel_id)
        if reply.event_type != EV_TEXT:
            return
        answer = str(reply.event_data.get("text", ""))
        self.human_answer = answer
        thanks = await planner.agent.ask(f"{human.name} answered your question: {answer}")
        conversation = await planner.open(
            type="conversation", target=human_id, knobs={"max_turns": 1}, intent="thanks"
        )
        self.steps[conversation.channel_id] = "thanks"
        await conversation.send(thanks.body or f"Thanks, {human.name}!")


async def _coder_handler(demo: DemoNetwork, coder: AgentClient, envelope: Envelope) -> None:
    """The coder runs estimate requests inside ``agent.task(...)`` so its model can report progress."""
    if (
        envelope.channel_id in demo.task_channels
        and envelope.event_type == EV_TEXT
        and envelope.sender_id != coder.agent_id
    ):
        async with coder.agent.task(
            "Estimate the offline sync work", capability="estimation", payload={"requested_by": "planner"}
        ) as task:
            out = await run_turn(coder, envelope)
            if not task.is_terminal() and out is not None:
                await task.complete(out.event_data.get("text"))
        return
    await default_handler(envelope, coder)


DEMO_MODEL = "ag2net-demo"
"""The model name on the scripted demo agents' passports: a name with a known context window
(``ag2net.agent.budget.KNOWN_WINDOWS``, 8,192 tokens), so the workbench's budget bar shows a fraction."""


def passport_model(model: Any) -> str:
    """The model name a demo agent's passport carries: :data:`DEMO_MODEL` for a scripted brain, the real
    model's own name (``gpt-4o-mini``) otherwise."""
    if isinstance(model, ScriptedModel):
        return DEMO_MODEL
    return model_name_of(model) or DEMO_MODEL


async def _register(
    hc: HubClient,
    role: Role,
    model: Any,
    tools: list[Tool],
    on_tool_call: ToolCallTap | None = None,
    watch: _ModelWatch | None = None,
) -> AgentClient:
    agent = Agent(role.name, model, system_prompt=role.system_prompt, tools=tools)
    if on_tool_call is not None:
        agent.hooks.middleware.append(_ToolCallWatch(role.name, on_tool_call))
    if watch is not None:
        agent.hooks.middleware.append(watch)
    existing = await hc.find_agent_id_remote(role.name)
    if existing is not None:
        passport = await hc.get_agent(existing)
        if passport.effective_kind == "human":
            raise ValueError(
                f"the demo needs the name {role.name!r} for an agent, but a human is registered under it; "
                "pick another name for the human"
            )
        return await hc.attach(agent, role.name)
    return await hc.register(
        agent,
        Passport(name=role.name, provider="ag2net-demo", model=passport_model(model), cost=role.cost),
        Resume(
            claimed_capabilities=list(role.capabilities), domains=list(role.domains), summary=role.summary
        ),
        skill_md=role.skill_md,
    )


async def start_demo(
    hub_or_client: Any,
    *,
    human_name: str | None = None,
    pace: float = 0.0,
    model_factory: ModelFactory | None = None,
    step_timeout: float | None = None,
    on_tool_call: ToolCallTap | None = None,
    approvals: bool = False,
) -> DemoNetwork:
    """Register the demo agents on a ``Hub`` or ``HubClient`` and start the scripted traffic.

    ``human_name`` names a human already registered (the person at the workbench): the planner asks them
    a question on a consulting channel and thanks them when they answer, without holding up the rest.
    ``pace`` is seconds between steps and before each model reply (0 runs flat out). ``model_factory``
    (agent name → model) swaps the scripted brains for a real model. ``on_tool_call(agent name, channel id,
    call)`` is told of each tool call an agent's model makes, just before the tool runs (``ag2net demo``
    prints them in line with the envelopes they cause). ``approvals``: the reviewer's ``approve`` (it ends the
    review workflow) waits for a person's OK in the hub's inbox before it runs (``requires_approval``); a
    denial's reason goes back to the reviewer, which says it and ends the workflow.
    """
    if isinstance(hub_or_client, HubClient):
        hc, owns = hub_or_client, False
    else:
        hc, owns = HubClient.local(hub_or_client), True
    demo = DemoNetwork(
        hub_client=hc,
        agents={},
        human_name=human_name,
        pace=max(0.0, pace),
        approvals=approvals,
        owns_client=owns,
    )
    if step_timeout is not None:
        demo.step_timeout = step_timeout
    elif model_factory is not None:
        demo.step_timeout = 300.0
    if human_name is not None:
        human = await hc.get_agent(human_name)
        if human.effective_kind != "human":
            raise ValueError(f"human_name {human_name!r} names a {human.effective_kind}, not a human")
    brains = Brains(demo)
    extra = {"drafter": drafter_tools(), "reviewer": reviewer_tools(approvals=approvals)}
    for role in ROLES:
        model = (
            model_factory(role.name)
            if model_factory is not None
            else ScriptedModel(brains.for_agent(role.name), name=f"demo-{role.name}", loop=True)
        )
        demo.agents[role.name] = await _register(
            hc,
            role,
            model,
            extra.get(role.name, []),
            on_tool_call,
            _ModelWatch(demo) if model_factory is not None else None,  # a scripted brain never fails
        )
    coder = demo.agents["coder"]
    coder.on_envelope(lambda envelope: _coder_handler(demo, coder, envelope))
    demo.start()
    return demo


__all__ = [
    "CONVERSATION_TURNS",
    "DEMO_MODEL",
    "WAITING_POLL",
    "WRAP_UP_GRACE",
    "DemoNetwork",
    "ModelFactory",
    "ToolCallTap",
    "start_demo",
]

"""The demo network: six scripted agents with skill cards, and a script that exercises every channel type,
``say``, ``delegate``, ``peers``, ``tasks``, a custom event type and a windowed (compacted) conversation.

``await start_demo(hub_or_client)`` registers the agents and starts the traffic; ``await demo.run()`` returns
when the scripted traffic is done. The agents run on ``ScriptedModel`` "brains" that compute each reply from
the call they receive (deterministic, no clock, no randomness); pass ``model_factory`` to run the same
network on a real model. ``run_demo_cli`` is the ``ag2net demo`` command.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.adapters import (
    AgentTarget,
    Finish,
    FromSpeaker,
    Handoff,
    TerminateTarget,
    Transition,
    TransitionGraph,
)
from ag2net.agent import Agent, ModelCall, ScriptedModel, tool_call
from ag2net.agent.tool import AgentClientInject, ChannelInject, Tool, build_tool
from ag2net.client.agent_client import AgentClient, handling_envelope
from ag2net.client.handler import default_handler, run_turn
from ag2net.client.hub_client import HubClient
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_PACKET,
    EV_TEXT,
    Envelope,
)
from ag2net.events import CompactionSummary, TextInput, ToolResultEvent
from ag2net.identity import CostProfile, Passport, Resume

REVIEW_REQUEST = "demo.review_request"
"""The demo's custom event type: the drafter's ``submit_for_review`` tool posts it to the reviewer."""

CONVERSATION_TURNS = 16
"""Long enough for the conversation's ``WindowedSummary(recent_n=10)`` to elide turns."""

WRAP_UP_GRACE = 5.0
"""Seconds a discussion may stay open after the planner's wrap-up before the script closes it."""

ModelFactory = Callable[[str], Any]


# ---------------------------------------------------------------------------------------------- the cast


@dataclass(frozen=True, slots=True)
class Role:
    """One demo agent: who it is, how it presents itself, and its instructions for a real model."""

    name: str
    summary: str
    capabilities: tuple[str, ...]
    domains: tuple[str, ...]
    cost: CostProfile
    system_prompt: str
    skill_md: str


def _skill(title: str, expertise: list[str], tone: str, body: str) -> str:
    listed = ", ".join(expertise)
    return (
        f"---\ntitle: {title}\nexpertise: [{listed}]\ntone: {tone}\nreplies: short\n---\n\n{body.strip()}\n"
    )


ROLES: tuple[Role, ...] = (
    Role(
        "planner",
        "Turns goals into ordered plans and runs discussions to a decision.",
        ("planning", "coordination"),
        ("product", "delivery"),
        CostProfile(input_per_mtok=3.0, output_per_mtok=15.0, latency_tier="standard"),
        "You are the planner of a small product team designing offline sync for a mobile app. Turn goals "
        "into ordered steps, ask the right peers, and close discussions with a decision. Under 80 words.",
        _skill(
            "Planner",
            ["planning", "roadmaps", "facilitation"],
            "decisive",
            """
# Planner

Breaks a goal into steps, consults the right peers and wraps a discussion up with a decision.

## Best at
- Turning a vague goal into an ordered plan.
- Running a round-robin discussion to a conclusion.

## Limitations
- Writes no code and does no primary research: asks the coder and the researcher.
""",
        ),
    ),
    Role(
        "researcher",
        "Finds prior art and sources; summarises what is known.",
        ("research", "sources"),
        ("mobile", "sync"),
        CostProfile(input_per_mtok=1.0, output_per_mtok=4.0, latency_tier="slow"),
        "You are the team's researcher. Answer with what is known, cite patterns and prior art, and ask the "
        "critic (delegate) about risks before you answer a design question. Under 80 words.",
        _skill(
            "Research Assistant",
            ["prior art", "mobile sync", "literature review"],
            "measured",
            """
# Researcher

Surveys how others solved a problem and reports the options with their trade-offs.

## Best at
- Scenario synthesis from multi-source briefs.
- Asking the critic for the risks before recommending anything.

## Limitations
- Not for code review or estimates.
""",
        ),
    ),
    Role(
        "critic",
        "Reviews plans for risks, gaps and untested assumptions.",
        ("critique", "risk-review"),
        ("quality", "reliability"),
        CostProfile(input_per_mtok=2.0, output_per_mtok=8.0, latency_tier="standard"),
        "You are the team's critic. Point out the biggest risk or gap in what you are shown, concretely, and "
        "suggest one mitigation. Under 60 words.",
        _skill(
            "Critic",
            ["risk review", "failure modes", "test strategy"],
            "blunt",
            """
# Critic

Finds what will break: conflict cases, flaky networks, missing tests.

## Best at
- Naming the single biggest risk in a plan.
- Turning a risk into a test case.
""",
        ),
    ),
    Role(
        "coder",
        "Designs and estimates the implementation.",
        ("code", "estimation"),
        ("python", "sqlite", "mobile"),
        CostProfile(input_per_mtok=0.5, output_per_mtok=2.0, latency_tier="fast"),
        "You are the team's engineer. Propose concrete implementation steps and estimates in days. When you "
        "work inside a task, report progress with the tasks tool. Under 80 words.",
        _skill(
            "Engineer",
            ["python", "sqlite", "sync engines", "estimation"],
            "practical",
            """
# Coder

Turns a design into an implementation plan with estimates.

## Best at
- Append-only operation logs and replay workers.
- Estimates broken down by component.
""",
        ),
    ),
    Role(
        "drafter",
        "Writes first drafts of docs and announcements.",
        ("writing",),
        ("docs",),
        CostProfile(input_per_mtok=0.8, output_per_mtok=3.0, latency_tier="fast"),
        "You are the team's writer. Write the requested draft, then call submit_for_review. Under 80 words.",
        _skill(
            "Drafter",
            ["technical writing", "release notes"],
            "friendly",
            """
# Drafter

Writes the first version of a doc and hands it to the reviewer.
""",
        ),
    ),
    Role(
        "reviewer",
        "Edits drafts and approves them for publishing.",
        ("editing", "review"),
        ("docs",),
        CostProfile(input_per_mtok=1.5, output_per_mtok=6.0, latency_tier="standard"),
        "You are the team's editor. Review the draft: call request_changes with one concrete change, or approve "
        "when it is good. Under 60 words.",
        _skill(
            "Reviewer",
            ["editing", "style", "accuracy"],
            "exacting",
            """
# Reviewer

Reads every draft once, asks for at most one round of changes, then approves.
""",
        ),
    ),
)


# ---------------------------------------------------------------------------------------------- brains


def input_text(call: ModelCall) -> str:
    """The current input's text (parts joined)."""
    return "\n".join(p.content for p in call.inputs if isinstance(p, TextInput))


def tool_results(call: ModelCall) -> list[ToolResultEvent]:
    """The tool results this turn has produced so far."""
    return [e for e in call.turn_events if isinstance(e, ToolResultEvent)]


def messages_before(call: ModelCall) -> int:
    """How many channel messages came before this turn's input (elided ones included)."""
    prior = call.history[: call.prior]
    count = 0
    for event in prior:
        if isinstance(event, CompactionSummary):
            count += event.event_count
        else:
            count += 1
    return count


def _quote(text: str, words: int = 6) -> str:
    """The first words of a message's gist: past any ``[name]:`` label or ``Re “…”:`` lead-in."""
    bare = text.split(": ", 1)[-1]
    parts = bare.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


CRITIC_LINES = (
    "what happens when both devices edit the same record offline?",
    "the replay worker must be idempotent, or a retry doubles every change.",
    "clock skew will reorder operations; use per-device counters, not wall time.",
    "a schema migration mid-sync could strand queued operations.",
    "we need a test that drops the network halfway through a batch.",
    "the conflict screen must explain the choice in plain words.",
    "cap the queue size so a phone offline for weeks does not explode.",
    "log every reconciliation decision so support can explain it later.",
)

CODER_LINES = (
    "operations carry a device id and a per-device counter.",
    "the server acknowledges by counter, so replays are no-ops.",
    "migrations run only when the queue is empty; otherwise we defer.",
    "a fault-injection proxy in CI can cut the network mid-batch.",
    "conflicts surface as a card with both versions side by side.",
    "past ten thousand queued operations we compact them per record.",
    "decisions go to an audit table with the rule that fired.",
    "that covers it; I will write the design doc from this thread.",
)


class Brains:
    """Deterministic replies for each demo agent, computed from the model call and the channel's step."""

    def __init__(self, demo: DemoNetwork) -> None:
        self.demo = demo

    def step(self) -> str | None:
        """The demo step of the channel whose envelope is being handled (None outside a turn)."""
        envelope = handling_envelope.get()
        return None if envelope is None else self.demo.steps.get(envelope.channel_id)

    def for_agent(self, name: str) -> Callable[[ModelCall], Awaitable[Any]]:
        brain = getattr(self, name)

        async def turn(call: ModelCall) -> Any:
            if self.demo.pace > 0:
                await asyncio.sleep(self.demo.pace)
            return brain(call, self.step())

        return turn

    # --- planner
    def planner(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if "answered your question" in text:
            answer = text.split(":", 1)[-1].strip()
            return (
                f"Thanks, {self.demo.human_name}! Noted: {_quote(answer, 12)} I'll fold that into the plan."
            )
        if step == "discussion":
            if not results:
                return [
                    tool_call("peers", action="find", sort_by="name"),
                    tool_call("tasks", action="list", scope="all", state="all"),
                ]
            peers = _json(results[0].result, [])
            tasks = _json(results[1].result, [])
            latest = tasks[-1] if tasks else None
            tracked = (
                f"{len(tasks)} task(s) tracked, latest '{latest['title']}' is {latest['state']}"
                if latest
                else "no tasks tracked yet"
            )
            return (
                f"Wrapping up: {len(peers)} peers on the network, {tracked}. Decision: ship the operation log "
                "first, write the conflict policy next, leave CRDTs for collaborative fields later. Thanks all."
            )
        return f"Plan noted: {_quote(text)}"

    # --- researcher
    def researcher(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if step == "discussion":
            if "Wrapping up" in text:
                if not results:
                    return tool_call("channels", action="close")
                return ""  # the channel is closed: nothing more to say
            return (
                "Research view: most teams ship an operation log with server reconciliation first and add "
                "CRDTs only for collaborative fields."
            )
        if step == "consult_research":
            if not results:
                return tool_call(
                    "delegate",
                    target="critic",
                    prompt="What is the biggest risk in offline-first sync for a mobile app?",
                    capability="risk-review",
                )
            return (
                "Findings: offline-first apps keep a local store and replay changes when the network returns. "
                "Two proven patterns: an operation log reconciled by the server, and CRDTs for conflict-free "
                f"merges. The critic's warning: {results[-1].result}"
            )
        return f"I can research that: {_quote(text)}"

    # --- critic
    def critic(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        if step == "discussion":
            return (
                "Critique: there is no explicit conflict policy yet, and no test for a network that drops "
                "halfway through a batch. Both before any estimate is trusted."
            )
        if step == "pairing":
            n = messages_before(call) // 2
            return f"On \u201c{_quote(text)}\u201d: {CRITIC_LINES[n % len(CRITIC_LINES)]}"
        return (
            "Conflict resolution. If two devices edit the same record offline, last-write-wins silently loses "
            "work; budget for merge rules and a conflict screen."
        )

    # --- coder
    def coder(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        results = tool_results(call)
        if step == "consult_estimate":
            if len(results) == 0:
                return tool_call("tasks", action="progress", payload={"stage": "reading the plan", "pct": 30})
            if len(results) == 1:
                return tool_call(
                    "tasks", action="progress", payload={"stage": "sizing components", "pct": 80}
                )
            estimate = (
                "Estimate: sync engine 6 days, conflict screen 3 days, network fault tests 2 days: 11 days."
            )
            if len(results) == 2:
                # complete before replying: the reply closes the consulting channel, which expires open tasks
                return tool_call("tasks", action="complete", result=estimate)
            return estimate
        if step == "discussion":
            return (
                "Implementation: an append-only operation log in SQLite plus a replay worker; my estimate from "
                "this morning's consult is 11 days."
            )
        if step == "pairing":
            n = messages_before(call) // 2
            if n == 2 and "say" in call.tool_names:
                if not results:
                    return tool_call(
                        "say", content="(posted with say) Logging each decision in the design doc as we go."
                    )
                return ""  # say was this turn's voice
            return f"Re \u201c{_quote(text)}\u201d: {CODER_LINES[n % len(CODER_LINES)]}"
        return f"Noted: {_quote(text)}"

    # --- drafter
    def drafter(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        revision = "request" in text.lower() or "change" in text.lower()
        if not tool_results(call):
            note = "revised as asked" if revision else "first draft ready"
            return tool_call("submit_for_review", note=note)
        if revision:
            return (
                "Draft v2: Offline sync keeps your work safe without a connection. Edits queue on the device "
                "and merge when you are back online; if two devices disagree, you choose which version stays."
            )
        return "Draft v1: Offline sync is here. The app now works without a connection and syncs later."

    # --- reviewer
    def reviewer(self, call: ModelCall, step: str | None) -> Any:
        text = input_text(call)
        if not tool_results(call):
            if "Draft v2" in text:
                return tool_call("approve", summary="clear, and it names the conflict rule")
            return tool_call("request_changes", reason="say what happens when two devices disagree")
        if "Draft v2" in text:
            return "Approved: ready to publish."
        return "One change: tell readers what happens when two devices edit the same thing."


def _json(text: str, default: Any) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return default


# ---------------------------------------------------------------------------------------------- workflow tools


def drafter_tools() -> list[Tool]:
    async def submit_for_review(
        note: str, client: AgentClientInject = None, channel: ChannelInject = None
    ) -> Handoff | str:
        """Hand the current draft to the reviewer (also posts a demo.review_request event to them).

        Args:
            note: What the reviewer should know about this draft.
        """
        if client is None or channel is None:
            return "Error: submit_for_review only works inside the review workflow"
        reviewer = await client.hub_client.get_agent("reviewer")
        await client.send_envelope(
            Envelope(
                channel_id=channel.channel_id,
                sender_id=client.agent_id,
                audience=[reviewer.agent_id],
                event_type=REVIEW_REQUEST,
                event_data={"document": "offline-sync-announcement", "note": note},
            )
        )
        return Handoff(target="reviewer", reason=note)

    return [build_tool(submit_for_review)]


def reviewer_tools() -> list[Tool]:
    def request_changes(reason: str) -> Handoff:
        """Send the draft back to the drafter with one concrete change.

        Args:
            reason: The change you want.
        """
        return Handoff(target="drafter", reason=reason)

    def approve(summary: str) -> Finish:
        """Approve the draft; this ends the review workflow.

        Args:
            summary: One line on why it is good.
        """
        return Finish(summary=summary, reason="approved")

    return [build_tool(request_changes), build_tool(approve)]


# ---------------------------------------------------------------------------------------------- the network


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
    owns_client: bool = False
    _script: asyncio.Task[None] | None = None
    _human: asyncio.Task[None] | None = None

    def __getitem__(self, name: str) -> AgentClient:
        return self.agents[name]

    def start(self) -> None:
        """Start the scripted traffic (``start_demo`` does this); idempotent."""
        if self._script is None:
            self._script = asyncio.get_running_loop().create_task(self._run_script())
        if self.human_name and self._human is None:
            self._human = asyncio.get_running_loop().create_task(self._ask_human())

    async def run(self) -> None:
        """Wait until the scripted traffic is done (the question to the human may still be open)."""
        self.start()
        assert self._script is not None
        await self._script

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

    async def _until_closed(self, channel_id: str, *, text_limit: int | None = None) -> None:
        """Wait for the channel to end, then for the agents to finish their turns.

        A channel that never ends by itself (a real model may not close the discussion) is closed past
        ``step_timeout``, or once it holds more than ``text_limit`` texts (or exactly that many for
        ``WRAP_UP_GRACE`` seconds), so the demo always moves on.
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.step_timeout
        reached_at: float | None = None
        while not (await self.hub_client.get_channel(channel_id)).is_terminal():
            now = loop.time()
            reason = "demo_step_timeout" if now > deadline else None
            if text_limit is not None and reason is None:
                texts = sum(1 for e in await self.hub_client.read_wal(channel_id) if e.event_type == EV_TEXT)
                if texts >= text_limit and reached_at is None:
                    reached_at = now
                if texts > text_limit or (reached_at is not None and now - reached_at > WRAP_UP_GRACE):
                    reason = "wrap_up"
            if reason is not None:
                await self.hub_client.close_channel(channel_id, reason=reason)
                break
            await asyncio.sleep(0.01)
        await self._settle()

    async def _open(self, step: str, opener: str, **kwargs: Any) -> Any:
        channel = await self.agents[opener].open(**kwargs)
        self.steps[channel.channel_id] = step
        return channel

    async def _run_script(self) -> None:
        a = self.agents
        # 1. consulting, with a delegate inside the researcher's turn
        ch = await self._open(
            "consult_research", "planner", type="consulting", target="researcher", intent="research"
        )
        await ch.send("What do we know about offline-first sync for mobile apps?")
        await self._until_closed(ch.channel_id)
        await self._pause()
        # 2. consulting into a task: the coder reports progress with the tasks tool
        ch = await self._open(
            "consult_estimate", "planner", type="consulting", target="coder", intent="estimate"
        )
        self.task_channels.add(ch.channel_id)
        await ch.send("Please estimate the offline sync work: operation log, conflict screen, fault tests.")
        await self._until_closed(ch.channel_id)
        await self._pause()
        # 3. a round-robin discussion; the planner looks at peers and tasks before wrapping up
        ch = await self._open(
            "discussion",
            "planner",
            type="discussion",
            target=["researcher", "critic", "coder"],
            intent="offline sync plan",
        )
        await ch.send("Topic: how do we ship offline sync? One view each, then I'll wrap up.")
        await self._until_closed(ch.channel_id, text_limit=5)  # the topic, three views, the wrap-up
        await self._pause()
        # 4. a workflow routed by handoff tools, with a custom event type on the way
        graph = TransitionGraph(
            initial_speaker=a["planner"].agent_id,
            transitions=[Transition(FromSpeaker(a["planner"].agent_id), AgentTarget(a["drafter"].agent_id))],
            default_target=TerminateTarget("review_done"),
            max_turns=8,
        )
        ch = await self._open(
            "workflow",
            "planner",
            type="workflow",
            target=["drafter", "reviewer"],
            knobs={"graph": graph.to_dict()},
            intent="announcement",
        )
        await ch.send("Draft a short announcement of offline sync for our users.")
        await self._until_closed(ch.channel_id)
        await self._pause()
        # 5. a long conversation: the window elides early turns; the coder speaks once through say
        ch = await self._open(
            "pairing",
            "coder",
            type="conversation",
            target="critic",
            knobs={"max_turns": CONVERSATION_TURNS},
            intent="pairing",
        )
        await ch.send("Pairing on the sync engine design, point by point: where do we start?")
        await self._until_closed(ch.channel_id)

    async def _ask_human(self) -> None:
        planner = self.agents["planner"]
        human = await self.hub_client.get_agent(self.human_name or "")
        ch = await planner.open(type="consulting", target=human.agent_id, intent="question for you")
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
                    (e.event_type == EV_TEXT and e.sender_id == human.agent_id)
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
            type="conversation", target=human.agent_id, knobs={"max_turns": 1}, intent="thanks"
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


async def _register(hc: HubClient, role: Role, model: Any, tools: list[Tool]) -> AgentClient:
    agent = Agent(role.name, model, system_prompt=role.system_prompt, tools=tools)
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
        Passport(name=role.name, provider="ag2net-demo", model="scripted", cost=role.cost),
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
) -> DemoNetwork:
    """Register the demo agents on a ``Hub`` or ``HubClient`` and start the scripted traffic.

    ``human_name`` names a human already registered (the person at the workbench): the planner asks them
    a question on a consulting channel and thanks them when they answer, without holding up the rest.
    ``pace`` is seconds between steps and before each model reply (0 runs flat out). ``model_factory``
    (agent name → model) swaps the scripted brains for a real model.
    """
    if isinstance(hub_or_client, HubClient):
        hc, owns = hub_or_client, False
    else:
        hc, owns = HubClient.local(hub_or_client), True
    demo = DemoNetwork(hub_client=hc, agents={}, human_name=human_name, pace=max(0.0, pace), owns_client=owns)
    if step_timeout is not None:
        demo.step_timeout = step_timeout
    elif model_factory is not None:
        demo.step_timeout = 300.0
    if human_name is not None:
        human = await hc.get_agent(human_name)
        if human.effective_kind != "human":
            raise ValueError(f"human_name {human_name!r} names a {human.effective_kind}, not a human")
    brains = Brains(demo)
    extra = {"drafter": drafter_tools(), "reviewer": reviewer_tools()}
    for role in ROLES:
        model = (
            model_factory(role.name)
            if model_factory is not None
            else ScriptedModel(brains.for_agent(role.name), name=f"demo-{role.name}", loop=True)
        )
        demo.agents[role.name] = await _register(hc, role, model, extra.get(role.name, []))
    coder = demo.agents["coder"]
    coder.on_envelope(lambda envelope: _coder_handler(demo, coder, envelope))
    demo.start()
    return demo


# ---------------------------------------------------------------------------------------------- the CLI


def preview(envelope: Envelope, width: int = 100) -> str:
    """One line saying what an envelope carries."""
    data = envelope.event_data if isinstance(envelope.event_data, dict) else {}
    if envelope.event_type == EV_TEXT:
        text = str(data.get("text", ""))
    elif envelope.event_type == EV_PACKET:
        routing = data.get("routing") or {}
        kind = routing.get("kind", "text")
        head = f"[{kind}" + (f" via {routing['tool']}" if routing.get("tool") else "") + "] "
        text = head + str(data.get("body", ""))
    elif "reason" in data:
        text = f"reason={data['reason']}"
    elif envelope.event_type.startswith("ag2.channel."):
        text = ""
    else:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


async def run_demo_cli(
    print_fn: Callable[[str], Any] = print, model: str | None = None, base_url: str | None = None
) -> int:
    """Run the demo once on a memory hub and print one line per envelope; returns the exit code (0)."""
    from ag2net.hub import Hub

    factory: ModelFactory | None = None
    if model is not None:
        from ag2net.agent.openai_model import OpenAIChatModel

        if not model.startswith("openai:") or not model.removeprefix("openai:"):
            raise ValueError(f"model {model!r} must look like openai:MODEL_NAME, e.g. openai:gpt-4o-mini")
        model_name = model.removeprefix("openai:")

        def factory(name: str) -> Any:
            return OpenAIChatModel(model_name, base_url=base_url, name=f"{model_name} ({name})")

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    printed = 0
    try:
        start = await hc.observe_position()
        printed = start

        def show(event: Any) -> None:
            env = event.envelope
            if event.kind != "envelope" or env is None:
                return
            md = hub.channels.get(env.channel_id)
            kind = md.manifest.type if md is not None else "?"
            print_fn(f"{kind:<12} {hc.name_for(env.sender_id):<10} {env.event_type:<26} {preview(env)}")

        async def follow() -> None:
            nonlocal printed
            async for event in hc.observe(since=start):
                show(event)
                printed = event.position

        follower = asyncio.get_running_loop().create_task(follow())
        demo = await start_demo(hc, model_factory=factory)
        try:
            await demo.run()
        finally:
            await demo.close()
        end = await hc.observe_position()
        follower.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await follower
        if printed < end:
            async for event in hc.observe(since=printed):
                show(event)
                if event.position >= end:
                    break
        channels = await hc.list_channels(all_channels=True, include_terminal=True, limit=None)
        turns = await hc.list_turns(limit=10_000)
        print_fn("")
        print_fn(
            f"{len(channels)} channels, {sum(await _counts(hc, channels))} envelopes, {len(turns)} LLM turns:"
        )
        for md in channels:
            names = ", ".join(hc.name_for(p) for p in md.participant_ids())
            print_fn(f"  {md.manifest.type:<12} {names:<40} {md.state.value} ({md.close_reason or 'open'})")
        return 0
    finally:
        await hc.close()
        await hub.close()


async def _counts(hc: HubClient, channels: list[Any]) -> list[int]:
    return [await hc.wal_count(md.channel_id) for md in channels]


__all__ = [
    "CONVERSATION_TURNS",
    "REVIEW_REQUEST",
    "ROLES",
    "Brains",
    "DemoNetwork",
    "Role",
    "preview",
    "run_demo_cli",
    "start_demo",
]

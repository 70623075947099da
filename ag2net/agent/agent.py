"""``Agent``: a name, a model, a system prompt and tools, and the tool loop that runs one turn (``ask``).

An ``Agent`` holds no per-turn state, so several channels may run turns on one agent concurrently.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, Unpack

from ag2net.agent.hooks import (
    TURN_CONTEXT_DEP,
    ApprovalPolicy,
    HumanInputError,
    MiddlewareChain,
    ToolApprovalRequest,
    TurnContext,
    TurnHooks,
    run_tool_middleware,
)
from ag2net.agent.models import Model, ModelCall, ModelError, ModelResponse, model_params
from ag2net.agent.task import Task, TaskOptions, TaskSink, active_task
from ag2net.agent.tool import AGENT_CLIENT_DEP, CHANNEL_DEP, HUB_DEP, TASK_DEP, Tool, as_tool
from ag2net.breakpoints import Decision
from ag2net.events import (
    BaseEvent,
    DataInput,
    Input,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)


class ToolLoopError(RuntimeError):
    """The model kept asking for tools past ``max_tool_rounds``.

    ``events``, ``calls`` and ``usage`` hold what the turn produced before it was stopped, so a
    failed turn can still be recorded.
    """

    def __init__(
        self, message: str, *, events: list[BaseEvent], calls: list[ModelCall], usage: dict[str, int]
    ) -> None:
        super().__init__(message)
        self.events = events
        self.calls = calls
        self.usage = usage


@dataclass(slots=True)
class AgentReply:
    """The outcome of one ``Agent.ask`` turn.

    ``body`` is the final reply text (None when the model ended with no text). ``events`` is
    everything the turn produced, in order: the current input as a ``ModelRequest`` (when there was
    input), any text the model sent alongside tool calls as ``ModelMessage``, each round's
    ``ToolCallEvent``\\ s followed by their ``ToolResultEvent``\\ s, and the final ``ModelMessage``.
    ``calls`` is every ``ModelCall`` the model received, in order — exactly what it was sent.
    ``usage`` sums the token usage of all calls.
    """

    body: str | None
    events: list[BaseEvent] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    calls: list[ModelCall] = field(default_factory=list)

    @property
    def tool_calls(self) -> list[ToolCallEvent]:
        """The tool calls the model made during the turn."""
        return [e for e in self.events if isinstance(e, ToolCallEvent)]

    @property
    def tool_results(self) -> list[ToolResultEvent]:
        """The results the tools returned during the turn."""
        return [e for e in self.events if isinstance(e, ToolResultEvent)]


def to_parts(inputs: Iterable[Any]) -> list[Input]:
    """Normalise ``ask`` inputs: ``str`` → ``TextInput``, Input parts as they are, a ``ModelRequest``
    → its parts, a list of str/parts → flattened (so ``ask(parts)`` equals ``ask(*parts)``), anything
    else → ``DataInput``."""
    parts: list[Input] = []
    for item in inputs:
        if (
            isinstance(item, list | tuple)
            and item
            and all(isinstance(i, str | TextInput | DataInput) for i in item)
        ):
            parts.extend(to_parts(item))
        elif isinstance(item, str):
            parts.append(TextInput(item))
        elif isinstance(item, TextInput | DataInput):
            parts.append(item)
        elif isinstance(item, ModelRequest):
            parts.extend(item.parts)
        else:
            parts.append(DataInput(item))
    return parts


def merge_tools(*groups: Iterable[Tool | Callable[..., Any]]) -> list[Tool]:
    """Concatenate tool lists; a later tool with an already-seen name replaces the earlier one in place."""
    merged: dict[str, Tool] = {}
    for group in groups:
        for item in group:
            t = as_tool(item)
            merged[t.name] = t
    return list(merged.values())


def result_text(value: Any) -> str:
    """What the model is shown for a tool's return value: ``str`` as-is, anything else as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(_jsonable(value), ensure_ascii=False, default=str)


def _jsonable(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        to_dict = getattr(value, "to_dict", None)
        return to_dict() if callable(to_dict) else dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)  # pydantic models
    if callable(dump):
        return dump(mode="json")
    return value


#: The dependency under which a turn's runner (the network handler) passes a list that collects one entry per
#: tool call put to a person: ``{"call_id", "tool", "action", "by", "reason"[, "arguments"]}``.
APPROVALS_DEP = "ag2net.approvals"

_YES = {"y", "yes", "1", "approve", "approved", "ok", "always"}
_NO = {"", "n", "no", "0", "deny", "denied"}


def _add_usage(total: dict[str, int], usage: dict[str, Any]) -> None:
    usage = dict(usage)
    if "total_tokens" not in usage:
        usage["total_tokens"] = int(usage.get("prompt_tokens", 0)) + int(usage.get("completion_tokens", 0))
    for key, amount in usage.items():
        if isinstance(amount, int | float) and not isinstance(amount, bool):
            total[key] = total.get(key, 0) + int(amount)


class Agent:
    """An LLM agent: ``name``, ``model``, ``system_prompt`` and ``tools``.

    ``tools`` is a list of ``Tool`` (plain functions are converted with ``as_tool``); the network
    plugin appends its tools to it. ``prompt_prefixes`` are lines put before the system prompt (the
    plugin adds "You are {name} (agent_id: {id})."). ``task_sink`` is where ``agent.task(...)``
    mirrors task state when no ``sink=`` is given (the network client sets it at registration).
    """

    def __init__(
        self,
        name: str,
        model: Model | None = None,
        system_prompt: str = "",
        tools: Sequence[Tool | Callable[..., Any]] = (),
        *,
        max_tool_rounds: int = 10,
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ValueError("Agent name must be a non-empty string, e.g. Agent('researcher', model=...)")
        if max_tool_rounds < 0:
            raise ValueError(f"max_tool_rounds must be 0 or more, got {max_tool_rounds}")
        self.name = name
        self.model = model
        self.system_prompt = system_prompt
        self.tools: list[Tool] = [as_tool(t) for t in tools]
        self.max_tool_rounds = max_tool_rounds
        self.prompt_prefixes: list[str] = []
        self.task_sink: TaskSink | None = None
        self.hooks = TurnHooks()

    def __repr__(self) -> str:
        model = getattr(self.model, "name", None)
        return f"Agent(name={self.name!r}, model={model!r}, tools={[t.name for t in self.tools]})"

    def add_prompt_prefix(self, text: str) -> None:
        """Put ``text`` before the system prompt on every turn (once, however often it is added)."""
        if text and text not in self.prompt_prefixes:
            self.prompt_prefixes.append(text)

    def remove_prompt_prefix(self, text: str) -> None:
        """Stop sending a prefix added with ``add_prompt_prefix`` (no-op when absent)."""
        if text in self.prompt_prefixes:
            self.prompt_prefixes.remove(text)

    def system_text(self, system_prompt: str | None = None) -> str:
        """The system prompt the model receives: prefixes, then the prompt, blank-line separated.

        (Prompt functions and assembly policies in ``hooks`` add to it per turn.)"""
        return "\n\n".join(self._prompt_pieces(system_prompt))

    def _prompt_pieces(self, system_prompt: str | None = None) -> list[str]:
        prompt = self.system_prompt if system_prompt is None else system_prompt
        return [p for p in [*self.prompt_prefixes, prompt] if p]

    def require_approval(
        self, *tools: str, when: Callable[[str, dict[str, Any]], Any] | None = None
    ) -> ApprovalPolicy:
        """Make calls of the named tools (``"*"``: every tool), or the calls ``when(tool_name, arguments)``
        picks, wait for a person before they run — as ``Tool(requires_approval=True)`` does for one tool."""
        policy = ApprovalPolicy(tuple(tools), when)
        self.hooks.approvals.append(policy)
        return policy

    def tools_for_turn(self, tools: Iterable[Tool | Callable[..., Any]] = ()) -> list[Tool]:
        """The tools offered in a turn: the agent's own, then ``tools`` (a same-named later tool wins)."""
        return merge_tools(self.tools, tools)

    async def ask(
        self,
        *inputs: Any,
        history: Sequence[BaseEvent] = (),
        tools: Iterable[Tool | Callable[..., Any]] = (),
        dependencies: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        system_text: str | None = None,
    ) -> AgentReply:
        """Run one turn: call the model, run the tools it asks for, repeat until it answers in text.

        ``inputs`` become the current ``ModelRequest``; ``history`` (e.g. a projected view) comes
        before it. ``tools`` are added after ``agent.tools``. ``dependencies`` fill injected tool
        parameters; inside ``async with agent.task(...)`` the task is added under ``TASK_DEP``.
        A tool that raises, an unknown tool and unparsable arguments become error results
        (``is_error=True``, text ``"Error: ..."``) and the loop goes on. More than
        ``max_tool_rounds`` rounds raises ``ToolLoopError``. ``system_prompt`` replaces the agent's prompt for
        this turn (its prefixes kept); ``system_text`` replaces the whole of it, prefixes too (a person's edit
        at a turn breakpoint of what ``system_text()`` showed). Calls of tools that need approval
        (``Tool.requires_approval``, ``require_approval``) wait for a person first.
        """
        model = self.model
        if model is None:
            raise ModelError(
                f"agent {self.name!r} has no model; construct it with model=ScriptedModel(...) or "
                "model=OpenAIChatModel(...)"
            )
        deps = dict(dependencies or {})
        if deps.get(TASK_DEP) is None:
            active = active_task(self)
            if active is not None:
                deps[TASK_DEP] = active
        hooks: TurnHooks = getattr(self, "hooks", None) or TurnHooks()
        run = _ToolLoop(self, model, hooks, deps, self.tools_for_turn(tools), list(history))
        parts = run.parts = to_parts(inputs)
        request = ModelRequest(list(parts))
        if parts:
            run.events.append(request)
        context = TurnContext(self, deps, run.prior, run.events, hitl_hook=hooks.hitl_hook)
        deps.setdefault(TURN_CONTEXT_DEP, context)
        pieces = [system_text] if system_text is not None else self._prompt_pieces(system_prompt)
        context.prompt = [*pieces, *await hooks.render_prompts(context)]
        run.chain = hooks.start(request, context)
        if parts:
            await hooks.notify(request)
        final = await run.chain.turn(run.turn, request, context)
        text = final if isinstance(final, str) else getattr(final, "content", None)
        body = text or None
        if body is not None:
            message = ModelMessage(body)
            run.events.append(message)
            await hooks.notify(message)
        return AgentReply(body=body, events=run.events, usage=run.usage, calls=run.calls)

    async def _run_tool(
        self,
        call: ToolCallEvent,
        by_name: dict[str, Tool],
        deps: dict[str, Any],
        context: TurnContext | None = None,
        reason: str = "",
    ) -> ToolResultEvent:
        target = by_name.get(call.name)
        if target is None:
            available = ", ".join(by_name) or "none"
            return _error_result(call, f"unknown tool '{call.name}'; available tools: {available}")
        if target.middleware:

            async def execute(event: ToolCallEvent, _ctx: Any) -> ToolResultEvent:
                return await self._execute_tool(event, target, deps, context, reason)

            return await run_tool_middleware(target.middleware, execute, call, context)
        return await self._execute_tool(call, target, deps, context, reason)

    async def _execute_tool(
        self,
        call: ToolCallEvent,
        target: Tool,
        deps: dict[str, Any],
        context: TurnContext | None = None,
        reason: str = "",
    ) -> ToolResultEvent:
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError as exc:
            return _error_result(call, f"arguments for tool '{call.name}' are not valid JSON ({exc})")
        if not isinstance(arguments, dict):
            return _error_result(
                call,
                f"arguments for tool '{call.name}' must be a JSON object, got {type(arguments).__name__}",
            )
        hooks: TurnHooks = getattr(self, "hooks", None) or TurnHooks()
        if hooks.needs_approval(target, arguments):
            try:
                decision = await _ask_approval(self, call, arguments, deps, context, reason)
            except Exception as exc:
                return _error_result(
                    call, f"tool '{call.name}' needs approval and none could be had ({exc}); it did not run"
                )
            approved = _approved_arguments(call, arguments, deps, decision)
            if isinstance(approved, ToolResultEvent):
                return approved
            arguments = approved
        try:
            value = await target.call(arguments, deps)
        except Exception as exc:
            return _error_result(call, str(exc) or type(exc).__name__, exc)
        return ToolResultEvent(call.id, call.name, result_text(value), False, value)

    def task(self, title: str, **options: Unpack[TaskOptions]) -> Task:
        """A unit of work this agent owns, used as ``async with agent.task("title") as task: ...``.

        ``options`` are ``Task``'s; state is mirrored to ``sink`` (default ``agent.task_sink``).
        See ``ag2net.agent.task.Task``.
        """
        if options.get("sink") is None:
            options["sink"] = self.task_sink
        return Task(self, title, **options)


def _prior_count(history: list[BaseEvent], turn_events: list[BaseEvent]) -> int:
    """How many events of a model call's ``history`` came from before the turn (policies may reshape it)."""
    n = len(turn_events)
    if n == 0:
        return len(history)
    if len(history) >= n and all(a is b for a, b in zip(history[-n:], turn_events, strict=True)):
        return len(history) - n
    return max(0, len(history) - n)


def _error_result(call: ToolCallEvent, message: str, value: Any = None) -> ToolResultEvent:
    return ToolResultEvent(call.id, call.name, f"Error: {message}", True, value)


def _approved_arguments(
    call: ToolCallEvent, arguments: dict[str, Any], deps: dict[str, Any], decision: Decision | None
) -> dict[str, Any] | ToolResultEvent:
    """What a person's answer to a call that needs approval (``_ask_approval``) means: the arguments to run it
    with, or the error result the model gets instead (denied, or no one to ask, ``decision`` None). The
    answer is logged under ``APPROVALS_DEP`` when the deps carry that list."""
    if decision is None:
        return _error_result(
            call,
            f"tool '{call.name}' needs a person's approval and there is no one to ask: run the agent on a hub "
            "(HubClient.register) or give it a human-input hook (agent.hooks.hitl_hook = func)",
        )
    entry: dict[str, Any] = {
        "call_id": call.id,
        "tool": call.name,
        "action": decision.action,
        "by": decision.by,
        "reason": decision.reason,
    }
    log = deps.get(APPROVALS_DEP)
    if isinstance(log, list):
        log.append(entry)
    if decision.action == "approve":
        return arguments
    if decision.action == "edit":
        if not isinstance(decision.arguments, dict):
            return _error_result(
                call, f"the approval of tool '{call.name}' edited its arguments into no object"
            )
        entry["arguments"] = dict(decision.arguments)
        return dict(decision.arguments)
    who = decision.by or "a person"
    if decision.action == "deny":
        return _error_result(
            call, f"denied by {who}: {decision.reason}" if decision.reason else f"denied by {who}"
        )
    return _error_result(
        call, f"the approval of tool '{call.name}' was answered {decision.action!r}; it did not run"
    )


async def _ask_approval(
    agent: Agent,
    call: ToolCallEvent,
    arguments: dict[str, Any],
    deps: dict[str, Any],
    context: TurnContext | None,
    reason: str,
) -> Decision | None:
    """Put a call that needs approval to a person: on a hub the hub's inbox is asked (``request_approval``);
    alone, the agent's human-input hook gets a ``ToolApprovalRequest``; None when there is no one to ask."""
    hub = deps.get(HUB_DEP)
    request_approval: Callable[..., Awaitable[Any]] | None = getattr(hub, "request_approval", None)
    if request_approval is not None and callable(request_approval):
        agent_id = getattr(deps.get(AGENT_CLIENT_DEP), "agent_id", "") or agent.name
        channel = deps.get(CHANNEL_DEP)
        channel_id = getattr(getattr(channel, "metadata", None), "channel_id", None) or getattr(
            channel, "channel_id", ""
        )
        answer = await request_approval(
            agent_id, channel_id or "", call.name, arguments, reason=reason, call_id=call.id
        )
        return _as_decision(answer)
    hook = context.hitl_hook if context is not None else agent.hooks.hitl_hook
    if hook is None:
        return None
    shown = json.dumps(arguments, ensure_ascii=False, default=str)
    request = ToolApprovalRequest(
        f"Agent wants to call the tool:\n`{call.name}`, {shown}\nPlease approve or deny this request.\nY/N?\n",
        tool_call_id=call.id,
        tool=call.name,
        arguments=dict(arguments),
        reason=reason,
    )
    ctx = context if context is not None else TurnContext(agent, deps, hitl_hook=hook)
    return _as_decision(await ctx.ask(request), by="human")


def _as_decision(answer: Any, by: str = "") -> Decision:
    """A ``Decision`` from what the hub or a human-input hook answered (a Decision, its dict, or text)."""
    if isinstance(answer, Decision):
        return answer
    if isinstance(answer, dict):
        return Decision.from_dict(answer)
    text = answer if isinstance(answer, str) else getattr(answer, "content", None)
    if not isinstance(text, str):
        raise HumanInputError(
            f"the approval was answered with {type(answer).__name__}; answer with text (y/n or a reason "
            "to deny) or an ag2net.breakpoints.Decision"
        )
    word = text.strip().lower()
    if word in _YES:
        return Decision("approve", by=by)
    return Decision("deny", by=by, reason="" if word in _NO else text.strip())


class _ToolLoop:
    """One ``Agent.ask``: call the model, run the tools it asks for, repeat until it answers in text. Holds
    what the turn offers (tools, schemas, model parameters) and what it gathered (events, calls, usage)."""

    def __init__(
        self,
        agent: Agent,
        model: Model,
        hooks: TurnHooks,
        deps: dict[str, Any],
        offered: list[Tool],
        prior: list[BaseEvent],
    ) -> None:
        self.agent = agent
        self.model = model
        self.hooks = hooks
        self.deps = deps
        self.by_name = {t.name: t for t in offered}
        self.schemas = [t.schema() for t in offered]
        self.params = model_params(model)
        self.prior = prior
        self.parts: list[Input] = []
        self.events: list[BaseEvent] = []
        self.calls: list[ModelCall] = []
        self.usage: dict[str, int] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
        self.chain: MiddlewareChain | None = None
        #: The model's text beside this round's tool calls (an approval's reason).
        self.reason = ""

    async def run_tool(self, call_event: ToolCallEvent, ctx: TurnContext) -> ToolResultEvent:
        return await self.agent._run_tool(call_event, self.by_name, self.deps, ctx, self.reason)

    def completer(self, prompts: list[str], round_no: int) -> Callable[..., Awaitable[ModelResponse]]:
        """The innermost model call of round ``round_no``, with the prompts assembled for it."""

        async def complete(call_events: Sequence[BaseEvent], _ctx: TurnContext) -> ModelResponse:
            history_now = list(call_events)
            call = ModelCall(
                system="\n\n".join(p for p in prompts if p),
                history=history_now,
                inputs=list(self.parts),
                tools=self.schemas,
                prior=_prior_count(history_now, self.events),
                round=round_no,
                params=self.params,
            )
            self.calls.append(call)
            response = await self.model.complete(call)
            if call.response is None:  # any model's answer reaches the turn record's rounds (usage, id)
                call.response = response
            return response

        return complete

    async def turn(self, _event: Any, ctx: TurnContext) -> ModelResponse:
        assert self.chain is not None
        hooks, events = self.hooks, self.events
        rounds = 0
        while True:
            prompts, assembled = await hooks.assemble(list(ctx.prompt), [*self.prior, *events], ctx)
            response: ModelResponse = await self.chain.llm_call(
                self.completer(prompts, rounds), assembled, ctx
            )
            _add_usage(self.usage, response.usage or {})
            await hooks.notify(response)
            if not response.tool_calls:
                return response
            if rounds >= self.agent.max_tool_rounds:
                self._too_many_rounds(response)
            rounds += 1
            said = [ModelMessage(response.content)] if response.content else []
            self.reason = response.content or ""
            for event in [*said, *response.tool_calls]:
                events.append(event)
                await hooks.notify(event)
            for tc in response.tool_calls:
                result = await self.chain.tool_execution(self.run_tool, tc, ctx)
                events.append(result)
                await hooks.notify(result)

    def _too_many_rounds(self, response: ModelResponse) -> NoReturn:
        agent = self.agent
        asked = ", ".join(c.name for c in response.tool_calls)
        raise ToolLoopError(
            f"agent {agent.name!r} exceeded max_tool_rounds={agent.max_tool_rounds}: the model still "
            f"asked for tools ({asked}); raise max_tool_rounds or change the prompt",
            events=self.events,
            calls=self.calls,
            usage=self.usage,
        )


__all__ = ["APPROVALS_DEP", "Agent", "AgentReply", "ToolLoopError", "merge_tools", "result_text", "to_parts"]

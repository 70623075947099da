"""What an agent runs around each turn besides its model and tools: dynamic prompt functions, assembly
policies, observers, middleware and a human-input hook.

``Agent.hooks`` (a ``TurnHooks``) holds them; ``NetworkPlugin``'s builder methods (``prompt``, ``observer``,
``add_middleware``, ``add_policy``, ``hitl_hook`` …) fill it. In one ``Agent.ask``:

1. a ``TurnContext`` is made (the turn's dependencies, prior history, events so far, system prompt pieces) and
   put into the dependencies under ``TURN_CONTEXT_DEP`` (tools take it with ``TurnContextInject``);
2. prompt functions run once and their text joins the system prompt after the agent's own prompt;
3. each middleware factory is called once with ``(request, context)``; the instances wrap the whole turn
   (``on_turn``), every model call (``on_llm_call``) and every tool execution (``on_tool_execution``) — the
   first in the list is the outermost;
4. before every model call the assembly policies transform ``(prompts, events)`` in order;
5. observers see every event of the turn as it happens: the request, each ``ModelResponse``, text messages,
   tool calls and tool results.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import types
import typing
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from ag2net.agent.tool import Inject

log = logging.getLogger(__name__)

TURN_CONTEXT_DEP = "ag2.context"
TurnContextInject = Annotated[Any, Inject(TURN_CONTEXT_DEP)]
"""A tool parameter annotated with this receives the running turn's ``TurnContext`` (hidden from the schema)."""


class HumanInputError(RuntimeError):
    """A tool asked for human input (``context.input``) and no answer could be had."""


@dataclass(slots=True)
class HumanInputRequest:
    """What a human-input hook receives: the question (``content``) and how long the asker waits."""

    content: str
    timeout: float | None = None


@dataclass(slots=True)
class ToolApprovalRequest(HumanInputRequest):
    """A human-input request asking whether one tool call may go ahead (ag2 1.2.1's ``ToolApprovalRequest``):
    what an agent used alone (no hub) hands its human-input hook before a tool that needs approval runs.

    The hook answers with text — ``y``/``yes``/``1``/``approve`` approve, anything else denies (its text, when
    it is not a bare ``n``/``no``, is the reason) — or with an ``ag2net.breakpoints.Decision``
    (``approve``/``deny``/``edit`` with ``arguments``)."""

    tool_call_id: str = ""
    tool: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    #: The model's text beside the call, if any.
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalPolicy:
    """Which of an agent's tool calls wait for a person before they run, besides ``Tool(requires_approval=True)``.

    ``tools``: tool names (``"*"``: every tool); ``when``: a predicate ``when(tool_name, arguments) -> bool``.
    With both, a call needs approval when its tool is named *and* the predicate says so; with only ``when``,
    any tool's call the predicate picks. ``agent.require_approval(...)`` / ``plugin.require_approval(...)``
    add one."""

    tools: tuple[str, ...] = ()
    when: Callable[[str, dict[str, Any]], Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.tools, str) or not all(isinstance(t, str) and t for t in self.tools):
            raise TypeError(
                f"ApprovalPolicy.tools must be tool names, e.g. ('delete_file',) or ('*',); got {self.tools!r}"
            )
        if self.when is not None and not callable(self.when):
            raise TypeError(
                "ApprovalPolicy.when must be a predicate when(tool_name, arguments) -> bool, "
                f"got {type(self.when).__name__}"
            )
        if not self.tools and self.when is None:
            raise ValueError("an ApprovalPolicy needs tools=(names…) or when=predicate (or both)")

    def applies(self, tool_name: str, arguments: dict[str, Any]) -> bool:
        """Whether a call of ``tool_name`` with ``arguments`` waits for a person."""
        if self.tools and tool_name not in self.tools and "*" not in self.tools:
            return False
        return True if self.when is None else bool(self.when(tool_name, arguments))


@dataclass(eq=False)
class TurnContext:
    """The running turn, as middleware, policies, prompt functions and tools see it.

    ``history`` is what came before the turn (e.g. the projected channel view); ``events`` is the turn's own
    events so far (a live list); ``prompt`` the system prompt pieces (agent prefixes, its prompt, the prompt
    functions' text); ``dependencies`` the turn's injectable values.
    """

    agent: Any
    dependencies: dict[str, Any]
    history: list[Any] = field(default_factory=list)
    events: list[Any] = field(default_factory=list)
    prompt: list[str] = field(default_factory=list)
    hitl_hook: Callable[..., Any] | None = None

    async def ask(self, request: HumanInputRequest) -> Any:
        """Put ``request`` (a ``HumanInputRequest``, e.g. a ``ToolApprovalRequest``) to the agent's human-input
        hook and return its answer as it gave it (text, an object with ``content``, or a ``Decision``)."""
        hook = self.hitl_hook
        if hook is None:
            raise HumanInputError(
                f"agent {getattr(self.agent, 'name', '?')!r} has no human-input hook; add one with "
                "plugin.hitl_hook(func) or agent.hooks.hitl_hook = func"
            )
        timeout = request.timeout
        try:
            answer = hook(request)
            if inspect.isawaitable(answer):
                answer = await asyncio.wait_for(answer, timeout) if timeout is not None else await answer
        except HumanInputError:
            raise
        except TimeoutError:
            raise HumanInputError(f"no human answered {request.content!r} within {timeout}s") from None
        except Exception as exc:
            raise HumanInputError(f"the human-input hook failed: {exc or type(exc).__name__}") from exc
        if answer is None:
            raise HumanInputError("the human-input hook returned no answer (None); return the answer text")
        return answer

    async def input(self, message: str, timeout: float | None = None) -> str:
        """Ask a human ``message`` through the agent's human-input hook and return the answer text."""
        answer = await self.ask(HumanInputRequest(message, timeout))
        text = answer if isinstance(answer, str) else getattr(answer, "content", None)
        if not isinstance(text, str):
            raise HumanInputError(
                f"the human-input hook returned {type(answer).__name__}; return a string "
                "(or an object with a string `content`)"
            )
        return text


class BaseMiddleware:
    """Subclass and override the hooks you need; each default just calls the next layer.

    A middleware *factory* is anything called as ``factory(event, context)`` once per turn that returns an
    object with some of these hooks — a ``BaseMiddleware`` subclass itself is one.
    """

    def __init__(self, event: Any, context: TurnContext) -> None:
        self.event = event
        self.context = context

    async def on_turn(
        self, call_next: Callable[..., Awaitable[Any]], event: Any, context: TurnContext
    ) -> Any:
        return await call_next(event, context)

    async def on_llm_call(
        self, call_next: Callable[..., Awaitable[Any]], events: Sequence[Any], context: TurnContext
    ) -> Any:
        return await call_next(events, context)

    async def on_tool_execution(
        self, call_next: Callable[..., Awaitable[Any]], event: Any, context: TurnContext
    ) -> Any:
        return await call_next(event, context)


def _check_condition(condition: Any) -> Callable[[Any], bool]:
    if condition is None:
        return lambda event: True
    if isinstance(condition, type | tuple | types.UnionType) or typing.get_origin(condition) is typing.Union:
        try:
            isinstance(None, condition)
        except TypeError:
            raise TypeError(
                f"observer condition {condition!r} is not a type, a tuple/union of types or a predicate"
            ) from None
        return lambda event: isinstance(event, condition)
    if callable(condition):
        return lambda event: bool(condition(event))
    raise TypeError(
        f"observer condition must be an event type, a tuple or union of types, or a predicate; got {condition!r}"
    )


@dataclass(eq=False)
class Observer:
    """``callback(event)`` (sync or async) for each turn event matching ``condition``.

    ``condition``: None (every event), an event type, a tuple or ``|``-union of types, or a predicate
    ``event -> bool``. An observer that raises is logged and the turn goes on.
    """

    callback: Callable[..., Any]
    condition: Any = None
    _match: Callable[[Any], bool] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.callback):
            raise TypeError(f"observer callback must be callable, got {self.callback!r}")
        self._match = _check_condition(self.condition)

    def matches(self, event: Any) -> bool:
        return self._match(event)

    async def notify(self, event: Any) -> None:
        if not self.matches(event):
            return
        result = self.callback(event)
        if inspect.isawaitable(result):
            await result


def as_observer(value: Any) -> Observer:
    """An ``Observer`` as is; any callable as an observer of every event."""
    if isinstance(value, Observer):
        return value
    if callable(value):
        return Observer(value)
    raise TypeError(f"an observer must be an Observer or a callable taking the event, got {value!r}")


def check_policy(policy: Any) -> Any:
    apply = getattr(policy, "apply", None)
    if not callable(apply) and not callable(policy):
        raise TypeError(
            f"an assembly policy needs an apply(prompts, events, context) method, got {type(policy).__name__}"
        )
    return policy


def check_middleware(factory: Any) -> Any:
    if not callable(factory) and not any(
        callable(getattr(factory, h, None)) for h in ("on_turn", "on_llm_call", "on_tool_execution")
    ):
        raise TypeError(
            "middleware must be a factory called as factory(event, context) (e.g. a BaseMiddleware "
            f"subclass), got {type(factory).__name__}"
        )
    return factory


def check_prompt(prompt: Any) -> Any:
    if not isinstance(prompt, str) and not callable(prompt):
        raise TypeError(f"a prompt must be a string or a function returning one, got {type(prompt).__name__}")
    return prompt


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def _wrap(hook: Callable[..., Any], call_next: Callable[..., Awaitable[Any]]):
    async def layer(value: Any, context: TurnContext | None) -> Any:
        return await hook(call_next, value, context)

    return layer


class MiddlewareChain:
    """The middleware instances of one turn, composed around the turn, model calls and tool executions."""

    def __init__(self, instances: list[Any]) -> None:
        self.instances = instances

    def _compose(self, hook_name: str, inner: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        call = inner
        for instance in reversed(self.instances):
            hook = getattr(instance, hook_name, None)
            if callable(hook):
                call = _wrap(hook, call)
        return call

    async def turn(self, inner: Callable[..., Awaitable[Any]], event: Any, context: TurnContext) -> Any:
        return await self._compose("on_turn", inner)(event, context)

    async def llm_call(
        self, inner: Callable[..., Awaitable[Any]], events: Sequence[Any], context: TurnContext
    ) -> Any:
        return await self._compose("on_llm_call", inner)(events, context)

    async def tool_execution(
        self, inner: Callable[..., Awaitable[Any]], event: Any, context: TurnContext
    ) -> Any:
        return await self._compose("on_tool_execution", inner)(event, context)


async def run_tool_middleware(
    middleware: Sequence[Callable[..., Awaitable[Any]]],
    inner: Callable[..., Awaitable[Any]],
    event: Any,
    context: TurnContext | None,
) -> Any:
    """Run a tool's own middleware, each ``mw(call_next, event, context)``, the first outermost."""
    call = inner
    for mw in reversed(list(middleware)):
        call = _wrap(mw, call)
    return await call(event, context)


@dataclass(eq=False)
class TurnHooks:
    """An agent's per-turn hooks (see the module docstring for when each runs)."""

    prompts: list[str | Callable[..., Any]] = field(default_factory=list)
    observers: list[Observer] = field(default_factory=list)
    middleware: list[Any] = field(default_factory=list)
    policies: list[Any] = field(default_factory=list)
    hitl_hook: Callable[..., Any] | None = None
    #: Which tool calls wait for a person besides the tools declared ``requires_approval=True``.
    approvals: list[ApprovalPolicy] = field(default_factory=list)

    def needs_approval(self, tool: Any, arguments: dict[str, Any]) -> bool:
        """Whether this call of ``tool`` (a ``Tool``) waits for a person before it runs."""
        if getattr(tool, "requires_approval", False):
            return True
        return any(policy.applies(tool.name, arguments) for policy in self.approvals)

    def extend(self, other: TurnHooks) -> None:
        """Add ``other``'s hooks after these (its human-input hook replaces this one when set)."""
        self.approvals.extend(a for a in other.approvals if a not in self.approvals)
        self.prompts.extend(p for p in other.prompts if p not in self.prompts)
        self.observers.extend(o for o in other.observers if o not in self.observers)
        self.middleware.extend(m for m in other.middleware if m not in self.middleware)
        self.policies.extend(p for p in other.policies if p not in self.policies)
        if other.hitl_hook is not None:
            self.hitl_hook = other.hitl_hook

    async def render_prompts(self, context: TurnContext) -> list[str]:
        """The prompt functions' text, in order (static strings as they are; empty results dropped)."""
        out: list[str] = []
        for prompt in self.prompts:
            if isinstance(prompt, str):
                text: Any = prompt
            else:
                try:
                    params = inspect.signature(prompt).parameters.values()
                except (TypeError, ValueError):  # a builtin without a signature: call it bare
                    params = []
                wants_context = any(
                    p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL) for p in params
                )
                text = await _maybe_await(prompt(context) if wants_context else prompt())
            if text is None or text == "":
                continue
            if not isinstance(text, str):
                name = getattr(prompt, "__name__", repr(prompt))
                raise TypeError(
                    f"prompt function {name} returned {type(text).__name__}; return the text to add to the "
                    "system prompt (or None)"
                )
            out.append(text)
        return out

    async def assemble(
        self, prompts: list[str], events: list[Any], context: TurnContext
    ) -> tuple[list[str], list[Any]]:
        """Run the assembly policies in order over ``(prompts, events)``."""
        for policy in self.policies:
            apply = getattr(policy, "apply", None)
            result = await _maybe_await(
                apply(prompts, events, context) if callable(apply) else policy(prompts, events, context)
            )
            try:
                prompts, events = result
            except (TypeError, ValueError):
                raise TypeError(
                    f"assembly policy {type(policy).__name__} returned {type(result).__name__}; "
                    "return a (prompts, events) pair"
                ) from None
            prompts, events = list(prompts), list(events)
        return prompts, events

    async def notify(self, event: Any) -> None:
        """Hand ``event`` to every matching observer (an observer that raises is logged, not propagated)."""
        for observer in self.observers:
            try:
                await observer.notify(event)
            except Exception:
                log.exception("observer %r failed on %s", observer.callback, type(event).__name__)

    def start(self, event: Any, context: TurnContext) -> MiddlewareChain:
        """Instantiate the middleware for one turn (factories are called with ``(event, context)``)."""
        instances = []
        for factory in self.middleware:
            is_instance = not callable(factory) or (
                not isinstance(factory, type)
                and any(
                    callable(getattr(factory, h, None))
                    for h in ("on_turn", "on_llm_call", "on_tool_execution")
                )
            )
            instances.append(factory if is_instance else factory(event, context))
        return MiddlewareChain(instances)


__all__ = [
    "TURN_CONTEXT_DEP",
    "ApprovalPolicy",
    "BaseMiddleware",
    "HumanInputError",
    "HumanInputRequest",
    "MiddlewareChain",
    "Observer",
    "ToolApprovalRequest",
    "TurnContext",
    "TurnContextInject",
    "TurnHooks",
    "as_observer",
    "check_middleware",
    "check_policy",
    "check_prompt",
    "run_tool_middleware",
]

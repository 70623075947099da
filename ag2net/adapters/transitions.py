"""Workflow routing: transition graphs of conditions and targets, their JSON form, and the ``Handoff``/``Finish``
values a handoff tool returns.

A graph is evaluated after every substantive envelope: the first transition (by ascending ``priority``,
stable) whose condition holds picks the next speaker; otherwise the graph's default target does.

A target or condition is any class with a ``name`` class attribute and ``resolve(state, envelope)`` /
``evaluate(state, envelope)`` (the ``TransitionTarget`` / ``TransitionCondition`` protocols); subclassing
``Target`` / ``Condition`` is optional. Its JSON form is ``{"name", "args"}``: ``args`` comes from
``args()`` when the class has one, else from its dataclass fields, and ``cls(**args)`` rebuilds it.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from ag2net.envelope import EV_PACKET, Envelope
from ag2net.errors import WorkflowGraphError


@dataclass(slots=True)
class Handoff:
    """Returned by a tool to pass the turn to ``target`` (a passport name or an agent id)."""

    target: str
    reason: str = ""


@dataclass(slots=True)
class Finish:
    """Returned by a tool to end the workflow; the channel closes with ``reason``."""

    summary: str = ""
    reason: str = "finished"


@dataclass(slots=True)
class TransitionDecision:
    """The next speaker (None ends the workflow) and the close reason when it ends."""

    next_speaker: str | None
    close_reason: str = ""


class RoutingState(Protocol):
    """What targets and conditions read from the workflow state."""

    participant_order: list[str]
    last_speaker_id: str | None
    creator_id: str
    context_vars: dict[str, Any]


class TransitionTarget(Protocol):
    """Where the next turn goes: a pure function of the state after a turn and the envelope that made it."""

    name: ClassVar[str]

    def resolve(self, state: Any, envelope: Envelope) -> TransitionDecision: ...


class TransitionCondition(Protocol):
    """When a transition fires: a pure predicate over the state after a turn and the envelope."""

    name: ClassVar[str]

    def evaluate(self, state: Any, envelope: Envelope) -> bool: ...


def _args_of(obj: Any) -> dict[str, Any]:
    """The ``args`` of a target or condition: its ``args()``, else its dataclass fields, else none."""
    args: Callable[[], Mapping[str, Any]] | None = getattr(obj, "args", None)
    if callable(args):
        return dict(args())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    return {}


def _to_dict(obj: Any) -> dict[str, Any]:
    return {"name": obj.name, "args": _args_of(obj)}


class _GraphPart:
    """What targets and conditions share: the registry ``name`` and the ``args`` a graph stores them by."""

    name: ClassVar[str] = ""

    def args(self) -> dict[str, Any]:
        """The constructor arguments that rebuild this object (by default, its dataclass fields)."""
        return dataclasses.asdict(self) if dataclasses.is_dataclass(self) else {}

    def to_dict(self) -> dict[str, Any]:
        return _to_dict(self)


# targets ------------------------------------------------------------------------------------------
class Target(_GraphPart, ABC):
    """Decides the next speaker. Subclasses set ``name`` and implement ``resolve`` and ``args``."""

    @abstractmethod
    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        """The next speaker (and close reason) after ``envelope``."""


@dataclass(slots=True)
class AgentTarget(Target):
    agent_id: str
    name: ClassVar[str] = "agent"

    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        return TransitionDecision(self.agent_id)

    def args(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id}


@dataclass(slots=True)
class RoundRobinTarget(Target):
    name: ClassVar[str] = "round_robin"

    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        order = state.participant_order
        if not order:
            return TransitionDecision(None, "no_participants")
        current = state.last_speaker_id or envelope.sender_id
        if current not in order:
            return TransitionDecision(order[0])
        return TransitionDecision(order[(order.index(current) + 1) % len(order)])


@dataclass(slots=True)
class StayTarget(Target):
    name: ClassVar[str] = "stay"

    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        return TransitionDecision(state.last_speaker_id or envelope.sender_id)


@dataclass(slots=True)
class RevertToInitiatorTarget(Target):
    name: ClassVar[str] = "revert_to_initiator"

    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        return TransitionDecision(state.creator_id or None, "" if state.creator_id else "no_participants")


@dataclass(slots=True)
class TerminateTarget(Target):
    reason: str = "after_work"
    name: ClassVar[str] = "terminate"

    def resolve(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        return TransitionDecision(None, self.reason)

    def args(self) -> dict[str, Any]:
        return {"reason": self.reason}


# conditions ---------------------------------------------------------------------------------------
class Condition(_GraphPart, ABC):
    """A predicate over the state after a turn and the envelope that made it."""

    @abstractmethod
    def evaluate(self, state: RoutingState, envelope: Envelope) -> bool:
        """Whether this condition holds for ``envelope`` and the state after it."""


@dataclass(slots=True)
class Always(Condition):
    name: ClassVar[str] = "always"

    def evaluate(self, state: RoutingState, envelope: Envelope) -> bool:
        return True


@dataclass(slots=True)
class FromSpeaker(Condition):
    agent_id: str
    name: ClassVar[str] = "from_speaker"

    def evaluate(self, state: RoutingState, envelope: Envelope) -> bool:
        return envelope.sender_id == self.agent_id

    def args(self) -> dict[str, Any]:
        return {"agent_id": self.agent_id}


@dataclass(slots=True)
class ToolCalled(Condition):
    tool_name: str
    name: ClassVar[str] = "tool_called"

    def evaluate(self, state: RoutingState, envelope: Envelope) -> bool:
        if envelope.event_type != EV_PACKET:
            return False
        routing = envelope.event_data.get("routing")
        return isinstance(routing, dict) and routing.get("tool") == self.tool_name

    def args(self) -> dict[str, Any]:
        return {"tool_name": self.tool_name}


@dataclass(slots=True)
class ContextEquals(Condition):
    key: str
    value: Any = None
    name: ClassVar[str] = "context_equals"

    def evaluate(self, state: RoutingState, envelope: Envelope) -> bool:
        return state.context_vars.get(self.key) == self.value

    def args(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value}


# registry -----------------------------------------------------------------------------------------
_BUILTIN_TARGETS: tuple[type[Target], ...] = (
    AgentTarget,
    RoundRobinTarget,
    StayTarget,
    RevertToInitiatorTarget,
    TerminateTarget,
)
_BUILTIN_CONDITIONS: tuple[type[Condition], ...] = (Always, FromSpeaker, ToolCalled, ContextEquals)


def _check_named(kind: str, cls: Any, method: str) -> str:
    name = getattr(cls, "name", None)
    if not isinstance(cls, type) or not isinstance(name, str) or not name:
        shown = getattr(cls, "__name__", repr(cls))
        raise WorkflowGraphError(
            f"{kind} {shown} needs a non-empty string class attribute `name` (the key in a graph's JSON)"
        )
    if not callable(getattr(cls, method, None)):
        raise WorkflowGraphError(f"{kind} {cls.__name__} needs a `{method}(state, envelope)` method")
    return name


class TransitionRegistry:
    """Target and condition classes by name, used to load graphs from their JSON form.

    A new registry knows the built-ins; ``default()`` is the one shared registry that the module-level
    ``register_target`` / ``register_condition`` add to and that ``TransitionGraph.loads`` (and so
    every workflow channel) reads unless given another.
    """

    _DEFAULT: ClassVar[TransitionRegistry | None] = None

    def __init__(self) -> None:
        self.targets: dict[str, type[Any]] = {cls.name: cls for cls in _BUILTIN_TARGETS}
        self.conditions: dict[str, type[Any]] = {cls.name: cls for cls in _BUILTIN_CONDITIONS}

    @classmethod
    def default(cls) -> TransitionRegistry:
        """The process-wide registry (created on first use); build a ``TransitionRegistry()`` to isolate."""
        if TransitionRegistry._DEFAULT is None:
            TransitionRegistry._DEFAULT = TransitionRegistry()
        return TransitionRegistry._DEFAULT

    def register_target(self, target_cls: type[Any]) -> type[Any]:
        """Add (or replace, by ``name``) a target class; returns it, so it works as a class decorator."""
        self.targets[_check_named("target class", target_cls, "resolve")] = target_cls
        return target_cls

    def register_condition(self, condition_cls: type[Any]) -> type[Any]:
        """Add (or replace, by ``name``) a condition class; returns it, so it works as a class decorator."""
        self.conditions[_check_named("condition class", condition_cls, "evaluate")] = condition_cls
        return condition_cls

    def _build(self, kind: str, table: dict[str, type], data: Any) -> Any:
        if not isinstance(data, dict):
            raise WorkflowGraphError(
                f"a transition {kind} must be an object {{'name', 'args'}}, got {data!r}"
            )
        name = data.get("name")
        cls = table.get(name) if isinstance(name, str) else None
        if cls is None:
            helper = "register_target" if kind == "target" else "register_condition"
            raise WorkflowGraphError(
                f"no transition {kind} registered for {name!r}; choose from {sorted(table)} "
                f"or add the class with {helper}()"
            )
        args = data.get("args") or {}
        if not isinstance(args, dict):
            raise WorkflowGraphError(f"transition {kind} {name!r} args must be an object, got {args!r}")
        try:
            return cls(**args)
        except TypeError as exc:
            raise WorkflowGraphError(f"transition {kind} {name!r} has bad args {args!r}: {exc}") from None

    def target_from_dict(self, data: Any) -> Any:
        """Build a target from ``{"name", "args"}``; ``None`` is the default ``TerminateTarget()``."""
        if data is None:
            return TerminateTarget()
        return self._build("target", self.targets, data)

    def condition_from_dict(self, data: Any) -> Any:
        return self._build("condition", self.conditions, data)


def register_target(target_cls: type[Any]) -> type[Any]:
    """Add a target class to the default registry (usable as a class decorator)."""
    return TransitionRegistry.default().register_target(target_cls)


def register_condition(condition_cls: type[Any]) -> type[Any]:
    """Add a condition class to the default registry (usable as a class decorator)."""
    return TransitionRegistry.default().register_condition(condition_cls)


def default_registry() -> TransitionRegistry:
    return TransitionRegistry.default()


# graph --------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Transition:
    when: TransitionCondition
    then: TransitionTarget
    priority: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"when": _to_dict(self.when), "then": _to_dict(self.then), "priority": self.priority}


@dataclass(slots=True)
class TransitionGraph:
    """Who speaks first, the rules for who speaks next, and when the workflow stops."""

    initial_speaker: str
    transitions: list[Transition] = field(default_factory=list)
    default_target: TransitionTarget = field(default_factory=TerminateTarget)
    max_turns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "initial_speaker": self.initial_speaker,
            "transitions": [t.to_dict() for t in self.transitions],
            "default_target": _to_dict(self.default_target),
            "max_turns": self.max_turns,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def loads(cls, data: str | dict[str, Any], registry: TransitionRegistry | None = None) -> TransitionGraph:
        """Rebuild a graph from ``dumps()`` text or ``to_dict()`` output (raises ``WorkflowGraphError``)."""
        reg = registry if registry is not None else TransitionRegistry.default()
        if isinstance(data, str):
            try:
                data = json.loads(data)
            except ValueError as exc:
                raise WorkflowGraphError(f"graph is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise WorkflowGraphError(f"graph must be an object, got {type(data).__name__}")
        initial = data.get("initial_speaker")
        if not isinstance(initial, str) or not initial:
            raise WorkflowGraphError(f"graph initial_speaker must be a non-empty agent id, got {initial!r}")
        raw = data.get("transitions")
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise WorkflowGraphError(f"graph transitions must be a list, got {type(raw).__name__}")
        transitions = []
        for i, item in enumerate(raw):
            if not isinstance(item, dict):
                raise WorkflowGraphError(f"graph transitions[{i}] must be an object, got {item!r}")
            priority = item.get("priority", 0)
            if isinstance(priority, bool) or not isinstance(priority, int):
                raise WorkflowGraphError(
                    f"graph transitions[{i}].priority must be an integer, got {priority!r}"
                )
            transitions.append(
                Transition(
                    reg.condition_from_dict(item.get("when")),
                    reg.target_from_dict(item.get("then")),
                    priority,
                )
            )
        default = reg.target_from_dict(data.get("default_target"))
        max_turns = data.get("max_turns")
        if max_turns is not None and (
            isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1
        ):
            raise WorkflowGraphError(f"graph max_turns must be a positive integer or null, got {max_turns!r}")
        return cls(initial, transitions, default, max_turns)

    @classmethod
    def round_robin(cls, participants: list[str], max_turns: int | None = None) -> TransitionGraph:
        """Everyone in turn (by channel order), until ``max_turns``."""
        if not participants:
            raise WorkflowGraphError("round_robin needs at least one participant")
        return cls(
            participants[0],
            [Transition(Always(), RoundRobinTarget())],
            TerminateTarget("round_robin_complete"),
            max_turns,
        )

    @classmethod
    def sequence(cls, steps: list[str]) -> TransitionGraph:
        """Each step speaks once, in order; then the workflow closes ``sequence_complete``."""
        if not steps:
            raise WorkflowGraphError("sequence needs at least one step")
        transitions = [Transition(FromSpeaker(a), AgentTarget(b)) for a, b in itertools.pairwise(steps)]
        return cls(steps[0], transitions, TerminateTarget("sequence_complete"), len(steps))

    def decide(self, state: RoutingState, envelope: Envelope) -> TransitionDecision:
        for transition in sorted(self.transitions, key=lambda t: t.priority):
            if transition.when.evaluate(state, envelope):
                return transition.then.resolve(state, envelope)
        return self.default_target.resolve(state, envelope)

    def tool_names(self) -> set[str]:
        """Tools named by ``ToolCalled`` conditions: calling one counts as a handoff."""
        return {t.when.tool_name for t in self.transitions if isinstance(t.when, ToolCalled)}


__all__ = [
    "AgentTarget",
    "Always",
    "Condition",
    "ContextEquals",
    "Finish",
    "FromSpeaker",
    "Handoff",
    "RevertToInitiatorTarget",
    "RoundRobinTarget",
    "StayTarget",
    "Target",
    "TerminateTarget",
    "ToolCalled",
    "Transition",
    "TransitionCondition",
    "TransitionDecision",
    "TransitionGraph",
    "TransitionRegistry",
    "TransitionTarget",
    "register_condition",
    "register_target",
]

"""The one protocol every LLM backend implements, and ``ScriptedModel``, a deterministic model for tests and demos.

A model receives a ``ModelCall`` (system prompt, history, tool schemas) and returns a ``ModelResponse``
(text and/or tool calls, plus token usage).
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import inspect
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

from ag2net.agent.tokens import estimate_call, estimate_tokens
from ag2net.events import BaseEvent, Input, ModelRequest, ToolCallEvent, part_from_dict


class ModelError(RuntimeError):
    """A model backend failed (unreachable endpoint, HTTP error, malformed answer, no model configured)."""


class ScriptExhausted(ModelError):
    """A ``ScriptedModel`` was called more times than its script has turns."""


@dataclass(slots=True)
class ModelCall:
    """Everything one model call receives.

    ``history`` is the complete conversation in order, and the only thing a backend needs to read:
    the history passed to ``Agent.ask`` (the projected view), then the current input as one
    ``ModelRequest`` (absent when ``ask`` got no inputs), then this turn's earlier tool calls and
    results. ``inputs`` repeats the current input's parts for convenience (turn records, scripted
    callables); it is *not* sent separately. ``prior`` is how many events of ``history`` came from
    before the turn. ``round`` counts tool rounds already done in this turn (0 on the first call).
    ``params`` are the answering model's own parameters (``model_params``: its model name, temperature …),
    part of the request a recorded reply is matched against (``digest``).
    """

    system: str
    history: list[BaseEvent]
    inputs: list[Input] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    prior: int = 0
    round: int = 0
    params: dict[str, Any] = field(default_factory=dict)
    #: What the model answered this call, when the model (or the agent) keeps it here: its usage, response
    #: id and finish reason reach the turn record's ``rounds`` from it. Not part of the request (``digest``).
    response: ModelResponse | None = field(default=None, compare=False, repr=False)

    @property
    def tool_names(self) -> list[str]:
        """Names of the offered tools, in schema order."""
        return [t.get("function", {}).get("name", "") for t in self.tools]

    @property
    def turn_events(self) -> list[BaseEvent]:
        """The events of the current turn (current input and tool traffic so far)."""
        return self.history[self.prior :]

    def snapshot(self) -> ModelCall:
        """A copy that later mutation of the agent's lists, events or schemas cannot change."""
        return ModelCall(
            system=self.system,
            history=[_copy_event(e) for e in self.history],
            inputs=[_copy_part(p) for p in self.inputs],
            tools=copy.deepcopy(self.tools),
            prior=self.prior,
            round=self.round,
            params=copy.deepcopy(self.params),
        )

    def digest(self) -> str:
        """The whole request as a model receives it, hashed: system prompt, every message, tools offered,
        model parameters (``request_digest``). Two calls with equal digests ask the same thing, byte for byte."""
        return request_digest(self.system, [e.to_dict() for e in self.history], self.tools, self.params)


def request_digest(
    system: str, history: list[dict[str, Any]], tools: list[dict[str, Any]], params: dict[str, Any]
) -> str:
    """sha256 of the canonical JSON of a model request (messages in their ``to_dict`` form)."""
    text = json.dumps(
        {"system": system, "history": history, "tools": tools, "params": params},
        ensure_ascii=False,
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def turn_request_digest(record: dict[str, Any], tools: list[dict[str, Any]] | None = None) -> str:
    """The ``request_digest`` of a turn's first model request, rebuilt from its turn record (history, then
    the turn's inputs as one ``ModelRequest``); ``tools`` instead of the record's when given."""
    history = list(record.get("history") or [])
    inputs = [part_from_dict(p) for p in record.get("inputs") or []]
    if inputs:
        history.append(ModelRequest(inputs).to_dict())
    return request_digest(
        str(record.get("system_prompt") or ""),
        history,
        list(record.get("tools") or []) if tools is None else tools,
        record.get("model_params") or {},
    )


_PARAM_ATTRIBUTES = ("model", "temperature", "top_p", "max_tokens", "seed")


def model_params(model: Any) -> dict[str, Any]:
    """A model's request parameters: its ``params`` (a dict, or a method returning one) when it has them,
    else those of ``model``, ``temperature``, ``top_p``, ``max_tokens``, ``seed`` it sets (None left out)."""
    own = getattr(model, "params", None)
    if callable(own):
        own = own()
    if isinstance(own, dict):
        return dict(own)
    found: dict[str, Any] = {}
    for key in _PARAM_ATTRIBUTES:
        value = getattr(model, key, None)
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            found[key] = value
    return found


def _copy_part(part: Input) -> Input:
    return replace(part, metadata=dict(part.metadata))


def _copy_event(event: BaseEvent) -> BaseEvent:
    if isinstance(event, ModelRequest):
        return ModelRequest([_copy_part(p) for p in event.parts])
    if dataclasses.is_dataclass(event) and isinstance(getattr(event, "metadata", None), dict):
        return replace(event, metadata=dict(event.metadata))  # type: ignore[type-var]
    return copy.copy(event)


USAGE_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens")
"""The usage keys a response carries: OpenAI's names, the nested details flattened (``cached_tokens`` from
``prompt_tokens_details``, ``reasoning_tokens`` from ``completion_tokens_details``); a server that reports
prompt-cache writes adds ``cache_creation_tokens``."""

PROVIDER = "provider"
"""``ModelResponse.usage_method`` (and ``TurnRecord.token_method``) of figures the model's server reported."""


@dataclass(slots=True)
class ModelResponse:
    """What a model answered: text, tool calls (possibly both), and token usage.

    ``usage`` has the keys of ``USAGE_KEYS`` that are known; ``usage_method`` says where they came from:
    ``"provider"`` (the server reported them) or a counter's method (``"heuristic"``, ``"tiktoken:…"``)
    when they are an estimate. ``response_id`` and ``finish_reason`` are the server's when it gave them;
    ``retries`` has one sentence per failed attempt that was retried before this answer came."""

    content: str | None = None
    tool_calls: list[ToolCallEvent] = field(default_factory=list)
    usage: dict[str, int] = field(default_factory=dict)
    usage_method: str = PROVIDER
    response_id: str | None = None
    finish_reason: str | None = None
    retries: list[str] = field(default_factory=list)


@runtime_checkable
class Model(Protocol):
    """An LLM backend: one async call per model round."""

    name: str

    async def complete(self, request: ModelCall) -> ModelResponse: ...


def tool_call(name: str, /, **arguments: Any) -> ToolCallEvent:
    """A ``ToolCallEvent`` for ``name`` with ``arguments`` encoded as JSON (for scripts)."""
    return ToolCallEvent(name, json.dumps(arguments, ensure_ascii=False))


Turn = str | ToolCallEvent | list[ToolCallEvent] | ModelResponse | BaseException | Callable[[ModelCall], Any]
"""One scripted turn: reply text, tool call(s), a full response, an exception to raise, or a callable
``(ModelCall) -> str | ToolCallEvent | list[ToolCallEvent] | ModelResponse`` (sync or async)."""


class ScriptedModel:
    """A deterministic model that plays a script, one turn per call.

    One script per model object: the position carries across ``Agent.ask`` calls and across agents
    sharing the model (unlike ag2's ``TestConfig``, which restarts on every ``ask``). A tool round
    consumes a turn, so an ``ask`` that calls one tool and then answers uses two turns.

    When the script runs out, the next call raises ``ScriptExhausted`` naming the model and the call
    number; with ``loop=True`` the script starts again from its first turn instead (tool calls are
    re-issued with fresh ids). Every received call is recorded, as a snapshot, in ``calls``.

    ``usage`` (unless a turn is a ``ModelResponse`` carrying its own, which counts as the provider's) is
    estimated with ``ag2net.agent.tokens`` so demo figures look plausible, and labelled so (``usage_method``).
    Each answer is kept on the call it answers (``ModelCall.response``).
    """

    def __init__(self, *turns: Turn, name: str = "scripted", loop: bool = False) -> None:
        if loop and not turns:
            raise ValueError("ScriptedModel(loop=True) needs at least one turn to repeat")
        self.name = name
        self.turns: list[Turn] = list(turns)
        self.loop = loop
        self.calls: list[ModelCall] = []

    def __repr__(self) -> str:
        return f"ScriptedModel(name={self.name!r}, turns={len(self.turns)}, used={len(self.calls)})"

    @property
    def remaining(self) -> int | None:
        """Turns left before the script runs out (None when looping)."""
        return None if self.loop else max(0, len(self.turns) - len(self.calls))

    def add_turns(self, *turns: Turn) -> None:
        """Append turns to the script."""
        self.turns.extend(turns)

    async def complete(self, request: ModelCall) -> ModelResponse:
        index = len(self.calls)
        self.calls.append(request.snapshot())
        if index < len(self.turns):
            turn, fresh_ids = self.turns[index], False
        elif self.loop:
            turn, fresh_ids = self.turns[index % len(self.turns)], True
        else:
            raise ScriptExhausted(
                f"ScriptedModel {self.name!r} has no turn for call {index + 1}: its script has "
                f"{len(self.turns)} turn(s); add turns or pass loop=True"
            )
        if isinstance(turn, BaseException):
            raise turn
        if callable(turn) and not isinstance(turn, ToolCallEvent):
            turn = turn(request)
            if inspect.isawaitable(turn):
                turn = await turn
            if isinstance(turn, BaseException):
                raise turn
        response = self._as_response(turn, index + 1, fresh_ids)
        if not response.usage:
            response.usage, response.usage_method = _estimate_usage(request, response)
        request.response = response
        return response

    def _as_response(self, turn: Any, number: int, fresh_ids: bool) -> ModelResponse:
        if isinstance(turn, ModelResponse):
            return replace(turn, tool_calls=[self._emit(c, fresh_ids) for c in turn.tool_calls])
        if isinstance(turn, str):
            return ModelResponse(content=turn)
        if isinstance(turn, ToolCallEvent):
            return ModelResponse(tool_calls=[self._emit(turn, fresh_ids)])
        if isinstance(turn, list | tuple) and turn and all(isinstance(c, ToolCallEvent) for c in turn):
            return ModelResponse(tool_calls=[self._emit(c, fresh_ids) for c in turn])
        raise TypeError(
            f"ScriptedModel {self.name!r} turn {number} is a {type(turn).__name__}; expected a str, a "
            "ToolCallEvent, a non-empty list of them, a ModelResponse, an exception or a callable returning one"
        )

    @staticmethod
    def _emit(call: ToolCallEvent, fresh_id: bool) -> ToolCallEvent:
        # A copy, so the script's own events are never aliased into a conversation's history.
        return ToolCallEvent(call.name, call.arguments, uuid.uuid4().hex if fresh_id else call.id)


def _estimate_usage(request: ModelCall, response: ModelResponse) -> tuple[dict[str, int], str]:
    breakdown = estimate_call(request)
    completion = estimate_tokens(response.content or "") + sum(
        estimate_tokens(f"{c.name}{c.arguments}") for c in response.tool_calls
    )
    prompt = int(breakdown["total"])
    usage = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return usage, str(breakdown["method"])


__all__ = [
    "PROVIDER",
    "USAGE_KEYS",
    "Model",
    "ModelCall",
    "ModelError",
    "ModelResponse",
    "ScriptExhausted",
    "ScriptedModel",
    "Turn",
    "model_params",
    "request_digest",
    "tool_call",
    "turn_request_digest",
]

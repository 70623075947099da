"""Token budgets: how much of a model's context window one turn fills, part by part.

Context windows. ``context_window(model, agents=..., explicit=...)`` says how many tokens a model takes
in one call, and where that figure came from, in this order (the first that answers wins):

1. ``explicit=`` (a number given by the caller);
2. a window configured for the agent (its name or id) — ``set_context_window("planner", 8000)`` or the
   environment variable ``AG2NET_CONTEXT_WINDOWS="planner=8000,my-local-model=32768"``;
3. a window configured for the model name, the same two ways;
4. ``KNOWN_WINDOWS``, a table of published context windows by model name (dated snapshots and provider
   prefixes such as ``openai/`` or ``gpt-4o-2024-08-06`` match their family: the longest known name that
   the model name starts with, at a ``-``, ``.``, ``:``, ``@`` or ``_`` boundary);
5. otherwise the window is unknown (``tokens is None``): a budget then shows the counts and no fraction.

Counting. ``turn_budget(turn, ...)`` counts what a recorded turn (``TurnRecord``) or a re-projection
(``TurnPreview``) sends: the system prompt, the projected history, the tool schemas and the turn's input,
with ``ag2net.agent.tokens.TokenCounter`` (the same per-message rules as the turn records). For a model of
a known OpenAI family the counter uses that family's tiktoken encoding; with the ``tokens`` extra
(``pip install 'ag2net[tokens]'``) and the encoding's file already cached, counts are exact. tiktoken
downloads an encoding on first use: without the network that fails (or is cut off after a few seconds)
and the documented heuristic counts instead — ``max(ceil(utf8_bytes / 4), words)`` per text plus 4 tokens
per message — and the budget says ``"estimate"``. Models of other families (Claude, Llama, unknown names)
are always estimated: no tiktoken encoding is theirs.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ag2net.agent.tokens import TokenCounter
from ag2net.events import Input, ModelRequest

WARN_FRACTION = 0.8
"""A budget at or above this fraction of its window is a warning."""

ENV_VAR = "AG2NET_CONTEXT_WINDOWS"

KNOWN_WINDOWS: dict[str, int] = {
    # OpenAI (platform model pages: the context window in tokens, input and output together)
    "gpt-3.5-turbo": 16_385,
    "gpt-3.5-turbo-instruct": 4_096,
    "gpt-3.5-turbo-0301": 4_096,
    "gpt-3.5-turbo-0613": 4_096,
    "gpt-4": 8_192,
    "gpt-4-32k": 32_768,
    "gpt-4-turbo": 128_000,
    "gpt-4-turbo-preview": 128_000,
    "gpt-4-1106-preview": 128_000,
    "gpt-4-0125-preview": 128_000,
    "gpt-4-vision-preview": 128_000,
    "gpt-4o": 128_000,
    "gpt-4o-mini": 128_000,
    "gpt-4.1": 1_047_576,
    "gpt-4.1-mini": 1_047_576,
    "gpt-4.1-nano": 1_047_576,
    "gpt-5": 400_000,
    "gpt-5-mini": 400_000,
    "gpt-5-nano": 400_000,
    "o1": 200_000,
    "o1-mini": 128_000,
    "o1-preview": 128_000,
    "o3": 200_000,
    "o3-mini": 200_000,
    "o4-mini": 200_000,
    # Anthropic: every Claude 2.1, 3, 3.5, 3.7 and 4 model has a 200k window
    "claude-2.1": 200_000,
    "claude-3": 200_000,
    "claude-3-5": 200_000,
    "claude-3-7": 200_000,
    "claude-3.5": 200_000,
    "claude-3.7": 200_000,
    "claude-sonnet-4": 200_000,
    "claude-opus-4": 200_000,
    "claude-haiku-4": 200_000,
    # Meta Llama (model cards: Llama 2 4k, Llama 3 8k, Llama 3.1 and later 128k = 131,072)
    "llama-2": 4_096,
    "llama2": 4_096,
    "llama-3": 8_192,
    "llama3": 8_192,
    "llama-3.1": 131_072,
    "llama3.1": 131_072,
    "llama-3.2": 131_072,
    "llama3.2": 131_072,
    "llama-3.3": 131_072,
    "llama3.3": 131_072,
    # ag2net's own demo: its scripted agents stand in for a small model, so the budget bar has a window
    "ag2net-demo": 8_192,
}
"""Published context windows (tokens) by model name; the longest matching name wins."""

ENCODINGS: dict[str, str] = {
    "gpt-3.5-turbo": "cl100k_base",
    "gpt-4": "cl100k_base",
    "gpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-5": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4-mini": "o200k_base",
}
"""The tiktoken encoding of each OpenAI model family (longest matching name wins); other models have none."""

_BOUNDARY = "-.:@_"
_PROVIDER = re.compile(r"^(?:[a-z0-9_.-]+/)+")  # "openai/", "meta-llama/", "accounts/fireworks/models/"
_configured: dict[str, int] = {}
_lock = threading.Lock()
_counters: dict[str | None, TokenCounter] = {}


def normalize_model(name: str) -> str:
    """Lowercase, without a provider path (``openai/gpt-4o`` → ``gpt-4o``, ``meta-llama/Llama-3.1-8B`` →
    ``llama-3.1-8b``)."""
    return _PROVIDER.sub("", name.strip().lower())


def _longest(table: Mapping[str, Any], name: str) -> str | None:
    best: str | None = None
    for key in table:
        if (name == key or (name.startswith(key) and name[len(key)] in _BOUNDARY)) and (
            best is None or len(key) > len(best)
        ):
            best = key
    return best


def known_window(model: str | None) -> tuple[str, int] | None:
    """(matched name, tokens) from ``KNOWN_WINDOWS`` for a model name, or None."""
    if not model:
        return None
    key = _longest(KNOWN_WINDOWS, normalize_model(model))
    return (key, KNOWN_WINDOWS[key]) if key is not None else None


def encoding_for(model: str | None) -> str | None:
    """The tiktoken encoding of the model's family (``o200k_base`` for gpt-4o), None when it has none."""
    if not model:
        return None
    key = _longest(ENCODINGS, normalize_model(model))
    return ENCODINGS[key] if key is not None else None


def _check_tokens(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{where} must be a positive whole number of tokens, got {value!r}")
    return value


def set_context_window(key: str, tokens: int | None) -> None:
    """Configure the window of an agent (name or id) or a model name; ``None`` removes the setting."""
    if not isinstance(key, str) or not key.strip():
        raise ValueError(
            "a context window is set for an agent name, agent id or model name; got an empty key"
        )
    with _lock:
        if tokens is None:
            _configured.pop(key.strip(), None)
        else:
            _configured[key.strip()] = _check_tokens(tokens, f"the context window of {key!r}")


def clear_context_windows() -> None:
    """Forget every window set with ``set_context_window`` (the environment variable stays)."""
    with _lock:
        _configured.clear()


def configured_windows() -> dict[str, int]:
    """Every configured window: ``AG2NET_CONTEXT_WINDOWS`` first, ``set_context_window`` over it.

    Raises ``ValueError`` (one sentence naming the variable and the fix) when the variable is malformed."""
    out: dict[str, int] = {}
    raw = os.environ.get(ENV_VAR, "").strip()
    if raw:
        for item in raw.split(","):
            if not item.strip():
                continue
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ValueError(
                    f"{ENV_VAR} entry {item.strip()!r} is not NAME=TOKENS; write it like "
                    f"{ENV_VAR}='planner=8000,gpt-4o=128000'"
                )
            try:
                tokens = int(value.strip().replace("_", ""))
            except ValueError:
                tokens = 0
            if tokens <= 0:
                raise ValueError(
                    f"{ENV_VAR} gives {key.strip()!r} the window {value.strip()!r}; "
                    "use a positive whole number of tokens, e.g. planner=8000"
                )
            out[key.strip()] = tokens
    with _lock:
        out.update(_configured)
    return out


@dataclass(frozen=True, slots=True)
class ContextWindow:
    """How many tokens a model takes in one call (``tokens``; None when unknown) and where that came from."""

    tokens: int | None
    source: str
    """``explicit``, ``configured for agent NAME``, ``configured for model NAME``, ``known model NAME``,
    ``unknown model NAME`` or ``no model``."""
    model: str | None = None


def context_window(
    model: str | None = None, *, agents: Iterable[str] = (), explicit: int | None = None
) -> ContextWindow:
    """The window for ``model`` as used by an agent known by ``agents`` (its name and/or id).

    ``explicit`` wins, then a configured window for the agent, then for the model, then the table."""
    if explicit is not None:
        return ContextWindow(_check_tokens(explicit, "the explicit context window"), "explicit", model)
    configured = configured_windows()
    for agent in agents:
        if agent and agent in configured:
            return ContextWindow(configured[agent], f"configured for agent {agent}", model)
    if model:
        for key in (model, normalize_model(model)):
            if key in configured:
                return ContextWindow(configured[key], f"configured for model {key}", model)
        known = known_window(model)
        if known is not None:
            return ContextWindow(known[1], f"known model {known[0]}", model)
        return ContextWindow(None, f"unknown model {model}", model)
    return ContextWindow(None, "no model", model)


def model_name_of(model: Any) -> str | None:
    """The model name a model object calls (``OpenAIChatModel.model``), else its ``name``; None for none."""
    if model is None:
        return None
    if isinstance(model, str):
        return model
    for attr in ("model", "name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return value
    return None


def window_of_agent(agent: Any, *, agent_id: str | None = None) -> ContextWindow:
    """The window of an in-process ``Agent``: a ``context_window`` attribute on the agent or its model is
    explicit; otherwise by its name/id and its model's name as in ``context_window``."""
    model = getattr(agent, "model", None)
    for holder in (agent, model):
        value = getattr(holder, "context_window", None)
        if value is not None:
            return ContextWindow(
                _check_tokens(value, f"{type(holder).__name__}.context_window"),
                "explicit",
                model_name_of(model),
            )
    names = [n for n in (getattr(agent, "name", None), agent_id) if isinstance(n, str)]
    return context_window(model_name_of(model), agents=names)


# ----------------------------------------------------------------------------------- counting


class Counter(Protocol):
    """What a budget needs of a token counter (``TokenCounter`` is one)."""

    method: str

    def count(self, text: str) -> int: ...
    def count_system(self, system: str) -> int: ...
    def count_events(self, events: Iterable[Any]) -> int: ...
    def count_tools(self, schemas: Iterable[dict[str, Any]]) -> int: ...


def counter_for(model: str | None) -> TokenCounter:
    """A counter for ``model``: its family's tiktoken encoding when it has one (exact when tiktoken loads it
    offline), else the heuristic. Built once per encoding per process (the first may wait a few seconds
    while tiktoken tries the network)."""
    encoding = encoding_for(model)
    counter = _counters.get(encoding)
    if counter is None:
        with _lock:
            counter = _counters.get(encoding)
        if counter is None:
            counter = TokenCounter(encoding)
            with _lock:
                counter = _counters.setdefault(encoding, counter)
    return counter


PARTS = ("system", "history", "tools", "input")


@dataclass(frozen=True, slots=True)
class TurnBudget:
    """One turn's tokens by part against its model's window."""

    system: int
    history: int
    tools: int
    input: int
    window: ContextWindow
    method: str
    """The counter's method: ``heuristic`` or ``tiktoken:<encoding>``."""

    @property
    def total(self) -> int:
        return self.system + self.history + self.tools + self.input

    @property
    def parts(self) -> dict[str, int]:
        return {name: getattr(self, name) for name in PARTS}

    @property
    def exact(self) -> bool:
        return self.method.startswith("tiktoken:")

    @property
    def label(self) -> str:
        """``estimate`` or ``exact, tiktoken o200k_base``."""
        return f"exact, tiktoken {self.method.split(':', 1)[1]}" if self.exact else "estimate"

    @property
    def fraction(self) -> float | None:
        """total / window; None when the window is unknown."""
        return self.total / self.window.tokens if self.window.tokens else None

    @property
    def warning(self) -> bool:
        """At or above ``WARN_FRACTION`` of the window."""
        fraction = self.fraction
        return fraction is not None and fraction >= WARN_FRACTION

    def summary(self) -> str:
        """``12.3k / 128k tokens (estimate)``; ``12.3k tokens · window unknown (estimate)``."""
        if self.window.tokens is None:
            return f"{compact(self.total)} tokens · window unknown ({self.label})"
        return f"{compact(self.total)} / {compact(self.window.tokens)} tokens ({self.label})"

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.parts,
            "total": self.total,
            "window": self.window.tokens,
            "window_source": self.window.source,
            "model": self.window.model,
            "fraction": self.fraction,
            "warning": self.warning,
            "method": self.method,
            "exact": self.exact,
        }


def compact(tokens: int) -> str:
    """``950``, ``12.3k``, ``128k``, ``1.05M``."""
    if tokens < 1000:
        return str(tokens)
    if tokens < 1_000_000:
        k = tokens / 1000
        return f"{k:.1f}k".replace(".0k", "k") if k < 100 else f"{round(k)}k"
    m = tokens / 1_000_000
    return f"{m:.2f}".rstrip("0").rstrip(".") + "M"


def turn_budget(
    turn: Any,
    *,
    model: str | None = None,
    agents: Sequence[str] = (),
    window: int | ContextWindow | None = None,
    counter: Counter | None = None,
) -> TurnBudget:
    """Tokens per part of ``turn`` (anything with ``system_prompt``, ``history``, ``tools`` and optionally
    ``inputs``: a ``TurnRecord`` or a ``TurnPreview``) against the window of ``model`` used by ``agents``
    (``window`` overrides: a number is explicit). ``counter`` defaults to ``counter_for(model)``."""
    if isinstance(window, ContextWindow):
        resolved = window
    else:
        resolved = context_window(model, agents=agents, explicit=window)
    counter = counter if counter is not None else counter_for(model)
    inputs: list[Input] = list(getattr(turn, "inputs", None) or ())
    return TurnBudget(
        system=counter.count_system(turn.system_prompt or ""),
        history=counter.count_events(turn.history),
        tools=counter.count_tools(turn.tools),
        input=counter.count_events([ModelRequest(inputs)]) if inputs else 0,
        window=resolved,
        method=counter.method,
    )


__all__ = [
    "ENCODINGS",
    "ENV_VAR",
    "KNOWN_WINDOWS",
    "PARTS",
    "WARN_FRACTION",
    "ContextWindow",
    "Counter",
    "TurnBudget",
    "clear_context_windows",
    "compact",
    "configured_windows",
    "context_window",
    "counter_for",
    "encoding_for",
    "known_window",
    "model_name_of",
    "normalize_model",
    "set_context_window",
    "turn_budget",
    "window_of_agent",
]

"""Token estimates for what a model is sent: text, event histories and tool schemas.

The heuristic (always available, deterministic): ``max(ceil(utf8_bytes / 4), words)`` tokens for a
text, where ``words`` counts whitespace-separated runs. Four bytes per token is the usual average for
English under BPE tokenizers; the per-word floor keeps short-word and digit-heavy text from being
under-counted. Each chat message (event, system prompt) adds ``MESSAGE_OVERHEAD`` tokens for its role
and separators. Tool schemas are counted as their compact JSON text.

When ``tiktoken`` is installed and its encoding loads without the network (cached files), counts are
exact for that encoding instead; ``TokenCounter.method`` says which one produced a figure, so a UI
can label estimates honestly. Set ``AG2NET_TOKENIZER=heuristic`` to force the heuristic.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from ag2net.events import BaseEvent, event_text


class CountedCall(Protocol):
    """What a token count reads of a model call (a ``ModelCall``): system prompt, history and tool schemas."""

    @property
    def system(self) -> str: ...

    @property
    def history(self) -> list[BaseEvent]: ...

    @property
    def tools(self) -> list[dict[str, Any]]: ...


MESSAGE_OVERHEAD = 4
"""Tokens a chat format spends per message on the role and separators (OpenAI's documented figure)."""

DEFAULT_ENCODING = "o200k_base"
_LOAD_TIMEOUT = 5.0  # tiktoken may try to download an encoding; never let that stall a turn


def heuristic_tokens(text: str) -> int:
    """``max(ceil(utf8_bytes / 4), words)``; 0 for the empty string."""
    if not text:
        return 0
    return max(math.ceil(len(text.encode("utf-8")) / 4), len(text.split()))


def _load_tiktoken(encoding: str) -> Callable[[str], int] | None:
    """An exact counter for ``encoding``, or None when tiktoken is missing or cannot load it offline."""
    if os.environ.get("AG2NET_TOKENIZER", "").strip().lower() == "heuristic":
        return None
    try:
        import tiktoken  # pyright: ignore[reportMissingImports]  # optional: absent unless installed
    except Exception:
        return None
    box: dict[str, Any] = {}

    def load() -> None:
        try:
            box["enc"] = tiktoken.get_encoding(encoding)
        except BaseException as exc:  # no cache and no network, unknown name, broken install
            box["error"] = exc

    worker = threading.Thread(target=load, name=f"tiktoken-load-{encoding}", daemon=True)
    worker.start()
    worker.join(_LOAD_TIMEOUT)
    enc = box.get("enc")
    if enc is None:
        return None

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=()))

    try:
        count("probe")
    except Exception:
        return None
    return count


class TokenCounter:
    """Counts tokens with tiktoken when it is usable, else with the documented heuristic.

    ``method`` is ``"heuristic"`` or ``"tiktoken:<encoding>"``.
    """

    def __init__(self, encoding: str | None = DEFAULT_ENCODING) -> None:
        exact = _load_tiktoken(encoding) if encoding else None
        self._count = exact or heuristic_tokens
        self.method = f"tiktoken:{encoding}" if exact else "heuristic"

    def __repr__(self) -> str:
        return f"TokenCounter(method={self.method!r})"

    def count(self, text: str) -> int:
        """Tokens in ``text`` (no message overhead)."""
        return self._count(text) if text else 0

    def count_event(self, event: BaseEvent) -> int:
        """Tokens one history event costs: its text plus the per-message overhead."""
        return self.count(event_text(event)) + MESSAGE_OVERHEAD

    def count_events(self, events: Iterable[BaseEvent]) -> int:
        """Tokens a list of history events costs."""
        return sum(self.count_event(e) for e in events)

    def count_tools(self, schemas: Iterable[dict[str, Any]]) -> int:
        """Tokens the tool schemas cost, counted as compact JSON."""
        return sum(self.count(_compact(s)) for s in schemas)

    def count_system(self, system: str) -> int:
        """Tokens the system prompt costs (zero when there is none)."""
        return self.count(system) + MESSAGE_OVERHEAD if system else 0

    def count_call(self, call: CountedCall) -> dict[str, Any]:
        """A breakdown of one model call: ``system``, ``history``, ``tools``, ``total`` and ``method``."""
        system = self.count_system(call.system)
        history = self.count_events(call.history)
        tools = self.count_tools(call.tools)
        return {
            "system": system,
            "history": history,
            "tools": tools,
            "total": system + history + tools,
            "method": self.method,
        }


def _compact(schema: Any) -> str:
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False, sort_keys=True, default=str)


_default: TokenCounter | None = None
_default_lock = threading.Lock()


def default_counter() -> TokenCounter:
    """The process-wide counter (built once, on first use)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = TokenCounter()
    return _default


def estimate_tokens(text: str) -> int:
    """Tokens in ``text`` with the default counter."""
    return default_counter().count(text)


def estimate_events(events: Iterable[BaseEvent]) -> int:
    """Tokens a history costs with the default counter (text plus per-message overhead)."""
    return default_counter().count_events(events)


def estimate_tools(schemas: Iterable[dict[str, Any]]) -> int:
    """Tokens the tool schemas cost with the default counter."""
    return default_counter().count_tools(schemas)


def estimate_call(call: CountedCall) -> dict[str, Any]:
    """Breakdown of one model call with the default counter (see ``TokenCounter.count_call``)."""
    return default_counter().count_call(call)


__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "TokenCounter",
    "default_counter",
    "estimate_call",
    "estimate_events",
    "estimate_tokens",
    "estimate_tools",
    "heuristic_tokens",
]

"""``OpenAIChatModel``: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp,
LM Studio) as a ``Model``, with tool calling. Needs the optional ``openai`` package.

Usage. Every answer carries the server's own token usage (``ModelResponse.usage``, labelled ``"provider"``):
``prompt_tokens``, ``completion_tokens``, ``total_tokens`` and, when the server gives them,
``cached_tokens`` (``prompt_tokens_details.cached_tokens``), ``reasoning_tokens``
(``completion_tokens_details.reasoning_tokens``) and ``cache_creation_tokens``; with ``stream=True`` the
request asks for the usage chunk (``stream_options={"include_usage": True}``). A server that reports no
usage leaves it empty and the turn record estimates instead (and says so). The answer is also kept on the
call (``ModelCall.response``), which is how a turn record gets each call's usage, response id and finish
reason.

Retries. ``RetryPolicy`` (``attempts``, ``base_delay``, ``max_delay``) retries what a later attempt can
cure: HTTP 408, 409, 429 and 5xx, timeouts, refused connections and a stream that breaks off. The wait
doubles from ``base_delay`` up to ``max_delay``; a ``retry-after`` (or ``retry-after-ms``) header is
honoured instead, and one asking for more than ``max_delay`` ends the retries at once. Each retried
failure is one sentence in ``ModelResponse.retries``; the last one is the ``ModelError``.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.agent.models import ModelCall, ModelError, ModelResponse
from ag2net.events import (
    BaseEvent,
    CompactionSummary,
    ModelMessage,
    ModelRequest,
    ToolCallEvent,
    ToolResultEvent,
    event_text,
)

PLACEHOLDER_API_KEY = "not-needed"
"""Sent when no key is given and ``OPENAI_API_KEY`` is unset: local servers ignore the key but the client wants one."""

_MISSING = "OpenAIChatModel needs the 'openai' extra: pip install 'ag2net[openai]'"


def _import_openai() -> Any:
    try:
        import openai
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return openai


def to_chat_messages(system: str, history: list[BaseEvent]) -> list[dict[str, Any]]:
    """Convert a system prompt and an event history to chat-completions ``messages``.

    ``ModelRequest`` → user, ``ModelMessage`` → assistant, ``CompactionSummary`` → a user note
    (many local chat templates refuse a system message after the first), consecutive
    ``ToolCallEvent``\\ s → one assistant message with ``tool_calls`` (joined to a directly preceding
    plain assistant message, which is how the model sent them), ``ToolResultEvent`` → tool message.
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for event in history:
        if isinstance(event, ModelRequest):
            messages.append({"role": "user", "content": event.text})
        elif isinstance(event, ModelMessage):
            messages.append({"role": "assistant", "content": event.content})
        elif isinstance(event, CompactionSummary):
            messages.append({"role": "user", "content": event.summary})
        elif isinstance(event, ToolCallEvent):
            entry = {
                "id": event.id,
                "type": "function",
                "function": {"name": event.name, "arguments": event.arguments or "{}"},
            }
            last = messages[-1] if messages else None
            if last is not None and last["role"] == "assistant":
                last.setdefault("tool_calls", []).append(entry)
            else:
                messages.append({"role": "assistant", "content": None, "tool_calls": [entry]})
        elif isinstance(event, ToolResultEvent):
            messages.append({"role": "tool", "tool_call_id": event.parent_id, "content": event.result})
        else:
            messages.append({"role": "user", "content": event_text(event)})
    return messages


RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})
"""HTTP statuses a later attempt may cure (and any other 5xx)."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently ``OpenAIChatModel`` tries a call: ``attempts`` in all (1: no retry), the
    first wait ``base_delay`` seconds, doubling, never over ``max_delay``; a server's ``retry-after`` is
    honoured instead of the doubling. ``sleep`` is how the policy waits (``asyncio.sleep``)."""

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 30.0
    sleep: Callable[[float], Awaitable[Any]] = field(default=asyncio.sleep, compare=False, repr=False)

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int) or self.attempts < 1:
            raise ValueError(
                f"RetryPolicy.attempts must be a whole number of 1 or more, got {self.attempts!r}"
            )
        for name in ("base_delay", "max_delay"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(f"RetryPolicy.{name} must be 0 or more seconds, got {value!r}")
        if self.max_delay < self.base_delay:
            raise ValueError(
                f"RetryPolicy.max_delay ({self.max_delay!r}) is less than base_delay ({self.base_delay!r}); "
                "raise max_delay"
            )

    def delay(self, attempt: int, retry_after: float | None = None) -> float | None:
        """Seconds to wait after failed attempt ``attempt`` (1-based), or None when no attempt is left or the
        server asked for a longer wait (``retry_after``) than ``max_delay`` allows."""
        if attempt >= self.attempts:
            return None
        if retry_after is not None:
            return max(0.0, retry_after) if retry_after <= self.max_delay else None
        return float(min(self.base_delay * 2 ** (attempt - 1), self.max_delay))


class _Failure(Exception):
    """One failed attempt: the sentence a person reads, whether a retry may help, the server's wait."""

    def __init__(self, sentence: str, *, retry: bool, retry_after: float | None = None) -> None:
        super().__init__(sentence)
        self.sentence = sentence
        self.retry = retry
        self.retry_after = retry_after


class OpenAIChatModel:
    """A ``Model`` backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` defaults to the ``openai`` client's default (``OPENAI_BASE_URL`` or OpenAI's API);
    for Ollama use ``http://localhost:11434/v1``. ``api_key`` defaults to ``OPENAI_API_KEY``, else a
    placeholder that local servers accept. Failures raise ``ModelError`` naming the endpoint.
    ``retry`` is the ``RetryPolicy`` (default: ``max_retries`` + 1 attempts, 0.5 s doubling up to 30 s);
    ``stream=True`` streams each answer (the usage still comes, in the stream's last chunk).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        temperature: float | None = None,
        timeout: float = 60,
        max_retries: int = 2,
        name: str | None = None,
        retry: RetryPolicy | None = None,
        stream: bool = False,
    ) -> None:
        self._openai = _import_openai()
        if not model:
            raise ValueError("OpenAIChatModel needs a model name, e.g. OpenAIChatModel('gpt-4o-mini')")
        self.model = model
        self.name = name or model
        self.base_url = base_url
        self.api_key = api_key or os.environ.get("OPENAI_API_KEY") or PLACEHOLDER_API_KEY
        self.temperature = temperature
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry = retry if retry is not None else RetryPolicy(attempts=max(0, int(max_retries)) + 1)
        self.stream = bool(stream)
        self._client: Any = None

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.endpoint!r})"

    @property
    def endpoint(self) -> str:
        """The base URL requests go to."""
        if self._client is not None:
            return str(self._client.base_url)
        return self.base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"

    def _get_client(self) -> Any:
        if self._client is None:
            # the client never retries on its own: the policy does, and says so for each failure
            self._client = self._openai.AsyncOpenAI(
                api_key=self.api_key, base_url=self.base_url, timeout=self.timeout, max_retries=0
            )
        return self._client

    async def aclose(self) -> None:
        """Close the underlying HTTP client (a new one is made on the next call)."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    async def check(self, timeout: float = 5.0) -> None:
        """Ask the endpoint once, quickly, for its model list, so that a missing or refused key or a server
        that is not there fails now in one sentence (``ModelError``) instead of after a run's retries.

        A server that answers at all passes, whatever else the status (some do not list models), except
        HTTP 401 and 403: the key was refused. OpenAI's own API without a key fails without a request."""
        openai = self._openai
        if self.api_key == PLACEHOLDER_API_KEY and "api.openai.com" in self.endpoint:
            raise ModelError(
                f"model endpoint {self.endpoint} needs an API key and OPENAI_API_KEY is not set; set it, or "
                "give the base URL of a local server such as http://localhost:11434/v1"
            )
        client = openai.AsyncOpenAI(
            api_key=self.api_key, base_url=self.base_url, timeout=timeout, max_retries=0
        )
        try:
            await client.models.list()
        except openai.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise ModelError(
                    f"model endpoint {self.endpoint} refused the API key (HTTP {exc.status_code}: "
                    f"{_short(_status_detail(exc), 120)}); check OPENAI_API_KEY"
                ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"model endpoint {self.endpoint} did not answer within {timeout:g} s; check that the server "
                "runs there"
            ) from exc
        except openai.APIConnectionError as exc:
            reason = _short(str(exc.__cause__ or exc), 120)
            raise ModelError(
                f"cannot reach model endpoint {self.endpoint} ({reason}); is the server running?"
            ) from exc
        finally:
            await client.close()

    def build_request(self, request: ModelCall) -> dict[str, Any]:
        """The keyword arguments for ``chat.completions.create`` (no tools key when none are offered)."""
        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_chat_messages(request.system, request.history),
        }
        if request.tools:
            kwargs["tools"] = request.tools
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.stream:
            kwargs["stream"] = True
            kwargs["stream_options"] = {"include_usage": True}
        return kwargs

    async def complete(self, request: ModelCall) -> ModelResponse:
        """One model call under the retry policy; the answer is also kept on ``request.response``."""
        policy = self.retry
        retries: list[str] = []
        attempt = 1
        while True:
            try:
                response = await self._attempt(request)
            except _Failure as failure:
                wait = policy.delay(attempt, failure.retry_after) if failure.retry else None
                if wait is None:
                    raise ModelError(self._final(failure, attempt, retries)) from failure.__cause__
                retries.append(_retried(failure, attempt, policy.attempts, wait))
                await policy.sleep(wait)
                attempt += 1
                continue
            response.retries = retries
            request.response = response
            return response

    def _final(self, failure: _Failure, attempt: int, retries: list[str]) -> str:
        """The ``ModelError`` sentence of the failure that ended the call."""
        attempts = self.retry.attempts
        if failure.retry and failure.retry_after is not None and attempt < attempts:
            return (
                f"{failure.sentence} (it asked to retry after {failure.retry_after:g} s, more than "
                f"max_delay={self.retry.max_delay:g} s allows)"
            )
        if not retries:
            return failure.sentence
        return (
            f"{failure.sentence} (attempt {attempt} of {attempts}; the {len(retries)} before it failed too)"
        )

    async def _attempt(self, request: ModelCall) -> ModelResponse:
        """One HTTP request: the parsed answer, or ``_Failure`` saying what went wrong."""
        openai = self._openai
        client = self._get_client()
        kwargs = self.build_request(request)
        try:
            answer = await client.chat.completions.create(**kwargs)
            if self.stream:
                return await self._read_stream(answer)
            return self._parse(answer)
        except _Failure:
            raise
        except openai.APIStatusError as exc:
            status = exc.status_code
            raise _Failure(
                f"model endpoint {self.endpoint} answered HTTP {status} for model {self.model!r}: "
                f"{_short(_status_detail(exc))}",
                retry=status in RETRY_STATUSES or status >= 500,
                retry_after=_retry_after(getattr(exc, "response", None)),
            ) from exc
        except openai.APITimeoutError as exc:
            raise _Failure(
                f"model endpoint {self.endpoint} did not answer within {self.timeout}s; "
                "raise timeout= or check the server",
                retry=True,
            ) from exc
        except openai.APIConnectionError as exc:
            raise _Failure(
                f"cannot reach model endpoint {self.endpoint} ({_short(str(exc))}); is the server running?",
                retry=True,
            ) from exc
        except openai.OpenAIError as exc:
            raise _Failure(f"model endpoint {self.endpoint} failed: {_short(str(exc))}", retry=False) from exc

    async def _read_stream(self, stream: Any) -> ModelResponse:
        """Gather a streamed answer: text deltas, tool-call deltas by index, the finish reason, the usage."""
        text: list[str] = []
        calls: dict[int, dict[str, str]] = {}
        finish: str | None = None
        response_id: str | None = None
        usage: dict[str, int] = {}
        chunks = 0
        try:
            async for chunk in stream:
                chunks += 1
                response_id = response_id or getattr(chunk, "id", None)
                if getattr(chunk, "usage", None) is not None:
                    usage = usage_of(chunk.usage)
                for choice in getattr(chunk, "choices", None) or []:
                    finish = getattr(choice, "finish_reason", None) or finish
                    delta = getattr(choice, "delta", None)
                    if delta is not None:
                        _gather_delta(delta, text, calls)
        except Exception as exc:
            cause = exc.__cause__ or exc
            reason = _short(str(cause) or type(cause).__name__, 160).rstrip(".")
            raise _Failure(
                f"the stream from model endpoint {self.endpoint} for model {self.model!r} broke off after "
                f"{chunks} chunk{'s' if chunks != 1 else ''} ({reason})",
                retry=True,
            ) from exc
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                try:
                    await close()
                except Exception:  # the connection is gone already
                    pass
        if not chunks:
            raise _Failure(
                f"model endpoint {self.endpoint} sent an empty stream for model {self.model!r}", retry=True
            )
        tool_calls = [
            ToolCallEvent(c["name"], c["arguments"] or "{}", c["id"] or uuid.uuid4().hex)
            for _, c in sorted(calls.items())
            if c["name"]
        ]
        return ModelResponse(
            content="".join(text) or None,
            tool_calls=tool_calls,
            usage=usage,
            response_id=response_id,
            finish_reason=finish,
        )

    def _parse(self, completion: Any) -> ModelResponse:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise _Failure(
                f"model endpoint {self.endpoint} returned no choices for model {self.model!r}", retry=False
            )
        message = choices[0].message
        calls: list[ToolCallEvent] = []
        for tc in getattr(message, "tool_calls", None) or []:
            function = getattr(tc, "function", None)
            if function is None:
                continue  # not a function call (custom tool kinds); nothing we can run
            calls.append(ToolCallEvent(function.name, function.arguments or "{}", tc.id or uuid.uuid4().hex))
        raw = getattr(completion, "usage", None)
        return ModelResponse(
            content=message.content,
            tool_calls=calls,
            usage=usage_of(raw) if raw is not None else {},
            response_id=getattr(completion, "id", None) or None,
            finish_reason=getattr(choices[0], "finish_reason", None) or None,
        )


def _gather_delta(delta: Any, text: list[str], calls: dict[int, dict[str, str]]) -> None:
    content = getattr(delta, "content", None)
    if content:
        text.append(content)
    for tc in getattr(delta, "tool_calls", None) or []:
        index = getattr(tc, "index", None)
        slot = calls.setdefault(
            index if isinstance(index, int) else len(calls), {"id": "", "name": "", "arguments": ""}
        )
        if getattr(tc, "id", None):
            slot["id"] = tc.id
        function = getattr(tc, "function", None)
        if function is not None:
            slot["name"] += getattr(function, "name", None) or ""
            slot["arguments"] += getattr(function, "arguments", None) or ""


def _field(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def usage_of(raw: Any) -> dict[str, int]:
    """A server's usage object (or dict) as ``ModelResponse.usage``: the top-level counts, and the details
    that matter for cost flattened (``cached_tokens``, ``reasoning_tokens``, ``cache_creation_tokens``)."""
    usage: dict[str, int] = {}
    for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
        value = _field(raw, key)
        if isinstance(value, int) and not isinstance(value, bool):
            usage[key] = value
    prompt = _field(raw, "prompt_tokens_details")
    completion = _field(raw, "completion_tokens_details")
    found = {
        "cached_tokens": _field(prompt, "cached_tokens") if prompt is not None else None,
        "cache_creation_tokens": (_field(prompt, "cache_write_tokens") if prompt is not None else None)
        or _field(raw, "cache_creation_input_tokens"),
        "reasoning_tokens": _field(completion, "reasoning_tokens") if completion is not None else None,
    }
    for key, value in found.items():
        if isinstance(value, int) and not isinstance(value, bool):
            usage[key] = value
    return usage


def _retry_after(response: Any) -> float | None:
    """Seconds a response's ``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date) asks for."""
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for header, divisor in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(header)
        if not value:
            continue
        try:
            return float(value) / divisor
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            continue
        return max(0.0, when.timestamp() - time.time())
    return None


def _retried(failure: _Failure, attempt: int, attempts: int, wait: float) -> str:
    why = " as its retry-after asked" if failure.retry_after is not None else ""
    return f"attempt {attempt} of {attempts} failed: {failure.sentence}; retried after {wait:g} s{why}"


def _status_detail(exc: Any) -> str:
    """The server's own error message when the body has one (``{"error": {"message": ...}}``)."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return error["message"]
        if isinstance(error, str):
            return error
    return str(getattr(exc, "message", exc))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


__all__ = [
    "PLACEHOLDER_API_KEY",
    "RETRY_STATUSES",
    "ModelError",
    "OpenAIChatModel",
    "RetryPolicy",
    "to_chat_messages",
    "usage_of",
]

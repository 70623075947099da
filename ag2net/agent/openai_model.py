"""``OpenAIChatModel``: any OpenAI-compatible chat-completions endpoint (OpenAI, Ollama, vLLM, llama.cpp,
LM Studio) as a ``Model``, with tool calling. Needs the optional ``openai`` package.
"""

from __future__ import annotations

import os
import uuid
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


class OpenAIChatModel:
    """A ``Model`` backed by an OpenAI-compatible ``/chat/completions`` endpoint.

    ``base_url`` defaults to the ``openai`` client's default (``OPENAI_BASE_URL`` or OpenAI's API);
    for Ollama use ``http://localhost:11434/v1``. ``api_key`` defaults to ``OPENAI_API_KEY``, else a
    placeholder that local servers accept. Failures raise ``ModelError`` naming the endpoint.
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
            self._client = self._openai.AsyncOpenAI(
                api_key=self.api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=self.max_retries,
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
        return kwargs

    async def complete(self, request: ModelCall) -> ModelResponse:
        openai = self._openai
        client = self._get_client()
        try:
            completion = await client.chat.completions.create(**self.build_request(request))
        except openai.APIStatusError as exc:
            raise ModelError(
                f"model endpoint {self.endpoint} answered HTTP {exc.status_code} for model {self.model!r}: "
                f"{_short(_status_detail(exc))}"
            ) from exc
        except openai.APITimeoutError as exc:
            raise ModelError(
                f"model endpoint {self.endpoint} did not answer within {self.timeout}s; "
                "raise timeout= or check the server"
            ) from exc
        except openai.APIConnectionError as exc:
            raise ModelError(
                f"cannot reach model endpoint {self.endpoint} ({_short(str(exc))}); is the server running?"
            ) from exc
        except openai.OpenAIError as exc:
            raise ModelError(f"model endpoint {self.endpoint} failed: {_short(str(exc))}") from exc
        return self._parse(completion)

    def _parse(self, completion: Any) -> ModelResponse:
        choices = getattr(completion, "choices", None) or []
        if not choices:
            raise ModelError(f"model endpoint {self.endpoint} returned no choices for model {self.model!r}")
        message = choices[0].message
        calls: list[ToolCallEvent] = []
        for tc in getattr(message, "tool_calls", None) or []:
            function = getattr(tc, "function", None)
            if function is None:
                continue  # not a function call (custom tool kinds); nothing we can run
            calls.append(ToolCallEvent(function.name, function.arguments or "{}", tc.id or uuid.uuid4().hex))
        usage: dict[str, int] = {}
        raw = getattr(completion, "usage", None)
        if raw is not None:
            for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
                value = getattr(raw, key, None)
                if isinstance(value, int):
                    usage[key] = value
        return ModelResponse(content=message.content, tool_calls=calls, usage=usage)


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


__all__ = ["PLACEHOLDER_API_KEY", "ModelError", "OpenAIChatModel", "to_chat_messages"]

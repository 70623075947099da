"""Provider usage, streaming and retries of ``OpenAIChatModel`` against a local OpenAI-compatible server (real
HTTP on 127.0.0.1, the real ``openai`` client): the usage with cached and reasoning tokens reaches each
turn record's ``rounds`` and totals (``token_method`` "provider"), streamed answers carry it too, and the
ways real servers fail (429 with retry-after, 500, a dropped stream) are retried by the policy, each
failure one sentence."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest
from fake_openai import FakeOpenAI, usage
from support import until

from ag2net import Agent, Passport, tool
from ag2net.agent import ModelCall, ModelError
from ag2net.events import ModelRequest, TextInput

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("openai") is None, reason="needs the 'openai' package"),
    pytest.mark.hub(store="memory", invite_ack_timeout=3),
]


@pytest.fixture
async def server():
    srv = await FakeOpenAI().start()
    yield srv
    await srv.stop()


class Waits:
    """The policy's sleep: records each wait and yields once (the waits are what the test checks)."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _model(server: FakeOpenAI, **kw: Any):
    from ag2net.agent.openai_model import OpenAIChatModel

    kw.setdefault("api_key", "test-key")
    kw.setdefault("timeout", 10)
    return OpenAIChatModel(server.model, base_url=server.base_url, **kw)


def _policy(waits: Waits | None = None, **kw: Any):
    from ag2net.agent.openai_model import RetryPolicy

    return RetryPolicy(**kw) if waits is None else RetryPolicy(sleep=waits, **kw)


def _call(text: str = "hi") -> ModelCall:
    return ModelCall(system="Be brief.", history=[ModelRequest([TextInput(text)])])


# ----------------------------------------------------------------------------------------- usage


async def test_usage_with_cached_and_reasoning_tokens(server):
    server.reply("Hello.", usage=usage(1200, 50, cached=1024, reasoning=20), response_id="chatcmpl-abc")
    model = _model(server)
    call = _call()
    try:
        response = await model.complete(call)
    finally:
        await model.aclose()
    assert response.usage == {
        "prompt_tokens": 1200,
        "completion_tokens": 50,
        "total_tokens": 1250,
        "cached_tokens": 1024,
        "reasoning_tokens": 20,
    }
    assert response.usage_method == "provider"
    assert (response.response_id, response.finish_reason, response.retries) == ("chatcmpl-abc", "stop", [])
    assert call.response is response  # how the turn record gets it
    assert "stream" not in server.requests[0]["body"]


async def test_a_server_without_usage_leaves_it_empty(server):
    server.reply("Hello.", usage=None)
    model = _model(server)
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    assert response.usage == {}


async def test_streaming_asks_for_usage_and_gathers_text_and_usage(server):
    server.stream(
        "Hello from a stream of chunks.", usage=usage(900, 7, cached=768), response_id="chatcmpl-s1"
    )
    model = _model(server, stream=True)
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    body = server.requests[0]["body"]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert response.content == "Hello from a stream of chunks."
    assert response.usage == {
        "prompt_tokens": 900,
        "completion_tokens": 7,
        "total_tokens": 907,
        "cached_tokens": 768,
    }
    assert (response.response_id, response.finish_reason) == ("chatcmpl-s1", "stop")


async def test_streamed_tool_calls_run_through_an_agent(server):
    server.stream(
        tool_calls=[{"id": "call_1", "name": "add", "arguments": '{"x": 2, "y": 3}'}], usage=usage(300, 20)
    )
    server.stream("The sum is 5.", usage=usage(340, 6, cached=256))

    @tool
    def add(x: int, y: int) -> int:
        """Add two integers."""
        return x + y

    model = _model(server, stream=True)
    try:
        reply = await Agent("calc", model, "You add numbers.", [add]).ask("2+3?")
    finally:
        await model.aclose()
    assert reply.body == "The sum is 5."
    assert [e.result for e in reply.tool_results] == ["5"]
    assert [c.response.finish_reason for c in reply.calls if c.response] == ["tool_calls", "stop"]
    assert reply.usage["prompt_tokens"] == 640 and reply.usage["cached_tokens"] == 256


# ----------------------------------------------------------------------------------------- failures


async def test_429_retry_after_is_honoured_and_said(server):
    server.fail(429, "Rate limit reached for gpt-4o-mini", {"retry-after": "2"})
    server.reply("ok", usage=usage(10, 1))
    waits = Waits()
    model = _model(server, retry=_policy(waits, attempts=3, base_delay=0.25, max_delay=5))
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    assert waits.waits == [2.0]
    assert len(server.requests) == 2
    (sentence,) = response.retries
    assert sentence.startswith("attempt 1 of 3 failed: model endpoint ")
    assert "answered HTTP 429 for model 'gpt-4o-mini': Rate limit reached for gpt-4o-mini" in sentence
    assert sentence.endswith("retried after 2 s as its retry-after asked")


async def test_retry_after_ms_waits_for_real(server):
    server.fail(429, "slow down", {"retry-after-ms": "30"})
    server.reply("ok", usage=usage(10, 1))
    model = _model(server, retry=_policy(attempts=2, base_delay=5, max_delay=10))
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    assert response.content == "ok"
    assert "retried after 0.03 s as its retry-after asked" in response.retries[0]


async def test_500_backs_off_doubling_up_to_max_delay(server):
    for _ in range(3):
        server.fail(500, "The server had an error while processing your request")
    server.reply("finally", usage=usage(10, 1))
    waits = Waits()
    model = _model(server, retry=_policy(waits, attempts=4, base_delay=0.5, max_delay=1.5))
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    assert waits.waits == [0.5, 1.0, 1.5]
    assert response.content == "finally" and len(response.retries) == 3
    assert all("HTTP 500" in s for s in response.retries)


async def test_every_attempt_failing_is_one_sentence(server):
    for _ in range(3):
        server.fail(500, "boom")
    model = _model(server, retry=_policy(Waits(), attempts=3, base_delay=0.1, max_delay=1))
    try:
        with pytest.raises(ModelError) as info:
            await model.complete(_call())
    finally:
        await model.aclose()
    message = str(info.value)
    assert message.startswith(f"model endpoint {server.base_url}")
    assert message.endswith(": boom (attempt 3 of 3; the 2 before it failed too)")
    assert message.count(". ") == 0 and "\n" not in message


async def test_a_retry_after_longer_than_max_delay_ends_the_retries(server):
    server.fail(429, "quota", {"retry-after": "120"})
    waits = Waits()
    model = _model(server, retry=_policy(waits, attempts=5, base_delay=0.1, max_delay=30))
    try:
        with pytest.raises(ModelError, match=r"asked to retry after 120 s, more than max_delay=30 s allows"):
            await model.complete(_call())
    finally:
        await model.aclose()
    assert waits.waits == [] and len(server.requests) == 1


async def test_a_client_error_is_not_retried(server):
    server.fail(400, "Invalid 'messages': empty")
    waits = Waits()
    model = _model(server, retry=_policy(waits, attempts=3))
    try:
        with pytest.raises(ModelError, match=r"answered HTTP 400 .*: Invalid 'messages': empty$"):
            await model.complete(_call())
    finally:
        await model.aclose()
    assert waits.waits == [] and len(server.requests) == 1


async def test_a_dropped_stream_is_retried(server):
    server.drop(after=2)
    server.stream("whole answer", usage=usage(50, 2))
    waits = Waits()
    model = _model(server, stream=True, retry=_policy(waits, attempts=2, base_delay=0.2, max_delay=1))
    try:
        response = await model.complete(_call())
    finally:
        await model.aclose()
    assert response.content == "whole answer"  # nothing of the broken attempt leaks in
    (sentence,) = response.retries
    assert "the stream from model endpoint" in sentence and "broke off after 2 chunks" in sentence
    assert waits.waits == [0.2]


async def test_a_stream_dropped_every_time_is_a_model_error(server):
    server.drop(after=1)
    model = _model(server, stream=True, retry=_policy(attempts=1))
    try:
        with pytest.raises(ModelError, match=r"broke off after 1 chunk \("):
            await model.complete(_call())
    finally:
        await model.aclose()


def test_bad_retry_policy_is_one_sentence():
    from ag2net.agent.openai_model import RetryPolicy

    with pytest.raises(
        ValueError, match=r"^RetryPolicy.attempts must be a whole number of 1 or more, got 0$"
    ):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match=r"^RetryPolicy.base_delay must be 0 or more seconds, got -1$"):
        RetryPolicy(base_delay=-1)
    with pytest.raises(ValueError, match=r"max_delay \(1\) is less than base_delay \(2\); raise max_delay"):
        RetryPolicy(base_delay=2, max_delay=1)


# ----------------------------------------------------------------------------------------- turn records


async def _conversation(hc, model, prompts: list[str]):
    bob = await hc.register(Agent("bob", model, "You are terse."))
    alice = await hc.register_human(Passport(name="alice", kind="human"))
    ch = await alice.open(type="conversation", target="bob")
    for n, text in enumerate(prompts, start=1):
        await ch.send(text)

        async def answered(n=n) -> bool:
            return len(await hc.list_turns(agent_id=bob.agent_id, limit=50)) >= n

        await until(answered)
        await bob.idle()
    records = await hc.list_turns(agent_id=bob.agent_id, limit=50)
    return bob, ch, sorted(records, key=lambda r: r.started_at)


async def test_turn_records_carry_provider_usage_per_call_and_in_total(hub, hc, server):
    server.stream("First answer.", usage=usage(1200, 40, cached=0), response_id="chatcmpl-t1")
    server.fail(429, "Rate limit reached", {"retry-after-ms": "1"})
    server.stream(
        "Second answer.", usage=usage(1260, 30, cached=1152, reasoning=12), response_id="chatcmpl-t2"
    )
    model = _model(server, stream=True, retry=_policy(attempts=2, base_delay=0, max_delay=1))
    try:
        _, _, (first, second) = await _conversation(hc, model, ["one?", "two?"])
    finally:
        await model.aclose()
    assert first.token_method == "provider" and first.parts_method in ("heuristic", "tiktoken:o200k_base")
    [round1] = first.rounds
    assert round1["usage"] == {
        "prompt_tokens": 1200,
        "completion_tokens": 40,
        "total_tokens": 1240,
        "cached_tokens": 0,
    }
    assert (round1["response_id"], round1["finish_reason"]) == ("chatcmpl-t1", "stop")
    [round2] = second.rounds
    assert round2["usage"]["cached_tokens"] == 1152 and round2["response_id"] == "chatcmpl-t2"
    assert len(round2["retries"]) == 1 and "HTTP 429" in round2["retries"][0]
    tokens = second.tokens
    assert (
        tokens["prompt"],
        tokens["completion"],
        tokens["cached"],
        tokens["reasoning"],
        tokens["total"],
    ) == (
        1260,
        30,
        1152,
        12,
        1290,
    )
    assert {"system", "history", "tools", "input", "output"} <= set(tokens)  # ag2net's own parts stay
    assert second.error is None
    # the spans read the same figures (ag2net.traces.genai reads rounds[n].usage and response_id)
    from ag2net.traces.genai import TraceOptions, turn_spans

    chat = next(
        s
        for s in turn_spans(second.to_dict(), agent_name="bob", options=TraceOptions())
        if s.name.startswith("chat")
    )
    assert chat.attributes["gen_ai.usage.input_tokens"] == 1260
    assert chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 1152
    assert chat.attributes["gen_ai.response.id"] == "chatcmpl-t2"
    assert chat.attributes["ag2net.usage.method"] == "provider"
    # and the cost: gpt-4o-mini at the built-in prices
    from ag2net.costs import BUILTIN_PRICES, turn_cost

    price = BUILTIN_PRICES["gpt-4o-mini"]
    cost = turn_cost(second)
    expected = ((1260 - 1152) * price.input + 1152 * price.cached_input + 30 * price.output) / 1_000_000
    assert cost.dollars == pytest.approx(expected) and not cost.estimated


async def test_a_failed_turn_says_why_in_one_sentence(hub, hc, server):
    server.fail(500, "upstream overloaded")
    server.fail(503, "upstream overloaded")
    model = _model(server, retry=_policy(attempts=2, base_delay=0, max_delay=0))
    try:
        _, _, (record,) = await _conversation(hc, model, ["anyone?"])
    finally:
        await model.aclose()
    assert record.error is not None
    assert record.error.startswith("ModelError: model endpoint ")
    assert record.error.endswith(
        "answered HTTP 503 for model 'gpt-4o-mini': upstream overloaded (attempt 2 of 2; the 1 before it failed too)"
    )


async def test_a_scripted_turn_is_labelled_an_estimate(hub, hc):
    from ag2net import ScriptedModel

    _, _, (record,) = await _conversation(hc, ScriptedModel("fine"), ["how are you?"])
    assert record.token_method == record.parts_method == "heuristic" or record.token_method.startswith(
        "tiktoken"
    )
    assert "usage" not in record.rounds[0]  # an estimate is never written as the provider's
    assert record.tokens["prompt"] > 0 and record.tokens["cached"] == 0

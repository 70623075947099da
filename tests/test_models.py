"""ScriptedModel: every kind of turn, recording, exhaustion and looping."""

from __future__ import annotations

import json

import pytest

from ag2net.agent.models import (
    Model,
    ModelCall,
    ModelResponse,
    ScriptedModel,
    ScriptExhausted,
    tool_call,
)
from ag2net.events import ModelMessage, ModelRequest, TextInput


def _call(text: str = "hi", **kw) -> ModelCall:
    return ModelCall(system=kw.pop("system", "sys"), history=[ModelRequest([TextInput(text)])], **kw)


def test_tool_call_helper_encodes_arguments_as_json():
    call = tool_call("search", query="x", limit=3, name="also allowed")
    assert call.name == "search"
    assert json.loads(call.arguments) == {"query": "x", "limit": 3, "name": "also allowed"}
    assert len(call.id) == 32
    assert tool_call("ping").arguments == "{}"


def test_scripted_model_satisfies_the_protocol():
    assert isinstance(ScriptedModel("a"), Model)
    assert ScriptedModel(name="planner").name == "planner"


async def test_each_call_consumes_one_turn_of_any_kind():
    first = tool_call("a", x=1)
    second = [tool_call("b"), tool_call("c")]
    model = ScriptedModel(
        "plain text",
        first,
        second,
        ModelResponse(content="with usage", usage={"prompt_tokens": 7, "completion_tokens": 2}),
        lambda call: f"computed from {call.history[-1].text}",
    )
    r1 = await model.complete(_call())
    assert (r1.content, r1.tool_calls) == ("plain text", [])
    r2 = await model.complete(_call())
    assert r2.content is None
    assert [(c.name, c.arguments, c.id) for c in r2.tool_calls] == [("a", '{"x": 1}', first.id)]
    assert r2.tool_calls[0] is not first  # a copy: the script never aliases into a history
    r3 = await model.complete(_call())
    assert [c.name for c in r3.tool_calls] == ["b", "c"]
    r4 = await model.complete(_call())
    assert r4.usage == {"prompt_tokens": 7, "completion_tokens": 2}
    r5 = await model.complete(_call("the question"))
    assert r5.content == "computed from the question"
    assert model.remaining == 0


async def test_exception_turn_is_raised_and_consumed():
    model = ScriptedModel(TimeoutError("provider down"), "recovered")
    with pytest.raises(TimeoutError, match="provider down"):
        await model.complete(_call())
    assert (await model.complete(_call())).content == "recovered"
    assert len(model.calls) == 2


async def test_async_callable_turns_and_callables_returning_tool_calls():
    async def decide(call: ModelCall):
        return tool_call("lookup", term=call.inputs[0].content) if call.round == 0 else "done"

    model = ScriptedModel(decide, decide)
    r = await model.complete(_call(inputs=[TextInput("cats")]))
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("lookup", {"term": "cats"})]
    r = await model.complete(_call(inputs=[TextInput("cats")], round=1))
    assert r.content == "done"


async def test_callable_returning_an_exception_raises_it():
    model = ScriptedModel(lambda call: ValueError("bad state"))
    with pytest.raises(ValueError, match="bad state"):
        await model.complete(_call())


async def test_exhausted_script_names_model_and_call_number():
    model = ScriptedModel("only", name="critic")
    await model.complete(_call())
    with pytest.raises(ScriptExhausted) as info:
        await model.complete(_call())
    message = str(info.value)
    assert "'critic'" in message and "call 2" in message and "1 turn" in message and "loop=True" in message
    assert isinstance(info.value, RuntimeError)


async def test_loop_restarts_the_script_with_fresh_tool_call_ids():
    call = tool_call("t")
    model = ScriptedModel(call, "answer", loop=True)
    ids = []
    for _ in range(3):
        ids.append((await model.complete(_call())).tool_calls[0].id)
        assert (await model.complete(_call())).content == "answer"
    assert ids[0] == call.id
    assert len(set(ids)) == 3
    assert model.remaining is None
    with pytest.raises(ValueError):
        ScriptedModel(loop=True)


async def test_bad_turn_type_is_a_clear_type_error():
    model = ScriptedModel(42)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="turn 1 is a int"):
        await model.complete(_call())


async def test_recorded_calls_do_not_change_when_the_caller_mutates_its_objects():
    history = [ModelRequest([TextInput("original")]), ModelMessage("said before")]
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    inputs = [TextInput("original")]
    call = ModelCall(system="s", history=history, inputs=inputs, tools=tools, prior=1)
    model = ScriptedModel("ok")
    await model.complete(call)

    history.append(ModelMessage("later"))
    history[0].parts[0].content = "mutated"
    history[0].parts.append(TextInput("extra"))
    history[1].content = "changed"
    inputs[0].content = "mutated"
    tools[0]["function"]["name"] = "g"

    recorded = model.calls[0]
    assert [type(e).__name__ for e in recorded.history] == ["ModelRequest", "ModelMessage"]
    assert recorded.history[0].text == "original"
    assert recorded.history[1].content == "said before"
    assert recorded.inputs[0].content == "original"
    assert recorded.tool_names == ["f"]
    assert recorded.prior == 1 and recorded.turn_events == recorded.history[1:]


async def test_script_continues_across_calls_and_add_turns_extends_it():
    model = ScriptedModel("one")
    assert (await model.complete(_call())).content == "one"
    model.add_turns("two", tool_call("x"))
    assert (await model.complete(_call())).content == "two"
    assert (await model.complete(_call())).tool_calls[0].name == "x"


async def test_usage_is_estimated_when_the_turn_has_none():
    model = ScriptedModel("a reply of some length")
    r = await model.complete(_call("a question", system="be brief"))
    assert r.usage["prompt_tokens"] > 0
    assert r.usage["completion_tokens"] > 0
    assert r.usage["total_tokens"] == r.usage["prompt_tokens"] + r.usage["completion_tokens"]

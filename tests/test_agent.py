"""Agent.ask: the tool loop, errors, the round bound, injection, prompts; Task lifecycle and mirroring."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import pytest

from ag2net.agent import (
    CHANNEL_DEP,
    TASK_DEP,
    Agent,
    ChannelInject,
    ModelCall,
    ModelError,
    ModelResponse,
    ScriptedModel,
    Task,
    TaskInject,
    ToolLoopError,
    current_task,
    tool,
    tool_call,
)
from ag2net.events import (
    DataInput,
    ModelMessage,
    ModelRequest,
    TextInput,
    ToolCallEvent,
    ToolResultEvent,
)
from ag2net.tasks import TaskMetadata, TaskState


@tool
def add(x: int, y: int) -> int:
    """Add two integers.

    Args:
        x: the first
        y: the second
    """
    return x + y


def kinds(events) -> list[str]:
    return [type(e).__name__ for e in events]


# --- the tool loop -------------------------------------------------------------------------------


async def test_tool_round_then_reply():
    model = ScriptedModel(tool_call("add", x=2, y=3), "it is 5")
    agent = Agent("calc", model, "You add.", [add])
    reply = await agent.ask("what is 2+3?")

    assert reply.body == "it is 5"
    assert kinds(reply.events) == ["ModelRequest", "ToolCallEvent", "ToolResultEvent", "ModelMessage"]
    call, result = reply.events[1], reply.events[2]
    assert (result.parent_id, result.name, result.result, result.is_error, result.value) == (
        call.id,
        "add",
        "5",
        False,
        5,
    )
    assert reply.tool_calls == [call] and reply.tool_results == [result]

    # the second model call saw the tool traffic, after the input
    assert [c.round for c in reply.calls] == [0, 1]
    assert kinds(reply.calls[1].history) == ["ModelRequest", "ToolCallEvent", "ToolResultEvent"]
    assert reply.calls[0].system == "You add."
    assert reply.calls == model.calls

    assert reply.usage["prompt_tokens"] > 0 and reply.usage["completion_tokens"] > 0


async def test_usage_is_summed_over_calls():
    model = ScriptedModel(
        ModelResponse(
            tool_calls=[tool_call("add", x=1, y=1)], usage={"prompt_tokens": 10, "completion_tokens": 3}
        ),
        ModelResponse(content="2", usage={"prompt_tokens": 15, "completion_tokens": 1, "cached_tokens": 4}),
    )
    reply = await Agent("a", model, tools=[add]).ask("1+1")
    assert reply.usage == {
        "prompt_tokens": 25,
        "completion_tokens": 4,
        "total_tokens": 29,
        "cached_tokens": 4,
    }


async def test_several_calls_in_one_round_run_in_order_calls_then_results():
    order = []

    @tool
    def note(text: str) -> str:
        """Remember a note."""
        order.append(text)
        return f"noted {text}"

    model = ScriptedModel([tool_call("note", text="a"), tool_call("note", text="b")], "done")
    reply = await Agent("n", model, tools=[note]).ask("go")
    assert order == ["a", "b"]
    assert kinds(reply.events) == [
        "ModelRequest",
        "ToolCallEvent",
        "ToolCallEvent",
        "ToolResultEvent",
        "ToolResultEvent",
        "ModelMessage",
    ]
    calls, results = reply.events[1:3], reply.events[3:5]
    assert [r.parent_id for r in results] == [c.id for c in calls]
    assert [r.result for r in results] == ["noted a", "noted b"]


async def test_raising_tool_becomes_an_error_result_and_the_loop_continues():
    @tool
    def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"cannot do {reason}")

    model = ScriptedModel(tool_call("explode", reason="that"), "sorry, it failed")
    reply = await Agent("e", model, tools=[explode]).ask("try")
    result = reply.events[2]
    assert isinstance(result, ToolResultEvent)
    assert result.is_error is True
    assert result.result == "Error: cannot do that"
    assert isinstance(result.value, ValueError)
    assert reply.body == "sorry, it failed"
    assert model.calls[1].history[-1].result == "Error: cannot do that"


async def test_unknown_tool_and_bad_arguments_are_error_results():
    model = ScriptedModel(
        [
            tool_call("nope"),
            ToolCallEvent("add", "{not json"),
            ToolCallEvent("add", "[1, 2]"),
            tool_call("add", x=1),  # missing y: the function raises TypeError
        ],
        "ok",
    )
    reply = await Agent("u", model, tools=[add]).ask("go")
    results = reply.tool_results
    assert all(r.is_error for r in results)
    assert results[0].result == "Error: unknown tool 'nope'; available tools: add"
    assert results[1].result.startswith("Error: arguments for tool 'add' are not valid JSON")
    assert results[2].result == "Error: arguments for tool 'add' must be a JSON object, got list"
    assert results[3].result.startswith("Error: ") and "y" in results[3].result
    assert reply.body == "ok"


async def test_result_text_str_as_is_others_json_value_kept():
    @dataclass
    class Point:
        x: int
        y: int

    @tool
    def facts(kind: str) -> Any:
        """Return something."""
        return {"text": "plain", "dict": {"b": 1, "a": [1, "é"]}, "point": Point(1, 2), "none": None}[kind]

    model = ScriptedModel(
        [tool_call("facts", kind="text"), tool_call("facts", kind="dict")],
        [tool_call("facts", kind="point"), tool_call("facts", kind="none")],
        "ok",
    )
    results = (await Agent("f", model, tools=[facts]).ask("go")).tool_results
    assert [r.result for r in results] == ["plain", '{"b": 1, "a": [1, "é"]}', '{"x": 1, "y": 2}', "null"]
    assert results[1].value == {"b": 1, "a": [1, "é"]}
    assert results[2].value == Point(1, 2)


async def test_more_than_max_tool_rounds_raises_naming_agent_and_bound():
    model = ScriptedModel(tool_call("add", x=1, y=1), loop=True)
    agent = Agent("looper", model, tools=[add], max_tool_rounds=3)
    with pytest.raises(ToolLoopError) as info:
        await agent.ask("go")
    message = str(info.value)
    assert "'looper'" in message and "max_tool_rounds=3" in message and "add" in message
    assert len(model.calls) == 4  # three rounds ran, the fourth request was refused
    assert len(info.value.events) == 1 + 3 * 2  # the input and three call/result pairs
    assert len(info.value.calls) == 4
    assert info.value.usage["prompt_tokens"] > 0


async def test_max_tool_rounds_zero_allows_only_a_plain_reply():
    agent = Agent("z", ScriptedModel("fine"), tools=[add], max_tool_rounds=0)
    assert (await agent.ask("hi")).body == "fine"
    agent.model = ScriptedModel(tool_call("add", x=1, y=2))
    with pytest.raises(ToolLoopError, match="max_tool_rounds=0"):
        await agent.ask("hi")


async def test_exactly_max_tool_rounds_is_allowed():
    model = ScriptedModel(tool_call("add", x=1, y=1), tool_call("add", x=2, y=2), "done")
    reply = await Agent("b", model, tools=[add], max_tool_rounds=2).ask("go")
    assert reply.body == "done"


async def test_text_sent_alongside_tool_calls_is_kept_as_a_message():
    model = ScriptedModel(ModelResponse(content="let me check", tool_calls=[tool_call("add", x=1, y=2)]), "3")
    reply = await Agent("t", model, tools=[add]).ask("1+2")
    assert kinds(reply.events) == [
        "ModelRequest",
        "ModelMessage",
        "ToolCallEvent",
        "ToolResultEvent",
        "ModelMessage",
    ]
    assert reply.events[1].content == "let me check"
    assert reply.body == "3"


async def test_empty_final_reply_is_none_and_adds_no_message():
    reply = await Agent("q", ScriptedModel("")).ask("hi")
    assert reply.body is None
    assert kinds(reply.events) == ["ModelRequest"]


async def test_model_errors_propagate_and_missing_model_is_clear():
    with pytest.raises(ConnectionError):
        await Agent("x", ScriptedModel(ConnectionError("down"))).ask("hi")
    with pytest.raises(ModelError, match="agent 'bare' has no model"):
        await Agent("bare").ask("hi")


# --- inputs, history, tools, prompts -------------------------------------------------------------


async def test_inputs_are_normalised_and_history_comes_first():
    model = ScriptedModel("ok")
    history = [ModelRequest([TextInput("earlier")]), ModelMessage("my earlier answer")]
    reply = await Agent("h", model).ask("text", TextInput("part"), {"k": 1}, history=history)
    call = model.calls[0]
    assert call.prior == 2
    assert kinds(call.history) == ["ModelRequest", "ModelMessage", "ModelRequest"]
    current = call.history[2]
    assert [type(p).__name__ for p in current.parts] == ["TextInput", "TextInput", "DataInput"]
    assert current.parts[2] == DataInput({"k": 1})
    assert call.inputs == current.parts
    assert kinds(call.turn_events) == ["ModelRequest"]
    # the reply's events are the turn's only, not the history
    assert kinds(reply.events) == ["ModelRequest", "ModelMessage"]
    assert history == [ModelRequest([TextInput("earlier")]), ModelMessage("my earlier answer")]


async def test_a_list_of_parts_is_the_same_as_spreading_it():
    model = ScriptedModel("a", "b")
    agent = Agent("l", model)
    parts = [TextInput("x"), "y"]
    await agent.ask(parts)
    await agent.ask(*parts)
    assert model.calls[0].inputs == model.calls[1].inputs == [TextInput("x"), TextInput("y")]
    assert (await Agent("d", ScriptedModel("c")).ask([1, 2])).events[0].parts == [DataInput([1, 2])]


async def test_ask_without_inputs_continues_from_history():
    model = ScriptedModel("continuing")
    reply = await Agent("c", model).ask(history=[ModelRequest([TextInput("q")])])
    assert model.calls[0].inputs == []
    assert kinds(model.calls[0].history) == ["ModelRequest"]
    assert kinds(reply.events) == ["ModelMessage"]


async def test_call_tools_are_added_after_agent_tools_and_later_names_win():
    def search(query: str) -> str:
        """Search the agent's notes."""
        return f"agent search {query}"

    @tool(name="search", description="Search the channel.")
    def channel_search(query: str, limit: int = 5) -> str:
        return f"channel search {query} {limit}"

    @tool
    def say(content: str) -> str:
        """Say something."""
        return "posted"

    model = ScriptedModel(tool_call("search", query="x"), "done")
    agent = Agent("t", model, tools=[add, search])  # a plain function is converted
    assert [t.name for t in agent.tools] == ["add", "search"]
    reply = await agent.ask("go", tools=[say, channel_search])
    offered = model.calls[0].tools
    assert [s["function"]["name"] for s in offered] == ["add", "search", "say"]
    assert offered[1]["function"]["description"] == "Search the channel."
    assert reply.tool_results[0].result == "channel search x 5"
    # the agent's own list is untouched by a call's tools
    assert [t.name for t in agent.tools] == ["add", "search"]


async def test_system_prompt_gets_prefixes_and_can_be_overridden_per_call():
    model = ScriptedModel("a", "b", "c", "d")
    agent = Agent("bob", model, "You are helpful.")
    await agent.ask("1")
    agent.add_prompt_prefix("You are bob (agent_id: 0123).")
    agent.add_prompt_prefix("You are bob (agent_id: 0123).")  # idempotent
    await agent.ask("2")
    await agent.ask("3", system_prompt="Answer in French.")
    agent.system_prompt = ""
    await agent.ask("4")
    assert [c.system for c in model.calls] == [
        "You are helpful.",
        "You are bob (agent_id: 0123).\n\nYou are helpful.",
        "You are bob (agent_id: 0123).\n\nAnswer in French.",
        "You are bob (agent_id: 0123).",
    ]
    agent.remove_prompt_prefix("You are bob (agent_id: 0123).")
    assert agent.system_text() == ""


def test_constructor_checks():
    with pytest.raises(ValueError, match="non-empty"):
        Agent("  ")
    with pytest.raises(ValueError, match="max_tool_rounds"):
        Agent("a", max_tool_rounds=-1)


# --- injection -------------------------------------------------------------------------------------


async def test_injected_parameters_are_hidden_from_schemas_and_filled_at_call_time():
    seen = []

    @tool
    async def post(text: str, channel: ChannelInject, task: TaskInject) -> str:
        """Post text into the current channel."""
        seen.append((text, channel, task))
        return "posted"

    model = ScriptedModel(
        ToolCallEvent("post", json.dumps({"text": "hi", "channel": "forged by the model"})),
        "done",
    )
    agent = Agent("i", model, tools=[post])
    await agent.ask("go", dependencies={CHANNEL_DEP: "the real channel"})
    schema = model.calls[0].tools[0]["function"]["parameters"]
    assert schema["properties"].keys() == {"text"}
    assert schema["required"] == ["text"]
    assert seen == [("hi", "the real channel", None)]


# --- concurrency -----------------------------------------------------------------------------------


class EchoModel:
    """A model that yields to the loop, then calls ``echo`` once and replies with the tool's result."""

    name = "echo"

    async def complete(self, request: ModelCall) -> ModelResponse:
        await asyncio.sleep(0)
        if request.round == 0:
            return ModelResponse(tool_calls=[tool_call("echo", text=request.inputs[0].content)])
        return ModelResponse(content=request.history[-1].result)


async def test_concurrent_turns_on_one_agent_do_not_mix():
    @tool
    async def echo(text: str) -> str:
        """Echo."""
        await asyncio.sleep(0)
        return text.upper()

    agent = Agent("shared", EchoModel(), tools=[echo])
    replies = await asyncio.gather(*(agent.ask(f"msg{i}") for i in range(8)))
    assert [r.body for r in replies] == [f"MSG{i}" for i in range(8)]
    for i, reply in enumerate(replies):
        assert reply.events[0].parts[0].content == f"msg{i}"
        assert len(reply.events) == 4


# --- tasks -------------------------------------------------------------------------------------------


class RecordingSink:
    """A task sink that keeps the hub-side record the way the hub would, and logs every call."""

    def __init__(self, agent_id: str | None = None) -> None:
        if agent_id is not None:
            self.agent_id = agent_id
        self.log: list[tuple[str, Any]] = []
        self.tasks: dict[str, TaskMetadata] = {}

    async def observe_task(self, metadata: TaskMetadata) -> None:
        self.log.append(("observe", metadata.to_dict()))
        self.tasks[metadata.task_id] = metadata

    async def update_task(self, task_id, *, state=None, progress=None, result=None, error=None) -> None:
        self.log.append(("update", {"state": state, "progress": progress, "result": result, "error": error}))
        md = self.tasks[task_id]
        if progress:
            md.progress.update(progress)
        if state is not None:
            md.state = state
        if result is not None:
            md.result = result
        if error is not None:
            md.error = error


async def test_task_lifecycle_is_mirrored_to_the_sink():
    sink = RecordingSink(agent_id="a" * 32)
    agent = Agent("owner", ScriptedModel())
    task = agent.task(
        "summarise", description="the thread", payload={"n": 3}, capability="summary", sink=sink
    )
    assert task.state is TaskState.CREATED
    assert len(task.task_id) == 32 and int(task.task_id, 16) >= 0
    async with task as running:
        assert running is task and task.state is TaskState.RUNNING
        assert current_task() is task
        await task.progress({"done": 1})
        await task.progress("halfway")
    assert current_task() is None
    assert task.state is TaskState.COMPLETED and task.completed_at is not None

    kind, first = sink.log[0]
    assert kind == "observe"
    assert first["owner_id"] == "a" * 32
    assert first["state"] == "running"
    assert first["spec"] == {
        "title": "summarise",
        "description": "the thread",
        "payload": {"n": 3},
        "capability": "summary",
    }
    assert first["started_at"] is not None and first["expires_at"] is None
    assert [entry for _, entry in sink.log[1:]] == [
        {"state": None, "progress": {"done": 1}, "result": None, "error": None},
        {"state": None, "progress": {"value": "halfway"}, "result": None, "error": None},
        {"state": TaskState.COMPLETED, "progress": None, "result": None, "error": None},
    ]
    assert sink.tasks[task.task_id].progress == {"done": 1, "value": "halfway"}
    assert task.metadata.progress == {"done": 1, "value": "halfway"}


async def test_explicit_complete_is_not_repeated_on_exit_and_ttl_sets_expiry():
    sink = RecordingSink()
    agent = Agent("owner", ScriptedModel())
    async with agent.task("t", ttl_seconds=60, sink=sink) as task:
        await task.complete({"answer": 42})
        with pytest.raises(RuntimeError, match="already completed"):
            await task.progress({"late": True})
    assert [k for k, _ in sink.log] == ["observe", "update"]
    assert sink.tasks[task.task_id].result == {"answer": 42}
    assert task.owner_id == "owner"  # no agent_id on the sink: the agent's name
    assert task.expires_at is not None and task.expires_at > task.started_at


async def test_exception_in_block_fails_the_task_and_is_reraised():
    sink = RecordingSink()
    agent = Agent("owner", ScriptedModel())
    with pytest.raises(KeyError):
        async with agent.task("t", sink=sink) as task:
            raise KeyError("missing")
    assert task.state is TaskState.FAILED
    assert sink.log[-1][1]["state"] is TaskState.FAILED
    assert sink.log[-1][1]["error"] == "'missing'"


async def test_cancel_calls_the_callback_and_ends_the_task():
    sink = RecordingSink()
    cancelled = []

    async def on_cancelled(task_id: str, reason: str) -> None:
        cancelled.append((task_id, reason))

    agent = Agent("owner", ScriptedModel())
    async with agent.task("t", sink=sink, on_cancelled=on_cancelled) as task:
        await task.cancel("peer asked")
    assert task.state is TaskState.CANCELLED and task.error == "peer asked"
    assert cancelled == [(task.task_id, "peer asked")]
    assert sink.log[-1][1] == {
        "state": TaskState.CANCELLED,
        "progress": None,
        "result": None,
        "error": "peer asked",
    }


async def test_sink_post_task_cancelled_is_the_default_callback():
    class Sink(RecordingSink):
        async def post_task_cancelled(self, task_id: str, reason: str) -> None:
            self.log.append(("cancelled", reason))

    sink = Sink()
    agent = Agent("owner", ScriptedModel())
    agent.task_sink = sink  # what the network client sets at registration
    async with agent.task("t") as task:
        await task.cancel("stop")
    assert sink.log[-1] == ("cancelled", "stop")


async def test_task_adopts_owner_and_channel_the_sink_fills_in():
    class Client(RecordingSink):
        @property
        def agent_id(self) -> str:
            raise RuntimeError("passport not stamped yet")

        async def observe_task(self, metadata: TaskMetadata) -> None:
            metadata.owner_id, metadata.channel_id = "b" * 32, "c" * 32
            await super().observe_task(metadata)

    agent = Agent("owner", ScriptedModel())
    task = agent.task("t", sink=Client())
    assert task.owner_id == "owner"  # a raising agent_id falls back to the agent's name
    async with task:
        assert (task.owner_id, task.channel_id) == ("b" * 32, "c" * 32)
        assert task.metadata.channel_id == "c" * 32


async def test_asyncio_cancellation_cancels_the_task():
    sink = RecordingSink()
    agent = Agent("owner", ScriptedModel())
    started = asyncio.Event()
    holder: list[Task] = []

    async def work() -> None:
        async with agent.task("long", sink=sink) as task:
            holder.append(task)
            started.set()
            await asyncio.sleep(30)

    job = asyncio.create_task(work())
    await started.wait()
    job.cancel()
    with pytest.raises(asyncio.CancelledError):
        await job
    assert holder[0].state is TaskState.CANCELLED


async def test_sink_refusal_leaves_the_task_unstarted():
    class Refusing(RecordingSink):
        async def observe_task(self, metadata):
            raise PermissionError("owner exceeded max_concurrent_tasks (1 >= 1)")

    agent = Agent("owner", ScriptedModel())
    task = agent.task("t", sink=Refusing())
    with pytest.raises(PermissionError):
        async with task:
            pytest.fail("the block must not run")
    assert task.state is TaskState.CREATED and current_task() is None


async def test_task_methods_outside_the_block_are_refused():
    task = Agent("owner", ScriptedModel()).task("t")
    with pytest.raises(RuntimeError, match="has not started"):
        await task.complete()
    with pytest.raises(ValueError, match="non-empty title"):
        Agent("owner").task("")


async def test_task_inject_receives_the_active_task_inside_the_block():
    sink = RecordingSink()

    @tool
    async def report(percent: int, task: TaskInject) -> str:
        """Report progress on the active task."""
        if task is None:
            return "Error: no active task"
        await task.progress({"percent": percent})
        return f"progress emitted on {task.task_id}"

    @tool
    async def finish(summary: str, task: TaskInject) -> str:
        """Complete the active task."""
        await task.complete(summary)
        return f"completed {task.task_id}"

    model = ScriptedModel(
        tool_call("report", percent=50),
        tool_call("finish", summary="all done"),
        "ok",
        tool_call("report", percent=1),
        "no task",
    )
    agent = Agent("worker", model, tools=[report, finish])
    async with agent.task("job", sink=sink) as task:
        reply = await agent.ask("do the job")
    assert [r.result for r in reply.tool_results] == [
        f"progress emitted on {task.task_id}",
        f"completed {task.task_id}",
    ]
    assert "task" not in model.calls[0].tools[0]["function"]["parameters"]["properties"]
    assert task.state is TaskState.COMPLETED and task.result == "all done"
    assert [k for k, _ in sink.log] == ["observe", "update", "update"]  # no second complete on exit

    # outside the block nothing is injected
    later = await agent.ask("again")
    assert later.tool_results[0].result == "Error: no active task"


async def test_another_agents_task_is_not_injected_and_explicit_dependency_wins():
    seen = []

    @tool
    def peek(task: TaskInject) -> str:
        """Look at the injected task."""
        seen.append(task)
        return "ok"

    owner = Agent("owner", ScriptedModel())
    other = Agent("other", ScriptedModel(tool_call("peek"), "x", tool_call("peek"), "y"), tools=[peek])
    async with owner.task("mine") as task:
        await other.ask("look")
        await other.ask("look", dependencies={TASK_DEP: task})
    assert seen == [None, task]


async def test_nested_tasks_inject_the_innermost_of_the_asking_agent():
    seen = []

    @tool
    def peek(task: TaskInject) -> str:
        """Look at the injected task."""
        seen.append(task.title)
        return "ok"

    a = Agent("a", ScriptedModel(tool_call("peek"), "x", loop=True), tools=[peek])
    b = Agent("b", ScriptedModel())
    async with a.task("outer"):
        async with b.task("b's"):
            await a.ask("1")
            async with a.task("inner"):
                await a.ask("2")
        await a.ask("3")
    assert seen == ["outer", "inner", "outer"]


async def test_concurrent_tasks_on_one_agent_each_see_their_own():
    seen: dict[str, str] = {}

    @tool
    async def peek(label: str, task: TaskInject) -> str:
        """Look at the injected task."""
        await asyncio.sleep(0)
        seen[label] = task.title
        return "ok"

    class PeekModel:
        name = "peek"

        async def complete(self, request: ModelCall) -> ModelResponse:
            if request.round == 0:
                return ModelResponse(tool_calls=[tool_call("peek", label=request.inputs[0].content)])
            return ModelResponse(content="done")

    agent = Agent("owner", PeekModel(), tools=[peek])

    async def job(label: str) -> None:
        async with agent.task(f"task {label}"):
            await asyncio.sleep(0)
            await agent.ask(label)

    await asyncio.gather(*(job(str(i)) for i in range(5)))
    assert seen == {str(i): f"task {i}" for i in range(5)}


async def test_task_mirrors_into_a_real_hub_through_the_agent_client(hub):
    from ag2net.client.hub_client import HubClient
    from ag2net.identity import Passport

    @tool
    async def report(percent: int, task: TaskInject) -> str:
        """Report progress on the active task."""
        await task.progress({"percent": percent})
        return "ok"

    hc = HubClient.local(hub)
    await hc.open()
    agent = Agent("worker", ScriptedModel(tool_call("report", percent=40), "done"), tools=[report])
    client = await hc.register(agent, Passport(name="worker"), attach_plugin=False)
    assert agent.task_sink is client
    async with agent.task("job", capability="summary") as task:
        await agent.ask("go")
        running = hub.lookup_task(task.task_id)
        assert (running.state, running.progress, running.owner_id) == (
            TaskState.RUNNING,
            {"percent": 40},
            client.agent_id,
        )
    assert hub.lookup_task(task.task_id).state is TaskState.COMPLETED
    with pytest.raises(RuntimeError):
        async with agent.task("doomed") as doomed:
            raise RuntimeError("gave up")
    assert (hub.lookup_task(doomed.task_id).state, hub.lookup_task(doomed.task_id).error) == (
        TaskState.FAILED,
        "gave up",
    )

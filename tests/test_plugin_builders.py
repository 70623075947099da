"""NetworkPlugin's ag2 builder methods with real behaviour in default-handler turns (ScriptedModel):
a plugin tool is offered like the network tools, prompt functions join the system prompt, observers see the
turn's events, middleware wraps turns / model calls / tool executions, policies reshape each model call,
the human-input hook answers tools; plus ``NetworkContextPolicy``, ``ClientTask`` and ``NetworkClient``."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest

from ag2net import (
    CHANNEL_DEP,
    EV_TEXT,
    Agent,
    BaseMiddleware,
    ClientTask,
    HubClient,
    HumanInputRequest,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NetworkClient,
    NetworkContextPolicy,
    NetworkPlugin,
    NotFoundError,
    Passport,
    ScriptedModel,
    TaskMetadata,
    TaskSpec,
    TaskState,
    TextInput,
    Tool,
    ToolCallEvent,
    ToolResultEvent,
    TurnContextInject,
    tool_call,
)

NETWORK_TOOLS = ["delegate", "peers", "channels", "tasks", "context"]
_askers = itertools.count(1)


pytestmark = pytest.mark.hub(store="memory", invite_ack_timeout=3)


@pytest.fixture
async def hc(hub):
    client = HubClient.local(hub)
    yield client
    await client.close()


async def one_turn(hc: HubClient, agent_name: str, text: str = "hello") -> tuple[Any, str]:
    """A human asks ``agent_name`` in a consulting channel; returns (the agent's reply envelope, channel id)."""
    me = await hc.register_human(Passport(name=f"asker-{next(_askers)}", kind="human"))
    ch = await me.open(type="consulting", target=agent_name)
    await me.send(ch.channel_id, text)
    agent_id = hc.find_agent_id(agent_name)
    reply = await me.next_envelope(
        predicate=lambda e: e.event_type == EV_TEXT and e.sender_id == agent_id, timeout=5
    )
    return reply, ch.channel_id


def result_of(call: Any, tool_name: str) -> ToolResultEvent:
    (found,) = [e for e in call.history if isinstance(e, ToolResultEvent) and e.name == tool_name]
    return found


async def test_a_plugin_tool_is_offered_and_run_like_the_network_tools(hc):
    model = ScriptedModel(tool_call("weather", city="Paris"), "It is sunny in Paris.")
    client = await hc.register(Agent("forecaster", model), attach_plugin=False)
    plugin = NetworkPlugin(client)
    threads: list[int] = []

    @plugin.tool
    def weather(city: str) -> str:
        """Today's weather for a city."""
        threads.append(threading.get_ident())
        return f"sunny in {city}"

    assert isinstance(weather, Tool) and weather.name == "weather"
    plugin.apply(client.agent)
    reply, _ = await one_turn(hc, "forecaster")
    assert reply.event_data["text"] == "It is sunny in Paris."
    first = model.calls[0]
    assert first.tool_names == [*NETWORK_TOOLS, "weather", "say"]  # then the adapter's say
    schema = next(t for t in first.tools if t["function"]["name"] == "weather")["function"]
    assert schema["description"] == "Today's weather for a city."
    assert schema["parameters"]["required"] == ["city"]
    assert result_of(model.calls[1], "weather").result == "sunny in Paris"
    assert threads and threads[0] != threading.get_ident()  # a plain function ran in a worker thread


async def test_tool_options_schema_name_no_thread_and_late_additions(hc):
    model = ScriptedModel(
        [tool_call("lookup", q="ag2"), tool_call("late_tool")],
        "done",
    )
    client = await hc.register(Agent("librarian", model))  # attach_plugin=True: the network tools are there
    plugin = NetworkPlugin(client)
    plugin.apply(client.agent)  # a second plugin on the same agent adds nothing twice
    assert [t.name for t in client.agent.tools] == NETWORK_TOOLS
    loop_thread: list[int] = []

    @plugin.tool(
        name="lookup",
        description="Find a book.",
        schema={"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        sync_to_thread=False,
    )
    def find_book(**kwargs: Any) -> str:
        loop_thread.append(threading.get_ident())
        return f"found {kwargs['q']}"

    def late_tool() -> str:
        return "late result"

    plugin.add_tool(late_tool)  # a plain function, added after apply: reaches the agent anyway
    with pytest.raises(ValueError, match="already offers a tool named 'lookup'"):
        plugin.add_tool(Tool("lookup", "", {"type": "object", "properties": {}}, lambda: ""))
    with pytest.raises(ValueError, match="already offers a tool named 'peers'"):
        plugin.tool(lambda: "", name="peers")

    await one_turn(hc, "librarian")
    first = model.calls[0]
    assert first.tool_names == [*NETWORK_TOOLS, "lookup", "late_tool", "say"]
    lookup = next(t for t in first.tools if t["function"]["name"] == "lookup")["function"]
    assert lookup["description"] == "Find a book."
    assert lookup["parameters"]["properties"] == {"q": {"type": "string"}}
    second = model.calls[1]
    assert result_of(second, "lookup").result == "found ag2"
    assert result_of(second, "late_tool").result == "late result"
    assert loop_thread == [threading.get_ident()]  # sync_to_thread=False: run on the event loop's thread


async def test_prompt_functions_join_the_system_prompt_every_turn(hc):
    model = ScriptedModel("one", "two")
    client = await hc.register(Agent("prompted", model, system_prompt="You are helpful."))
    plugin = NetworkPlugin(client)
    counter = {"n": 0}

    @plugin.prompt
    def turn_number() -> str:
        counter["n"] += 1
        return f"This is turn {counter['n']}."

    @plugin.prompt()
    async def where(context) -> str:
        return f"You are answering in channel {context.dependencies[CHANNEL_DEP].channel_id}."

    assert turn_number.__name__ == "turn_number"  # the decorator returns the function
    plugin.prompt(lambda: None)  # contributes nothing
    plugin.apply(client.agent)
    _, cid1 = await one_turn(hc, "prompted")
    _, cid2 = await one_turn(hc, "prompted")
    prefix = f"You are prompted (agent_id: {client.agent_id})."
    assert model.calls[0].system == "\n\n".join(
        [prefix, "You are helpful.", "This is turn 1.", f"You are answering in channel {cid1}."]
    )
    assert model.calls[1].system.endswith(f"This is turn 2.\n\nYou are answering in channel {cid2}.")


async def test_observers_see_the_turn_events_in_order(hc):
    model = ScriptedModel(tool_call("echo", text="x"), "final answer")
    client = await hc.register(Agent("watched", model), attach_plugin=False)
    plugin = NetworkPlugin(client)
    everything: list[str] = []
    calls: list[str] = []
    responses: list[ModelResponse] = []

    @plugin.tool
    async def echo(text: str) -> str:
        return text

    plugin.observer(None, lambda e: everything.append(type(e).__name__))

    @plugin.observer(ToolCallEvent | ToolResultEvent)
    def tool_traffic(event) -> None:
        calls.append(f"{type(event).__name__}:{event.name}")

    async def on_response(event) -> None:
        responses.append(event)

    assert plugin.observer(ModelResponse, on_response) is on_response

    def broken(event) -> None:
        raise RuntimeError("observer bug")

    plugin.add_observer(broken)  # an observer that raises does not stop the turn
    plugin.apply(client.agent)
    reply, _ = await one_turn(hc, "watched", "please echo")
    assert reply.event_data["text"] == "final answer"
    assert everything == [
        "ModelRequest",
        "ModelResponse",
        "ToolCallEvent",
        "ToolResultEvent",
        "ModelResponse",
        "ModelMessage",
    ]
    assert calls == ["ToolCallEvent:echo", "ToolResultEvent:echo"]
    assert [r.content for r in responses] == [None, "final answer"]
    with pytest.raises(TypeError, match="observer condition"):
        plugin.observer(42)


class Recorder(BaseMiddleware):
    """Records the order hooks are entered and left, under a label."""

    log: list[str] = []
    label = "?"

    async def on_turn(self, call_next, event, context):
        self.log.append(f"{self.label}:turn>")
        out = await call_next(event, context)
        self.log.append(f"{self.label}:turn<")
        return out

    async def on_llm_call(self, call_next, events, context):
        self.log.append(f"{self.label}:llm")
        return await call_next(events, context)

    async def on_tool_execution(self, call_next, event, context):
        self.log.append(f"{self.label}:tool {event.name}")
        result = await call_next(event, context)
        return ToolResultEvent(result.parent_id, result.name, result.result.replace("secret", "[redacted]"))


async def test_middleware_wraps_turn_model_calls_and_tools_in_order(hc):
    model = ScriptedModel(tool_call("vault"), "ok")
    client = await hc.register(Agent("wrapped", model), attach_plugin=False)
    plugin = NetworkPlugin(client)
    log: list[str] = []
    made: list[tuple[Any, Any]] = []

    def labelled(label: str):
        class Layer(Recorder):
            def __init__(self, event, context):
                super().__init__(event, context)
                made.append((event, context))

        Layer.log = log
        Layer.label = label
        return Layer

    @plugin.tool
    async def vault() -> str:
        return "the secret is 42"

    assert plugin.add_middleware(labelled("inner")) is plugin
    assert plugin.insert_middleware(labelled("outer")) is plugin
    plugin.apply(client.agent)
    await one_turn(hc, "wrapped")
    assert log == [
        "outer:turn>",
        "inner:turn>",
        "outer:llm",
        "inner:llm",
        "outer:tool vault",
        "inner:tool vault",
        "outer:llm",
        "inner:llm",
        "inner:turn<",
        "outer:turn<",
    ]
    # one instance per middleware per turn, made with the turn's request and context
    assert len(made) == 2 and isinstance(made[0][0], ModelRequest)
    assert made[0][0].parts == [TextInput("hello")]
    assert made[0][1].agent is client.agent
    # the model saw the tool result as the middleware rewrote it
    assert result_of(model.calls[1], "vault").result == "the [redacted] is 42"


async def test_middleware_can_answer_without_the_model(hc):
    model = ScriptedModel()  # an empty script: any model call would fail

    class CannedAnswer(BaseMiddleware):
        async def on_llm_call(self, call_next, events, context):
            return ModelResponse(content="answered by middleware")

    client = await hc.register(Agent("canned", model), attach_plugin=False)
    NetworkPlugin(client).add_middleware(CannedAnswer).apply(client.agent)
    reply, _ = await one_turn(hc, "canned")
    assert reply.event_data["text"] == "answered by middleware"
    assert model.calls == []


async def test_tool_middleware_option_wraps_only_that_tool(hc):
    model = ScriptedModel([tool_call("guarded", n=1), tool_call("open_tool")], "ok")
    client = await hc.register(Agent("guard", model), attach_plugin=False)
    plugin = NetworkPlugin(client)
    seen: list[str] = []

    async def deny(call_next, event, context):
        seen.append(event.name)
        assert context is not None and context.agent is client.agent
        return ToolResultEvent(event.id, event.name, "Error: denied by policy", True)

    @plugin.tool(middleware=[deny])
    def guarded(n: int) -> str:
        raise AssertionError("must not run")

    @plugin.tool
    def open_tool() -> str:
        return "ran"

    plugin.apply(client.agent)
    await one_turn(hc, "guard")
    assert seen == ["guarded"]
    second = model.calls[1]
    assert result_of(second, "guarded").result == "Error: denied by policy"
    assert result_of(second, "open_tool").result == "ran"


async def test_policies_reshape_every_model_call(hc):
    model = ScriptedModel(tool_call("noop"), "done")
    client = await hc.register(Agent("policed", model, system_prompt="Base."))
    plugin = NetworkPlugin(client)
    seen_prompts: list[list[str]] = []

    class OnlyTheTurn:
        """Drops the projected history (keeps this turn's events) and adds a rule to the prompt."""

        async def apply(self, prompts, events, context):
            seen_prompts.append(list(prompts))
            turn = [e for e in events if any(e is t for t in context.events)]
            return [*prompts, "Answer briefly."], turn

    @plugin.tool
    async def noop() -> str:
        return "nothing"

    assert plugin.add_policy(OnlyTheTurn()) is plugin
    plugin.add_policy(NetworkContextPolicy(client))  # the prefix is already there: not added twice
    plugin.apply(client.agent)
    me = await hc.register_human(Passport(name="policy-asker", kind="human"))
    ch = await me.open(type="conversation", target="policed")
    await me.send(ch.channel_id, "earlier message")
    await me.next_envelope(
        predicate=lambda e: e.event_type == EV_TEXT and e.sender_id == client.agent_id, timeout=5
    )
    model.add_turns("second answer")
    await me.send(ch.channel_id, "now")
    await me.next_envelope(
        predicate=lambda e: e.event_type == EV_TEXT and e.sender_id == client.agent_id, timeout=5
    )
    prefix = f"You are policed (agent_id: {client.agent_id})."
    for call in model.calls:
        assert call.system == f"{prefix}\n\nBase.\n\nAnswer briefly."
        assert call.prior == 0  # the projected history was dropped by the policy
    last = model.calls[-1]
    assert [type(e) for e in last.history] == [ModelRequest]
    assert last.history[0].parts == [TextInput("now")]
    assert seen_prompts[0] == [prefix, "Base."]  # policies see the prompt pieces
    assert isinstance(model.calls[1].history[-1], ToolResultEvent)  # tool rounds are policed too


async def test_network_context_policy_names_an_agent_registered_without_the_plugin(hc):
    model = ScriptedModel("hi")
    client = await hc.register(Agent("bare", model, system_prompt="Be kind."), attach_plugin=False)
    policy = NetworkContextPolicy(client)
    assert policy.name == "network_context"
    prompts, events = await policy.apply(["Be kind."], ["e"], None)
    assert prompts == [f"You are bare (agent_id: {client.agent_id}).", "Be kind."] and events == ["e"]
    client.agent.hooks.policies.append(policy)
    await one_turn(hc, "bare")
    assert model.calls[0].system == f"You are bare (agent_id: {client.agent_id}).\n\nBe kind."
    assert model.calls[0].tool_names == ["say"]  # the policy adds the name, not the network tools


async def test_hitl_hook_answers_a_tool_asking_a_human(hc):
    model = ScriptedModel(tool_call("confirm", question="Ship it?"), "shipping")
    client = await hc.register(Agent("shipper", model), attach_plugin=False)
    plugin = NetworkPlugin(client)
    asked: list[HumanInputRequest] = []

    @plugin.tool
    async def confirm(question: str, context: TurnContextInject) -> str:
        answer = await context.input(question, timeout=5)
        return f"human said {answer}"

    async def hook(request: HumanInputRequest):
        asked.append(request)
        await asyncio.sleep(0)
        return ModelMessage("yes")  # anything with a string `content` is an answer

    assert plugin.hitl_hook(hook) is hook
    plugin.apply(client.agent)
    await one_turn(hc, "shipper")
    assert [(r.content, r.timeout) for r in asked] == [("Ship it?", 5)]
    assert result_of(model.calls[1], "confirm").result == "human said yes"
    confirm_schema = next(t for t in model.calls[0].tools if t["function"]["name"] == "confirm")
    assert list(confirm_schema["function"]["parameters"]["properties"]) == ["question"]


async def test_without_a_hitl_hook_the_tool_gets_a_clear_error(hc):
    model = ScriptedModel(tool_call("confirm"), "ok")
    client = await hc.register(Agent("nohook", model), attach_plugin=False)
    plugin = NetworkPlugin(client)

    @plugin.tool
    async def confirm(context: TurnContextInject) -> str:
        return await context.input("Sure?")

    plugin.apply(client.agent)
    await one_turn(hc, "nohook")
    result = result_of(model.calls[1], "confirm")
    assert result.is_error
    assert "has no human-input hook" in result.result and "plugin.hitl_hook" in result.result


async def test_a_hitl_hook_that_does_not_answer_in_time_fails_the_tool_call(hc):
    model = ScriptedModel(tool_call("confirm"), "ok")
    client = await hc.register(Agent("slowhuman", model), attach_plugin=False)
    plugin = NetworkPlugin(client)

    @plugin.tool
    async def confirm(context: TurnContextInject) -> str:
        return await context.input("Sure?", timeout=0.05)

    @plugin.hitl_hook
    async def never(request: HumanInputRequest) -> str:
        await asyncio.sleep(30)
        return "too late"

    plugin.apply(client.agent)
    await one_turn(hc, "slowhuman")
    result = result_of(model.calls[1], "confirm")
    assert result.is_error and "no human answered 'Sure?' within 0.05s" in result.result


async def test_client_task_reads_the_hub(hc):
    client = await hc.register(Agent("owner", ScriptedModel()))
    md = TaskMetadata("t-1", client.agent_id, TaskSpec("index"), TaskState.RUNNING)
    await hc.observe_task(md)
    task = ClientTask(metadata=md, client=client)
    assert (task.task_id, task.owner_id, task.state, task.metadata) == (
        "t-1",
        client.agent_id,
        TaskState.RUNNING,
        md,
    )
    await hc.update_task("t-1", state=TaskState.COMPLETED, result="42 files")
    fresh = await task.info()
    assert fresh.state == TaskState.COMPLETED and fresh.result == "42 files"
    assert task.state == TaskState.COMPLETED and task.metadata is fresh
    assert (
        await ClientTask(metadata=md, client=hc).info()
    ).state == TaskState.COMPLETED  # a HubClient works too
    gone = ClientTask(
        metadata=TaskMetadata("t-404", client.agent_id, TaskSpec("x"), TaskState.RUNNING), client=client
    )
    with pytest.raises(NotFoundError):
        await gone.info()
    with pytest.raises(TypeError, match="must be a TaskMetadata"):
        ClientTask(metadata=md.to_dict(), client=client)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        ClientTask(md, client)  # type: ignore[misc]  # keyword-only, as in ag2


async def test_agent_and_human_clients_are_network_clients(hc):
    agent_client = await hc.register(Agent("nc-agent", ScriptedModel()))
    human = await hc.register_human(Passport(name="nc-human", kind="human"))
    assert isinstance(agent_client, NetworkClient)
    assert isinstance(human, NetworkClient)
    assert not isinstance(hc, NetworkClient)

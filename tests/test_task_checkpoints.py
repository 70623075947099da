"""Task checkpoints (ops ``checkpoint_task`` / ``read_task_checkpoint``), ``HubBackedCheckpointStore`` and
``TaskMirror`` (issue 14, defect 5): in-process, durable across a restart on real SQLite, and over a real
WebSocket on 127.0.0.1 with ag2 1.2.1's access rule."""

from __future__ import annotations

import pytest
from support import quiet

from ag2net import (
    AccessDeniedError,
    Agent,
    HubBackedCheckpointStore,
    HubClient,
    Passport,
    ProtocolError,
    ScriptedModel,
    TaskMirror,
    TaskState,
)
from ag2net.hub import Hub
from ag2net.hub.checkpoints import checkpoint_writers
from ag2net.hub.ops import OPS
from ag2net.server import classified_ops, serve_ws
from ag2net.store import SqliteStore
from ag2net.tasks import TaskMetadata, TaskSpec

OPERATOR = "op-secret-ckpt"


class TaskEvents:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict]] = []

    async def on_task_event(self, task_id: str, kind: str, payload: dict) -> None:
        self.events.append((task_id, kind, payload))


# --- in-process ------------------------------------------------------------------------------------------


def test_the_two_ops_exist_under_ag2s_names_and_have_a_wire_rule():
    assert {"checkpoint_task", "read_task_checkpoint"} <= set(OPS)
    assert {"checkpoint_task", "read_task_checkpoint"} <= classified_ops()


async def test_last_write_wins_and_an_unknown_task_reads_none(hc):
    assert await hc.read_task_checkpoint("t-1") is None
    state = {"step": 1, "notes": ["a"]}
    await hc.checkpoint_task("t-1", state)
    state["step"] = 99  # the hub keeps what was written, not the caller's object
    assert await hc.read_task_checkpoint("t-1") == {"step": 1, "notes": ["a"]}
    await hc.checkpoint_task("t-1", {"step": 2})
    assert await hc.read_task_checkpoint("t-1") == {"step": 2}
    assert await hc.read_task_checkpoint("t-2") is None


async def test_bad_input_is_refused_with_the_field_named(hc):
    with pytest.raises(ProtocolError, match=r"params\.state must be a JSON object"):
        await hc.checkpoint_task("t-1", ["not", "a", "dict"])
    with pytest.raises(ProtocolError, match="not JSON-serialisable"):
        await hc.checkpoint_task("t-1", {"when": object()})
    with pytest.raises(ProtocolError, match="task_id"):
        await hc.checkpoint_task("../etc", {"step": 1})
    assert await hc.read_task_checkpoint("t-1") is None


async def test_hub_backed_store_over_a_hub_and_over_a_hub_client(hub, hc):
    direct = HubBackedCheckpointStore(hub)
    remote = HubBackedCheckpointStore(hc)
    await direct.write("job-1", {"cursor": 10})
    assert await remote.read("job-1") == {"cursor": 10}
    await remote.write("job-1", {"cursor": 11})
    assert await direct.read("job-1") == {"cursor": 11}
    assert await direct.read("job-2") is None


async def test_checkpoints_survive_a_restart_on_sqlite(tmp_path):
    path = tmp_path / "hub.db"
    hub = await Hub.open(SqliteStore(path), **quiet())
    client = HubClient.local(hub)
    await HubBackedCheckpointStore(client).write("resume-me", {"page": 7, "seen": ["x", "y"]})
    await client.close()
    await hub.close()

    hub = await Hub.open(SqliteStore(path), **quiet())
    try:
        assert await HubBackedCheckpointStore(hub).read("resume-me") == {"page": 7, "seen": ["x", "y"]}
    finally:
        await hub.close()


# --- TaskMirror --------------------------------------------------------------------------------------------


def test_task_mirror_needs_a_hub_or_a_client():
    with pytest.raises(TypeError, match="hub_client="):
        TaskMirror(owner_id="x")


async def test_task_mirror_forwards_an_agents_task_and_records_its_capability(hub, hc):
    bot = Agent("bot", ScriptedModel("hi"))
    client = await hc.register(bot, attach_plugin=False)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ch = await client.open(type="conversation", target=[ana.agent_id])
    mirror = TaskMirror(hub_client=hc, owner_id=client.agent_id, channel_id=ch.channel_id)
    previous = bot.task_sink
    ids = mirror.attach(bot)
    assert bot.task_sink is mirror
    async with bot.task("summarise", capability="summaries") as task:
        seen = hub.lookup_task(task.task_id)
        assert seen.owner_id == client.agent_id
        assert seen.channel_id == ch.channel_id
        assert seen.state == TaskState.RUNNING
        await task.progress({"done": 1})
    done = hub.lookup_task(task.task_id)
    assert done.state == TaskState.COMPLETED
    assert done.progress == {"done": 1}
    assert hub.lookup_resume(client.agent_id).observed["summaries"].completed == 1
    mirror.detach(bot, ids)
    assert bot.task_sink is previous


async def test_task_mirror_failures_never_reach_the_agent_and_are_reported(hub):
    listener = TaskEvents()
    hub.register_listener(listener)
    mirror = TaskMirror(hub=hub, owner_id="nobody-registered")  # the hub refuses to observe its tasks
    bot = Agent("bot", ScriptedModel("hi"))
    async with bot.task("work", sink=mirror) as task:
        await task.progress({"step": 1})  # the hub never saw the task: ignored quietly
    assert task.state == TaskState.COMPLETED
    kinds = [(t, k) for t, k, _ in listener.events]
    assert kinds == [(task.task_id, "mirror_failed")]
    payload = listener.events[0][2]
    assert payload["op"] == "started"
    assert payload["owner_id"] == "nobody-registered"
    assert set(payload) == {"op", "owner_id", "channel_id", "exc_type", "exc_message"}


# --- over a real WebSocket ---------------------------------------------------------------------------------


@pytest.fixture
async def ws_hub(tmp_path):
    h = await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet())
    yield h
    await h.close()


@pytest.fixture
async def clients(ws_hub):
    made: list[HubClient] = []
    async with serve_ws(ws_hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:

        def make(**kwargs) -> HubClient:
            client = HubClient.connect(server.url(), rpc_timeout=10, **kwargs)
            made.append(client)
            return client

        yield make
        for client in made:
            await client.close()


async def test_over_the_wire_an_unobserved_tasks_checkpoint_belongs_to_its_first_writer(ws_hub, clients):
    a, b, op, anonymous = clients(), clients(), clients(operator_token=OPERATOR), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await b.register_human(Passport(name="eve", kind="human"))

    store = HubBackedCheckpointStore(a)
    await store.write("job-1", {"step": 1})
    assert await store.read("job-1") == {"step": 1}
    assert await checkpoint_writers(ws_hub, "job-1") == [ana.agent_id]
    await store.write("job-1", {"step": 2})

    with pytest.raises(AccessDeniedError, match="connection holds no writer of task 'job-1''s checkpoint"):
        await b.read_task_checkpoint("job-1")
    with pytest.raises(AccessDeniedError):
        await b.checkpoint_task("job-1", {"step": 666})
    with pytest.raises(AccessDeniedError, match="bound agent"):
        await anonymous.read_task_checkpoint("job-1")
    # Observing the id does not hand its checkpoint to another connection.
    eve = b.find_agent_id("eve")
    await b.observe_task(TaskMetadata("job-1", eve, TaskSpec(title="steal"), TaskState.RUNNING))
    with pytest.raises(AccessDeniedError):
        await b.read_task_checkpoint("job-1")
    # Operators may read any checkpoint; the stored one is the owner's last write.
    assert await op.read_task_checkpoint("job-1") == {"step": 2}
    with pytest.raises(AccessDeniedError):
        await op.checkpoint_task("job-1", {"step": 3})
    assert await ws_hub.store.get_meta("task_checkpoint/job-1") == '{"step":2}'


async def test_over_the_wire_an_observed_tasks_checkpoint_belongs_to_its_owner(ws_hub, clients):
    a, b = clients(), clients()
    ana = await a.register_human(Passport(name="ana", kind="human"))
    await b.register_human(Passport(name="eve", kind="human"))
    await a.observe_task(TaskMetadata("t-9", ana.agent_id, TaskSpec(title="write"), TaskState.RUNNING))
    await a.checkpoint_task("t-9", {"draft": "v1"})
    assert await a.read_task_checkpoint("t-9") == {"draft": "v1"}
    assert await checkpoint_writers(ws_hub, "t-9") is None  # the owner rule guards it, no claim needed
    with pytest.raises(AccessDeniedError, match="belongs to its owner"):
        await b.read_task_checkpoint("t-9")
    with pytest.raises(AccessDeniedError, match="belongs to its owner"):
        await b.checkpoint_task("t-9", {"draft": "vandalised"})
    with pytest.raises(ProtocolError, match="task_id"):
        await a.read_task_checkpoint("bad id with spaces")
    assert await a.read_task_checkpoint("t-9") == {"draft": "v1"}


async def test_a_reconnected_owner_reads_its_checkpoint_after_a_restart(tmp_path):
    path = tmp_path / "hub.db"
    hub = await Hub.open(SqliteStore(path), **quiet())
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
        a = HubClient.connect(server.url(), rpc_timeout=10)
        bot = await a.register(Agent("bot", ScriptedModel("hi")), attach_plugin=False)
        await a.checkpoint_task("long-job", {"offset": 4096})
        await a.close()
    await hub.close()

    hub = await Hub.open(SqliteStore(path), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
            stranger = HubClient.connect(server.url(), rpc_timeout=10)
            await stranger.register_human(Passport(name="eve", kind="human"))
            with pytest.raises(AccessDeniedError):
                await stranger.read_task_checkpoint("long-job")
            await stranger.close()
            again = HubClient.connect(server.url(), rpc_timeout=10)
            await again.attach(Agent("bot", ScriptedModel("hi")), "bot")
            assert again.find_agent_id("bot") == bot.agent_id
            assert await HubBackedCheckpointStore(again).read("long-job") == {"offset": 4096}
            await again.close()
    finally:
        await hub.close()

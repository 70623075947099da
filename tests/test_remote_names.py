"""A remote agent's model sees the same names an in-process agent's does.

A projection labels other participants' messages with their names (``[ana]: ...`` in a discussion) through
the client's ``name_for``, which cannot ask the hub. An agent connected over a socket and invited into a
channel by humans on other connections had seen none of their passports, so its model read their 32-hex
ids instead (found 2026-12-03). ``HubClient.learn_names`` now asks the hub for the participants' names
before a turn is projected, once per unknown id.
"""

from __future__ import annotations

import asyncio
import re

import pytest

from ag2net import Agent, HubClient, Passport, ScriptedModel, TransitionGraph
from ag2net.events import ModelRequest
from ag2net.server import serve_ws

pytestmark = pytest.mark.hub(store="memory")

HEX_ID = re.compile(r"\b[0-9a-f]{32}\b")


def texts(model: ScriptedModel, marker: str) -> list[str]:
    """The text parts of the last model call whose history or input mentions ``marker``."""
    for call in reversed(model.calls):
        parts = [p for ev in call.history if isinstance(ev, ModelRequest) for p in ev.parts]
        found = [getattr(p, "content", "") for p in parts]
        if any(marker in t for t in found):
            return found
    raise AssertionError(f"no model call mentions {marker!r}: {len(model.calls)} calls")


def count_names_for(client: HubClient) -> list[list[str]]:
    """Record each ``names_for`` the client asks (the ids of each call), passing it through."""
    asked: list[list[str]] = []
    names_for = client.names_for

    async def counting(agent_ids: list[str]) -> dict[str, str]:
        asked.append(list(agent_ids))
        return await names_for(agent_ids)

    client.names_for = counting  # type: ignore[method-assign]
    return asked


async def until(predicate, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


async def run_channel(kind: str, bot_name: str, ana, cy, bot_id: str, model: ScriptedModel) -> list[str]:
    """ana opens a ``kind`` channel with the bot (and cy where it takes three), ana and cy speak, then the
    bot's turn: the texts its model was given."""
    marker = f"{kind} for {bot_name}"
    if kind == "discussion":
        ch = await ana.open(type=kind, target=["cy", bot_name])
        await ana.send(ch.channel_id, f"first {marker}")
        await cy.send(ch.channel_id, f"then {marker}")
    elif kind == "workflow":
        graph = TransitionGraph.round_robin([ana.agent_id, cy.agent_id, bot_id])
        ch = await ana.open(type=kind, target=["cy", bot_name], knobs={"graph": graph.to_dict()})
        await ana.send(ch.channel_id, f"first {marker}")
        await cy.send(ch.channel_id, f"then {marker}")
    else:
        ch = await ana.open(type=kind, target=bot_name)
        await ana.send(ch.channel_id, f"first {marker}")
    calls = len(model.calls)
    await until(lambda: len(model.calls) > calls and any(marker in str(c.history) for c in model.calls))
    return texts(model, marker)


@pytest.mark.parametrize("kind", ["discussion", "workflow", "conversation", "consulting"])
async def test_a_remote_agent_reads_the_names_an_in_process_one_does(hub, kind):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        remote = HubClient.connect(srv.url(), rpc_timeout=10)
        local = HubClient.local(hub)
        try:
            far_model = ScriptedModel("noted", loop=True)
            near_model = ScriptedModel("noted", loop=True)
            far = await remote.register(Agent("far", far_model), attach_plugin=False)
            near = await local.register(Agent("near", near_model), attach_plugin=False)
            ana = await local.register_human(Passport(name="ana", kind="human"))
            cy = await local.register_human(Passport(name="cy", kind="human"))

            asked = count_names_for(remote)

            seen_far = await run_channel(kind, "far", ana, cy, far.agent_id, far_model)
            seen_near = await run_channel(kind, "near", ana, cy, near.agent_id, near_model)
            # the same texts but for the bot's own name in the marker
            assert [t.replace("far", "BOT") for t in seen_far] == [
                t.replace("near", "BOT") for t in seen_near
            ]
            assert not any(HEX_ID.search(t) for t in seen_far), seen_far
            if kind in ("discussion", "workflow"):
                assert any(t.startswith("[ana]: ") for t in seen_far), seen_far
                assert any(t.startswith("[cy]: ") for t in seen_far), seen_far

            # a second turn in a new channel of the same people asks the hub nothing more
            before = len(asked)
            await run_channel(kind, "far", ana, cy, far.agent_id, far_model)
            assert len(asked) == before
            assert all(far.agent_id not in ids for ids in asked)  # its own name it knew
            for ids in asked:
                assert set(ids) <= {ana.agent_id, cy.agent_id}
        finally:
            await remote.close()


async def test_an_in_process_client_asks_nothing(hub):
    local = HubClient.local(hub)
    ana = await local.register_human(Passport(name="ana", kind="human"))
    asked = count_names_for(local)
    await local.learn_names([ana.agent_id, "f" * 32])
    assert asked == []
    assert local.name_for(ana.agent_id) == "ana"


async def test_an_id_the_hub_cannot_name_is_asked_once(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        remote = HubClient.connect(srv.url(), rpc_timeout=10)
        try:
            await remote.register_human(Passport(name="ana", kind="human"))
            ghost = "f" * 32
            asked = count_names_for(remote)
            await remote.learn_names([ghost, ghost])
            await remote.learn_names([ghost])
            assert asked == [[ghost]]
            assert remote.name_for(ghost) == ghost
        finally:
            await remote.close()


async def test_a_turn_goes_on_when_the_names_cannot_be_had(hub):
    """The names are labels: a hub that refuses ``names_for`` (a policy, a timeout) leaves the ids in the
    projection, and the agent still answers."""
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        remote = HubClient.connect(srv.url(), rpc_timeout=10)
        local = HubClient.local(hub)
        try:
            model = ScriptedModel("noted", loop=True)
            await remote.register(Agent("far", model), attach_plugin=False)
            ana = await local.register_human(Passport(name="ana", kind="human"))
            await local.register_human(Passport(name="cy", kind="human"))

            async def refusing(agent_ids: list[str]) -> dict[str, str]:
                raise TimeoutError("names_for timed out")

            remote.names_for = refusing  # type: ignore[method-assign]
            ch = await ana.open(type="discussion", target=["far", "cy"])
            await ana.send(ch.channel_id, "first without names")
            await until(lambda: any("first without names" in str(c.history) for c in model.calls))
            seen = texts(model, "first without names")
            assert any(t == f"[{ana.agent_id}]: first without names" for t in seen), seen
        finally:
            await remote.close()

"""Turn records are private (issue 9, item 10; SPEC decision 22).

The hub assigns turn ids, so no client can overwrite or erase another agent's record by naming its id;
only the owning agent's connection and operators read them. The embedded workbench is the operator of
its own hub; attached over the wire it sees other agents' turns only with the operator token, and says
so plainly when it has none. At the op layer (in-process) and over real WebSockets on 127.0.0.1.
"""

from __future__ import annotations

import pytest
from support import quiet

from ag2net import AccessDeniedError, HubClient, Passport
from ag2net.client.turns import TurnRecord
from ag2net.hub import Hub
from ag2net.server import serve_ws
from tui.source import HubSource
from tui.widgets.projected_view import ProjectedView

OPERATOR = "op-secret-9"


def turn(channel_id: str, agent_id: str, secret: str, turn_id: str = "") -> TurnRecord:
    record = TurnRecord(channel_id, agent_id, "", system_prompt=secret, reply=f"reply of {secret}")
    if turn_id:
        record.turn_id = turn_id
    return record


async def non_operator(hub: Hub) -> HubClient:
    """An in-process client whose endpoint is not an operator (as a remote connection without the role)."""
    client = HubClient.local(hub)
    await client.open()
    client.link.endpoint.operator = False
    return client


async def two_agents(a: HubClient, b: HubClient):
    """alpha on connection a, beta on connection b, in one channel, one turn record each."""
    alpha = await a.register_human(Passport(name="alpha", kind="human"))
    beta = await b.register_human(Passport(name="beta", kind="human"))
    ch = await alpha.open(type="conversation", target="beta")
    await a.record_turn(turn(ch.channel_id, alpha.agent_id, "alpha's system prompt"))
    await b.record_turn(turn(ch.channel_id, beta.agent_id, "beta's system prompt"))
    return alpha, beta, ch.channel_id


def secrets(records: list[TurnRecord]) -> list[str]:
    return sorted(r.system_prompt for r in records)


# --- the hub assigns ids ---


async def test_the_hub_assigns_turn_ids_so_a_record_cannot_be_overwritten(hub, hc):
    alpha = await hc.register_human(Passport(name="alpha", kind="human"))
    beta = await hc.register_human(Passport(name="beta", kind="human"))
    ch = await alpha.open(type="conversation", target="beta")
    record = turn(ch.channel_id, alpha.agent_id, "first").to_dict()
    record["turn_id"] = "chosen-by-the-client"
    first = await hub.record_turn(record)
    assert first != "chosen-by-the-client"
    # a second write naming the first's id (and another agent) is a new record, not an upsert
    again = turn(ch.channel_id, beta.agent_id, "").to_dict()
    again["turn_id"] = first
    second = await hub.record_turn(again)
    assert second != first
    stored = {r["turn_id"]: r for r in await hub.list_turns(channel_id=ch.channel_id)}
    assert set(stored) == {first, second}
    assert stored[first]["agent_id"] == alpha.agent_id and stored[first]["system_prompt"] == "first"
    with pytest.raises(Exception, match="not registered"):
        await hub.record_turn(turn(ch.channel_id, "nobody", "x").to_dict())


# --- the op layer: the caller's own agents, unless operator ---


async def test_the_op_layer_serves_only_the_callers_own_turn_records(hub):
    a, b = await non_operator(hub), await non_operator(hub)
    operator = HubClient.local(hub)  # the hub's own process: an operator
    try:
        alpha, beta, cid = await two_agents(a, b)
        assert secrets(await a.list_turns(channel_id=cid)) == ["alpha's system prompt"]
        assert secrets(await b.list_turns(channel_id=cid)) == ["beta's system prompt"]
        assert secrets(await a.list_turns()) == ["alpha's system prompt"]
        with pytest.raises(AccessDeniedError, match=f"turn records of agent '{beta.agent_id}' are private"):
            await a.list_turns(channel_id=cid, agent_id=beta.agent_id)
        with pytest.raises(AccessDeniedError, match="written only by its own agent's connection"):
            await a.record_turn(turn(cid, beta.agent_id, "forged"))
        # naming beta's record id writes a new record of alpha's: beta's is untouched
        [beta_record] = await b.list_turns(channel_id=cid)
        await a.record_turn(turn(cid, alpha.agent_id, "", turn_id=beta_record.turn_id))
        [still] = await b.list_turns(channel_id=cid)
        assert still.to_dict() == beta_record.to_dict()
        assert len(await a.list_turns(channel_id=cid)) == 2
        # operators read everyone's
        assert secrets(await operator.list_turns(channel_id=cid)) == [
            "",
            "alpha's system prompt",
            "beta's system prompt",
        ]
        assert secrets(await operator.list_turns(agent_id=beta.agent_id)) == ["beta's system prompt"]
    finally:
        for client in (a, b, operator):
            await client.close()


async def test_a_turn_record_must_be_in_a_channel_its_agent_is_in(hub):
    a = await non_operator(hub)
    try:
        alpha = await a.register_human(Passport(name="alpha", kind="human"))
        await a.register_human(Passport(name="beta", kind="human"))
        gamma = await a.register_human(Passport(name="gamma", kind="human"))
        ch = await alpha.open(type="conversation", target="beta")
        with pytest.raises(AccessDeniedError, match=f"does not participate in channel '{ch.channel_id}'"):
            await a.record_turn(turn(ch.channel_id, gamma.agent_id, "x"))
        assert await hub.list_turns() == []
    finally:
        await a.close()


# --- over real WebSockets ---


@pytest.fixture
async def ws_hub():
    hub = await Hub.open(None, **quiet())
    async with serve_ws(hub, "127.0.0.1", 0, operator_token=OPERATOR) as server:
        yield hub, server
    await hub.close()


async def test_over_the_wire_turn_records_are_private_to_their_connection(ws_hub):
    hub, server = ws_hub
    a = HubClient.connect(server.url(), rpc_timeout=10)
    b = HubClient.connect(server.url(), rpc_timeout=10)
    operator = HubClient.connect(server.url(), operator_token=OPERATOR, rpc_timeout=10)
    try:
        await operator.open()
        alpha, beta, cid = await two_agents(a, b)
        # a co-participant does not see the other's system prompt or history
        assert secrets(await b.list_turns(channel_id=cid)) == ["beta's system prompt"]
        assert secrets(await a.list_turns(channel_id=cid)) == ["alpha's system prompt"]
        with pytest.raises(AccessDeniedError, match="private to its own connection and operators"):
            await b.list_turns(channel_id=cid, agent_id=alpha.agent_id)
        with pytest.raises(AccessDeniedError):
            await b.list_turns(agent_id=alpha.agent_id)
        # beta cannot overwrite or erase alpha's record by naming its id
        [alpha_record] = await a.list_turns(channel_id=cid)
        await b.record_turn(turn(cid, beta.agent_id, "", turn_id=alpha_record.turn_id))
        [still] = await a.list_turns(channel_id=cid)
        assert still.to_dict() == alpha_record.to_dict()
        with pytest.raises(AccessDeniedError):
            await b.record_turn(turn(cid, alpha.agent_id, "forged"))
        # the operator reads every record
        assert secrets(await operator.list_turns(channel_id=cid)) == [
            "",
            "alpha's system prompt",
            "beta's system prompt",
        ]
        # a non-operator preview of someone else's turn says the records are private (and works)
        preview = await b.preview_turn(cid, alpha.agent_id)
        assert preview.turns_private and preview.system_prompt == ""
        assert not (await operator.preview_turn(cid, alpha.agent_id)).turns_private
    finally:
        for client in (a, b, operator):
            await client.close()


# --- the workbench's Agent view ---


async def test_the_workbench_keeps_its_agent_view_when_it_is_the_operator(ws_hub):
    hub, server = ws_hub
    owner = HubClient.connect(server.url(), rpc_timeout=10)
    attached = HubClient.connect(server.url(), rpc_timeout=10)  # --connect without --operator-token
    attached_operator = HubClient.connect(server.url(), operator_token=OPERATOR, rpc_timeout=10)
    embedded = HubClient.local(hub)  # the workbench on its own hub
    try:
        alpha = await owner.register_human(Passport(name="alpha", kind="human"))
        ana = await attached.register_human(Passport(name="ana", kind="human"))
        ch = await alpha.open(type="conversation", target="ana")
        await owner.record_turn(turn(ch.channel_id, alpha.agent_id, "alpha's system prompt"))
        op_human = await attached_operator.register_human(Passport(name="olga", kind="human"))
        me = await embedded.register_human(Passport(name="emma", kind="human"))
        for client, human in ((attached_operator, op_human), (embedded, me)):
            data = await HubSource(client, human).load_projection(ch.channel_id, alpha.agent_id, None)
            assert data.turn is not None and data.turn.system_prompt == "alpha's system prompt"
            assert not data.preview.turns_private
        data = await HubSource(attached, ana).load_projection(ch.channel_id, alpha.agent_id, None)
        assert data.turn is None and data.preview.turns_private
        text = ProjectedView()._turn_renderable(data).plain
        assert "private" in text and "--operator-token" in text
    finally:
        for client in (owner, attached, attached_operator, embedded):
            await client.close()

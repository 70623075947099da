"""``HubClient.attach`` as in ag2.network 1.2.1 (issue 14, defect 6): its keywords, the fallback to
``register`` for a name the hub does not know, the credential taken from ``passport``, and
``since_envelope_id`` resending what a remote identity missed. In-process and over a real WebSocket."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import quiet

from ag2net import EV_TEXT, Agent, AuthError, HubClient, NotFoundError, Passport, ScriptedModel
from ag2net.hub import Hub
from ag2net.hub.local import LocalLink
from ag2net.identity import AccessBlock, Resume, Rule
from ag2net.server import serve_ws

API = json.loads((Path(__file__).parent / "data" / "ag2_network_1_2_1_api.json").read_text())


pytestmark = pytest.mark.hub(store="memory")


def test_attach_takes_ag2s_parameters():
    from data.make_ag2_api import params_of
    from test_ag2_api_surface import compare_params

    theirs = API["names"]["HubClient"]["methods"]["attach"]["params"]
    assert compare_params("HubClient.attach", theirs, params_of(HubClient.attach)) == []


async def test_attach_rebinds_an_existing_identity_in_process(hub):
    first = HubClient(LocalLink(hub), hub=hub)
    rule = Rule(access=AccessBlock(inbound_from=["ana"]))
    bot = await first.register(
        Agent("bot", ScriptedModel("first life")), resume=Resume(summary="answers"), rule=rule
    )
    skill = await hub.get_skill(bot.agent_id)
    await first.close()

    second = HubClient(LocalLink(hub), hub=hub)
    # passport/resume/rule are for the fallback only: an existing identity keeps what the hub holds
    again = await second.attach(
        Agent("bot", ScriptedModel("second life", loop=True)),
        "bot",
        passport=Passport(name="bot", model="other"),
        resume=Resume(summary="ignored"),
        rule=Rule(),
        skill_md="# ignored",
        since_envelope_id=None,
    )
    assert again.agent_id == bot.agent_id
    assert again.resume.summary == "answers"
    assert again.rule.access.inbound_from == ["ana"]
    assert (await hub.get_skill(bot.agent_id)) == skill

    ana = await HubClient(LocalLink(hub), hub=hub).register_human(Passport(name="ana", kind="human"))
    ch = await ana.open(type="consulting", target="bot")
    await ana.send(ch.channel_id, "are you back?")
    reply = await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
    assert (reply.sender_id, reply.event_data) == (bot.agent_id, {"text": "second life"})
    await second.close()


async def test_attach_of_an_unknown_name_with_passport_registers_it(hub):
    hc = HubClient(LocalLink(hub), hub=hub)
    client = await hc.attach(
        Agent("fresh", ScriptedModel("hello")),
        "fresh",
        passport=Passport(name="fresh", model="scripted"),
        resume=Resume(summary="new here"),
        rule=Rule(access=AccessBlock(inbound_from=["ana"])),
        skill_md="# fresh\nsays hello",
        attach_plugin=False,
    )
    assert hub.find_agent_id("fresh") == client.agent_id
    assert hub.lookup_agent("fresh").model == "scripted"
    assert hub.lookup_resume(client.agent_id).summary == "new here"
    assert (await hub.get_rule(client.agent_id)).access.inbound_from == ["ana"]
    assert (await hub.get_skill(client.agent_id)) == "# fresh\nsays hello"
    await hc.close()


@pytest.mark.parametrize("given", [{}, {"passport": Passport(name="ghost")}, {"resume": Resume()}])
async def test_attach_of_an_unknown_name_without_passport_and_resume_says_what_to_pass(hub, given):
    hc = HubClient(LocalLink(hub), hub=hub)
    with pytest.raises(ValueError, match="name is not registered; passport and resume are required") as err:
        await hc.attach(Agent("ghost", ScriptedModel()), "ghost", **given)
    assert isinstance(err.value, NotFoundError)  # what ag2net raised before: callers catching it still do
    assert hub.find_agent_id("ghost") is None
    await hc.close()


async def test_attach_rejects_a_since_envelope_id_that_is_not_a_string(hub):
    hc = HubClient(LocalLink(hub), hub=hub)
    with pytest.raises(TypeError, match="since_envelope_id must be an envelope id string"):
        await hc.attach(Agent("bot", ScriptedModel()), "bot", since_envelope_id=5)
    await hc.close()


# --- over a real WebSocket -------------------------------------------------------------------------------


async def _missed_while_away(hub, url):
    """bot (remote) and ana (in-process) share a conversation; bot's connection goes away and ana writes
    twice. Returns ana, the channel and the ids of the two missed envelopes."""
    away = HubClient.connect(url, rpc_timeout=10, identity_secrets=False)
    await away.register(Agent("bot", ScriptedModel("ok")), attach_plugin=False)
    ana = await HubClient(LocalLink(hub), hub=hub).register_human(Passport(name="ana", kind="human"))
    ch = await ana.open(type="conversation", target="bot")
    await away.close()
    missed = [await ana.send(ch.channel_id, "while you were away 1")]
    missed.append(await ana.send(ch.channel_id, "while you were away 2"))
    return ana, ch, missed


@pytest.mark.parametrize(
    ("since", "expected"),
    [
        ("", ["while you were away 1", "while you were away 2", "live"]),
        ("past-first", ["while you were away 2", "live"]),
        (None, ["live"]),
    ],
)
async def test_remote_attach_resends_what_the_identity_missed(hub, since, expected):
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        ana, ch, missed = await _missed_while_away(hub, server.url())
        if since == "past-first":
            since = missed[0]
        hc = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        client = await hc.attach(
            Agent("bot", ScriptedModel()),
            "bot",
            since_envelope_id=since,
            attach_plugin=False,
            attach_default_handler=False,
        )
        await ana.send(ch.channel_id, "live")
        seen: list[str] = []
        while "live" not in seen:
            env = await client.wait_for_channel_event(
                channel_id=ch.channel_id, predicate=lambda e: e.event_type == EV_TEXT, timeout=5
            )
            seen.append(env.event_data["text"])
        assert seen == expected
        await hc.close()


async def test_remote_attach_presents_the_passports_credential():
    from ag2net.hub.auth import ApiKeyAuth, AuthRegistry
    from ag2net.identity import AuthBlock

    hub = await Hub.open(None, auth=AuthRegistry([ApiKeyAuth({"bot": "k-bot"})]), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", 0) as server:
            key = Passport(name="bot", auth=AuthBlock(scheme="api_key", claim={"token": "k-bot"}))
            first = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
            bot = await first.register(Agent("bot", ScriptedModel()), key, attach_plugin=False)
            await first.close()

            wrong = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
            bad = Passport(name="bot", auth=AuthBlock(scheme="api_key", claim={"token": "nope"}))
            with pytest.raises(AuthError, match="api_key mismatch for 'bot'"):
                await wrong.attach(Agent("bot", ScriptedModel()), "bot", passport=bad, attach_plugin=False)
            assert wrong._clients == {}  # nothing left seated after a refused bind
            await wrong.close()

            right = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
            again = await right.attach(
                Agent("bot", ScriptedModel()), "bot", passport=key, attach_plugin=False
            )
            assert again.agent_id == bot.agent_id
            await right.close()
    finally:
        await hub.close()


async def test_remote_attach_falls_back_to_register(hub):
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        hc = HubClient.connect(server.url(), rpc_timeout=10, identity_secrets=False)
        client = await hc.attach(
            Agent("fresh", ScriptedModel()),
            "fresh",
            passport=Passport(name="fresh"),
            resume=Resume(summary="remote and new"),
            attach_plugin=False,
        )
        assert hub.find_agent_id("fresh") == client.agent_id
        assert hub.lookup_resume(client.agent_id).summary == "remote and new"
        with pytest.raises(ValueError, match="passport and resume are required to fall back to register"):
            await hc.attach(Agent("nobody", ScriptedModel()), "nobody")
        await hc.close()


async def test_hub_register_runs_the_agent_on_the_given_link():
    from ag2net import Agent, Hub, LocalLink, ScriptedModel

    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        link = LocalLink(hub)
        bot = await hub.register(Agent("bot", ScriptedModel("hi")), Passport(name="bot"), link=link)
        assert bot.agent_id == hub.find_agent_id("bot")
        assert bot.hub_client.link is not None
    finally:
        await hub.close()

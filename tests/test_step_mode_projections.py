"""Step mode reproduces a race in either order, and the agents' projections follow the order released.

A round-robin discussion admits a text only from the speaker due, so two texts never race there; what does
race is what anyone may post at any time (here a custom note, rendered by the channel's renderer as a custom
adapter would render it). Releasing the two held notes in either order gives two WALs, and a third
participant's projected view (``NamedTranscript``) reads them in that order."""

from __future__ import annotations

import asyncio

from ag2net import HubClient, Passport
from ag2net.envelope import Envelope
from ag2net.hub import Hub
from ag2net.views.builtin import NamedTranscript

NOTE = "demo.note"


def render(env: Envelope) -> str | None:
    """Texts and notes (the notes as a custom adapter's ``render_envelope`` would show them)."""
    return env.event_data.get("text") if env.event_type in (NOTE, "ag2.msg.text") else None


async def held(hub: Hub, n: int, channel_id: str):
    for _ in range(2000):
        items = await hub.list_waiting(channel_id=channel_id)
        if len(items) >= n:
            return items
        await asyncio.sleep(0.005)
    raise AssertionError(f"fewer than {n} posts were held")


async def test_both_orders_of_a_race_give_the_two_projections(hub):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    cy = await hc.register_human(Passport(name="cy", kind="human"))
    views = {}
    for order in (("ben", "cy"), ("cy", "ben")):
        ch = await ana.open(type="discussion", target=["ben", "cy"])
        cid = ch.channel_id
        await hub.step_mode(cid, on=True)
        senders = {"ben": ben.agent_id, "cy": cy.agent_id}
        posts = [
            asyncio.create_task(
                hub.post_envelope(Envelope(cid, senders[who], None, NOTE, {"text": f"{who} says"}))
            )
            for who in ("ben", "cy")
        ]
        items = {i.agent_id: i for i in await held(hub, 2, cid)}
        assert all(i.detail["reason"] == "step" for i in items.values())
        for who in order:  # the operator picks which of the two goes first
            await hub.answer_waiting(items[senders[who]].item_id, "release", by="ops")
        await asyncio.gather(*posts)
        await hub.step_mode(cid, on=False)
        wal = await hub.read_wal(cid)
        md = await hub.get_channel(cid)
        projection = await NamedTranscript().project(
            wal, participant_id=ana.agent_id, channel=md, render_envelope=render, name_for=hub.name_for
        )
        views[order] = [p.parts[0].content for p in projection]  # what ana's model would read, in order
    assert views[("ben", "cy")] == ["[ben]: ben says", "[cy]: cy says"]
    assert views[("cy", "ben")] == ["[cy]: cy says", "[ben]: ben says"]

"""Breakpoints on a real hub (SQLite): held posts before append, release / edit / drop / redirect, step mode,
limits, the waiting inbox on the observe stream, turn gates, paused turns and approvals (docs/breakpoints.md)."""

from __future__ import annotations

import asyncio

import pytest

from ag2net import Hub, HubClient, Passport
from ag2net.breakpoints import DEFAULT_MAX_HELD_PER_CHANNEL
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import NetworkError, NotFoundError, ProtocolError
from ag2net.hub.breakpoints import compile_spec
from ag2net.hub.waiting import STOPPED_HELD

pytestmark = pytest.mark.hub(store="sqlite", invite_ack_timeout=30)


async def three(hub: Hub, kind: str = "discussion"):
    hc = HubClient.local(hub)
    ana = await hc.register_human(Passport(name="ana", kind="human"))
    ben = await hc.register_human(Passport(name="ben", kind="human"))
    cy = await hc.register_human(Passport(name="cy", kind="human"))
    ch = await ana.open(type=kind, target=["ben", "cy"])
    return hc, ana, ben, cy, ch.channel_id


NOTE = "demo.note"  # a discussion takes notes from anyone at any time (texts only from the speaker due)


def text(cid: str, sender: str, words: str) -> Envelope:
    return Envelope(cid, sender, None, NOTE, {"text": words})


async def texts(hub: Hub, cid: str) -> list[str]:
    return [e.event_data.get("text", "") for e in await hub.read_wal(cid) if e.event_type == NOTE]


async def held(hub: Hub, n: int = 1, channel_id: str | None = None):
    """The waiting items once there are ``n`` (the held posts reach the inbox in their senders' tasks)."""
    for _ in range(2000):
        items = await hub.list_waiting(channel_id=channel_id)
        if len(items) >= n:
            return items
        await asyncio.sleep(0.005)
    raise AssertionError(f"fewer than {n} items waited: {await hub.list_waiting()}")


async def kinds(hub: Hub) -> list[str]:
    return [r["kind"] for r in await hub.audit_log.read_all()]


async def test_a_matching_post_is_held_before_append_and_others_run_on(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    other = await three_more(hub, ana)
    bp = await hub.break_on("sender:ben and type:demo.note", by="ops")
    assert bp.created_by == "ops" and bp.enabled
    count = hub.wal_count(cid)
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "held one")))
    (item,) = await held(hub)
    assert item.kind == "held" and item.agent_id == ben.agent_id and item.channel_id == cid
    assert item.detail["would_be_seq"] == count + 1 and item.detail["reason"] == "breakpoint"
    assert item.detail["breakpoint_id"] == bp.breakpoint_id
    # not in the WAL, not folded; the channel's lock is free: cy posts in the same channel, ana elsewhere
    assert hub.wal_count(cid) == count and "held one" not in await texts(hub, cid)
    assert not hub.channels.locks(cid).busy
    await hub.post_envelope(text(cid, cy.agent_id, "cy runs on"))
    await hub.post_envelope(text(other, ana.agent_id, "other channel runs on"))
    assert await texts(hub, cid) == ["cy runs on"] and not post.done()
    answered = await hub.answer_waiting(item.item_id, "release", by="ops")
    assert answered.state == "answered" and answered.answer["by"] == "ops"
    envelope_id = await post
    assert answered.answer["envelope_id"] == envelope_id
    assert await texts(hub, cid) == ["cy runs on", "held one"]
    assert {"breakpoint_set", "post_held", "held_released"} <= set(await kinds(hub))
    with pytest.raises(NetworkError, match=f"item {item.item_id} was already answered by ops"):
        await hub.answer_waiting(item.item_id, "release", by="someone")


async def three_more(hub: Hub, ana) -> str:
    dan = await HubClient.local(hub).register_human(Passport(name="dan", kind="human"))
    ch = await ana.open(type="conversation", target="dan")
    assert dan
    return ch.channel_id


async def test_edit_is_readmitted_and_audited_a_refused_edit_stays_held(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("from:ben text:secret")
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "the secret plan")))
    (item,) = await held(hub)
    bad = Envelope(cid, ben.agent_id, ["nobody-here"], NOTE, {"text": "x"})
    with pytest.raises(ProtocolError, match="audience must list only participants"):
        await hub.answer_waiting(item.item_id, "edit", envelope=bad, by="ops")
    (still,) = await hub.list_waiting()
    assert still.item_id == item.item_id and "audience must list only participants" in still.detail["refused"]
    assert not post.done()
    good = Envelope(cid, ben.agent_id, None, NOTE, {"text": "the public plan"})
    await hub.answer_waiting(item.item_id, "edit", envelope=good, by="ops")
    envelope_id = await post
    assert await texts(hub, cid) == ["the public plan"]
    (record,) = [r for r in await hub.audit_log.read_all() if r["kind"] == "held_edited"]
    assert record["by"] == "ops" and record["envelope_id"] == envelope_id
    assert record["original"]["event_data"] == {"text": "the secret plan"}
    assert record["edited"]["event_data"] == {"text": "the public plan"}


async def test_drop_fails_the_senders_post_and_nothing_is_admitted(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "drop me")))
    (item,) = await held(hub)
    await hub.answer_waiting(item.item_id, "drop", reason="off topic", by="ops")
    with pytest.raises(NetworkError, match=r"^dropped at a breakpoint by ops: off topic$"):
        await post
    assert await texts(hub, cid) == []
    assert "held_dropped" in await kinds(hub)


async def test_redirect_replaces_the_audience(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "to all")))
    (item,) = await held(hub)
    await hub.answer_waiting(item.item_id, "redirect", audience=["cy"], by="ops")
    envelope_id = await post
    found = await hub.find_envelope(cid, envelope_id)
    assert found is not None and found[1].audience == [cy.agent_id]
    assert "held_redirected" in await kinds(hub)


async def test_a_post_admission_would_refuse_is_refused_not_held(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    with pytest.raises(ProtocolError, match="audience must list only participants"):
        await hub.post_envelope(Envelope(cid, ben.agent_id, ["ghost"], EV_TEXT, {"text": "x"}))
    assert await hub.list_waiting() == []


async def test_disable_and_remove(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    bp = await hub.break_on("sender:ben")
    assert (await hub.set_breakpoint(bp.breakpoint_id, False)).enabled is False
    await hub.post_envelope(text(cid, ben.agent_id, "not held"))
    assert await hub.list_breakpoints() == [bp]
    await hub.set_breakpoint(bp.breakpoint_id, True)
    await hub.remove_breakpoint(bp.breakpoint_id)
    await hub.post_envelope(text(cid, ben.agent_id, "not held either"))
    assert await texts(hub, cid) == ["not held", "not held either"]
    assert await hub.list_breakpoints() == []
    with pytest.raises(NotFoundError, match="no breakpoint"):
        await hub.remove_breakpoint(bp.breakpoint_id)
    assert {"breakpoint_changed", "breakpoint_removed"} <= set(await kinds(hub))


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("nosuch:x", "unknown filter key 'nosuch'"),
        ("channel.type:", "channel.type: has no value"),
        ("", "breakpoint spec is empty"),
        ('text:"open', "unclosed quote"),
        ("re:/(/", "regular expression"),
    ],
)
async def test_a_bad_spec_is_one_sentence_naming_the_term(hub, spec, words):
    with pytest.raises(ProtocolError, match=words.replace("(", r"\(")):
        await hub.break_on(spec)
    assert await hub.list_breakpoints() == []


def test_spec_terms_channel_type_node_and_equals():
    c = compile_spec("channel.type=workflow and node=critic -to:all")
    assert c.channel_types == (("workflow",), False) and c.nodes == (("critic",), False)
    assert [t.key for t in c.dynamic.terms] == ["to"] and c.static.empty


async def test_channel_type_term_picks_the_channel(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    other = await three_more(hub, ana)
    await hub.break_on("channel.type:conversation")
    await hub.post_envelope(text(cid, ben.agent_id, "discussion runs"))
    post = asyncio.create_task(hub.post_envelope(text(other, ana.agent_id, "conversation waits")))
    (item,) = await held(hub)
    assert item.channel_id == other
    await hub.answer_waiting(item.item_id, "release")
    await post


async def test_step_mode_releases_in_either_order(hub):
    for order in ((0, 1), (1, 0)):
        _hc, ana, ben, cy, cid = await three_again(hub, order)
        await hub.step_mode(cid, on=True)
        posts = [
            asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "ben first"))),
            asyncio.create_task(hub.post_envelope(text(cid, cy.agent_id, "cy first"))),
        ]
        items = await held(hub, 2, channel_id=cid)
        assert all(i.detail["reason"] == "step" for i in items)
        by_sender = {i.agent_id: i for i in items}
        senders = [ben.agent_id, cy.agent_id]
        for index in order:
            await hub.answer_waiting(by_sender[senders[index]].item_id, "release")
        await asyncio.gather(*posts)
        expected = ["ben first", "cy first"]
        assert await texts(hub, cid) == [expected[i] for i in order]
        await hub.step_mode(cid, on=False)
    assert "step_mode" in await kinds(hub)


_PEOPLE: dict[int, tuple] = {}


async def three_again(hub: Hub, key: tuple[int, int]):
    """The three people once, a fresh discussion for each call."""
    if not _PEOPLE.get(id(hub)):
        _PEOPLE[id(hub)] = await three(hub)
        return _PEOPLE[id(hub)]
    hc, ana, ben, cy, _ = _PEOPLE[id(hub)]
    ch = await ana.open(type="discussion", target=["ben", "cy"])
    return hc, ana, ben, cy, ch.channel_id


async def test_network_wide_step_mode_holds_every_channel_but_not_protocol_events(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.step_mode(None, on=True)
    post = asyncio.create_task(hub.post_envelope(text(cid, ana.agent_id, "held")))
    (item,) = await held(hub)
    await hub.close_channel(cid, reason="done")  # a close is not held
    await hub.answer_waiting(item.item_id, "release")
    with pytest.raises(NetworkError):
        await post  # the channel closed meanwhile: the release is refused, the sender told why
    (record,) = [r for r in await hub.audit_log.read_all() if r["kind"] == "held_released"]
    assert record["refused"]


@pytest.mark.hub(store="sqlite", invite_ack_timeout=30, max_held_per_channel=2)
async def test_max_held_per_channel_refuses_with_the_limit_named(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    posts = [asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, f"m{i}"))) for i in range(2)]
    await held(hub, 2)
    with pytest.raises(
        NetworkError, match="already holds 2 posts at breakpoints, the hub's max_held_per_channel"
    ):
        await hub.post_envelope(text(cid, ben.agent_id, "one too many"))
    for item in await hub.list_waiting():
        await hub.answer_waiting(item.item_id, "release")
    await asyncio.gather(*posts)
    assert DEFAULT_MAX_HELD_PER_CHANNEL == 100


async def test_the_observe_stream_shows_every_change_of_the_inbox(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    since = hub.observe_position
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "x")))
    (item,) = await held(hub)
    bad = Envelope(cid, ben.agent_id, ["ghost"], EV_TEXT, {"text": "x"})
    with pytest.raises(ProtocolError):
        await hub.answer_waiting(item.item_id, "edit", envelope=bad)
    await hub.answer_waiting(item.item_id, "release")
    await post
    changes = []
    async for event in hub.observe(since):
        if event.kind == "waiting":
            changes.append(event.payload["change"])
            assert event.payload["item"]["item_id"] == item.item_id and event.channel_id == cid
        if event.position >= hub.observe_position:
            break
    assert changes == ["added", "updated", "answered"]


async def test_a_sender_that_goes_away_cancels_its_item(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("sender:ben")
    post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, "x")))
    (item,) = await held(hub)
    post.cancel()
    with pytest.raises(asyncio.CancelledError):
        await post
    assert await hub.list_waiting() == []
    with pytest.raises(NetworkError, match="already cancelled"):
        await hub.answer_waiting(item.item_id, "release")
    assert await texts(hub, cid) == []


async def test_hub_stop_answers_held_posts_and_a_restart_keeps_breakpoints(store_factory, make_hub):
    hub = await make_hub(store_factory())
    _hc, ana, ben, cy, cid = await three(hub)
    bp = await hub.break_on("sender:ben")
    await hub.step_mode(cid, on=True)
    posts = [
        asyncio.create_task(hub.post_envelope(text(cid, who, "x"))) for who in (ben.agent_id, cy.agent_id)
    ]
    await held(hub, 2)
    turn = asyncio.create_task(hub.pause_turn(cy.agent_id, cid, {"messages": []}))
    await held(hub, 3)
    count = hub.wal_count(cid)
    await hub.close()
    for post in posts:
        with pytest.raises(NetworkError, match=f"^{STOPPED_HELD}$"):
            await post
    with pytest.raises(NetworkError, match="the hub stopped while this turn was paused"):
        await turn
    again = await make_hub(store_factory())
    assert [b.breakpoint_id for b in await again.list_breakpoints()] == [bp.breakpoint_id]
    assert again.breakpoints.step == {cid}
    assert again.wal_count(cid) == count and await texts(again, cid) == []
    assert await again.list_waiting() == []


async def test_turn_gate_pause_turn_and_approval(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    assert await hub.turn_gate(ben.agent_id, cid) is False
    assert hub.breakpoints.table == {}
    await hub.break_on("agent:ben channel.type:discussion", on="turn")
    assert await hub.turn_gate(ben.agent_id, cid) is True
    assert await hub.turn_gate(cy.agent_id, cid) is False
    await hub.post_envelope(text(cid, ben.agent_id, "turn breakpoints do not hold posts"))
    request = {"system_prompt": "be brief", "messages": [{"text": "hi"}], "tools": []}
    turn = asyncio.create_task(hub.pause_turn(ben.agent_id, cid, request, trigger_envelope_id="e1"))
    (item,) = await held(hub)
    assert item.kind == "turn" and item.detail["request"] == request
    assert item.detail["trigger_envelope_id"] == "e1"
    with pytest.raises(
        ProtocolError, match="a turn item is answered with one of continue, edit, answer, skip"
    ):
        await hub.answer_waiting(item.item_id, "approve")
    await hub.answer_waiting(item.item_id, "answer", text="as ben", by="ops")
    decision = await turn
    assert (decision.action, decision.text, decision.by) == ("answer", "as ben", "ops")
    approval = asyncio.create_task(
        hub.request_approval(cy.agent_id, cid, "delete", {"path": "/"}, reason="cleanup", call_id="c1")
    )
    (item,) = await held(hub)
    assert item.kind == "approval" and item.detail == {
        "tool": "delete",
        "arguments": {"path": "/"},
        "reason": "cleanup",
        "call_id": "c1",
    }
    await hub.answer_waiting(item.item_id, "deny", reason="too broad", by="ops")
    decision = await approval
    assert (decision.action, decision.reason) == ("deny", "too broad")
    assert {"turn_paused", "turn_decided", "approval_requested", "approval_decided"} <= set(await kinds(hub))


async def test_text_regex_and_audience_terms_read_the_post(hub):
    _hc, ana, ben, cy, cid = await three(hub)
    await hub.break_on("re:'/Deploy\\s+now/' -to:all")  # quoted: the spec is split as a shell splits words
    await hub.break_on('text:"nested word"')
    await hub.post_envelope(text(cid, ben.agent_id, "Deploy now"))  # a broadcast: -to:all says no
    await hub.post_envelope(text(cid, ben.agent_id, "deploy now"))  # the regex is case-sensitive
    post = asyncio.create_task(
        hub.post_envelope(Envelope(cid, ben.agent_id, [cy.agent_id], NOTE, {"text": "Deploy  now"}))
    )
    nested = asyncio.create_task(
        hub.post_envelope(Envelope(cid, ben.agent_id, None, NOTE, {"parts": [{"body": "a NESTED Word"}]}))
    )
    items = await held(hub, 2)
    for item in items:
        await hub.answer_waiting(item.item_id, "release")
    await asyncio.gather(post, nested)
    assert sorted(await texts(hub, cid)) == ["", "Deploy  now", "Deploy now", "deploy now"]


@pytest.mark.hub(store="sqlite", invite_ack_timeout=30, max_held_per_channel=1)
async def test_through_a_local_hub_client_and_answered_items_free_their_place(hub):
    hc, ana, ben, cy, cid = await three(hub)
    bp = await hc.break_on("sender:ben", by="Ops Person")
    assert bp.created_by == "Ops Person" and await hc.list_breakpoints() == [bp]
    for round_ in range(3):  # one place per channel: each answered item frees it
        post = asyncio.create_task(hub.post_envelope(text(cid, ben.agent_id, f"r{round_}")))
        await held(hub)
        (item,) = await hc.list_waiting(channel_id=cid)
        edited = Envelope(cid, ben.agent_id, None, NOTE, {"text": f"edited r{round_}"})
        done = await hc.answer_waiting(item.item_id, "edit", envelope=edited, by="Ops Person")
        assert done.state == "answered" and done.answer["by"] == "Ops Person"
        assert await post == done.answer["envelope_id"]
    assert await texts(hub, cid) == ["edited r0", "edited r1", "edited r2"]
    assert (await hc.step_mode(cid))["step"] == [cid]
    assert (await hc.step_mode(cid, on=False))["step"] == []
    await hc.set_breakpoint(bp.breakpoint_id, False)
    await hc.remove_breakpoint(bp.breakpoint_id)
    assert await hc.list_breakpoints() == []

"""The visibility matrix (``ag2net.debug.visibility``): per envelope and participant, delivered or not and
why (the hub's own dispatch decides), and what that participant's model gets of it under the view in force
and under a preview view, as which role. On the demo network and on hand-built edge cases: an
audience-restricted envelope, a participant who joined late, a recipient whose rule refuses the sender."""

from __future__ import annotations

from support import humans, quiet, run_demo, text

from ag2net import EV_TEXT, Hub, HubClient
from ag2net.debug import visibility
from ag2net.identity import AccessBlock, Rule


async def test_the_demo_conversation_elides_early_turns_and_a_preview_shows_them():
    hub = await Hub.open(None, **quiet())
    hc = HubClient.local(hub)
    try:
        demo = await run_demo(hc)
        [conv] = [
            md
            for md in hub.query_channels(include_terminal=True, limit=None)
            if md.manifest.type == "conversation"
        ]
        coder, critic = demo["coder"].agent_id, demo["critic"].agent_id
        matrix = await visibility(hub, conv.channel_id, preview_view="full_transcript")
        said = {e.envelope_id: e.event_data.get("text") for e in await hub.read_wal(conv.channel_id)}
        assert matrix.participants == [coder, critic]
        assert matrix.views == {
            coder: {"name": "windowed_summary", "recent_n": 10},
            critic: {"name": "windowed_summary", "recent_n": 10},
        }
        texts = [row for row in matrix.rows if row.event_type == EV_TEXT]
        assert len(texts) == 16 and matrix.wal_length == len(matrix.rows) == 20
        for i, row in enumerate(texts):
            mine, theirs = (coder, critic) if row.sender_id == coder else (critic, coder)
            own, other = row.cells[mine], row.cells[theirs]
            assert (own.delivered, own.reason) == (False, "sender")
            assert (other.delivered, other.reason) == (True, "delivered")
            # the window of ten: the first six texts are elided (counted in the summary), the rest shown
            want = "elided" if i < 6 else "shown"
            assert own.projected == other.projected == want, (i, own, other)
            if want == "shown":
                assert (own.role, other.role) == ("assistant", "user")
                assert own.text == other.text == said[row.envelope_id]
            # under the preview (every envelope), all are shown
            assert own.preview == other.preview == "shown" and own.preview_role == "assistant"
        # protocol envelopes: delivered by the rules, rendered to nothing
        invite = matrix.rows[0]
        assert invite.event_type == "ag2.channel.invite"
        assert (invite.cells[critic].delivered, invite.cells[coder].reason) == (True, "sender")
        assert invite.cells[critic].projected == "not_rendered"
        closed = matrix.rows[-1].cells
        assert closed[coder].reason == closed[critic].reason == "delivered"  # the close lists everyone
        # one page of it
        page = await visibility(hub, conv.channel_id, first_seq=18, last_seq=19)
        assert [r.seq for r in page.rows] == [18, 19] and page.cell(19, coder).projected == "shown"
    finally:
        await hc.close()
        await hub.close()


async def test_an_audience_restricted_envelope(hub, hc):
    ana, bob, cat = await humans(hc, "ana", "bob", "cat")
    md = await hc.create_channel(creator_id=ana, manifest_type="discussion", participants=[ana, bob, cat])
    cid = md.channel_id
    await hc.post_envelope(text(cid, ana, "to bob only", audience=[bob]))
    await hc.post_envelope(text(cid, bob, "to myself too", audience=[bob, ana]))
    matrix = await visibility(hub, cid)
    secret, both = matrix.rows[-2], matrix.rows[-1]
    assert {p: (c.delivered, c.reason, c.projected) for p, c in secret.cells.items()} == {
        ana: (False, "sender", "shown"),
        bob: (True, "delivered", "shown"),
        cat: (False, "audience", "hidden"),
    }
    assert secret.cells[bob].text == "[ana]: to bob only" and secret.cells[bob].role == "user"
    assert secret.cells[ana].role == "assistant" and secret.cells[ana].text == "to bob only"
    # the sender listed in the audience is delivered its own envelope (the hub's dispatch does that)
    assert (both.cells[bob].delivered, both.cells[bob].reason) == (True, "delivered")
    assert (both.cells[ana].delivered, both.cells[ana].projected) == (True, "shown")
    assert both.cells[cat].reason == "audience"


async def test_a_participant_who_joined_late(hub, hc):
    ana, bob, cat = await humans(hc, "ana", "bob", "cat")
    md = await hc.create_channel(creator_id=ana, manifest_type="discussion", participants=[ana, bob, cat])
    cid = md.channel_id
    await hc.post_envelope(text(cid, ana, "before cat came"))
    await hc.post_envelope(text(cid, bob, "after"))
    early, late = (await hub.read_wal(cid))[-2:]
    assert early.created_at < late.created_at
    # hand-built: cat's membership dates from the second envelope (the hub has no join op; the metadata
    # says when each participant joined, and the matrix reads it)
    [seat] = [p for p in hub.lookup_channel(cid).participants if p.agent_id == cat]
    seat.joined_at = late.created_at
    matrix = await visibility(hub, cid, preview_view={"name": "named_windowed_summary", "recent_n": 1})
    first, second = matrix.rows[-2], matrix.rows[-1]
    # not delivered to cat (it was not a participant then), yet its view projects the channel's history
    assert (first.cells[cat].delivered, first.cells[cat].reason) == (False, "not_yet_participant")
    assert first.cells[cat].projected == "shown" and first.cells[cat].text == "[ana]: before cat came"
    assert (second.cells[cat].delivered, second.cells[cat].reason) == (True, "delivered")
    # under a window of one, only the last text is shown; the first is elided
    assert (first.cells[cat].preview, second.cells[cat].preview) == ("elided", "shown")
    assert matrix.preview_view == {"name": "named_windowed_summary", "recent_n": 1}


async def test_a_recipient_whose_rule_refuses_the_sender(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
    await hub.set_rule(bob, Rule(access=AccessBlock(inbound_from=["carol"])))
    await hc.post_envelope(text(md.channel_id, ana, "you will not be told"))
    row = (await visibility(hub, md.channel_id)).rows[-1]
    assert (row.cells[bob].delivered, row.cells[bob].reason) == (False, "inbound_from")
    assert row.cells[bob].projected == "shown"  # the view still reads the WAL


async def test_an_agent_that_left(hub, hc):
    ana, bob = await humans(hc, "ana", "bob")
    md = await hc.create_channel(creator_id=ana, manifest_type="conversation", participants=[ana, bob])
    await hc.post_envelope(text(md.channel_id, ana, "hello"))
    await hub.unregister(bob)
    await hc.post_envelope(text(md.channel_id, ana, "anyone?"))
    row = (await visibility(hub, md.channel_id)).rows[-1]
    assert (row.cells[bob].delivered, row.cells[bob].reason) == (False, "left")

"""A scripted "coding agent" follows the debug-network skill on the demo, with MCP calls only (the SDK's
client, ``ag2net mcp --db`` over stdio): why did the critic say "clock skew will reorder operations"? It
finds the channel and the envelope, the critic's turn that wrote it, the projection that turn got, what a
narrower view would have shown, dry-runs another reply at that point, and replays with another view and
another model to prove what changes."""

from __future__ import annotations

from typing import Any

from test_mcp_support import answer, demo_db, stdio_session

__all__ = ["demo_db"]  # the fixture, imported

NARROW = {"name": "windowed_summary", "recent_n": 2}
FIX = "Order operations by per-device counters, never by wall-clock time."


async def find_turn(client: Any, channel: str, envelope_id: str) -> dict[str, Any]:
    """Step 3: page through the critic's turn records until the one whose reply is the envelope."""
    arguments: dict[str, Any] = {"channel": channel, "participant": "critic", "limit": 2}
    while True:
        page = await answer(client, "turns", arguments)
        for turn in page["turns"]:
            if turn["reply_envelope_id"] == envelope_id:
                return turn
        assert page["next_cursor"], "no turn of the critic wrote the envelope"
        arguments = {**arguments, "cursor": page["next_cursor"]}


async def test_a_coding_agent_follows_the_skill_from_a_wrong_reply_to_a_proven_fix(demo_db):
    db, _ = demo_db
    async with stdio_session("--db", str(db)) as client:
        # 1. the channel: the conversation the critic is in
        found = await answer(client, "list_channels", {"type": "conversation", "participant": "critic"})
        [channel] = [c["label"] for c in found["channels"]]
        # 2. the envelope: the critic's texts, filtered as in the tail
        said = await answer(
            client, "read_wal", {"channel": channel, "filter": "sender:critic type:ag2.msg.text"}
        )
        [wrong] = [e for e in said["envelopes"] if "clock skew" in e["text"]]
        assert wrong["seq"] == 9
        # 3. the turn that wrote it
        turn = await find_turn(client, channel, wrong["envelope_id"])
        assert turn["turn"] == 3 and turn["reply"] == wrong["text"]
        assert turn["view"] == {"name": "windowed_summary", "recent_n": 10} and "say" in turn["tools_offered"]
        # 4. what its model got: the projection at the envelope that triggered it
        trigger = await answer(
            client, "envelope", {"channel": channel, "envelope_id": turn["trigger_envelope_id"]}
        )
        assert trigger["seq"] == 8 and trigger["sender"] == "coder"
        assert (trigger["caused_by"]["seq"], trigger["caused_by"]["sender"]) == (7, "critic")
        got = await answer(client, "projection", {"channel": channel, "participant": "critic", "at_seq": 8})
        assert got["view"] == turn["view"] and got["events_total"] == turn["history_events"] + 1
        assert got["events"][:-1] == turn["history"]  # the recorded history, re-projected exactly
        assert got["events"][-1]["parts"][0]["content"] == trigger["envelope"]["event_data"]["text"]
        narrow = await answer(
            client,
            "projection",
            {
                "channel": channel,
                "participant": "critic",
                "at_seq": 8,
                "view": "windowed_summary",
                "params": {"recent_n": 2},
            },
        )
        assert narrow["events_total"] == 3 and narrow["events"][0]["type"] == "compaction_summary"
        # 5. who saw what, and what the protocol expected then
        row = await answer(client, "visibility", {"channel": channel, "from_seq": 8, "limit": 1})
        assert row["rows"][0]["cells"]["critic"]["delivered"] is True
        state = await answer(client, "state_at", {"channel": channel, "seq": 8})
        assert state["lifecycle"] == "active" and state["sender"] == "coder"
        # 6. dry-run another reply at that point
        dry = await answer(
            client, "dry_run", {"channel": channel, "sender": "critic", "text": FIX, "at_seq": 8}
        )
        assert dry["admitted"] is True and [r["name"] for r in dry["recipients"]] == ["coder"]
        assert dry["projections"]["coder"]["added"][0]["parts"][0]["content"] == FIX
        # 7. replay with another view: the critic's third request changes, and the replay says where
        view = await answer(client, "replay", {"channel": channel, "at_seq": 1, "views": {"critic": NARROW}})
        assert view["identical"] is False and view["first_divergence_seq"] == 9
        assert (view["first_turn"]["agent"], view["first_turn"]["turn"]) == ("critic", 3)
        assert view["first_turn"]["history_same"] is False and view["turn_why"] == "different history, reply"
        assert "has no recorded reply for a changed request" in view["verdict"]
        # ... and with another model answering under it, from just before that turn: the reply is the fix
        fixed = await answer(
            client,
            "replay",
            {
                "channel": channel,
                "at_seq": 8,
                "views": {"critic": NARROW},
                "models": {"critic": f"scripted:{FIX}"},
            },
        )
        assert fixed["first_divergence_seq"] == 9 and fixed["why"] == "different reply"
        [first] = fixed["differing_rows"][:1]
        assert (
            first["seq"] == 9
            and first["original"]["text"] == wrong["text"]
            and first["replayed"]["text"] == FIX
        )
        assert fixed["overrides"]["critic"].startswith(
            'view {"name": "windowed_summary", "recent_n": 2}; model scripted:'
        )

"""HubSource paging: the first page is exactly the newest envelopes across channels; older pages follow."""

from __future__ import annotations

from tui_network import close, small_network

from tui.source import HubSource


async def test_last_page_and_older_pages_match_a_full_read() -> None:
    net = await small_network()
    try:
        channels = [net.conversation, net.discussion]
        for i in range(60):
            # uneven interleaving: the discussion gets bursts, the conversation trickles
            target = net.discussion if i % 5 else net.conversation
            await net.human.send(target, f"m{i}")
        await net.planner.idle()
        await net.critic.idle()
        source = HubSource(net.hc, net.human)
        rows = await source.load_channels()
        everything = []
        for cid in channels:
            count = await net.hc.wal_count(cid)
            everything += [(env.envelope_id, seq) for seq, env in await net.hc.read_wal_seq(cid, 1, count)]
        everything.sort()
        for size in (1, 7, 25, len(everything), len(everything) + 10):
            page = await source.last_page(rows, size)
            assert [(env.envelope_id, seq) for env, seq, _ in page] == everything[-size:]
        page = await source.last_page(rows, 10)
        lowest = {}
        for env, seq, _ in page:
            lowest[env.channel_id] = min(lowest.get(env.channel_id, seq), seq)
        older = []
        async for batch, done, total in source.older_pages(rows, lowest, limit=10_000, page=8):
            older = [(env.envelope_id, seq) for env, seq, _ in batch] + older
            assert done <= total
        assert older + [(env.envelope_id, seq) for env, seq, _ in page] == everything
    finally:
        await close(net)

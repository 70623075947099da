"""An observe whose first subscribe is cut by a drop resumes after the reconnect, like any other."""

import asyncio

from ag2net import Hub, HubClient, Passport
from ag2net.server import serve_ws


async def test_observe_cut_before_its_first_answer_resumes_after_the_reconnect():
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    local = HubClient.local(hub)
    try:
        serving = serve_ws(hub, "127.0.0.1", 0)
        server = await serving.__aenter__()
        port = server.port
        op = HubClient.connect(
            server.url(), operator=True, reconnect_initial_delay=0.02, reconnect_max_delay=0.1
        )
        await op.open()
        stream = op.observe(since=0)
        first = asyncio.ensure_future(stream.__anext__())
        while not op.link.pending.observing:  # the subscribe is on the wire ...
            await asyncio.sleep(0)
        [sub] = op.link._subs.values()
        await serving.__aexit__(None, None, None)  # ... and the server dies before answering it
        assert sub.incarnation is None  # never answered
        await local.register_human(Passport(name="p1", kind="human"))
        async with serve_ws(hub, "127.0.0.1", port):
            event = await asyncio.wait_for(first, 5)
            assert event.position == 1 and event.payload.get("name") == "p1"
            await op.close()
    finally:
        await local.close()
        await hub.close()

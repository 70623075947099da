"""``ChannelLock``: FIFO hand-off, re-entrance, and waiters cancelled before or after the lock reached them."""

from __future__ import annotations

import asyncio

from ag2net.hub.locks import GRANTED, ChannelLock


async def test_entries_get_the_lock_in_arrival_order_and_reenter():
    lock = ChannelLock()
    order: list[int] = []

    async def entry(i: int) -> None:
        async with lock, lock:  # re-entrant for the holder
            order.append(i)
            await asyncio.sleep(0)

    await asyncio.gather(*(entry(i) for i in range(5)))
    assert order == [0, 1, 2, 3, 4]
    assert not lock.busy and not lock.waiting


async def test_a_waiter_cancelled_after_the_hand_off_passes_the_lock_on():
    lock = ChannelLock()
    await lock.__aenter__()
    second = asyncio.ensure_future(lock.__aenter__())
    third_entered = asyncio.Event()

    async def third() -> None:
        async with lock:
            third_entered.set()

    t3 = asyncio.ensure_future(third())
    await asyncio.sleep(0)
    lock.release()  # handed to `second`, which has not run yet
    second.cancel()
    await asyncio.gather(second, return_exceptions=True)
    await asyncio.wait_for(third_entered.wait(), 1)
    await t3
    assert not lock.busy


async def test_a_settled_post_returns_its_outcome_without_entering():
    lock = ChannelLock()
    await lock.__aenter__()
    fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    waiter = asyncio.ensure_future(lock.wait_turn("post", fut))
    await asyncio.sleep(0)
    assert list(lock.queued_posts()) == ["post"]
    fut.set_result("envelope-id")
    assert await waiter == "envelope-id"
    assert list(lock.queued_posts()) == []
    lock.release()  # skips the settled entry
    assert not lock.busy and not lock.waiting


async def test_queued_posts_stop_at_an_entry_of_another_kind():
    lock = ChannelLock()
    await lock.__aenter__()
    loop = asyncio.get_running_loop()
    f1, f2 = loop.create_future(), loop.create_future()
    w1 = asyncio.ensure_future(lock.wait_turn("p1", f1))
    other = asyncio.ensure_future(lock.__aenter__())
    w2 = asyncio.ensure_future(lock.wait_turn("p2", f2))
    await asyncio.sleep(0)
    assert list(lock.queued_posts()) == ["p1"]
    lock.release()
    assert await w1 is GRANTED
    lock.release()
    await other
    lock.release()
    assert await w2 is GRANTED
    lock.release()
    assert not lock.busy

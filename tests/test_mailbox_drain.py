"""``hub.dispatch.Mailbox``: a parked pump's mailbox is drained by the hub's shared drain callback (no task
wake per delivery), and a handler cannot tell: it runs with its pump as the current task and in the pump's
context, a handler that suspends moves into its own pump (holding up no other recipient), and a cancellation
or a timeout reaches the handler that waits, in order, whichever of the two ran it."""

from __future__ import annotations

import asyncio
import contextvars

from support import until

from ag2net import Envelope, HubClient, Passport
from ag2net.hub.dispatch import Drains, Mailbox

SEEN: contextvars.ContextVar[str] = contextvars.ContextVar("SEEN", default="")


def env(n: str) -> Envelope:
    return Envelope("ch", "sender", None, "test.p", {"n": n})


class Endpoint:
    """Calls ``handler(recipient_id, envelope)`` for each delivery."""

    def __init__(self, handler) -> None:
        self.handler = handler

    def notify(self, recipient_id: str, envelope: Envelope):
        return self.handler(recipient_id, envelope)


async def failed(envelope: Envelope, recipient_id: str, exc: BaseException) -> None:
    FAILED.append((envelope.event_data["n"], type(exc).__name__))


FAILED: list[tuple[str, str]] = []


async def parked(*mailboxes: Mailbox) -> None:
    """Wait until every pump is parked (so the next put goes through the drain callback)."""
    await until(lambda: all(m._waiter is not None and not len(m) for m in mailboxes))


async def test_a_handler_runs_as_its_pump_task_with_timeouts_that_work():
    drains = Drains()
    tasks: list[asyncio.Task | None] = []
    outcomes: list[str] = []

    async def handler(rid: str, envelope: Envelope) -> None:
        tasks.append(asyncio.current_task())
        n = envelope.event_data["n"]
        try:
            async with asyncio.timeout(0.01 if n == "slow" else 5):
                if n == "slow":
                    await asyncio.sleep(1)
            outcomes.append(f"{n}:done")
        except TimeoutError:
            outcomes.append(f"{n}:timeout")

    mailbox = Mailbox("r", Endpoint(handler), failed, drains)
    mailbox.put(env("first"))  # starts the pump, which delivers it
    await parked(mailbox)
    for n in ("a", "slow", "b"):
        mailbox.put(env(n))
    await until(lambda: len(outcomes) == 4)
    assert outcomes == ["first:done", "a:done", "slow:timeout", "b:done"]
    assert all(t is mailbox._task for t in tasks), "every handler ran with its mailbox's pump as current task"
    assert asyncio.current_task() is not mailbox._task
    await mailbox.stop()


async def test_a_suspended_handler_holds_up_its_own_recipient_only_and_keeps_its_order():
    drains = Drains()
    gate = asyncio.Event()
    got: dict[str, list[str]] = {"slow": [], "fast": []}

    async def handler(rid: str, envelope: Envelope) -> None:
        if rid == "slow" and envelope.event_data["n"] == "m0":
            await gate.wait()
        got[rid].append(envelope.event_data["n"])

    slow = Mailbox("slow", Endpoint(handler), failed, drains)
    fast = Mailbox("fast", Endpoint(handler), failed, drains)
    slow.put(env("warm"))
    fast.put(env("warm"))
    await parked(slow, fast)
    for i in range(5):
        slow.put(env(f"m{i}"))
        fast.put(env(f"m{i}"))
        await asyncio.sleep(0)
    await until(lambda: len(got["fast"]) == 6)
    assert got["slow"] == ["warm"]  # m0 waits on the gate; m1.. wait behind it
    assert len(slow) == 4
    gate.set()
    await until(lambda: len(got["slow"]) == 6)
    assert got["slow"] == got["fast"] == ["warm", "m0", "m1", "m2", "m3", "m4"]
    # back to parked: the next ones go through the drain callback again
    await parked(slow, fast)
    slow.put(env("m5"))
    await until(lambda: got["slow"][-1] == "m5")
    await slow.stop()
    await fast.stop()


async def test_each_pump_keeps_its_own_context():
    drains = Drains()
    seen: list[tuple[str, str]] = []

    async def handler(rid: str, envelope: Envelope) -> None:
        seen.append((rid, SEEN.get()))
        SEEN.set(f"{rid}:{envelope.event_data['n']}")

    a = Mailbox("a", Endpoint(handler), failed, drains)
    b = Mailbox("b", Endpoint(handler), failed, drains)
    a.put(env("0"))
    b.put(env("0"))
    await parked(a, b)
    a.put(env("1"))
    b.put(env("1"))
    await parked(a, b)
    assert seen == [("a", ""), ("b", ""), ("a", "a:0"), ("b", "b:0")]
    assert SEEN.get() == ""
    await a.stop()
    await b.stop()


async def test_a_failing_handler_is_reported_before_the_next_delivery():
    drains = Drains()
    FAILED.clear()
    order: list[str] = []

    async def handler(rid: str, envelope: Envelope) -> None:
        n = envelope.event_data["n"]
        order.append(n)
        if n == "late-bad":
            await asyncio.sleep(0)  # fails after suspending: in the pump
        if n in ("bad", "late-bad"):
            raise ValueError(n)

    async def on_failed(envelope: Envelope, recipient_id: str, exc: BaseException) -> None:
        await asyncio.sleep(0.01)  # suspends: the rest of the drain moves into the pump
        order.append(f"failed:{envelope.event_data['n']}")

    mailbox = Mailbox("r", Endpoint(handler), on_failed, drains)
    mailbox.put(env("first"))
    await parked(mailbox)
    for n in ("a", "bad", "b", "late-bad", "c"):
        mailbox.put(env(n))
    await until(lambda: len(order) == 8)
    assert order == ["first", "a", "bad", "failed:bad", "b", "late-bad", "failed:late-bad", "c"]
    await mailbox.stop()


async def test_a_cancel_before_the_pump_takes_over_reaches_the_waiting_handler():
    drains = Drains()
    events: list[str] = []
    never = asyncio.Event()

    async def handler(rid: str, envelope: Envelope) -> None:
        if envelope.event_data["n"] == "wait":
            try:
                await never.wait()
            except asyncio.CancelledError:
                events.append("handler cancelled")
                raise
        events.append(envelope.event_data["n"])

    mailbox = Mailbox("r", Endpoint(handler), failed, drains)
    mailbox.put(env("first"))
    await parked(mailbox)
    task = mailbox._task
    assert task is not None
    mailbox.put(env("wait"))
    # runs right after the drain callback (which suspends in the handler and hands the drain to the pump),
    # before the pump's own step
    asyncio.get_running_loop().call_soon(task.cancel)
    await asyncio.wait([task], timeout=5)
    assert task.cancelled()
    assert events == ["first", "handler cancelled"]


async def test_stop_while_a_drain_is_due_delivers_nothing_more():
    drains = Drains()
    got: list[str] = []

    async def handler(rid: str, envelope: Envelope) -> None:
        got.append(envelope.event_data["n"])

    mailbox = Mailbox("r", Endpoint(handler), failed, drains)
    mailbox.put(env("first"))
    await parked(mailbox)
    mailbox.put(env("late"))  # due in the next callback
    await mailbox.stop()
    await asyncio.sleep(0.01)
    assert got == ["first"]


async def test_a_hub_fan_out_reaches_everyone_in_order_while_one_recipient_stalls(sqlite_hub):
    hub = sqlite_hub
    hc = HubClient.local(hub)
    poster = await hc.register_human(Passport(name="poster", kind="human"))
    names = [f"r{i}" for i in range(5)]
    humans = [await hc.register_human(Passport(name=n, kind="human")) for n in names]
    ch = await poster.open(type="discussion", target=names)
    gate = asyncio.Event()
    got: dict[str, list[int]] = {n: [] for n in names}

    def counter(name: str):
        async def count(envelope: Envelope) -> None:
            if envelope.event_type != "test.b":
                return
            if name == "r0" and envelope.event_data["i"] == 3:
                await gate.wait()
            got[name].append(envelope.event_data["i"])

        return count

    for name, human in zip(names, humans, strict=True):
        human.on_envelope(counter(name))
    for i in range(20):
        await poster.post_envelope(Envelope(ch.channel_id, poster.agent_id, None, "test.b", {"i": i}))
    await until(lambda: all(len(got[n]) == 20 for n in names[1:]))
    assert got["r0"] == [0, 1, 2]
    assert hub.pending_inbox(humans[0].agent_id) == 17
    gate.set()
    await until(lambda: len(got["r0"]) == 20)
    assert all(got[n] == list(range(20)) for n in names)
    await until(lambda: all(hub.pending_inbox(h.agent_id) == 0 for h in humans))
    await hc.close()


async def test_a_delivery_that_fails_at_once_is_reported_in_the_same_callback():
    drains = Drains()
    reported: list[str] = []

    async def handler(rid: str, envelope: Envelope) -> None:
        if envelope.event_data["n"] == "bad":
            raise ConnectionError("down")

    async def on_failed(envelope: Envelope, recipient_id: str, exc: BaseException) -> None:
        reported.append(f"{envelope.event_data['n']}:{type(exc).__name__}")

    mailbox = Mailbox("r", Endpoint(handler), on_failed, drains)
    mailbox.put(env("first"))
    await parked(mailbox)
    mailbox.put(env("bad"))
    await asyncio.sleep(0)  # one loop iteration: the drain callback's, no pump wake besides
    assert reported == ["bad:ConnectionError"]
    assert mailbox._waiter is not None  # the pump stayed parked
    await mailbox.stop()

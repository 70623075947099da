"""One ag2-style network program, written the way an ``ag2.network`` 1.2.1 user writes it.

Run it as ``python program.py ag2.network`` (under ag2 1.2.1) or ``python program.py ag2net``: the
network module is imported by that name and every network name below is used through it (``net.Hub``,
``net.LocalLink``, ...). The program prints one JSON transcript on stdout; ids and timestamps are
replaced by stable labels so two runs can be compared.

What it does, in order:

1. A hub on an in-memory store with an arbiter that refuses one custom event type, and a listener.
2. Three agents (alice, bob, carol) on ONE ``LocalLink``: ``link = LocalLink(hub)`` then
   ``HubClient(link, hub=hub)`` per agent. Each agent runs the default handler over a scripted model
   that always gives the same one-line answer. With ``ws`` as the second argument the hub is served
   with ``serve_ws`` instead and the three share ONE ``WsLink`` (the human and the fourth agent of
   later sections each get a ``WsLink`` of their own).
3. Two consulting channels: alice asks bob, carol asks alice; each closes after the reply.
4. A workflow channel whose graph uses a custom ``TransitionTarget`` and a custom
   ``TransitionCondition`` registered with ``register_target`` / ``register_condition``; graphs naming
   unregistered targets/conditions; ``TransitionRegistry()`` vs ``TransitionRegistry.default()``.
5. The arbiter at work: a raw envelope of the refused custom type is answered ``AccessDeniedError``;
   another custom type passes and reaches the other participant.
6. A checkpointed task: ``HubBackedCheckpointStore`` and ``HubClient.checkpoint_task`` /
   ``read_task_checkpoint``; ``TaskMirror`` construction.
7. A human (``register_human``) on the same link asks carol and reads the answer from its queue.
8. A fourth agent whose model fails, inside ``async with``: listeners get the exception itself.
9. carol's HubClient closes: the others on the link keep working, an invite to carol times out;
   a new HubClient takes her identity back with ``attach`` and she answers again.
10. Edges ag2 code matches on: auth and registration errors, frames, URNs, ids.
11. The hub's (async) getters, ``health()`` and the audit log after all that; everything is closed.

Each section runs under a time limit and records a crash instead of stopping the program, so a
difference between two implementations shows up as a difference in the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import re
import sys
from dataclasses import dataclass
from typing import Any, ClassVar

NETWORK = sys.argv[1] if len(sys.argv) > 1 else "ag2.network"
TRANSPORT = sys.argv[2] if len(sys.argv) > 2 else "local"  # or "ws": the same over serve_ws/WsLink
net = importlib.import_module(NETWORK)

# The framework side (the agent class, a scripted model, an in-memory store) is not part of
# ag2.network's public names: each implementation has its own, chosen by the same argument.
if NETWORK == "ag2.network":
    from ag2 import Agent
    from ag2.knowledge import MemoryKnowledgeStore as MemoryStore
    from ag2.testing import TestConfig

    def scripted_agent(name: str, reply: str | BaseException) -> Any:
        return Agent(name, "Answer in one line.", config=TestConfig(reply))

else:
    from ag2net import Agent, MemoryStore, ScriptedModel

    def scripted_agent(name: str, reply: str | BaseException) -> Any:
        return Agent(name, ScriptedModel(reply, loop=True), "Answer in one line.")


SECTION_TIMEOUT = 20.0  # each section takes well under 5 s on ag2
PROGRAM_TIMEOUT = 240.0
INVITE_ACK_TIMEOUT = 6.0  # the hub gives up on an invite nobody acknowledges after this
GOSSIP = "acme.gossip"  # the custom event type the arbiter refuses
NOTE = "acme.note"  # a custom event type it lets through

ANY_ID = re.compile(r"\b[0-9a-f]{32}\b")  # an id nobody labelled
HUB_LABEL = re.compile(r"\b[\w.-]+·([0-9a-f]{4,32})\b")  # ag2net's refusals name a channel discussion·7d80
transcript: list[dict[str, Any]] = []
labels: dict[str, str] = {}  # id -> stable label (agent names, channel labels)


def id_of(label: str) -> str:
    return next(ident for ident, known in labels.items() if known == label)


def norm(value: Any) -> Any:
    """Replace every known id inside ``value`` (strings, lists, dicts) by its label."""
    if isinstance(value, str):
        for ident, label in labels.items():
            value = value.replace(ident, label)

        def by_tail(match: re.Match[str]) -> str:
            known = [label for ident, label in labels.items() if ident.endswith(match.group(1))]
            return known[0] if len(known) == 1 else match.group(0)

        return ANY_ID.sub("<id>", HUB_LABEL.sub(by_tail, value))
    if isinstance(value, list | tuple):
        return [norm(v) for v in value]
    if isinstance(value, dict):
        return {norm(k): norm(v) for k, v in value.items()}
    return value


def record(step: str, **data: Any) -> None:
    transcript.append({"step": step, **norm(data)})


def error(exc: BaseException) -> dict[str, Any]:
    """An exception as data: its class, message, and every class an ``except`` clause could name."""
    ancestry = [c.__name__ for c in type(exc).__mro__ if c not in (object, BaseException, Exception)]
    return {"class": type(exc).__name__, "message": norm(str(exc)), "is_a": ancestry}


async def section(name: str, body) -> None:
    try:
        await asyncio.wait_for(body(), SECTION_TIMEOUT)
    except TimeoutError:
        record(name, crash=f"timed out after {SECTION_TIMEOUT}s")
    except Exception as exc:  # a crash is part of the transcript
        record(name, crash=error(exc))


# --- custom policy pieces, as ag2 users write them ------------------------------------------------


class NoGossipArbiter(net.BaseHubArbiter):
    """Allows everything except envelopes of the custom ``acme.gossip`` type."""

    async def authorize_send(self, envelope, sender, sender_rule, recipients):
        if envelope.event_type == GOSSIP:
            return net.Deny(f"{sender.name} may not post {GOSSIP} envelopes")
        return net.Allow()


class Recorder(net.BaseHubListener):
    """Notes rejected envelopes and channel lifecycle events."""

    def __init__(self) -> None:
        self.rejected: list[dict[str, Any]] = []
        self.channel_events: dict[str, list[str]] = {}
        self.turn_failures: list[dict[str, Any]] = []

    async def on_envelope_rejected(self, envelope, reason) -> None:
        self.rejected.append({"event_type": envelope.event_type, "error": type(reason).__name__})

    async def on_channel_event(self, channel_id, kind, payload) -> None:
        self.channel_events.setdefault(channel_id, []).append(kind)

    async def on_turn_failed(self, channel_id, agent_id, envelope_id, exc) -> None:
        self.turn_failures.append(
            {"channel": channel_id, "agent": agent_id, "error": type(exc).__name__, "text": str(exc)}
        )


@dataclass(slots=True)
class PreviousSpeakerTarget:
    """Hands the turn to the participant before the sender (wrapping round): reverse order."""

    name: ClassVar[str] = "acme.previous_speaker"

    def resolve(self, state, envelope):
        order = state.participant_order
        here = order.index(envelope.sender_id) if envelope.sender_id in order else 0
        return net.TransitionDecision(next_speaker=order[here - 1])


@dataclass(slots=True)
class BodyMentions:
    """True when the turn's text (EV_TEXT ``text`` or EV_PACKET ``body``) mentions ``word``."""

    word: str
    name: ClassVar[str] = "acme.body_mentions"

    def evaluate(self, state, envelope):
        data = envelope.event_data or {}
        text = data.get("body") or data.get("text") or ""
        return self.word.lower() in str(text).lower()


net.register_target(PreviousSpeakerTarget)
net.register_condition(BodyMentions)


# --- helpers over the public API -----------------------------------------------------------------


def text_of(envelope) -> str | None:
    data = envelope.event_data or {}
    for key in ("text", "body"):
        if isinstance(data.get(key), str):
            return data[key]
    return None


async def wal_summary(hub_client, channel_id: str) -> list[dict[str, Any]]:
    """The channel's WAL as (type, from, to, text, reply-to position); the handshake part (invites and
    acks, whose interleaving depends on scheduling) sorted."""
    wal = await hub_client.read_wal(channel_id)
    position = {env.envelope_id: index for index, env in enumerate(wal)}
    rows = [
        {
            "type": env.event_type,
            "from": env.sender_id,
            "to": sorted(env.audience) if env.audience is not None else None,
            "text": text_of(env),
            "reply_to": position.get(env.causation_id) if env.causation_id else None,
        }
        for env in wal
    ]
    opened = next((i for i, r in enumerate(rows) if r["type"] == net.EV_CHANNEL_OPENED), 0)
    handshake = sorted(rows[:opened], key=lambda r: json.dumps(norm([r["type"], r["from"], r["to"]])))
    for row in handshake:
        row["reply_to"] = "handshake" if row["reply_to"] is not None else None
    return handshake + rows[opened:]


async def channel_summary(hub, channel_id: str) -> dict[str, Any]:
    md = await hub.get_channel(channel_id)
    return {
        "type": md.manifest.type,
        "state": md.state.value,
        "close_reason": md.close_reason,
        "participants": [(p.agent_id, p.role.value, p.order) for p in md.participants],
    }


def is_closed(envelope) -> bool:
    return envelope.event_type in (net.EV_CHANNEL_CLOSED, net.EV_CHANNEL_EXPIRED)


# --- the program ---------------------------------------------------------------------------------


async def main() -> None:
    async with contextlib.AsyncExitStack() as stack:
        await run(stack)


async def run(stack: contextlib.AsyncExitStack) -> None:
    hub = await net.Hub.open(
        MemoryStore(),
        ttl_sweep_interval=0,
        expectation_sweep_interval=0,
        invite_ack_timeout=INVITE_ACK_TIMEOUT,
    )
    hub.register_arbiter(NoGossipArbiter())
    recorder = Recorder()
    hub.register_listener(recorder)
    record("hub", arbiter=type(hub.arbiter).__name__)

    if TRANSPORT == "local":
        # Three agents, three HubClients, ONE LocalLink (the human and the fourth agent join it too).
        link = net.LocalLink(hub)

        def on_the_link():
            return net.HubClient(link, hub=hub)

        on_its_own_link = on_the_link
    else:
        # The same over WebSocket: the three agents share ONE WsLink (a connection per HubClient);
        # the human and the fourth agent each get a WsLink of their own.
        server = await stack.enter_async_context(net.serve_ws(hub, "127.0.0.1", 0))
        url = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        link = net.WsLink(url)

        def on_the_link():
            return net.HubClient(link, rpc_timeout=20)

        def on_its_own_link():
            return net.HubClient(net.WsLink(url), rpc_timeout=20)

    clients = {name: on_the_link() for name in ("alice", "bob", "carol")}
    replies = {
        "alice": "Alice here: the budget is approved.",
        "bob": "Bob: four, and the agenda is done.",
        "carol": "Carol: the venue is booked.",
    }
    agents: dict[str, Any] = {}
    for name, hub_client in clients.items():
        agents[name] = await hub_client.register(scripted_agent(name, replies[name]))
        labels[agents[name].agent_id] = name
    alice, carol = agents["alice"], agents["carol"]
    found = await hub.get_agent("bob")
    record(
        "registered",
        agents=[p.name for p in await hub.list_agents()],
        bob=found.agent_id,
        bob_kind=found.kind or "agent",
    )

    async def consult(asker, asker_client, target: str, question: str, label: str, pause=0.0) -> None:
        channel = await asker.open(type="consulting", target=target)
        labels[channel.channel_id] = label
        opened_state = channel.state.value
        await channel.send(question)
        await asyncio.sleep(pause)  # the reply (and the close) may well arrive meanwhile
        closed = await asker.wait_for_channel_event(
            channel_id=channel.channel_id, predicate=is_closed, timeout=20
        )
        try:
            await channel.send("One more thing?")
            again = "accepted"
        except net.NetworkError as exc:
            again = error(exc)
        record(
            label,
            opened_state=opened_state,
            closed_event=closed.event_type,
            closed_reason=closed.event_data.get("reason"),
            channel=await channel_summary(hub, channel.channel_id),
            wal=await wal_summary(asker_client, channel.channel_id),
            send_after_close=again,
            lifecycle=recorder.channel_events.get(channel.channel_id, []),
        )

    await section(
        "consult alice->bob",
        lambda: consult(alice, clients["alice"], "bob", "What is 2 + 2?", "consult alice->bob"),
    )
    await section(
        "consult carol->alice",
        lambda: consult(
            carol, clients["carol"], "alice", "Is the budget ok?", "consult carol->alice", pause=0.5
        ),
    )

    async def workflow() -> None:
        graph = net.TransitionGraph(
            initial_speaker=alice.agent_id,
            transitions=[
                net.Transition(when=BodyMentions("done"), then=net.TerminateTarget(reason="wrapped_up")),
                net.Transition(when=net.Always(), then=PreviousSpeakerTarget(), priority=1),
            ],
        )
        as_data = graph.to_dict()
        again = net.TransitionGraph.loads(graph.dumps())
        channel = await alice.open(type="workflow", target=["bob", "carol"], knobs={"graph": as_data})
        labels[channel.channel_id] = "workflow"
        await channel.send("Plan the offsite.")
        closed = await alice.wait_for_channel_event(
            channel_id=channel.channel_id, predicate=is_closed, timeout=20
        )
        record(
            "workflow",
            graph=as_data,
            reloaded_types=[type(t.then).__name__ for t in again.transitions],
            reloaded_conditions=[type(t.when).__name__ for t in again.transitions],
            closed_reason=closed.event_data.get("reason"),
            channel=await channel_summary(hub, channel.channel_id),
            wal=await wal_summary(clients["alice"], channel.channel_id),
            pending_turns={n: len(await hub.pending_turns_for(a.agent_id)) for n, a in agents.items()},
        )

    await section("workflow", workflow)

    async def unknown_graph_names() -> None:
        outcomes = {}
        for what, data in (
            ("target", {"initial_speaker": "x", "default_target": {"name": "acme.nowhere"}}),
            (
                "condition",
                {
                    "initial_speaker": "x",
                    "transitions": [
                        {
                            "when": {"name": "acme.never", "args": {}},
                            "then": {"name": "stay", "args": {}},
                            "priority": 0,
                        }
                    ],
                },
            ),
        ):
            try:
                net.TransitionGraph.loads(data)
                outcomes[what] = "loaded"
            except net.NetworkError as exc:
                outcomes[what] = error(exc)
        private = net.TransitionRegistry()
        outcomes["fresh_registry_knows_custom"] = _knows(private, "acme.previous_speaker")
        outcomes["default_registry_knows_custom"] = _knows(
            net.TransitionRegistry.default(), "acme.previous_speaker"
        )
        outcomes["fresh_registry_knows_builtin"] = _knows(private, "round_robin")
        record("graph errors", **outcomes)

    await section("graph errors", unknown_graph_names)

    async def arbiter() -> None:
        channel = await alice.open(type="conversation", target="carol")
        labels[channel.channel_id] = "chat alice->carol"
        gossip = net.Envelope(
            channel_id=channel.channel_id,
            sender_id=alice.agent_id,
            audience=None,
            event_type=GOSSIP,
            event_data={"text": "psst"},
        )
        try:
            await alice.send_envelope(gossip)
            refused = "accepted"
        except Exception as exc:
            refused = error(exc)
        try:
            await clients["alice"].post_envelope(
                net.Envelope(channel.channel_id, alice.agent_id, [carol.agent_id], GOSSIP, {})
            )
            refused_raw = "accepted"
        except Exception as exc:
            refused_raw = error(exc)
        note = net.Envelope(
            channel_id=channel.channel_id,
            sender_id=alice.agent_id,
            audience=None,
            event_type=NOTE,
            event_data={"text": "the minutes are attached"},
        )
        note_id = await alice.send_envelope(note)
        seen = await carol.wait_for_channel_event(
            channel_id=channel.channel_id, predicate=lambda e: e.event_type == NOTE, timeout=10
        )
        await channel.close()
        closed = await carol.wait_for_channel_event(
            channel_id=channel.channel_id, predicate=is_closed, timeout=10
        )
        record(
            "arbiter",
            refused=refused,
            refused_raw=refused_raw,
            note_accepted=bool(note_id),
            carol_saw=(seen.event_type, text_of(seen), seen.sender_id),
            closed_reason=closed.event_data.get("reason"),
            rejected=recorder.rejected,
            channel=await channel_summary(hub, channel.channel_id),
            wal=await wal_summary(clients["carol"], channel.channel_id),
        )

    await section("arbiter", arbiter)

    async def checkpoints() -> None:
        store = net.HubBackedCheckpointStore(clients["alice"])
        task_id = "offsite-plan-1"
        before = await store.read(task_id)
        await store.write(task_id, {"step": 1, "done": []})
        await store.write(task_id, {"step": 2, "done": ["venue", "agenda"]})
        after = await store.read(task_id)
        via_client = await clients["alice"].read_task_checkpoint(task_id)
        await clients["alice"].checkpoint_task(task_id, {"step": 3, "done": ["venue", "agenda"]})
        via_hub = await net.HubBackedCheckpointStore(hub).read(task_id)
        # Another agent's client (in-process: the hub trusts it; over the wire: not its task).
        bob_reads = await _outcome(clients["bob"].read_task_checkpoint(task_id))
        bob_writes = await _outcome(clients["bob"].checkpoint_task(task_id, {"step": 666}))
        after_bob = await clients["alice"].read_task_checkpoint(task_id)
        try:
            net.TaskMirror(owner_id=alice.agent_id)
            mirror = "built"
        except TypeError as exc:
            mirror = {k: v for k, v in error(exc).items() if k != "message"}
        mirror_ok = type(net.TaskMirror(hub_client=clients["alice"], owner_id=alice.agent_id)).__name__
        record(
            "checkpoints",
            before=before,
            after=after,
            via_client=via_client,
            via_hub_after_third_write=via_hub,
            other_task=await store.read("never-written"),
            bob_reads=bob_reads,
            bob_writes=bob_writes,
            step_after_bob=after_bob["step"],
            mirror_without_hub=mirror,
            mirror=mirror_ok,
        )

    await section("checkpoints", checkpoints)

    async def human() -> None:
        # A person on the same link: asks carol, reads the answer from the pull queue.
        dana_client = on_its_own_link()
        dana = await dana_client.register_human(net.Passport(name="dana", kind="human"))
        labels[dana.agent_id] = "dana"
        channel = await dana.open(type="consulting", target="carol")
        labels[channel.channel_id] = "consult dana->carol"
        await channel.send("Where is the venue?")
        answer = await dana.next_envelope(
            predicate=lambda e: e.event_type == net.EV_TEXT and e.channel_id == channel.channel_id,
            timeout=10,
        )
        closed = await dana.wait_for_channel_event(
            channel_id=channel.channel_id, predicate=is_closed, timeout=10
        )
        await dana.disconnect()
        try:
            await dana.send(channel.channel_id, "Hello?")
            after = "sent"
        except Exception as exc:
            after = error(exc)
        passport = await hub.get_agent("dana")
        record(
            "human",
            kind=passport.kind,
            answer=(answer.sender_id, text_of(answer)),
            closed_reason=closed.event_data.get("reason"),
            send_after_disconnect=after,
            wal=await wal_summary(dana_client, channel.channel_id),
        )
        await dana_client.close()

    await section("human", human)

    async def failing_turn() -> None:
        # An agent whose model fails: the turn is reported to listeners with the exception itself.
        erin_client = on_its_own_link()
        failing = scripted_agent("erin", RuntimeError("model unavailable"))
        async with await erin_client.register(failing) as erin:
            labels[erin.agent_id] = "erin"
            channel = await alice.open(type="consulting", target="erin")
            labels[channel.channel_id] = "consult alice->erin"
            await channel.send("Can you check the invoice?")
            for _ in range(200):
                if recorder.turn_failures:
                    break
                await asyncio.sleep(0.05)
            state = (await hub.get_channel(channel.channel_id)).state.value
            await channel.close(reason="no answer")
        record(
            "failing turn",
            turn_failures=recorder.turn_failures,
            state_after_failure=state,
            channel=await channel_summary(hub, channel.channel_id),
            erin_after_async_with=await _outcome(hub.get_agent("erin")),
        )
        await erin_client.close()

    await section("failing turn", failing_turn)

    async def carol_leaves() -> None:
        # Closing one HubClient of the shared link leaves the others connected.
        await clients["carol"].close()
        await consult(alice, clients["alice"], "bob", "Still there?", "consult alice->bob again")
        try:
            await alice.open(type="consulting", target="carol")
            outcome = "opened"
        except net.NetworkError as exc:
            outcome = error(exc)
        carols = await hub.list_channels(agent_id=carol.agent_id)
        record(
            "carol left",
            open_to_carol=outcome,
            carol_channels=sorted((md.manifest.type, md.state.value, md.close_reason) for md in carols),
            carol_still_registered=(await hub.get_agent("carol")).name,
        )

    await section("carol left", carol_leaves)

    async def carol_comes_back() -> None:
        # A new HubClient takes carol's registered identity back with attach(); she answers again.
        back = on_the_link()
        clients["carol, back"] = back  # closed with the others
        again = await back.attach(scripted_agent("carol", replies["carol"]), "carol")
        record("carol back", same_id=again.agent_id == carol.agent_id, name=again.passport.name)
        await consult(alice, clients["alice"], "carol", "Are you back?", "consult alice->carol after attach")

    await section("carol back", carol_comes_back)

    async def edges() -> None:
        # Small things ag2 code matches on: error classes and their wording, frames, ids.
        outcomes: dict[str, Any] = {}
        keys = net.ApiKeyAuth({"alice": "k-123"})
        for label, passport, claim in (
            ("empty_token", net.Passport(name="alice"), {"token": ""}),
            ("wrong_token", net.Passport(name="alice"), {"token": "nope"}),
            ("unknown_name", net.Passport(name="zed"), {"token": "k-123"}),
        ):
            outcomes[f"api_key_{label}"] = await _outcome(keys.validate(passport, claim))
        outcomes["register_a_human_as_agent"] = await _outcome(
            clients["bob"].register(Agent("frank"), net.Passport(name="frank", kind="human"))
        )
        outcomes["register_human_of_kind_agent"] = await _outcome(
            clients["bob"].register_human(net.Passport(name="gina", kind="agent"))
        )
        outcomes["bind_unknown_endpoint"] = _call(lambda: hub.bind_endpoint("nope", alice.agent_id))
        outcomes["decode_unknown_frame"] = _call(lambda: net.decode_frame({"kind": "zzz"}))
        hello = net.encode_frame(net.HelloFrame(name="alice"))
        outcomes["hello_frame"] = hello
        outcomes["hello_round_trip"] = type(net.decode_frame(dict(hello))).__name__
        outcomes["urns"] = [net.parse_hub_urn("hub://acme/alice"), net.parse_hub_urn("alice")]
        outcomes["make_id"] = bool(ANY_ID.fullmatch(net.make_id()))
        outcomes["windowed_summary_0"] = _call(lambda: net.WindowedSummary(0))
        outcomes["passport_kind"] = _call(lambda: net.Passport(name="x", kind="huMAn"))
        outcomes["duration_2h"] = net.parse_duration("2h")
        outcomes["unknown_channel"] = await _outcome(hub.get_channel("0" * 32))
        record("edges", **outcomes)

    await section("edges", edges)

    async def getters() -> None:
        mine = await hub.list_channels(agent_id=alice.agent_id)
        live = await clients["alice"].list_channels()
        everything = await clients["alice"].list_channels(include_terminal=True)
        health = hub.health()
        record(
            "getters",
            alice_channels=sorted((md.manifest.type, md.state.value, md.close_reason) for md in mine),
            alice_live=len(live),
            alice_all=len(everything),
            # A channel alice is not in (dana asked carol): in-process any client reads it; over the
            # wire only connections with a participant may.
            alice_reads_dana_channel=await _outcome(
                _state_of(clients["alice"].get_channel(id_of("consult dana->carol")))
            ),
            alice_reads_dana_wal=await _outcome(
                _count(clients["alice"].read_wal(id_of("consult dana->carol")))
            ),
            closed_only=len(await hub.list_channels(state=net.ChannelState.CLOSED)),
            pending_turns={n: len(await hub.pending_turns_for(a.agent_id)) for n, a in agents.items()},
            health={k: health.get(k) for k in ("active_channels", "registered_agents")},
            health_has_ag2_keys=sorted(
                k for k in ("audit_log_bytes", "telemetry_log_bytes", "adapters_loaded") if k in health
            ),
            agent_lookup_missing=await _outcome(hub.get_agent("nobody")),
            audit_kinds=[entry["kind"] for entry in await hub.audit_log.read_all()],
        )

    await section("getters", getters)

    async def close_all() -> None:
        for hub_client in clients.values():
            await hub_client.close()
        await hub.close()
        record("closed", ok=True)

    await section("closing", close_all)


def _knows(registry, name: str) -> bool:
    graph = {"initial_speaker": "x", "default_target": {"name": name, "args": {}}}
    try:
        net.TransitionGraph.loads(graph, registry=registry)
    except net.NetworkError:
        return False
    return True


async def _state_of(awaitable) -> str:
    return (await awaitable).state.value


async def _count(awaitable) -> int:
    return len(await awaitable)


def _call(fn) -> Any:
    try:
        return fn()
    except Exception as exc:
        return error(exc)


async def _outcome(awaitable) -> Any:
    try:
        return await awaitable
    except Exception as exc:
        return error(exc)


if __name__ == "__main__":
    try:
        asyncio.run(asyncio.wait_for(main(), PROGRAM_TIMEOUT))
    finally:
        print(json.dumps({"network": NETWORK, "transport": TRANSPORT, "transcript": transcript}, default=str))

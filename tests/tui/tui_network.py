"""A small, deterministic network for workbench tests: a hub on a frozen clock, scripted agents, a human."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from ag2net import Agent, Hub, HubClient, Passport, Resume, ScriptedModel
from ag2net.client import AgentClient, HumanClient
from ag2net.ids import ManualClock

PLANNER_SKILL = """---
title: Planning Lead
expertise: [planning, budgets]
---

# Planner

Breaks a goal into steps and asks the right peer for each one.
"""


@dataclass
class Network:
    hub: Hub
    hc: HubClient
    human: HumanClient
    planner: AgentClient
    critic: AgentClient
    clock: ManualClock
    conversation: str
    discussion: str


async def until(predicate: Callable[[], bool], timeout: float = 20.0) -> None:
    """Poll until ``predicate`` holds. The limit is generous on purpose: it only matters when the condition
    never comes, and the suite runs two tests at a time on two cores."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def small_network() -> Network:
    clock = ManualClock("2026-03-01T09:30:00.000000Z")
    hub = await Hub.open(
        None, clock=clock, ttl_sweep_interval=0, expectation_sweep_interval=0, invite_ack_timeout=5
    )
    hc = HubClient.local(hub)
    human = await hc.register_human(Passport(name="ana", kind="human"))
    planner = await hc.register(
        Agent(
            "planner", model=ScriptedModel("Step one: gather the numbers.", name="planner-model", loop=True)
        ),
        Passport(name="planner", owner="demo", model="scripted"),
        Resume(["planning"], ["budgets"], "Plans work and delegates."),
        skill_md=PLANNER_SKILL,
    )
    critic = await hc.register(
        Agent("critic", model=ScriptedModel("Looks fine to me.", name="critic-model", loop=True)),
        Passport(name="critic"),
        Resume(["review"], summary="Reviews drafts."),
    )
    conversation = await human.open(type="conversation", target="planner")
    await human.send(conversation.channel_id, "Plan the Q3 budget review.")
    for _ in range(500):  # the planner's reply: invite, ack, opened, question, reply
        if await hc.wal_count(conversation.channel_id) >= 5:
            break
        await asyncio.sleep(0.01)
    await planner.idle()
    discussion = await human.open(type="conversation", target="critic")
    return Network(hub, hc, human, planner, critic, clock, conversation.channel_id, discussion.channel_id)


async def close(network: Network) -> None:
    await network.hc.close()
    await network.hub.close()

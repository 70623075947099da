"""An ag2net agent in a process of its own, attached to a hub over WebSocket (the stepping-in end-to-end tests).

``python tests/helpers/ws_agent.py URL NAME [RPC_TIMEOUT]`` registers (or attaches) the agent NAME on the hub at URL: an
``Agent`` on a ``ScriptedModel`` whose reply names every message its model received, so a test reads from the
channel what the model got (an operator's edit of the history shows in it). It has one tool that needs a
person's OK, ``deploy(target)`` (``requires_approval=True``): a text asking to "deploy TARGET" makes the model
call it, and the reply then quotes the tool's result. Lines on stdout, for the test to wait on:

* ``ready AGENT_ID`` once it is attached;
* ``ran deploy TARGET`` each time the tool body runs (never before a person approved it);
* ``model N`` after each model call (N calls so far).

On a token server it presents ``AG2NET_TOKEN`` (no operator token: it is a participant). It runs until
stdin closes (the test ends it by closing the pipe, or with SIGTERM); the link reconnects by
itself when the hub restarts on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from typing import Any

from ag2net import Agent, HubClient, Passport, Resume, ScriptedModel
from ag2net.agent import ModelCall, tool_call
from ag2net.agent.tool import build_tool
from ag2net.events import ModelMessage, ModelRequest, TextInput, ToolResultEvent


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def seen(call: ModelCall) -> list[str]:
    """The texts of the messages before this turn's input, as the model got them."""
    out = []
    for event in call.history[: call.prior]:
        if isinstance(event, ModelRequest):
            out.append(event.text)
        elif isinstance(event, ModelMessage):
            out.append(event.content)
    return out


def brain(name: str) -> Any:
    calls = 0

    def turn(call: ModelCall) -> Any:
        nonlocal calls
        calls += 1
        say(f"model {calls}")
        text = "\n".join(p.content for p in call.inputs if isinstance(p, TextInput))
        results = [e for e in call.turn_events if isinstance(e, ToolResultEvent)]
        wanted = re.search(r"deploy (\S+)", text)
        if wanted and not results:
            return tool_call("deploy", target=wanted.group(1))
        if results:
            return f"{name}: deploy said {results[-1].result}"
        history = " | ".join(seen(call)) or "nothing"
        return f"{name} read [{history}] then [{text}]"

    return turn


def deploy(target: str) -> str:
    """Deploy the build to a target.

    Args:
        target: Where to deploy.
    """
    say(f"ran deploy {target}")
    return f"deployed to {target}"


async def main(url: str, name: str, rpc_timeout: float) -> None:
    hc = HubClient.connect(url, rpc_timeout=rpc_timeout, token=os.environ.get("AG2NET_TOKEN") or None)
    agent = Agent(
        name,
        ScriptedModel(brain(name), name=f"{name}-scripted", loop=True),
        system_prompt=f"You are {name}, reviewing what others say.",
        tools=[build_tool(deploy, requires_approval=True)],
    )
    if await hc.find_agent_id_remote(name):
        client = await hc.attach(agent, name)
    else:
        client = await hc.register(agent, Passport(name=name, model="ag2net-demo"), Resume())
    say(f"ready {client.agent_id}")
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    eof = asyncio.ensure_future(reader.read())
    waiter = asyncio.ensure_future(stop.wait())
    await asyncio.wait({eof, waiter}, return_when=asyncio.FIRST_COMPLETED)
    for task in (eof, waiter):
        task.cancel()
    with contextlib.suppress(Exception):
        await hc.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 30.0))

"""``NetworkClientPort``/``HubClientPort``: the typed seam the plugin tools, ``identity_prefix``, ``Channel`` and
``ClientTask`` take instead of ``client: Any``.

The real clients satisfy the ports (at run time, and for pyright: a file that hands an ``AgentClient`` to
every tool builder checks clean), and pyright refuses a client that lacks a member the tools use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from ag2net import Agent, Passport, ScriptedModel
from ag2net.client.plugin import identity_prefix
from ag2net.client.port import HubClientPort, NetworkClientPort

ROOT = Path(__file__).resolve().parent.parent


async def test_the_real_clients_are_ports(hc):
    agent = await hc.register(Agent("porter", ScriptedModel("hi")))
    human = await hc.register_human(Passport("operator", kind="human"))
    for client in (agent, human):
        assert isinstance(client, NetworkClientPort)
        assert isinstance(client.hub_client, HubClientPort)
    assert identity_prefix(agent) == f"You are porter (agent_id: {agent.agent_id})."
    assert not isinstance(object(), NetworkClientPort)


CHECKED = """
from typing import Any

from ag2net.channel import ChannelMetadata
from ag2net.client.agent_client import AgentClient
from ag2net.client.channel import Channel
from ag2net.client.human_client import HumanClient
from ag2net.client.hub_client import HubClient
from ag2net.client.plugin import NetworkContextPolicy, NetworkPlugin, identity_prefix
from ag2net.client.port import HubClientPort, NetworkClientPort, TaskLookup
from ag2net.client.runtime import ClientTask
from ag2net.client.tools import make_delegate_tool, make_plugin_tools
from ag2net.tasks import TaskMetadata


def fine(agent: AgentClient, human: HumanClient, hub: HubClient, md: ChannelMetadata, t: TaskMetadata) -> Any:
    NetworkPlugin(agent)
    NetworkContextPolicy(agent)
    identity_prefix(human)
    make_plugin_tools(agent)
    make_delegate_tool(agent)
    Channel(metadata=md, client=human)
    ClientTask(metadata=t, client=agent)
    return ClientTask(metadata=t, client=hub)


def ports(agent: AgentClient, human: HumanClient, hub: HubClient) -> tuple[Any, ...]:
    a: NetworkClientPort = agent
    h: NetworkClientPort = human
    p: HubClientPort = hub
    lookup: TaskLookup = hub
    return a, h, p, lookup


class NoHubClient:
    agent_id = "x"


def refused() -> Any:
    return NetworkPlugin(NoHubClient())  # no passport, hub_client, open...
"""


@pytest.mark.skipif(shutil.which("pyright") is None, reason="pyright (the dev extra) is not installed")
def test_pyright_takes_the_real_clients_and_refuses_a_partial_one(tmp_path):
    source = tmp_path / "uses_ports.py"
    text = textwrap.dedent(CHECKED).lstrip()
    source.write_text(text, encoding="utf-8")
    refused_line = next(
        i for i, line in enumerate(text.splitlines(), 1) if "NetworkPlugin(NoHubClient())" in line
    )
    # A project of its own that finds ag2net in the repository (an editable install's import hook is
    # invisible to pyright, and a stray pyrightconfig.json above the temp dir must not be picked up).
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps({"typeCheckingMode": "basic", "pythonVersion": "3.11", "extraPaths": [str(ROOT)]}),
        encoding="utf-8",
    )
    run = subprocess.run(
        ["pyright", "--outputjson", "-p", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    report = json.loads(run.stdout)
    errors = [d for d in report["generalDiagnostics"] if d["severity"] == "error"]
    shown = [(d["range"]["start"]["line"] + 1, d["message"]) for d in errors]
    assert len(errors) == 1, shown
    line, message = shown[0]
    assert (
        line == refused_line and "NetworkClientPort" in message and '"hub_client" is not present' in message
    ), shown

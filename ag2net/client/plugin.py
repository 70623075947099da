"""``NetworkPlugin``: the five identity-level LLM tools and the identity prefix in the system prompt.

Tools, in order: ``delegate``, ``peers``, ``channels``, ``tasks``, ``context`` (``say`` is adapter-owned).
When attached, "You are {name} (agent_id: {id})." always reaches the model (SPEC §3.17).
"""

from __future__ import annotations

from typing import Any

from ag2net.agent.tool import Tool


class NetworkPlugin:
    """Adds the network tools and the identity prefix to an agent registered through ``client``."""

    name = "network"

    def __init__(self, client: Any) -> None:
        self.client = client

    def prefix(self) -> str:
        return f"You are {self.client.name} (agent_id: {self.client.agent_id})."

    def tools(self) -> list[Tool]:
        from ag2net.client.tools import make_plugin_tools

        return make_plugin_tools(self.client)

    def apply(self, agent: Any) -> None:
        add_prefix = getattr(agent, "add_prompt_prefix", None)
        if add_prefix is not None:
            add_prefix(self.prefix())
        tools = getattr(agent, "tools", None)
        if isinstance(tools, list):
            existing = {t.name for t in tools}
            tools.extend(t for t in self.tools() if t.name not in existing)


__all__ = ["NetworkPlugin"]

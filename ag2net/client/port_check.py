"""Pyright checks that the real clients satisfy the ports (tests/test_client_port.py runs pyright on a
file that hands them to every tool builder). Nothing imports this module: it sits above every client
module, so the checks add no import edge below ``hub_client.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ag2net.client.agent_client import AgentClient
    from ag2net.client.hub_client import HubClient
    from ag2net.client.hub_port import ParticipantHub
    from ag2net.client.human_client import HumanClient
    from ag2net.client.port import HubClientPort, NetworkClientPort, TaskLookup

    def _agent_client_is_a_port(client: AgentClient) -> NetworkClientPort:
        return client

    def _human_client_is_a_port(client: HumanClient) -> NetworkClientPort:
        return client

    def _hub_client_is_a_port(hub_client: HubClient) -> HubClientPort:
        return hub_client

    def _hub_client_looks_up_tasks(hub_client: HubClient) -> TaskLookup:
        return hub_client

    def _hub_client_serves_participants(hub_client: HubClient) -> ParticipantHub:
        return hub_client

"""The server's authorisation is a policy object handed to ``serve_ws`` (``WirePolicy``).

A subclass handed to ``serve_ws(policy=...)`` decides for every connection of that server; the default
enforces the catalogue's access rules (``ag2net.protocol.ops``) plus its own rule per ``policy`` op.
"""

from __future__ import annotations

from typing import Any

import pytest

from ag2net.client import HubClient
from ag2net.errors import AccessDeniedError
from ag2net.identity import Passport
from ag2net.server import WirePolicy, serve_ws


class NoHealth(WirePolicy):
    """Refuses ``health`` to connections without the operator role; everything else as the default."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def authorize(self, conn: Any, op: str, params: dict[str, Any]) -> None:
        self.seen.append(op)
        if op == "health" and not conn.operator:
            raise AccessDeniedError("health is for operators on this server")
        await super().authorize(conn, op, params)


async def test_serve_ws_asks_the_policy_it_was_handed(hub: Any) -> None:
    policy = NoHealth()
    async with serve_ws(hub, "127.0.0.1", 0, policy=policy) as server:
        assert server.policy is policy
        client = HubClient.connect(server.url(), operator=False, rpc_timeout=10, identity_secrets=False)
        try:
            ana = await client.register_human(Passport(name="ana", kind="human"))
            with pytest.raises(AccessDeniedError, match="health is for operators on this server"):
                await client.health()
            # The default rules still apply under the subclass: a connection acts only for its own agents.
            with pytest.raises(AccessDeniedError, match="not bound to agent 'someone-else'"):
                await client.set_skill("someone-else", "# hi")
            await client.set_skill(ana.agent_id, "# ana")
        finally:
            await client.close()
    assert {"register", "health", "set_skill"} <= set(policy.seen)
    assert (await hub.get_skill(ana.agent_id)) == "# ana"


async def test_the_default_policy_reads_the_catalogue(hub: Any) -> None:
    async with serve_ws(hub, "127.0.0.1", 0) as server:
        assert type(server.policy) is WirePolicy
        client = HubClient.connect(server.url(), operator=False, rpc_timeout=10, identity_secrets=False)
        try:
            await client.register_human(Passport(name="ben", kind="human"))
            # list_audit is an operator op in the catalogue.
            with pytest.raises(AccessDeniedError, match="'list_audit' needs the operator role"):
                await client.list_audit()
            assert isinstance(await client.health(), dict)  # a directory op, open on a token-less server
        finally:
            await client.close()

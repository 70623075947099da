"""``ParticipantHub``: what an ``AgentClient`` or ``HumanClient`` uses of the ``HubClient`` it is bound to.

The participants are built by their ``HubClient`` (``register``, ``attach``), so they name it by this
port rather than by the class: the client modules then import in one direction, with ``hub_client.py``
on top. ``port_check.py`` has pyright check that ``HubClient`` satisfies it.
"""

from __future__ import annotations

from typing import Any, Protocol

from ag2net.channel import ChannelMetadata
from ag2net.client.turns import TurnSource
from ag2net.envelope import Envelope
from ag2net.identity import Resume, Rule
from ag2net.tasks import TaskMetadata


class ParticipantHub(TurnSource, Protocol):
    """The ``HubClient`` members a participant client calls (beyond the tools' ``HubClientPort``)."""

    async def ack(
        self, envelope: Envelope, recipient_id: str, status: str = "ack", reason: str = ""
    ) -> None: ...

    async def unregister_agent(self, agent_id: str) -> None: ...

    async def set_resume(self, agent_id: str, resume: Resume) -> Resume: ...

    async def set_skill(self, agent_id: str, skill_md: str | None) -> None: ...

    async def set_rule(self, agent_id: str, rule: Rule) -> Rule: ...

    async def create_channel(  # the parameters ``open`` passes; the HubClient's own has more
        self,
        *,
        creator_id: str,
        manifest_type: str,
        participants: list[str],
        ttl: Any,
        knobs: Any,
        intent: Any,
        labels: Any,
    ) -> ChannelMetadata: ...

    async def post_envelope(self, envelope: Envelope) -> str: ...

    async def explain_send(
        self, channel_id: str, sender_id: str, *, event_type: str | None = None
    ) -> tuple[bool, str]: ...

    async def pending_turns_for(self, agent_id: str) -> list[Any]: ...

    async def observe_task(self, metadata: TaskMetadata) -> TaskMetadata: ...

    async def update_task(
        self, task_id: str, *, state: Any = None, progress: Any = None, result: Any = None, error: Any = None
    ) -> TaskMetadata: ...

    async def close(self) -> None: ...


__all__ = ["ParticipantHub"]

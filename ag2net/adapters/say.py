"""The adapter-owned ``say`` tool: post a text message into the current channel or another one you are in.

Errors come back to the model as ``"Error: ..."`` strings, never as exceptions. The client it is built for
needs ``agent_id``, ``hub_client`` (``get_channel``, ``get_agent``, ``adapter_for_metadata``) and
``send_envelope``.
"""

from __future__ import annotations

import inspect
from typing import Any

from ag2net.agent.tool import ChannelInject, Tool, build_tool
from ag2net.errors import NotFoundError


async def _maybe_await(value: Any) -> Any:
    return await value if inspect.isawaitable(value) else value


def make_say_tool(client: Any) -> Tool:
    """Build ``say`` bound to ``client`` (adapters cache one per agent id)."""

    async def say(
        content: str,
        audience: list[str] | None = None,
        channel_id: str | None = None,
        channel: ChannelInject = None,
    ) -> str:
        """Post a text message into a channel: the current one, or channel_id if you participate there.

        Args:
            content: The message text.
            audience: Peer names or agent ids to address; omit to send to every participant.
            channel_id: Post into this channel (one you participate in) instead of the current one.
        """
        hub_client = client.hub_client
        metadata = None
        if channel_id:
            try:
                metadata = await hub_client.get_channel(channel_id)
            except Exception as exc:
                return f"Error: channel {channel_id!r} not found: {exc}"
            if metadata is None:
                return f"Error: channel {channel_id!r} not found: no such channel"
            if client.agent_id not in metadata.participant_ids():
                return f"Error: not a participant of channel {channel_id!r}"
        elif channel is not None:
            channel_id = channel.channel_id
            metadata = getattr(channel, "metadata", None)
            if metadata is None:
                try:
                    metadata = await hub_client.get_channel(channel_id)
                except Exception as exc:
                    return f"Error: channel {channel_id!r} not found: {exc}"
        else:
            return "Error: no current channel and no channel_id provided"

        audience_ids: list[str] | None = None
        if audience is not None:
            audience_ids = []
            for peer in audience:
                try:
                    passport = await hub_client.get_agent(peer)
                except NotFoundError:
                    return f"Error: peer {peer!r} not found"
                except Exception as exc:
                    return f"Error: peer {peer!r} lookup failed: {exc}"
                if passport is None:
                    return f"Error: peer {peer!r} not found"
                if not getattr(passport, "agent_id", None):
                    return f"Error: peer {peer!r} has no agent_id"
                audience_ids.append(passport.agent_id)

        try:
            adapter = await _maybe_await(hub_client.adapter_for_metadata(metadata))
            envelope = adapter.build_text_envelope(
                channel_id, client.agent_id, content, audience=audience_ids
            )
        except Exception as exc:
            return f"Error: adapter unavailable for channel {channel_id!r}: {exc}"
        try:
            envelope_id = await client.send_envelope(envelope)
        except Exception as exc:
            return f"Error: send failed: {exc}"
        return f"posted envelope {envelope_id}"

    return build_tool(say)


__all__ = ["make_say_tool"]

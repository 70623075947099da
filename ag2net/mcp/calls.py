"""Answering a tool call or a resource read: check the arguments, run the tool, turn a mistake into a
``Refusal`` sentence. No ``mcp`` import (``ag2net.mcp.server`` wraps these for the SDK)."""

from __future__ import annotations

import json
import logging
from typing import Any

from ag2net.errors import NetworkError
from ag2net.mcp import debugging, reading
from ag2net.mcp.network import Network, Refusal
from ag2net.mcp.tools import BY_NAME, check_arguments

logger = logging.getLogger(__name__)

RESOURCE_PAGE = 200
"""Resources one ``resources/list`` page holds."""

HANDLERS = {
    "list_channels": reading.list_channels,
    "read_wal": reading.read_wal,
    "envelope": reading.envelope,
    "projection": reading.projection,
    "turns": reading.turns,
    "compare_turns": reading.compare_turns,
    "visibility": debugging.visibility,
    "state_at": debugging.state_at,
    "causation": debugging.causation,
    "dry_run": debugging.dry_run,
    "replay": debugging.replay,
    "post": debugging.post,
}


def _sentence(text: str) -> str:
    return " ".join(str(text).split())


async def call_tool(
    net: Network, name: str, arguments: dict[str, Any] | None, *, allow_post: bool
) -> dict[str, Any]:
    """The answer of tool ``name``; a ``Refusal`` (one sentence naming the fix) for anything wrong."""
    tool = BY_NAME.get(name)
    if tool is None:
        known = ", ".join(t for t in BY_NAME if allow_post or t != "post")
        raise Refusal(f"there is no tool {name!r}; call one of {known}")
    if name == "post" and not allow_post:
        raise Refusal(
            "post is off: this server is read-only; restart it with 'ag2net mcp --connect ws://HOST:PORT --allow-post' "
            "to post as the workbench's human"
        )
    args = check_arguments(tool, arguments)
    async with net.lock:
        try:
            await net.refresh()
            return await HANDLERS[name](net, args)
        except Refusal:
            raise
        except NetworkError as exc:  # the hub's own refusal: already a sentence
            raise Refusal(f"{name}: {_sentence(str(exc)).rstrip('.')}") from None
        except Exception as exc:  # a fault of this server, said in one line rather than a traceback
            logger.exception("tool %s failed", name)
            raise Refusal(
                f"{name} failed ({type(exc).__name__}: {_sentence(str(exc))[:200]}); this is a bug of ag2net mcp, "
                "report it with the arguments that caused it"
            ) from None


# ----------------------------------------------------------------------------------------- resources

CHANNEL_PREFIX = "ag2net://channels/"
PEER_PREFIX = "ag2net://peers/"


async def resources(net: Network) -> list[dict[str, Any]]:
    """Every channel and every peer card, as ``{uri, name, description, mime_type}``."""
    out = []
    async with net.lock:
        await net.refresh()
        for md in await net.channels():
            label = net.label_for(md.channel_id)
            names = ", ".join(net.name_for(p) for p in md.participant_ids())
            out.append(
                {
                    "uri": CHANNEL_PREFIX + label,
                    "name": label,
                    "description": f"{md.manifest.type} channel of {names}",
                    "mime_type": "application/json",
                }
            )
        for passport in await net.hc.list_agents(limit=None):
            out.append(
                {
                    "uri": PEER_PREFIX + passport.name,
                    "name": passport.name,
                    "description": f"the skill card of {passport.name}",
                    "mime_type": "text/markdown",
                }
            )
    return out


async def read_resource(net: Network, uri: str) -> tuple[str, str]:
    """``(mime type, text)`` of a resource; a ``Refusal`` for a URI that names nothing."""
    async with net.lock:
        await net.refresh()
        if uri.startswith(CHANNEL_PREFIX):
            md = await net.channel(uri.removeprefix(CHANNEL_PREFIX))
            data = {
                "label": net.label_for(md.channel_id),
                "wal_count": await net.wal_count(md.channel_id),
                "participant_names": [net.name_for(p) for p in md.participant_ids()],
                **md.to_dict(),
            }
            return "application/json", json.dumps(data, ensure_ascii=False)
        if uri.startswith(PEER_PREFIX):
            agent_id = net.agent(uri.removeprefix(PEER_PREFIX))
            info = await net.hc.get_skill_info(agent_id)
            return "text/markdown", str(info.get("skill_md") or "")
    raise Refusal(
        f"no resource {uri!r}; list the resources for ag2net://channels/… and ag2net://peers/… URIs"
    )


__all__ = [
    "CHANNEL_PREFIX",
    "HANDLERS",
    "PEER_PREFIX",
    "RESOURCE_PAGE",
    "call_tool",
    "read_resource",
    "resources",
]

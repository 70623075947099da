"""The five plugin tools an agent's LLM gets with ``attach_plugin=True``: ``delegate``, ``peers``, ``channels``,
``tasks`` and ``context`` (reference §6.7, SPEC §3.2, §3.11, §3.12, §3.15).

Each tool returns data (dicts, lists, strings) on success and an ``"Error: ..."`` string on failure, never an
exception, so the model can read what went wrong and try again. The current channel, the running task and
the agent client come in through injected parameters the model never sees; the client the tools were built
for is the fallback when no client is injected. Both are typed as ``NetworkClientPort`` (``ag2net.client.port``):
what the tools use of an ``AgentClient`` and its ``HubClient``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from ag2net.agent.tool import AgentClientInject, ChannelInject, TaskInject, Tool, build_tool
from ag2net.channel import ChannelMetadata
from ag2net.client.port import NetworkClientPort
from ag2net.envelope import (
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_CHANNEL_INVITE_REJECT,
    EV_TASK_CANCEL_REQUEST,
    EV_TEXT,
    Envelope,
    visible_to,
)
from ag2net.errors import NotFoundError
from ag2net.identity import Passport, Resume
from ag2net.skills import render_fallback_skill
from ag2net.tasks import TaskMetadata, TaskState, task_summary

EXCERPT_CHARS = 240
_T = TypeVar("_T")
_ENDED = (EV_CHANNEL_CLOSED, EV_CHANNEL_EXPIRED, EV_CHANNEL_INVITE_REJECT)


def _err(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"


def _unregistered(what: str, name: str) -> str:
    # The hub stamps ``agent_id`` on every passport it hands out; a passport without one is not on the network.
    return f"Error: {what} {name!r} has no agent_id (its passport is not registered with the hub)"


async def _look_up(what: str, key: str, fetch: Callable[[str], Awaitable[_T]]) -> _T | str:
    """``fetch(key)``, or the error text naming the ``what`` that is not found or could not be looked up."""
    try:
        return await fetch(key)
    except NotFoundError:
        return f"Error: {what} {key!r} not found"
    except Exception as exc:
        return f"Error: {what} {key!r} lookup failed: {_err(exc)}"


def _pick(client: NetworkClientPort, injected: NetworkClientPort | None) -> NetworkClientPort:
    """The client injected for this call (the agent running the turn), else the one the tools were built for."""
    return injected if injected is not None else client


def _success_rate(resume: Resume) -> float | None:
    n = sum(s.n for s in resume.observed.values())
    if n == 0:
        return None
    return sum(s.completed for s in resume.observed.values()) / n


def _peer_summary(passport: Passport, resume: Resume) -> dict[str, Any]:
    cost = passport.cost
    return {
        "name": passport.name,
        "agent_id": passport.agent_id,
        "summary": resume.summary,
        "capabilities": resume.capabilities(),
        "observed_success_rate": _success_rate(resume),
        "cost": None
        if cost is None
        else {
            "input_per_mtok": cost.input_per_mtok,
            "output_per_mtok": cost.output_per_mtok,
            "latency_tier": cost.latency_tier,
        },
    }


async def _channel_for(
    me: NetworkClientPort, channel_id: str | None, channel: Any
) -> tuple[ChannelMetadata | None, str]:
    """The metadata of ``channel_id`` (which ``me`` must be in) or of the injected current channel."""
    if not channel_id:
        if channel is None:
            return None, "Error: no current channel and no channel_id provided"
        channel_id = str(channel.channel_id)
    md = await _look_up("channel", channel_id, me.hub_client.get_channel)
    if isinstance(md, str):
        return None, md
    if me.agent_id not in md.participant_ids():
        return None, f"Error: not a participant of channel {channel_id!r}"
    return md, ""


# ---------------------------------------------------------------------------------------------- delegate


def make_delegate_tool(client: NetworkClientPort) -> Tool:
    """``delegate``: a one-shot consult on a fresh consulting channel; returns the target's reply text."""

    async def delegate(
        target: str,
        prompt: str,
        capability: str | None = None,
        timeout: float = 300.0,
        agent_client: AgentClientInject = None,
    ) -> str:
        """Ask another agent one question and get its answer back (a separate consulting channel, safe mid-turn).

        Args:
            target: The peer's name (or agent id) to ask.
            prompt: The question or instruction for the peer.
            capability: The capability you are asking for (recorded on the channel).
            timeout: Seconds to wait for the answer.
        """
        me = _pick(client, agent_client)
        passport = await _delegate_target(me, target)
        if isinstance(passport, str):
            return passport
        target_id = passport.agent_id
        if target_id is None:
            return _unregistered("target", target)
        if target_id == me.agent_id:
            return f"Error: cannot delegate to self (target {target!r} is this agent)"
        try:
            channel = await me.open(
                type="consulting",
                target=target_id,
                knobs={"capability": capability} if capability else None,
            )
        except Exception as exc:
            return f"Error: failed to open consulting channel: {_err(exc)}"
        return await _consult(me, channel, target, target_id, prompt, timeout)

    return build_tool(delegate)


async def _delegate_target(me: NetworkClientPort, target: str) -> Passport | str:
    """The target's passport (a ``functions.`` prefix the model put before a name is tolerated), or the
    error text."""
    hub_client = me.hub_client
    try:
        return await hub_client.get_agent(target)
    except NotFoundError:
        if target.startswith("functions."):
            try:
                return await hub_client.get_agent(target.removeprefix("functions."))
            except NotFoundError:
                pass
        return await _target_not_found(me, target)
    except Exception as exc:
        return f"Error: target {target!r} lookup failed: {_err(exc)}"


async def _consult(
    me: NetworkClientPort, channel: Any, target: str, target_id: str, prompt: str, timeout: float
) -> str:
    """Post the prompt into the consulting channel and wait for the target's answer (or its end)."""
    cid = channel.channel_id
    # Our own handler must not run a turn on the reply: this call is the one waiting for it.
    suppress = getattr(me, "suppress_handler", None)
    if suppress is not None:
        suppress(cid)
    me.ensure_channel_inbox(cid)
    try:
        depth = int(getattr(me, "current_handling_depth", 0) or 0) + 1
        try:
            await channel.send(prompt, audience=[target_id], depth=depth)
        except Exception as exc:
            try:
                await me.hub_client.close_channel(cid, reason="prompt_send_failed")
            except Exception:
                pass
            return f"Error: prompt send failed: {_err(exc)}"
        try:
            env = await me.wait_for_channel_event(
                channel_id=cid,
                predicate=lambda e: (
                    (e.event_type == EV_TEXT and e.sender_id == target_id) or e.event_type in _ENDED
                ),
                timeout=timeout,
            )
        except TimeoutError:
            return f"Error: delegate to {target!r} timed out after {timeout}s"
        except Exception as exc:
            return f"Error: delegate to {target!r} failed: {_err(exc)}"
        if env.event_type != EV_TEXT:
            reason = env.event_data.get("reason") or env.event_type
            return f"Error: delegate to {target!r} channel closed: {reason}"
        text = env.event_data.get("text")
        return text if isinstance(text, str) else ""
    finally:
        unsuppress = getattr(me, "unsuppress_handler", None)
        if unsuppress is not None:
            unsuppress(cid)
        me.discard_channel_inbox(cid)


async def _target_not_found(me: NetworkClientPort, target: str) -> str:
    try:
        names = sorted(
            p.name for p in await me.hub_client.list_agents(limit=None) if p.agent_id != me.agent_id
        )
    except Exception:
        names = []
    if not names:
        return f"Error: target {target!r} not found"
    return f"Error: target {target!r} not found. Available targets: [{', '.join(names)}]"


# ---------------------------------------------------------------------------------------------- peers


def make_peers_tool(client: NetworkClientPort) -> Tool:
    """``peers``: find other agents, or describe one (passport, resume, skill markdown)."""

    async def peers(
        action: Literal["find", "describe"],
        query: str | None = None,
        capability: str | None = None,
        sort_by: Literal["name", "cost", "track_record"] | None = None,
        name: str | None = None,
        limit: int = 20,
        agent_client: AgentClientInject = None,
    ) -> Any:
        """Discover peers on the network.

        Args:
            action: "find" lists peers (not you); "describe" returns one peer's full profile.
            query: find: text to look for in peers' names and summaries.
            capability: find: only peers with this capability.
            sort_by: find: order by "name", "cost" (cheapest first) or "track_record" (best first).
            name: describe: the peer's name or agent id.
            limit: find: at most this many peers.
        """
        me = _pick(client, agent_client)
        if action == "find":
            return await _find_peers(me, query, capability, sort_by, limit)
        if action == "describe":
            return await _describe_peer(me, name)
        return f"Error: unknown action {action!r}; choose from find, describe"

    return build_tool(peers)


async def _find_peers(
    me: NetworkClientPort, query: str | None, capability: str | None, sort_by: str | None, limit: int
) -> Any:
    hub_client = me.hub_client
    if sort_by not in (None, "name", "cost", "track_record"):
        return f"Error: unknown sort_by {sort_by!r}; choose from name, cost, track_record"
    if limit < 1:
        return f"Error: limit must be >= 1, got {limit}"
    try:
        # One extra so dropping the caller still leaves ``limit`` peers.
        found = await hub_client.list_agents(capability=capability, query=query, limit=limit + 1)
        out = []
        for passport in found:
            if passport.agent_id is None or passport.agent_id == me.agent_id:
                continue
            out.append(_peer_summary(passport, await hub_client.get_resume(passport.agent_id)))
    except Exception as exc:
        return f"Error: find failed: {_err(exc)}"
    out = out[:limit]
    if sort_by == "name":
        out.sort(key=lambda p: p["name"])
    elif sort_by == "cost":
        out.sort(key=lambda p: (_cost_key(p) is None, _cost_key(p) or 0.0))
    elif sort_by == "track_record":
        out.sort(key=lambda p: -(p["observed_success_rate"] or 0.0))
    return out


async def _describe_peer(me: NetworkClientPort, name: str | None) -> Any:
    hub_client = me.hub_client
    if not name:
        return "Error: describe requires `name` (or agent_id)"
    passport = await _look_up("peer", name, hub_client.get_agent)
    if isinstance(passport, str):
        return passport
    if passport.agent_id is None:
        return _unregistered("peer", name)
    try:
        resume = await hub_client.get_resume(passport.agent_id)
        skill_md = await hub_client.get_skill(passport.agent_id)
    except Exception as exc:
        return f"Error: describe {name!r} failed: {_err(exc)}"
    return {
        "passport": {
            "name": passport.name,
            "agent_id": passport.agent_id,
            "owner": passport.owner,
            "provider": passport.provider,
            "model": passport.model,
        },
        "resume": {
            "summary": resume.summary,
            "claimed_capabilities": list(resume.claimed_capabilities),
            "domains": list(resume.domains),
            "observed": {
                cap: {"n": s.n, "completed": s.completed, "failed": s.failed, "expired": s.expired}
                for cap, s in resume.observed.items()
            },
        },
        "skill_md": skill_md if skill_md is not None else render_fallback_skill(passport, resume),
    }


def _cost_key(peer: dict[str, Any]) -> float | None:
    cost = peer.get("cost")
    return None if cost is None else cost.get("input_per_mtok")


# ---------------------------------------------------------------------------------------------- channels


def make_channels_tool(client: NetworkClientPort) -> Tool:
    """``channels``: list, open, inspect and close channels this agent participates in."""

    async def channels(
        action: Literal["list", "open", "info", "close"],
        type: str | None = None,
        target: str | list[str] | None = None,
        knobs: dict[str, Any] | None = None,
        intent: str | None = None,
        ttl: str | int | None = None,
        message: str | None = None,
        channel_id: str | None = None,
        state: Literal["active", "all"] = "active",
        agent_client: AgentClientInject = None,
        channel: ChannelInject = None,
    ) -> Any:
        """Manage your channels.

        Args:
            action: "list" your channels, "open" a new one, "info" on one, or "close" one.
            type: open: the channel type (consulting, conversation, discussion, workflow).
            target: open: the peer name(s) or agent id(s) to invite.
            knobs: open: channel settings, e.g. {"max_turns": 6} for a conversation.
            intent: open: a short label saying what the channel is for.
            ttl: open: lifetime, in seconds or like "15m" or "2h".
            message: open: a first message to post as soon as the channel is open.
            channel_id: info/close: the channel (close defaults to the current one).
            state: list: "active" channels only, or "all" including closed ones.
        """
        me = _pick(client, agent_client)
        if action == "list":
            return await _list_channels(me, state)
        if action == "open":
            return await _open_channel(me, type, target, knobs, intent, ttl, message)
        if action == "info":
            if not channel_id:
                return "Error: info requires `channel_id`"
            md, error = await _channel_for(me, channel_id, None)
            if md is None:
                return error
            return md.to_dict()
        if action == "close":
            return await _close_channel(me, channel_id, channel)
        return f"Error: unknown action {action!r}; choose from list, open, info, close"

    return build_tool(channels)


async def _list_channels(me: NetworkClientPort, state: str) -> Any:
    if state not in ("active", "all"):
        return f"Error: unknown state {state!r}; choose from active, all"
    try:
        found = await me.hub_client.list_channels(
            agent_id=me.agent_id, include_terminal=state == "all", limit=None
        )
    except Exception as exc:
        return f"Error: list failed: {_err(exc)}"
    return [
        {
            "channel_id": md.channel_id,
            "type": md.manifest.type,
            "state": md.state.value,
            "participants": md.participant_ids(),
        }
        for md in found
    ]


async def _open_channel(
    me: NetworkClientPort,
    type: str | None,
    target: str | list[str] | None,
    knobs: dict[str, Any] | None,
    intent: str | None,
    ttl: str | int | None,
    message: str | None,
) -> Any:
    if not type or not target:
        return "Error: open requires `type` and `target`"
    try:
        opened = await me.open(type=type, target=target, ttl=ttl, knobs=knobs, intent=intent)
    except Exception as exc:
        return f"Error: open failed: {_err(exc)}"
    result: dict[str, Any] = {
        "channel_id": opened.channel_id,
        "type": opened.metadata.manifest.type,
        "participants": opened.metadata.participant_ids(),
    }
    if message is not None:
        try:
            result["seed_envelope_id"] = await opened.send(message)
        except Exception as exc:
            try:
                await me.hub_client.close_channel(opened.channel_id, reason="seed_failed")
            except Exception:
                pass
            return f"Error: seed send failed: {_err(exc)}"
    return result


async def _close_channel(me: NetworkClientPort, channel_id: str | None, channel: Any) -> Any:
    if not channel_id and channel is None:
        return "Error: close requires `channel_id` or an active channel"
    md, error = await _channel_for(me, channel_id, channel)
    if md is None:
        return error
    try:
        closed = await me.hub_client.close_channel(md.channel_id, reason="closed_by_agent")
    except Exception as exc:
        return f"Error: close failed: {_err(exc)}"
    return {
        "channel_id": closed.channel_id,
        "state": closed.state.value,
        "close_reason": closed.close_reason,
    }


# ---------------------------------------------------------------------------------------------- tasks


def make_tasks_tool(client: NetworkClientPort) -> Tool:
    """``tasks``: report on the running task, and look at, wait for or cancel any task the hub has seen."""

    async def tasks(
        action: Literal["progress", "complete", "list", "status", "wait", "cancel"],
        payload: Any = None,
        result: Any = None,
        task_id: str | None = None,
        reason: str = "",
        scope: Literal["own", "all"] = "own",
        state: Literal["active", "all"] = "active",
        timeout: float = 300.0,
        poll_interval: float = 0.1,
        limit: int = 20,
        agent_client: AgentClientInject = None,
        task: TaskInject = None,
    ) -> Any:
        """Work with tasks.

        Args:
            action: "progress"/"complete" report on the task you are running; "list", "status", "wait" and
                "cancel" act on any task.
            payload: progress: what to report, e.g. {"step": 2, "of": 3}.
            result: complete: the task's result.
            task_id: status/wait/cancel: the task.
            reason: cancel: why you ask the owner to cancel.
            scope: list: "own" tasks or "all" tasks.
            state: list: "active" tasks only or "all".
            timeout: wait: seconds to wait for the task to end.
            poll_interval: wait: seconds between checks.
            limit: list: at most this many tasks.
        """
        me = _pick(client, agent_client)
        if action in ("progress", "complete"):
            return await _report_on_task(action, task, payload, result)
        if action == "list":
            return await _list_tasks(me, scope, state, limit)
        if action in ("status", "wait", "cancel"):
            if not task_id:
                return f"Error: {action} requires `task_id`"
            md = await _task(me, task_id)
            if isinstance(md, str):
                return md
            if action == "status":
                return task_summary(md)
            if action == "wait":
                return await _wait_for_task(me, md, task_id, timeout, poll_interval)
            return await _request_cancel(me, md, task_id, reason)
        return f"Error: unknown action {action!r}; choose from progress, complete, list, status, wait, cancel"

    return build_tool(tasks)


async def _report_on_task(action: str, task: Any, payload: Any, result: Any) -> str:
    if task is None:
        return f"Error: {action} requires an active `agent.task(...)` block"
    try:
        if action == "progress":
            await task.progress(payload)
            return f"progress emitted on {task.task_id}"
        await task.complete(result)
        return f"completed {task.task_id}"
    except Exception as exc:
        return f"Error: {action} failed: {_err(exc)}"


async def _list_tasks(me: NetworkClientPort, scope: str, state: str, limit: int) -> Any:
    if scope not in ("own", "all"):
        return f"Error: unknown scope {scope!r}; choose from own, all"
    if state not in ("active", "all"):
        return f"Error: unknown state {state!r}; choose from active, all"
    if limit < 1:
        return f"Error: limit must be >= 1, got {limit}"
    try:
        found = await me.hub_client.list_tasks(
            agent_id=me.agent_id if scope == "own" else None, limit=4 * limit
        )
    except Exception as exc:
        return f"Error: list failed: {_err(exc)}"
    if state == "active":
        found = [t for t in found if not t.is_terminal()]
    return [task_summary(t) for t in found[:limit]]


async def _task(me: NetworkClientPort, task_id: str) -> TaskMetadata | str:
    """The task's metadata, or the error text."""
    return await _look_up("task", task_id, me.hub_client.get_task)


async def _wait_for_task(
    me: NetworkClientPort, md: TaskMetadata, task_id: str, timeout: float, poll_interval: float
) -> Any:
    deadline = time.monotonic() + max(timeout, 0.0)
    while not md.is_terminal():
        if time.monotonic() >= deadline:
            return f"Error: task {task_id!r} did not complete within {timeout}s"
        await asyncio.sleep(max(poll_interval, 0.01))
        try:
            md = await me.hub_client.get_task(task_id)
        except Exception as exc:
            return f"Error: task {task_id!r} lookup failed: {_err(exc)}"
    return task_summary(md)


async def _request_cancel(me: NetworkClientPort, md: TaskMetadata, task_id: str, reason: str) -> str:
    """Ask the task's owner to cancel it (an ``EV_TASK_CANCEL_REQUEST`` into the task's channel)."""
    if md.is_terminal():
        return f"task {task_id!r} is already {TaskState(md.state).value}"
    if not md.channel_id:
        return f"Error: task {task_id!r} has no associated channel to post the cancel request into"
    try:
        await me.send_envelope(
            Envelope(
                channel_id=md.channel_id,
                sender_id=me.agent_id,
                audience=[md.owner_id],
                event_type=EV_TASK_CANCEL_REQUEST,
                event_data={"task_id": task_id, "reason": reason},
                task_id=task_id,
            )
        )
    except Exception as exc:
        return f"Error: cancel request failed: {_err(exc)}"
    return f"cancel_request posted to {me.hub_client.name_for(md.owner_id)} for task {task_id}"


# ---------------------------------------------------------------------------------------------- context


def make_context_tool(client: NetworkClientPort) -> Tool:
    """``context``: search past content (a channel, or the agent's own knowledge) or quote a speaker."""

    async def context(
        action: Literal["search", "quote"],
        query: str | None = None,
        scope: Literal["channel", "knowledge"] = "channel",
        speaker: str | None = None,
        recent_n: int = 1,
        limit: int = 10,
        channel_id: str | None = None,
        agent_client: AgentClientInject = None,
        channel: ChannelInject = None,
    ) -> Any:
        """Look up earlier content.

        Args:
            action: "search" for text, or "quote" what someone said recently.
            query: search: the text to look for (case-insensitive).
            scope: search: "channel" (the current one, or channel_id) or "knowledge" (your own notes).
            speaker: quote: the peer's name or agent id.
            recent_n: quote: how many of their latest messages.
            limit: search: at most this many matches.
            channel_id: search/quote: another channel you participate in (default: the current one).
        """
        me = _pick(client, agent_client)
        if action == "search":
            if not query:
                return "Error: search requires `query`"
            if limit < 1:
                return f"Error: limit must be >= 1, got {limit}"
            if scope == "knowledge":
                return await _search_knowledge(me, query, limit)
            if scope != "channel":
                return f"Error: unknown scope {scope!r}; choose from channel, knowledge"
            return await _search_channel(me, query, limit, channel_id, channel)
        if action == "quote":
            return await _quote(me, speaker, recent_n, channel_id, channel)
        return f"Error: unknown action {action!r}; choose from search, quote"

    return build_tool(context)


async def _search_knowledge(me: NetworkClientPort, query: str, limit: int) -> Any:
    try:
        found = await me.hub_client.search_knowledge(me.agent_id, query, limit)
    except Exception as exc:
        return f"Error: knowledge search failed: {_err(exc)}"
    return [
        {
            "id": item.get("id"),
            "source": item.get("source", ""),
            "when": item.get("at", ""),
            "excerpt": _excerpt(item.get("text", "")),
        }
        for item in found[:limit]
    ]


async def _search_channel(
    me: NetworkClientPort, query: str, limit: int, channel_id: str | None, channel: Any
) -> Any:
    md, error = await _channel_for(me, channel_id, channel)
    if md is None:
        return error
    needle = query.casefold()
    out = []
    for env, text in await _texts(me, md):
        if needle in text.casefold():
            out.append(
                {
                    "envelope_id": env.envelope_id,
                    "sender_id": env.sender_id,
                    "when": env.created_at,
                    "excerpt": _excerpt(text),
                }
            )
            if len(out) >= limit:
                break
    return out


async def _quote(
    me: NetworkClientPort, speaker: str | None, recent_n: int, channel_id: str | None, channel: Any
) -> Any:
    if not speaker:
        return "Error: quote requires `speaker`"
    if recent_n < 1:
        return f"Error: recent_n must be >= 1, got {recent_n}"
    md, error = await _channel_for(me, channel_id, channel)
    if md is None:
        return error
    try:
        speaker_id = (await me.hub_client.get_agent(speaker)).agent_id
    except NotFoundError:
        return f"Error: peer {speaker!r} not found"
    except Exception as exc:
        return f"Error: peer {speaker!r} lookup failed: {_err(exc)}"
    said = [(env, text) for env, text in await _texts(me, md) if env.sender_id == speaker_id]
    return [
        {"envelope_id": env.envelope_id, "when": env.created_at, "text": text}
        for env, text in said[-recent_n:]
    ]


async def _texts(me: NetworkClientPort, md: ChannelMetadata) -> list[tuple[Envelope, str]]:
    """The channel's messages this agent can see, as (envelope, text), in WAL order.

    Text is what the channel's adapter renders for the LLM: ``EV_TEXT`` everywhere, plus workflow packets.
    """
    hub_client = me.hub_client
    render = hub_client.adapter_for_metadata(md).render_envelope
    out = []
    for env in await hub_client.read_wal(md.channel_id):
        if not visible_to(env, me.agent_id):
            continue
        text = render(env)
        if text:
            out.append((env, text))
    return out


# ---------------------------------------------------------------------------------------------- plugin


def make_plugin_tools(client: NetworkClientPort) -> list[Tool]:
    """The plugin's tools for ``client``, in order: delegate, peers, channels, tasks, context."""
    return [
        make_delegate_tool(client),
        make_peers_tool(client),
        make_channels_tool(client),
        make_tasks_tool(client),
        make_context_tool(client),
    ]


__all__ = [
    "EXCERPT_CHARS",
    "make_channels_tool",
    "make_context_tool",
    "make_delegate_tool",
    "make_peers_tool",
    "make_plugin_tools",
    "make_tasks_tool",
]

"""``NetworkPlugin``: the five identity-level LLM tools and the identity prefix in the system prompt, plus ag2's
plugin builder methods for adding your own tools, prompts, observers, middleware, policies and a human-input hook,
and ``require_approval`` (which tool calls wait for a person).

Tools, in order: ``delegate``, ``peers``, ``channels``, ``tasks``, ``context`` (``say`` is adapter-owned), then
the tools added with ``tool``/``add_tool``. When attached, "You are {name} (agent_id: {id})." always reaches
the model (SPEC §3.17). What the builders add goes into the agent's ``hooks`` (see ``ag2net.agent.hooks``)
when the plugin is applied — and, unlike ag2 (where additions after ``_apply_plugin`` are lost), additions made
after ``apply`` reach the agents the plugin was already applied to.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ag2net.agent.hooks import (
    ApprovalPolicy,
    Observer,
    TurnHooks,
    as_observer,
    check_middleware,
    check_policy,
    check_prompt,
)
from ag2net.agent.tool import Tool, as_tool, build_tool
from ag2net.client.port import NetworkClientPort


def identity_prefix(client: NetworkClientPort) -> str:
    """ "You are {name} (agent_id: {id})." for a registered client."""
    name = getattr(client, "name", None) or client.passport.name
    return f"You are {name} (agent_id: {client.agent_id})."


class NetworkContextPolicy:
    """Assembly policy: puts "You are {name} (agent_id: {id})." before the system prompt of every model call.

    ``attach_plugin=True`` already adds this prefix to the agent (SPEC §3.17); the policy is for agents
    registered with ``attach_plugin=False`` (``plugin.add_policy(NetworkContextPolicy(client))``). It adds the
    prefix only once, so it is harmless next to the plugin.
    """

    name = "network_context"

    def __init__(self, client: NetworkClientPort) -> None:
        self.client = client

    async def apply(self, prompts: list[str], events: list[Any], context: Any) -> tuple[list[str], list[Any]]:
        prefix = identity_prefix(self.client)
        if prefix in prompts:
            return list(prompts), events
        return [prefix, *prompts], events


def _schema_parameters(schema: dict[str, Any]) -> tuple[dict[str, Any], str | None, str | None]:
    """``(parameters, name, description)`` from a full function schema or a bare parameters schema."""
    if not isinstance(schema, dict):
        raise TypeError(f"tool schema must be a dict (a JSON schema), got {type(schema).__name__}")
    function = schema.get("function") if isinstance(schema.get("function"), dict) else None
    if function is None and "parameters" in schema and "name" in schema:
        function = schema
    if function is not None:
        params = function.get("parameters", {"type": "object", "properties": {}})
        return dict(params), function.get("name"), function.get("description")
    return dict(schema), None, None


def _in_thread(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def run(**kwargs: Any) -> Any:
        return asyncio.to_thread(fn, **kwargs)

    return run


class NetworkPlugin:
    """Adds the network tools and the identity prefix to an agent registered through ``client``.

    ag2's builder methods work here too: ``tool``/``add_tool`` (offered to the model after the five network
    tools), ``prompt`` (a function whose text joins the system prompt every turn), ``observer``/``add_observer``
    (called with each turn event), ``add_middleware``/``insert_middleware`` (wrap turns, model calls and tool
    executions), ``add_policy`` (transform prompts and history before each model call) and ``hitl_hook``
    (answers ``TurnContext.input(...)`` from tools).
    """

    name = "network"

    def __init__(self, client: NetworkClientPort) -> None:
        self.client = client
        self._tools: list[Tool] = []
        self.hooks = TurnHooks()
        self._agents: list[Any] = []

    # --- the network part -------------------------------------------------------------------------------
    def prefix(self) -> str:
        return identity_prefix(self.client)

    def tools(self) -> list[Tool]:
        """The five network tools, then the tools added with ``tool``/``add_tool``."""
        from ag2net.client.tools import make_plugin_tools

        return [*make_plugin_tools(self.client), *self._tools]

    def apply(self, agent: Any) -> None:
        """Give ``agent`` the prefix, the tools (an agent's own same-named tool is kept) and the hooks."""
        add_prefix = getattr(agent, "add_prompt_prefix", None)
        if add_prefix is not None:
            add_prefix(self.prefix())
        self._offer(agent, self.tools())
        hooks = getattr(agent, "hooks", None)
        if isinstance(hooks, TurnHooks):
            hooks.extend(self.hooks)
        if not any(a is agent for a in self._agents):
            self._agents.append(agent)

    @staticmethod
    def _offer(agent: Any, tools: Iterable[Tool]) -> None:
        existing = getattr(agent, "tools", None)
        if isinstance(existing, list):
            names = {t.name for t in existing}
            existing.extend(t for t in tools if t.name not in names)

    def _every_hooks(self) -> list[TurnHooks]:
        """The plugin's hooks (for agents it is applied to later), then those of every agent it is applied to:
        a builder changes them all alike."""
        agents = [h for a in self._agents if isinstance(h := getattr(a, "hooks", None), TurnHooks)]
        return [self.hooks, *agents]

    # --- ag2's builder methods --------------------------------------------------------------------------
    def tool(
        self,
        function: Callable[..., Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        schema: dict[str, Any] | None = None,
        sync_to_thread: bool = True,
        middleware: Iterable[Callable[..., Any]] = (),
        requires_approval: bool = False,
    ) -> Any:
        """Make ``function`` a tool the model is offered: ``@plugin.tool`` or ``@plugin.tool(name=...)``.

        ``schema`` replaces the parameters schema built from the type hints (a full ``{"type": "function",
        "function": {...}}`` schema or a bare ``{"type": "object", ...}``); a plain function runs in a worker
        thread unless ``sync_to_thread=False``; ``middleware`` wraps this tool's execution, each
        ``mw(call_next, call_event, context)``; ``requires_approval`` makes each call wait for a person
        (``Tool.requires_approval``). Returns the ``Tool``.
        """

        def make(fn: Callable[..., Any]) -> Tool:
            if isinstance(fn, Tool):
                built = fn
            else:
                if not callable(fn):
                    raise TypeError(f"plugin.tool needs a function, got {type(fn).__name__}")
                built = build_tool(fn, name=name, description=description)
                if sync_to_thread and not inspect.iscoroutinefunction(fn):
                    built = dataclasses.replace(built, fn=_in_thread(fn))
            changes: dict[str, Any] = {}
            if schema is not None:
                params, schema_name, schema_description = _schema_parameters(schema)
                changes["parameters"] = params
                if name is None and schema_name:
                    changes["name"] = schema_name
                if description is None and schema_description is not None:
                    changes["description"] = schema_description
            if isinstance(fn, Tool) and name is not None:
                changes["name"] = name
            if isinstance(fn, Tool) and description is not None:
                changes["description"] = description
            mws = tuple(middleware)
            for mw in mws:
                if not callable(mw):
                    raise TypeError(
                        f"tool middleware must be callable as mw(call_next, event, context), got {type(mw).__name__}"
                    )
            if mws:
                changes["middleware"] = (*built.middleware, *mws)
            if requires_approval:
                changes["requires_approval"] = True
            if changes:
                built = dataclasses.replace(built, **changes)
            self.add_tool(built)
            return built

        if function is None:
            return make
        return make(function)

    def add_tool(self, t: Any) -> None:
        """Offer ``t`` (a ``Tool`` or a plain function) to the model; a second tool of the same name is refused."""
        built = as_tool(t)
        taken = {x.name for x in self._tools} | {"delegate", "peers", "channels", "tasks", "context"}
        if built.name in taken:
            raise ValueError(
                f"this plugin already offers a tool named {built.name!r}; give the new one another name "
                "(plugin.tool(fn, name=...))"
            )
        self._tools.append(built)
        for agent in self._agents:
            self._offer(agent, [built])

    def prompt(self, func: Callable[..., Any] | str | None = None) -> Any:
        """Add a prompt function (``@plugin.prompt`` or ``@plugin.prompt()``): its text joins the system prompt
        on every turn, after the agent's own prompt. It may take the ``TurnContext`` as its one argument and
        may be async; returning None adds nothing. Returns ``func``."""

        def register(fn: Any) -> Any:
            check_prompt(fn)
            for hooks in self._every_hooks():
                hooks.prompts.append(fn)
            return fn

        if func is None:
            return register
        return register(func)

    def observer(self, condition: Any = None, callback: Callable[..., Any] | None = None) -> Any:
        """Call ``callback(event)`` for each turn event matching ``condition`` (an event type, a tuple or union of
        types, a predicate, or None for every event): ``plugin.observer(ModelResponse, cb)`` or as a decorator
        ``@plugin.observer(ToolCallEvent)``. Returns the callback."""

        def register(cb: Callable[..., Any]) -> Callable[..., Any]:
            self.add_observer(Observer(cb, condition))
            return cb

        if callback is None:
            Observer(lambda event: None, condition)  # a bad condition fails here, not at the first event
            return register
        return register(callback)

    def add_observer(self, observer: Any) -> None:
        """Add an ``Observer`` (or a callable, which then sees every event)."""
        obs = as_observer(observer)
        for hooks in self._every_hooks():
            hooks.observers.append(obs)

    def hitl_hook(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Answer tools' ``await context.input(question)``: ``func(request)`` gets a ``HumanInputRequest``
        (``content``, ``timeout``) and returns the answer (a string, or an object with a string ``content``),
        sync or async. One hook: a later one replaces it. Returns ``func``."""
        if not callable(func):
            raise TypeError(f"hitl_hook needs a function taking the request, got {type(func).__name__}")
        for hooks in self._every_hooks():
            hooks.hitl_hook = func
        return func

    def require_approval(
        self, *tools: str, when: Callable[[str, dict[str, Any]], Any] | None = None
    ) -> NetworkPlugin:
        """Make calls of the named tools (``"*"``: every tool), or the calls ``when(tool_name, arguments)``
        picks, wait for a person before they run (on a hub: an approval in the inbox; alone: the human-input
        hook gets a ``ToolApprovalRequest``). Returns the plugin."""
        policy = ApprovalPolicy(tuple(tools), when)
        for hooks in self._every_hooks():
            hooks.approvals.append(policy)
        return self

    def add_middleware(self, m: Any) -> NetworkPlugin:
        """Append middleware as the innermost layer (entered last, closest to the model). Returns the plugin."""
        check_middleware(m)
        for hooks in self._every_hooks():
            hooks.middleware.append(m)
        return self

    def insert_middleware(self, m: Any) -> NetworkPlugin:
        """Insert middleware as the outermost layer (entered first, left last). Returns the plugin."""
        check_middleware(m)
        for hooks in self._every_hooks():
            hooks.middleware.insert(0, m)
        return self

    def add_policy(self, policy: Any) -> NetworkPlugin:
        """Append an assembly policy (``apply(prompts, events, context) -> (prompts, events)``, sync or async),
        run in order before every model call. Returns the plugin."""
        check_policy(policy)
        for hooks in self._every_hooks():
            hooks.policies.append(policy)
        return self


__all__ = ["NetworkContextPolicy", "NetworkPlugin", "identity_prefix"]

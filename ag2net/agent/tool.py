"""Tools an LLM may call: ``@tool`` builds a JSON schema from type hints and the docstring.

Parameters annotated with an ``*Inject`` type are filled from the turn's dependencies and never
appear in the schema the model sees.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, get_args, get_origin

CHANNEL_DEP = "ag2.network.channel"
CHANNEL_STATE_DEP = "ag2.network.channel_state"
AGENT_CLIENT_DEP = "ag2.network.agent_client"
HUB_DEP = "ag2.network.hub"
TASK_DEP = "ag2.task"


@dataclass(frozen=True, slots=True)
class Inject:
    """Marks a parameter as filled from ``dependencies[key]`` (``default`` when absent)."""

    key: str
    default: Any = None


ChannelInject = Annotated[Any, Inject(CHANNEL_DEP)]
ChannelStateInject = Annotated[Any, Inject(CHANNEL_STATE_DEP)]
AgentClientInject = Annotated[Any, Inject(AGENT_CLIENT_DEP)]
HubInject = Annotated[Any, Inject(HUB_DEP)]
TaskInject = Annotated[Any, Inject(TASK_DEP)]


@dataclass(slots=True)
class Tool:
    """A callable the model can ask for, with the JSON schema it is shown."""

    name: str
    description: str
    parameters: dict[str, Any]
    fn: Callable[..., Any]
    injected: dict[str, Inject] = field(default_factory=dict)
    middleware: tuple[Any, ...] = ()
    """Wrappers around this tool's execution, each ``mw(call_next, call_event, context)``, first outermost."""
    requires_approval: bool = False
    """A person approves each call before it runs (on a hub: ``request_approval``, answered in the workbench's
    inbox; alone: the agent's human-input hook). A denied call returns ``denied by NAME: REASON`` to the
    model as an error result; an edited call runs with the person's arguments."""

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema (``{"type": "function", "function": {...}}``)."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    async def call(self, arguments: dict[str, Any], dependencies: dict[str, Any] | None = None) -> Any:
        """Run the tool with model-given ``arguments`` plus injected dependencies."""
        deps = dependencies if dependencies is not None else {}
        kwargs = dict(arguments)
        for pname, marker in self.injected.items():
            kwargs.pop(pname, None)  # the model may not set an injected parameter
            kwargs[pname] = deps.get(marker.key, marker.default)
        result = self.fn(**kwargs)
        if inspect.isawaitable(result):
            result = await typing.cast(Awaitable[Any], result)
        return result


_JSON_TYPES: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def type_schema(annotation: Any) -> dict[str, Any]:
    """JSON schema for a Python annotation (str, int, float, bool, list[...], dict, Literal, Optional)."""
    if annotation is inspect.Parameter.empty or annotation is Any:
        return {}
    origin = get_origin(annotation)
    if origin is Annotated:
        return type_schema(get_args(annotation)[0])
    if origin is Literal:
        values = list(get_args(annotation))
        schema: dict[str, Any] = {"enum": values}
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and next(iter(kinds)) in _JSON_TYPES:
            schema["type"] = _JSON_TYPES[next(iter(kinds))]
        return schema
    if origin in (typing.Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return type_schema(args[0])
        return {"anyOf": [type_schema(a) for a in args]}
    if origin in (list, tuple, set, frozenset):
        args = get_args(annotation)
        return {"type": "array", "items": type_schema(args[0]) if args else {}}
    if origin is dict or annotation is dict:
        return {"type": "object"}
    if annotation is list:
        return {"type": "array"}
    if annotation in _JSON_TYPES:
        return {"type": _JSON_TYPES[annotation]}
    return {}


_PARAM_SECTIONS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "other parameters",
}
_SECTIONS = _PARAM_SECTIONS | {
    "returns",
    "return",
    "yields",
    "yield",
    "raises",
    "raise",
    "examples",
    "example",
    "notes",
    "note",
    "attributes",
    "see also",
    "warnings",
    "warning",
    "references",
    "todo",
}
_SPHINX_FIELD = re.compile(r"^:(\w+)(?:\s+([^:]+))?:\s*(.*)$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _section_header(lines: list[str], i: int) -> str | None:
    """The section name when line ``i`` opens a Google (``Args:``) or NumPy (``Parameters`` + dashes) section."""
    stripped = lines[i].strip()
    if stripped.endswith(":") and stripped[:-1].strip().lower() in _SECTIONS:
        return stripped[:-1].strip().lower()
    underline = lines[i + 1].strip() if i + 1 < len(lines) else ""
    if stripped.lower() in _SECTIONS and underline and set(underline) == {"-"}:
        return stripped.lower()
    return None


def _param_docs(doc: str) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and per-parameter text.

    Understands Google style (``Args:`` then ``name (type): text`` with indented continuation
    lines), NumPy style (``Parameters`` / ``----------`` then ``name : type`` and indented text) and
    Sphinx fields (``:param name: text``). The description is the text before the first section
    or field, joined into one line.
    """
    lines = inspect.cleandoc(doc).splitlines() if doc else []
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    numpy = False
    entry_indent = -1
    current: str | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        header = _section_header(lines, i)
        if header is not None:
            section, current, entry_indent = header, None, -1
            numpy = not stripped.endswith(":")
            i += 2 if numpy else 1
            continue
        field_match = _SPHINX_FIELD.match(stripped)
        if field_match:
            kind, target, text = field_match.groups()
            section, current = "sphinx", None
            if kind in ("param", "parameter", "arg", "argument", "key", "keyword") and target:
                name = target.split()[-1]
                current = name
                params[name] = text.strip()
            i += 1
            continue
        if section is None:
            summary.append(stripped)
        elif section == "sphinx":
            if current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
        elif section in _PARAM_SECTIONS and stripped:
            if entry_indent < 0:
                entry_indent = _indent(line)
            if _indent(line) <= entry_indent:
                if numpy:
                    name = stripped.partition(":")[0]
                    text = ""
                else:
                    name, _, text = stripped.partition(":")
                    name = name.split("(")[0]
                current = name.strip().lstrip("*")
                params[current] = text.strip()
            elif current:
                params[current] = f"{params[current]} {stripped}".strip()
        i += 1
    return " ".join(s for s in summary if s).strip(), params


def _inject_marker(annotation: Any) -> Inject | None:
    if get_origin(annotation) is Annotated:
        for meta in get_args(annotation)[1:]:
            if isinstance(meta, Inject):
                return meta
    return None


def build_tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Tool:
    """Build a ``Tool`` from a typed function."""
    hints = typing.get_type_hints(fn, include_extras=True)
    summary, param_docs = _param_docs(inspect.getdoc(fn) or "")
    properties: dict[str, Any] = {}
    required: list[str] = []
    injected: dict[str, Inject] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            continue
        annotation = hints.get(pname, param.annotation)
        marker = _inject_marker(annotation)
        if marker is not None:
            injected[pname] = marker
            continue
        prop = type_schema(annotation)
        if pname in param_docs:
            prop["description"] = param_docs[pname]
        if param.default is inspect.Parameter.empty:
            required.append(pname)
        else:
            try:
                json.dumps(param.default)
                prop["default"] = param.default
            except (TypeError, ValueError):
                pass
        properties[pname] = prop
    parameters: dict[str, Any] = {"type": "object", "properties": properties, "required": required}
    return Tool(
        name=name or fn.__name__,
        description=description if description is not None else summary,
        parameters=parameters,
        fn=fn,
        injected=injected,
        requires_approval=bool(requires_approval),
    )


@typing.overload
def tool(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Tool: ...


@typing.overload
def tool(
    fn: None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator: ``@tool`` or ``@tool(name=..., description=..., requires_approval=True)`` turns a function
    into a ``Tool`` (``requires_approval``: a person approves each call before it runs)."""
    if fn is None:
        return lambda f: build_tool(
            f, name=name, description=description, requires_approval=requires_approval
        )
    return build_tool(fn, name=name, description=description, requires_approval=requires_approval)


def as_tool(value: Tool | Callable[..., Any]) -> Tool:
    """Accept a ``Tool`` or a plain function where a tool is expected."""
    return value if isinstance(value, Tool) else build_tool(value)


__all__ = [
    "AGENT_CLIENT_DEP",
    "CHANNEL_DEP",
    "CHANNEL_STATE_DEP",
    "HUB_DEP",
    "TASK_DEP",
    "AgentClientInject",
    "ChannelInject",
    "ChannelStateInject",
    "HubInject",
    "Inject",
    "TaskInject",
    "Tool",
    "as_tool",
    "build_tool",
    "tool",
    "type_schema",
]

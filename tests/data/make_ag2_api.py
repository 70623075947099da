"""Write ``ag2_network_1_2_1_api.json``: the public surface of ``ag2.network`` 1.2.1, as data.

Run it with a Python that has ``ag2==1.2.1`` installed (the interop virtualenv, not ours)::

    ~/.cache/ag2net-interop/venv/bin/python tests/data/make_ag2_api.py

For every name of ``ag2.network.__all__`` it records the kind and what code written against that name
depends on: a constant's value; a type alias's shape; a function's calling mode (sync, coroutine, async
generator) and parameters; a class's constructor parameters, enum members, public methods (mode,
binding, parameters) and properties. Only facts are recorded (names, kinds, default reprs), no code.
``tests/test_ag2_api_surface.py`` compares ``ag2net`` against this file.
"""

from __future__ import annotations

import enum
import inspect
import json
import sys
import typing
from pathlib import Path
from typing import Any

OUT = Path(__file__).with_name("ag2_network_1_2_1_api.json")


def default_repr(value: Any) -> str:
    """A stable text for a default: functions and classes by name (no addresses), the rest by repr."""
    if inspect.isclass(value) or inspect.isfunction(value) or inspect.isbuiltin(value):
        kind = "class" if inspect.isclass(value) else "function"
        return f"<{kind} {value.__name__}>"
    return repr(value)


def params_of(obj: Any) -> list[dict[str, Any]] | None:
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        entry: dict[str, Any] = {"name": p.name, "kind": p.kind.name}
        if p.default is not inspect.Parameter.empty:
            entry["default"] = default_repr(p.default)
        out.append(entry)
    return out


def mode_of(fn: Any) -> str:
    fn = inspect.unwrap(fn)
    if inspect.isasyncgenfunction(fn):
        return "asyncgen"
    if inspect.iscoroutinefunction(fn):
        return "async"
    return "sync"


def is_ours(obj: Any) -> bool:
    """Defined by ag2 (not inherited from object, Exception, Enum, Protocol, dataclass machinery)."""
    module = getattr(obj, "__module__", "") or ""
    return module.startswith("ag2.") or module == "ag2"


def describe_class(cls: type) -> dict[str, Any]:
    info: dict[str, Any] = {"kind": "class"}
    if issubclass(cls, enum.Enum):
        info["enum"] = {m.name: m.value for m in cls}
        return info
    is_protocol = bool(getattr(cls, "_is_protocol", False))
    info["protocol"] = is_protocol
    info["params"] = None if is_protocol else params_of(cls)
    if issubclass(cls, BaseException):
        info["exception"] = True
    methods: dict[str, Any] = {}
    properties: list[str] = []
    for name in sorted(dir(cls)):
        if name.startswith("_"):
            continue
        static = inspect.getattr_static(cls, name)
        if isinstance(static, property):
            properties.append(name)
            continue
        if isinstance(static, staticmethod):
            binding, fn = "static", static.__func__
        elif isinstance(static, classmethod):
            binding, fn = "class", static.__func__
        elif inspect.isfunction(static):
            binding, fn = "instance", static
        else:
            continue
        if not is_ours(fn):
            continue
        methods[name] = {
            "binding": binding,
            "mode": mode_of(fn),
            "params": params_of(getattr(cls, name)),
        }
    info["methods"] = methods
    info["properties"] = properties
    return info


def describe_alias(obj: Any) -> dict[str, Any]:
    info: dict[str, Any] = {"kind": "alias", "repr": repr(obj)}
    origin = typing.get_origin(obj)
    args = typing.get_args(obj)
    if origin is typing.Literal:
        info["literal"] = list(args)
    elif (
        args
        and all(inspect.isclass(a) for a in args)
        and origin in (typing.Union, getattr(__import__("types"), "UnionType", None))
    ):
        info["union_of"] = sorted(a.__name__ for a in args)
    return info


def describe(obj: Any) -> dict[str, Any]:
    if inspect.isclass(obj):
        return describe_class(obj)
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return {"kind": "function", "mode": mode_of(obj), "params": params_of(obj)}
    if isinstance(obj, (str, int, float, bool, tuple, list, type(None))):
        return {"kind": "constant", "value": list(obj) if isinstance(obj, tuple) else obj}
    return describe_alias(obj)


def main() -> None:
    import importlib.metadata

    import ag2.network as net

    version = importlib.metadata.version("ag2")
    if version != "1.2.1":
        sys.exit(f"this script records ag2 1.2.1; the Python at {sys.executable} has ag2 {version}")
    data = {
        "package": "ag2",
        "version": version,
        "module": "ag2.network",
        "python": ".".join(map(str, sys.version_info[:3])),
        "names": {name: describe(getattr(net, name)) for name in net.__all__},
    }
    OUT.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    print(f"wrote {OUT} ({len(data['names'])} names)")


if __name__ == "__main__":
    main()

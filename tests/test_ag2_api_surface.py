"""Every public name of ``ag2.network`` 1.2.1 importable from ``ag2net`` with a compatible signature.

The reference surface is data (``tests/data/ag2_network_1_2_1_api.json``, written by
``tests/data/make_ag2_api.py`` from the real package), so this test needs no ag2 install.

"Compatible" means code written for ag2 runs unchanged:
* constants have the same value; Literal aliases the same values; union aliases the same member names;
* functions and methods are called the same way (sync / coroutine / async generator);
* every ag2 parameter exists under the same name, positional ones at the same position, of the same
  kind (or more permissive: keyword-only or positional-only in ag2 may be positional-or-keyword here),
  with the same default when ag2 has one; parameters we add must be optional;
* enums have the same members and values; classes have ag2's public methods and properties (a property
  may be a plain attribute stored from the constructor parameter of the same name);
* the name is in ``ag2net.__all__`` (so ``from ag2net import *`` is a drop-in too).

Every name is asserted strictly. ``KNOWN_MISSING`` (empty) is where a gap found later would be listed,
run as ``xfail(strict=False)`` until closed.
"""

from __future__ import annotations

import enum
import inspect
import json
import typing
from pathlib import Path
from typing import Any

import pytest
from data.make_ag2_api import mode_of, params_of  # the same description the data file was made with

import ag2net

DATA = Path(__file__).parent / "data" / "ag2_network_1_2_1_api.json"
SURFACE: dict[str, Any] = json.loads(DATA.read_text())
NAMES: dict[str, dict[str, Any]] = SURFACE["names"]

# The gap, name by name: empty since issue 14 closed it. A name added here runs as a non-strict xfail,
# for a gap found later that cannot be closed at once.
KNOWN_MISSING: set[str] = set()

POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
# ag2's kind -> kinds that accept every call ag2's accepts
ACCEPTS = {
    "POSITIONAL_ONLY": {"POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD"},
    "POSITIONAL_OR_KEYWORD": {"POSITIONAL_OR_KEYWORD"},
    "KEYWORD_ONLY": {"KEYWORD_ONLY", "POSITIONAL_OR_KEYWORD"},
    "VAR_POSITIONAL": {"VAR_POSITIONAL"},
    "VAR_KEYWORD": {"VAR_KEYWORD"},
}


def _fmt(params: list[dict[str, Any]] | None) -> str:
    if params is None:
        return "(?)"
    parts = []
    for p in params:
        prefix = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(p["kind"], "")
        kw = "" if p["kind"] != "KEYWORD_ONLY" else "kw:"
        parts.append(f"{kw}{prefix}{p['name']}" + (f"={p['default']}" if "default" in p else ""))
    return "(" + ", ".join(parts) + ")"


def compare_params(
    where: str, theirs: list[dict[str, Any]] | None, ours: list[dict[str, Any]] | None
) -> list[str]:
    """Why a call written for ag2's parameter list would not work on ours (empty list: it works)."""
    if theirs is None:
        return []
    if ours is None:
        return [f"{where}: no inspectable signature here; ag2 has {_fmt(theirs)}"]
    problems: list[str] = []
    by_name = {p["name"]: p for p in ours}
    our_pos = [p["name"] for p in ours if p["kind"] in POSITIONAL]
    their_pos = [p["name"] for p in theirs if p["kind"] in POSITIONAL]
    for i, name in enumerate(their_pos):
        if i >= len(our_pos) or our_pos[i] != name:
            problems.append(f"{where}: positional parameters differ: ag2 {their_pos}, ag2net {our_pos}")
            break
    for p in theirs:
        if p["kind"] in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            if not any(q["kind"] == p["kind"] for q in ours):
                problems.append(f"{where}: ag2 accepts {_fmt([p])[1:-1]}, ag2net does not")
            continue
        mine = by_name.get(p["name"])
        if mine is None:
            if p["kind"] != "POSITIONAL_ONLY" and any(q["kind"] == "VAR_KEYWORD" for q in ours):
                # accepted at run time, but not part of the signature (help, IDEs, inspect see **kwargs)
                problems.append(
                    f"{where}: parameter {p['name']!r} only reaches **kwargs here (ag2 {_fmt(theirs)})"
                )
            else:
                problems.append(f"{where}: parameter {p['name']!r} missing (ag2 {_fmt(theirs)})")
            continue
        if mine["kind"] not in ACCEPTS[p["kind"]]:
            problems.append(f"{where}: parameter {p['name']!r} is {mine['kind']}, ag2 {p['kind']}")
        if "default" in p and mine.get("default") != p["default"]:
            problems.append(
                f"{where}: parameter {p['name']!r} default {mine.get('default', '<required>')}, "
                f"ag2 {p['default']}"
            )
    their_names = {p["name"] for p in theirs}
    for q in ours:
        if q["name"] in their_names or q["kind"] in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            continue
        if "default" not in q:
            problems.append(f"{where}: extra required parameter {q['name']!r} (ag2 {_fmt(theirs)})")
    return problems


def compare_name(name: str) -> list[str]:
    """Everything about ``name`` that differs from ag2 1.2.1 (empty list: drop-in compatible)."""
    spec = NAMES[name]
    if not hasattr(ag2net, name):
        return [f"{name}: not importable from ag2net"]
    obj = getattr(ag2net, name)
    problems: list[str] = []
    if name not in ag2net.__all__:
        problems.append(f"{name}: importable but not in ag2net.__all__")
    kind = spec["kind"]
    if kind == "constant":
        value = list(obj) if isinstance(obj, tuple) else obj
        if value != spec["value"]:
            problems.append(f"{name}: value {value!r}, ag2 {spec['value']!r}")
    elif kind == "alias":
        if "literal" in spec:
            if typing.get_origin(obj) is not typing.Literal:
                problems.append(f"{name}: not a Literal alias ({obj!r}); ag2 {spec['repr']}")
            elif sorted(typing.get_args(obj)) != sorted(spec["literal"]):
                problems.append(f"{name}: Literal values {typing.get_args(obj)}, ag2 {spec['literal']}")
        elif "union_of" in spec:
            members = sorted(getattr(a, "__name__", repr(a)) for a in typing.get_args(obj))
            if members != spec["union_of"]:
                problems.append(f"{name}: union of {members}, ag2 {spec['union_of']}")
    elif kind == "function":
        if not callable(obj) or inspect.isclass(obj):
            return [*problems, f"{name}: not a function here ({type(obj).__name__})"]
        if mode_of(obj) != spec["mode"]:
            problems.append(f"{name}: is {mode_of(obj)}, ag2 {spec['mode']}")
        problems += compare_params(name, spec["params"], params_of(obj))
    elif kind == "class":
        if not inspect.isclass(obj):
            return [*problems, f"{name}: not a class here ({type(obj).__name__})"]
        problems += _compare_class(name, spec, obj)
    return problems


def _compare_class(name: str, spec: dict[str, Any], cls: type) -> list[str]:
    problems: list[str] = []
    if "enum" in spec:
        if not issubclass(cls, enum.Enum):
            return [f"{name}: not an Enum here"]
        members = {m.name: m.value for m in cls}
        if members != spec["enum"]:
            problems.append(f"{name}: members {members}, ag2 {spec['enum']}")
        return problems
    if spec.get("exception") and not issubclass(cls, BaseException):
        problems.append(f"{name}: not an exception class here")
    if not spec.get("protocol"):
        problems += compare_params(f"{name}()", spec["params"], params_of(cls))
    for method, m in spec["methods"].items():
        where = f"{name}.{method}"
        if not hasattr(cls, method):
            problems.append(f"{where}: missing ({m['mode']} {_fmt(m['params'])})")
            continue
        static = inspect.getattr_static(cls, method)
        fn = static.__func__ if isinstance(static, (staticmethod, classmethod)) else static
        if not callable(fn):
            problems.append(f"{where}: not a method here ({type(static).__name__})")
            continue
        mode = mode_of(fn)
        # an async generator may be served by a plain method returning an async iterator
        if mode != m["mode"] and not (m["mode"] == "asyncgen" and mode == "sync"):
            problems.append(f"{where}: is {mode}, ag2 {m['mode']}")
        problems += compare_params(where, m["params"], params_of(getattr(cls, method)))
    # a property of ag2's may be a plain attribute here, set from the constructor parameter of that name
    init_names = {p["name"] for p in (params_of(cls) or [])}
    for prop in spec["properties"]:
        if not hasattr(cls, prop) and prop not in init_names:
            problems.append(f"{name}.{prop}: property missing")
    return problems


def _cases() -> list[Any]:
    cases = []
    for name in NAMES:
        marks = []
        if name in KNOWN_MISSING:
            marks.append(pytest.mark.xfail(strict=False, reason="issue 14: listed in KNOWN_MISSING"))
        cases.append(pytest.param(name, marks=marks, id=name))
    return cases


@pytest.mark.parametrize("name", _cases())
def test_name_matches_ag2(name: str) -> None:
    problems = compare_name(name)
    assert not problems, "\n".join(problems)


def test_reference_data_is_the_whole_surface() -> None:
    assert SURFACE["version"] == "1.2.1"
    assert len(NAMES) == 191
    assert set(NAMES) >= KNOWN_MISSING, sorted(KNOWN_MISSING - set(NAMES))


def test_comparison_catches_differences() -> None:
    """The comparator itself: each kind of incompatibility is reported."""

    def sig(fn: Any) -> list[dict[str, Any]] | None:
        return params_of(fn)

    def ag2(a, b=1, *, c=None): ...
    def same(a, b=1, *, c=None, extra=0): ...
    def renamed(x, b=1, *, c=None): ...
    def other_default(a, b=2, *, c=None): ...
    def lost_kw(a, b=1): ...
    def required_extra(a, b=1, *, c=None, d): ...
    def kw_to_positional(a, b=1, c=None): ...

    assert compare_params("f", sig(ag2), sig(same)) == []
    assert compare_params("f", sig(ag2), sig(kw_to_positional)) == []
    assert compare_params("f", sig(ag2), sig(renamed))
    assert compare_params("f", sig(ag2), sig(other_default))
    assert compare_params("f", sig(ag2), sig(lost_kw))
    assert compare_params("f", sig(ag2), sig(required_extra))
    assert compare_params("f", sig(same), sig(ag2))  # ag2 positional 'b' then kw-only: fine; extra missing

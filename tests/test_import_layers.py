"""The layering of the packages, counting every import (top level, ``TYPE_CHECKING`` and function-local).

- The import graph between subpackages of ``ag2net/`` and ``tui/`` has no cycle. A node is a subpackage
  (``ag2net.hub``, ``tui.widgets``) or a top-level module (``ag2net.envelope``, ``tui.app``); the packages'
  own ``__init__`` files are the nodes ``ag2net`` and ``tui``.
- ``ag2net/client``, ``ag2net/transport`` (the WebSocket link among them) and ``ag2net/protocol`` import
  nothing from ``ag2net/hub`` or ``ag2net/server``; ``ag2net/protocol`` imports neither client nor transport.
- ``ag2net/debug`` (the debugger's library) sits above ``ag2net/hub``: nothing below it imports it.
- No module of ``ag2net/`` imports ``tui`` or ``textual``: the library never imports the workbench (``ag2net
  tui`` mounts ``tui.cli`` by name, see ``tests/test_import_seams.py``).
- ``import ag2net.client`` in a fresh interpreter loads neither the hub, aiosqlite nor the WebSocket server.
"""

from __future__ import annotations

import ast
import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ag2net", "tui")


def _module_name(path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _exists(module: str) -> bool:
    base = ROOT.joinpath(*module.split("."))
    return base.is_dir() or base.with_suffix(".py").exists()


def node_of(module: str) -> str | None:
    """The graph node of a module: its subpackage or top-level module under ``ag2net``/``tui``."""
    parts = module.split(".")
    if parts[0] not in PACKAGES:
        return None
    return ".".join(parts[:2])


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """Every module an import statement anywhere in ``tree`` names (relative imports resolved)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from ag2net import hub`` imports the subpackage ``ag2net.hub``.
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names]
    return found


def import_graph() -> dict[str, dict[str, list[str]]]:
    """``{node: {imported node: ["module:line -> target", ...]}}`` over ``ag2net/`` and ``tui/``."""
    edges: dict[str, dict[str, list[str]]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module, is_package = _module_name(path)
            source = node_of(module)
            assert source is not None
            edges.setdefault(source, {})
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for line, target in _imported(tree, module, is_package):
                dest = node_of(target)
                if dest is None or dest == source or not _exists(target):
                    continue
                edges[source].setdefault(dest, []).append(f"{module}:{line} -> {target}")
    return edges


def find_cycle(edges: dict[str, dict[str, list[str]]]) -> list[str] | None:
    """One cycle of the graph as a path ``[a, b, ..., a]``, or ``None``."""
    state: dict[str, int] = {}  # 1 on the stack, 2 done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def _describe(edges: dict[str, dict[str, list[str]]], cycle: list[str]) -> str:
    lines = [" -> ".join(cycle)]
    for a, b in itertools.pairwise(cycle):
        lines.append(f"  {a} -> {b}: " + "; ".join(edges[a][b][:3]))
    return "\n".join(lines)


def test_the_import_graph_between_subpackages_has_no_cycle() -> None:
    edges = import_graph()
    cycle = find_cycle(edges)
    assert cycle is None, "import cycle between subpackages:\n" + _describe(edges, cycle or [])


def test_the_cycle_finder_reports_a_cycle_with_its_path() -> None:
    edges = {"a": {"b": ["a.x:1 -> b.y"]}, "b": {"c": ["b.y:2 -> c"]}, "c": {"a": ["c:3 -> a"]}, "d": {}}
    cycle = find_cycle(edges)
    assert cycle == ["a", "b", "c", "a"]
    assert "a.x:1 -> b.y" in _describe(edges, cycle)
    assert find_cycle({"a": {"b": []}, "b": {}}) is None


def test_function_local_and_type_checking_imports_count() -> None:
    code = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ag2net.hub.hub import Hub\n"
        "def f():\n    from ..server import serve_ws\n"
    )
    found = {t for _, t in _imported(ast.parse(code), "ag2net.client.x", False)}
    assert {"ag2net.hub.hub", "ag2net.server", "ag2net.server.serve_ws"} <= found


@pytest.mark.parametrize(
    ("layer", "forbidden"),
    [
        ("ag2net.client", ("ag2net.hub", "ag2net.server", "ag2net.debug")),
        ("ag2net.transport", ("ag2net.hub", "ag2net.server", "ag2net.client", "ag2net.debug")),
        (
            "ag2net.protocol",
            ("ag2net.hub", "ag2net.server", "ag2net.client", "ag2net.transport", "ag2net.debug"),
        ),
        # the debugger's library sits above the hub: it runs the hub's code, the hub never needs it
        ("ag2net.hub", ("ag2net.server", "ag2net.debug")),
    ],
)
def test_the_lower_layers_import_nothing_from_the_layers_above(
    layer: str, forbidden: tuple[str, ...]
) -> None:
    edges = import_graph().get(layer, {})
    wrong = {dest: where for dest, where in edges.items() if dest in forbidden}
    assert not wrong, f"{layer} imports {sorted(wrong)}: {wrong}"


def test_no_module_of_the_library_imports_the_workbench() -> None:
    wrong = []
    for path in sorted((ROOT / "ag2net").rglob("*.py")):
        module, is_package = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        wrong += [
            f"{module}:{line} -> {target}"
            for line, target in _imported(tree, module, is_package)
            if target.split(".")[0] in ("tui", "textual")
        ]
    assert wrong == [], "the library imports the workbench: " + "; ".join(wrong)


def test_the_websocket_link_imports_nothing_of_the_hub() -> None:
    path = ROOT / "ag2net" / "transport" / "ws.py"
    targets = [t for _, t in _imported(ast.parse(path.read_text()), "ag2net.transport.ws", False)]
    assert targets and not [t for t in targets if t.startswith(("ag2net.hub", "ag2net.server"))]


def _loaded_after(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


HEAVY = ("ag2net.hub", "aiosqlite", "websockets.asyncio.server", "ag2net.server", "ag2net.store.sqlite")


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


def test_importing_the_client_loads_no_hub_store_or_server() -> None:
    assert _heavy(_loaded_after("import ag2net.client")) == []


def test_a_remote_client_and_the_websocket_link_load_no_hub() -> None:
    code = "from ag2net.client import HubClient\nfrom ag2net.transport.ws import WsLink\nHubClient.connect"
    assert _heavy(_loaded_after(code)) == []


def test_the_probe_sees_the_hub_when_it_is_imported() -> None:
    loaded = _loaded_after("import ag2net\nag2net.Hub\nag2net.serve_ws\nag2net.SqliteStore")
    assert {"ag2net.hub", "ag2net.store.sqlite", "websockets.asyncio.server"} <= set(loaded)


def _subpackages() -> list[Path]:
    return sorted(
        p.parent
        for package in PACKAGES
        for p in (ROOT / package).rglob("__init__.py")
        if p.parent != ROOT / package
    )


def module_graph(package_dir: Path) -> dict[str, dict[str, list[str]]]:
    """``{module: {imported module: ["module:line -> target", ...]}}`` between one subpackage's modules.

    Every import counts (top level, ``TYPE_CHECKING``, function-local). ``from pkg import name`` is an
    edge to ``pkg.name`` when that is a module of the subpackage, else to ``pkg`` (its ``__init__``).
    """
    prefix, _ = _module_name(package_dir / "__init__.py")

    def local(target: str) -> str | None:
        """The module of this subpackage that ``target`` names (or lies in), or None."""
        if target == prefix:
            return prefix
        if not target.startswith(prefix + "."):
            return None
        head = target[len(prefix) + 1 :].split(".")[0]
        exists = (package_dir / f"{head}.py").exists() or (package_dir / head).is_dir()
        return f"{prefix}.{head}" if exists else prefix

    edges: dict[str, dict[str, list[str]]] = {}
    for path in sorted(package_dir.glob("*.py")):
        module, is_package = _module_name(path)
        edges.setdefault(module, {})
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for line, target in _imported(tree, module, is_package):
            dest = local(target)
            # the bare ``pkg`` that ``from pkg import mod`` also yields is not an edge of its own
            if dest == prefix and target == prefix:
                continue
            if dest is None or dest == module:
                continue
            edges[module].setdefault(dest, []).append(f"{module}:{line} -> {target}")
    return edges


@pytest.mark.parametrize("package_dir", _subpackages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_import_circle_inside_a_subpackage(package_dir: Path) -> None:
    edges = module_graph(package_dir)
    cycle = find_cycle(edges)
    assert cycle is None, f"import circle inside {package_dir.relative_to(ROOT)}:\n" + _describe(
        edges, cycle or []
    )

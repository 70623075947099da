"""Every runtime dependency ag2net declares is imported by its code (issue 22 item 8: ``aiosqlite`` was
declared while nothing imported it; see docs/sqlite-bridge.md for why the store does not use it)."""

from __future__ import annotations

import ast
import re
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def imported_top_levels() -> set[str]:
    names: set[str] = set()
    for folder in ("ag2net", "tui"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return names


def test_every_declared_dependency_is_imported():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    modules_of: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            modules_of.setdefault(dist.lower().replace("_", "-"), set()).add(module)
    imported = imported_top_levels()
    unused = []
    for requirement in declared:
        dist = re.split(r"[\[<>=!~; ]", requirement, maxsplit=1)[0].lower().replace("_", "-")
        modules = modules_of.get(dist, set())
        assert modules, f"{dist} is declared but not installed"
        if not modules & imported:
            unused.append(dist)
    assert not unused, f"declared in pyproject.toml but imported by no module of ag2net or tui: {unused}"

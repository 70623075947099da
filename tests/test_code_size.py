"""Rooms stay small: no module of ``ag2net/`` or ``tui/`` over 900 lines, no function body over 80 lines.

A function's size is counted from its first statement after the docstring to its last line, so the
declarative option lists in a command's signature (typer's ``Annotated`` parameters) do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted(p for package in ("ag2net", "tui") for p in (ROOT / package).rglob("*.py"))
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 80


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the function's end."""
    body = node.body
    first = body[0]
    docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    if len(body) > 1 and docstring and isinstance(first.value.value, str):  # type: ignore[attr-defined]
        first = body[1]
    assert node.end_lineno is not None
    return node.end_lineno - first.lineno + 1


def test_no_module_is_over_900_lines() -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in SOURCES
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES
    }
    assert not long, f"modules over {MAX_FILE_LINES} lines: {long}"


def test_no_function_body_is_over_80_lines() -> None:
    long: dict[str, int] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                and body_lines(node) > MAX_FUNCTION_LINES
            ):
                long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = body_lines(node)
    assert not long, f"function bodies over {MAX_FUNCTION_LINES} lines: {long}"


def test_the_docstring_and_the_signature_do_not_count() -> None:
    code = 'def f(\n    a: int,\n    b: int,\n) -> None:\n    """Doc.\n\n    More.\n    """\n    x = 1\n    y = 2\n'
    node = ast.parse(code).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert body_lines(node) == 2

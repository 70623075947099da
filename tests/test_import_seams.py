"""The seams between the library's command line and the workbench, and the demo's package data.

- ``ag2net.cli`` mounts ``tui.cli`` by name: importing it loads nothing of ``tui`` or textual, and resolving
  the ``tui`` command loads ``tui.cli`` but still not textual (only starting the workbench does).
- No module of ``tui/`` imports the command group (``ag2net.cli`` itself, ``ag2net.cli.commands``,
  ``ag2net.cli.serve``; counting function-local and ``TYPE_CHECKING`` imports): the workbench imports only the
  helpers (``ag2net.cli.support``, ``replay``, ``wal``), which import nothing of ``tui`` and no command module,
  and ``ag2net/cli/__init__.py`` imports none of its modules when it runs: the command line has no import circle.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules_after(code: str) -> list[str]:
    """Run ``code`` in a fresh interpreter; the textual/tui modules it left in ``sys.modules``."""
    probe = (
        code
        + "\nimport json, sys\n"
        + "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'tui'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_cli_loads_no_workbench() -> None:
    assert _modules_after("import ag2net.cli; ag2net.cli.app") == []


def test_resolving_tui_loads_its_command_but_not_textual() -> None:
    code = (
        "from typer.testing import CliRunner\n"
        "from ag2net.cli import app\n"
        "result = CliRunner().invoke(app, ['tui', '--memory', '--cache-mb', '0'])\n"
        "assert result.exit_code == 2, result.output\n"
    )
    loaded = _modules_after(code)
    assert "tui.cli" in loaded
    assert not [m for m in loaded if m.split(".")[0] == "textual"], loaded


def test_resolving_tui_loads_no_other_mounted_command() -> None:
    """``ag2net tui`` imports ``tui.cli`` only: not ``tui.web``, ``ag2net.mcp``, ``ag2net.eval`` or the export
    and bundle commands (each other mounted command loads only when named, or for a typo's suggestion)."""
    probe = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from ag2net.cli import app\n"
        "CliRunner().invoke(app, ['tui', '--help'])\n"
        "others = ('tui.web', 'ag2net.mcp', 'ag2net.eval', 'ag2net.cli.export', 'ag2net.cli.bundle')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(others))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


def test_the_probe_sees_textual_when_the_app_is_imported() -> None:
    assert "textual" in _modules_after("import tui.app")


def test_top_level_help_lists_the_mounted_tui_command_first() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    listed = [
        line.strip("│ ").split()[0]
        for line in done.stdout.splitlines()
        if line.startswith("│ ") and line.strip("│ ") and not line.strip("│ ").startswith("-")
    ]
    commands = [word for word in listed if word in ("tui", "demo", "serve", "wal")]
    assert commands == ["tui", "demo", "serve", "wal"], done.stdout
    assert "Open the workbench" in done.stdout


def test_a_typo_still_suggests_tui() -> None:
    from typer.testing import CliRunner

    from ag2net.cli import app

    result = CliRunner().invoke(app, ["tuu"])
    assert result.exit_code == 2
    assert "Did you mean 'tui'?" in result.output


def _imported_modules(path: Path) -> set[str]:
    """Every module a file imports: top-level, function-local and under ``TYPE_CHECKING`` alike."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


CLI = ROOT / "ag2net" / "cli"
HELPERS = ("ag2net.cli.support", "ag2net.cli.replay", "ag2net.cli.wal")
"""The modules of ``ag2net/cli/`` the workbench may import: none of them is a command group."""


def _cli_module(name: str) -> str | None:
    """``ag2net.cli`` or the module of ``ag2net/cli/`` that an imported name belongs to (else ``None``)."""
    parts = name.split(".")
    if parts[:2] != ["ag2net", "cli"]:
        return None
    if len(parts) > 2 and (CLI / f"{parts[2]}.py").exists():
        return ".".join(parts[:3])
    return "ag2net.cli"


def test_no_workbench_module_imports_the_library_cli() -> None:
    offenders = {
        str(path.relative_to(ROOT)): sorted(
            m for m in _imported_modules(path) if (home := _cli_module(m)) and home not in HELPERS
        )
        for path in sorted((ROOT / "tui").rglob("*.py"))
    }
    assert {k: v for k, v in offenders.items() if v} == {}
    assert "ag2net.cli.support" in _imported_modules(ROOT / "tui" / "cli.py")


def test_the_cli_helpers_import_nothing_of_the_workbench_or_the_commands() -> None:
    for path in sorted(CLI.glob("*.py")):
        imported = _imported_modules(path)
        assert not [m for m in imported if m.split(".")[0] in ("tui", "textual")], (path.name, imported)
        if f"ag2net.cli.{path.stem}" in HELPERS:
            homes = {_cli_module(m) for m in imported} - {None}
            assert homes <= set(HELPERS), (path.name, sorted(homes))


def test_the_cli_package_loads_none_of_its_modules_until_asked() -> None:
    code = (
        "import ag2net.cli\nimport sys\nprint(sorted(m for m in sys.modules if m.startswith('ag2net.cli.')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_walker_sees_function_local_and_dynamic_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import importlib\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from ag2net.hub import Hub\n"
        "def f():\n    from ag2net.cli import UsageProblem\n    return importlib.import_module('tui.cli')\n"
    )
    assert {"ag2net.hub", "ag2net.cli", "tui.cli"} <= _imported_modules(sample)

"""The README's library example runs as written (in a temporary directory)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

README = Path(__file__).parents[1] / "README.md"


def test_readme_library_example_runs(tmp_path):
    """As written, and again in the same folder: the second run opens the same network.db, where bob and
    alice are already registered (issue 22 item 6: it stopped with "name 'bob' already registered")."""
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    for run in ("first", "second"):
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0, f"the {run} run failed: {result.stderr}"
        lines = result.stdout.splitlines()
        assert lines[0] == "Use an operation log.", f"the {run} run printed {lines}"
        assert len(lines) == 2, f"the {run} run lists the turns of its own channel only: {lines}"
        assert "full_transcript" in lines[1] and "'history'" in lines[1]


def test_readme_has_exactly_two_setup_commands():
    text = README.read_text()
    setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"```bash\n(.*?)```", setup, re.S)
    assert [c.strip() for c in commands] == [
        "pip install -e . && ag2net tui --demo",
        "pip install -e '.[dev]' && pytest",
    ]

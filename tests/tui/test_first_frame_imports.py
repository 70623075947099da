"""``import tui.app`` loads what the first frame needs; the rest loads on first use.

The envelope detail (and with it Textual's editor, ``TextArea``, and tree-sitter) loads when the first
detail opens; the screens when one opens (or a ``[keys]`` remapping is checked), the jump overlay aside.
The command (``tui.cli``, ``tui.launch``) loads the WebSocket client only to dial a hub (``--connect``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LATER = ("textual.widgets._text_area", "tree_sitter", "tui.widgets.envelope_detail", "tui.widgets.json_area")


def _loaded(code: str) -> list[str]:
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_app_loads_no_editor_and_no_screen_but_the_jump_overlay() -> None:
    loaded = _loaded("import tui.app")
    assert [m for m in loaded if m.split(".")[0] in ("tree_sitter",) or m in LATER] == []
    assert [m for m in loaded if m.startswith("tui.screens.")] == ["tui.screens.jump"]


def test_the_probe_sees_them_once_the_keymap_is_checked() -> None:
    loaded = set(_loaded("import tui.app\ntui.app.WorkbenchApp.binding_ids()"))
    assert {"textual.widgets._text_area", "tui.widgets.envelope_detail", "tui.screens.composer"} <= loaded


def test_the_command_loads_the_websocket_client_only_to_dial_a_hub() -> None:
    loaded = _loaded("import tui.cli\nimport tui.app")
    assert [m for m in loaded if m.split(".")[0] == "websockets" or m.startswith("ag2net.transport.ws")] == []
    assert "websockets.asyncio.client" in _loaded("import tui.launch\nimport ag2net.transport.ws")

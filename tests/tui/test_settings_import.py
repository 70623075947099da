"""The workbench starts without pydantic when there is no settings file; a file is validated with it.

``tui.settings.Settings`` is a plain dataclass (the defaults), ``tui.settings_file`` the file's pydantic
schema: the two name the same keys.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

from tui.settings import Settings, load_settings
from tui.settings_file import SettingsFields

ROOT = Path(__file__).resolve().parents[2]


def _pydantic_loaded(code: str, config_home: Path) -> bool:
    probe = code + "\nimport json, sys\nprint(json.dumps('pydantic' in sys.modules))"
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home)}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_app_and_the_default_settings_load_no_pydantic(tmp_path: Path) -> None:
    code = "import tui.app\nfrom tui.settings import load_settings\nassert load_settings().source is None"
    assert _pydantic_loaded(code, tmp_path) is False


def test_a_settings_file_is_validated_with_pydantic(tmp_path: Path) -> None:
    folder = tmp_path / "ag2net"
    folder.mkdir()
    (folder / "workbench.toml").write_text('theme = "nord"\n', encoding="utf-8")
    code = "from tui.settings import load_settings\nassert load_settings().theme == 'nord'"
    assert _pydantic_loaded(code, tmp_path) is True


def test_the_schema_names_the_keys_of_the_settings() -> None:
    own = [f.name for f in dataclasses.fields(Settings) if f.name not in ("source", "file_keys")]
    assert list(SettingsFields.model_fields) == own


def test_the_keys_a_file_gave_and_only_those(tmp_path: Path) -> None:
    path = tmp_path / "workbench.toml"
    path.write_text('human_name = "ana"\n[prices."m"]\ninput = 1\noutput = 2\n', encoding="utf-8")
    settings = load_settings(path)
    assert settings.file_keys == {"human_name", "prices"}
    assert settings.prices["m"].cached_input is None and settings.prices["m"].output == 2
    assert settings.database == Settings().database and settings.tail_limit == 100_000
    assert Settings().file_keys == frozenset()

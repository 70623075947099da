"""Workbench settings: TOML + pydantic, per-user defaults, one-sentence errors naming the key and the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.app import WorkbenchApp
from tui.settings import Settings, SettingsError, check_keymap, default_database_path, load_settings


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "workbench.toml"
    path.write_text(text)
    return path


def test_defaults_follow_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    assert default_database_path() == tmp_path / "data" / "ag2net" / "workbench.db"
    settings = load_settings()  # no file at the default location: defaults
    assert settings.database == tmp_path / "data" / "ag2net" / "workbench.db"
    assert settings.tail_limit == 100_000
    assert settings.drafts_path == tmp_path / "config" / "ag2net" / "composer-draft.json"


def test_load_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    path = write(
        tmp_path,
        'database = "~/wb.db"\ntheme = "nord"\ntail_limit = 5000\n\n[keys]\n"tail.follow" = "F"\n',
    )
    settings = load_settings(path)
    assert settings.database == tmp_path / "wb.db"
    assert settings.theme == "nord" and settings.tail_limit == 5000
    assert settings.keys == {"tail.follow": "F"}
    assert settings.drafts_path == tmp_path / "composer-draft.json"
    check_keymap(settings, WorkbenchApp.binding_ids())


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("tail_limit = 3\n", "key 'tail_limit'"),
        ('tail_limit = "many"\n', "key 'tail_limit'"),
        ("colour = 1\n", "unknown key 'colour'"),
        ("theme = \n", "is not valid TOML"),
        ('[keys]\n"tail.follow" = " "\n', "key 'keys'"),
    ],
)
def test_errors_name_the_key_and_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SettingsError) as info:
        load_settings(path)
    message = str(info.value)
    assert fragment in message and str(path) in message
    assert "\n" not in message


def test_missing_explicit_file_and_unknown_binding(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")
    settings = Settings(keys={"tail.nonsense": "z"})
    with pytest.raises(SettingsError, match="is not a binding id"):
        check_keymap(settings, WorkbenchApp.binding_ids())

"""Workbench settings: a TOML file validated with pydantic, with per-user defaults (XDG paths).

Example ``~/.config/ag2net/workbench.toml``::

    database = "~/.local/share/ag2net/workbench.db"
    theme = "textual-dark"
    tail_limit = 100000
    human_name = "ana"

    [keys]
    "tail.follow" = "f"
    "app.compose" = "ctrl+e"

    [prices."gpt-4o"]            # dollars per million tokens (see ag2net.costs); over the built-in table
    input = 2.50
    cached_input = 1.25
    output = 10.00

Errors are one sentence naming the key and the file.

``Settings`` is a plain dataclass: the defaults (no settings file) import no pydantic. A file is validated
against its pydantic schema (``tui/settings_file.py``), imported only when there is a file to read.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class SettingsError(ValueError):
    """The settings file cannot be used; the message names the key and the file."""


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def default_config_path() -> Path:
    """``$XDG_CONFIG_HOME/ag2net/workbench.toml`` (``~/.config/...`` by default)."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "ag2net" / "workbench.toml"


def default_database_path() -> Path:
    """``$XDG_DATA_HOME/ag2net/workbench.db`` (``~/.local/share/...`` by default)."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "ag2net" / "workbench.db"


def screenshot_directory() -> Path:
    """Where the workbench's screenshot (ctrl+p, "Save screenshot") goes: ``~/Downloads`` when it exists,
    else the XDG pictures folder (``$XDG_PICTURES_DIR`` or ``~/Pictures``) when it exists, else the
    current directory. Never a folder that is not there (Textual's default fails without ``~/Downloads``)."""
    pictures = os.environ.get("XDG_PICTURES_DIR")
    for folder in (
        Path.home() / "Downloads",
        Path(pictures).expanduser() if pictures else None,
        Path.home() / "Pictures",
    ):
        if folder is not None and folder.is_dir():
            return folder
    return Path.cwd()


def screenshot_failure(folder: Path, error: BaseException) -> str:
    """One sentence saying why a screenshot was not saved in ``folder`` and what to do."""
    reason = getattr(error, "strerror", None) or str(error) or type(error).__name__
    return f"the screenshot was not saved in {folder} ({reason}); make the folder writable or start the workbench elsewhere"


@dataclass(frozen=True, slots=True)
class PriceSetting:
    """One model's prices in ``[prices."MODEL"]``: dollars per million tokens (``cached_input`` defaults to
    ``input``; ``cache_write`` only for providers that bill cache writes)."""

    input: float
    output: float
    cached_input: float | None = None
    cache_write: float | None = None


PRICE_KEYS = ("input", "cached_input", "output", "cache_write")


@dataclass(kw_only=True, slots=True)
class Settings:
    """Everything the workbench reads from its settings file (the defaults when there is none). Built by
    hand (tests, screenshots) it is taken as given; ``load_settings`` validates what a file says."""

    database: Path = field(default_factory=default_database_path)
    theme: str = "textual-dark"
    tail_limit: int = 100_000
    human_name: str = "me"
    keys: dict[str, str] = field(default_factory=dict)
    first_page: int = 500
    prices: dict[str, PriceSetting] = field(default_factory=dict)
    source: Path | None = None
    """The settings file these came from (``None``: the defaults, or built by hand)."""
    file_keys: frozenset[str] = frozenset()
    """The keys the settings file gave (``human_name`` given there is checked before seating)."""

    def price_table(self, environ: Any = None) -> Any:
        """The price table the workbench costs turns with: the built-in prices, this file's ``[prices]`` over
        them, ``AG2NET_PRICES`` over both (``ag2net.costs.price_table``). A bad ``AG2NET_PRICES`` raises
        ``SettingsError`` in one sentence naming the variable."""
        from ag2net.costs import Price, price_table

        mine = {
            model: Price(
                input=entry.input,
                cached_input=entry.input if entry.cached_input is None else entry.cached_input,
                output=entry.output,
                cache_write=entry.cache_write,
                source=f"settings file {self.source or default_config_path()}",
            )
            for model, entry in self.prices.items()
        }
        try:
            return price_table(mine, environ=environ)
        except ValueError as exc:
            raise SettingsError(str(exc)) from None

    @property
    def drafts_path(self) -> Path:
        """The composer draft, a JSON file next to the settings file."""
        base = self.source.parent if self.source is not None else default_config_path().parent
        return base / "composer-draft.json"


def load_settings(path: Path | str | None = None, *, must_exist: bool = False) -> Settings:
    """Read and validate settings from ``path`` (default location when None; defaults when absent)."""
    explicit = path is not None
    file = Path(path).expanduser() if path is not None else default_config_path()
    if not file.exists():
        if explicit or must_exist:
            raise SettingsError(f"settings file {file} does not exist; create it or drop --config")
        return Settings()
    import tomllib  # only when there is a file to read: ~11 ms of start-up otherwise

    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"settings file {file} is not valid TOML ({exc}); fix the syntax") from None
    except OSError as exc:
        raise SettingsError(f"settings file {file} cannot be read ({exc.strerror})") from None
    from pydantic import ValidationError  # only when there is a file: ~80 ms of start-up otherwise

    from tui.settings_file import SettingsFields

    try:
        given = SettingsFields(**data).given()
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"]) or "(top level)"
        if error["type"] == "extra_forbidden" and len(error["loc"]) == 3 and error["loc"][0] == "prices":
            raise SettingsError(
                f"unknown key {key!r} in {file}; a model's prices are {', '.join(PRICE_KEYS)} (dollars per "
                "million tokens)"
            ) from None
        if error["type"] == "extra_forbidden":
            known = ", ".join(SettingsFields.model_fields)
            raise SettingsError(f"unknown key {key!r} in {file}; known keys are {known}") from None
        message = error["msg"].removeprefix("Value error, ")
        raise SettingsError(f"key {key!r} in {file} is invalid: {message}") from None
    file_keys = frozenset(given)
    prices = {model: PriceSetting(**entry) for model, entry in given.pop("prices", {}).items()}
    return Settings(**given, prices=prices, source=file, file_keys=file_keys)


def check_keymap(settings: Settings, known_ids: set[str]) -> None:
    """Refuse a remapping of a binding id the workbench does not have (one sentence naming it)."""
    for binding_id in settings.keys:
        if binding_id not in known_ids:
            where = settings.source or default_config_path()
            close = difflib.get_close_matches(binding_id, sorted(known_ids), n=1, cutoff=0.75)
            group = binding_id.split(".", 1)[0]
            same = sorted(i for i in known_ids if i.startswith(f"{group}."))
            if close:
                hint = f"did you mean {close[0]!r}?"
            elif same:
                hint = f"the {group}.* ids are {', '.join(same)}"
            else:
                groups = sorted({i.split(".", 1)[0] for i in known_ids})
                hint = f"ids start with {', '.join(f'{g}.' for g in groups)} (e.g. tail.follow)"
            raise SettingsError(f"[keys] {binding_id!r} in {where} is not a binding id; {hint}")


def _keys_of(keys: str) -> list[str]:
    return [key.strip() for key in keys.split(",") if key.strip()]


def keymap_conflicts(settings: Settings, app_class: type, classes: Iterable[type]) -> str:
    """One sentence when ``[keys]`` gives a binding a key that another binding where it applies already
    has ('' when there is no clash): the keys of one widget class, and the app's keys, which apply
    everywhere. Only clashes a remapping makes count (the defaults' own overlaps are deliberate: escape
    leaves a field and clears a filter)."""
    remapped = settings.keys
    if not remapped:
        return ""

    def bindings(klass: type) -> list[tuple[str, str]]:
        found = []
        for binding in getattr(klass, "BINDINGS", []):
            binding_id = getattr(binding, "id", None)
            if binding_id:
                keys = remapped.get(binding_id) or str(binding.key)
                found.extend((key, binding_id) for key in _keys_of(keys))
        return found

    app_keys = bindings(app_class)
    clashes: list[tuple[str, str, str]] = []
    for klass in [app_class, *classes]:
        scope = app_keys if klass is app_class else bindings(klass) + app_keys
        owner: dict[str, str] = {}
        for key, binding_id in scope:
            other = owner.setdefault(key, binding_id)
            if other != binding_id and (binding_id in remapped or other in remapped):
                first, second = sorted((binding_id, other), key=lambda i: i not in remapped)
                clash = (key, first, second)
                if clash not in clashes:
                    clashes.append(clash)
    if not clashes:
        return ""
    key, mine, other = clashes[0]
    where = settings.source or default_config_path()
    more = (
        f" ({len(clashes) - 1} more clash{'es' if len(clashes) > 2 else ''} like it)"
        if len(clashes) > 1
        else ""
    )
    return (
        f"[keys] {mine!r} = {remapped.get(mine, key)!r} in {where} clashes with {other!r}, which also uses "
        f"{key!r}{more}; give one of them another key (? lists the ids)"
    )


__all__ = [
    "PRICE_KEYS",
    "PriceSetting",
    "Settings",
    "SettingsError",
    "check_keymap",
    "default_config_path",
    "default_database_path",
    "keymap_conflicts",
    "load_settings",
    "screenshot_directory",
    "screenshot_failure",
]

"""The README's set-up and tour say what is true: every key the tour names is bound in the workbench
(the app's, its widgets' and screens' BINDINGS, or Textual's own where the README relies on them), the
search keys are described as the app binds them, and the README links nothing outside the repository."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

from textual.app import App
from textual.binding import Binding
from textual.keys import _character_to_key
from textual.widgets import DataTable

ROOT = Path(__file__).parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TOUR = README.split("## A first tour of the workbench", 1)[1].split("\n## ", 1)[0]

NAMED = {"end": "end", "home": "home", "enter": "enter", "esc": "escape", "escape": "escape", "tab": "tab"}
NOT_KEYS = {"ag2net", "@name", "[name]:", "recent_n", "event_type", "event_data", "EV_*"}


def _binding_classes() -> list[type]:
    import tui.app
    import tui.screens
    import tui.widgets

    modules = [tui.app]
    for package in (tui.widgets, tui.screens):
        modules += [
            importlib.import_module(f"{package.__name__}.{m.name}")
            for m in pkgutil.iter_modules(package.__path__)
        ]
    classes: list[type] = []
    for module in modules:
        classes += [
            obj for obj in vars(module).values() if inspect.isclass(obj) and obj.__module__ == module.__name__
        ]
    return [*classes, DataTable]  # the channel list's table: enter selects


def bound_keys() -> dict[str, set[str]]:
    """key → the binding ids (or actions) bound to it anywhere in the workbench."""
    keys: dict[str, set[str]] = {App.COMMAND_PALETTE_BINDING: {"command_palette"}}
    for klass in _binding_classes():
        for base in klass.__mro__:
            for binding in vars(base).get("BINDINGS", []):
                if isinstance(binding, Binding):
                    key, name = binding.key, binding.id or binding.action
                else:
                    key, name = binding[0], binding[1]
                for one in key.split(","):
                    keys.setdefault(one.strip(), set()).add(name)
    return keys


def readme_key(token: str) -> str | None:
    """The Textual key name a backticked README token names, or None when it is not a key."""
    if token in NOT_KEYS or token.startswith("-") or " " in token:
        return None
    if re.fullmatch(r"ctrl\+[a-z0-9]", token) or re.fullmatch(r"F\d{1,2}", token):
        return token.lower()
    if token.lower() in NAMED:
        return NAMED[token.lower()]
    if len(token) == 1:
        return _character_to_key(token)
    return None


def tour_keys() -> list[tuple[str, str]]:
    tokens = re.findall(r"`([^`]+)`", re.sub(r"```toml.*?```", "", TOUR, flags=re.S))
    pairs = []
    for token in tokens:
        for part in token.split("/") if re.fullmatch(r"\w/\w", token) else [token]:
            key = readme_key(part)
            if key is not None:
                pairs.append((part, key))
    return pairs


def test_the_tour_names_keys():
    named = {token for token, _ in tour_keys()}
    assert {"1", "2", "3", "4", "i", "/", "s", "n", "N", ":", "ctrl+e", "ctrl+o", "ctrl+w", "F1"} <= named


def test_every_key_the_tour_names_is_bound():
    keys = bound_keys()
    unbound = sorted({token for token, key in tour_keys() if key not in keys})
    assert not unbound, f"the README's tour names keys the workbench does not bind: {unbound}"


def test_the_search_keys_are_described_as_bound():
    keys = bound_keys()
    assert "tail.search" in keys["s"] and "tail.search_next" in keys["n"] and "tail.search_prev" in keys["N"]
    assert re.search(r"`s` starts a\s+search and `n`/`N` go to the next/previous match", TOUR)
    assert "tail.filter" in keys["slash"] and "tail.goto" in keys["colon"]


def test_the_remapping_example_uses_real_binding_ids():
    from tui.app import WorkbenchApp

    example = TOUR.split("```toml", 1)[1].split("```", 1)[0]
    ids = re.findall(r'^"([\w.]+)" = ', example, re.M)
    assert ids and set(ids) <= WorkbenchApp.binding_ids()


def test_set_up_names_the_python_version_and_a_venv():
    setup = README.split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert "Python ≥ 3.11" in setup and "python3 -m venv .venv" in setup
    assert 'requires-python = ">=3.11"' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def readme_links() -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", README)


def test_no_links_outside_the_repository():
    assert not re.findall(r"https?://(?!localhost|127\.0\.0\.1)\S+", README), "a URL outside the repository"
    outside = [t for t in readme_links() if re.match(r"[a-z][a-z0-9+.-]*:", t) or t.startswith(("/", "../"))]
    assert not outside, f"the README links outside the repository: {outside}"


def test_every_linked_file_is_in_the_repository():
    missing = [t for t in readme_links() if not (ROOT / t.split("#", 1)[0]).exists()]
    assert not missing, f"the README links files the repository does not have: {missing}"


def test_the_differences_from_ag2_live_in_docs_compatibility():
    assert "Where we differ from `ag2` 1.2.1 on purpose" in README
    assert "[docs/compatibility.md](docs/compatibility.md)" in README
    compat = (ROOT / "docs" / "compatibility.md").read_text(encoding="utf-8")
    for item in (
        "per recipient",
        "generated skill",
        "YAML",
        "fixed-width",
        "depth limit",
        "max_turns",
        "view_policies",
    ):
        assert item in compat, item

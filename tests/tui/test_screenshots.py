"""The README screenshot script: the names the README links, and one real picture of the demo."""

from __future__ import annotations

import re
from pathlib import Path

from tui import screenshots

README = Path(__file__).resolve().parents[2] / "README.md"


def test_every_shot_is_linked_from_the_readme_and_every_link_has_a_shot() -> None:
    names = [shot.filename for shot in screenshots.SHOTS]
    assert len(names) == len(set(names))
    assert names[0] == "workbench.svg"
    linked = set(re.findall(r"screenshots/([\w.-]+\.svg)", README.read_text(encoding="utf-8")))
    assert linked == set(names)


def test_unknown_shot_names_are_refused(capsys) -> None:
    import pytest

    with pytest.raises(SystemExit):
        screenshots.main(["--out", "/nonexistent", "nope"])
    assert "unknown shot 'nope'" in capsys.readouterr().err


async def test_a_shot_is_an_svg_of_the_demo(tmp_path) -> None:
    shot = next(s for s in screenshots.SHOTS if s.filename == "tail.svg")
    path = await screenshots.take(shot, tmp_path)
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<svg") and "all&#160;channels" in text

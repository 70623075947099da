"""Skill cards (SKILL.md): parse the YAML front matter, and render a card from passport + resume.

The front-matter fences follow ag2 1.2.1 exactly; the header is YAML (SPEC §3.6), parsed so the
result always stays JSON-serialisable, and parsing never raises on bad YAML.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any

import yaml

if TYPE_CHECKING:
    from ag2net.identity import Passport, Resume

DEFAULT_DESCRIPTION = "Network-registered agent."

# A mapping with aliases can expand to far more values than the text holds; cap what we build.
MAX_FRONTMATTER_VALUES = 10_000

_BaseLoader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _SkillLoader(_BaseLoader):  # type: ignore[misc, valid-type]
    """Safe YAML that keeps dates, binary and non-finite floats as their source text."""


def _scalar_text(loader: Any, node: Any) -> str:
    return loader.construct_scalar(node)


def _float_or_text(loader: Any, node: Any) -> float | str:
    value = loader.construct_yaml_float(node)
    return value if math.isfinite(value) else loader.construct_scalar(node)


def _set_as_list(loader: Any, node: Any) -> list[Any]:
    return list(loader.construct_mapping(node))


_SkillLoader.add_constructor("tag:yaml.org,2002:timestamp", _scalar_text)
_SkillLoader.add_constructor("tag:yaml.org,2002:binary", _scalar_text)
_SkillLoader.add_constructor("tag:yaml.org,2002:float", _float_or_text)
_SkillLoader.add_constructor("tag:yaml.org,2002:set", _set_as_list)


class ParsedSkill(dict):
    """``{"frontmatter": {...}, "body": "...", "error": None | "..."}`` with same-named properties."""

    def __init__(self, frontmatter: dict[str, Any], body: str, error: str | None = None) -> None:
        super().__init__(frontmatter=frontmatter, body=body, error=error)

    @property
    def frontmatter(self) -> dict[str, Any]:
        return self["frontmatter"]

    @property
    def body(self) -> str:
        return self["body"]

    @property
    def error(self) -> str | None:
        """Why the front matter was ignored (bad YAML, not a mapping), or ``None``."""
        return self["error"]


class _TooBig(Exception):
    pass


class _Cycle(Exception):
    pass


def _jsonable(value: Any, budget: list[int], stack: set[int]) -> Any:
    """A JSON-shaped copy: string keys, lists for tuples; refuses cycles and alias blow-ups."""
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooBig
    if isinstance(value, dict):
        if id(value) in stack:
            raise _Cycle
        stack.add(id(value))
        out = {_key_text(k): _jsonable(v, budget, stack) for k, v in value.items()}
        stack.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        if id(value) in stack:
            raise _Cycle
        stack.add(id(value))
        items = [_jsonable(v, budget, stack) for v in value]
        stack.discard(id(value))
        return items
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def _key_text(key: Any) -> str:
    if isinstance(key, str):
        return key
    # the same spelling json.dumps gives non-string keys
    return json.dumps(key) if key is None or isinstance(key, (bool, int, float)) else str(key)


def _yaml_problem(exc: yaml.YAMLError, first_line: int) -> str:
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc).splitlines()[0]
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    if mark is not None:
        return f"{problem} at line {first_line + mark.line}"
    return problem


def _split_fences(md: str) -> tuple[str, str, int] | None:
    """``(header, body, first header line)`` by ag2 1.2.1's fence rules, or ``None`` without both fences."""
    if not md.startswith("---"):
        return None
    rest = md[3:]
    first_line = 1
    if rest.startswith("\n"):
        rest = rest[1:]
        first_line = 2
    end = rest.find("\n---")
    if end < 0:
        return None
    body = rest[end + 4 :]
    if body.startswith("\n"):
        body = body[1:]
    return rest[:end], body, first_line


def parse_skill_frontmatter(md: str) -> ParsedSkill:
    """Split SKILL.md into YAML front matter and markdown body. Never raises on malformed input.

    The text must start with ``---``; the first ``\\n---`` closes the block; the body is what follows
    the closing fence minus one newline. Without both fences the whole text is the body. When the
    header is not valid YAML or not a mapping, ``frontmatter`` is ``{}``, ``body`` is the whole
    text and ``error`` says why.
    """
    if not isinstance(md, str):
        raise TypeError(
            f"parse_skill_frontmatter expects the SKILL.md text as a str, got {type(md).__name__}"
        )
    split = _split_fences(md)
    if split is None:
        return ParsedSkill({}, md)
    header, body, first_line = split
    try:
        loaded = yaml.load(header, Loader=_SkillLoader)
    except yaml.YAMLError as exc:
        problem = _yaml_problem(exc, first_line)
        return ParsedSkill(
            {}, md, f"skill front matter is not valid YAML: {problem}; fix the block between the --- fences"
        )
    except (RecursionError, ValueError, TypeError, OverflowError) as exc:
        return ParsedSkill(
            {},
            md,
            f"skill front matter could not be read ({type(exc).__name__}); fix the block between the --- fences",
        )
    if loaded is None:
        return ParsedSkill({}, body)
    if not isinstance(loaded, dict):
        kind = "a list" if isinstance(loaded, list) else f"a single value ({type(loaded).__name__})"
        return ParsedSkill(
            {},
            md,
            f"skill front matter must be a mapping of 'key: value' lines, but it is {kind}; "
            "fix the block between the --- fences",
        )
    try:
        frontmatter = _jsonable(loaded, [MAX_FRONTMATTER_VALUES], set())
    except _TooBig:
        return ParsedSkill(
            {},
            md,
            f"skill front matter expands to more than {MAX_FRONTMATTER_VALUES} values (through aliases?); "
            "shorten the block between the --- fences",
        )
    except _Cycle:
        return ParsedSkill(
            {},
            md,
            "skill front matter refers to itself through an alias; remove the alias between the --- fences",
        )
    except RecursionError:
        return ParsedSkill(
            {}, md, "skill front matter is nested too deeply; flatten the block between the --- fences"
        )
    return ParsedSkill(frontmatter, body)


def _plain_yaml_ok(text: str) -> bool:
    """Whether ``key: text`` reads back from YAML as exactly this string."""
    try:
        return yaml.load(f"k: {text}", Loader=_SkillLoader) == {"k": text}
    except yaml.YAMLError:
        return False


def _yaml_value(text: str) -> str:
    # ag2 writes values bare; a bare value that YAML would misread ("yes", "a: b", "") is written
    # double-quoted so the card still parses back to the same name and description
    return text if _plain_yaml_ok(text) else json.dumps(text, ensure_ascii=False)


def render_fallback_skill(passport: Passport, resume: Resume | None) -> str:
    """A SKILL.md made from a passport and resume, for agents registered without one."""
    summary = resume.summary if resume is not None else ""
    lines = [
        "---",
        f"name: {_yaml_value(passport.name)}",
        f"description: {_yaml_value(summary or DEFAULT_DESCRIPTION)}",
        "---",
        "",
    ]
    if resume is not None:
        if resume.claimed_capabilities:
            lines.append("## Capabilities")
            lines.extend(f"- {cap}" for cap in resume.claimed_capabilities)
            lines.append("")
        if resume.domains:
            lines.append("## Domains")
            lines.extend(f"- {domain}" for domain in resume.domains)
            lines.append("")
        if resume.observed:
            lines.append("## Track record")
            for cap in sorted(resume.observed):
                stat = resume.observed[cap]
                lines.append(
                    f"- {cap}: {stat.completed} completed / {stat.failed} failed / "
                    f"{stat.expired} expired (n={stat.n})"
                )
            lines.append("")
        if resume.examples:
            lines.append("## Examples")
            lines.extend(f"- {ex.title} \u2014 {ex.outcome or 'no outcome'}" for ex in resume.examples)
            lines.append("")
    while lines and lines[-1] == "":
        lines.pop()
    return "\n".join(lines) + "\n"


_HEADING_RE = re.compile(r"#{1,6}\s+(.*\S)\s*")


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, (dict, list)):
        return None
    text = str(value).strip()
    return text or None


def skill_summary(md: str | None) -> dict[str, Any]:
    """What a peer card shows: ``name``, ``title``, ``description`` and any parse ``error``.

    ``title`` falls back to ``name`` then to the body's first heading; ``description`` to the body's
    first paragraph (cut to 200 characters).
    """
    if not md:
        return {"name": None, "title": None, "description": None, "error": None}
    parsed = parse_skill_frontmatter(md)
    fm = parsed.frontmatter
    name = _text(fm.get("name"))
    title = _text(fm.get("title")) or name
    description = _text(fm.get("description"))
    split = _split_fences(md)
    body = split[1] if split is not None else md
    heading: str | None = None
    paragraph: list[str] = []
    for raw in body.splitlines():
        line = raw.strip()
        match = _HEADING_RE.fullmatch(line)
        if match:
            if heading is None:
                heading = match.group(1)
            if paragraph:
                break
            continue
        if not line:
            if paragraph:
                break
            continue
        paragraph.append(line)
    if title is None:
        title = heading
    if description is None and paragraph:
        description = " ".join(paragraph)
        if len(description) > 200:
            description = description[:199] + "\u2026"
    return {"name": name, "title": title, "description": description, "error": parsed.error}


__all__ = [
    "DEFAULT_DESCRIPTION",
    "ParsedSkill",
    "parse_skill_frontmatter",
    "render_fallback_skill",
    "skill_summary",
]

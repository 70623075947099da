"""The demo's cast: six roles, each with its passport details, instructions for a real model, and a skill card.

The skill cards are package data (``ag2net/demo/skills/<name>.md``, Markdown with YAML front matter), read with
``importlib.resources`` so they ship in a wheel and can be edited as documents.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from ag2net.identity import CostProfile

SKILLS_FOLDER = "skills"
"""Where the skill cards live inside the ``ag2net.demo`` package."""


def skill_card(name: str) -> str:
    """The skill card of demo role ``name`` (``ag2net/demo/skills/<name>.md``), as Markdown text."""
    card = resources.files("ag2net.demo").joinpath(SKILLS_FOLDER, f"{name}.md")
    try:
        return card.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(
            f"the demo's skill card {SKILLS_FOLDER}/{name}.md is missing from the installed ag2net.demo "
            "package; reinstall ag2net (the cards are package data)"
        ) from None


@dataclass(frozen=True, slots=True)
class Role:
    """One demo agent: who it is, how it presents itself, and its instructions for a real model."""

    name: str
    summary: str
    capabilities: tuple[str, ...]
    domains: tuple[str, ...]
    cost: CostProfile
    system_prompt: str
    skill_md: str


ROLES: tuple[Role, ...] = (
    Role(
        "planner",
        "Turns goals into ordered plans and runs discussions to a decision.",
        ("planning", "coordination"),
        ("product", "delivery"),
        CostProfile(input_per_mtok=3.0, output_per_mtok=15.0, latency_tier="standard"),
        "You are the planner of a small product team designing offline sync for a mobile app. Turn goals "
        "into ordered steps, ask the right peers, and close discussions with a decision. Under 80 words.",
        skill_card("planner"),
    ),
    Role(
        "researcher",
        "Finds prior art and sources; summarises what is known.",
        ("research", "sources"),
        ("mobile", "sync"),
        CostProfile(input_per_mtok=1.0, output_per_mtok=4.0, latency_tier="slow"),
        "You are the team's researcher. Answer with what is known, cite patterns and prior art, and ask the "
        "critic (delegate) about risks before you answer a design question. Under 80 words.",
        skill_card("researcher"),
    ),
    Role(
        "critic",
        "Reviews plans for risks, gaps and untested assumptions.",
        ("critique", "risk-review"),
        ("quality", "reliability"),
        CostProfile(input_per_mtok=2.0, output_per_mtok=8.0, latency_tier="standard"),
        "You are the team's critic. Point out the biggest risk or gap in what you are shown, concretely, and "
        "suggest one mitigation. Under 60 words.",
        skill_card("critic"),
    ),
    Role(
        "coder",
        "Designs and estimates the implementation.",
        ("code", "estimation"),
        ("python", "sqlite", "mobile"),
        CostProfile(input_per_mtok=0.5, output_per_mtok=2.0, latency_tier="fast"),
        "You are the team's engineer. Propose concrete implementation steps and estimates in days. When you "
        "work inside a task, report progress with the tasks tool. Under 80 words.",
        skill_card("coder"),
    ),
    Role(
        "drafter",
        "Writes first drafts of docs and announcements.",
        ("writing",),
        ("docs",),
        CostProfile(input_per_mtok=0.8, output_per_mtok=3.0, latency_tier="fast"),
        "You are the team's writer. Write the requested draft, then call submit_for_review. Under 80 words.",
        skill_card("drafter"),
    ),
    Role(
        "reviewer",
        "Edits drafts and approves them for publishing.",
        ("editing", "review"),
        ("docs",),
        CostProfile(input_per_mtok=1.5, output_per_mtok=6.0, latency_tier="standard"),
        "You are the team's editor. Review the draft: call request_changes with one concrete change, or approve "
        "when it is good. Under 60 words.",
        skill_card("reviewer"),
    ),
)


__all__ = ["ROLES", "SKILLS_FOLDER", "Role", "skill_card"]

"""Skill cards: fence rules of ag2 1.2.1, YAML front matter (SPEC §3.6), the fallback card."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ag2net.identity import ObservedStat, Passport, Resume, ResumeExample
from ag2net.skills import ParsedSkill, parse_skill_frontmatter, render_fallback_skill, skill_summary

SEED_SKILL = """\
---
title: Research Assistant
expertise: [policy, finance]
---

# Researcher

A senior policy analyst. Best at:

- Scenario synthesis from multi-source briefs.
- Rebuttal review with confidence scores.

Limitations: not for code review or numerical analysis.
"""


def test_seed_example_parsing_the_frontmatter() -> None:
    from ag2net import parse_skill_frontmatter

    skill_md = SEED_SKILL
    parsed: ParsedSkill = parse_skill_frontmatter(skill_md)
    print(parsed.frontmatter)  # {"title": "Research Assistant", "expertise": [...]}
    print(parsed.body)  # the markdown body
    assert parsed.frontmatter == {"title": "Research Assistant", "expertise": ["policy", "finance"]}
    assert parsed.body.startswith("\n# Researcher\n\nA senior policy analyst.")
    assert parsed.body.endswith("numerical analysis.\n")
    assert parsed.error is None
    assert isinstance(parsed, dict)
    assert parsed["frontmatter"] is parsed.frontmatter and parsed["body"] is parsed.body


def test_seed_example_fallback_skill() -> None:
    from ag2net import Passport, Resume, render_fallback_skill

    passport = Passport(name="researcher")
    resume = Resume(claimed_capabilities=["research"])
    skill_md = render_fallback_skill(passport, resume)
    assert skill_md == (
        "---\nname: researcher\ndescription: Network-registered agent.\n---\n\n## Capabilities\n- research\n"
    )


def test_conformance_17_yaml_lists_stay_lists() -> None:
    parsed = parse_skill_frontmatter("---\ntitle: R\nexpertise: [a, b]\n---\n\n# X\n")
    assert parsed.frontmatter == {"title": "R", "expertise": ["a", "b"]}
    assert parsed.body == "\n# X\n"
    assert parsed == {
        "frontmatter": {"title": "R", "expertise": ["a", "b"]},
        "body": "\n# X\n",
        "error": None,
    }


def test_no_opening_fence_is_all_body() -> None:
    for md in ["# Just markdown\n", " ---\ntitle: x\n---\n", "", "\n---\na: b\n---\n"]:
        parsed = parse_skill_frontmatter(md)
        assert parsed.frontmatter == {} and parsed.body == md and parsed.error is None


def test_no_closing_fence_is_all_body() -> None:
    md = "---\ntitle: R\n\n# X\n"
    parsed = parse_skill_frontmatter(md)
    assert parsed.frontmatter == {} and parsed.body == md and parsed.error is None


def test_empty_block_right_after_opening_is_not_recognised() -> None:
    # as in ag2 1.2.1: after dropping "---\n" the rest "---\n" has no "\n---"
    md = "---\n---\nbody\n"
    parsed = parse_skill_frontmatter(md)
    assert parsed.frontmatter == {} and parsed.body == md


def test_blank_header_is_an_empty_mapping_without_error() -> None:
    parsed = parse_skill_frontmatter("---\n\n---\nbody\n")
    assert parsed.frontmatter == {} and parsed.body == "body\n" and parsed.error is None
    parsed = parse_skill_frontmatter("---\n# only a comment\n---\nbody")
    assert parsed.frontmatter == {} and parsed.body == "body" and parsed.error is None


def test_closing_line_rest_and_crlf_stay_in_body() -> None:
    parsed = parse_skill_frontmatter("---\na: 1\n--- trailing\nbody")
    assert parsed.frontmatter == {"a": 1}
    assert parsed.body == " trailing\nbody"
    crlf = parse_skill_frontmatter("---\r\na: 1\r\n---\r\nbody")
    assert crlf.frontmatter == {"a": 1}
    assert crlf.body == "\r\nbody"


def test_only_one_leading_newline_is_dropped_from_body() -> None:
    assert parse_skill_frontmatter("---\na: b\n---\n\n\nX").body == "\n\nX"
    assert parse_skill_frontmatter("---\na: b\n---").body == ""


def test_opening_fence_without_newline_keeps_header_text() -> None:
    parsed = parse_skill_frontmatter("---name: x\n---\nbody")
    assert parsed.frontmatter == {"name": "x"}


def test_yaml_values_keep_their_types_and_urls_survive() -> None:
    parsed = parse_skill_frontmatter(
        "---\nurl: http://x:y\ncount: 3\nratio: 0.5\nok: true\nnothing: null\n"
        "nested:\n  a: [1, 2]\n  b: {c: d}\n---\n"
    )
    assert parsed.frontmatter == {
        "url": "http://x:y",
        "count": 3,
        "ratio": 0.5,
        "ok": True,
        "nothing": None,
        "nested": {"a": [1, 2], "b": {"c": "d"}},
    }


def test_dates_and_other_non_json_yaml_become_strings() -> None:
    parsed = parse_skill_frontmatter(
        "---\nwhen: 2024-01-05\nat: 2024-01-05 10:00:00\nblob: !!binary aGVsbG8=\n"
        "big: .inf\nnan: .nan\ntags: !!set {a, b}\n1: one\nnull: nil\npairs: !!omap [{a: 1}]\n---\n"
    )
    fm = parsed.frontmatter
    assert fm["when"] == "2024-01-05"
    assert fm["at"] == "2024-01-05 10:00:00"
    assert fm["blob"] == "aGVsbG8="
    assert fm["big"] == ".inf" and fm["nan"] == ".nan"
    assert fm["tags"] == ["a", "b"]
    assert fm["1"] == "one" and fm["null"] == "nil"
    assert fm["pairs"] == [["a", 1]]
    assert json.loads(json.dumps(fm, allow_nan=False)) == fm


def test_malformed_yaml_never_raises_and_says_where() -> None:
    md = "---\ntitle: R\n  bad: : x\n---\n\n# X\n"
    parsed = parse_skill_frontmatter(md)
    assert parsed.frontmatter == {}
    assert parsed.body == md
    assert parsed.error == (
        "skill front matter is not valid YAML: mapping values are not allowed in this context at line 3; "
        "fix the block between the --- fences"
    )


def test_unclosed_flow_list_is_an_error() -> None:
    parsed = parse_skill_frontmatter("---\ntitle: R\nexpertise: [a, b\n---\nX")
    assert parsed.frontmatter == {}
    assert parsed.error is not None
    assert parsed.error.startswith("skill front matter is not valid YAML: ")
    assert parsed.error.endswith("; fix the block between the --- fences")


def test_header_that_is_not_a_mapping_is_an_error() -> None:
    for header, kind in [
        ("- a\n- b", "a list"),
        ("just words", "a single value (str)"),
        ("42", "a single value (int)"),
    ]:
        md = f"---\n{header}\n---\nbody"
        parsed = parse_skill_frontmatter(md)
        assert parsed.frontmatter == {} and parsed.body == md
        assert parsed.error == (
            f"skill front matter must be a mapping of 'key: value' lines, but it is {kind}; "
            "fix the block between the --- fences"
        )


def test_self_referencing_alias_is_an_error() -> None:
    parsed = parse_skill_frontmatter("---\na: &a [*a]\n---\nX")
    assert parsed.frontmatter == {}
    assert parsed.error is not None and "refers to itself through an alias" in parsed.error


def test_alias_expansion_is_capped() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, cur in zip("abcde", "bcdef", strict=True):
        levels.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    parsed = parse_skill_frontmatter("---\n" + "\n".join(levels) + "\n---\nX")
    assert parsed.frontmatter == {}
    assert parsed.error is not None and "expands to more than" in parsed.error


def test_shared_aliases_that_fit_are_fine() -> None:
    parsed = parse_skill_frontmatter("---\nbase: &b {x: 1}\nother: *b\n---\n")
    assert parsed.frontmatter == {"base": {"x": 1}, "other": {"x": 1}}
    assert parsed.frontmatter["base"] is not parsed.frontmatter["other"]


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    parsed = parse_skill_frontmatter("---\na: " + "[" * 3000 + "]" * 3000 + "\n---\n")
    assert parsed.frontmatter == {} and parsed.error is not None


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("-\n\r\t :#[]{}&*!|>'\"%@`,?abc19.")), max_size=80))
def test_parse_never_raises_and_stays_json(md: str) -> None:
    parsed = parse_skill_frontmatter(md)
    assert isinstance(parsed.frontmatter, dict)
    json.dumps(parsed.frontmatter, allow_nan=False)
    if parsed.error is not None:
        assert parsed.frontmatter == {} and parsed.body == md
    if not md.startswith("---"):
        assert parsed.body == md


def test_empty_resume_fallback_is_exact() -> None:
    assert (
        render_fallback_skill(Passport("n"), Resume())
        == "---\nname: n\ndescription: Network-registered agent.\n---\n"
    )
    assert (
        render_fallback_skill(Passport("n"), None)
        == "---\nname: n\ndescription: Network-registered agent.\n---\n"
    )


def test_full_fallback_is_exact_with_observed_sorted_and_em_dash() -> None:
    resume = Resume(
        claimed_capabilities=["research", "summarise"],
        domains=["policy", "finance"],
        summary="Finds sources and writes briefs.",
        examples=[ResumeExample("Q3 brief", outcome="accepted"), ResumeExample("Draft")],
        observed={
            "summarise": ObservedStat(n=2, completed=1, failed=1),
            "analysis": ObservedStat(n=5, completed=3, failed=0, expired=2),
        },
    )
    assert render_fallback_skill(Passport("researcher"), resume) == (
        "---\n"
        "name: researcher\n"
        "description: Finds sources and writes briefs.\n"
        "---\n"
        "\n"
        "## Capabilities\n"
        "- research\n"
        "- summarise\n"
        "\n"
        "## Domains\n"
        "- policy\n"
        "- finance\n"
        "\n"
        "## Track record\n"
        "- analysis: 3 completed / 0 failed / 2 expired (n=5)\n"
        "- summarise: 1 completed / 1 failed / 0 expired (n=2)\n"
        "\n"
        "## Examples\n"
        "- Q3 brief \u2014 accepted\n"
        "- Draft \u2014 no outcome\n"
    )


def test_only_present_sections_are_rendered() -> None:
    resume = Resume(observed={"b": ObservedStat(n=1, completed=1), "a": ObservedStat()})
    assert render_fallback_skill(Passport("n"), resume) == (
        "---\nname: n\ndescription: Network-registered agent.\n---\n\n"
        "## Track record\n"
        "- a: 0 completed / 0 failed / 0 expired (n=0)\n"
        "- b: 1 completed / 0 failed / 0 expired (n=1)\n"
    )


def test_fallback_quotes_values_yaml_would_misread_so_it_parses_back() -> None:
    resume = Resume(summary="Plans: then executes")
    md = render_fallback_skill(Passport("yes"), resume)
    assert md.startswith('---\nname: "yes"\ndescription: "Plans: then executes"\n---\n')
    parsed = parse_skill_frontmatter(md)
    assert parsed.error is None
    assert parsed.frontmatter == {"name": "yes", "description": "Plans: then executes"}
    for name in ["1234", "null", "a #b", "[x]", "two\nlines", "x: y", "'q'", "ü-agent"]:
        parsed = parse_skill_frontmatter(render_fallback_skill(Passport(name), Resume(summary=name)))
        assert parsed.frontmatter == {"name": name, "description": name}, name


def test_fallback_parses_with_the_plain_card() -> None:
    md = render_fallback_skill(Passport("planner"), Resume(summary="Breaks work down.", domains=["ops"]))
    parsed = parse_skill_frontmatter(md)
    assert parsed.frontmatter == {"name": "planner", "description": "Breaks work down."}
    assert parsed.body == "\n## Domains\n- ops\n"


def test_skill_summary_from_front_matter() -> None:
    assert skill_summary(SEED_SKILL) == {
        "name": None,
        "title": "Research Assistant",
        "description": "A senior policy analyst. Best at:",
        "error": None,
    }
    card = skill_summary(render_fallback_skill(Passport("planner"), Resume(summary="Breaks work down.")))
    assert card == {"name": "planner", "title": "planner", "description": "Breaks work down.", "error": None}


def test_skill_summary_falls_back_to_the_body() -> None:
    assert skill_summary("# Helper\n\nDoes small jobs\nquickly.\n\nMore.") == {
        "name": None,
        "title": "Helper",
        "description": "Does small jobs quickly.",
        "error": None,
    }
    long = skill_summary("word " * 100)
    assert long["description"] is not None and len(long["description"]) == 200
    assert long["description"].endswith("\u2026")
    assert skill_summary(None) == {"name": None, "title": None, "description": None, "error": None}
    assert skill_summary("") == {"name": None, "title": None, "description": None, "error": None}


def test_skill_summary_reports_bad_yaml_and_reads_the_body() -> None:
    card = skill_summary("---\ntitle: [x\n---\n# Card\n\nText.\n")
    assert card["error"] is not None and card["title"] == "Card" and card["description"] == "Text."

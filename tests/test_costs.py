"""Prices and costs (``ag2net.costs``): the built-in table and its family matching, overrides from the settings
file and ``AG2NET_PRICES`` (and their one-sentence refusals), the cost of a turn, an agent and a channel,
estimates labelled as such, and prompt-cache hit rates."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ag2net.client.turns import TurnRecord
from ag2net.costs import (
    BUILTIN_PRICES,
    PRICES_ENV,
    Price,
    agent_hit_rate,
    cache_hit_rates,
    costs_by_agent,
    costs_by_channel,
    env_prices,
    format_dollars,
    price_table,
    turn_cost,
    turn_tokens,
)


def record(
    *,
    agent: str = "a1",
    channel: str = "c1",
    model: str | None = "gpt-4o",
    prompt: int = 10_000,
    cached: int = 0,
    completion: int = 500,
    method: str = "provider",
    turn_id: str = "t",
) -> dict[str, Any]:
    return {
        "turn_id": turn_id,
        "channel_id": channel,
        "agent_id": agent,
        "trigger_envelope_id": "e",
        "model_params": {"model": model} if model else {},
        "tokens": {"system": 5, "prompt": prompt, "cached": cached, "completion": completion, "reasoning": 0},
        "token_method": method,
    }


def test_model_names_match_their_family():
    table = price_table(environ={})
    assert table.lookup("gpt-4o-2024-08-06") == ("gpt-4o", BUILTIN_PRICES["gpt-4o"])
    assert table.lookup("openai/GPT-4o-mini") == ("gpt-4o-mini", BUILTIN_PRICES["gpt-4o-mini"])
    assert table.lookup("gpt-4.1-mini-2025-04-14")[0] == "gpt-4.1-mini"  # type: ignore[index]
    assert table.lookup("claude-sonnet-4-20250514")[0] == "claude-sonnet-4"  # type: ignore[index]
    assert table.lookup("gpt-4oops") is None  # no boundary after the family name
    assert table.lookup("llama3.1:8b") is None and table.lookup(None) is None


def test_a_provider_turn_costs_its_cached_and_fresh_tokens_apart():
    price = BUILTIN_PRICES["gpt-4o"]
    cost = turn_cost(record(prompt=10_000, cached=8_192, completion=500), price_table(environ={}))
    expected = (1_808 * price.input + 8_192 * price.cached_input + 500 * price.output) / 1_000_000
    assert cost.dollars == pytest.approx(expected)
    assert not cost.estimated and cost.price_key == "gpt-4o"
    assert cost.label == f"{format_dollars(expected)} (provider usage)"
    assert cost.tokens.hit_rate == pytest.approx(8_192 / 10_000)


def test_cache_writes_are_billed_at_their_own_price():
    table = price_table(environ={})
    data = record(model="claude-sonnet-4", prompt=4_000, cached=0, completion=0)
    data["tokens"]["cache_creation"] = 3_000
    assert turn_cost(data, table).dollars == pytest.approx((1_000 * 3.00 + 3_000 * 3.75) / 1_000_000)


def test_an_estimate_is_labelled_and_has_no_hit_rate():
    cost = turn_cost(record(method="heuristic", cached=0), price_table(environ={}))
    assert cost.estimated and cost.label.startswith("~$") and cost.label.endswith("(estimate, heuristic)")
    assert cost.tokens.hit_rate is None


def test_a_model_without_a_price_has_no_cost_and_says_how_to_add_one():
    cost = turn_cost(record(model="llama3.1:8b"), price_table(environ={}))
    assert cost.dollars is None
    assert cost.reason == (
        f"no price for model 'llama3.1:8b'; add it to [prices] in the settings file or {PRICES_ENV}"
    )
    assert turn_cost(record(model=None), price_table(environ={})).reason.startswith("the turn names no model")


def test_an_old_record_is_costed_from_its_counted_parts():
    old = TurnRecord(
        channel_id="c",
        agent_id="a",
        trigger_envelope_id="e",
        tokens={"system": 10, "history": 100, "tools": 40, "input": 50, "output": 25},
        token_method="heuristic",
        model_params={"model": "gpt-4o-mini"},
    )
    tokens = turn_tokens(old)
    assert (tokens.prompt, tokens.cached, tokens.completion, tokens.method) == (200, 0, 25, "heuristic")
    assert turn_cost(old, price_table(environ={})).estimated


def test_a_turn_a_person_answered_cost_nothing_and_says_so():
    answered = TurnRecord(channel_id="c", agent_id="a", trigger_envelope_id="e", model_calls=0, reply="done")
    answered.model_params = {"model": "gpt-4o"}
    cost = turn_cost(answered, price_table(environ={}))
    assert (cost.dollars, cost.label, cost.estimated) == (0.0, "$0 (no model call)", False)


def test_costs_add_up_per_agent_and_per_channel():
    table = price_table(environ={})
    records = [
        record(agent="a1", channel="c1", prompt=1_000_000, completion=0, turn_id="1"),
        record(agent="a1", channel="c2", prompt=0, completion=1_000_000, turn_id="2"),
        record(agent="a2", channel="c1", model="llama3", turn_id="3"),
        record(agent="a2", channel="c1", method="heuristic", prompt=1_000_000, completion=0, turn_id="4"),
    ]
    agents = costs_by_agent(records, table)
    assert agents["a1"].dollars == pytest.approx(2.50 + 10.00)
    assert agents["a1"].label == "$12.50 over 2 turns"
    assert agents["a2"].dollars == pytest.approx(2.50)
    assert agents["a2"].label == "~$2.50 over 1 turn (1 estimated, 1 unpriced)"
    channels = costs_by_channel(records, table)
    assert channels["c1"].dollars == pytest.approx(5.00) and channels["c1"].turns == 3
    assert channels["c2"].dollars == pytest.approx(10.00)
    only_unpriced = costs_by_agent([record(model="llama3")], table)["a1"]
    assert only_unpriced.label.startswith("no cost: no price for model 'llama3'")


def test_hit_rates_per_turn_and_per_agent():
    records = [
        record(prompt=1_000, cached=0),
        record(prompt=1_000, cached=900),
        record(prompt=2_000, cached=1_000),
        record(method="heuristic"),
    ]
    assert cache_hit_rates(records) == [0.0, 0.9, 0.5, None]
    assert agent_hit_rate(records) == pytest.approx(1_900 / 4_000)
    assert agent_hit_rate([record(method="heuristic")]) is None


def test_prices_from_the_environment_as_json_and_as_a_file(tmp_path):
    env = {
        PRICES_ENV: json.dumps(
            {
                "my-local-model": {"input": 0.1, "output": 0.2},
                "gpt-4o": {"input": 1, "cached_input": 0.5, "output": 4},
            }
        )
    }
    table = price_table(environ=env)
    local = table.lookup("my-local-model")
    assert local is not None and local[1] == Price(
        0.1, 0.1, 0.2, source=PRICES_ENV
    )  # cached defaults to input
    assert table.lookup("gpt-4o-2024-11-20")[1].output == 4  # type: ignore[index]
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"gpt-4o": {"input": 9, "output": 9}}), encoding="utf-8")
    assert env_prices({PRICES_ENV: str(path)})["gpt-4o"].input == 9
    assert env_prices({}) == {}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", r"^AG2NET_PRICES is not valid JSON \(.*\); fix it or unset AG2NET_PRICES$"),
        ("/nowhere/prices.json", r"^AG2NET_PRICES is neither JSON nor the path of a file"),
        ('["gpt-4o"]', r"^AG2NET_PRICES must map model names to prices"),
        ('{"gpt-4o": {"input": -1, "output": 1}}', r"^AG2NET_PRICES entry 'gpt-4o' input must be a number"),
        ('{"gpt-4o": {"input": 1}}', r"^AG2NET_PRICES entry 'gpt-4o' has no 'output' price"),
        (
            '{"gpt-4o": {"input": 1, "output": 2, "in": 3}}',
            r"^AG2NET_PRICES entry 'gpt-4o' has unknown key 'in'",
        ),
    ],
)
def test_a_bad_prices_variable_is_one_sentence_naming_it(value, message):
    with pytest.raises(ValueError, match=message) as info:
        price_table(environ={PRICES_ENV: value})
    assert "\n" not in str(info.value)


def test_settings_file_prices_sit_between_built_in_and_environment(tmp_path):
    from tui.settings import SettingsError, load_settings

    file = tmp_path / "workbench.toml"
    file.write_text(
        '[prices."gpt-4o"]\ninput = 1.0\noutput = 2.0\n[prices."my-model"]\ninput = 0.5\ncached_input = 0.1\noutput = 0.7\n',
        encoding="utf-8",
    )
    settings = load_settings(file)
    table = settings.price_table(environ={})
    assert table.lookup("gpt-4o")[1].to_dict() == {"input": 1.0, "cached_input": 1.0, "output": 2.0}  # type: ignore[index]
    assert table.lookup("my-model")[1].cached_input == 0.1  # type: ignore[index]
    assert table.lookup("gpt-4o-mini")[1] == BUILTIN_PRICES["gpt-4o-mini"]  # type: ignore[index]
    over = settings.price_table(environ={PRICES_ENV: '{"gpt-4o": {"input": 3, "output": 4}}'})
    assert over.lookup("gpt-4o")[1].input == 3  # type: ignore[index]
    with pytest.raises(SettingsError, match=r"^AG2NET_PRICES is not valid JSON"):
        settings.price_table(environ={PRICES_ENV: "{"})
    file.write_text('[prices."gpt-4o"]\ninput = -1.0\noutput = 2.0\n', encoding="utf-8")
    with pytest.raises(SettingsError, match=r"^key 'prices\.gpt-4o\.input' in .* is invalid: "):
        load_settings(file)
    file.write_text('[prices."gpt-4o"]\ninput = 1.0\noutput = 2.0\ncached = 0.5\n', encoding="utf-8")
    with pytest.raises(
        SettingsError,
        match=r"^unknown key 'prices\.gpt-4o\.cached' in .*; a model's prices are input, cached_input",
    ):
        load_settings(file)


def test_dollars_read_well():
    assert [format_dollars(x) for x in (0, 0.00004, 0.0042, 0.0123, 1.5, 1234.5)] == [
        "$0",
        "<$0.0001",
        "$0.0042",
        "$0.01",
        "$1.50",
        "$1,234.50",
    ]

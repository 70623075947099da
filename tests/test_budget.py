"""Token budgets (ag2net.agent.budget): the window table, configured windows, counting per part."""

from __future__ import annotations

import math
import sys
import time

import pytest

from ag2net.agent.budget import (
    ENV_VAR,
    ContextWindow,
    clear_context_windows,
    compact,
    context_window,
    counter_for,
    encoding_for,
    known_window,
    set_context_window,
    turn_budget,
    window_of_agent,
)
from ag2net.agent.tokens import MESSAGE_OVERHEAD, TokenCounter, heuristic_tokens
from ag2net.client.turns import TurnRecord
from ag2net.events import ModelMessage, ModelRequest, TextInput


@pytest.fixture(autouse=True)
def _no_configuration(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setenv("AG2NET_TOKENIZER", "heuristic")  # tiktoken never tried here, whatever is installed
    yield
    clear_context_windows()


def record(**kw) -> TurnRecord:
    base = dict(
        channel_id="c" * 32,
        agent_id="a" * 32,
        trigger_envelope_id="e",
        system_prompt="You are terse.",  # 14 bytes, 3 words -> 4 tokens + 4
        history=[
            ModelRequest([TextInput("[ana]: How should we sync offline edits?")]),
            ModelMessage("Use an operation log."),
        ],
        tools=[{"type": "function", "function": {"name": "say", "parameters": {"type": "object"}}}],
        inputs=[TextInput("go on")],
    )
    base.update(kw)
    return TurnRecord(**base)


# ----------------------------------------------------------------------------- the window table


@pytest.mark.parametrize(
    ("model", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("openai/gpt-4o-mini", 128_000),
        ("GPT-4o-mini", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4-0613", 8_192),
        ("gpt-4-1106-preview", 128_000),
        ("gpt-4-turbo-2024-04-09", 128_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4.1-mini-2025-04-14", 1_047_576),
        ("gpt-3.5-turbo", 16_385),
        ("o3", 200_000),
        ("o3-mini", 200_000),
        ("o4-mini", 200_000),
        ("o1-mini", 128_000),
        ("claude-3-5-sonnet-20241022", 200_000),
        ("claude-sonnet-4-20250514", 200_000),
        ("anthropic/claude-3-opus-20240229", 200_000),
        ("llama3.1:8b", 131_072),
        ("meta-llama/Llama-3.1-70B-Instruct", 131_072),
        ("llama3:8b", 8_192),
        ("llama-2-7b-chat", 4_096),
    ],
)
def test_known_models_have_their_published_window(model: str, window: int):
    found = context_window(model)
    assert found.tokens == window
    assert found.source.startswith("known model ")


@pytest.mark.parametrize("model", ["scripted", "gpt-4oops", "o30", "mistral-large", "claude-instant-1"])
def test_unknown_model_has_no_window(model: str):
    found = context_window(model)
    assert found == ContextWindow(None, f"unknown model {model}", model)
    assert known_window(model) is None


def test_no_model_no_window():
    assert context_window(None) == ContextWindow(None, "no model", None)


def test_encodings_only_for_openai_families():
    assert encoding_for("gpt-4o-mini") == "o200k_base"
    assert encoding_for("gpt-4-turbo") == "cl100k_base"
    assert encoding_for("gpt-3.5-turbo-0125") == "cl100k_base"
    assert encoding_for("o3-mini") == "o200k_base"
    assert encoding_for("claude-3-5-sonnet") is None
    assert encoding_for("llama3.1") is None
    assert encoding_for(None) is None


# ----------------------------------------------------------------------------- configured windows


def test_explicit_beats_configured_beats_table():
    set_context_window("gpt-4o", 64_000)
    assert context_window("gpt-4o") == ContextWindow(64_000, "configured for model gpt-4o", "gpt-4o")
    set_context_window("planner", 8_000)
    assert context_window("gpt-4o", agents=["planner"]).tokens == 8_000
    assert context_window("gpt-4o", agents=["planner"]).source == "configured for agent planner"
    assert context_window("gpt-4o", agents=["planner"], explicit=500) == ContextWindow(
        500, "explicit", "gpt-4o"
    )
    set_context_window("gpt-4o", None)
    assert context_window("gpt-4o").tokens == 128_000


def test_a_configured_window_gives_an_unknown_model_one():
    set_context_window("scripted", 4_000)
    assert context_window("scripted").tokens == 4_000


def test_environment_variable(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV_VAR, "planner=8_000, my-model=32768")
    assert context_window("my-model").tokens == 32_768
    assert context_window("my-model", agents=["x", "planner"]).source == "configured for agent planner"
    set_context_window("planner", 1_000)  # set in code wins over the environment
    assert context_window(None, agents=["planner"]).tokens == 1_000


@pytest.mark.parametrize(
    ("value", "words"),
    [("planner", "is not NAME=TOKENS"), ("planner=lots", "positive whole number"), ("x=-3", "positive")],
)
def test_bad_environment_variable_is_one_sentence(monkeypatch: pytest.MonkeyPatch, value: str, words: str):
    monkeypatch.setenv(ENV_VAR, value)
    with pytest.raises(ValueError, match=ENV_VAR) as err:
        context_window("gpt-4o")
    assert words in str(err.value)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8000"])
def test_bad_windows_are_refused(bad):
    with pytest.raises(ValueError, match="positive whole number"):
        set_context_window("planner", bad)
    with pytest.raises(ValueError, match="positive whole number"):
        context_window("gpt-4o", explicit=bad)


def test_window_of_an_in_process_agent():
    from ag2net import Agent, OpenAIChatModel, ScriptedModel

    agent = Agent("critic", OpenAIChatModel("gpt-4o-mini", base_url="http://127.0.0.1:9/v1"))
    assert window_of_agent(agent) == ContextWindow(128_000, "known model gpt-4o-mini", "gpt-4o-mini")
    set_context_window("critic", 2_000)
    assert window_of_agent(agent).source == "configured for agent critic"
    agent.context_window = 900  # type: ignore[attr-defined]
    assert window_of_agent(agent) == ContextWindow(900, "explicit", "gpt-4o-mini")
    scripted = Agent("coder", ScriptedModel("ok"))
    assert window_of_agent(scripted).tokens is None


# ----------------------------------------------------------------------------- counting


def test_heuristic_figures_per_part():
    turn = record()
    budget = turn_budget(turn, model="gpt-4o")
    # system: "You are terse." 14 bytes -> ceil(14/4)=4, 3 words -> 4, plus the message overhead
    assert budget.system == 4 + MESSAGE_OVERHEAD
    user = "[ana]: How should we sync offline edits?"
    assert budget.history == (
        max(math.ceil(len(user) / 4), len(user.split()))
        + MESSAGE_OVERHEAD
        + heuristic_tokens("Use an operation log.")
        + MESSAGE_OVERHEAD
    )
    schema = '{"function":{"name":"say","parameters":{"type":"object"}},"type":"function"}'
    assert budget.tools == math.ceil(len(schema) / 4)
    assert budget.input == heuristic_tokens("go on") + MESSAGE_OVERHEAD
    assert budget.total == budget.system + budget.history + budget.tools + budget.input
    assert budget.method == "heuristic" and not budget.exact and budget.label == "estimate"
    assert budget.window.tokens == 128_000
    assert budget.fraction == pytest.approx(budget.total / 128_000)
    assert not budget.warning
    assert budget.summary() == f"{budget.total} / 128k tokens (estimate)"


def test_the_same_figures_as_the_turn_record_counts():
    """A budget counts the parts the way the default handler's turn records do."""
    turn = record()
    counter = TokenCounter(None)
    budget = turn_budget(turn, counter=counter)
    assert budget.system == counter.count_system(turn.system_prompt)
    assert budget.history == counter.count_events(turn.history)
    assert budget.tools == counter.count_tools(turn.tools)
    assert budget.input == counter.count_events([ModelRequest(list(turn.inputs))])


def test_warning_at_eighty_percent():
    turn = record()
    total = turn_budget(turn).total
    assert turn_budget(turn, window=math.ceil(total / 0.8)).warning is (total / math.ceil(total / 0.8) >= 0.8)
    just_under = turn_budget(turn, window=math.floor(total / 0.8) + 1)
    assert just_under.fraction is not None and just_under.fraction < 0.8 and not just_under.warning
    at = turn_budget(turn, window=total * 5 // 4)  # total / window >= 0.8
    assert at.fraction is not None and at.fraction >= 0.8 and at.warning
    over = turn_budget(turn, window=10)
    assert over.warning and over.fraction is not None and over.fraction > 1


def test_unknown_window_no_fraction_no_warning():
    budget = turn_budget(record(), model="scripted")
    assert budget.window.tokens is None and budget.fraction is None and not budget.warning
    assert budget.summary().endswith("tokens · window unknown (estimate)")
    assert budget.to_dict()["window_source"] == "unknown model scripted"


def test_a_preview_without_inputs_counts_no_input():
    from ag2net.client.turns import TurnPreview

    preview = TurnPreview("c", "p", {}, "sys", [ModelMessage("hi")], [], {}, "heuristic", 3)
    budget = turn_budget(preview, window=100)
    assert (
        budget.input == 0
        and budget.tools == 0
        and budget.history == heuristic_tokens("hi") + MESSAGE_OVERHEAD
    )


class WordCounter(TokenCounter):
    """An exact counter stand-in (tiktoken cannot load an encoding without the network here): counts
    whitespace-separated words, and reports itself as tiktoken would."""

    def __init__(self) -> None:
        super().__init__(None)
        self._count = lambda text: len(text.split())
        self.method = "tiktoken:o200k_base"


def test_an_exact_counter_is_used_and_labelled_exact():
    budget = turn_budget(record(), model="gpt-4o", counter=WordCounter())
    assert budget.system == 3 + MESSAGE_OVERHEAD
    assert budget.input == 2 + MESSAGE_OVERHEAD
    assert budget.exact and budget.label == "exact, tiktoken o200k_base"
    assert budget.summary() == f"{budget.total} / 128k tokens (exact, tiktoken o200k_base)"


def test_counter_for_falls_back_to_the_heuristic_without_tiktoken_or_offline():
    """No tiktoken (or an encoding it cannot fetch offline): the heuristic, quickly, for every model."""
    t0 = time.perf_counter()
    for model in ("gpt-4o", "gpt-4", "claude-3-5-sonnet", None):
        assert counter_for(model).method == "heuristic"
    assert time.perf_counter() - t0 < 10


def test_counter_for_claude_is_the_heuristic_even_with_tiktoken(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AG2NET_TOKENIZER")
    assert counter_for("claude-3-5-sonnet").method == "heuristic"  # no encoding is Claude's
    assert counter_for("llama3.1").method == "heuristic"


@pytest.mark.skipif(
    "tiktoken" not in sys.modules and not __import__("importlib").util.find_spec("tiktoken"),
    reason="the tokens extra is not installed",
)
def test_with_tiktoken_installed_the_counter_is_exact_or_falls_back_in_time(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("AG2NET_TOKENIZER")
    t0 = time.perf_counter()
    counter = TokenCounter("o200k_base")
    assert time.perf_counter() - t0 < 8
    assert counter.method in ("heuristic", "tiktoken:o200k_base")


@pytest.mark.parametrize(
    ("n", "text"),
    [(0, "0"), (950, "950"), (12_345, "12.3k"), (128_000, "128k"), (1_047_576, "1.05M"), (2_000, "2k")],
)
def test_compact(n: int, text: str):
    assert compact(n) == text

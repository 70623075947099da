"""Token estimates: the documented heuristic, the tiktoken path, and per-call breakdowns."""

from __future__ import annotations

import json
import sys
import types

import pytest

from ag2net.agent import tokens
from ag2net.agent.models import ModelCall
from ag2net.agent.tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    estimate_events,
    estimate_tokens,
    estimate_tools,
    heuristic_tokens,
)
from ag2net.events import CompactionSummary, ModelMessage, ModelRequest, TextInput, ToolCallEvent


@pytest.fixture
def heuristic(monkeypatch):
    """Force the heuristic everywhere, so figures are the same with or without tiktoken installed."""
    monkeypatch.setenv("AG2NET_TOKENIZER", "heuristic")
    monkeypatch.setattr(tokens, "_default", None)
    yield
    tokens._default = None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("abcd", 1),
        ("abcde", 2),  # ceil(5 / 4)
        ("hello world", 3),  # 11 bytes → 3; 2 words
        ("a b c d e f", 6),  # 11 bytes → 3, but 6 words: the per-word floor wins
        ("éééé", 2),  # 8 UTF-8 bytes
        ("日本語", 3),  # 9 bytes → 3
    ],
)
def test_heuristic_is_bytes_over_four_with_a_word_floor(text, expected):
    assert heuristic_tokens(text) == expected


def test_counter_without_tokenizer_says_heuristic(heuristic):
    counter = TokenCounter()
    assert counter.method == "heuristic"
    assert counter.count("hello world") == 3
    assert estimate_tokens("hello world") == 3
    assert tokens.default_counter().method == "heuristic"


def test_events_cost_text_plus_message_overhead(heuristic):
    events = [
        ModelRequest([TextInput("abcd"), TextInput("efgh")]),  # "abcd\nefgh": 9 bytes → 3
        ModelMessage("abcdefgh"),  # 2
        CompactionSummary("Earlier: 3 messages.", 3),  # 20 bytes → 5
        ToolCallEvent("f", '{"x":1}', id="c1"),  # 'f({"x":1})' 10 bytes → 3
    ]
    assert estimate_events(events) == 3 + 2 + 5 + 3 + 4 * MESSAGE_OVERHEAD
    assert estimate_events([]) == 0


def test_tools_are_counted_as_compact_json(heuristic):
    schema = {"type": "function", "function": {"name": "add", "description": "Add.", "parameters": {}}}
    compact = json.dumps(schema, separators=(",", ":"), sort_keys=True)
    assert estimate_tools([schema]) == heuristic_tokens(compact)
    assert estimate_tools([schema, schema]) == 2 * heuristic_tokens(compact)
    assert estimate_tools([]) == 0


def test_call_breakdown_adds_up(heuristic):
    schema = {"type": "function", "function": {"name": "f", "parameters": {}}}
    call = ModelCall(system="be brief", history=[ModelRequest([TextInput("hi there")])], tools=[schema])
    got = TokenCounter().count_call(call)
    assert got["system"] == heuristic_tokens("be brief") + MESSAGE_OVERHEAD
    assert got["history"] == heuristic_tokens("hi there") + MESSAGE_OVERHEAD
    assert got["tools"] == estimate_tools([schema])
    assert got["total"] == got["system"] + got["history"] + got["tools"]
    assert got["method"] == "heuristic"
    assert TokenCounter().count_call(ModelCall(system="", history=[]))["total"] == 0


class _CharEncoding:
    """Stands in for a tiktoken encoding: one token per character."""

    def encode(self, text, disallowed_special=()):
        return list(text)


def test_tiktoken_is_used_when_its_encoding_loads(monkeypatch):
    monkeypatch.delenv("AG2NET_TOKENIZER", raising=False)
    requested = []

    def get_encoding(name):
        requested.append(name)
        return _CharEncoding()

    monkeypatch.setitem(sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=get_encoding))
    counter = TokenCounter("cl100k_base")
    assert requested == ["cl100k_base"]
    assert counter.method == "tiktoken:cl100k_base"
    assert counter.count("hello world") == 11
    assert counter.count_call(ModelCall(system="ab", history=[]))["method"] == "tiktoken:cl100k_base"


def test_tiktoken_that_cannot_load_offline_falls_back(monkeypatch):
    monkeypatch.delenv("AG2NET_TOKENIZER", raising=False)

    def get_encoding(name):
        raise ConnectionError("no network to download the encoding")

    monkeypatch.setitem(sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=get_encoding))
    counter = TokenCounter()
    assert counter.method == "heuristic"
    assert counter.count("hello world") == 3


def test_env_forces_heuristic_even_with_tiktoken(monkeypatch):
    monkeypatch.setenv("AG2NET_TOKENIZER", "heuristic")
    monkeypatch.setitem(
        sys.modules, "tiktoken", types.SimpleNamespace(get_encoding=lambda name: _CharEncoding())
    )
    assert TokenCounter().method == "heuristic"


def test_missing_tiktoken_falls_back(monkeypatch):
    monkeypatch.delenv("AG2NET_TOKENIZER", raising=False)
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # makes `import tiktoken` raise ImportError
    assert TokenCounter().method == "heuristic"

"""What each turn cost: a price table per model, and the cost of turns, agents and channels from turn records.

Prices are US dollars per million tokens, three per model: ``input`` (prompt tokens not read from the
provider's prompt cache), ``cached_input`` (prompt tokens read from it) and ``output`` (completion tokens;
reasoning tokens are part of them, as OpenAI bills them); ``cache_write`` is optional, for providers that
bill writing the cache (Anthropic). A turn costs::

    (prompt - cached - cache_creation) × input + cached × cached_input
    + cache_creation × (cache_write or input) + completion × output       (all / 1,000,000)

with the turn's totals over all its model calls (``TurnRecord.tokens``). When the provider reported the
usage the cost is the provider's figures priced (``method`` ``"provider"``); otherwise it is an estimate
from ag2net's own token count, with no cache reads, and says so.

The built-in figures (``BUILTIN_PRICES``) are the public list prices, standard tier, as the author knew
them in mid-2025: OpenAI's https://platform.openai.com/docs/pricing and Anthropic's
https://www.anthropic.com/pricing. They are not checked against today's lists: providers change prices,
so treat them as editable defaults. Override or add models, in increasing precedence:

1. the workbench settings file (``[prices."gpt-4o"]`` with ``input``, ``cached_input``, ``output``);
2. ``AG2NET_PRICES``: JSON (``{"gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10}}``) or the
   path of a JSON file holding that.

A model name matches its family as context windows do (``ag2net.agent.budget``): lowercase, without a
provider path, the longest known name it starts with at a ``-``, ``.``, ``:``, ``@`` or ``_`` boundary
(``gpt-4o-2024-08-06`` → ``gpt-4o``). A model with no price (a local model, the scripted demo) has no
cost (``dollars`` is None, ``reason`` says why), never a made-up zero.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ag2net.agent.budget import normalize_model

PRICES_ENV = "AG2NET_PRICES"
PROVIDER = "provider"
NO_CALL = "no model call"
"""``TurnTokens.method`` of a turn that called no model (a person answered in the agent's place)."""
PER = 1_000_000


@dataclass(frozen=True, slots=True)
class Price:
    """Dollars per million tokens for one model (``cache_write``: None when the provider bills none)."""

    input: float
    cached_input: float
    output: float
    cache_write: float | None = None
    source: str = "built-in"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"input": self.input, "cached_input": self.cached_input, "output": self.output}
        if self.cache_write is not None:
            out["cache_write"] = self.cache_write
        return out


def _p(inp: float, cached: float, out: float, write: float | None = None) -> Price:
    return Price(inp, cached, out, write)


BUILTIN_PRICES: dict[str, Price] = {
    # OpenAI, standard tier (platform.openai.com/docs/pricing, mid-2025)
    "gpt-5": _p(1.25, 0.125, 10.00),
    "gpt-5-mini": _p(0.25, 0.025, 2.00),
    "gpt-5-nano": _p(0.05, 0.005, 0.40),
    "gpt-4.1": _p(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
    "gpt-4o": _p(2.50, 1.25, 10.00),
    "gpt-4o-mini": _p(0.15, 0.075, 0.60),
    "gpt-4-turbo": _p(10.00, 10.00, 30.00),
    "gpt-4": _p(30.00, 30.00, 60.00),
    "gpt-3.5-turbo": _p(0.50, 0.50, 1.50),
    "o1": _p(15.00, 7.50, 60.00),
    "o1-mini": _p(1.10, 0.55, 4.40),
    "o3": _p(2.00, 0.50, 8.00),
    "o3-mini": _p(1.10, 0.55, 4.40),
    "o4-mini": _p(1.10, 0.275, 4.40),
    # Anthropic (anthropic.com/pricing, mid-2025): cache reads 0.1×, 5-minute cache writes 1.25× input
    "claude-opus-4": _p(15.00, 1.50, 75.00, 18.75),
    "claude-sonnet-4": _p(3.00, 0.30, 15.00, 3.75),
    "claude-3-7-sonnet": _p(3.00, 0.30, 15.00, 3.75),
    "claude-3-5-sonnet": _p(3.00, 0.30, 15.00, 3.75),
    "claude-3-5-haiku": _p(0.80, 0.08, 4.00, 1.00),
    "claude-3-haiku": _p(0.25, 0.03, 1.25, 0.30),
}
"""List prices (USD per 1M tokens) by model family; editable, see the module docstring."""

_FIELDS = ("input", "cached_input", "output", "cache_write")
_BOUNDARY = "-.:@_"


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{where} must be a number of dollars per million tokens, 0 or more; got {value!r}")
    return float(value)


def parse_prices(data: Any, where: str, source: str | None = None) -> dict[str, Price]:
    """``{model: {"input", "cached_input", "output"[, "cache_write"]}}`` as prices; ``cached_input`` defaults
    to ``input``. Raises ``ValueError`` in one sentence naming ``where`` and the entry."""
    if not isinstance(data, Mapping):
        raise ValueError(
            f'{where} must map model names to prices, like {{"gpt-4o": {{"input": 2.5, "cached_input": 1.25, '
            f'"output": 10}}}}; got {type(data).__name__}'
        )
    out: dict[str, Price] = {}
    for model, entry in data.items():
        if not isinstance(model, str) or not model.strip():
            raise ValueError(f'{where} has an empty model name; name each model, e.g. "gpt-4o"')
        at = f"{where} entry {model!r}"
        if not isinstance(entry, Mapping):
            raise ValueError(
                f'{at} must be a table of prices like {{"input": 2.5, "output": 10}}; got {entry!r}'
            )
        unknown = sorted(set(entry) - set(_FIELDS))
        if unknown:
            raise ValueError(f"{at} has unknown key {unknown[0]!r}; the keys are {', '.join(_FIELDS)}")
        for needed in ("input", "output"):
            if needed not in entry:
                raise ValueError(f"{at} has no {needed!r} price; give dollars per million tokens")
        inp = _number(entry["input"], f"{at} input")
        write = entry.get("cache_write")
        out[normalize_model(model)] = Price(
            input=inp,
            cached_input=_number(entry.get("cached_input", inp), f"{at} cached_input"),
            output=_number(entry["output"], f"{at} output"),
            cache_write=None if write is None else _number(write, f"{at} cache_write"),
            source=source or where,
        )
    return out


def env_prices(environ: Mapping[str, str] | None = None) -> dict[str, Price]:
    """The prices ``AG2NET_PRICES`` gives (JSON, or the path of a JSON file); ``{}`` when it is unset."""
    env = os.environ if environ is None else environ
    raw = str(env.get(PRICES_ENV, "") or "").strip()
    if not raw:
        return {}
    where = PRICES_ENV
    if not raw.startswith(("{", "[")):
        path = Path(raw).expanduser()
        if not path.is_file():
            raise ValueError(
                f"{PRICES_ENV} is neither JSON nor the path of a file ({raw!r} does not exist); give "
                '\'{"gpt-4o": {"input": 2.5, "cached_input": 1.25, "output": 10}}\' or a JSON file\'s path'
            )
        try:
            raw = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"{PRICES_ENV} names {path}, which cannot be read ({exc.strerror})") from None
        where = f"{PRICES_ENV} file {path}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON ({exc}); fix it or unset {PRICES_ENV}") from None
    return parse_prices(data, where, source=PRICES_ENV)


class PriceTable:
    """Prices by model family, built-in ones under the overrides (``price_table`` builds the usual one)."""

    def __init__(self, prices: Mapping[str, Price]) -> None:
        self.prices = {normalize_model(k): v for k, v in prices.items()}

    def __repr__(self) -> str:
        return f"PriceTable({len(self.prices)} models)"

    def lookup(self, model: str | None) -> tuple[str, Price] | None:
        """``(matched name, price)`` for a model name, or None when no family matches."""
        if not model:
            return None
        name = normalize_model(model)
        best: str | None = None
        for key in self.prices:
            if (name == key or (name.startswith(key) and name[len(key)] in _BOUNDARY)) and (
                best is None or len(key) > len(best)
            ):
                best = key
        return (best, self.prices[best]) if best is not None else None


def price_table(
    settings: Mapping[str, Any] | None = None, *, environ: Mapping[str, str] | None = None
) -> PriceTable:
    """Built-in prices, then the settings file's ``prices`` (already parsed ``Price``\\ s, or raw tables),
    then ``AG2NET_PRICES`` over both."""
    prices: dict[str, Price] = dict(BUILTIN_PRICES)
    if settings:
        parsed = {normalize_model(k): v for k, v in settings.items() if isinstance(v, Price)}
        raw = {k: v for k, v in settings.items() if not isinstance(v, Price)}
        prices.update(parsed)
        prices.update(parse_prices(raw, "the settings file's [prices]", source="settings") if raw else {})
    prices.update(env_prices(environ))
    return PriceTable(prices)


# ----------------------------------------------------------------------------------------- turns


def _get(record: Any, name: str, default: Any = None) -> Any:
    value = record.get(name, default) if isinstance(record, Mapping) else getattr(record, name, default)
    return default if value is None else value


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class TurnTokens:
    """A turn's totals as a cost reads them, and how they were counted (``method``)."""

    prompt: int
    cached: int
    completion: int
    reasoning: int = 0
    cache_creation: int = 0
    method: str = "heuristic"

    @property
    def provider(self) -> bool:
        return self.method == PROVIDER

    @property
    def hit_rate(self) -> float | None:
        """Cached prompt tokens / prompt tokens (None without prompt tokens or without provider figures)."""
        if not self.prompt or not self.method.startswith(PROVIDER):
            return None
        return self.cached / self.prompt


def turn_tokens(record: Any) -> TurnTokens:
    """The totals of a turn record (``TurnRecord`` or its dict): the recorded totals, or for a record from
    before them the parts it counted (system, history, tools, input; output)."""
    tokens = dict(_get(record, "tokens", {}) or {})
    method = str(_get(record, "token_method", "") or "heuristic")
    if "prompt" in tokens or "completion" in tokens:
        return TurnTokens(
            prompt=_int(tokens.get("prompt")),
            cached=_int(tokens.get("cached")),
            completion=_int(tokens.get("completion")),
            reasoning=_int(tokens.get("reasoning")),
            cache_creation=_int(tokens.get("cache_creation")),
            method=method,
        )
    if not tokens and _get(record, "model_calls", None) == 0:
        return TurnTokens(prompt=0, cached=0, completion=0, method=NO_CALL)
    prompt = sum(_int(tokens.get(k)) for k in ("system", "history", "tools", "input"))
    return TurnTokens(prompt=prompt, cached=0, completion=_int(tokens.get("output")), method=method)


@dataclass(frozen=True, slots=True)
class TurnCost:
    """One turn's cost: ``dollars`` (None when its model has no price: ``reason`` says so) and the figures."""

    turn_id: str
    agent_id: str
    channel_id: str
    model: str | None
    tokens: TurnTokens
    dollars: float | None
    price_key: str | None = None
    reason: str = ""

    @property
    def method(self) -> str:
        return self.tokens.method

    @property
    def estimated(self) -> bool:
        return not self.tokens.provider and self.tokens.method != NO_CALL

    @property
    def label(self) -> str:
        """``$0.0123 (provider)``, ``~$0.0123 (estimate, heuristic)``, ``no price for model 'llama3'``."""
        if self.dollars is None:
            return self.reason
        if self.tokens.method == NO_CALL:
            return "$0 (no model call)"
        if self.tokens.provider:
            return f"{format_dollars(self.dollars)} (provider usage)"
        return f"~{format_dollars(self.dollars)} (estimate, {self.tokens.method})"


def price_tokens(tokens: TurnTokens, price: Price) -> float:
    """Dollars for ``tokens`` at ``price`` (see the module docstring)."""
    creation = min(tokens.cache_creation, tokens.prompt)
    cached = min(tokens.cached, tokens.prompt - creation)
    fresh = tokens.prompt - cached - creation
    write = price.cache_write if price.cache_write is not None else price.input
    return (
        fresh * price.input
        + cached * price.cached_input
        + creation * write
        + tokens.completion * price.output
    ) / PER


def model_of(record: Any) -> str | None:
    params = _get(record, "model_params", {}) or {}
    model = params.get("model") if isinstance(params, Mapping) else None
    return model if isinstance(model, str) and model else None


def turn_cost(record: Any, table: PriceTable | None = None) -> TurnCost:
    """The cost of one turn record at ``table`` (default ``price_table()``)."""
    table = table if table is not None else price_table()
    model = model_of(record)
    tokens = turn_tokens(record)
    found = table.lookup(model)
    base = {
        "turn_id": str(_get(record, "turn_id", "")),
        "agent_id": str(_get(record, "agent_id", "")),
        "channel_id": str(_get(record, "channel_id", "")),
        "model": model,
        "tokens": tokens,
    }
    if found is None:
        reason = (
            f"no price for model {model!r}; add it to [prices] in the settings file or {PRICES_ENV}"
            if model
            else "the turn names no model, so it has no price"
        )
        return TurnCost(**base, dollars=None, reason=reason)
    key, price = found
    return TurnCost(**base, dollars=price_tokens(tokens, price), price_key=key)


@dataclass(slots=True)
class CostSum:
    """The cost of many turns (an agent's, a channel's): priced dollars, token sums, what was not priced."""

    key: str
    turns: int = 0
    dollars: float = 0.0
    priced: int = 0
    estimated: int = 0
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    reasons: list[str] = field(default_factory=list)

    def add(self, cost: TurnCost) -> None:
        self.turns += 1
        self.prompt += cost.tokens.prompt
        self.cached += cost.tokens.cached
        self.completion += cost.tokens.completion
        if cost.estimated:
            self.estimated += 1
        if cost.dollars is None:
            if cost.reason not in self.reasons:
                self.reasons.append(cost.reason)
        else:
            self.priced += 1
            self.dollars += cost.dollars

    @property
    def hit_rate(self) -> float | None:
        """Cached / prompt tokens over the turns (None without prompt tokens)."""
        return self.cached / self.prompt if self.prompt else None

    @property
    def label(self) -> str:
        """``$0.42 over 12 turns``, with ``~`` and the count when some are estimates or unpriced."""
        if not self.priced:
            return f"no cost: {self.reasons[0]}" if self.reasons else "no turns"
        text = f"{'~' if self.estimated else ''}{format_dollars(self.dollars)} over {self.priced} turn"
        text += "s" if self.priced != 1 else ""
        notes = []
        if self.estimated:
            notes.append(f"{self.estimated} estimated")
        if self.turns - self.priced:
            notes.append(f"{self.turns - self.priced} unpriced")
        return f"{text} ({', '.join(notes)})" if notes else text


def _sum_by(records: Iterable[Any], key: str, table: PriceTable | None) -> dict[str, CostSum]:
    table = table if table is not None else price_table()
    out: dict[str, CostSum] = {}
    for record in records:
        cost = turn_cost(record, table)
        name = getattr(cost, key)
        out.setdefault(name, CostSum(name)).add(cost)
    return out


def costs_by_agent(records: Iterable[Any], table: PriceTable | None = None) -> dict[str, CostSum]:
    """Each agent's (``agent_id``) cost over ``records``."""
    return _sum_by(records, "agent_id", table)


def costs_by_channel(records: Iterable[Any], table: PriceTable | None = None) -> dict[str, CostSum]:
    """Each channel's (``channel_id``) cost over ``records``."""
    return _sum_by(records, "channel_id", table)


def cache_hit_rates(records: Iterable[Any]) -> list[float | None]:
    """Each turn's cache hit rate (cached / prompt tokens, provider figures only; None where unknown), in the
    order given (oldest first for a sparkline)."""
    return [turn_tokens(r).hit_rate for r in records]


def agent_hit_rate(records: Iterable[Any]) -> float | None:
    """Cached / prompt tokens over the turns with provider figures (None when there are none)."""
    cached = prompt = 0
    for record in records:
        tokens = turn_tokens(record)
        if tokens.hit_rate is not None:
            cached += tokens.cached
            prompt += tokens.prompt
    return cached / prompt if prompt else None


def format_dollars(dollars: float) -> str:
    """``$1.23`` (a cent or more), ``$0.0042`` (four significant decimals below that), ``$0``, ``<$0.0001``."""
    if dollars == 0:
        return "$0"
    if dollars >= 0.01:
        return f"${dollars:,.2f}"
    if dollars < 0.0001:
        return "<$0.0001"
    return f"${dollars:.4f}"


__all__ = [
    "BUILTIN_PRICES",
    "NO_CALL",
    "PRICES_ENV",
    "CostSum",
    "Price",
    "PriceTable",
    "TurnCost",
    "TurnTokens",
    "agent_hit_rate",
    "cache_hit_rates",
    "costs_by_agent",
    "costs_by_channel",
    "env_prices",
    "format_dollars",
    "model_of",
    "parse_prices",
    "price_table",
    "price_tokens",
    "turn_cost",
    "turn_tokens",
]

"""Redaction for repro bundles: secret-named fields always, and with ``--redact`` every string that looks
like an API key or token (``keys``), an e-mail address (``emails``) or matches a regular expression.

A match is replaced by ``[redacted:NAME:HASH]``: ``NAME`` the rule that matched (``key``, ``email``,
``pattern``), ``HASH`` 8 hex digits of a keyed hash of the matched text under a key drawn afresh for each
bundle and never written. The same text gets the same replacement everywhere in one bundle (an id that a
pattern matched stays one id across the WAL, the turn records and the identities), while nothing in the
file tells what the text was. Dict keys are redacted as well as values.

Fields named like secrets (``api_key``, ``token``, ``password``, ``authorization`` …) are replaced by
``[redacted:field]`` whatever ``--redact`` says: model settings and identity claims never carry a secret
into a bundle.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

KEY_PATTERNS = (
    r"\bsk-[A-Za-z0-9_\-]{12,}",  # OpenAI, Anthropic (sk-ant-…), DeepSeek and the like
    r"\b(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*",  # an Authorization header's value
    r"\bgh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"\bgithub_pat_[A-Za-z0-9_]{20,}",
    r"\bxox[abprs]-[A-Za-z0-9\-]{10,}",  # Slack
    r"\bAKIA[0-9A-Z]{16}\b",  # AWS access key id
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API key
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # a JWT
    r"\bhf_[A-Za-z0-9]{20,}",  # Hugging Face
)
"""What ``--redact keys`` takes for an API key or a token, beside the secrets of this environment."""

EMAIL_PATTERN = r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9\-]+(?:\.[A-Za-z0-9\-]+)*\.[A-Za-z]{2,}"

SECRET_ENV = (
    "AG2NET_TOKEN",
    "AG2NET_OPERATOR_TOKEN",
    "AG2NET_DATABASE_URL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
    "AZURE_OPENAI_API_KEY",
)
"""Environment variables whose values ``--redact keys`` removes wherever they appear (the hub's tokens,
the model providers' keys), at least 8 characters long."""

SECRET_FIELD = re.compile(
    r"(?i)^(?:.*[_\-.])?(?:api[_\-]?key|apikey|token|access[_\-]?token|refresh[_\-]?token|auth[_\-]?token|"
    r"secret|client[_\-]?secret|password|passwd|authorization|private[_\-]?key|credentials?|cookie)$"
)
"""Field names whose text values are secrets whatever they hold: always replaced (text, or everything under
them; a number is kept, and ``max_tokens`` or a usage dict under ``tokens`` are not secrets)."""

FIELD_MARK = "[redacted:field]"
MARK = re.compile(r"(\[redacted:(?:key|email|pattern):[0-9a-f]{8}\]|\[redacted:field\])")
"""A replacement (kept in ``re.split``'s output by its group)."""


class RedactionError(ValueError):
    """A ``--redact`` spec that cannot be used; the message is one sentence naming the part and the fix."""


@dataclass(slots=True)
class Rule:
    name: str
    pattern: re.Pattern[str]


@dataclass(slots=True)
class Redactor:
    """Applies the rules to every string of a JSON-able value; counts what it replaced."""

    rules: list[Rule] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    replaced: int = 0
    fields: int = 0
    _key: bytes = field(default_factory=lambda: secrets.token_bytes(32))

    @classmethod
    def parse(cls, spec: str | Iterable[str] | None, environ: dict[str, str] | None = None) -> Redactor:
        """``keys``, ``emails`` and regular expressions, comma-separated (or as a list); a part that is
        neither word is a regular expression (``re`` syntax; write ``regex:…`` for one holding a comma
        or spelled like a word)."""
        parts = _split(spec)
        env = os.environ if environ is None else environ
        rules: list[Rule] = []
        kinds: list[str] = []
        for part in parts:
            if part == "keys":
                rules += [Rule("key", re.compile(p)) for p in KEY_PATTERNS]
                found = {str(env.get(k) or "").strip() for k in SECRET_ENV}
                values: list[str] = sorted((v for v in found if len(v) >= 8), key=len, reverse=True)
                rules += [Rule("key", re.compile(re.escape(v))) for v in values]
                kinds.append("keys")
            elif part == "emails":
                rules.append(Rule("email", re.compile(EMAIL_PATTERN)))
                kinds.append("emails")
            else:
                text = part.removeprefix("regex:")
                try:
                    pattern = re.compile(text)
                except re.error as exc:
                    raise RedactionError(
                        f"--redact {part!r} is not a regular expression ({exc}); give keys, emails or a "
                        "valid regular expression"
                    ) from None
                if pattern.fullmatch(""):
                    raise RedactionError(
                        f"--redact {part!r} matches the empty text, so it would redact everything; give a "
                        "pattern that needs at least one character"
                    )
                rules.append(Rule("pattern", pattern))
                kinds.append("pattern")
        return cls(rules=rules, kinds=kinds)

    # ------------------------------------------------------------------ applying

    def mark(self, rule: str, text: str) -> str:
        digest = hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"[redacted:{rule}:{digest[:8]}]"

    def text(self, value: str) -> str:
        """``value`` with every match of every rule replaced. Each rule is matched in the text between the
        marks already made (never inside a mark), again until nothing matches."""
        for _ in range(8):
            pieces = MARK.split(value)
            changed = False
            for i in range(0, len(pieces), 2):  # even pieces are text, odd ones marks
                new = self._fragment(pieces[i])
                if new != pieces[i]:
                    pieces[i], changed = new, True
            value = "".join(pieces)
            if not changed:
                break
        return value

    def _fragment(self, text: str) -> str:
        spans: list[tuple[int, int, str]] = []
        for rule in self.rules:
            spans += [
                (m.start(), m.end(), rule.name) for m in rule.pattern.finditer(text) if m.end() > m.start()
            ]
        if not spans:
            return text
        spans.sort()
        merged: list[list[Any]] = []
        for start, end, name in spans:
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, name])
        out, at = [], 0
        for start, end, name in merged:
            out += [text[at:start], self.mark(name, text[start:end])]
            at = end
        self.replaced += len(merged)
        return "".join([*out, text[at:]])

    def value(self, data: Any) -> Any:
        """A copy of the JSON-able ``data`` with secret-named fields and every match replaced."""
        if isinstance(data, str):
            return self.text(data) if self.rules else data
        if isinstance(data, dict):
            out: dict[str, Any] = {}
            for key, item in data.items():
                name = self.text(key) if self.rules and isinstance(key, str) else key
                if (
                    isinstance(key, str)
                    and isinstance(item, str | dict | list)
                    and item
                    and SECRET_FIELD.match(key)
                ):
                    self.fields += 1
                    out[name] = FIELD_MARK
                else:
                    out[name] = self.value(item)
            return out
        if isinstance(data, list | tuple):
            return [self.value(item) for item in data]
        return data

    def leaks(self, data: Any) -> list[str]:
        """The rules that still match some string of ``data`` (keys too) outside the marks: the final check
        of a bundle before it is written (empty when redaction did its work)."""
        found: set[str] = set()
        stack = [data]
        while stack:
            item = stack.pop()
            if isinstance(item, dict):
                stack += [*item.keys(), *item.values()]
            elif isinstance(item, list):
                stack += item
            elif isinstance(item, str):
                for piece in MARK.split(item)[::2]:
                    found.update(
                        r.name
                        for r in self.rules
                        if any(m.end() > m.start() for m in r.pattern.finditer(piece))
                    )
        return sorted(found)

    def summary(self) -> dict[str, Any]:
        """What the bundle's header says of its redaction (never the patterns: a pattern may be a secret)."""
        return {"kinds": list(self.kinds), "replaced": self.replaced, "secret_fields": self.fields}


def _split(spec: str | Iterable[str] | None) -> list[str]:
    if spec is None:
        return []
    if isinstance(spec, str):
        if spec.startswith("regex:"):
            return [spec]
        spec = spec.split(",")
    parts: list[str] = []
    for raw in spec:
        part = raw.strip()
        if not part:
            continue
        parts.append(part)
    return parts


__all__ = ["EMAIL_PATTERN", "KEY_PATTERNS", "SECRET_ENV", "SECRET_FIELD", "RedactionError", "Redactor"]

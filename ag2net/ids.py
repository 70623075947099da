"""Identifiers and the clock: time-ordered envelope ids, random agent/channel ids, ISO-Z timestamps.

Envelope ids are 32 lowercase hex characters: 8 bytes of big-endian nanoseconds followed by 8
random bytes, minted by a strictly monotonic generator so lexical order is admission order.
"""

from __future__ import annotations

import itertools
import os
import random
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable

ID_RE = re.compile(r"[0-9a-f]{32}")

Clock = Callable[[], str]


def make_id() -> str:
    """A random 32-hex id (agents, channels, endpoints, requests): time prefix, not monotonic."""
    return time.time_ns().to_bytes(8, "big").hex() + os.urandom(8).hex()


def is_id(value: object) -> bool:
    """True when ``value`` has the exact shape of an ag2 id (32 lowercase hex)."""
    return isinstance(value, str) and ID_RE.fullmatch(value) is not None


HUB_URN_PREFIX = "hub://"


def parse_hub_urn(s: str) -> tuple[str | None, str]:
    """Split ``"hub://{hub_id}/{agent}"`` into ``(hub_id, agent)``.

    The agent part is everything after the first ``/`` following the hub id (it may contain more slashes).
    Anything else — another scheme, an empty hub id or agent, a non-string — comes back as ``(None, s)``,
    so a plain agent name or id passes through unchanged.
    """
    if not isinstance(s, str) or not s.startswith(HUB_URN_PREFIX):
        return None, s
    hub_id, sep, agent = s[len(HUB_URN_PREFIX) :].partition("/")
    if not sep or not hub_id or not agent:
        return None, s
    return hub_id, agent


class MonotonicIds:
    """Mints strictly increasing 32-hex ids; if the clock did not advance, last + 1 ns is used.

    ``time_ns`` and ``randbytes`` are where the time prefix and the random tail come from (the
    defaults are the system's); :class:`IdMint` hands its own.
    """

    __slots__ = ("_last", "_lock", "_randbytes", "_time_ns")

    def __init__(
        self, time_ns: Callable[[], int] | None = None, randbytes: Callable[[int], bytes] | None = None
    ) -> None:
        self._last = 0
        self._lock = threading.Lock()
        self._time_ns = time_ns
        self._randbytes = randbytes

    def __call__(self) -> str:
        with self._lock:
            ns = self._time_ns() if self._time_ns is not None else time.time_ns()
            if ns <= self._last:
                ns = self._last + 1
            self._last = ns
        tail = self._randbytes(8) if self._randbytes is not None else os.urandom(8)
        return f"{ns:016x}{tail.hex()}"

    def last_id(self) -> str:
        """The time prefix of the last minted id as a comparable 32-hex id ("" before any)."""
        return self._last.to_bytes(8, "big").hex() + "0" * 16 if self._last else ""

    def observe(self, envelope_id: str) -> None:
        """Never mint at or below an id already stored (clock moved back across a restart)."""
        if is_id(envelope_id):
            ns = int(envelope_id[:16], 16)
            with self._lock:
                if ns > self._last:
                    self._last = ns


@runtime_checkable
class IdSource(Protocol):
    """Where a hub's ids come from: ``Hub(ids=...)``.

    ``new_id`` mints agent, channel, endpoint and turn ids (a time prefix and a random tail);
    ``new_envelope_id`` mints strictly increasing envelope ids, so lexical order is admission
    order; ``observe`` is told every stored envelope id on hydrate, so a restarted hub never mints
    at or below one; ``last_envelope_id`` is the highest minted or observed ("" before any).
    """

    def new_id(self) -> str: ...

    def new_envelope_id(self) -> str: ...

    def observe(self, envelope_id: str) -> None: ...

    def last_envelope_id(self) -> str: ...


class IdMint:
    """The default :class:`IdSource`: the system clock and ``os.urandom``, or what you hand it.

    ``IdMint.seeded(seed)`` gives the same ids on every run (a clock that advances one microsecond per
    reading from a fixed start, randomness from ``random.Random(seed)``), for reproducible demos,
    screenshots and tests.
    """

    __slots__ = ("_envelopes", "_randbytes", "_time_ns")

    def __init__(
        self, *, time_ns: Callable[[], int] | None = None, randbytes: Callable[[int], bytes] | None = None
    ) -> None:
        self._time_ns = time_ns or time.time_ns
        self._randbytes = randbytes or os.urandom
        self._envelopes = MonotonicIds(self._time_ns, self._randbytes)

    @classmethod
    def seeded(cls, seed: int, *, start_ns: int = 1_772_357_400_000_000_000, step_ns: int = 1_000) -> IdMint:
        """Deterministic ids: time from ``start_ns`` advancing ``step_ns`` per reading, tails from ``seed``."""
        ticks = itertools.count(1)
        rng = random.Random(seed)
        lock = threading.Lock()

        def time_ns() -> int:
            with lock:
                return start_ns + next(ticks) * step_ns

        def randbytes(n: int) -> bytes:
            with lock:
                return rng.randbytes(n)

        return cls(time_ns=time_ns, randbytes=randbytes)

    def new_id(self) -> str:
        return self._time_ns().to_bytes(8, "big").hex() + self._randbytes(8).hex()

    def new_envelope_id(self) -> str:
        return self._envelopes()

    def observe(self, envelope_id: str) -> None:
        self._envelopes.observe(envelope_id)

    def last_envelope_id(self) -> str:
        return self._envelopes.last_id()


def format_time(moment: datetime) -> str:
    """Fixed-width ISO-8601 UTC with a ``Z`` suffix and microseconds, so strings sort in time order."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond:06d}Z"


_second_cache: tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The default clock: now as fixed-width ISO-Z (the per-second prefix is cached: it is on the hot path)."""
    global _second_cache
    micros = time.time_ns() // 1000
    second, micro = divmod(micros, 1_000_000)
    cached_second, prefix = _second_cache
    if second != cached_second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S.", time.gmtime(second))
        _second_cache = (second, prefix)
    return f"{prefix}{micro:06d}Z"


def parse_time(value: str) -> datetime:
    """Parse an ISO-8601 string (``Z`` or ``+00:00``) into an aware datetime."""
    if value.endswith("Z"):
        value = value[:-1] + "+00:00"
    moment = datetime.fromisoformat(value)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def add_seconds(value: str, seconds: float) -> str:
    """``value`` (ISO) plus ``seconds``, formatted as ISO-Z."""
    return format_time(parse_time(value) + timedelta(seconds=seconds))


def seconds_between(start: str, end: str) -> float:
    """Seconds from ``start`` to ``end`` (both ISO strings)."""
    return (parse_time(end) - parse_time(start)).total_seconds()


class ManualClock:
    """An injectable clock for tests: returns a fixed time until advanced."""

    def __init__(self, start: str = "2026-01-01T00:00:00.000000Z") -> None:
        self._now = parse_time(start)

    def __call__(self) -> str:
        return format_time(self._now)

    def advance(self, seconds: float) -> None:
        self._now += timedelta(seconds=seconds)

    def set(self, value: str) -> None:
        self._now = parse_time(value)


__all__ = [
    "HUB_URN_PREFIX",
    "ID_RE",
    "Clock",
    "IdMint",
    "IdSource",
    "ManualClock",
    "MonotonicIds",
    "add_seconds",
    "format_time",
    "is_id",
    "make_id",
    "parse_hub_urn",
    "parse_time",
    "seconds_between",
    "utc_now",
]

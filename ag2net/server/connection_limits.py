"""How many connections a server holds, and who may take the last places (SPEC decision 23).

Two budgets, so that sockets which never authenticate cannot lock out the clients that do:

* **Authenticated** connections — those that presented the server's token, an identity's credentials or
  the operator token — count against ``max_connections`` in total and ``max_connections_per_address``
  per remote address. On a server without a token every connection is trusted at once and counts here
  from its handshake (HTTP 503 over the limit), as before.
* **Unauthenticated** connections on a token server count only against a much smaller budget of their
  own: ``max_unauthenticated`` in total and ``max_unauthenticated_per_address`` per address. When that
  budget is full a new handshake is not refused: the *oldest* unauthenticated connection of the same
  address (else the oldest of all) is closed to make room. A client that authenticates in its first
  frame leaves the budget within one round trip, so an anonymous flood — even one sharing the address of
  a TLS proxy with every honest client — only churns its own sockets. A connection that authenticates
  moves to the authenticated budget; when that is full it is closed with 1013 and a sentence.
* An address whose connections keep failing authentication (wrong credentials, or no hello within the
  auth timeout) gets a shorter auth timeout: halved for each failure in the last minute, down to
  ``MIN_AUTH_TIMEOUT``.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_UNAUTHENTICATED = 64
DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS = 8
MIN_AUTH_TIMEOUT = 0.5
FAILURE_MEMORY = 60.0  # seconds an authentication failure shortens its address's auth timeout
MAX_FAILURE_HALVINGS = 4
MAX_REMEMBERED_ADDRESSES = 4096
#: The settings that must be positive numbers (``serve_ws``'s options of the same names).
_POSITIVE = (
    "max_connections",
    "max_connections_per_address",
    "max_unauthenticated",
    "max_unauthenticated_per_address",
    "auth_timeout",
)


def check_positive(name: str, value: object) -> None:
    """Refuse a ``serve_ws`` setting that is not a positive number (a bool is not one)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ValueError(f"serve_ws {name} must be a positive number, got {value!r}")


@dataclass(kw_only=True, eq=False)
class ConnectionLimits:
    """The two budgets and each address's recent authentication failures."""

    max_connections: int
    max_connections_per_address: int
    max_unauthenticated: int = DEFAULT_MAX_UNAUTHENTICATED
    max_unauthenticated_per_address: int = DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS
    auth_timeout: float
    clock: Callable[[], float] = time.monotonic
    #: Authenticated connections: in total and per address.
    connections: int = field(default=0, init=False)
    per_address: dict[str, int] = field(default_factory=dict, init=False)
    #: Unauthenticated connections, oldest first: over all addresses, and per address.
    _waiting: collections.OrderedDict[Any, str] = field(
        default_factory=collections.OrderedDict, init=False, repr=False
    )
    _waiting_at: dict[str, collections.OrderedDict[Any, None]] = field(
        default_factory=dict, init=False, repr=False
    )
    _failures: collections.OrderedDict[str, collections.deque[float]] = field(
        default_factory=collections.OrderedDict, init=False, repr=False
    )
    refused: int = field(default=0, init=False)
    evicted: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        for name in _POSITIVE:
            check_positive(name, getattr(self, name))

    # ------------------------------------------------------------------ authenticated

    def over_limit(self, address: str) -> str | None:
        """The sentence refusing one more authenticated connection from ``address``, or ``None``."""
        if self.connections >= self.max_connections:
            return (
                f"this hub holds its limit of {self.max_connections} connections; try again later "
                "(the operator can raise --max-connections)"
            )
        if self.per_address.get(address, 0) >= self.max_connections_per_address:
            return (
                f"{address} already holds {self.max_connections_per_address} connections to this hub, its "
                "limit per address; close some (the operator can raise --max-connections-per-address)"
            )
        return None

    def count(self, address: str) -> None:
        self.connections += 1
        self.per_address[address] = self.per_address.get(address, 0) + 1

    def release(self, address: str) -> None:
        self.connections -= 1
        left = self.per_address.get(address, 0) - 1
        if left > 0:
            self.per_address[address] = left
        else:
            self.per_address.pop(address, None)

    # ------------------------------------------------------------------ unauthenticated

    @property
    def unauthenticated(self) -> int:
        return len(self._waiting)

    def wait(self, connection: Any, address: str) -> Any | None:
        """Count a new unauthenticated ``connection``; returns the connection to close to make room
        (the oldest of its address when that is full, else the oldest of all when the total is), or
        ``None``."""
        evict = None
        mine = self._waiting_at.get(address)
        if mine is not None and len(mine) >= self.max_unauthenticated_per_address:
            evict = next(iter(mine))
        elif len(self._waiting) >= self.max_unauthenticated:
            evict = next(iter(self._waiting))
        if evict is not None:
            self.leave(evict)
            self.evicted += 1
        self._waiting[connection] = address
        self._waiting_at.setdefault(address, collections.OrderedDict())[connection] = None
        return evict

    def leave(self, connection: Any) -> bool:
        """``connection`` is no longer unauthenticated (it authenticated, or closed); ``False`` if it
        was not counted here."""
        address = self._waiting.pop(connection, None)
        if address is None:
            return False
        mine = self._waiting_at.get(address)
        if mine is not None:
            mine.pop(connection, None)
            if not mine:
                self._waiting_at.pop(address, None)
        return True

    def waiting(self, connection: Any) -> bool:
        return connection in self._waiting

    # ------------------------------------------------------------------ failures

    def failed(self, address: str) -> None:
        """An authentication from ``address`` failed (bad credentials, or none in time)."""
        now = self.clock()
        times = self._failures.pop(address, None) or collections.deque(maxlen=MAX_FAILURE_HALVINGS)
        times.append(now)
        self._failures[address] = times
        while len(self._failures) > MAX_REMEMBERED_ADDRESSES:
            self._failures.popitem(last=False)

    def auth_timeout_for(self, address: str) -> float:
        """The auth timeout of a new connection from ``address``: halved per recent failure."""
        times = self._failures.get(address)
        if not times:
            return self.auth_timeout
        recent = sum(1 for at in times if self.clock() - at < FAILURE_MEMORY)
        return max(min(MIN_AUTH_TIMEOUT, self.auth_timeout), self.auth_timeout / (2**recent))


__all__ = [
    "DEFAULT_MAX_UNAUTHENTICATED",
    "DEFAULT_MAX_UNAUTHENTICATED_PER_ADDRESS",
    "MIN_AUTH_TIMEOUT",
    "ConnectionLimits",
    "check_positive",
]

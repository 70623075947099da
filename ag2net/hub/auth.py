"""Authentication schemes for identities: ``none`` and ``api_key`` (constant-time compare)."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from ag2net.errors import AuthError


class AuthAdapter(Protocol):
    scheme: str

    async def validate(self, passport: Any, claim: dict[str, Any]) -> None: ...


class NoAuth:
    """Accepts every identity."""

    scheme = "none"

    async def validate(self, passport: Any, claim: dict[str, Any]) -> None:
        return None


class ApiKeyAuth:
    """Claim ``{"token": str}`` checked against a per-name key (from ``keys`` then ``resolver``)."""

    scheme = "api_key"

    def __init__(
        self,
        keys: dict[str, str] | None = None,
        *,
        resolver: Callable[[str], Awaitable[str | None]] | None = None,
    ) -> None:
        self._keys = dict(keys or {})
        self._resolver = resolver

    async def validate(self, passport: Any, claim: dict[str, Any]) -> None:
        token = claim.get("token") if isinstance(claim, dict) else None
        if not isinstance(token, str):
            raise AuthError("api_key claim missing required string field 'token'")
        name = passport.name
        expected = self._keys.get(name)
        if expected is None and self._resolver is not None:
            expected = await self._resolver(name)
        if expected is None:
            raise AuthError(f"no api_key registered for {name!r}")
        if not hmac.compare_digest(expected.encode(), token.encode()):
            raise AuthError(f"api_key mismatch for {name!r}")


class AuthRegistry:
    """The auth schemes a hub accepts, by name."""

    def __init__(self, adapters: list[AuthAdapter] | None = None) -> None:
        self._adapters = {a.scheme: a for a in (adapters if adapters is not None else [NoAuth()])}

    @classmethod
    def default(cls) -> AuthRegistry:
        return cls([NoAuth()])

    def get(self, scheme: str) -> AuthAdapter:
        try:
            return self._adapters[scheme]
        except KeyError:
            raise AuthError(f"unknown auth scheme: {scheme!r}") from None

    def schemes(self) -> list[str]:
        return sorted(self._adapters)

    def __contains__(self, scheme: str) -> bool:
        return scheme in self._adapters


__all__ = ["ApiKeyAuth", "AuthAdapter", "AuthRegistry", "NoAuth"]

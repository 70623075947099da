"""Shell: Authentication schemes for identities (``none``, ``api_key``, constant-time compare), and the
per-identity secrets a ``--token`` server issues so one token holder cannot take over another's name."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from ag2net.errors import AuthError


@runtime_checkable
class AuthAdapter(Protocol):
    """One auth scheme: ``validate`` raises ``AuthError`` when ``claim`` does not prove ``passport``.
    (Runtime-checkable here; ag2 1.2.1 declares it without, so ``isinstance`` only works here.)"""

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
        if not isinstance(token, str) or not token:
            # an empty token is no token: it must never match a key configured as ""
            raise AuthError(
                "api_key claim missing required string field 'token'; send {'token': '<your api key>'}"
            )
        name = passport.name
        expected = self._keys.get(name)
        if expected is None and self._resolver is not None:
            expected = await self._resolver(name)
        if expected is None:
            raise AuthError(f"no api_key registered for {name!r}")
        try:
            given = token.encode()
        except UnicodeEncodeError:  # a lone surrogate: no key anyone was given
            raise AuthError(f"api_key mismatch for {name!r}") from None
        if not hmac.compare_digest(expected.encode(), given):
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


SECRET_META_PREFIX = "identity_secret:"


def secret_digest(secret: str) -> str:
    """What is stored for a secret. One SHA-256 is enough: secrets are 256 random bits, not passwords,
    so there is nothing to slow a guesser down for; the store never holds a usable credential."""
    return "sha256:" + hashlib.sha256(secret.encode("utf-8")).hexdigest()


def new_identity_secret() -> tuple[str, str]:
    """A fresh identity secret and its digest: the secret goes to its holder once, the digest to the store."""
    secret = secrets.token_urlsafe(32)
    return secret, secret_digest(secret)


class IdentitySecrets:
    """Per-identity credentials on a token server, kept hashed in each identity's own agent record.

    The digest is written with the identity (``Hub.register_identity(secret_digest=...)``) and replaced by
    a rotation (``Hub.set_identity_secret``), each in one write that memory follows only once it committed,
    so an attach never sees an identity that is registered but not yet protected, and nothing cached can
    be older than a write it raced with. ``digest`` is ``None`` for an identity that never got one
    (registered in-process, or before the server asked for secrets). Databases written before the digest
    moved into the record kept it in the meta table (``identity_secret:<agent_id>``): those are read once
    and used while the record holds none; nothing writes there any more.
    """

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self._stored_apart: dict[str, str | None] = {}

    async def digest(self, agent_id: str) -> str | None:
        rec = self.hub.identities.agents.get(agent_id)
        if rec is not None and rec.secret_digest:
            return rec.secret_digest
        if agent_id not in self._stored_apart:
            value = await self.hub.store.get_meta(SECRET_META_PREFIX + agent_id)
            self._stored_apart[agent_id] = value or None
            rec = self.hub.identities.agents.get(agent_id)  # a rotation may have committed while we read
            if rec is not None and rec.secret_digest:
                return rec.secret_digest
        return self._stored_apart[agent_id]

    async def matches(self, agent_id: str, presented: Any) -> bool:
        digest = await self.digest(agent_id)
        if digest is None or not isinstance(presented, str):
            return False
        try:
            given = secret_digest(presented)
        except UnicodeEncodeError:  # a lone surrogate: no secret we issued
            return False
        return hmac.compare_digest(digest.encode(), given.encode())

    async def rotate(self, agent_id: str) -> str:
        """A new secret for ``agent_id``; the old one is refused from the moment this returns."""
        secret, digest = new_identity_secret()
        await self.hub.set_identity_secret(agent_id, digest)
        return secret

    async def forget(self, agent_id: str) -> None:
        """After an unregistration: the record (and its digest) is gone; empty an older meta entry."""
        if self._stored_apart.pop(agent_id, None) is not None or await self.hub.store.get_meta(
            SECRET_META_PREFIX + agent_id
        ):
            await self.hub.store.set_meta(SECRET_META_PREFIX + agent_id, "")
        self._stored_apart.pop(agent_id, None)


__all__ = [
    "SECRET_META_PREFIX",
    "ApiKeyAuth",
    "AuthAdapter",
    "AuthRegistry",
    "IdentitySecrets",
    "NoAuth",
    "new_identity_secret",
    "secret_digest",
]

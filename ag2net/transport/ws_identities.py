"""The identities a ``WsLinkClient`` holds on its hub, and their credentials.

What the link presents when it registers or attaches an identity (the server's token in the passport's
``api_key`` claim, the identity's own secret), what it learns from the answers (the identity and the
claim to re-attach it with after a reconnect, a new secret to keep), and the identities another
connection took over (``displaced``). Each op that touches identities has one entry in ``_PRESENT`` or
``_LEARN`` below; secrets outlive the process in a ``SecretFile`` when the link has one.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ag2net.transport.secret_file import SecretFile

log = logging.getLogger("ag2net.transport.ws")

#: How the hub tells a connection an identity was taken over (``ag2net.server``'s ``displaced``).
DISPLACED = re.compile(r"^identity '(?P<name>.*)' \((?P<agent_id>[^)]+)\) was attached by another connection")


@dataclass(slots=True)
class Identity:
    """One identity the link re-attaches after a reconnect: its name and the credentials to present."""

    name: str
    scheme: str
    claim: dict[str, Any]


class IdentityBook:
    """The identities a link holds (``held``), the secrets it knows and the identities it lost."""

    def __init__(self, urls: list[str], token: str | None, secrets: SecretFile | None) -> None:
        self.urls = urls
        self.token = token
        self.secrets = secrets
        self.held: dict[str, Identity] = {}
        #: identities another connection took over (agent id -> what the hub said); not re-attached
        self.displaced: dict[str, str] = {}
        self._known_secrets: dict[str, str] = {}

    # ------------------------------------------------------------------ secrets

    def secret_for(self, name: str) -> str | None:
        """The identity secret this link holds for ``name`` on its hub (memory, then the secret file)."""
        secret = self._known_secrets.get(name)
        if secret is None and self.secrets is not None:
            for url in self.urls:  # the hubs of one database share their identities' secrets
                secret = self.secrets.get(url, name)
                if secret is not None:
                    break
        return secret

    def keep_secret(self, name: str, secret: str) -> None:
        self._known_secrets[name] = secret
        if self.secrets is not None:
            try:
                for url in self.urls:
                    self.secrets.put(url, name, secret)
            except OSError as exc:
                log.error(
                    "cannot keep the identity secret of %r in %s (%s): this process can re-attach it, a new "
                    "one cannot",
                    name,
                    self.secrets.path,
                    exc,
                )

    def forget_secret(self, ident: Identity) -> None:
        self._known_secrets.pop(ident.name, None)
        if self.secrets is not None and "secret" in ident.claim:
            with contextlib.suppress(OSError):
                for url in self.urls:
                    self.secrets.forget(url, ident.name)

    # ------------------------------------------------------------------ ops

    def present(self, op: str, wire: dict[str, Any]) -> dict[str, Any]:
        """``wire`` (an op's JSON params) with the credentials this link presents for it."""
        present = _PRESENT.get(op)
        if present is not None and self.token is not None:
            present(self, self.token, wire)
        return wire

    def learn(self, op: str, wire: dict[str, Any], result: Any, secret: str | None) -> None:
        """What an answered op tells about the identities this link holds."""
        learn = _LEARN.get(op)
        if learn is not None:
            learn(self, wire, result, secret)

    def lost(self, message: str) -> bool:
        """An ``access_denied`` error naming an identity someone else attached: stop holding it."""
        displaced = DISPLACED.match(message)
        if displaced is None:
            return False
        agent_id = displaced.group("agent_id")
        self.held.pop(agent_id, None)
        self.displaced[agent_id] = message
        return True

    def _hold(self, result: dict[str, Any], scheme: str, claim: dict[str, Any]) -> None:
        self.held[result["agent_id"]] = Identity(result["name"], scheme, claim)
        self.displaced.pop(result["agent_id"], None)


def _present_register(book: IdentityBook, token: str, wire: dict[str, Any]) -> None:
    passport = wire.get("passport")
    if isinstance(passport, dict) and passport.get("kind") != "remote_agent":
        auth = passport.setdefault("auth", {})
        if auth.get("scheme", "none") == "none" and not auth.get("claim"):
            auth["scheme"] = "api_key"
            auth["claim"] = {"token": token}
        wire["identity_secret"] = True  # a token server hands it over once, in the response


def _present_bind(book: IdentityBook, token: str, wire: dict[str, Any]) -> None:
    if "auth_claim" in wire:
        return
    claim = {"token": token}
    secret = book.secret_for(str(wire.get("name")))
    if secret is not None:
        claim["secret"] = secret
    wire["auth_claim"] = claim


def _learn_registered(book: IdentityBook, wire: dict[str, Any], result: Any, secret: str | None) -> None:
    if not isinstance(result, dict):
        return
    auth = (wire.get("passport") or {}).get("auth") or {}
    claim = dict(auth.get("claim") or {})
    if secret is not None:
        book.keep_secret(result["name"], secret)
        claim["secret"] = secret
    if wire.get("bind", True):
        book._hold(result, auth.get("scheme", "none"), claim)


def _learn_bound(book: IdentityBook, wire: dict[str, Any], result: Any, secret: str | None) -> None:
    if isinstance(result, dict):
        scheme = (result.get("auth") or {}).get("scheme", "none")
        book._hold(result, scheme, dict(wire.get("auth_claim") or {}))


def _learn_rotated(book: IdentityBook, wire: dict[str, Any], result: Any, secret: str | None) -> None:
    new = result.get("identity_secret") if isinstance(result, dict) else None
    if isinstance(new, str):
        book.keep_secret(str(result.get("name")), new)
        ident = book.held.get(str(result.get("agent_id")))
        if ident is not None:
            ident.claim["secret"] = new


def _learn_unbound(book: IdentityBook, wire: dict[str, Any], result: Any, secret: str | None) -> None:
    book.held.pop(str(wire.get("agent_id")), None)


def _learn_unregistered(book: IdentityBook, wire: dict[str, Any], result: Any, secret: str | None) -> None:
    ident = book.held.pop(str(wire.get("agent_id")), None)
    if ident is not None:
        book.forget_secret(ident)


_PRESENT: dict[str, Callable[[IdentityBook, str, dict[str, Any]], None]] = {
    "register": _present_register,
    "bind": _present_bind,
}
_LEARN: dict[str, Callable[[IdentityBook, dict[str, Any], Any, str | None], None]] = {
    "register": _learn_registered,
    "bind": _learn_bound,
    "rotate_secret": _learn_rotated,
    "unbind": _learn_unbound,
    "unregister": _learn_unregistered,
}

__all__ = ["DISPLACED", "Identity", "IdentityBook"]

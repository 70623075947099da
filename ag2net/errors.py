"""The error hierarchy every public ag2net call raises, with the wire codes of ag2 1.2.1."""

from __future__ import annotations

from typing import Any, ClassVar


class NetworkError(Exception):
    """Base of every error the network raises on purpose. Wire code ``error``."""

    code: ClassVar[str] = "error"

    # a subclass names its wire code in its header, ``class X(NetworkError, code="x")``, or keeps its base's
    def __init_subclass__(cls, code: str | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is not None:
            cls.code = code


class NotFoundError(NetworkError, code="not_found"):
    """An agent, channel, task, adapter or record that does not exist."""


class AccessDeniedError(NetworkError, code="access_denied"):
    """A rule, limit or per-connection authorisation refused the call."""


class AuthError(NetworkError, code="auth_failed"):
    """Authentication failed (unknown scheme, bad claim, token mismatch)."""


class ProtocolError(NetworkError, code="protocol_error"):
    """The call broke the protocol: bad shape, wrong state, not your turn."""


class StandbyError(NetworkError, code="standby"):
    """The hub asked is a standby (another hub on its database is active): ask the active one."""


class InboxFull(NetworkError):
    """A recipient holds too many unacknowledged deliveries."""


class WorkflowGraphError(NetworkError):
    """A workflow transition graph names an unknown target or condition, or is malformed."""


#: the codes ``error_from_code`` rebuilds as their own class (any other is a ``NetworkError``)
_BY_CODE: dict[str, type[NetworkError]] = {
    cls.code: cls for cls in (NotFoundError, AccessDeniedError, AuthError, ProtocolError, StandbyError)
}


def error_code(exc: BaseException) -> str:
    """The wire code for an exception (anything that is not a NetworkError is ``error``)."""
    return exc.code if isinstance(exc, NetworkError) else "error"


def error_from_code(code: str, message: str) -> NetworkError:
    """Rebuild the exception a wire error code stands for."""
    return _BY_CODE.get(code, NetworkError)(message)


__all__ = [
    "AccessDeniedError",
    "AuthError",
    "InboxFull",
    "NetworkError",
    "NotFoundError",
    "ProtocolError",
    "StandbyError",
    "WorkflowGraphError",
    "error_code",
    "error_from_code",
]

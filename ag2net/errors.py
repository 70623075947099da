"""The error hierarchy every public ag2net call raises, with the wire codes of ag2 1.2.1."""

from __future__ import annotations


class NetworkError(Exception):
    """Base of every error the network raises on purpose. Wire code ``error``."""

    code = "error"


class NotFoundError(NetworkError):
    """An agent, channel, task, adapter or record that does not exist."""

    code = "not_found"


class AccessDeniedError(NetworkError):
    """A rule, limit or per-connection authorisation refused the call."""

    code = "access_denied"


class AuthError(NetworkError):
    """Authentication failed (unknown scheme, bad claim, token mismatch)."""

    code = "auth_failed"


class ProtocolError(NetworkError):
    """The call broke the protocol: bad shape, wrong state, not your turn."""

    code = "protocol_error"


class StandbyError(NetworkError):
    """The hub asked is a standby (another hub on its database is active): ask the active one."""

    code = "standby"


class InboxFull(NetworkError):
    """A recipient holds too many unacknowledged deliveries."""

    code = "error"


class WorkflowGraphError(NetworkError):
    """A workflow transition graph names an unknown target or condition, or is malformed."""

    code = "error"


_BY_CODE: dict[str, type[NetworkError]] = {
    "not_found": NotFoundError,
    "access_denied": AccessDeniedError,
    "auth_failed": AuthError,
    "protocol_error": ProtocolError,
    "standby": StandbyError,
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

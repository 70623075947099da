"""Core: the default rule checks (the reference's rule-based arbiter): access globs, depth, inbox, channels.

Each rule is a pure function returning the reason it denies, or ``None``. ``RuleBasedArbiter`` turns a
reason into a ``Deny``; the hub's fast path (the default arbiter) raises it directly through the
``check_*`` functions, so both paths refuse with the same error and the same sentence.
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from ag2net.errors import AccessDeniedError, InboxFull


def matches_any(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


# ---------------------------------------------------------------- reasons (None = allowed)


def outbound_denial(sender_name: str, outbound_to: list[str], recipient_names: list[str]) -> str | None:
    """Every explicit recipient's name must match one of the sender's ``outbound_to`` globs."""
    if outbound_to == ["*"]:
        return None
    for name in recipient_names:
        if not matches_any(name, outbound_to):
            return f"sender {sender_name!r} not permitted to send to {name!r}"
    return None


def depth_denial(sender_name: str, depth: int, limit: int) -> str | None:
    if limit > 0 and depth > limit:
        return f"sender {sender_name!r} exceeded delegation_depth ({depth} > {limit})"
    return None


def inbound_denial(creator_name: str, invitee_name: str, inbound_from: list[str]) -> str | None:
    if inbound_from == ["*"] or matches_any(creator_name, inbound_from):
        return None
    return f"invitee {invitee_name!r} does not accept inbound from {creator_name!r}"


def inbox_denial(recipient_id: str, pending: int, max_pending: int) -> str | None:
    if max_pending > 0 and pending >= max_pending:
        return f"recipient {recipient_id!r} inbox at capacity ({pending} >= {max_pending})"
    return None


def channel_quota_denial(creator_name: str, active: int, limit: int) -> str | None:
    if limit > 0 and active >= limit:
        return f"creator {creator_name!r} exceeded max_concurrent_channels ({active} >= {limit})"
    return None


def dispatch_allowed(sender_name: str, inbound_from: list[str]) -> bool:
    """A delivery reaches a recipient only when the sender's name matches its ``inbound_from``."""
    return inbound_from == ["*"] or matches_any(sender_name, inbound_from)


# ---------------------------------------------------------------- raising forms (the hub's fast path)


def check_outbound(sender_name: str, outbound_to: list[str], recipient_names: list[str]) -> None:
    reason = outbound_denial(sender_name, outbound_to, recipient_names)
    if reason is not None:
        raise AccessDeniedError(reason)


def check_depth(sender_name: str, depth: int, limit: int) -> None:
    if limit > 0 and depth > limit:
        raise AccessDeniedError(f"sender {sender_name!r} exceeded delegation_depth ({depth} > {limit})")


def check_inbound(creator_name: str, invitee_name: str, inbound_from: list[str]) -> None:
    reason = inbound_denial(creator_name, invitee_name, inbound_from)
    if reason is not None:
        raise AccessDeniedError(reason)


def check_inbox(recipient_id: str, pending: int, max_pending: int) -> None:
    if max_pending > 0 and pending >= max_pending:
        raise InboxFull(f"recipient {recipient_id!r} inbox at capacity ({pending} >= {max_pending})")


def check_channel_quota(creator_name: str, active: int, limit: int) -> None:
    reason = channel_quota_denial(creator_name, active, limit)
    if reason is not None:
        raise AccessDeniedError(reason)


__all__ = [
    "channel_quota_denial",
    "check_channel_quota",
    "check_depth",
    "check_inbound",
    "check_inbox",
    "check_outbound",
    "depth_denial",
    "dispatch_allowed",
    "inbound_denial",
    "inbox_denial",
    "matches_any",
    "outbound_denial",
]

"""The default rule checks (the reference's rule-based arbiter): access globs, depth, inbox, channels."""

from __future__ import annotations

from fnmatch import fnmatchcase

from ag2net.errors import AccessDeniedError, InboxFull


def matches_any(name: str, patterns: list[str]) -> bool:
    return any(fnmatchcase(name, p) for p in patterns)


def check_outbound(sender_name: str, outbound_to: list[str], recipient_names: list[str]) -> None:
    for name in recipient_names:
        if not matches_any(name, outbound_to):
            raise AccessDeniedError(f"sender {sender_name!r} not permitted to send to {name!r}")


def check_depth(sender_name: str, depth: int, limit: int) -> None:
    if limit > 0 and depth > limit:
        raise AccessDeniedError(f"sender {sender_name!r} exceeded delegation_depth ({depth} > {limit})")


def check_inbound(creator_name: str, invitee_name: str, inbound_from: list[str]) -> None:
    if not matches_any(creator_name, inbound_from):
        raise AccessDeniedError(f"invitee {invitee_name!r} does not accept inbound from {creator_name!r}")


def check_inbox(recipient_id: str, pending: int, max_pending: int) -> None:
    if max_pending > 0 and pending >= max_pending:
        raise InboxFull(f"recipient {recipient_id!r} inbox at capacity ({pending} >= {max_pending})")


def check_channel_quota(creator_name: str, active: int, limit: int) -> None:
    if limit > 0 and active >= limit:
        raise AccessDeniedError(
            f"creator {creator_name!r} exceeded max_concurrent_channels ({active} >= {limit})"
        )


__all__ = [
    "check_channel_quota",
    "check_depth",
    "check_inbound",
    "check_inbox",
    "check_outbound",
    "matches_any",
]

"""Audit record kinds (the values ag2 1.2.1 writes) and a helper that builds records."""

from __future__ import annotations

from typing import Any

AUDIT_KIND_AGENT_REGISTERED = "agent_registered"
AUDIT_KIND_AGENT_UNREGISTERED = "agent_unregistered"
AUDIT_KIND_RESUME_SET = "resume_set"
AUDIT_KIND_SKILL_SET = "skill_set"
AUDIT_KIND_RULE_SET = "rule_set"
AUDIT_KIND_CHANNEL_CREATED = "channel_created"
AUDIT_KIND_CHANNEL_CLOSED = "channel_closed"
AUDIT_KIND_CHANNEL_EXPIRED = "channel_expired"
AUDIT_KIND_EXPECTATION_VIOLATED = "expectation_violated"
AUDIT_KIND_TASK_TERMINATED = "task_terminated"
AUDIT_KIND_TURN_FAILED = "turn_failed"

RESUME_SOURCE_TENANT = "tenant"
RESUME_SOURCE_OBSERVED = "observed"


def audit_record(kind: str, at: str, **fields: Any) -> dict[str, Any]:
    """One audit record: ``{"at", "kind", ...fields}``."""
    return {"at": at, "kind": kind, **fields}


__all__ = [
    "AUDIT_KIND_AGENT_REGISTERED",
    "AUDIT_KIND_AGENT_UNREGISTERED",
    "AUDIT_KIND_CHANNEL_CLOSED",
    "AUDIT_KIND_CHANNEL_CREATED",
    "AUDIT_KIND_CHANNEL_EXPIRED",
    "AUDIT_KIND_EXPECTATION_VIOLATED",
    "AUDIT_KIND_RESUME_SET",
    "AUDIT_KIND_RULE_SET",
    "AUDIT_KIND_SKILL_SET",
    "AUDIT_KIND_TASK_TERMINATED",
    "AUDIT_KIND_TURN_FAILED",
    "RESUME_SOURCE_OBSERVED",
    "RESUME_SOURCE_TENANT",
    "audit_record",
]

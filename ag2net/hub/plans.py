"""Core: the pure decisions of opening a channel and registering an identity (no awaits, no I/O).

``open_request`` checks a ``create_channel`` call against the tables (who is invited, which adapter);
the shell then asks the arbiter (``Arbitration.authorize_channel_open``), and ``plan_channel`` builds the
channel's metadata and first adapter state from the request, the new id and the clock's time.
``check_registration`` is every refusal of a registration that the tables decide.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ag2net.agent_names import lookalike_detail, name_skeleton
from ag2net.channel import ChannelMetadata, ChannelState, Participant, ParticipantRole
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.hub.core import ChannelTable, IdentityTable, required
from ag2net.hub.records import AgentRecord
from ag2net.identity import Resume, check_resume_size, check_skill_size, looks_like_id, parse_duration
from ag2net.ids import add_seconds


@dataclass(slots=True)
class OpenRequest:
    """A ``create_channel`` call the tables accept: what the arbiter is asked about and the plan needs."""

    creator_id: str
    creator: AgentRecord
    ids: list[str]  # every participant, the creator first unless listed elsewhere
    invitees: list[AgentRecord]  # the participants but the creator
    adapter: Any
    active: int  # the creator's live channels


def open_request(
    identities: IdentityTable,
    channels: ChannelTable,
    *,
    creator_id: str,
    manifest_type: str,
    manifest_version: int,
    participants: list[str],
    knobs: dict[str, Any] | None,
) -> OpenRequest:
    """The checks ``create_channel`` makes before it asks the arbiter; raises the refusal."""
    agents = identities.agents
    creator = required(agents, creator_id, f"creator not registered: {creator_id}")
    if not participants:
        raise ProtocolError("channel requires at least one participant")
    seen: set[str] = set()
    for pid in participants:
        if pid in seen:
            raise ProtocolError(f"participant listed twice: {pid!r}")
        seen.add(pid)
        if pid != creator_id and pid not in agents:
            raise NotFoundError(f"participant not registered: {pid}")
    ids = list(participants) if creator_id in participants else [creator_id, *participants]
    missing = f"no adapter registered for {manifest_type!r}@v{manifest_version}"
    adapter = required(channels.adapters, (manifest_type, manifest_version), missing)
    if knobs is not None and not isinstance(knobs, dict):
        raise ProtocolError("knobs must be a JSON object (dict) or null")
    invitees = [agents[i] for i in ids if i != creator_id]
    active = sum(1 for md in channels.values() if creator_id in md.participant_ids() and not md.is_terminal())
    return OpenRequest(creator_id, creator, ids, invitees, adapter, active)


def ttl_seconds(ttl: str | int | float | None, creator: AgentRecord) -> float:
    """A channel's time to live in seconds (the creator's rule default when ``ttl`` is None)."""
    value = creator.rule.limits.channel_ttl_default if ttl is None else ttl
    try:
        return float(value) if isinstance(value, (int, float)) else parse_duration(value)
    except (TypeError, ValueError):
        raise ProtocolError(
            f"ttl {value!r} is not a duration; use seconds or e.g. '90s', '15m', '2h'"
        ) from None


def plan_channel(
    request: OpenRequest,
    *,
    channel_id: str,
    now: str,
    ttl: float,
    required_acks: int | None,
    knobs: dict[str, Any] | None,
    intent: str | None,
    labels: dict[str, Any] | None,
) -> tuple[ChannelMetadata, Any]:
    """The new channel (pending its invitees' acks) and its adapter's initial state; raises what the
    adapter or a view override refuses."""
    from ag2net.views.registry import resolve_view  # validate any view override knobs now

    ids, adapter, creator_id = request.ids, request.adapter, request.creator_id
    two = len(ids) == 2
    md = ChannelMetadata(
        channel_id=channel_id,
        manifest=adapter.manifest,
        creator_id=creator_id,
        participants=[
            Participant(
                agent_id=pid,
                role=ParticipantRole.INITIATOR
                if pid == creator_id
                else (ParticipantRole.RESPONDENT if two else ParticipantRole.PARTICIPANT),
                order=i,
                joined_at=now,
            )
            for i, pid in enumerate(ids)
        ],
        state=ChannelState.PENDING,
        created_at=now,
        expires_at=add_seconds(now, ttl) if ttl > 0 else None,
        knobs=json.loads(json.dumps(knobs or {})),
        labels={**(labels or {}), **({"intent": intent} if intent else {})},
        required_acks=required_acks,
        pending_acks=[i for i in ids if i != creator_id],
    )
    adapter.validate_create(md)
    state = adapter.initial_state(md)
    for pid in ids:
        resolve_view(md, pid, adapter)
    return md, state


def check_registration(
    identities: IdentityTable, name: str, skill_md: str | None, resume: Resume | None
) -> None:
    """Refuse a registration under ``name`` (already normalised) the tables forbid: an id-shaped or taken
    name, a skill that is not text, an oversized skill or resume, a name in flight, a lookalike."""
    if looks_like_id(name) or name in identities.agents:
        raise ProtocolError(f"name {name!r} is, or has the shape of, an agent id")
    if name in identities.names:
        raise ProtocolError(
            f"name {name!r} already registered (agent_id={identities.names[name]}); "
            "unregister it before re-registering."
        )
    check_skill(skill_md)
    check_resume_size(resume)
    if name in identities.reserved:
        raise ProtocolError(
            f"name {name!r} is being registered by another client; pick another name or retry."
        )
    skeleton = name_skeleton(name)
    for other in (*identities.names, *identities.reserved):
        if other != name and name_skeleton(other) == skeleton:
            raise ProtocolError(
                f"name {name!r} looks like the registered name {other!r} ({lookalike_detail(name, other)}); "
                "choose a name that reads differently"
            )


def check_skill(skill_md: str | None) -> None:
    """A skill is markdown text (or None) within the size limit."""
    if skill_md is not None and not isinstance(skill_md, str):
        raise ProtocolError("skill_md must be a string of markdown or None")
    check_skill_size(skill_md)


__all__ = ["OpenRequest", "check_registration", "check_skill", "open_request", "plan_channel", "ttl_seconds"]

"""Shell: ``Identities`` (``hub.identities``) — registration, lookup, skills, resumes, rules, observed stats.

The identity table (``ag2net.hub.core.IdentityTable``) with the async changes that persist it: each change is
written to the store before memory changes, then audited, shown on the observe stream and fanned out.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from ag2net.agent_names import normalize_agent_name
from ag2net.errors import NotFoundError, ProtocolError
from ag2net.hub.audit import (
    AUDIT_KIND_AGENT_REGISTERED,
    AUDIT_KIND_AGENT_UNREGISTERED,
    AUDIT_KIND_RESUME_SET,
    AUDIT_KIND_RULE_SET,
    AUDIT_KIND_SECRET_ROTATED,
    AUDIT_KIND_SKILL_SET,
    RESUME_SOURCE_OBSERVED,
    RESUME_SOURCE_TENANT,
)
from ag2net.hub.core import IdentityTable, required
from ag2net.hub.plans import check_registration, check_skill
from ag2net.hub.records import (
    TERMINAL_TASKS,
    AgentRecord,
)
from ag2net.identity import (
    ObservedStat,
    Passport,
    Resume,
    Rule,
    check_agent_name,
    check_resume_size,
)
from ag2net.skills import render_fallback_skill
from ag2net.tasks import TaskState

if TYPE_CHECKING:
    from ag2net.hub.auth import AuthRegistry
    from ag2net.hub.services import Services

log = logging.getLogger(__name__)


class Identities(IdentityTable):
    """Who is registered, and what they say about themselves (``hub.identities``)."""

    __slots__ = ("auth", "locks", "observed_outcomes", "services")

    def __init__(self, services: Services, auth: AuthRegistry) -> None:
        super().__init__()
        self.services = services
        self.auth = auth
        self.locks: dict[str, asyncio.Lock] = {}  # one per identity being changed
        self.observed_outcomes: set[tuple[str, str]] = set()  # (owner, task) outcomes already counted

    def observe(self, agent_id: str, kind: str, **payload: Any) -> None:
        """An ``agent`` event on the observe stream."""
        self.services.observe_log.append("agent", payload={"kind": kind, "agent_id": agent_id, **payload})

    @contextlib.asynccontextmanager
    async def update(self, agent_id: str) -> AsyncIterator[AgentRecord]:
        """Serialise changes to one identity; yields its current record.

        The caller builds a changed copy, persists it, and only then installs it in ``self.agents``: a
        failed write leaves memory exactly as it was (no ghost, no half-applied change).
        """
        lock = self.locks.get(agent_id)
        if lock is None:
            lock = self.locks[agent_id] = asyncio.Lock()
        async with lock:
            yield self.record(agent_id)

    async def persist(self, rec: AgentRecord) -> None:
        p = rec.passport
        await self.services.store.put_agent(
            {
                "agent_id": p.agent_id,
                "name": p.name,
                "kind": p.effective_kind,
                "passport": p.to_dict(include_claim=p.kind == "remote_agent"),
                "resume": rec.resume.to_dict(),
                "rule": rec.rule.to_dict(),
                "skill_md": rec.skill_md,
                "owners": list(rec.owners),
                **({"secret_digest": rec.secret_digest} if rec.secret_digest else {}),
            }
        )

    async def set_identity_secret(self, agent_id: str, secret_digest: str) -> None:
        """Replace the hash of ``agent_id``'s identity secret (a rotation): from the moment it returns,
        only the new secret attaches the identity."""
        async with self.update(agent_id) as rec:
            if rec.passport.kind == "remote_agent":
                raise ProtocolError(
                    f"'{rec.passport.name}' is a remote_agent: it re-attaches through its owner, not a secret"
                )
            new = dataclasses.replace(rec, secret_digest=secret_digest)
            await self.persist(new)
            self.agents[agent_id] = new
        await self.services.audit.record(AUDIT_KIND_SECRET_ROTATED, agent_id=agent_id, name=rec.passport.name)

    async def register_identity(
        self,
        passport: Passport,
        resume: Resume | None = None,
        *,
        skill_md: str | None = None,
        rule: Rule | None = None,
        owner_id: str | None = None,
        secret_digest: str | None = None,
    ) -> Passport:
        """Register a new identity; stamps ``passport.agent_id`` and ``created_at``.

        The name is normalised first (``passport.name`` is set to the stored spelling) and refused when it
        reads like one already registered (``ag2net.agent_names``). ``secret_digest`` is the hash of the
        identity secret a token server hands over with this registration: it is written in the same
        record as the identity, so no instant exists in which the identity is registered without it.
        """
        check_agent_name(passport.name)
        passport.name = normalize_agent_name(passport.name)
        check_agent_name(passport.name)
        if passport.kind != "remote_agent":
            await self.auth.get(passport.auth.scheme).validate(passport, passport.auth.claim)
        name = passport.name
        check_registration(self, name, skill_md, resume)
        agent_id = self.services.ids.new_id()
        created_at = self.services.clock()
        stored = Passport.from_dict(passport.to_dict(include_claim=passport.kind == "remote_agent"))
        stored.agent_id = agent_id
        stored.created_at = created_at
        if passport.kind != "remote_agent":
            stored.auth.claim = {}
        rec = AgentRecord(
            stored,
            resume or Resume(),
            rule or Rule(),
            skill_md,
            [owner_id] if owner_id else [],
            secret_digest if passport.kind != "remote_agent" else None,
        )
        # Memory changes only once the store has committed the record: a failed write leaves no ghost
        # squatting the name. The name is reserved meanwhile so two concurrent registrations cannot both
        # pass the check above.
        self.reserved.add(name)
        try:
            await self.persist(rec)
        finally:
            self.reserved.discard(name)
        passport.agent_id = agent_id
        passport.created_at = created_at
        self.agents[agent_id] = rec
        self.names[name] = agent_id
        at = self.services.clock()
        await self.services.audit.record(
            AUDIT_KIND_AGENT_REGISTERED, at=at, agent_id=stored.agent_id, name=name
        )
        self.observe(stored.agent_id, "registered", name=name, passport=stored.public_dict())
        await self.services.listeners.fan_out(
            "on_agent_event", stored.agent_id, "registered", {"passport": stored, "at": at}
        )
        return passport

    async def remove(self, agent_id: str) -> str:
        """Delete the identity from the store, then from memory; returns its name (``unregister``'s first
        step: the hub then drops its deliveries and calls ``announce_removed``)."""
        async with self.update(agent_id) as rec:
            name = rec.passport.name
            await self.services.store.delete_agent(agent_id)
            self.agents.pop(agent_id, None)
            self.names.pop(name, None)
            self.locks.pop(agent_id, None)
        return name

    async def announce_removed(self, agent_id: str, name: str) -> None:
        at = self.services.clock()
        await self.services.audit.record(AUDIT_KIND_AGENT_UNREGISTERED, at=at, agent_id=agent_id, name=name)
        self.observe(agent_id, "unregistered", name=name)
        await self.services.listeners.fan_out(
            "on_agent_event", agent_id, "unregistered", {"name": name, "at": at}
        )

    def names_for(self, agent_ids: list[str]) -> dict[str, str]:
        return {a: self.name_for(a) for a in agent_ids}

    def find_agent_id(self, name: str) -> str | None:
        found = self.names.get(name)
        if found is None and isinstance(name, str):
            found = self.names.get(normalize_agent_name(name))
        return found

    def name_to_id_map(self) -> dict[str, str]:
        return dict(self.names)

    def lookup_agent(self, name_or_id: str) -> Passport:
        """The passport of an agent id or name, synchronously (``NotFoundError`` when unknown)."""
        rec = self.agents.get(name_or_id)
        if rec is None:
            agent_id = self.find_agent_id(name_or_id)
            rec = self.agents.get(agent_id) if agent_id else None
        if rec is None:
            raise NotFoundError(f"agent not found: {name_or_id}")
        return rec.passport

    def lookup_resume(self, agent_id: str) -> Resume:
        return required(self.agents, agent_id, f"resume not found: {agent_id}").resume

    def lookup_rule(self, agent_id: str) -> Rule:
        return required(self.agents, agent_id, f"rule not found: {agent_id}").rule

    def get_skill_info(self, agent_id: str) -> dict[str, Any]:
        """The stored skill, or the generated fallback (SPEC §3.5) with ``generated=True``."""
        rec = self.record(agent_id)
        if rec.skill_md is not None:
            return {"skill_md": rec.skill_md, "generated": False}
        return {"skill_md": render_fallback_skill(rec.passport, rec.resume), "generated": True}

    def skill(self, agent_id: str) -> str | None:
        """The skill markdown (stored or generated); None for an agent that is not registered."""
        if agent_id not in self.agents:
            return None
        return self.get_skill_info(agent_id)["skill_md"]

    def query_agents(
        self,
        *,
        capability: str | None = None,
        query: str | None = None,
        kind: str | None = None,
        sort_by: str | None = None,
        limit: int | None = 50,
    ) -> list[Passport]:
        """Registered passports, filtered; ``query`` matches name or resume summary (case-insensitive)."""
        out: list[Passport] = []
        q = query.lower() if query else None
        for rec in self.agents.values():
            p = rec.passport
            if kind is not None and p.effective_kind != kind:
                continue
            if capability is not None and capability not in rec.resume.capabilities():
                continue
            if q is not None and q not in rec.resume.summary.lower() and q not in p.name.lower():
                continue
            out.append(p)
        if sort_by == "name":
            out.sort(key=lambda p: p.name)
        return out if limit is None else out[:limit]

    def agents_with_capability(self, capability: str) -> list[str]:
        return sorted(a for a, rec in self.agents.items() if capability in rec.resume.capabilities())

    async def set_resume(self, agent_id: str, resume: Resume) -> Resume:
        check_resume_size(resume)
        async with self.update(agent_id) as rec:
            version, updated = rec.resume.version + 1, self.services.clock()
            candidate = Resume.from_dict(resume.to_dict())
            candidate.version, candidate.last_updated = version, updated
            new = dataclasses.replace(rec, resume=candidate)
            await self.persist(new)
            self.agents[agent_id] = new
            resume.version, resume.last_updated = version, updated
        await self.services.audit.record(
            AUDIT_KIND_RESUME_SET, source=RESUME_SOURCE_TENANT, agent_id=agent_id, version=resume.version
        )
        self.observe(agent_id, "resume_set", version=resume.version)
        await self.services.listeners.fan_out(
            "on_agent_event", agent_id, "resume_set", {"version": resume.version}
        )
        return resume

    async def set_skill(self, agent_id: str, skill_md: str | None) -> None:
        """Replace (or with ``None`` remove) an agent's skill; audited like ``set_resume`` (SPEC §3.7)."""
        check_skill(skill_md)
        async with self.update(agent_id) as rec:
            resume = Resume.from_dict(rec.resume.to_dict())
            resume.version = rec.resume.version + 1
            new = dataclasses.replace(rec, skill_md=skill_md, resume=resume)
            await self.persist(new)
            self.agents[agent_id] = new
        await self.services.audit.record(
            AUDIT_KIND_SKILL_SET,
            source=RESUME_SOURCE_TENANT,
            agent_id=agent_id,
            version=resume.version,
            removed=skill_md is None,
        )
        self.observe(agent_id, "skill_set", removed=skill_md is None)
        await self.services.listeners.fan_out(
            "on_agent_event", agent_id, "skill_set", {"removed": skill_md is None}
        )

    async def set_rule(self, agent_id: str, rule: Rule) -> Rule:
        async with self.update(agent_id) as rec:
            version = rec.rule.version + 1
            candidate = Rule.from_dict(rule.to_dict())
            candidate.version = version
            new = dataclasses.replace(rec, rule=candidate)
            await self.persist(new)
            self.agents[agent_id] = new
            rule.version = version
        await self.services.audit.record(AUDIT_KIND_RULE_SET, agent_id=agent_id, version=rule.version)
        self.observe(agent_id, "rule_set", version=rule.version)
        await self.services.listeners.fan_out(
            "on_agent_event", agent_id, "rule_set", {"version": rule.version}
        )
        return rule

    async def record_observation(
        self,
        *,
        owner_id: str,
        capability: str,
        outcome: TaskState | str,
        latency_ms: float | None = None,
        task_id: str | None = None,
    ) -> None:
        outcome = TaskState(outcome)
        if outcome not in TERMINAL_TASKS:
            return
        if task_id is not None and (owner_id, task_id) in self.observed_outcomes:
            return
        async with self.update(owner_id) as rec:
            if task_id is not None and (owner_id, task_id) in self.observed_outcomes:
                return
            resume = Resume.from_dict(rec.resume.to_dict())
            stat = resume.observed.setdefault(capability, ObservedStat())
            stat.n += 1
            if outcome == TaskState.COMPLETED:
                stat.completed += 1
            elif outcome == TaskState.FAILED:
                stat.failed += 1
            elif outcome == TaskState.EXPIRED:
                stat.expired += 1
            if latency_ms is not None:
                stat.p50_latency_ms = latency_ms
            resume.version = rec.resume.version + 1
            resume.last_updated = self.services.clock()
            new = dataclasses.replace(rec, resume=resume)
            await self.persist(new)
            self.agents[owner_id] = new
            if task_id is not None:
                self.observed_outcomes.add((owner_id, task_id))
        await self.services.audit.record(
            AUDIT_KIND_RESUME_SET,
            source=RESUME_SOURCE_OBSERVED,
            agent_id=owner_id,
            version=resume.version,
            capability=capability,
            outcome=outcome.value,
        )


__all__ = ["Identities"]

"""Workflow: a transition graph decides who speaks next; each round ends with one ``EV_PACKET``.

Routing comes from the round's tool results (``Handoff``/``Finish``) or from the graph's rules. The
channel's ``context_vars`` change through ``EV_CONTEXT_SET``, a round packet's ``context_updates`` and
(unlike ag2 1.2.1, reference §12.19) the ``context`` of packets made by ``build_packet_envelope``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ag2net.adapters.base import (
    HubLookup,
    Reply,
    TurnOrderAdapter,
    TurnOrderState,
    default_render_envelope,
    ordered_ids,
)
from ag2net.adapters.transitions import Finish, Handoff, TransitionGraph
from ag2net.channel import (
    AdapterResult,
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    ParticipantSchema,
)
from ag2net.envelope import EV_CONTEXT_SET, EV_PACKET, EV_TEXT, Envelope
from ag2net.errors import NetworkError, ProtocolError
from ag2net.events import BaseEvent, ToolCallEvent, ToolResultEvent

WORKFLOW_TYPE = "workflow"
GRAPH_KNOB = "graph"
CONTEXT_VARS_KNOB = "context_vars"
_SUBSTANTIVE = frozenset({EV_TEXT, EV_PACKET})
_GRAPH_CACHE_LIMIT = 256


@dataclass(slots=True)
class WorkflowState(TurnOrderState):
    pending_close_reason: str = ""
    creator_id: str = ""
    graph_data: dict[str, Any] = field(default_factory=dict)
    context_vars: dict[str, Any] = field(default_factory=dict)


def _apply_updates(context: dict[str, Any], updates: Any) -> None:
    """Apply ``{"set": {...}, "delete": [...]}``: deletions first, then sets."""
    if not isinstance(updates, dict):
        return
    delete = updates.get("delete")
    if isinstance(delete, list):
        for key in delete:
            if isinstance(key, str):
                context.pop(key, None)
    to_set = updates.get("set")
    if isinstance(to_set, dict):
        context.update(to_set)


def _check_updates(updates: Any, what: str, channel_id: str) -> None:
    if not isinstance(updates, dict):
        raise ProtocolError(f"workflow {channel_id!r} {what} must be an object {{'set': {{}}, 'delete': []}}")
    if not isinstance(updates.get("set", {}), dict):
        raise ProtocolError(f"workflow {channel_id!r} {what}['set'] must be an object of key to value")
    delete = updates.get("delete", [])
    if not isinstance(delete, list) or not all(isinstance(k, str) for k in delete):
        raise ProtocolError(f"workflow {channel_id!r} {what}['delete'] must be a list of keys")


class WorkflowAdapter(TurnOrderAdapter):
    """Graph-routed turns among N participants; closes when routing ends or at the graph's ``max_turns``."""

    manifest = ChannelManifest(
        type=WORKFLOW_TYPE,
        version=1,
        participants=ParticipantSchema(min=2),
        knobs_schema={GRAPH_KNOB: "TransitionGraph"},
        default_view_policy="named_windowed_summary",
        expectations=[
            Expectation("turn_within", "warn", {"seconds": 120}),
            Expectation("turn_within", "auto_close", {"seconds": 600}),
        ],
    )
    state_type = WorkflowState

    def __init__(self) -> None:
        super().__init__()
        # graph_data dicts are shared between successive states, so parse each one once
        self._graphs: dict[int, tuple[dict[str, Any], TransitionGraph]] = {}

    def graph(self, graph_data: dict[str, Any]) -> TransitionGraph:
        hit = self._graphs.get(id(graph_data))
        if hit is not None and hit[0] is graph_data:
            return hit[1]
        parsed = TransitionGraph.loads(graph_data)
        if len(self._graphs) >= _GRAPH_CACHE_LIMIT:
            self._graphs.clear()
        self._graphs[id(graph_data)] = (graph_data, parsed)
        return parsed

    # state -----------------------------------------------------------------------------------
    def initial_state(self, metadata: ChannelMetadata) -> WorkflowState:
        knobs = metadata.knobs or {}
        graph_data = knobs.get(GRAPH_KNOB)
        if not isinstance(graph_data, dict):
            raise ProtocolError(
                "workflow requires knobs['graph'] as a dict — call TransitionGraph.to_dict() before passing"
            )
        context = knobs.get(CONTEXT_VARS_KNOB)
        if context is not None and not isinstance(context, dict):
            raise ProtocolError("workflow knobs['context_vars'] must be a dict if provided")
        try:
            graph = self.graph(graph_data)
        except NetworkError as exc:
            raise ProtocolError(f"invalid workflow graph: {exc}") from None
        return WorkflowState(
            participant_order=ordered_ids(metadata),
            expected_next_speaker=graph.initial_speaker,
            creator_id=metadata.creator_id,
            graph_data=graph_data,
            context_vars=dict(context or {}),
        )

    def fold(self, envelope: Envelope, state: WorkflowState) -> WorkflowState:
        etype = envelope.event_type
        data = envelope.event_data if isinstance(envelope.event_data, dict) else {}
        if etype == EV_CONTEXT_SET:
            context = dict(state.context_vars)
            _apply_updates(context, data)
            return dataclasses.replace(state, context_vars=context)
        if etype not in _SUBSTANTIVE:
            return state
        context = dict(state.context_vars)
        routing: dict[str, Any] = {}
        if etype == EV_PACKET:
            _apply_updates(context, data.get("context_updates"))
            extra = data.get("context")
            if isinstance(extra, dict):
                context.update(extra)
            if isinstance(data.get("routing"), dict):
                routing = data["routing"]
        after = dataclasses.replace(
            state,
            context_vars=context,
            turn_count=state.turn_count + 1,
            last_speaker_id=envelope.sender_id,
            last_envelope_id=envelope.envelope_id,
        )
        kind = routing.get("kind")
        if kind == "finish":
            after.expected_next_speaker = None
            after.pending_close_reason = routing.get("reason") or "finished"
        elif kind == "handoff" and routing.get("target"):
            after.expected_next_speaker = routing["target"]
            after.pending_close_reason = ""
        else:
            decision = self.graph(state.graph_data).decide(after, envelope)
            after.expected_next_speaker = decision.next_speaker
            after.pending_close_reason = decision.close_reason
        return after

    # validation and turn-taking -----------------------------------------------------------------
    def validate_create(self, metadata: ChannelMetadata) -> None:
        n = len(metadata.participants)
        if n < 2:
            raise ProtocolError(f"workflow requires at least 2 participants, got {n}")
        knobs = metadata.knobs or {}
        graph_data = knobs.get(GRAPH_KNOB)
        if not isinstance(graph_data, dict):
            raise ProtocolError(
                "workflow requires knobs['graph'] as a dict — call TransitionGraph.to_dict() before passing"
            )
        try:
            graph = TransitionGraph.loads(graph_data)
        except NetworkError as exc:
            raise ProtocolError(f"invalid workflow graph: {exc}") from None
        ids = metadata.participant_ids()
        if graph.initial_speaker not in ids:
            raise ProtocolError(
                f"workflow initial_speaker {graph.initial_speaker!r} not in participants {ids}"
            )
        for target in [t.then for t in graph.transitions] + [graph.default_target]:
            agent_id = getattr(target, "agent_id", None)
            if target.name == "agent" and agent_id not in ids:
                raise ProtocolError(
                    f"workflow graph target 'agent' names {agent_id!r}, which is not a participant id {ids}"
                )
        context = knobs.get(CONTEXT_VARS_KNOB)
        if context is not None and not isinstance(context, dict):
            raise ProtocolError("workflow knobs['context_vars'] must be a dict if provided")
        super().validate_create(metadata)

    def validate_send(self, metadata: ChannelMetadata, envelope: Envelope, state: WorkflowState) -> None:
        cid = metadata.channel_id
        etype = envelope.event_type
        if etype == EV_CONTEXT_SET:
            if envelope.sender_id not in metadata.participant_ids():
                raise ProtocolError(
                    f"workflow {cid!r} only accepts EV_CONTEXT_SET from participants, got {envelope.sender_id!r}"
                )
            _check_updates(envelope.event_data, "EV_CONTEXT_SET event_data", cid)
            return
        if etype not in _SUBSTANTIVE:
            return
        expected = state.expected_next_speaker
        if expected is not None and envelope.sender_id != expected:
            raise ProtocolError(f"workflow {cid!r} expects {expected!r} to speak, got {envelope.sender_id!r}")
        if etype == EV_PACKET:
            data = envelope.event_data
            if "context_updates" in data:
                _check_updates(data["context_updates"], "packet context_updates", cid)
            if "context" in data and not isinstance(data["context"], dict):
                raise ProtocolError(f"workflow {cid!r} packet context must be an object of key to value")
            routing = data.get("routing")
            if routing is not None and not isinstance(routing, dict):
                raise ProtocolError(
                    f"workflow {cid!r} packet routing must be an object such as {{'kind': 'text'}}"
                )
            if isinstance(routing, dict) and routing.get("kind") == "handoff" and routing.get("target"):
                target = routing["target"]
                ids = metadata.participant_ids()
                if target not in ids:
                    raise ProtocolError(
                        f"workflow {cid!r} packet hands off to {target!r}, which is not a participant id; "
                        f"use one of {ids}"
                    )

    def on_accepted(
        self, metadata: ChannelMetadata, envelope: Envelope, state: WorkflowState
    ) -> AdapterResult:
        if envelope.event_type not in _SUBSTANTIVE:
            return AdapterResult()
        if state.expected_next_speaker is None:
            return AdapterResult(ChannelState.CLOSED, state.pending_close_reason or "workflow_terminated")
        max_turns = self.graph(state.graph_data).max_turns if state.graph_data else None
        if max_turns is not None and state.turn_count >= max_turns:
            return AdapterResult(ChannelState.CLOSED, "max_turns")
        return AdapterResult()

    # what the LLM sees and does ----------------------------------------------------------------
    def render_envelope(self, envelope: Envelope) -> str | None:
        if envelope.event_type != EV_PACKET:
            return default_render_envelope(envelope)
        data = envelope.event_data if isinstance(envelope.event_data, dict) else {}
        lines: list[str] = []
        routing = data.get("routing")
        if isinstance(routing, dict) and routing.get("kind") == "handoff":
            tool = routing.get("tool") or "handoff"
            reason = routing.get("reason") or ""
            lines.append(f"[Handed off via {tool}] {reason}" if reason else f"[Handed off via {tool}]")
        body = data.get("body")
        if isinstance(body, str) and body:
            lines.append(body)
        return "\n".join(lines) if lines else None

    def extract_turn_input(self, envelope: Envelope) -> str | None:
        if envelope.event_type == EV_PACKET:
            return self.render_envelope(envelope)
        return super().extract_turn_input(envelope)

    def build_round_envelope(
        self,
        metadata: ChannelMetadata,
        sender_id: str,
        reply: Reply,
        events: Sequence[BaseEvent],
        state: WorkflowState,
        hub: HubLookup | None,
    ) -> Envelope | None:
        routing = self.routing_from_events(metadata, events, state, hub)
        body = getattr(reply, "body", None) or ""
        if routing["kind"] == "text" and not body:
            return None
        return Envelope(
            channel_id=metadata.channel_id,
            sender_id=sender_id,
            audience=None,
            event_type=EV_PACKET,
            event_data={"routing": routing, "context_updates": {"set": {}, "delete": []}, "body": body},
        )

    def routing_from_events(
        self,
        metadata: ChannelMetadata,
        events: Sequence[BaseEvent],
        state: WorkflowState,
        hub: HubLookup | None,
    ) -> dict[str, Any]:
        """The round's routing: the first tool call that returned Finish/Handoff or is a ToolCalled rule."""
        results = {e.parent_id: e for e in events if isinstance(e, ToolResultEvent)}
        rule_tools = self.graph(state.graph_data).tool_names() if state.graph_data else set()
        for event in events:
            if not isinstance(event, ToolCallEvent):
                continue
            result = results.get(event.id)
            value = result.value if result is not None else None
            if isinstance(value, Finish):
                return {
                    "kind": "finish",
                    "tool": event.name,
                    "reason": value.reason,
                    "summary": value.summary,
                }
            if isinstance(value, Handoff):
                return {
                    "kind": "handoff",
                    "tool": event.name,
                    "reason": value.reason,
                    "target": self._resolve_target(value.target, metadata, hub),
                }
            if event.name in rule_tools:
                reason = event.parsed_arguments().get("reason", "")
                return {
                    "kind": "handoff",
                    "tool": event.name,
                    "reason": reason if isinstance(reason, str) else "",
                }
        return {"kind": "text"}

    @staticmethod
    def _resolve_target(target: str, metadata: ChannelMetadata, hub: HubLookup | None) -> str:
        if target in metadata.participant_ids() or hub is None:
            return target
        found = hub.find_agent_id(target)
        return found or target


__all__ = ["CONTEXT_VARS_KNOB", "GRAPH_KNOB", "WORKFLOW_TYPE", "WorkflowAdapter", "WorkflowState"]

"""Conversation: two parties talking freely; closes only when asked, or at the ``max_turns`` knob (SPEC §3.18)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ag2net.adapters.base import BaseAdapter, check_two_party
from ag2net.agent.tool import Tool
from ag2net.channel import (
    AdapterResult,
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    ParticipantSchema,
)
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import ProtocolError
from ag2net.views.base import ViewPolicy
from ag2net.views.builtin import WindowedSummary

CONVERSATION_TYPE = "conversation"
MAX_TURNS_KNOB = "max_turns"


@dataclass(slots=True)
class ConversationState:
    turn_count: int = 0
    last_speaker_id: str | None = None
    last_envelope_id: str | None = None


def _max_turns(metadata: ChannelMetadata) -> int | None:
    value = (metadata.knobs or {}).get(MAX_TURNS_KNOB)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class ConversationAdapter(BaseAdapter):
    """Either side may speak at any time; every text counts one turn."""

    manifest = ChannelManifest(
        type=CONVERSATION_TYPE,
        version=1,
        participants=ParticipantSchema(min=2, max=2, roles=["initiator", "respondent"]),
        knobs_schema={MAX_TURNS_KNOB: "int"},
        default_view_policy="windowed_summary",
        expectations=[Expectation("max_silence", "audit", {"seconds": 3600})],
    )
    state_type = ConversationState

    def initial_state(self, metadata: ChannelMetadata) -> ConversationState:
        return ConversationState()

    def validate_create(self, metadata: ChannelMetadata) -> None:
        check_two_party(metadata, "conversation")
        knobs = metadata.knobs or {}
        if MAX_TURNS_KNOB in knobs and knobs[MAX_TURNS_KNOB] is not None:
            value = knobs[MAX_TURNS_KNOB]
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ProtocolError(
                    f"conversation knobs.max_turns must be a positive integer (or absent), got {value!r}"
                )
        super().validate_create(metadata)

    def validate_send(self, metadata: ChannelMetadata, envelope: Envelope, state: ConversationState) -> None:
        if envelope.event_type != EV_TEXT:
            return
        if envelope.sender_id not in metadata.participant_ids():
            raise ProtocolError(
                f"conversation channel {metadata.channel_id!r} only accepts sends from participants, "
                f"got {envelope.sender_id!r}"
            )

    def fold(self, envelope: Envelope, state: ConversationState) -> ConversationState:
        if envelope.event_type != EV_TEXT:
            return state
        if type(state) is ConversationState:  # built directly: a replace() costs more than the fold
            return ConversationState(state.turn_count + 1, envelope.sender_id, envelope.envelope_id)
        return dataclasses.replace(  # a subclass's state keeps its type and its own fields
            state,
            turn_count=state.turn_count + 1,
            last_speaker_id=envelope.sender_id,
            last_envelope_id=envelope.envelope_id,
        )

    def on_accepted(
        self, metadata: ChannelMetadata, envelope: Envelope, state: ConversationState
    ) -> AdapterResult:
        limit = _max_turns(metadata)
        if envelope.event_type == EV_TEXT and limit is not None and state.turn_count >= limit:
            return AdapterResult(ChannelState.CLOSED, "max_turns")
        return AdapterResult()

    def default_view_policy(self, metadata: ChannelMetadata, participant_id: str) -> ViewPolicy:
        return WindowedSummary(recent_n=10)

    def tools_for(
        self, client: Any, metadata: ChannelMetadata, state: ConversationState, participant_id: str
    ) -> list[Tool]:
        return [self.say_tool(client)]


__all__ = ["CONVERSATION_TYPE", "MAX_TURNS_KNOB", "ConversationAdapter", "ConversationState"]

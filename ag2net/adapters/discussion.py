"""Discussion: N parties speaking in round-robin order; ``say`` is offered to the expected speaker only."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ag2net.adapters.base import TurnOrderAdapter, TurnOrderState, ordered_ids
from ag2net.agent.tool import Tool
from ag2net.channel import ChannelManifest, ChannelMetadata, Expectation, ParticipantSchema
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import ProtocolError

DISCUSSION_TYPE = "discussion"
ORDERING_ROUND_ROBIN = "round_robin"
SUPPORTED_ORDERINGS = [ORDERING_ROUND_ROBIN]


@dataclass(slots=True)
class DiscussionState(TurnOrderState):
    """Whose turn it is in a round-robin discussion."""


class DiscussionAdapter(TurnOrderAdapter):
    """Participants speak in their channel order, wrapping around; the channel never closes by itself."""

    manifest = ChannelManifest(
        type=DISCUSSION_TYPE,
        version=1,
        participants=ParticipantSchema(min=2),
        knobs_schema={"ordering": "str"},
        default_view_policy="named_windowed_summary",
        expectations=[
            Expectation("turn_within", "warn", {"seconds": 120}),
            Expectation("turn_within", "hide", {"seconds": 600}),
        ],
    )
    state_type = DiscussionState

    def initial_state(self, metadata: ChannelMetadata) -> DiscussionState:
        return DiscussionState(
            participant_order=ordered_ids(metadata), expected_next_speaker=metadata.creator_id
        )

    def validate_create(self, metadata: ChannelMetadata) -> None:
        n = len(metadata.participants)
        if n < 2:
            raise ProtocolError(f"discussion requires at least 2 participants, got {n}")
        ordering = (metadata.knobs or {}).get("ordering", ORDERING_ROUND_ROBIN)
        if ordering not in SUPPORTED_ORDERINGS:
            raise ProtocolError(
                f"discussion knobs.ordering={ordering!r} not supported; choose from {SUPPORTED_ORDERINGS}"
            )
        super().validate_create(metadata)

    def validate_send(self, metadata: ChannelMetadata, envelope: Envelope, state: DiscussionState) -> None:
        if envelope.event_type != EV_TEXT:
            return
        expected = state.expected_next_speaker
        if expected is not None and envelope.sender_id != expected:
            raise ProtocolError(
                f"discussion channel {metadata.channel_id!r} expects {expected!r} to speak, got {envelope.sender_id!r}"
            )

    def fold(self, envelope: Envelope, state: DiscussionState) -> DiscussionState:
        if envelope.event_type != EV_TEXT:
            return state
        order = state.participant_order
        if envelope.sender_id not in order:
            return state
        nxt = order[(order.index(envelope.sender_id) + 1) % len(order)]
        return dataclasses.replace(
            state,
            expected_next_speaker=nxt,
            last_speaker_id=envelope.sender_id,
            last_envelope_id=envelope.envelope_id,
            turn_count=state.turn_count + 1,
        )

    def tools_for(
        self, client: Any, metadata: ChannelMetadata, state: DiscussionState, participant_id: str
    ) -> list[Tool]:
        if state.expected_next_speaker is not None and participant_id == state.expected_next_speaker:
            return [self.say_tool(client)]
        return []


__all__ = ["DISCUSSION_TYPE", "ORDERING_ROUND_ROBIN", "DiscussionAdapter", "DiscussionState"]

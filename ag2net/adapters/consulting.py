"""Consulting: a strict one-question, one-reply exchange between an initiator and a respondent."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ag2net.adapters.base import BaseAdapter, check_two_party, participant_with_role
from ag2net.agent.tool import Tool
from ag2net.channel import (
    AdapterResult,
    ChannelManifest,
    ChannelMetadata,
    ChannelState,
    Expectation,
    ExpectedTurn,
    ParticipantRole,
    ParticipantSchema,
)
from ag2net.envelope import EV_TEXT, Envelope
from ag2net.errors import ProtocolError
from ag2net.views.base import ViewPolicy
from ag2net.views.builtin import FullTranscript

CONSULTING_TYPE = "consulting"


@dataclass(slots=True)
class ConsultingState:
    initiator_sent: bool = False
    respondent_replied: bool = False
    last_envelope_id: str | None = None


class ConsultingAdapter(BaseAdapter):
    """The initiator asks once, the respondent answers once, and the channel closes ``consulting_complete``."""

    manifest = ChannelManifest(
        type=CONSULTING_TYPE,
        version=1,
        participants=ParticipantSchema(min=2, max=2, roles=["initiator", "respondent"]),
        knobs_schema={},
        default_view_policy="full_transcript",
        expectations=[
            Expectation("acks_within", "auto_close", {"seconds": 30}),
            Expectation("reply_within", "auto_close", {"seconds": 600}),
        ],
    )
    state_type = ConsultingState

    @staticmethod
    def _initiator(metadata: ChannelMetadata) -> str:
        return participant_with_role(metadata, ParticipantRole.INITIATOR, metadata.creator_id)

    @staticmethod
    def _respondent(metadata: ChannelMetadata) -> str:
        found = participant_with_role(metadata, ParticipantRole.RESPONDENT)
        if found:
            return found
        others = [p for p in metadata.participant_ids() if p != metadata.creator_id]
        return others[0] if others else ""

    def initial_state(self, metadata: ChannelMetadata) -> ConsultingState:
        return ConsultingState()

    def validate_create(self, metadata: ChannelMetadata) -> None:
        check_two_party(metadata, "consulting")
        super().validate_create(metadata)

    def validate_send(self, metadata: ChannelMetadata, envelope: Envelope, state: ConsultingState) -> None:
        if envelope.event_type != EV_TEXT:
            return
        cid = metadata.channel_id
        if state.initiator_sent and state.respondent_replied:
            raise ProtocolError(f"consulting channel {cid!r} already complete")
        if not state.initiator_sent:
            initiator = self._initiator(metadata)
            if envelope.sender_id != initiator:
                raise ProtocolError(
                    f"consulting channel {cid!r} expects first send from initiator {initiator!r}, "
                    f"got {envelope.sender_id!r}"
                )
            return
        respondent = self._respondent(metadata)
        if envelope.sender_id != respondent:
            raise ProtocolError(
                f"consulting channel {cid!r} expects reply from respondent {respondent!r}, got {envelope.sender_id!r}"
            )

    def fold(self, envelope: Envelope, state: ConsultingState) -> ConsultingState:
        if envelope.event_type != EV_TEXT:
            return state
        if not state.initiator_sent:
            return dataclasses.replace(state, initiator_sent=True, last_envelope_id=envelope.envelope_id)
        if not state.respondent_replied:
            return dataclasses.replace(state, respondent_replied=True, last_envelope_id=envelope.envelope_id)
        return dataclasses.replace(state, last_envelope_id=envelope.envelope_id)

    def on_accepted(
        self, metadata: ChannelMetadata, envelope: Envelope, state: ConsultingState
    ) -> AdapterResult:
        if envelope.event_type == EV_TEXT and state.initiator_sent and state.respondent_replied:
            return AdapterResult(ChannelState.CLOSED, "consulting_complete")
        return AdapterResult()

    def expected_next(self, metadata: ChannelMetadata, state: ConsultingState) -> ExpectedTurn | None:
        if not state.initiator_sent:
            return ExpectedTurn(self._initiator(metadata))
        if not state.respondent_replied:
            return ExpectedTurn(self._respondent(metadata), state.last_envelope_id)
        return None

    def default_view_policy(self, metadata: ChannelMetadata, participant_id: str) -> ViewPolicy:
        return FullTranscript()

    def tools_for(
        self, client: Any, metadata: ChannelMetadata, state: ConsultingState, participant_id: str
    ) -> list[Tool]:
        if not state.initiator_sent:
            offered = participant_id == self._initiator(metadata)
        elif not state.respondent_replied:
            offered = (
                participant_id != self._initiator(metadata) and participant_id in metadata.participant_ids()
            )
        else:
            offered = False
        return [self.say_tool(client)] if offered else []


__all__ = ["CONSULTING_TYPE", "ConsultingAdapter", "ConsultingState"]

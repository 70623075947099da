"""The channel adapter protocol and ``BaseAdapter``: a channel type's pure rules (fold, validate, render, tools).

An adapter never does I/O, reads a clock or holds a hub: it folds the WAL into a state, says whether a send
is allowed, decides auto-close, renders envelopes for views, and builds envelopes for the handler.
``fold`` is a pure left fold: it returns a new state and never mutates the one it is given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, ClassVar, Protocol, TypeAlias, runtime_checkable

from ag2net.agent.tool import Tool
from ag2net.channel import AdapterResult, ChannelManifest, ChannelMetadata, ExpectedTurn, ParticipantRole
from ag2net.envelope import (
    CHANNEL_EVENTS,
    EV_PACKET,
    EV_TEXT,
    Envelope,
    is_task_event,
)
from ag2net.errors import ProtocolError
from ag2net.events import BaseEvent, DataInput, Input, TextInput
from ag2net.views.base import ViewPolicy
from ag2net.views.builtin import NamedWindowedSummary
from ag2net.views.registry import validate_view_knobs, view_from_spec

RenderedPart: TypeAlias = str | TextInput | DataInput
Rendered: TypeAlias = RenderedPart | Sequence[RenderedPart] | None
"""What an adapter may render an envelope to: text, an input part, a sequence of them, or None.

The built-ins return ``str | None`` (SPEC §3.8: the renderer a view gets is ``Callable[[Envelope], str | None]``);
``ensure_parts`` turns any ``Rendered`` into the list of input parts a model request holds.
"""


class AdapterState(Protocol):
    """An adapter's folded channel state. Any value works (the built-ins use dataclasses); the hub only
    stores it, hands it back to the same adapter, and serialises it with ``state_to_dict``."""


class Reply(Protocol):
    """What the handler hands ``build_round_envelope``: the agent's final text (None when it said nothing)."""

    body: str | None


class HubLookup(Protocol):
    """The one hub capability an adapter may use while building an envelope: a synchronous name lookup."""

    def find_agent_id(self, name: str) -> str | None: ...


@runtime_checkable
class ChannelAdapter(Protocol):
    """The rules of one channel type, keyed by ``(manifest.type, manifest.version)`` — ag2's 13 methods.

    Any class with these methods is an adapter (the protocol is structural). The bodies are the defaults: a
    class that subclasses ``ChannelAdapter`` (``BaseAdapter`` does) inherits them, and
    ``default_render_envelope`` … ``default_build_packet_envelope`` are the same methods as functions.

    Optionally an adapter also has ``state_to_dict(state)`` / ``state_from_dict(data)`` (``BaseAdapter`` does):
    the hub then snapshots live channel states on close and restores them on open instead of re-folding WALs.
    """

    manifest: ChannelManifest

    # state -----------------------------------------------------------------------------------
    def initial_state(self, metadata: ChannelMetadata) -> Any:
        return None

    def fold(self, envelope: Envelope, state: Any) -> Any:
        return state

    # validation and turn-taking -----------------------------------------------------------------
    def validate_create(self, metadata: ChannelMetadata) -> None:
        validate_view_knobs(metadata.knobs or {})

    def validate_send(self, metadata: ChannelMetadata, envelope: Envelope, state: Any) -> None:
        return None

    def on_accepted(self, metadata: ChannelMetadata, envelope: Envelope, state: Any) -> AdapterResult:
        return AdapterResult()

    def expected_next(self, metadata: ChannelMetadata, state: Any) -> ExpectedTurn | None:
        """Nobody in particular is expected to speak (a channel type without turn-taking)."""
        return None

    # what the LLM sees and does ----------------------------------------------------------------
    def default_view_policy(self, metadata: ChannelMetadata, participant_id: str) -> ViewPolicy:
        """The manifest's ``default_view_policy``, built from the view registry."""
        return view_from_spec(self.manifest.default_view_policy)

    def render_envelope(self, envelope: Envelope) -> str | None:
        """``EV_TEXT`` renders to its text (an empty string included); everything else to None."""
        return text_of(envelope)

    def extract_turn_input(self, envelope: Envelope) -> str | None:
        """``EV_TEXT`` with non-empty text is a turn's input; nothing else is."""
        text = text_of(envelope)
        return text if text else None

    def build_round_envelope(
        self,
        metadata: ChannelMetadata,
        sender_id: str,
        reply: Reply,
        events: Sequence[BaseEvent],
        state: Any,
        hub: HubLookup | None,
    ) -> Envelope | None:
        """The reply body as ``EV_TEXT`` to everyone (no causation: the handler sets it); None when the body is
        empty."""
        body = getattr(reply, "body", None)
        if not body:
            return None
        return ChannelAdapter.build_text_envelope(self, metadata.channel_id, sender_id, body)

    def tools_for(
        self, client: Any, metadata: ChannelMetadata, state: Any, participant_id: str
    ) -> list[Tool]:
        """No per-turn tools."""
        return []

    # envelope builders ---------------------------------------------------------------------------
    def build_text_envelope(
        self,
        channel_id: str,
        sender_id: str,
        text: str,
        *,
        audience: list[str] | None = None,
        causation_id: str | None = None,
    ) -> Envelope:
        """``EV_TEXT`` ``{"text"}``."""
        return _built(channel_id, sender_id, EV_TEXT, {"text": text}, audience, causation_id)

    def build_packet_envelope(
        self,
        channel_id: str,
        sender_id: str,
        body: str,
        *,
        handoff: Any = None,
        context_set: dict[str, Any] | None = None,
        audience: list[str] | None = None,
        causation_id: str | None = None,
    ) -> Envelope:
        """``EV_PACKET`` ``{"body", "routing"?, "context"?}`` — routing from a ``Handoff``, context from
        ``context_set``."""
        data: dict[str, Any] = {"body": body}
        if handoff is not None:
            routing: dict[str, Any] = {"kind": "handoff", "target": handoff.target}
            if getattr(handoff, "reason", ""):
                routing["reason"] = handoff.reason
            data["routing"] = routing
        if context_set:
            data["context"] = dict(context_set)
        return _built(channel_id, sender_id, EV_PACKET, data, audience, causation_id)


def _built(
    channel_id: str,
    sender_id: str,
    event_type: str,
    event_data: dict[str, Any],
    audience: list[str] | None,
    causation_id: str | None,
) -> Envelope:
    """An envelope of the builders: ``audience`` copied (None: everyone), no task, trace or idempotency key."""
    return Envelope(
        channel_id=channel_id,
        sender_id=sender_id,
        audience=None if audience is None else list(audience),
        event_type=event_type,
        event_data=event_data,
        causation_id=causation_id,
    )


def is_lifecycle(event_type: str) -> bool:
    """Events every built-in adapter passes over in fold and validate: the six channel events and ``ag2.task.*``."""
    return event_type in CHANNEL_EVENTS or is_task_event(event_type)


def state_to_dict(state: Any) -> dict[str, Any]:
    """A dataclass state as a JSON-friendly dict (``{}`` for a stateless adapter's ``None``)."""
    if state is None:
        return {}
    if dataclasses.is_dataclass(state) and not isinstance(state, type):
        return dataclasses.asdict(state)
    if isinstance(state, dict):
        return dict(state)
    raise TypeError(f"cannot convert adapter state of type {type(state).__name__} to a dict")


def state_from_dict(state_type: type, data: dict[str, Any]) -> Any:
    """Rebuild a dataclass state from ``state_to_dict`` output (unknown keys are refused)."""
    if not isinstance(data, dict):
        raise ProtocolError(f"adapter state must be a JSON object, got {type(data).__name__}")
    names = {f.name for f in dataclasses.fields(state_type)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ProtocolError(f"{state_type.__name__} has no field {unknown[0]!r}")
    return state_type(**data)


def _as_part(item: Any) -> Input:
    if isinstance(item, TextInput | DataInput):
        return item
    if isinstance(item, str):
        return TextInput(item)
    return DataInput(item)


def ensure_parts(content: Rendered) -> list[Input]:
    """``content`` as a list of input parts: None is ``[]``; a string is one ``TextInput``; an input part is
    kept; bytes and other single values become one ``DataInput``; a sequence gives one part per item
    (strings → ``TextInput``, parts kept, anything else — nested lists included — → ``DataInput``)."""
    if content is None:
        return []
    if isinstance(content, str | bytes | bytearray | TextInput | DataInput) or not isinstance(
        content, Sequence
    ):
        return [_as_part(content)]
    return [_as_part(item) for item in content]


def text_of(envelope: Envelope) -> str | None:
    """The ``text`` of an ``EV_TEXT`` envelope when it is a string, else None."""
    if envelope.event_type != EV_TEXT:
        return None
    text = envelope.event_data.get("text") if isinstance(envelope.event_data, dict) else None
    return text if isinstance(text, str) else None


class BaseAdapter(ChannelAdapter):
    """Defaults every built-in adapter starts from; subclasses set ``manifest`` and ``state_type``.

    The 13 methods are ``ChannelAdapter``'s defaults: ``render_envelope``/``extract_turn_input`` handle
    ``EV_TEXT``; ``build_round_envelope`` posts the reply body as ``EV_TEXT`` (None when empty); ``tools_for``
    offers nothing; ``expected_next`` is None; ``default_view_policy`` builds the manifest's
    ``default_view_policy`` from the view registry. On top: state snapshots and the cached ``say`` tool.
    """

    state_type: ClassVar[type | None] = None

    def __init__(self) -> None:
        self._say_tools: dict[str, Tool] = {}

    def state_to_dict(self, state: Any) -> dict[str, Any]:
        return state_to_dict(state)

    def state_from_dict(self, data: dict[str, Any]) -> Any:
        if self.state_type is None:
            return None
        return state_from_dict(self.state_type, data)

    def say_tool(self, client: Any) -> Tool:
        """The ``say`` tool for ``client``, built once per agent id and reused."""
        from ag2net.adapters.say import make_say_tool

        key = client.agent_id
        cached = self._say_tools.get(key)
        if cached is None:
            cached = make_say_tool(client)
            self._say_tools[key] = cached
        return cached

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.manifest.type!r}@v{self.manifest.version})"


class _DefaultAdapter(BaseAdapter):
    """An adapter that overrides nothing: ag2's ``default_*`` helpers are its (bound) methods."""

    manifest = ChannelManifest("default")


_DEFAULTS = _DefaultAdapter()
default_render_envelope = _DEFAULTS.render_envelope
default_extract_turn_input = _DEFAULTS.extract_turn_input
default_build_text_envelope = _DEFAULTS.build_text_envelope
default_build_packet_envelope = _DEFAULTS.build_packet_envelope
default_build_round_envelope = _DEFAULTS.build_round_envelope
default_expected_next = _DEFAULTS.expected_next
default_tools_for = _DEFAULTS.tools_for
make_text_envelope = default_build_text_envelope
make_packet_envelope = default_build_packet_envelope


def check_two_party(metadata: ChannelMetadata, kind: str) -> None:
    """Consulting and conversation: exactly one initiator, one respondent, two participants."""
    roles = [p.role for p in metadata.participants]
    if roles.count(ParticipantRole.INITIATOR) != 1:
        raise ProtocolError(f"{kind} requires exactly one initiator")
    if roles.count(ParticipantRole.RESPONDENT) != 1:
        raise ProtocolError(f"{kind} requires exactly one respondent")
    if len(metadata.participants) != 2:
        raise ProtocolError(f"{kind} requires exactly 2 participants, got {len(metadata.participants)}")


def participant_with_role(metadata: ChannelMetadata, role: ParticipantRole, fallback: str = "") -> str:
    for p in metadata.participants:
        if p.role is role:
            return p.agent_id
    return fallback


def ordered_ids(metadata: ChannelMetadata) -> list[str]:
    """Participant ids sorted by their ``order``."""
    return [p.agent_id for p in sorted(metadata.participants, key=lambda p: p.order)]


@dataclasses.dataclass(slots=True)
class TurnOrderState:
    """The state of a channel whose participants speak one at a time (discussion, workflow): its speaking
    order, who speaks next, and the last turn."""

    participant_order: list[str] = dataclasses.field(default_factory=list)
    expected_next_speaker: str | None = None
    last_speaker_id: str | None = None
    last_envelope_id: str | None = None
    turn_count: int = 0


class TurnOrderAdapter(BaseAdapter):
    """An adapter over a ``TurnOrderState``: the expected speaker is the next turn, and each reads a
    named window long enough to hold a couple of rounds."""

    def expected_next(self, metadata: ChannelMetadata, state: TurnOrderState) -> ExpectedTurn | None:
        if state.expected_next_speaker is None:
            return None
        return ExpectedTurn(state.expected_next_speaker, state.last_envelope_id)

    def default_view_policy(self, metadata: ChannelMetadata, participant_id: str) -> ViewPolicy:
        return NamedWindowedSummary(recent_n=max(2 * len(metadata.participants), 4))


# The package re-exports this list; ``RenderedPart``, the turn-order bases and the helpers the adapter
# modules share (``check_two_party``, ``ordered_ids``, ``participant_with_role``, ``text_of``) are imported
# by name.
__all__ = [
    "AdapterState",
    "BaseAdapter",
    "ChannelAdapter",
    "HubLookup",
    "Rendered",
    "Reply",
    "default_build_packet_envelope",
    "default_build_round_envelope",
    "default_build_text_envelope",
    "default_expected_next",
    "default_extract_turn_input",
    "default_render_envelope",
    "default_tools_for",
    "ensure_parts",
    "is_lifecycle",
    "make_packet_envelope",
    "make_text_envelope",
    "state_from_dict",
    "state_to_dict",
]

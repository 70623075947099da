"""The view protocol: how a channel's WAL becomes the history an LLM sees, and the callables views receive."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ag2net.envelope import Envelope
from ag2net.events import BaseEvent

if TYPE_CHECKING:
    from ag2net.channel import ChannelMetadata

EnvelopeRenderer = Callable[[Envelope], "str | None"]
"""Supplied by the channel's adapter: the text an envelope shows the LLM, or None to leave it out."""

NameResolver = Callable[[str], str]
"""Maps an agent id to a display name (the hub's ``name_for``)."""


def default_name_resolver(agent_id: str) -> str:
    """Identity: label speakers by their raw agent id."""
    return agent_id


@runtime_checkable
class ViewPolicy(Protocol):
    """Projects a WAL slice into the events an LLM receives as history for one participant.

    Subclass it (``class MyView(ViewPolicy): ...``) or just match its shape. Built-in views also
    implement ``params() -> dict`` (their constructor arguments, e.g. ``{"recent_n": 10}``), which turn
    records and the workbench use; callers treat it as optional.
    """

    name: str

    async def project(
        self,
        wal: Sequence[Envelope],
        *,
        participant_id: str,
        channel: ChannelMetadata,
        render_envelope: EnvelopeRenderer,
        name_for: NameResolver = default_name_resolver,
    ) -> list[BaseEvent]: ...


def view_params(view: Any) -> dict[str, Any]:
    """A view's parameters via its optional ``params()`` method; ``{}`` for views without one."""
    params = getattr(view, "params", None)
    if not callable(params):
        return {}
    value = params()
    return dict(value) if isinstance(value, dict) else {}


__all__ = ["EnvelopeRenderer", "NameResolver", "ViewPolicy", "default_name_resolver", "view_params"]

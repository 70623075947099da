"""The built-in adapters and the key the hub files adapters under."""

from __future__ import annotations

from ag2net.adapters.base import BaseAdapter
from ag2net.adapters.consulting import ConsultingAdapter
from ag2net.adapters.conversation import ConversationAdapter
from ag2net.adapters.discussion import DiscussionAdapter
from ag2net.adapters.workflow import WorkflowAdapter

AdapterKey = tuple[str, int]


def adapter_key(type: str, version: int = 1) -> AdapterKey:
    """``(manifest.type, manifest.version)``: adapters are registered and looked up by this pair."""
    return (type, version)


def default_adapters() -> list[BaseAdapter]:
    """Fresh instances of the four built-ins: consulting, conversation, discussion, workflow."""
    return [ConsultingAdapter(), ConversationAdapter(), DiscussionAdapter(), WorkflowAdapter()]


__all__ = ["AdapterKey", "adapter_key", "default_adapters"]

"""Views: how each participant's LLM sees a channel's WAL (protocol, built-ins, registry, cheap WAL prefixes)."""

from ag2net.views.base import EnvelopeRenderer, NameResolver, ViewPolicy, default_name_resolver, view_params
from ag2net.views.builtin import (
    FullTranscript,
    NamedTranscript,
    NamedWindowedSummary,
    WindowedSummary,
    summary_text,
)
from ag2net.views.registry import (
    VIEW_POLICIES_KNOB,
    VIEW_POLICY_KNOB,
    get_view,
    register_view,
    registered_views,
    resolve_view,
    unregister_view,
    validate_view_knobs,
    view_from_spec,
    view_spec,
)
from ag2net.views.wal import WalLog, WalSlice

__all__ = [
    "VIEW_POLICIES_KNOB",
    "VIEW_POLICY_KNOB",
    "EnvelopeRenderer",
    "FullTranscript",
    "NameResolver",
    "NamedTranscript",
    "NamedWindowedSummary",
    "ViewPolicy",
    "WalLog",
    "WalSlice",
    "WindowedSummary",
    "default_name_resolver",
    "get_view",
    "register_view",
    "registered_views",
    "resolve_view",
    "summary_text",
    "unregister_view",
    "validate_view_knobs",
    "view_from_spec",
    "view_params",
    "view_spec",
]

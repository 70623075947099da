"""Views by name: a registry of view factories, view specs (``{"name": ..., **params}``) and the per-channel
view resolution of SPEC §3.9 (participant override, else channel override, else the adapter's default).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, overload

from ag2net.errors import ProtocolError
from ag2net.views.base import ViewPolicy, view_params
from ag2net.views.builtin import FullTranscript, NamedTranscript, NamedWindowedSummary, WindowedSummary

if TYPE_CHECKING:
    from ag2net.channel import ChannelMetadata

ViewFactory = Callable[..., ViewPolicy]

VIEW_POLICY_KNOB = "view_policy"
VIEW_POLICIES_KNOB = "view_policies"

_REGISTRY: dict[str, ViewFactory] = {}


@overload
def register_view(
    name: str, factory: None = None, *, replace: bool = False
) -> Callable[[ViewFactory], ViewFactory]: ...


@overload
def register_view(name: str, factory: ViewFactory, *, replace: bool = False) -> ViewFactory: ...


def register_view(name: str, factory: ViewFactory | None = None, *, replace: bool = False) -> Any:
    """Register a view factory (a class or a function taking the spec's parameters) under ``name``.

    Use as a call, ``register_view("mine", MyView)``, or a decorator, ``@register_view("mine")``.
    Registering a different factory under a taken name needs ``replace=True``.
    """
    if not isinstance(name, str) or not name:
        raise ProtocolError(f"view name must be a non-empty string, got {name!r}")

    def _register(fn: ViewFactory) -> ViewFactory:
        if not callable(fn):
            raise ProtocolError(f"view factory for {name!r} must be callable, got {type(fn).__name__}")
        existing = _REGISTRY.get(name)
        if existing is not None and existing is not fn and not replace:
            raise ProtocolError(f"view {name!r} is already registered; pass replace=True to override it")
        _REGISTRY[name] = fn
        return fn

    if factory is None:
        return _register
    return _register(factory)


def unregister_view(name: str) -> None:
    """Forget a registered view (no error when it is not there)."""
    _REGISTRY.pop(name, None)


def registered_views() -> list[str]:
    """Registered view names, sorted."""
    return sorted(_REGISTRY)


def get_view(name: str, **params: Any) -> ViewPolicy:
    """Build the view registered under ``name`` with ``params``."""
    factory = _REGISTRY.get(name) if isinstance(name, str) else None
    if factory is None:
        raise ProtocolError(f"unknown view {name!r}; choose from {registered_views()}")
    try:
        return factory(**params)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"view {name!r} rejected parameters {params}: {exc}") from None


def view_from_spec(spec: dict[str, Any] | str | ViewPolicy) -> ViewPolicy:
    """A view from a name, a spec dict like ``{"name": "windowed_summary", "recent_n": 12}``, or a view."""
    if isinstance(spec, str):
        return get_view(spec)
    if isinstance(spec, dict):
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise ProtocolError(f"view spec needs a 'name' naming a registered view, got {spec!r}")
        params = {k: v for k, v in spec.items() if k != "name"}
        return get_view(name, **params)
    if isinstance(spec, ViewPolicy) and callable(getattr(spec, "project", None)):
        return spec
    raise ProtocolError(
        f"view spec must be a view name, a dict with 'name', or a ViewPolicy; got {type(spec).__name__}"
    )


def view_spec(view: ViewPolicy) -> dict[str, Any]:
    """``{"name": view.name, **view.params()}`` (params only when the view defines ``params()``)."""
    return {"name": getattr(view, "name", type(view).__name__), **view_params(view)}


def validate_view_knobs(knobs: dict[str, Any]) -> None:
    """Check a channel's view knobs build real views; raises ``ProtocolError`` naming the knob."""
    if VIEW_POLICY_KNOB in knobs:
        try:
            view_from_spec(knobs[VIEW_POLICY_KNOB])
        except ProtocolError as exc:
            raise ProtocolError(f"knob {VIEW_POLICY_KNOB!r} is invalid: {exc}") from None
    if VIEW_POLICIES_KNOB in knobs:
        overrides = knobs[VIEW_POLICIES_KNOB]
        if not isinstance(overrides, dict):
            raise ProtocolError(
                f"knob {VIEW_POLICIES_KNOB!r} must be a dict of participant id to view spec, "
                f"got {type(overrides).__name__}"
            )
        for participant_id, spec in overrides.items():
            try:
                view_from_spec(spec)
            except ProtocolError as exc:
                raise ProtocolError(
                    f"knob {VIEW_POLICIES_KNOB!r} for participant {participant_id!r} is invalid: {exc}"
                ) from None


def resolve_view(metadata: ChannelMetadata, participant_id: str, adapter: Any) -> ViewPolicy:
    """The view ``participant_id`` uses in this channel: its override, the channel's, or the adapter's default."""
    knobs = metadata.knobs or {}
    overrides = knobs.get(VIEW_POLICIES_KNOB)
    if overrides is not None:
        if not isinstance(overrides, dict):
            raise ProtocolError(
                f"knob {VIEW_POLICIES_KNOB!r} must be a dict of participant id to view spec, "
                f"got {type(overrides).__name__}"
            )
        if participant_id in overrides:
            try:
                return view_from_spec(overrides[participant_id])
            except ProtocolError as exc:
                raise ProtocolError(
                    f"knob {VIEW_POLICIES_KNOB!r} for participant {participant_id!r} is invalid: {exc}"
                ) from None
    if VIEW_POLICY_KNOB in knobs:
        try:
            return view_from_spec(knobs[VIEW_POLICY_KNOB])
        except ProtocolError as exc:
            raise ProtocolError(f"knob {VIEW_POLICY_KNOB!r} is invalid: {exc}") from None
    return adapter.default_view_policy(metadata, participant_id)


register_view(FullTranscript.name, FullTranscript)
register_view(WindowedSummary.name, WindowedSummary)
register_view(NamedTranscript.name, NamedTranscript)
register_view(NamedWindowedSummary.name, NamedWindowedSummary)


__all__ = [
    "VIEW_POLICIES_KNOB",
    "VIEW_POLICY_KNOB",
    "ViewFactory",
    "get_view",
    "register_view",
    "registered_views",
    "resolve_view",
    "unregister_view",
    "validate_view_knobs",
    "view_from_spec",
    "view_spec",
]

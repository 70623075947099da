"""``forward``: a ``Hub`` method that is a component's method, declared once on the component.

Most of the hub's public surface hands its arguments to one component (``hub.identities``,
``hub.channels``, ...). ``update_task = forward("tasks", Tasks.update)`` makes that method from the
component's own: the same signature (``inspect.signature``, the type checker), the same calling mode
(a coroutine function stays one), the component's docstring unless ``doc`` says more. ``awaitable``
gives the coroutine form of a synchronous lookup (ag2's ``get_*`` beside our ``lookup_*``).
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable
from types import CoroutineType
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
C = TypeVar("C", bound=type)

#: The attribute a forwarding method carries: the component it calls, by attribute name.
FORWARDS_TO = "__forwards_to__"


@overload
def forward(
    component: str, method: Callable[Concatenate[Any, P], R], *, doc: str | None = None
) -> Callable[Concatenate[Any, P], R]: ...


@overload
def forward(
    component: str,
    method: Callable[Concatenate[Any, P], R],
    *,
    awaitable: Literal[True],
    doc: str | None = None,
) -> Callable[Concatenate[Any, P], CoroutineType[Any, Any, R]]: ...


def forward(
    component: str,
    method: Callable[Concatenate[Any, P], Any],
    *,
    awaitable: bool = False,
    doc: str | None = None,
) -> Callable[Concatenate[Any, P], Any]:
    """A method calling ``self.<component>.<method's name>`` with its arguments (see the module doc)."""
    name = method.__name__
    target = operator.attrgetter(f"{component}.{name}")  # one lookup per call: ``self.<component>.<name>``
    if inspect.iscoroutinefunction(method):

        async def call_async(self: Any, *args: P.args, **kwargs: P.kwargs) -> Any:
            return await target(self)(*args, **kwargs)

        call: Callable[..., Any] = call_async
    elif awaitable:

        async def call_awaitable(self: Any, *args: P.args, **kwargs: P.kwargs) -> Any:
            return target(self)(*args, **kwargs)

        call = call_awaitable
    else:

        def call_sync(self: Any, *args: P.args, **kwargs: P.kwargs) -> Any:
            return target(self)(*args, **kwargs)

        call = call_sync
    call.__name__ = call.__qualname__ = name  # the attribute's name once ``named_forwards`` has run
    call.__doc__ = method.__doc__ if doc is None else doc
    call.__annotations__ = dict(method.__annotations__)
    call.__signature__ = inspect.signature(method)  # type: ignore[attr-defined]  # what inspect shows
    setattr(call, FORWARDS_TO, component)
    return call


def named_forwards(cls: C) -> C:
    """Class decorator: each forwarding method is named as the attribute that holds it."""
    for attr, value in vars(cls).items():
        if hasattr(value, FORWARDS_TO):
            value.__name__ = attr
            value.__qualname__ = f"{cls.__qualname__}.{attr}"
            value.__module__ = cls.__module__
    return cls

"""The hub's public methods made by ``ag2net.hub.forward``: named, typed and called as if written by hand."""

from __future__ import annotations

import inspect

from ag2net.hub.forward import FORWARDS_TO
from ag2net.hub.hub import Hub
from ag2net.hub.registry import Identities
from ag2net.hub.task_table import Tasks
from ag2net.identity import Passport


def _forwarded() -> dict[str, object]:
    return {name: value for name, value in vars(Hub).items() if hasattr(value, FORWARDS_TO)}


def test_each_forward_is_named_as_its_attribute() -> None:
    forwarded = _forwarded()
    assert len(forwarded) > 40
    for name, fn in forwarded.items():
        assert fn.__name__ == name and fn.__qualname__ == f"Hub.{name}"  # type: ignore[attr-defined]
        assert fn.__module__ == "ag2net.hub.hub"  # type: ignore[attr-defined]


def test_a_forward_has_the_component_methods_signature_and_calling_mode() -> None:
    assert inspect.signature(Hub.update_task) == inspect.signature(Tasks.update)
    assert inspect.iscoroutinefunction(Hub.update_task)
    assert not inspect.iscoroutinefunction(Hub.lookup_agent)
    # the awaitable form of a synchronous lookup: a coroutine function with the lookup's signature
    assert inspect.iscoroutinefunction(Hub.get_agent)
    assert inspect.signature(Hub.get_agent) == inspect.signature(Identities.lookup_agent)


def test_post_envelope_does_not_offer_the_admissions_bypass() -> None:
    assert "bypass" not in inspect.signature(Hub.post_envelope).parameters


async def test_forwards_reach_the_hubs_own_components() -> None:
    async with await Hub.open(None) as hub:
        passport = await hub.register_identity(Passport(name="ada"))
        assert passport.agent_id
        assert hub.name_for(passport.agent_id) == "ada"
        assert (await hub.get_agent("ada")).agent_id == passport.agent_id
        assert [p.name for p in await hub.list_agents()] == ["ada"]
        assert hub.find_agent_id("nobody") is None

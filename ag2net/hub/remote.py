"""Shell: remote agent proxies (``hub.delivery.remote``) — how the hub reaches participants hosted elsewhere (ag2's federation seam).

A participant registered with ``Passport(kind="remote_agent", auth=AuthBlock(scheme="a2a", ...))`` has
no connection to this hub. Envelopes addressed to it go to the ``RemoteAgentProxy`` registered for its
auth scheme (``hub.register_remote_proxy(proxy)``, keyed by ``proxy.scheme``), which carries them over
its own transport (A2A, gRPC, a message bus, another hub...). Admission, the recipient's
``inbound_from`` rule and per-recipient ordering are the same as for a local recipient: the hub binds
every remote agent it delivers to to one hub-side endpoint whose ``notify`` calls the proxy. A missing
proxy or a proxy that raises is reported to listeners as ``on_dispatch_failed`` and never reaches the
poster; a successful hand-off counts as the recipient's ``ack`` (its delivery cursor advances and it
holds no pending inbox entry, since a proxy sends no receipts).

The hub never closes a proxy: whoever registered it owns it (``unregister_remote_proxy`` returns it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ag2net.envelope import Envelope
from ag2net.errors import NotFoundError
from ag2net.hub.core import IdentityTable
from ag2net.identity import Passport

REMOTE_AGENT_KIND = "remote_agent"


class Receipts(Protocol):
    """What the proxy endpoint tells of a hand-off: the delivery book's pending set and its receipts
    (``Delivery.handle_receipt``)."""

    unacked: dict[str, set[str]]
    handle_receipt: Callable[..., None]


@runtime_checkable
class RemoteAgentProxy(Protocol):
    """Carries envelopes from this hub to participants whose passport has ``kind="remote_agent"``.

    ``scheme`` is the registry key, matched against the recipient passport's ``auth.scheme``.
    ``dispatch`` returns once the envelope is handed off; an exception it raises is reported through
    ``on_dispatch_failed``. ``close`` releases the proxy's transport (idempotent; never called by the hub).
    """

    scheme: str

    async def dispatch(self, envelope: Envelope, recipient: Passport) -> None: ...

    async def close(self) -> None: ...


class _RemoteProxyEndpoint:
    """The hub-side endpoint remote agents are bound to: ``notify`` hands the envelope to the proxy
    registered for the recipient's auth scheme."""

    operator = False  # an in-process endpoint of the hub, but it acts for no one

    def __init__(self, proxies: RemoteProxies) -> None:
        self.proxies = proxies
        self.endpoint_id = "remote-proxies"
        self.agent_id: str | None = None

    async def notify(self, recipient_id: str, envelope: Envelope) -> None:
        proxies = self.proxies
        record = proxies.identities.agents.get(recipient_id)
        if record is None:
            return  # unregistered since it was queued
        passport = record.passport
        try:
            scheme = passport.auth.scheme
            proxy = proxies.by_scheme.get(scheme)
            if proxy is None:
                raise NotFoundError(
                    f"no remote proxy registered for scheme {scheme!r}; the remote agent {passport.name!r} "
                    "is reached through hub.register_remote_proxy(proxy) with proxy.scheme == "
                    f"{scheme!r}"
                )
            # A copy: the proxy must not be able to change the hub's record of the participant.
            await proxy.dispatch(envelope, Passport.from_dict(passport.to_dict(include_claim=True)))
        except BaseException:
            pending = proxies.receipts.unacked.get(recipient_id)
            if pending is not None:
                pending.discard(envelope.envelope_id)  # a proxy sends no receipt: nothing stays pending
            raise
        proxies.receipts.handle_receipt(self, envelope.envelope_id, "ack", recipient_id, envelope.channel_id)

    async def close(self) -> None:
        return None


class RemoteProxies:
    """The ``RemoteAgentProxy`` objects by scheme, and the one endpoint remote agents are bound to."""

    __slots__ = ("_endpoint", "by_scheme", "identities", "receipts")

    def __init__(self, identities: IdentityTable, receipts: Receipts) -> None:
        self.identities = identities
        self.receipts = receipts
        self.by_scheme: dict[str, Any] = {}
        self._endpoint: _RemoteProxyEndpoint | None = None

    def register(self, proxy: RemoteAgentProxy) -> None:
        """Route deliveries to ``remote_agent`` participants whose ``auth.scheme`` is ``proxy.scheme``
        through ``proxy``. Registering again at the same scheme replaces the previous proxy."""
        scheme = getattr(proxy, "scheme", None)
        if not isinstance(scheme, str) or not scheme:
            raise ValueError(
                f"register_remote_proxy: proxy.scheme must be a non-empty string (got {scheme!r}); set it to "
                "the auth scheme of the remote agents it reaches, e.g. 'a2a'"
            )
        if not callable(getattr(proxy, "dispatch", None)):
            raise TypeError(
                "register_remote_proxy: proxy has no dispatch(envelope, recipient) method; implement "
                "RemoteAgentProxy (scheme, async dispatch(envelope, recipient), async close())"
            )
        self.by_scheme[scheme] = proxy

    def unregister(self, scheme: str) -> RemoteAgentProxy | None:
        """Remove and return the proxy registered for ``scheme`` (``None`` if there was none). The hub
        does not close it: await ``proxy.close()`` yourself."""
        return self.by_scheme.pop(scheme, None)

    @property
    def endpoint(self) -> _RemoteProxyEndpoint:
        """The hub-side endpoint every remote agent a delivery reaches is bound to."""
        endpoint = self._endpoint
        if endpoint is None:
            endpoint = self._endpoint = _RemoteProxyEndpoint(self)
        return endpoint


__all__ = ["REMOTE_AGENT_KIND", "RemoteAgentProxy", "RemoteProxies"]

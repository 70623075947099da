"""Per-identity secrets on token servers (issue 9, item 9; SPEC decision 21), on real sockets: issued once at
registration over the wire and stored hashed; required to attach the name again; kept by the client in the
user's data folder (mode 0600) so re-attaching just works; a displaced connection is told why; loopback
servers without a token keep ag2's behaviour; ``legacy_identities`` admits real ag2 1.2.1 clients."""

from __future__ import annotations

import asyncio
import json
import stat
from pathlib import Path

import pytest
import test_ws_interop as interop
from support import quiet, until
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ag2net import EV_TEXT, AccessDeniedError, Agent, AuthError, HubClient, Passport, ScriptedModel
from ag2net.hub import Hub
from ag2net.hub.auth import SECRET_META_PREFIX, secret_digest
from ag2net.server import serve_ws
from ag2net.store import SqliteStore

TOKEN = "team-token"
HELPERS = Path(__file__).parent / "ws_helpers"


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch) -> Path:
    """The user's data folder, in tmp: secrets never reach the real home."""
    folder = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(folder))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return folder


pytestmark = pytest.mark.hub(store="memory")


class Raw:
    def __init__(self, ws):
        self.ws = ws

    async def send(self, data: dict) -> None:
        await self.ws.send(json.dumps(data))

    async def recv(self) -> dict:
        return json.loads(await asyncio.wait_for(self.ws.recv(), 5))

    async def hello(self, name: str, claim: dict, scheme: str = "api_key") -> dict:
        await self.send({"kind": "hello", "name": name, "auth_scheme": scheme, "auth_claim": claim})
        return await self.recv()

    async def request(self, op: str, params: dict, request_id: str = "r1") -> dict:
        await self.send({"kind": "request", "request_id": request_id, "op": op, "params": params})
        while True:
            frame = await self.recv()
            if frame.get("kind") == "response" and frame["request_id"] == request_id:
                return frame


async def raw(url: str) -> Raw:
    return Raw(await ws_connect(url))


def human(name: str, token: str | None = TOKEN) -> dict:
    passport = Passport(name=name, kind="human").to_dict()
    if token is not None:
        passport["auth"] = {"scheme": "api_key", "claim": {"token": token}}
    return passport


def secrets_file(folder: Path) -> Path:
    return folder / "ag2net" / "identity-secrets.json"


async def test_registration_issues_a_secret_once_and_the_hub_keeps_only_its_hash(hub):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        r = await raw(srv.url())
        assert (await r.hello("", {"token": TOKEN}))["kind"] == "welcome"
        reply = await r.request("register", {"passport": human("ana"), "identity_secret": True})
        assert reply["ok"] is True
        secret = reply["identity_secret"]
        assert isinstance(secret, str) and len(secret) >= 40
        agent_id = reply["result"]["agent_id"]
        # kept hashed, in the identity's own record (written in the registration's one write)
        (record,) = [r for r in await hub.store.load_agents() if r["agent_id"] == agent_id]
        assert record["secret_digest"] == secret_digest(secret) and secret not in json.dumps(record)
        assert not await hub.store.get_meta(SECRET_META_PREFIX + agent_id)
        # other answers never carry it
        assert "identity_secret" not in await r.request("get_agent", {"name_or_id": "ana"}, "r2")
        # a registration that does not ask for a secret (what an ag2 1.2.1 client sends) is refused
        reply = await r.request("register", {"passport": human("ben")}, "r3")
        assert reply["error_code"] == "auth_failed"
        assert "--legacy-identities" in reply["error_message"]
        with pytest.raises(ConnectionClosed):
            await r.recv()
        assert hub.find_agent_id("ben") is None


async def test_a_token_holder_cannot_take_over_another_identity(hub, tmp_path):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        url = srv.url()
        owner = HubClient.connect(url, token=TOKEN, rpc_timeout=10)
        ana = await owner.register_human(Passport(name="ana", kind="human"))
        local = HubClient.local(hub)
        ben = await local.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")

        thief = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "thief.json")
        with pytest.raises(AuthError, match="'ana' is protected by its identity secret on this server"):
            await thief.attach_human("ana")
        for claim, message in (
            ({"token": TOKEN}, "'ana' is protected by its identity secret"),
            ({"token": TOKEN, "secret": "guess"}, "identity secret mismatch for 'ana'"),
            ({"token": TOKEN, "secret": None}, "identity secret mismatch for 'ana'"),
        ):
            r = await raw(url)
            frame = await r.hello("ana", claim)
            assert frame["code"] == "auth_failed" and message in frame["message"]
            with pytest.raises(ConnectionClosed):
                await r.recv()
        # ana never noticed: her deliveries and her posts still work on her own connection
        await ben.send(ch.channel_id, "for ana")
        got = await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
        assert got.event_data == {"text": "for ana"}
        await ana.send(ch.channel_id, "ana still posts")
        assert not owner.link.displaced
        await thief.close()
        await owner.close()
        await local.close()


async def test_the_kept_secret_reattaches_and_the_displaced_connection_is_told(hub, data_home):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        url = srv.url()
        first = HubClient.connect(url, token=TOKEN, rpc_timeout=10)
        ana = await first.register_human(Passport(name="ana", kind="human"))
        path = secrets_file(data_home)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        secret = json.loads(path.read_text())[url]["ana"]
        assert hub.identities.agents[ana.agent_id].secret_digest == secret_digest(secret)

        # a bare connection holding ana (with her secret) is displaced by the next attach: told, then closed
        r = await raw(url)
        assert (await r.hello("ana", {"token": TOKEN, "secret": secret}))["kind"] == "welcome"
        await until(lambda: ana.agent_id in first.link.displaced)  # the first client was told, too
        second = HubClient.connect(url, token=TOKEN, rpc_timeout=10)  # same data folder: finds the secret
        again = await second.attach_human("ana")
        assert again.agent_id == ana.agent_id
        told = await r.recv()
        assert told == {
            "kind": "error",
            "code": "access_denied",
            "message": f"identity 'ana' ({ana.agent_id}) was attached by another connection presenting its "
            "credentials; this connection no longer receives its deliveries",
            "envelope_id": None,
        }
        with pytest.raises(ConnectionClosed):
            await r.recv()
        assert r.ws.close_code == 1008
        assert r.ws.close_reason == "displaced: 'ana' was attached by another connection"
        # the displaced client does not fight back after it reconnects
        assert ana.agent_id not in first.link.bound_ids
        await asyncio.sleep(0.5)
        assert ana.agent_id in hub.delivery.bindings[ana.agent_id].bound  # still the second client's
        assert ana.agent_id not in first.link.bound_ids
        local = HubClient.local(hub)
        ben = await local.register_human(Passport(name="ben", kind="human"))
        ch = await again.open(type="conversation", target="ben")
        await ben.send(ch.channel_id, "to the new seat")
        got = await again.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
        assert got.event_data == {"text": "to the new seat"}
        for client in (first, second, local):
            await client.close()


async def test_a_reconnecting_link_presents_the_secret_again(hub):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        client = HubClient.connect(
            srv.url(), token=TOKEN, rpc_timeout=10, reconnect_initial_delay=0.02, identity_secrets=False
        )
        ana = await client.register_human(Passport(name="ana", kind="human"))
        local = HubClient.local(hub)
        ben = await local.register_human(Passport(name="ben", kind="human"))
        ch = await ana.open(type="conversation", target="ben")
        [endpoint] = srv.endpoints.values()
        await endpoint.shut(1011, "test: connection dropped")
        await until(lambda: client.link.reconnects == 1 and ana.agent_id in hub.delivery.bindings)
        await ben.send(ch.channel_id, "after the drop")
        got = await ana.next_envelope(predicate=lambda e: e.event_type == EV_TEXT, timeout=5)
        assert got.event_data == {"text": "after the drop"}
        await client.close()
        await local.close()


async def test_secrets_survive_a_server_restart_on_sqlite(tmp_path):
    db = tmp_path / "hub.db"
    hub = await Hub.open(SqliteStore(db), **quiet())
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        port = srv.port
        client = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10)
        ana = await client.register_human(Passport(name="ana", kind="human"))
        await client.close()
    await hub.close()
    hub = await Hub.open(SqliteStore(db), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", port, token=TOKEN) as srv:
            back = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10)
            assert (await back.attach_human("ana")).agent_id == ana.agent_id
            thief = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10, identity_secrets=False)
            with pytest.raises(AuthError, match="protected by its identity secret"):
                await thief.attach_human("ana")
            await back.close()
            await thief.close()
    finally:
        await hub.close()


async def test_the_workbench_flow_keeps_the_secret_under_home_local_share(hub, tmp_path, monkeypatch):
    # what `ag2net tui --connect URL --token T --as root` does, twice (two runs of the workbench)
    monkeypatch.delenv("XDG_DATA_HOME")
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        first = HubClient.connect(srv.url(), token=TOKEN)
        await first.open()
        root = await first.register_or_attach_human("root")
        await first.close()
        path = tmp_path / "home" / ".local" / "share" / "ag2net" / "identity-secrets.json"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        second = HubClient.connect(srv.url(), token=TOKEN)
        await second.open()
        assert (await second.register_or_attach_human("root")).agent_id == root.agent_id
        await second.close()


async def test_unregistering_forgets_the_secret(hub, data_home):
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        client = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10)
        ana = await client.register_human(Passport(name="ana", kind="human"))
        assert "ana" in json.loads(secrets_file(data_home).read_text())[srv.url()]
        await client.unregister_agent(ana.agent_id)
        assert ana.agent_id not in hub.identities.agents
        assert all(r["agent_id"] != ana.agent_id for r in await hub.store.load_agents())
        assert not await hub.store.get_meta(SECRET_META_PREFIX + ana.agent_id)
        assert srv.url() not in json.loads(secrets_file(data_home).read_text())
        await client.close()


async def test_identities_without_a_secret_attach_over_the_wire_only_with_legacy_identities(hub):
    local = HubClient.local(hub)
    await local.register_human(Passport(name="planner", kind="human"))
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        client = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10, identity_secrets=False)
        with pytest.raises(AccessDeniedError, match="'planner' has no identity secret on this server"):
            await client.attach_human("planner")
        assert hub.delivery.bindings[hub.find_agent_id("planner")] is not None
        await client.close()
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN, legacy_identities=True) as srv:
        client = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10, identity_secrets=False)
        assert (await client.attach_human("planner")).agent_id == hub.find_agent_id("planner")
        # an identity that has a secret keeps needing it, legacy server or not
        await client.register_human(Passport(name="ana", kind="human"))
        r = await raw(srv.url())
        assert (await r.hello("ana", {"token": TOKEN}))["code"] == "auth_failed"
        # a legacy registration (no secret asked for) is admitted and answered in ag2's shape
        r = await raw(srv.url())
        reply = await r.request("register", {"passport": human("old-client")})
        assert reply["ok"] is True and "identity_secret" not in reply
        r = await raw(srv.url())
        assert (await r.hello("old-client", {"token": TOKEN}))["kind"] == "welcome"
        await client.close()
    await local.close()


async def test_loopback_servers_without_a_token_keep_todays_behaviour(hub, data_home):
    async with serve_ws(hub, "127.0.0.1", 0) as srv:
        r = await raw(srv.url())
        reply = await r.request("register", {"passport": human("ana", token=None)})
        assert reply["ok"] is True and "identity_secret" not in reply
        other = await raw(srv.url())
        assert (await other.hello("ana", {}, scheme="none"))["kind"] == "welcome"
        client = HubClient.connect(srv.url(), rpc_timeout=10)
        await client.register_human(Passport(name="ben", kind="human"))
        again = HubClient.connect(srv.url(), rpc_timeout=10)
        assert (await again.attach_human("ben")).agent_id == hub.find_agent_id("ben")
        assert not secrets_file(data_home).exists()
        await client.close()
        await again.close()


# --- real ag2 1.2.1 clients on a token server --------------------------------------------------------------

ag2_python = interop.ag2_python  # the fixture finding (or building) the ag2 1.2.1 virtualenv


async def _ag2_client(python: Path, *args: str) -> dict:
    proc = await asyncio.create_subprocess_exec(
        str(python), str(HELPERS / "ag2_token_client.py"), *args, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0
    return json.loads(out.decode().strip().splitlines()[-1])


async def test_legacy_identities_admit_real_ag2_clients_on_a_token_server(ag2_python, hub):
    local = HubClient.local(hub)
    await local.register(Agent("helper", ScriptedModel("from ag2net", loop=True)))
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
        refused = await _ag2_client(ag2_python, srv.url(), TOKEN, "helper", "hello?")
        assert refused["error"] == "AuthError" and "--legacy-identities" in refused["message"]
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN, legacy_identities=True) as srv:
        answered = await _ag2_client(ag2_python, srv.url(), TOKEN, "helper", "hello?")
        assert answered["reply"] == "from ag2net"
        assert answered["human_id"] == hub.find_agent_id("ag2-human")
    await local.close()

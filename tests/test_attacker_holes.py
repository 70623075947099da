"""The holes an attacker found in ``ag2net serve`` (issue 21), each on real sockets against a real server:
identity races, the unauthenticated connection budget, lone surrogates in secrets, lookalike names, the
order of credential checks, directory access of ``find_agent_id`` and the rotation of a leaked secret."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from support import quiet, until
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from ag2net import AccessDeniedError, HubClient, Passport, ProtocolError
from ag2net.hub import Hub
from ag2net.server import serve_ws
from ag2net.store import SqliteStore

TOKEN = "team-token"
OPERATOR = "op-token"


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture
async def file_hub(tmp_path):
    """A hub on a real SQLite file: every write is a real commit, so races have real windows."""
    hub = await Hub.open(SqliteStore(tmp_path / "hub.db"), **quiet())
    yield hub
    await hub.close()


async def recv(ws, timeout: float = 5.0) -> dict:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def hello(ws, name: str, claim: dict, scheme: str = "api_key") -> dict:
    await ws.send(json.dumps({"kind": "hello", "name": name, "auth_scheme": scheme, "auth_claim": claim}))
    return await recv(ws)


async def request(ws, op: str, params: dict, request_id: str = "r1") -> dict:
    await ws.send(json.dumps({"kind": "request", "request_id": request_id, "op": op, "params": params}))
    while True:
        frame = await recv(ws)
        if frame.get("kind") == "response" and frame["request_id"] == request_id:
            return frame


async def closed(ws) -> None:
    with pytest.raises(ConnectionClosed):
        while True:
            await asyncio.wait_for(ws.recv(), 5)


# --- items 1 and 2: a token holder racing an owner's registration ---------------------------------------


async def _race_registrations(url: str, tmp_path, rounds: int) -> tuple[list[str], list[str]]:
    """The owner registers ``own<i>`` while a token holder repeats ``hello own<i>`` with the token alone.
    Returns the names the thief was welcomed as, and those the owner could not attach again afterwards."""
    stolen: list[str] = []
    locked_out: list[str] = []
    for i in range(rounds):
        name = f"own{i}"
        stop = asyncio.Event()

        async def thief(name: str = name, stop: asyncio.Event = stop) -> None:
            while not stop.is_set():
                try:
                    async with ws_connect(url) as ws:
                        while not stop.is_set():
                            frame = await hello(ws, name, {"token": TOKEN})
                            if frame["kind"] == "welcome":
                                stolen.append(name)
                                return
                            if frame.get("code") != "not_found":
                                break  # refused and closed: open another socket
                except (ConnectionClosed, OSError, TimeoutError):
                    continue

        thieves = [asyncio.create_task(thief()) for _ in range(3)]
        await asyncio.sleep(0.005 * (i % 4))
        secrets_path = tmp_path / f"owner{i}.json"
        owner = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=secrets_path)
        await owner.register_human(Passport(name=name, kind="human"))
        await asyncio.sleep(0.02)  # let the thieves' last hellos land after the registration
        stop.set()
        await asyncio.gather(*thieves)
        await owner.close()
        back = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=secrets_path)
        try:
            await back.attach_human(name)
        except Exception:
            locked_out.append(name)
        await back.close()
    return stolen, locked_out


@pytest.mark.parametrize("legacy", [False, True], ids=["secrets-only", "legacy-identities"])
async def test_a_token_holder_racing_a_registration_neither_takes_nor_locks_out_the_name(
    file_hub, tmp_path, legacy
):
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN, legacy_identities=legacy) as srv:
        stolen, locked_out = await _race_registrations(srv.url(), tmp_path, rounds=24)
    # item 2: a fresh identity that has a secret never looks legacy, not for an instant
    assert stolen == []
    # item 1: nothing cached may be older than the secret's write: the owner always attaches again
    assert locked_out == []


async def test_the_secret_is_written_with_the_identity_in_one_record(file_hub):
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN) as srv, ws_connect(srv.url()) as ws:
        assert (await hello(ws, "", {"token": TOKEN}))["kind"] == "welcome"
        passport = Passport(name="ana", kind="human").to_dict()
        passport["auth"] = {"scheme": "api_key", "claim": {"token": TOKEN}}
        # a client cannot choose its own digest
        reply = await request(
            ws, "register", {"passport": passport, "identity_secret": True, "_secret_digest": "sha256:x"}
        )
        assert reply["ok"] is True
    (record,) = [r for r in await file_hub.store.load_agents() if r["name"] == "ana"]
    assert record["secret_digest"].startswith("sha256:") and record["secret_digest"] != "sha256:x"


# --- item 3: unauthenticated sockets have a budget of their own ------------------------------------------


async def test_anonymous_sockets_do_not_lock_token_holders_out(file_hub):
    async with serve_ws(
        file_hub,
        "127.0.0.1",
        0,
        token=TOKEN,
        max_connections_per_address=8,
        max_unauthenticated_per_address=4,
        max_unauthenticated=16,
    ) as srv:
        url = srv.url()
        anonymous = [await ws_connect(url) for _ in range(12)]  # more than either budget
        await until(lambda: srv.limits.unauthenticated <= 4)
        assert srv.limits.connections == 0  # none of them counts against the authenticated budget
        served = 0
        for _ in range(10):
            client = HubClient.connect(url, token=TOKEN, rpc_timeout=5)
            assert (await client.health())["registered_agents"] >= 0
            served += 1
            await client.close()
            anonymous.append(await ws_connect(url))  # the flood goes on between them
        assert served == 10
        assert srv.limits.unauthenticated <= 4 and srv.limits.evicted >= 8
        for ws in anonymous:
            await ws.close()


async def test_an_address_that_keeps_failing_gets_a_shorter_auth_timeout(file_hub):
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN, auth_timeout=4) as srv:
        url = srv.url()
        for _ in range(2):
            async with ws_connect(url) as ws:
                assert (await hello(ws, "", {"token": "wrong"}))["code"] == "auth_failed"
                await closed(ws)
        idle = await ws_connect(url)
        began = time.monotonic()
        await closed(idle)
        assert idle.close_reason.startswith("auth_failed: not authenticated within 1 s")
        assert time.monotonic() - began < 3.5
        # another address is not punished for it
        other = await ws_connect(url, local_addr=("127.0.0.2", 0))
        assert srv.limits.auth_timeout_for("127.0.0.2") == 4
        await other.close()


# --- item 8: a lone surrogate in a secret -----------------------------------------------------------------


@pytest.mark.parametrize("field", ["secret", "token"])
async def test_a_lone_surrogate_in_a_claim_is_a_bad_credential(file_hub, field):
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN) as srv:
        owner = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10)
        await owner.register_human(Passport(name="ana", kind="human"))
        claim = {"token": TOKEN, "secret": "ok"}
        async with ws_connect(srv.url()) as ws:
            text = json.dumps({"kind": "hello", "name": "ana", "auth_scheme": "api_key", "auth_claim": claim})
            await ws.send(text.replace(f'"{field}": "{claim[field]}"', f'"{field}": "\\ud800"'))
            frame = await recv(ws)
            assert frame["kind"] == "error" and frame["code"] == "auth_failed", frame
            assert "Traceback" not in frame["message"] and "encode" not in frame["message"]
            await closed(ws)
            assert ws.close_code == 1008
        await owner.close()


# --- item 9: lookalike names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("alice ", "already registered"),  # trimmed: the same name
        ("ａｌｉｃｅ", "already registered"),  # fullwidth: NFKC makes it the same name
        ("Alice", "looks like the registered name 'alice' (it differs only in letter case)"),
        ("ALICE", "looks like the registered name 'alice'"),
        (
            "\u0430lice",
            "looks like the registered name 'alice' (U+0430 CYRILLIC SMALL LETTER A looks like 'a')",
        ),
        ("al\u0456ce", "U+0456 CYRILLIC SMALL LETTER BYELORUSSIAN-UKRAINIAN I"),
        ("a1ice", "looks like the registered name 'alice'"),
        ("ali\u200dce", "contains U+200D ZERO WIDTH JOINER, a format character"),
        ("\u202eecila", "contains U+202E RIGHT-TO-LEFT OVERRIDE, a format character"),
        ("ali\u00adce", "contains U+00AD SOFT HYPHEN, a format character"),
    ],
)
async def test_lookalike_and_invisible_names_are_refused_in_process_and_over_the_wire(name, message):
    hub = await Hub.open(None, **quiet())
    try:
        await HubClient.local(hub).register_human(Passport(name="alice", kind="human"))
        with pytest.raises(ProtocolError) as refused:
            await HubClient.local(hub).register_human(Passport(name=name, kind="human"))
        assert message in str(refused.value)
        async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN) as srv:
            client = HubClient.connect(srv.url(), token=TOKEN, rpc_timeout=10)
            with pytest.raises(ProtocolError, match=r"already registered|looks like|contains U\+"):
                await client.register_human(Passport(name=name, kind="human"))
            await client.close()
        assert sorted(p.name for p in await hub.list_agents()) == ["alice"]
    finally:
        await hub.close()


async def test_a_name_is_stored_normalised_and_found_by_its_spellings():
    hub = await Hub.open(None, **quiet())
    try:
        bob = await HubClient.local(hub).register_human(Passport(name="  ｂｏｂ  ", kind="human"))
        assert hub.lookup_agent(bob.agent_id).name == "bob"
        assert hub.find_agent_id("bob") == hub.find_agent_id("ｂｏｂ ") == bob.agent_id
        # distinct names that merely share letters stay apart
        for other in ("bobby", "rob", "bob-2"):
            await HubClient.local(hub).register_human(Passport(name=other, kind="human"))
    finally:
        await hub.close()


# --- item 10: a wrong token is told so first ----------------------------------------------------------------


async def test_a_wrong_token_is_answered_as_a_wrong_token(file_hub):
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN) as srv, ws_connect(srv.url()) as ws:
        passport = Passport(name="eve", kind="human").to_dict()
        passport["auth"] = {"scheme": "api_key", "claim": {"token": "not-the-token"}}
        reply = await request(ws, "register", {"passport": passport})  # no secret asked for
        assert reply["error_code"] == "auth_failed"
        assert reply["error_message"] == "api_key mismatch for 'eve'"


# --- item 11: find_agent_id is directory access ----------------------------------------------------------------


async def test_find_agent_id_needs_the_token_without_a_public_directory(file_hub):
    await HubClient.local(file_hub).register_human(Passport(name="ana", kind="human"))
    async with serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN) as srv, ws_connect(srv.url()) as anon:
        reply = await request(anon, "find_agent_id", {"name": "ana"})
        assert reply["ok"] is False and reply["error_code"] == "access_denied"
        assert reply["result"] is None
    async with (
        serve_ws(file_hub, "127.0.0.1", 0, token=TOKEN, public_directory=True) as srv,
        ws_connect(srv.url()) as anon,
    ):
        reply = await request(anon, "find_agent_id", {"name": "ana"})
        assert reply["result"] == file_hub.find_agent_id("ana")


# --- item 13: rotating a leaked secret ----------------------------------------------------------------------------


async def test_a_leaked_secret_is_rotated_and_refused_from_then_on(tmp_path):
    db = tmp_path / "rot.db"
    hub = await Hub.open(SqliteStore(db), **quiet())
    async with serve_ws(hub, "127.0.0.1", 0, token=TOKEN, operator_token=OPERATOR) as srv:
        url, port = srv.url(), srv.port
        owner = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "own.json")
        ana = await owner.register_human(Passport(name="ana", kind="human"))
        leaked = json.loads((tmp_path / "own.json").read_text())[url]["ana"]
        # the thief attaches with the leaked secret (the owner's connection is displaced)...
        thief = await ws_connect(url)
        assert (await hello(thief, "ana", {"token": TOKEN, "secret": leaked}))["kind"] == "welcome"
        await owner.close()
        # ...the owner takes it back and rotates: the old secret is refused from now on
        owner = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "own.json")
        ana = await owner.attach_human("ana")
        assert (await recv(thief))["code"] == "access_denied"
        await closed(thief)
        new = await owner.rotate_secret("ana")
        assert new != leaked
        assert json.loads((tmp_path / "own.json").read_text())[url]["ana"] == new
        async with ws_connect(url) as again:
            frame = await hello(again, "ana", {"token": TOKEN, "secret": leaked})
            assert frame["code"] == "auth_failed" and "identity secret mismatch for 'ana'" in frame["message"]
        # the owner's own connection keeps the identity; a new one attaches with the secret the link kept
        await owner.close()
        back = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "own.json")
        assert (await back.attach_human("ana")).agent_id == ana.agent_id
        # a connection that does not hold ana may not rotate her secret; an operator may
        other = HubClient.connect(url, token=TOKEN, rpc_timeout=10, identity_secrets=tmp_path / "o.json")
        await other.register_human(Passport(name="carl", kind="human"))
        with pytest.raises(AccessDeniedError, match="this connection does not hold 'ana'"):
            await other.rotate_secret(ana.agent_id)
        # an operator rotating a held identity's secret displaces its holder, who is told why
        holder = await ws_connect(url)
        assert (await hello(holder, "ana", {"token": TOKEN, "secret": new}))["kind"] == "welcome"
        async with ws_connect(url) as op:
            assert (await hello(op, "op", {"token": OPERATOR}, scheme="operator"))["kind"] == "welcome"
            reply = await request(op, "rotate_secret", {"agent_id": ana.agent_id})
            assert reply["ok"] is True
            by_operator = reply["result"]["identity_secret"]
        told = await recv(holder)
        assert told["code"] == "access_denied" and "had its identity secret rotated" in told["message"]
        await closed(holder)
        assert holder.close_reason == "displaced: 'ana' had its identity secret rotated"
        assert file_hub_bound(hub, ana.agent_id) is None
        await back.close()
        await other.close()
    audit = [r for r in await hub.audit_log.read_all() if r["kind"] == "identity_secret_rotated"]
    assert [r["agent_id"] for r in audit] == [ana.agent_id, ana.agent_id]
    await hub.close()
    # after a restart the last rotation holds: only the operator's secret attaches ana
    hub = await Hub.open(SqliteStore(db), **quiet())
    try:
        async with serve_ws(hub, "127.0.0.1", port, token=TOKEN) as srv:
            for secret, kind in ((new, "error"), (by_operator, "welcome")):
                async with ws_connect(srv.url()) as ws:
                    assert (await hello(ws, "ana", {"token": TOKEN, "secret": secret}))["kind"] == kind
    finally:
        await hub.close()


def file_hub_bound(hub, agent_id):
    """The connection the hub delivers ``agent_id``'s envelopes to, if any."""
    return hub.delivery.bindings.get(agent_id)


async def test_rotation_is_refused_where_there_are_no_secrets():
    hub = await Hub.open(None, **quiet())
    try:
        with pytest.raises(ProtocolError, match="in-process identities have no secret"):
            await HubClient.local(hub).rotate_secret("anyone")
        async with serve_ws(hub, "127.0.0.1", 0) as srv:
            client = HubClient.connect(srv.url(), rpc_timeout=10)
            ana = await client.register_human(Passport(name="ana", kind="human"))
            with pytest.raises(ProtocolError, match="this server issues no identity secrets"):
                await client.rotate_secret(ana.agent_id)
            await client.close()
    finally:
        await hub.close()


async def test_ag2net_serve_keeps_a_budget_for_unauthenticated_sockets_in_a_real_process(tmp_path):
    import os
    import re
    import subprocess
    import sys

    env = {**os.environ, "PYTHONUNBUFFERED": "1", "XDG_DATA_HOME": str(tmp_path)}
    env.pop("AG2NET_TOKEN", None)
    bad = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "serve", "--token", TOKEN, "--max-unauthenticated", "0"],
        capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "--max-unauthenticated must be more than 0" in bad.stderr
    assert "Traceback" not in bad.stderr
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ag2net.cli", "serve", "--port", "0", "--token", TOKEN,
        "--max-connections-per-address", "3", "--max-unauthenticated-per-address", "2",
        stdout=asyncio.subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=str(tmp_path),
    )  # fmt: skip
    try:
        line = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode()
        url = re.search(r"(ws://\S+)", line).group(1)
        flood = [await ws_connect(url) for _ in range(6)]  # never authenticate
        for _ in range(3):
            client = HubClient.connect(url, token=TOKEN, rpc_timeout=10)
            assert "registered_agents" in await client.health()
            await client.close()
        evicted = 0
        for ws in flood:
            try:
                await asyncio.wait_for(ws.recv(), 0.2)
            except ConnectionClosed:
                evicted += 1
            except TimeoutError:
                pass
        assert evicted >= 4  # the oldest made room: at most two wait at a time
    finally:
        proc.terminate()
        await proc.wait()

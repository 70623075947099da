"""``ag2net bundle --redact``: secrets planted in every place a bundle takes them from (envelopes, turn
records: system prompt, history, inputs, tool arguments and results, reply; model parameters; identity
claims; skill cards; resumes) are found in the database and in an unredacted bundle, and in no byte of a
redacted one: API keys (``sk-…``), bearer tokens, this environment's secrets (``keys``), e-mail addresses
(``emails``) and a regular expression. Fields named like secrets never reach a bundle. The file is plain
UTF-8 JSON lines (nothing compressed or encoded that could hide a secret), and the redacted bundle still
opens and replays with its recorded answers."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
from pathlib import Path

import pytest
from support import quiet, until
from typer.testing import CliRunner

from ag2net import Agent, Hub, HubClient, Passport, Resume, ScriptedModel, tool, tool_call
from ag2net.bundle import Redactor, open_bundle_hub, read_bundle
from ag2net.cli import app
from ag2net.debug import compare, fork, replay
from ag2net.envelope import EV_TEXT
from ag2net.store import SqliteStore

runner = CliRunner()

OPENAI_KEY = "sk-proj-Zx81QwErTy55AbCdEfGh9900"
BEARER = "Bearer eyFakeToken.abc123XYZ789"
HUB_SECRET = "hub-operator-pa55word-4471"  # only known as this environment's AG2NET_OPERATOR_TOKEN
EMAIL = "dana.secret@example.org"
TICKET = "ACME-48213"  # what the --redact regex names
CLAIM = "claim-token-QQ9911aa"  # an identity claim's token: a field named like a secret
PARAM_KEY = "param-key-77ZZ"  # a model parameter named like a secret
SECRETS = (OPENAI_KEY, BEARER.split()[1], HUB_SECRET, EMAIL, TICKET, CLAIM, PARAM_KEY)


@tool
def lookup(term: str) -> str:
    """Look a term up.

    Args:
        term: What to look up.
    """
    return f"{term} is filed under {TICKET}, owner {EMAIL}, key {OPENAI_KEY}"


async def plant(db: Path) -> str:
    """A conversation of alice and bob (a tool round), every secret in it; the channel id."""
    hub = await Hub.open(SqliteStore(db), **quiet())
    hc = HubClient.local(hub)
    try:
        bob = await hc.register(
            Agent(
                "bob",
                ScriptedModel(tool_call("lookup", term=f"{TICKET} for {EMAIL}"), f"Done; mail {EMAIL}."),
                system_prompt=f"You are bob. Use {OPENAI_KEY} with {BEARER}; the operator is {HUB_SECRET}.",
                tools=[lookup],
            ),
            Passport(name="bob"),
            Resume(summary=f"Reach me at {EMAIL} about {TICKET}."),
            skill_md=f"# bob\n\nAsk {EMAIL}; never share {OPENAI_KEY}.\n",
        )
        alice = await hc.register_human(Passport(name="alice", kind="human"))
        ch = await alice.open(type="conversation", target="bob")
        await alice.send(ch.channel_id, f"{TICKET}: my key is {OPENAI_KEY}, header {BEARER}, mail {EMAIL}")
        await until(lambda: len(bob.agent.model.calls) == 2)
        await bob.idle()
        cid = ch.channel_id
    finally:
        await hc.close()
        await hub.close()
    # what the store holds beside: a claim on bob's passport, and a model parameter named like a secret
    conn = sqlite3.connect(db)
    try:
        with conn:
            (record,) = conn.execute("SELECT record FROM agents WHERE name = 'bob'").fetchone()
            agent = json.loads(record)
            agent["passport"]["auth"]["claim"] = {"token": CLAIM}
            conn.execute("UPDATE agents SET record = ? WHERE name = 'bob'", (json.dumps(agent),))
            for turn_id, text in conn.execute("SELECT turn_id, record FROM turns").fetchall():
                turn = json.loads(text)
                turn["model_params"] = {**turn.get("model_params", {}), "api_key": PARAM_KEY}
                conn.execute("UPDATE turns SET record = ? WHERE turn_id = ?", (json.dumps(turn), turn_id))
    finally:
        conn.close()
    return cid


@pytest.fixture(scope="module")
def planted(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("redact") / "net.db"
    return db, asyncio.run(plant(db))


def bundle(db: Path, cid: str, out: Path, *extra: str) -> bytes:
    result = runner.invoke(
        app,
        ["bundle", "--db", str(db), cid, "-o", str(out), *extra],
        env={"AG2NET_OPERATOR_TOKEN": HUB_SECRET},
    )
    assert result.exit_code == 0, result.output
    return out.read_bytes()


def test_the_secrets_are_in_the_database_and_in_an_unredacted_bundle(planted, tmp_path):
    db, cid = planted
    raw = db.read_bytes() + b"".join(p.read_bytes() for p in db.parent.glob(db.name + "-wal"))
    assert all(s.encode() in raw for s in SECRETS), "the planting failed: the test could not fail"
    data = bundle(db, cid, tmp_path / "plain.ag2b")
    # without --redact everything is kept but the fields named like secrets
    for secret in (OPENAI_KEY, HUB_SECRET, EMAIL, TICKET):
        assert secret.encode() in data
    assert CLAIM.encode() not in data and PARAM_KEY.encode() not in data
    assert b'"token":"[redacted:field]"' in data and b'"api_key":"[redacted:field]"' in data


def test_no_key_token_email_or_pattern_survives_in_any_byte_of_a_redacted_bundle(planted, tmp_path):
    db, cid = planted
    data = bundle(db, cid, tmp_path / "red.ag2b", "--redact", r"keys,emails,ACME-\d+")
    text = data.decode("utf-8")  # plain UTF-8 JSON lines: what grep sees is all there is
    assert all(json.loads(line) for line in text.splitlines())
    for secret in SECRETS:
        assert secret.encode() not in data, secret
        assert secret.lower().encode() not in data.lower(), secret
    # nor in any string the JSON decodes to (an escape could spell one out otherwise)
    decoded = json.dumps([json.loads(line) for line in text.splitlines()], ensure_ascii=False)
    for secret in SECRETS:
        assert secret not in decoded
    for needle in ("sk-", "eyFakeToken", "@example.org", "ACME-4"):
        assert needle not in decoded, needle
    assert not Redactor.parse(r"keys,emails,ACME-\d+", {"AG2NET_OPERATOR_TOKEN": HUB_SECRET}).leaks(
        json.loads(decoded)
    )
    b = read_bundle(tmp_path / "red.ag2b")
    said = b.header["redaction"]
    assert said["kinds"] == ["keys", "emails", "pattern"] and said["replaced"] > 10
    assert "ACME" not in json.dumps(b.header)  # the header names kinds and counts, never a pattern
    # every place had something to redact, and got a mark
    bob = next(a for a in b.agents if a["name"] == "bob")
    assert "[redacted:email:" in bob["skill_md"] and "[redacted:key:" in bob["skill_md"]
    assert "[redacted:email:" in bob["resume"]["summary"]
    assert bob["passport"]["auth"]["claim"] == {"token": "[redacted:field]"}
    turn = next(t for t in b.turns if t.get("tool_calls"))
    assert "[redacted:key:" in turn["system_prompt"] and turn["model_params"]["api_key"] == "[redacted:field]"
    assert "[redacted:pattern:" in json.dumps(turn["tool_calls"])
    first = next(r["envelope"] for r in b.envelopes if r["envelope"]["event_type"] == EV_TEXT)
    assert first["event_data"]["text"].startswith("[redacted:pattern:")


def test_the_same_secret_gets_the_same_mark_across_the_bundle_and_the_bundle_still_replays(planted, tmp_path):
    db, cid = planted
    out = tmp_path / "red.ag2b"
    text = bundle(db, cid, out, "--redact", r"keys,emails,ACME-\d+").decode()
    b = read_bundle(out)
    first = next(r["envelope"] for r in b.envelopes if r["envelope"]["event_type"] == EV_TEXT)
    mark = first["event_data"]["text"].split(":", 3)
    email_marks = set(re.findall(r"\[redacted:email:[0-9a-f]{8}\]", text))
    assert len(email_marks) == 1, email_marks  # one address, one mark: in the WAL, the turns, the identity
    assert mark[0] == "[redacted"
    # a second bundle draws a new key: the marks cannot be matched against another bundle's
    other = bundle(db, cid, tmp_path / "red2.ag2b", "--redact", "emails").decode()
    assert not email_marks & set(re.findall(r"\[redacted:email:[0-9a-f]{8}\]", other))

    async def go() -> str:
        hub = await open_bundle_hub(out)
        try:
            async with await fork(hub, cid, 1) as box:
                return compare(await replay(hub, box, timeout=60)).verdict
        finally:
            await hub.close()

    verdict = asyncio.run(go())
    total = len(b.envelopes)
    assert verdict == f"completed: {total} of {total} envelopes reproduced"


def test_redaction_rules_in_words():
    r = Redactor.parse("keys", {"OPENAI_API_KEY": "short", "AG2NET_TOKEN": "long-enough-secret"})
    out = r.value(
        {
            "a": "x sk-abcdefghijklmnopqrst y",
            "b": "Authorization: Bearer abcdefgh12345",
            "c": "long-enough-secret!",
        }
    )
    assert "sk-" not in json.dumps(out) and "abcdefgh12345" not in json.dumps(out)
    assert out["c"].startswith("[redacted:key:") and out["c"].endswith("]!")
    # numbers under token-ish names are usage, not secrets; text under secret names always goes
    kept = Redactor().value(
        {"max_tokens": 5, "tokens": {"input": 3}, "token_method": "provider", "password": "p"}
    )
    assert kept == {
        "max_tokens": 5,
        "tokens": {"input": 3},
        "token_method": "provider",
        "password": "[redacted:field]",
    }
    # a pattern is matched outside the marks only: a hex pattern does not eat the marks' own digits
    hexy = Redactor.parse(r"[0-9a-f]{8},emails")
    value = hexy.value("id 0123456789abcdef mail a@b.io")
    assert not hexy.leaks(value) and value.count("[redacted:") == 3  # two 8-digit runs, one address


def test_the_network_tools_the_digests_use_are_the_ones_a_replay_offers():
    from ag2net.bundle.collect import NETWORK_TOOLS
    from ag2net.cli.replay import NETWORK_TOOLS as REPLAYED

    assert NETWORK_TOOLS == REPLAYED

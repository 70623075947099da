"""The command line on a PostgreSQL URL: serve/wal take --db postgresql://… (or AG2NET_DATABASE_URL), and a
bad scheme, an unreachable server or a wrong password is one sentence with exit 2 — a real throwaway server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from ag2net import Hub, HubClient, Passport
from ag2net.store import open_store


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, result
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    return lines[0]


async def test_wal_reads_a_postgres_hub_by_url_and_from_the_environment(pg_server) -> None:
    url = await pg_server.fresh_url()
    hub = await Hub.open(open_store(url), ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        hc = HubClient.local(hub)
        ana = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="bo", kind="human"))
        channel = await ana.open(type="conversation", target="bo")
        await ana.send(channel.channel_id, "hello over postgres")
    finally:
        await hub.close()
    listing = run_cli("wal", "--db", url, "--json")
    assert listing.returncode == 0, listing.stderr
    channels = [json.loads(line) for line in listing.stdout.splitlines()]
    assert [c["channel_id"] for c in channels] == [channel.channel_id]
    by_env = run_cli("wal", "conversation", "--json", env={"AG2NET_DATABASE_URL": url})
    assert by_env.returncode == 0, by_env.stderr
    texts = [json.loads(line)["event_data"].get("text") for line in by_env.stdout.splitlines()]
    assert "hello over postgres" in texts


async def test_bad_database_urls_are_one_sentence(pg_server) -> None:
    url = await pg_server.fresh_url()
    bad_scheme = one_sentence(run_cli("wal", "--db", "mysql://u@127.0.0.1/db"))
    assert "mysql" in bad_scheme
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]
    unreachable = one_sentence(run_cli("wal", "--db", f"postgresql://u@127.0.0.1:{free}/db"))
    assert str(free) in unreachable
    wrong = url.replace(pg_server.password, "not-the-password")
    assert wrong != url
    refused = one_sentence(run_cli("wal", "--db", wrong))
    assert "not-the-password" not in refused and pg_server.password not in refused

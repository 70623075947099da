"""The ag2net command: bad input ends in one sentence and exit code 2, never a traceback."""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ag2net.cli import app

runner = CliRunner()


def run(*args: str):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def one_sentence(output: str) -> str:
    lines = [ln for ln in output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, output
    assert "Traceback" not in output
    assert lines[0].startswith("Error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["wal", "--db", "/nonexistent/x.db"], "does not exist"),
        (["wal", "--db", "{db}", "--limit", "0"], "--limit must be 1 or more"),
        (["serve", "--port", "70000"], "out of range"),
        (["serve", "--cache-mb", "0"], "--cache-mb must be more than 0"),
        (["tui", "--memory", "--cache-mb", "-1"], "--cache-mb must be more than 0"),
        (["demo", "--model", "gpt-4"], "must look like openai:MODEL_NAME"),
    ],
)
def test_bad_options_exit_2(tmp_path, args, needle):
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    args = [a.replace("{db}", str(db)) for a in args]
    code, output = run(*args)
    assert code == 2
    assert needle in one_sentence(output)


def test_wal_on_a_file_that_is_not_a_database(tmp_path):
    db = tmp_path / "garbage.db"
    db.write_bytes(b"this is not sqlite at all" * 100)
    code, output = run("wal", "--db", str(db))
    assert code == 2
    assert str(db) in one_sentence(output)


def test_wal_lists_channels_and_prints_a_channel(tmp_path):
    from ag2net import HubClient, Passport
    from ag2net.hub import Hub
    from ag2net.store import SqliteStore

    db = tmp_path / "w.db"

    async def fill() -> str:
        hub = await Hub.open(SqliteStore(db))
        hc = HubClient.local(hub)
        a = await hc.register_human(Passport(name="ana", kind="human"))
        await hc.register_human(Passport(name="ben", kind="human"))
        ch = await a.open(type="conversation", target="ben")
        await a.send(ch.channel_id, "hello from the cli test")
        await hub.close()
        return ch.channel_id

    cid = asyncio.run(fill())
    label = f"conversation·{cid[-4:]}"
    code, output = run("wal", "--db", str(db))
    assert code == 0 and label in output and "ana, ben" in output
    assert cid not in output  # the short label, not the hex id
    code, output = run("wal", "--db", str(db), cid[:12])
    assert code == 0 and "hello from the cli test" in output and "ag2.msg.text" in output
    code, output = run("wal", "--db", str(db), "zzzz")
    assert code == 2 and "'zzzz' matches no channel" in one_sentence(output)
    sqlite3.connect(db).close()


def test_help_explains_options():
    result = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "tui", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for option in ("--db", "--memory", "--as", "--demo", "--network", "--config", "--connect", "--token"):
        assert option in result.stdout


def test_default_database_folder_is_created(tmp_path, monkeypatch):
    from ag2net.cli import check_paths

    default = tmp_path / "data" / "ag2net" / "workbench.db"
    assert check_paths(None, False, default=default) == default
    assert default.parent.is_dir()
    code, output = run("tui", "--db", str(tmp_path / "missing" / "x.db"))
    assert code == 2 and "does not exist" in one_sentence(output)
    code, output = run("tui", "--db", str(tmp_path / "x.db"), "--memory")
    assert code == 2 and "cannot be used together" in one_sentence(output)
    code, output = run("tui", "--memory", "--network", "nocolon")
    assert code == 2 and "module:function" in one_sentence(output)
    code, output = run("tui", "--memory", "--network", "no_such_module_xyz:f")
    assert code == 2 and "cannot be imported" in one_sentence(output)
    code, output = run("tui", "--connect", "http://x")
    assert code == 2 and "ws://" in one_sentence(output)
    code, output = run("tui", "--memory", "--config", str(tmp_path / "nope.toml"))
    assert code == 2 and "nope.toml" in one_sentence(output)


def _tui_subprocess(tmp_path, *args: str, cwd=None) -> subprocess.CompletedProcess[str]:
    """``python -m ag2net.cli tui ...`` with per-test XDG folders (the log file goes next to the database)."""
    import os

    env = {
        **os.environ,
        "XDG_DATA_HOME": str(tmp_path / "data"),
        "XDG_CONFIG_HOME": str(tmp_path / "config"),
    }
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "tui", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
        check=False,
    )


def test_tui_as_a_name_an_agent_holds_is_one_sentence(tmp_path):
    from ag2net import Agent, HubClient, Passport, ScriptedModel
    from ag2net.hub import Hub
    from ag2net.store import SqliteStore

    db = tmp_path / "agents.db"

    async def fill() -> None:
        hub = await Hub.open(SqliteStore(db))
        hc = HubClient.local(hub)
        await hc.register(Agent("bot", ScriptedModel(lambda call: "hi")), Passport(name="bot"))
        await hub.close()

    asyncio.run(fill())
    done = _tui_subprocess(tmp_path, "--db", str(db), "--as", "bot")
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert "'bot'" in sentence and "--as" in sentence


def test_tui_connect_to_a_closed_port_is_one_sentence(tmp_path):
    import socket

    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = _tui_subprocess(tmp_path, "--connect", f"ws://127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    assert f"ws://127.0.0.1:{port}" in one_sentence(done.stdout + done.stderr)


def test_tui_connect_names_the_fix(tmp_path):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    done = _tui_subprocess(tmp_path, "--connect", f"ws://127.0.0.1:{port}")
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert "nothing is listening there" in sentence and "ag2net serve" in sentence
    done = _tui_subprocess(tmp_path, "--connect", "ws://127.0.0.1:99999")
    assert done.returncode == 2, done.stderr
    assert "give a URL like ws://127.0.0.1:8765" in one_sentence(done.stdout + done.stderr)


def test_tui_unknown_key_binding_id_is_one_sentence(tmp_path):
    config = tmp_path / "workbench.toml"
    config.write_text('[keys]\n"tail.folow" = "f"\n', encoding="utf-8")
    done = _tui_subprocess(tmp_path, "--memory", "--config", str(config))
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert "[keys] 'tail.folow'" in sentence and str(config) in sentence
    assert "did you mean 'tail.follow'?" in sentence
    config.write_text('[keys]\n"nothing.like.it" = "f"\n', encoding="utf-8")
    done = _tui_subprocess(tmp_path, "--memory", "--config", str(config))
    assert done.returncode == 2, done.stderr
    message = one_sentence(done.stdout + done.stderr)
    assert "ids start with app., " in message and " channels., " in message and " tail., " in message


@pytest.mark.parametrize("flavour", ["def", "async def"])
def test_tui_network_function_that_raises_is_one_sentence(tmp_path, flavour):
    (tmp_path / "badnet.py").write_text(
        f"{flavour} register(hub):\n    raise RuntimeError('boom in register\\nsecond line')\n",
        encoding="utf-8",
    )
    done = _tui_subprocess(tmp_path, "--memory", "--network", "badnet:register", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert "--network function badnet:register raised RuntimeError: boom in register second line" in sentence
    assert "without --network" in sentence


def test_serve_network_function_that_raises_is_one_sentence(tmp_path):
    (tmp_path / "badnet2.py").write_text("def register(hub):\n    return 1 / 0\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "serve", "--port", "0", "--network", "badnet2:register"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "badnet2:register raised ZeroDivisionError" in one_sentence(done.stdout + done.stderr)


@pytest.mark.parametrize("name", ["", "   "])
def test_tui_as_an_empty_name_is_one_sentence(tmp_path, name):
    done = _tui_subprocess(tmp_path, "--memory", "--as", name)
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert f"--as {name!r} is empty" in sentence and "--as ana" in sentence


def test_tui_human_name_from_the_settings_file_is_checked(tmp_path):
    config = tmp_path / "workbench.toml"
    config.write_text('human_name = ""\n', encoding="utf-8")
    done = _tui_subprocess(tmp_path, "--memory", "--config", str(config))
    assert done.returncode == 2, done.stderr
    sentence = one_sentence(done.stdout + done.stderr)
    assert "human_name ''" in sentence and str(config) in sentence and "--as NAME" in sentence

"""Issue 22 item 4: no crash, no silent hang. Every bad option, whatever part of the command line finds it (the
parser's type check, an unknown option, a demo that cannot start, a model endpoint that is not there), is one
sentence on stderr with exit code 2; ``--version`` exists and ``--help`` shows conventional metavars."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from ag2net.cli import app

runner = CliRunner()


def one_sentence(code: int, output: str) -> str:
    assert code == 2, output
    assert "Traceback" not in output and "╭" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), output
    return lines[0]


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


def command(*args: str, env: dict[str, str] | None = None, timeout: float = 30) -> tuple[int, str]:
    """``python -m ag2net.cli ARGS`` in a subprocess; stdout and stderr together."""
    done = subprocess.run(
        [sys.executable, "-m", "ag2net.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or dict(os.environ),
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["wal", "--db", "x.db", "--limit", "abc"], "--limit must be a whole number, got 'abc'"),
        (["serve", "--port", "abc"], "--port must be a whole number, got 'abc'; give one like --port 8765"),
        (["serve", "--port=abc"], "--port must be a whole number, got 'abc'"),
        (["serve", "--cache-mb", "lots"], "--cache-mb must be a number, got 'lots'"),
        (["replay", "--db", "x.db", "abcd", "--at", "abc"], "--at must be a whole number, got 'abc'"),
        (["tui", "--memory", "--cache-mb", "q"], "--cache-mb must be a number, got 'q'"),
        (["serve", "--tokn", "t"], "no such option --tokn (did you mean --token?)"),
        (["wal"], "Missing option '--db'"),
        (["nosuchcommand"], "No such command 'nosuchcommand'"),
        (["serve", "--host", "192.0.2.1"], "--host 192.0.2.1 is not loopback"),
        (["demo", "--base-url", "http://127.0.0.1:9/v1"], "--base-url names the endpoint of a real model"),
        (["demo", "--model", "openai:"], "must look like openai:MODEL_NAME"),
    ],
)
def test_a_bad_option_is_one_sentence(args, needle):
    assert needle in one_sentence(*run(*args))


def test_a_type_error_is_one_sentence_in_a_real_process():
    sentence = one_sentence(*command("serve", "--port", "abc"))
    assert "--port must be a whole number" in sentence


def test_version():
    code, output = run("--version")
    assert code == 0 and output.strip() == f"ag2net {version('ag2net')}"


@pytest.mark.parametrize("cmd", ["serve", "wal", "tui", "replay"])
def test_help_shows_conventional_metavars(cmd):
    code, output = command(cmd, "--help", env={**os.environ, "COLUMNS": "200"})
    assert code == 0, output
    assert "<bool>" not in output and "<str>" not in output and "<int>" not in output
    assert "TEXT" in output


def without_model_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}


def test_demo_on_openai_without_a_key_fails_fast():
    code, output = command("demo", "--model", "openai:gpt-4o-mini", env=without_model_settings())
    sentence = one_sentence(code, output)
    assert "OPENAI_API_KEY is not set" in sentence and "--model openai:gpt-4o-mini" in sentence


def test_demo_on_an_endpoint_where_nothing_listens_fails_fast():
    pytest.importorskip("openai")
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens on it
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    code, output = command(
        "demo", "--model", "openai:llama3", "--base-url", url, env=without_model_settings()
    )
    sentence = one_sentence(code, output)
    assert f"cannot reach model endpoint {url}" in sentence and "is the server running?" in sentence


def test_demo_without_the_openai_extra_is_only_the_sentence(tmp_path):
    # an 'openai' that cannot be imported, first on the path: what a Python without the extra sees
    (tmp_path / "openai").mkdir()
    (tmp_path / "openai" / "__init__.py").write_text("raise ImportError(\"No module named 'openai'\")\n")
    env = {**without_model_settings()}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    code, output = command("demo", "--model", "openai:llama3", env=env)
    sentence = one_sentence(code, output)
    assert "pip install 'ag2net[openai]'" in sentence
    assert "Task exception" not in output


def test_workbench_seated_as_a_demo_agent_with_demo_is_one_sentence(tmp_path):
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    code, output = command("tui", "--memory", "--as", "planner", "--demo", env=env, timeout=60)
    sentence = one_sentence(code, output)
    assert "'planner'" in sentence and "demo" in sentence and "--as" in sentence


def test_web_seated_as_a_demo_agent_with_demo_is_one_sentence(tmp_path):
    pytest.importorskip("textual_serve")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    code, output = command("web", "--memory", "--port", "0", "--as", "coder", "--demo", env=env, timeout=60)
    assert "'coder'" in one_sentence(code, output)


def test_a_demo_that_cannot_start_is_a_network_error_for_the_workbench():
    """The workbench's demo starter turns any failure into the NetworkError the app shows as a notification,
    so starting the demo (from --demo or the palette) can never end the workbench with a traceback."""
    from ag2net import HubClient, NetworkError, Passport
    from ag2net.hub import Hub
    from tui.launch import demo_starter

    async def scenario() -> str:
        hub = await Hub.open(None)
        hc = HubClient.local(hub)
        try:
            await hc.register_human(Passport(name="critic", kind="human"))  # a demo agent's name
            await hc.register_human(Passport(name="ana", kind="human"))
            start = demo_starter(hub, "ana", set(), [])
            with pytest.raises(NetworkError) as caught:
                await start()
            return str(caught.value)
        finally:
            await hc.close()
            await hub.close()

    message = asyncio.run(scenario())
    assert "'critic'" in message and "pick another name for the human" in message


def test_demo_on_an_endpoint_that_refuses_the_key_fails_fast():
    pytest.importorskip("openai")
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"error": {"message": "Incorrect API key provided"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        env = {**without_model_settings(), "OPENAI_API_KEY": "sk-wrong"}
        code, output = command("demo", "--model", "openai:gpt-4o-mini", "--base-url", url, env=env)
    finally:
        server.shutdown()
        server.server_close()
    sentence = one_sentence(code, output)
    assert "refused the API key (HTTP 401: Incorrect API key provided)" in sentence


def test_demo_stops_at_the_first_model_failure_in_one_sentence():
    """An endpoint that lists its models (the check passes) but fails every completion: the demo stops at
    the first failure, in one sentence naming it, instead of waiting out its step timeouts in silence."""
    pytest.importorskip("openai")
    import http.server
    import threading

    class Broken(http.server.BaseHTTPRequestHandler):
        def answer(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.answer(200, b'{"object": "list", "data": []}')

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self.answer(400, b'{"error": {"message": "this model is not loaded"}}')

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Broken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        started = time.monotonic()
        code, output = command(
            "demo", "--model", "openai:llama3", "--base-url", url, env=without_model_settings(), timeout=60
        )
        took = time.monotonic() - started
    finally:
        server.shutdown()
        server.server_close()
    lines = [line for line in output.splitlines() if line.strip()]
    assert code == 2 and lines[-1].startswith("Error: "), output
    assert "Traceback" not in output and "Task exception" not in output
    assert "answered HTTP 400" in lines[-1] and "this model is not loaded" in lines[-1], (lines[-1], took)

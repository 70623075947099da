"""``ag2net web``: the workbench in a real browser (Debian's Chromium driven by Playwright), the page's token
gate over real HTTP, and every bad input as a real subprocess (one sentence, exit code 2).

The browser test reads each tab's screen from xterm.js's buffer: the page draws the terminal on a canvas,
so the text is not in the DOM. An init script (it changes nothing the server sends) notes the page's
terminal object when textual-serve's page script builds it (its ``webglAddon`` field is assigned first).
``AG2NET_SCREENSHOTS=1`` saves the second tab as ``screenshots/browser.png`` for the README.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ag2net import HubClient
from ag2net.envelope import EV_TEXT

ROOT = Path(__file__).parents[1]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

needs_textual_serve = pytest.mark.skipif(
    __import__("importlib.util").util.find_spec("textual_serve") is None,
    reason="textual-serve (the web extra) is not installed: pip install -e '.[web]'",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_web(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ag2net.cli", "web", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=ROOT,
    )


def one_sentence(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert "Traceback" not in result.stderr
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An environment whose per-user folders (settings, identity secrets, logs) are in ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AG2NET_")}
    env["XDG_DATA_HOME"] = str(tmp_path / "data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "config")
    return env


# ---------------------------------------------------------------------------------------------- bad input


@needs_textual_serve
def test_port_taken_is_one_sentence(home: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_sentence(run_web("--memory", "--port", str(port), env=home))
    assert f"--port {port} is taken" in line


@needs_textual_serve
def test_bad_host_is_one_sentence(home: dict[str, str]) -> None:
    line = one_sentence(run_web("--memory", "--host", "not a host", env=home))
    assert "--host 'not a host' is not a host name or address" in line
    # a documentation address (RFC 5737) that is not this machine's: the bind fails, nothing is sent
    line = one_sentence(run_web("--memory", "--host", "203.0.113.9", "--token", "t0k", env=home))
    assert "--host 203.0.113.9 is not an address of this machine" in line


@needs_textual_serve
def test_non_loopback_host_needs_a_token(home: dict[str, str]) -> None:
    line = one_sentence(run_web("--memory", "--host", "0.0.0.0", "--port", str(free_port()), env=home))
    assert "--host 0.0.0.0 is not loopback" in line and "--token" in line


@needs_textual_serve
def test_unreachable_connect_is_one_sentence(home: dict[str, str]) -> None:
    port = free_port()
    line = one_sentence(run_web("--connect", f"ws://127.0.0.1:{port}", "--port", str(free_port()), env=home))
    assert f"--connect ws://127.0.0.1:{port}: cannot reach a hub" in line
    line = one_sentence(run_web("--connect", "ws://127.0.0.1:1", "--memory", env=home))
    assert "--db, --memory, --demo and --network do not apply" in line


def test_without_the_web_extra_the_sentence_names_it(home: dict[str, str]) -> None:
    code = (
        "import sys; sys.modules['textual_serve'] = None; sys.argv = ['ag2net', 'web', '--memory']; "
        "from ag2net.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=home, cwd=ROOT
    )
    line = one_sentence(result)
    assert "install the web extra: pip install 'ag2net[web]'" in line


def test_the_web_command_loads_no_textual_until_a_tab_runs_a_workbench(home: dict[str, str]) -> None:
    """The command runs in a process of its own beside the tabs: its options are checked without textual."""
    code = (
        "import json, sys\n"
        "from typer.testing import CliRunner\n"
        "from ag2net.cli import app\n"
        "result = CliRunner().invoke(app, ['web', '--memory', '--cache-mb', '0'])\n"
        "assert result.exit_code == 2 and '--cache-mb must be more than 0' in result.output, result.output\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'aiohttp'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=home, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------- served


@dataclass
class Served:
    """A running ``ag2net web`` subprocess and what it printed."""

    process: subprocess.Popen[str]
    url: str
    hub_url: str
    lines: list[str] = field(default_factory=list)

    def stop(self, timeout: float = 30) -> int:
        """Ctrl-C, as a terminal sends it; the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(
                f"ag2net web did not stop within {timeout} s of SIGINT: {self.lines}"
            ) from None


@contextlib.contextmanager
def served(*args: str, env: dict[str, str]) -> Iterator[Served]:
    process = subprocess.Popen(
        [sys.executable, "-m", "ag2net.cli", "web", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
        start_new_session=True,  # our SIGINT only, as a terminal's Ctrl-C reaches the foreground command
    )
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if "on the hub at" in line:
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(60), f"ag2net web did not start: {lines}"
        text = "\n".join(lines)
        url = re.search(r"open (http://\S+) in a browser", text)
        hub = re.search(r"on the hub at (ws://\S+)", text)
        assert url and hub, text
        yield Served(process, url.group(1), hub.group(1), lines)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def tab_processes(hub_url: str) -> list[int]:
    """Pids of the tabs' workbench processes (``tui.cli --connect <hub_url>``)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"tui.cli" in argv and hub_url.encode() in argv:
            pids.append(int(entry.name))
    return pids


def http(url: str, *, data: dict[str, str] | None = None, cookie: str | None = None) -> tuple[int, dict, str]:
    """One request, redirects not followed: (status, headers, body)."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            return None

    request = urllib.request.Request(url, data=urllib.parse.urlencode(data).encode() if data else None)
    if cookie:
        request.add_header("Cookie", cookie)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def handshake(url: str, *, origin: str | None = None, cookie: str | None = None) -> int:
    """Status of a WebSocket upgrade to ``url`` (the connection is closed right after)."""
    from websockets.asyncio.client import connect
    from websockets.exceptions import InvalidStatus

    async def go() -> int:
        headers = {"Cookie": cookie} if cookie else None
        try:
            async with connect(url, origin=origin, additional_headers=headers, open_timeout=30):  # type: ignore[arg-type]
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    return asyncio.run(go())


@needs_textual_serve
def test_the_page_asks_for_the_token_before_any_workbench_starts(home: dict[str, str]) -> None:
    with served("--memory", "--port", str(free_port()), "--token", "s3cret-token", env=home) as web:
        assert "s3cret-token" not in "\n".join(web.lines)
        ws_url = web.url.replace("http://", "ws://") + "ws"
        status, _, body = http(web.url)
        assert status == 200 and 'name="token"' in body and "data-session-websocket-url" not in body
        assert handshake(ws_url, origin=web.url.rstrip("/")) == 401
        status, headers, body = http(web.url + "login", data={"token": "wrong"})
        assert status == 401 and "not the token" in body and "Set-Cookie" not in headers
        status, headers, _ = http(web.url + "login", data={"token": "s3cret-token"})
        assert status == 303 and headers["Location"] == "/"
        cookie = headers["Set-Cookie"].split(";")[0]
        assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        assert "s3cret-token" not in cookie
        status, _, body = http(web.url, cookie=cookie)
        assert status == 200 and "data-session-websocket-url" in body
        # a page of another site cannot open a workbench, even in a browser holding the cookie
        assert handshake(ws_url, origin="http://evil.example", cookie=cookie) == 403
        # nor can a page reached under another name (DNS rebinding): loopback names only
        port = urllib.parse.urlsplit(web.url).port
        request = urllib.request.Request(web.url, headers={"Host": f"evil.example:{port}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 421
        assert tab_processes(web.hub_url) == []
        assert web.stop() == 0


def test_tabs_attach_to_a_running_hub_with_its_token(home: dict[str, str]) -> None:
    """``--connect`` and ``--token``: a tab's workbench reaches a token hub run by ``ag2net serve`` (the token
    goes to it through its environment), seats its human there, and ends when its page connection closes."""
    hub_port = free_port()
    env = {**home, "AG2NET_TOKEN": "hub-t0ken"}
    hub = subprocess.Popen(
        [sys.executable, "-m", "ag2net.cli", "serve", "--port", str(hub_port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**env, "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )
    hub_url = f"ws://127.0.0.1:{hub_port}"
    try:
        assert hub.stdout is not None and "listening" in hub.stdout.readline()
        with served("--connect", hub_url, "--as", "cleo", "--port", str(free_port()), env=env) as web:
            assert web.hub_url == hub_url
            _, headers, _ = http(web.url + "login", data={"token": "hub-t0ken"})
            cookie = headers["Set-Cookie"].split(";")[0]

            async def seated() -> bool:
                from websockets.asyncio.client import connect

                ws_url = web.url.replace("http://", "ws://") + "ws?width=100&height=30"
                async with connect(ws_url, origin=web.url.rstrip("/"), additional_headers={"Cookie": cookie}):  # type: ignore[arg-type]
                    client = HubClient.connect(hub_url, token="hub-t0ken")
                    try:
                        await client.open()
                        for _ in range(300):
                            if await client.find_agent_id_remote("cleo"):
                                return len(tab_processes(hub_url)) == 1
                            await asyncio.sleep(0.1)
                        return False
                    finally:
                        await client.close()

            assert asyncio.run(seated()), web.lines
            until(
                lambda: not tab_processes(hub_url), 15, "the tab's workbench to end with its page connection"
            )

            # the hub goes away: a new tab's workbench cannot start, and the tab shows its one sentence
            hub.send_signal(signal.SIGINT)
            assert hub.wait(30) == 0

            async def tab_screen() -> str:
                from websockets.asyncio.client import connect

                ws_url = web.url.replace("http://", "ws://") + "ws?width=100&height=30"
                received = b""
                async with connect(
                    ws_url, origin=web.url.rstrip("/"), additional_headers={"Cookie": cookie}
                ) as ws:  # type: ignore[arg-type]
                    async for message in ws:  # until the server closes it
                        if isinstance(message, bytes):
                            received += message
                return received.decode("utf-8", "replace")

            screen = asyncio.run(asyncio.wait_for(tab_screen(), 60))
            assert f"Error: --connect {hub_url}: cannot reach a hub" in screen, screen
            assert web.stop() == 0
    finally:
        if hub.poll() is None:
            hub.send_signal(signal.SIGINT)
            hub.wait(30)


# ---------------------------------------------------------------------------------------------- browser

NOTE_TERMINAL = """
Object.defineProperty(Object.prototype, "webglAddon", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "webglAddon", {value, writable: true, configurable: true, enumerable: true});
    window.__ag2netTab = this;
  },
});
"""

SCREEN_TEXT = """() => {
  const tab = window.__ag2netTab;
  if (!tab || !tab.terminal) return "";
  const buffer = tab.terminal.buffer.active;
  const lines = [];
  for (let i = 0; i < buffer.length; i++) lines.push(buffer.getLine(i).translateToString(true));
  return lines.join("\\n");
}"""


def chromium_or_skip() -> str:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(
            f"Chromium is not installed ({CHROMIUM}): .ci/run installs it with apt-get install chromium"
        )
    return CHROMIUM


def until(predicate, timeout: float, what: str, page=None):  # type: ignore[no-untyped-def]
    """Wait for ``predicate`` to be true; the failure shows ``page``'s screen."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            screen = f"; the tab shows:\n{page.evaluate(SCREEN_TEXT)}" if page is not None else ""
            raise AssertionError(f"timed out after {timeout} s waiting for {what}{screen}")
        time.sleep(0.2)


def footer(page) -> str:  # type: ignore[no-untyped-def]
    return page.evaluate(SCREEN_TEXT).rstrip("\n").split("\n")[-1]


def press(page, *keys: str, footer_has: str = "", footer_lacks: str = "", screen_has: str = "") -> None:  # type: ignore[no-untyped-def]
    """Press ``keys`` in the tab and wait until the workbench shows their effect."""
    for key in keys:
        page.keyboard.press(key)
    if footer_has:
        until(lambda: footer_has in footer(page), 20, f"{footer_has!r} in the footer after {keys}", page)
    if footer_lacks:
        until(
            lambda: footer_lacks not in footer(page),
            20,
            f"no {footer_lacks!r} in the footer after {keys}",
            page,
        )
    if screen_has:
        until(
            lambda: re.search(screen_has, page.evaluate(SCREEN_TEXT)),
            20,
            f"{screen_has!r} after {keys}",
            page,
        )


def showing(page, text: str) -> str:  # type: ignore[no-untyped-def]
    """The tab's screen when it shows ``text``, else ""."""
    screen = page.evaluate(SCREEN_TEXT)
    return screen if text in screen else ""


async def question_for(hub_url: str, human: str) -> tuple[str | None, list[str]]:
    """Through the library, on the served hub: the demo's consulting channel with ``human`` (the planner's
    question) and the texts ``human`` has in its WAL."""
    client = HubClient.connect(hub_url)
    try:
        await client.open()
        human_id = await client.find_agent_id_remote(human)
        if human_id is None:
            return None, []
        channels = await client.list_channels(agent_id=human_id, include_terminal=True, limit=None)
        for channel in channels:
            if channel.manifest.type == "consulting":
                wal = await client.read_wal(channel.channel_id)
                texts = [
                    str(e.event_data.get("text"))
                    for e in wal
                    if e.event_type == EV_TEXT and e.sender_id == human_id
                ]
                return channel.channel_id, texts
        return None, []
    finally:
        await client.close()


def ask_hub(hub_url: str, human: str) -> tuple[str | None, list[str]]:
    """``question_for`` on a thread of its own (Playwright's sync API keeps an event loop on this one)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, question_for(hub_url, human)).result(timeout=30)


@needs_textual_serve
def test_two_browser_tabs_share_one_hub(home: dict[str, str]) -> None:
    executable = chromium_or_skip()
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    answer = "web: sync first"  # short enough for the tail's preview column
    with sync_api.sync_playwright() as playwright:
        try:  # the browser starts while the server does
            browser = playwright.chromium.launch(executable_path=executable, headless=True)
        except Exception as exc:  # a Chromium that cannot start here is a machine without one
            pytest.skip(f"Chromium at {executable} cannot be started: {str(exc).splitlines()[0]}")
        with served("--memory", "--demo", "--as", "ana", "--port", str(free_port()), env=home) as web:
            context = browser.new_context(viewport={"width": 1600, "height": 900})
            # nothing leaves this machine: only the served page's own requests are answered
            context.route(lambda url: not url.startswith(web.url), lambda route: route.abort())
            context.add_init_script(NOTE_TERMINAL)
            loaded: dict[str, float] = {}

            def open_tab(query: str = ""):  # type: ignore[no-untyped-def]
                page = context.new_page()
                page.goto(web.url + query)
                return page

            def channels_pane(page, name: str) -> None:  # type: ignore[no-untyped-def]
                until(lambda: showing(page, "Channels"), 45, f"the channels pane in the {name} tab", page)
                loaded.setdefault(name, time.monotonic() - started)

            started = time.monotonic()
            first = open_tab()
            # a second tab at once, seated as another human (one identity is bound to one connection at a time)
            second = open_tab("?as=ben")
            channels_pane(first, "first")
            screen = until(lambda: showing(first, "consulting"), 30, "a consulting channel", first)
            assert "1 Channels" in screen and "2 WAL" in screen

            # the first tab: filter the channels to the demo's question for ana, select it, answer in the chat
            question = until(lambda: ask_hub(web.hub_url, "ana")[0], 20, "the planner's question")
            first.focus(".xterm-helper-textarea")
            # one key at a time, each waited for: a workbench on two shared cores can take seconds to move focus
            press(first, "1", footer_has="o Sort")  # the channels pane
            press(first, "Control+f", footer_lacks="o Sort")  # its filter box
            first.keyboard.type(question[-6:])  # the id's last digits, as a person would type them
            until(lambda: showing(first, "filtered by"), 20, "the filtered channel list", first)
            press(first, "Enter", footer_has="o Sort")  # back to the table: 'all channels', then the question
            press(first, "ArrowDown", "Enter", screen_has=r"consulting·\w+ ›")
            press(first, "i", footer_lacks="i Chat")
            first.keyboard.type(answer)
            channels_pane(second, "second")  # up before the answer is sent: it must arrive live
            assert len(tab_processes(web.hub_url)) == 2
            print(
                f"page load to the channels pane: first tab {loaded['first']:.1f} s; the second, opened with it, "
                f"was up when looked at after {loaded['second']:.1f} s"
            )
            first.keyboard.press("Enter")

            until(
                lambda: answer in ask_hub(web.hub_url, "ana")[1],
                20,
                "the answer in the consulting channel's WAL",
                first,
            )
            # the second tab's tail (all channels, following) shows it
            until(
                lambda: answer in second.evaluate(SCREEN_TEXT),
                20,
                "the answer in the second tab's tail",
                second,
            )
            if os.environ.get("AG2NET_SCREENSHOTS") == "1":
                time.sleep(1)
                first.screenshot(path=str(ROOT / "screenshots" / "browser.png"))
            assert web.stop() == 0
            assert "stopped" in web.lines[-1], web.lines
            until(lambda: not tab_processes(web.hub_url), 5, "the tabs' workbenches to end")
        browser.close()

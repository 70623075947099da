"""The web side of ``ag2net web``: textual-serve's server, one workbench process per browser tab.

textual-serve (the ``web`` extra) runs a shell command for every browser tab that opens its WebSocket and
relays the terminal between that process and xterm.js in the page. :class:`WorkbenchServer` builds on its
``Server`` and adds what a workbench on a network needs and textual-serve does not have:

* a token gate: when the command was given a token, the page asks for it (a form), and only a browser
  that presented it gets a session cookie (HttpOnly, SameSite=Strict); without that cookie the
  WebSocket is refused with 401 before any process is started;
* an Origin check on the WebSocket (a page from another site cannot start a workbench in your browser's
  name) and, on loopback, a Host check (a DNS-rebinding page cannot either);
* its own page, without the webfont textual-serve's template loads from the internet (the font ships in
  textual-serve's static folder and is served from there);
* ``/?as=NAME``: a tab seated as another human (the hub binds an identity to one connection at a time, so
  a second tab under the same name takes it over and the first can watch but no longer post);
* bookkeeping of the tab processes, so stopping the command ends every one of them (asked to quit first,
  killed when they do not within a few seconds).

Imported only by ``tui.web`` once it knows textual-serve is installed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import os
import secrets
import signal
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import quote, urlsplit

from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

from ag2net.errors import NetworkError
from ag2net.identity import check_agent_name

COOKIE = "ag2net_web"
"""The session cookie a browser gets for presenting the token."""

QUIT_GRACE = 5.0
"""Seconds a tab's workbench has to quit when asked before it is killed."""

LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

PAGE = """<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>{title}</title>
    <link rel="stylesheet" href="/static/css/xterm.css" />
    <script src="/static/js/textual.js"></script>
    <style>
      @font-face {{
        font-family: "Roboto Mono";
        src: url("/static/fonts/RobotoMono-VariableFont_wght.ttf") format("truetype");
        font-weight: 100 700;
      }}
      body {{ background: #0c181f; margin: 0; }}
      .dialog-container {{
        position: absolute; width: 100vw; height: 100vh; display: flex;
        align-items: center; justify-content: center; z-index: 10;
      }}
      .intro {{
        width: 640px; height: 200px; font-size: 16px; z-index: 20;
        font-family: "Roboto Mono", monospace; text-align: center;
        color: rgba(255, 255, 255, 0.95); background-color: #12232d;
        display: flex; flex-direction: column; align-items: center; justify-content: center;
      }}
      body.-first-byte .intro-dialog {{ display: none; }}
      body .textual-terminal {{ opacity: 0; height: 100vh; }}
      body.-first-byte .textual-terminal {{ opacity: 1; }}
      .closed-dialog {{ display: none; align-items: flex-end; height: auto; bottom: 0; }}
      .closed-dialog .intro {{ height: 120px; margin-bottom: 32px; }}
      body.-closed .closed-dialog {{ display: flex; }}
      button {{
        padding: 12px 28px; margin: 16px; background-color: #5e0ba7; border: none;
        color: rgba(255, 255, 255, 0.95); font-family: "Roboto Mono", monospace; cursor: pointer;
      }}
    </style>
  </head>
  <body>
    <div class="dialog-container intro-dialog"><div class="intro">{title}<br />starting the workbench…</div></div>
    <div class="dialog-container closed-dialog">
      <div class="intro">
        <div class="message">The workbench in this tab has ended.</div>
        <button type="button" onclick="window.location.reload()">Start another</button>
      </div>
    </div>
    <div id="terminal" class="textual-terminal" data-session-websocket-url="{websocket_url}"
         data-ws-path="{websocket_path}" data-font-size="{font_size}"></div>
    <script>
      // the page's own scheme and host: right behind a TLS proxy too (wss: on an https: page)
      const terminal = document.getElementById("terminal");
      terminal.dataset.sessionWebsocketUrl =
        (location.protocol === "https:" ? "wss://" : "ws://") + location.host + terminal.dataset.wsPath;
      // keys go to the workbench from the start: the terminal's input has the focus once it exists
      // (textual.js makes it on load), without a click first
      window.addEventListener("load", () => {{
        const focusTerminal = (tries) => {{
          const input = terminal.querySelector(".xterm-helper-textarea");
          if (input) input.focus();
          else if (tries > 0) setTimeout(() => focusTerminal(tries - 1), 50);
        }};
        focusTerminal(100);
      }});
    </script>
  </body>
</html>
"""

LOGIN_PAGE = """<!DOCTYPE html>
<html>
  <head>
    <meta charset="utf-8" />
    <title>{title}: token</title>
    <style>
      body {{
        background: #0c181f; color: rgba(255, 255, 255, 0.95); font-family: monospace;
        display: flex; align-items: center; justify-content: center; height: 100vh; margin: 0;
      }}
      form {{ background: #12232d; padding: 32px; width: 560px; }}
      input {{ width: 100%; padding: 8px; margin: 12px 0; box-sizing: border-box; }}
      .problem {{ color: #ff8a80; }}
    </style>
  </head>
  <body>
    <form method="post" action="/login">
      <div>{title}</div>
      <p>This workbench asks for the hub's token (the <code>--token</code> or <code>AG2NET_TOKEN</code> it
      was started with).</p>
      <p class="problem">{problem}</p>
      <label for="token">token</label>
      <input id="token" name="token" type="password" autocomplete="current-password" autofocus />
      <button type="submit">open the workbench</button>
    </form>
  </body>
</html>
"""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot seat a human (``ag2net.identity.check_agent_name``), or None."""
    try:
        check_agent_name(name)
    except (NetworkError, ValueError) as exc:
        return str(exc)
    return None


class KeptTail:
    """A process's stderr stream that keeps its last ``limit`` bytes as they are read."""

    def __init__(self, stream: asyncio.StreamReader, limit: int = 8192) -> None:
        self.stream = stream
        self.limit = limit
        self.tail = b""

    async def read(self, n: int = -1) -> bytes:
        data = await self.stream.read(n)
        self.tail = (self.tail + data)[-self.limit :]
        return data


class TabProcess(AppService):
    """One browser tab's workbench process, in a session of its own (a Ctrl-C at the terminal that runs
    ``ag2net web`` reaches the command, which then stops the tabs in order), with the environment the
    workbench needs and registered with the server while it runs."""

    def __init__(self, command: str, *, server: WorkbenchServer, **kwargs: Any) -> None:
        super().__init__(command, **kwargs)
        self.server = server

    def _build_environment(self, width: int = 80, height: int = 24) -> dict[str, str]:
        environment = super()._build_environment(width, height)
        for name in self.server.unset_env:
            environment.pop(name, None)
        environment.update(self.server.env)
        return environment

    async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
        environment = self._build_environment(width=width, height=height)
        self._process = process = await asyncio.create_subprocess_shell(
            self.command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=environment,
            start_new_session=True,
        )
        assert process.stdin is not None and process.stderr is not None
        self._stdin = process.stdin
        process.stderr = KeptTail(process.stderr)  # type: ignore[assignment]  (read by AppService.run)
        self.server.tabs.add(self)
        return process

    async def run(self) -> None:
        try:
            await super().run()
            await self.show_failure()
        finally:
            # the workbench ended (quit, or failed to start): the page says so instead of waiting forever
            self.server.tabs.discard(self)
            with contextlib.suppress(Exception):
                await self.remote_close()

    async def show_failure(self) -> None:
        """A workbench that ended with an error (``ag2net tui``'s one sentence on stderr: a hub that cannot
        be reached, a name that belongs to an agent) writes that sentence into the tab's terminal."""
        process = self._process
        if process is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), QUIT_GRACE)
        stderr = process.stderr
        if process.returncode in (0, None) or not isinstance(stderr, KeptTail):
            return
        lines = [line.strip() for line in stderr.tail.decode("utf-8", "replace").splitlines() if line.strip()]
        if not lines:
            return
        sentence = next((line for line in reversed(lines) if line.startswith("Error: ")), lines[-1])
        with contextlib.suppress(Exception):
            await self.remote_write_bytes(f"\r\n  {sentence}\r\n".encode())

    async def stop(self) -> None:
        """Ask the workbench to quit; kill it when it has not within ``QUIT_GRACE`` seconds."""
        try:
            await asyncio.wait_for(super().stop(), QUIT_GRACE)
        except (TimeoutError, ConnectionError, RuntimeError):
            pass
        finally:
            self.kill()
            self._task = None
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(process.wait(), QUIT_GRACE)

    def kill(self) -> None:
        """Kill the tab's process group if it is still running."""
        process = self._process
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)


class WorkbenchServer(Server):
    """textual-serve's server with a token gate, Origin/Host checks and tracked tab processes."""

    def __init__(
        self,
        command: Callable[[str | None], str],
        *,
        title: str,
        token: str | None,
        loopback: bool,
        env: Mapping[str, str] | None = None,
        unset_env: Iterable[str] = (),
        echo: Any = print,
    ) -> None:
        super().__init__(command(None), title=title)
        self.command_for = command
        self.token = token
        self.loopback = loopback
        self.env = dict(env or {})
        self.unset_env = tuple(unset_env)
        self.echo = echo
        self.sessions: set[str] = set()
        self.tabs: set[TabProcess] = set()
        self.sockets: set[web.WebSocketResponse] = set()

    # ------------------------------------------------------------------ the aiohttp application

    def make_app(self) -> web.Application:
        app = web.Application()
        app.add_routes(
            [
                web.get("/", self.handle_index, name="index"),
                web.post("/login", self.handle_login, name="login"),
                web.get("/ws", self.handle_websocket, name="websocket"),
                web.get("/ws/as/{name}", self.handle_websocket, name="websocket_as"),
                web.get("/download/{key}", self.handle_download_checked, name="download"),
                web.static("/static", self.statics_path, name="static"),
            ]
        )
        app.on_shutdown.append(self.on_shutdown)
        return app

    async def on_shutdown(self, app: web.Application) -> None:
        """Close every tab's page connection and stop every tab's workbench."""
        for socket in list(self.sockets):
            with contextlib.suppress(Exception):
                await socket.close(message=b"ag2net web is stopping")
        await asyncio.gather(*(tab.stop() for tab in list(self.tabs)), return_exceptions=True)
        for tab in list(self.tabs):
            tab.kill()

    # ------------------------------------------------------------------ checks

    def signed_in(self, request: web.Request) -> bool:
        if self.token is None:
            return True
        cookie = request.cookies.get(COOKIE, "")
        return any(hmac.compare_digest(cookie, session) for session in self.sessions)

    def wrong_host(self, request: web.Request) -> web.Response | None:
        """On loopback, answer only requests addressed to a loopback name (DNS rebinding)."""
        if not self.loopback:
            return None
        name = (urlsplit(f"//{request.host}").hostname or "").lower()
        if name in LOOPBACK_NAMES:
            return None
        return web.Response(
            status=421, text=f"this workbench answers on 127.0.0.1 or localhost only, not {request.host!r}\n"
        )

    def foreign_origin(self, request: web.Request) -> web.Response | None:
        """A WebSocket opened by a page of another origin (cross-site WebSocket hijacking)."""
        origin = request.headers.get("Origin")
        if origin is None or urlsplit(origin).netloc.lower() == request.host.lower():
            return None
        return web.Response(status=403, text=f"a page from {origin} may not open this workbench\n")

    # ------------------------------------------------------------------ handlers

    async def handle_index(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        if (refused := self.wrong_host(request)) is not None:
            return refused
        if not self.signed_in(request):
            return self.login_page()
        name = request.query.get("as")
        if name is not None and (problem := name_problem(name)):
            return web.Response(
                status=400, text=f"?as={name!r} cannot be used: {problem}; choose another name\n"
            )
        scheme = "wss" if request.secure else "ws"
        path = "/ws" + (f"/as/{quote(name, safe='')}" if name else "")
        font_size = min(max(to_int(request.query.get("fontsize", "16"), 16), 6), 48)
        page = PAGE.format(
            title=html.escape(self.title),
            websocket_url=html.escape(f"{scheme}://{request.host}{path}", quote=True),
            websocket_path=html.escape(path, quote=True),
            font_size=font_size,
        )
        return web.Response(
            text=page,
            content_type="text/html",
            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"},
        )

    def login_page(self, problem: str = "", status: int = 200) -> web.Response:
        page = LOGIN_PAGE.format(title=html.escape(self.title), problem=html.escape(problem))
        return web.Response(
            text=page, content_type="text/html", status=status, headers={"Cache-Control": "no-store"}
        )

    async def handle_login(self, request: web.Request) -> web.StreamResponse:
        if (refused := self.wrong_host(request)) is not None:
            return refused
        if self.token is None:
            return web.Response(status=303, headers={"Location": "/"})
        form = await request.post()
        given = form.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.token.encode()):
            await asyncio.sleep(0.5)  # slows guessing down
            return self.login_page("That is not the token this workbench was started with; try again.", 401)
        session = secrets.token_urlsafe(32)
        self.sessions.add(session)
        response = web.Response(status=303, headers={"Location": "/"})
        response.set_cookie(
            COOKIE, session, httponly=True, samesite="Strict", secure=request.secure, path="/"
        )
        return response

    async def handle_download_checked(self, request: web.Request) -> web.StreamResponse:
        if (refused := self.wrong_host(request)) is not None:
            return refused
        if not self.signed_in(request):
            return web.Response(status=401, text="present the token first: open / in this browser\n")
        return await self.handle_download(request)

    async def handle_websocket(self, request: web.Request) -> web.StreamResponse:  # type: ignore[override]
        """textual-serve's handler, behind the checks, with :class:`TabProcess` for the workbench."""
        refused = self.wrong_host(request) or self.foreign_origin(request)
        if refused is not None:
            return refused
        if not self.signed_in(request):
            return web.Response(status=401, text="present the token first: open / in this browser\n")
        name = request.match_info.get("name")
        if name is not None and (problem := name_problem(name)):
            return web.Response(status=400, text=f"{name!r} cannot be used: {problem}\n")
        websocket = web.WebSocketResponse(heartbeat=15)
        width = min(max(to_int(request.query.get("width", "80"), 80), 20), 1000)
        height = min(max(to_int(request.query.get("height", "24"), 24), 5), 500)
        tab: TabProcess | None = None
        try:
            await websocket.prepare(request)
            self.sockets.add(websocket)
            tab = TabProcess(
                self.command_for(name),
                server=self,
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=websocket.close,
                download_manager=self.download_manager,
                debug=self.debug,
            )
            await tab.start(width, height)
            self.echo(f"a tab opened a workbench ({len(self.tabs)} open)")
            await self._process_messages(websocket, tab)
        except (asyncio.CancelledError, ConnectionError):
            pass
        finally:
            self.sockets.discard(websocket)
            if tab is not None:
                await tab.stop()
                self.echo(f"a tab's workbench ended ({len(self.tabs)} open)")
            with contextlib.suppress(Exception):
                await websocket.close()
        return websocket


__all__ = ["COOKIE", "QUIT_GRACE", "TabProcess", "WorkbenchServer"]

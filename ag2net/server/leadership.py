"""Active/standby hubs on one PostgreSQL database: PostgreSQL's own session advisory lock decides which
``ag2net serve --db postgresql://…`` process admits; a fencing epoch makes sure an ex-active never writes.

``Leadership(url, host, port)``:

* ``take()`` opens the store, then holds ``pg_try_advisory_lock(key)`` on a connection of its own (the
  store's pool resets its connections with ``pg_advisory_unlock_all()``, so the lock cannot live there);
  ``key`` is derived from the database and schema the URL names, so hubs of other schemas never contend.
  While another session holds it this process is the **standby**: it listens on its port and answers
  every op with the ``standby`` error (``StandbyError`` on the client; the WebSocket handshake carries
  ``X-Ag2net-Role: standby`` so a multi-URL client moves on at once), and asks again every
  ``poll_interval`` seconds. With the lock it fences the store (``PostgresStore.fence``: a new epoch, every
  later write transaction checks it), hydrates a hub from the database, stops the standby listener and
  returns the hub, which the caller serves on the same port.
* The lock goes with the holder's session: a killed process's connection closes and the server releases
  it at once; a process cut off from the database loses it when the server's TCP keepalive gives up
  (the lock session asks for ``tcp_keepalives_idle=5``, ``interval=1``, ``count=3``: about 8 s).
* **The lease** (``lease`` seconds, default 2; ``ag2net serve --lease SECONDS``): a paused or frozen
  holder, whose TCP connection stays up, must not keep the lock either. The lock session sets
  PostgreSQL's ``idle_session_timeout`` to the lease (PostgreSQL 14 or later), so the *server* ends a
  session that sent nothing for that long, and the lock goes with it; the holder renews it with its
  health check (``SELECT 1`` every ``check_interval`` seconds, default a quarter of the lease). The
  store's writer session gets ``idle_in_transaction_session_timeout`` of the lease (``fence(lease=)``),
  so a frozen holder's open write transaction cannot hold the leader row (and the next holder's fence)
  for longer either; its pooled sessions only read and hold no row locks. The holder also counts for
  itself: a health check that finds the last renewal older than the lease gives the leadership up.
  A standby therefore takes over a frozen active within the lease and its own ``poll_interval``
  (0.25 s); the fencing epoch keeps whatever the ex-active does when it wakes up from landing. The price:
  a holder whose event loop stalls for longer than the lease minus the check interval (a long
  synchronous computation, a suspended laptop) loses the leadership; raise ``--lease`` for such hubs.
  On PostgreSQL 13 and older the server cannot end an idle session: the lease is kept by the holder
  alone (said once when it takes the lock) and a frozen holder keeps the lock until it wakes up.
  A hub embedded in a workbench (``standby=False``) defaults to a lease of 10 s: no standby waits for
  it, and its event loop also paints.
* ``hold(serving)`` runs the server until leadership is lost: the lock session ends or fails its health
  check (every ``check_interval`` seconds, ``check_timeout`` at most: default the lease), its lease ran
  out, or a write is fenced. Then it stops
  admitting at once (the serving task is cancelled: the listener closes and every connection with it),
  writes one sentence on stderr and returns ``LOST_EXIT_CODE`` (3), for ``ag2net serve`` to exit with;
  started again (by hand or by a supervisor) the process comes back as the standby.
* The moment the leadership is lost the store refuses every later write (``PostgresStore.refuse_writes``)
  with one sentence (``refusal``): whatever of the hub still runs reads, and writes nothing.

``Leadership(url, host, port, standby=False)`` is for a hub embedded in a workbench (``ag2net tui`` /
``ag2net web`` on a PostgreSQL URL): ``take()`` asks for the lock once and, when another hub holds it,
raises ``LeadershipHeld`` (naming the holder the leader row records) instead of standing by. With the
lock it is fenced and watched exactly as a served hub is; ``lost`` says when it lost it, and then
``step_down()`` ends the lock session while the store stays open for reading (the workbench stays up,
read-only, its writes refused with ``refusal(leadership)``'s sentence).

Without fencing a paused ex-active could wake up and write after the standby took over; with it, its
writes fail (``StoreFenced``) and nothing of them lands.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed

from ag2net.errors import StandbyError
from ag2net.protocol.frames import ErrorFrame, ResponseFrame, encode_frame
from ag2net.server.websocket import LOOPBACK_HOSTS
from ag2net.store.base import StoreError
from ag2net.store.postgres import _LEADER_TABLE, PostgresStore, StoreFenced, redact_url
from ag2net.transport.ws import ROLE_HEADER, STANDBY_ROLE

if TYPE_CHECKING:
    from ag2net.hub.hub import Hub

log = logging.getLogger("ag2net.server.leadership")

LOST_EXIT_CODE = 3
#: Seconds a served hub's lease lasts (``ag2net serve --lease``), and an embedded workbench hub's.
DEFAULT_LEASE = 2.0
EMBEDDED_LEASE = 10.0
#: The shortest lease: the health check renews it several times within it.
MIN_LEASE = 0.5
#: The lock session's server-side TCP keepalive: a holder cut off from the server loses the lock in ~8 s.
LOCK_SESSION_SETTINGS = {
    "application_name": "ag2net-leader",
    "tcp_keepalives_idle": "5",
    "tcp_keepalives_interval": "1",
    "tcp_keepalives_count": "3",
}


class LeadershipError(ValueError):
    """The leadership cannot be taken or waited for (the database or the port): one sentence."""


class LeadershipHeld(LeadershipError):
    """Another hub holds the lock, and this one was made with ``standby=False``: it does not wait."""

    def __init__(self, where: str, holder: str = "") -> None:
        self.where = where
        self.holder = holder
        held_by = f" ({holder})" if holder else ""
        super().__init__(f"another hub holds the leadership of {where}{held_by}")


def lock_key(database: str, schema: str) -> int:
    """The advisory lock key of the ag2net store in ``schema`` of ``database`` (a signed 64-bit integer)."""
    digest = hashlib.blake2b(f"ag2net-leader\0{database}\0{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class StandbyListener:
    """What a standby hub serves on its port: every op is answered with the ``standby`` error."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.server: Server | None = None
        self.answered = 0

    async def start(self, host: str, port: int) -> int:
        self.server = await serve(
            self._handle, host, port, process_response=self._mark, max_size=2 * 1024 * 1024
        )
        return self.server.sockets[0].getsockname()[1]

    @staticmethod
    def _mark(connection: ServerConnection, request: Any, response: Any) -> Any:
        response.headers[ROLE_HEADER] = STANDBY_ROLE
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        try:
            async for message in ws:
                try:
                    data = json.loads(message)
                except (ValueError, TypeError, RecursionError):
                    continue
                if not isinstance(data, dict):
                    continue
                kind = data.get("kind")
                if kind == "request":
                    request_id = data.get("request_id")
                    frame: Any = ResponseFrame(
                        request_id if isinstance(request_id, str) else "",
                        False,
                        None,
                        StandbyError.code,
                        self.message,
                    )
                elif kind == "hello":
                    frame = ErrorFrame(StandbyError.code, self.message)
                elif kind == "ping":
                    await ws.send('{"kind": "pong"}')
                    continue
                else:
                    continue
                self.answered += 1
                await ws.send(json.dumps(encode_frame(frame)))
        except ConnectionClosed:
            pass

    async def stop(self) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)


class Leadership:
    """One ``ag2net serve`` process's claim on a PostgreSQL store: standby until it holds the lock."""

    def __init__(
        self,
        url: str,
        host: str,
        port: int,
        *,
        echo: Callable[[str], Any] = print,
        token: str | None = None,
        allow_unauthenticated: bool = False,
        poll_interval: float = 0.25,
        lease: float | None = None,
        check_interval: float | None = None,
        check_timeout: float | None = None,
        standby: bool = True,
        holder: str | None = None,
        refusal: Callable[[Leadership], str] | None = None,
    ) -> None:
        self.url = url
        self.where = redact_url(url)
        self.host = host
        self.port = port
        self.echo = echo
        self.token = token
        self.allow_unauthenticated = allow_unauthenticated
        self.poll_interval = poll_interval
        #: seconds within which the holder must renew the lock (enforced by the database server)
        self.lease = lease if lease is not None else (DEFAULT_LEASE if standby else EMBEDDED_LEASE)
        numeric = isinstance(self.lease, int | float) and not isinstance(self.lease, bool)
        default = self.lease if numeric else DEFAULT_LEASE  # a bad lease is refused by take()
        self.check_interval: float = check_interval if check_interval is not None else default / 4
        self.check_timeout: float = check_timeout if check_timeout is not None else default
        self.standby = standby  # False: take() raises LeadershipHeld instead of standing by
        self.holder = holder  # what the leader row says holds it, after host and pid (default: the port)
        self.refusal = refusal  # the sentence a write fails with once the leadership is lost
        self.store: PostgresStore | None = None
        self.epoch: int | None = None
        self.key: int | None = None
        self.lost = asyncio.Event()
        self.reason = ""
        self._conn: Any = None
        self._standby: StandbyListener | None = None
        self._watch: asyncio.Task[None] | None = None
        self._warned_old_server = False

    # ------------------------------------------------------------------ taking it

    async def take(self, **hub_kwargs: Any) -> Hub:
        """Wait as the standby until this process holds the lock, then fence, hydrate and return the hub."""
        from ag2net.hub.hub import Hub

        lease = self.lease
        if isinstance(lease, bool) or not isinstance(lease, int | float) or not lease >= MIN_LEASE:
            raise LeadershipError(
                f"the leadership lease (--lease) must be at least {MIN_LEASE} seconds, got {lease!r}: the hub "
                "renews it several times within it"
            )
        if not 0 < self.check_interval < lease:
            raise LeadershipError(
                f"the leadership check interval must be more than 0 and less than the lease ({lease:g} s), "
                f"got {self.check_interval!r}"
            )

        if self.token is None and self.host not in LOOPBACK_HOSTS and not self.allow_unauthenticated:
            # serve_ws refuses this too, but only once this hub takes over: say it before standing by.
            raise LeadershipError(
                f"serving on {self.host!r} without a token would let anyone who can reach the port act as any "
                "agent; set --token (or AG2NET_TOKEN), bind to 127.0.0.1, or pass --allow-unauthenticated"
            )
        store = self.store = PostgresStore(self.url)
        async with self._closed_on_failure():
            await store.open()
            await self._wait_for_lock(store)
            # Renewing the lease starts now: fencing may wait up to a lease for a paused predecessor's
            # write transaction, and the lock session must not sit idle meanwhile.
            self._watch = asyncio.get_running_loop().create_task(self._watch_lock())
            self.epoch = await store.fence(self._holder(), on_fenced=self._fenced, lease=lease)
            if self.lost.is_set():
                raise LeadershipError(
                    f"this hub lost the leadership of {self.where} while taking it ({self.reason}); start it "
                    "again to stand by"
                )
            if self._standby is not None:
                self.echo(f"ag2net hub took over {self.where} (leader epoch {self.epoch}); loading its state")
        try:
            async with self._closed_on_failure():
                hub = await Hub.open(store, **hub_kwargs)
        finally:
            if self._standby is not None:
                await self._standby.stop()  # the port is the active hub's from now on
                self._standby = None
        log.info("leader of %s with epoch %s", self.where, self.epoch)
        return hub

    @contextlib.asynccontextmanager
    async def _closed_on_failure(self) -> AsyncIterator[None]:
        """Taking the lead failed inside: let go of the lock (``close``); a store error becomes a
        ``LeadershipError``."""
        try:
            yield
        except BaseException as exc:
            await self.close()
            if isinstance(exc, StoreError):
                raise LeadershipError(str(exc)) from None
            raise

    def _holder(self) -> str:
        return f"{socket.gethostname()} pid {os.getpid()} {self.holder or f'port {self.port}'}"

    async def _recorded_holder(self) -> str:
        """Who the leader row says holds the lock ("" when no hub ever fenced the database)."""
        try:
            return str(
                await self._conn.fetchval(
                    f"SELECT holder FROM {_LEADER_TABLE} WHERE id = 1", timeout=self.check_timeout
                )
                or ""
            )
        except Exception:
            return ""

    async def _lock_connection(self, store: PostgresStore) -> Any:
        conn = await store.connect(**LOCK_SESSION_SETTINGS)
        try:
            database, schema, version = await conn.fetchrow(
                "SELECT current_database(), current_schema(), current_setting('server_version_num')::int",
                timeout=self.check_timeout,
            )
            if version >= 140000:
                # The server ends this session once it sent nothing for a lease: a frozen holder's lock
                # goes with it. (A SET, not a startup setting: older servers refuse unknown ones.)
                await conn.execute(
                    f"SET idle_session_timeout = {max(1, round(self.lease * 1000))}",
                    timeout=self.check_timeout,
                )
            elif not self._warned_old_server:
                self._warned_old_server = True
                message = (
                    f"PostgreSQL {version // 10000} cannot end the session of a frozen hub (idle_session_timeout "
                    f"needs 14 or later): a frozen active keeps the leadership of {self.where} until it wakes up"
                )
                log.warning("%s", message)
        except BaseException:
            conn.terminate()
            raise
        if self.key is None:
            self.key = lock_key(database, schema or "")
        return conn

    async def _wait_for_lock(self, store: PostgresStore) -> None:
        announced = False
        while True:
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = None
                    self._conn = await self._lock_connection(store)
                if await self._conn.fetchval(
                    "SELECT pg_try_advisory_lock($1)", self.key, timeout=self.check_timeout
                ):
                    return
            except (StoreError, OSError, TimeoutError) as exc:
                if self._standby is None:
                    raise LeadershipError(str(exc)) from None
                log.warning("standby: cannot ask %s for the lock (%s); retrying", self.where, exc)
                await self._drop_connection()
            except Exception as exc:  # asyncpg's errors: the session failed; a new one asks again
                if self._standby is None:
                    raise LeadershipError(
                        f"cannot take the leadership lock of {self.where} ({exc})"
                    ) from None
                log.warning("standby: the lock session of %s failed (%s); retrying", self.where, exc)
                await self._drop_connection()
            if not self.standby:
                raise LeadershipHeld(self.where, await self._recorded_holder())
            if not announced:
                announced = True
                await self._stand_by()
            await asyncio.sleep(self.poll_interval)

    async def _stand_by(self) -> None:
        message = (
            "this hub is a standby: another hub on its database admits; connect to that one "
            "(HubClient.connect([url1, url2]) or ag2net tui --connect ws://a,ws://b tries each)"
        )
        standby = StandbyListener(message)
        try:
            self.port = await standby.start(self.host, self.port)
        except OSError as exc:
            raise LeadershipError(f"cannot serve on {self.host}:{self.port}: {exc}") from None
        self._standby = standby
        shown = f"[{self.host}]" if ":" in self.host else self.host
        self.echo(
            f"ag2net hub standing by on ws://{shown}:{self.port}: another hub holds {self.where}; "
            "this one takes over when it stops"
        )

    # ------------------------------------------------------------------ holding it

    def refused(self) -> str:
        """The one sentence every write fails with once this hub lost the leadership (after ``reason``)."""
        if self.refusal is not None:
            return self.refusal(self)
        return (
            f"this hub lost the leadership of {self.where} ({self.reason}) and writes nothing more there, so "
            "this was not saved: connect to the hub that admits now"
        )

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            password = urlsplit(self.url).password
            for secret in {password, unquote(password)} if password else ():
                reason = reason.replace(secret, "***")  # the reason may quote a driver's words
            self.reason = reason
            if self.store is not None:
                self.store.refuse_writes(self.refused())  # before anyone hears of it: nothing more lands
            self.lost.set()
            # From now on the hub's background writes (cursor flushes) fail with StoreFenced, as they
            # must: not worth a traceback each.
            loop = asyncio.get_running_loop()
            previous = loop.get_exception_handler()

            def quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
                if isinstance(context.get("exception"), StoreFenced):
                    return
                if previous is not None:
                    previous(loop, context)
                else:
                    loop.default_exception_handler(context)

            loop.set_exception_handler(quiet)

    def _fenced(self, error: StoreFenced) -> None:
        self._lose(f"another hub took over: a write under this hub's epoch {self.epoch} was fenced")

    async def _watch_lock(self) -> None:
        conn = self._conn
        if conn is None:
            return
        ended = asyncio.Event()
        add_listener = getattr(conn, "add_termination_listener", None)
        if add_listener is not None:
            add_listener(lambda _conn: ended.set())
        loop = asyncio.get_running_loop()
        renewed = loop.time()  # when the last renewal was sent: the server's idle clock started after it
        while not self.lost.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ended.wait(), self.check_interval)
            if ended.is_set() or conn.is_closed():
                self._lose("its lock session ended")
                return
            sent = loop.time()
            if sent - renewed > self.lease:
                # The server may have ended the session already (it ends one idle for a lease): this process
                # did not run, or did not reach the database, for that long.
                self._lose(
                    f"its lease of {self.lease:g} s ran out: it was last renewed {sent - renewed:.1f} s ago"
                )
                return
            try:
                await conn.fetchval("SELECT 1", timeout=self.check_timeout)
            except Exception as exc:
                self._lose(f"its lock session failed: {exc or type(exc).__name__}")
                return
            renewed = sent

    async def hold(self, serving: Awaitable[Any]) -> int:
        """Run ``serving`` until it ends (0) or the leadership is lost (``LOST_EXIT_CODE``, after one
        sentence on stderr). The serving task's own exceptions propagate."""
        task = asyncio.ensure_future(serving)
        lost = asyncio.ensure_future(self.lost.wait())
        try:
            await asyncio.wait({task, lost}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if not self.lost.is_set() or (task.done() and not task.cancelled() and task.exception() is not None):
            task.result()
            return 0
        sys.stderr.write(
            f"Error: this hub lost the leadership of {self.where} ({self.reason}); it stopped admitting and "
            f"exits with code {LOST_EXIT_CODE}: start it again to stand by\n"
        )
        sys.stderr.flush()
        return LOST_EXIT_CODE

    async def step_down(self) -> None:
        """Give up the leadership and keep the store open for reading: the store refuses every write from
        now on (``refused()``), the watch stops and the lock session ends. For a hub that lost the
        leadership and stays up read-only (a workbench); ``close`` closes the store later."""
        if not self.lost.is_set():
            self._lose("it stepped down")
        await self._stop_watching()
        await self._release()

    async def _stop_watching(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._watch
            self._watch = None

    async def close(self, hub: Hub | None = None) -> None:
        """Close ``hub``, the store and the lock session. A hub that lost the leadership is not closed:
        what closing writes (delivery cursors, the hydrate snapshot) must not land, and its process ends."""
        await self._stop_watching()
        if hub is not None and not self.lost.is_set():
            await hub.close()
        if self._standby is not None:
            await self._standby.stop()
            self._standby = None
        await self._release()
        if self.store is not None:
            with contextlib.suppress(Exception):
                await self.store.close()

    async def _drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.terminate()

    async def _release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                await asyncio.wait_for(conn.close(), 5)  # ends the session: the lock goes with it
            except Exception:
                conn.terminate()


__all__ = [
    "DEFAULT_LEASE",
    "EMBEDDED_LEASE",
    "LOCK_SESSION_SETTINGS",
    "LOST_EXIT_CODE",
    "Leadership",
    "LeadershipError",
    "LeadershipHeld",
    "StandbyListener",
    "lock_key",
]

"""``AgentClient``: an LLM agent's seat on the network.

Inbound envelopes never run on the receive path: each channel gets its own worker task, so one
channel's turns stay ordered while a long turn elsewhere (or a ``delegate`` awaiting a reply on a
sub-channel) never blocks delivery (SPEC §3.2).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from ag2net.client.base import ParticipantClient
from ag2net.envelope import EV_TASK_CANCELLED, Envelope
from ag2net.identity import ResumeExample
from ag2net.tasks import TaskMetadata

log = logging.getLogger(__name__)

Handler = Callable[[Envelope], Awaitable[None]]

#: The envelope the current task's handler is working on (per asyncio task, so per channel worker).
handling_envelope: contextvars.ContextVar[Envelope | None] = contextvars.ContextVar(
    "handling_envelope", default=None
)


class AgentClient(ParticipantClient):
    """Delivers inbound envelopes to a handler (the default handler unless replaced)."""

    kind_label = "AgentClient"

    def __init__(
        self,
        *,
        agent: Any,
        passport: Any,
        resume: Any,
        rule: Any,
        hub_client: Any,
        attach_default_handler: bool = True,
    ) -> None:
        super().__init__(passport=passport, resume=resume, rule=rule, hub_client=hub_client)
        self._agent = agent
        self._handler: Handler | None = self._run_default_handler if attach_default_handler else None
        self._queues: dict[str, asyncio.Queue[Envelope | None]] = {}
        self._workers: dict[str, asyncio.Task[None]] = {}
        self._suppressed: set[str] = set()
        self._owns_connection = False
        #: The ``NetworkPlugin`` registration applied to the agent (None with ``attach_plugin=False``); its
        #: builders (``tool``, ``prompt``, ``observer``…) add to this agent's turns.
        self.plugin: Any = None
        if getattr(agent, "task_sink", "missing") is None:
            agent.task_sink = self

    @property
    def agent(self) -> Any:
        return self._agent

    @property
    def current_handling_depth(self) -> int:
        env = handling_envelope.get()
        return env.depth if env is not None else 0

    @property
    def current_envelope(self) -> Envelope | None:
        return handling_envelope.get()

    def on_envelope(self, callback: Handler | None) -> None:
        """Replace the handler (``client.on_envelope(client._run_default_handler)`` restores the default)."""
        self._handler = callback

    async def _run_default_handler(self, envelope: Envelope) -> None:
        from ag2net.client.handler import default_handler

        await default_handler(envelope, self)

    def suppress_handler(self, channel_id: str) -> None:
        self._suppressed.add(channel_id)

    def unsuppress_handler(self, channel_id: str) -> None:
        self._suppressed.discard(channel_id)

    async def receive(self, envelope: Envelope) -> None:
        if self._disconnected:
            return
        self._to_inbox(envelope)
        cid = envelope.channel_id
        if cid in self._suppressed or self._handler is None:
            await self._hub_client.ack(envelope, self.agent_id)
            return
        queue = self._queues.get(cid)
        if queue is None:
            queue = self._queues[cid] = asyncio.Queue()
            self._workers[cid] = asyncio.get_running_loop().create_task(self._work(cid, queue))
        queue.put_nowait(envelope)

    async def _work(self, channel_id: str, queue: asyncio.Queue[Envelope | None]) -> None:
        while True:
            envelope = await queue.get()
            if envelope is None:
                return
            handler = self._handler
            status, reason = "ack", ""
            if handler is not None and not self._disconnected:
                token = handling_envelope.set(envelope)
                try:
                    await handler(envelope)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    status, reason = "nack", str(exc)
                    log.exception("handler of %s failed on %s", self.name, envelope.envelope_id)
                finally:
                    handling_envelope.reset(token)
            await self._hub_client.ack(envelope, self.agent_id, status, reason)
            if queue.empty() and channel_id in self._workers:
                # Idle channel: retire the worker so finished channels do not keep tasks alive.
                del self._queues[channel_id]
                del self._workers[channel_id]
                return

    async def _stop_workers(self) -> None:
        workers = list(self._workers.values())
        self._workers.clear()
        self._queues.clear()
        for task in workers:
            task.cancel()
        for task in workers:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def idle(self) -> None:
        """Wait until every channel worker has finished what it was given (tests, demos)."""
        while self._workers:
            await asyncio.gather(*list(self._workers.values()), return_exceptions=True)

    # ------------------------------------------------------------------ task sink (agent.task mirroring)

    async def observe_task(self, metadata: TaskMetadata) -> Any:
        if metadata.owner_id in ("", self.name):
            metadata.owner_id = self.agent_id
        if metadata.channel_id is None:
            current = handling_envelope.get()
            if current is not None:
                metadata.channel_id = current.channel_id
        return await self._hub_client.observe_task(metadata)

    async def update_task(self, task_id: str, **kwargs: Any) -> Any:
        return await self._hub_client.update_task(task_id, **kwargs)

    async def post_task_cancelled(self, task_id: str, reason: str) -> str | None:
        """Owner-side: post ``EV_TASK_CANCELLED`` into the task's channel (SPEC §3.13)."""
        try:
            task = await self._hub_client.get_task(task_id)
        except Exception:
            return None
        if not task.channel_id:
            return None
        return await self.send_envelope(
            Envelope(
                channel_id=task.channel_id,
                sender_id=self.agent_id,
                audience=None,
                event_type=EV_TASK_CANCELLED,
                event_data={"task_id": task_id, "reason": reason},
                task_id=task_id,
            )
        )

    # ------------------------------------------------------------------ misc

    async def resume_pending_turns(self) -> int:
        """Feed every turn the hub says is ours (after a restart) back into the handler."""
        count = 0
        for turn in await self._hub_client.pending_turns_for(self.agent_id):
            trigger_id = (
                turn.triggering_envelope_id
                if hasattr(turn, "triggering_envelope_id")
                else turn.get("triggering_envelope_id")
            )
            channel_id = turn.channel_id if hasattr(turn, "channel_id") else turn.get("channel_id")
            if not trigger_id:
                continue
            for env in reversed(await self._hub_client.read_wal(channel_id)):
                if env.envelope_id == trigger_id:
                    await self.receive(env)
                    count += 1
                    break
        return count

    async def add_example(self, example: ResumeExample) -> None:
        resume = await self._hub_client.get_resume(self.agent_id)
        resume.examples.append(example)
        await self.set_resume(resume)

    def _disconnect(self) -> None:
        if self._disconnected:
            return
        super()._disconnect()
        self._handler = None

    async def __aenter__(self) -> AgentClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        await self.unregister()
        await self._stop_workers()
        if self._owns_connection:
            await self._hub_client.close()


__all__ = ["AgentClient", "handling_envelope"]

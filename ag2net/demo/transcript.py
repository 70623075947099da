"""``ag2net demo``: run the demo once on a memory hub and print one line per envelope, then a summary.

Each tool call an agent's model makes is printed in line, where it happens (``researcher → delegate(critic,
"…")``), so a reader sees which call opened a nested consulting channel or created a task.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from typing import Any

from ag2net.client.hub_client import HubClient
from ag2net.demo.network import ModelFactory, start_demo
from ag2net.envelope import EV_PACKET, EV_TEXT, Envelope
from ag2net.events import ToolCallEvent


def preview(envelope: Envelope, width: int = 100) -> str:
    """One line saying what an envelope carries."""
    data = envelope.event_data if isinstance(envelope.event_data, dict) else {}
    if envelope.event_type == EV_TEXT:
        text = str(data.get("text", ""))
    elif envelope.event_type == EV_PACKET:
        routing = data.get("routing") or {}
        kind = routing.get("kind", "text")
        head = f"[{kind}" + (f" via {routing['tool']}" if routing.get("tool") else "") + "] "
        text = head + str(data.get("body", ""))
    elif "reason" in data:
        text = f"reason={data['reason']}"
    elif envelope.event_type.startswith("ag2.channel."):
        text = ""
    else:
        text = json.dumps(data, sort_keys=True, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


_BARE_ARGUMENTS = ("action", "target")
"""Arguments shown as bare words first: what a tool is asked to do, and whom."""
_TEXT_ARGUMENTS = ("prompt", "content", "text", "body", "note", "reason", "summary", "result", "title")
"""Arguments shown as quoted text, in their order, without their names."""


def _argument_value(value: Any, width: int) -> str:
    if isinstance(value, str):
        text = " ".join(value.split())
        text = text if len(text) <= width else text[: width - 1] + "…"
        return json.dumps(text, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def tool_call_text(name: str, arguments: str | dict[str, Any], width: int = 100) -> str:
    """``name(args)`` as a reader wants it: ``delegate(critic, "What is…", capability="risk-review")``.

    ``action`` and ``target`` come first as bare words, message-like text next (quoted, shortened), the rest
    as ``key=value``; arguments that are not a JSON object are shown as they came.
    """
    if isinstance(arguments, str):
        try:
            parsed: Any = json.loads(arguments or "{}")
        except ValueError:
            parsed = arguments
    else:
        parsed = arguments
    if not isinstance(parsed, dict):
        shown = [" ".join(str(parsed).split())]
    else:
        given = {k: v for k, v in parsed.items() if v is not None}
        shown = [str(given.pop(k)) for k in _BARE_ARGUMENTS if isinstance(given.get(k), str)]
        shown += [_argument_value(given.pop(k), 48) for k in _TEXT_ARGUMENTS if isinstance(given.get(k), str)]
        shown += [f"{k}={_argument_value(v, 32)}" for k, v in given.items()]
    text = f"{name}({', '.join(shown)})"
    return text if len(text) <= width else text[: width - 2] + "…)"


async def run_demo_cli(
    print_fn: Callable[[str], Any] = print, model: str | None = None, base_url: str | None = None
) -> int:
    """Run the demo once on a memory hub and print one line per envelope, and one per tool call where the
    model made it; returns the exit code (0)."""
    from ag2net.hub import Hub

    factory = await _openai_factory(model, base_url) if model is not None else None
    hub = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    hc = HubClient.local(hub)
    try:
        lines = _Lines(hub, hc, print_fn)
        start = await hc.observe_position()
        lines.printed = start
        follower = asyncio.get_running_loop().create_task(lines.follow(start))
        try:
            demo = await start_demo(hc, model_factory=factory, on_tool_call=lines.tool_called)
            try:
                await demo.run()
            finally:
                await demo.close()
            end = await hc.observe_position()
        finally:  # also when the demo cannot start: the follower never outlives the hub
            follower.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await follower
        await lines.catch_up(end)
        lines.flush_calls()
        await _print_summary(hc, print_fn)
        return 0
    finally:
        await hc.close()
        await hub.close()


async def _openai_factory(model: str, base_url: str | None) -> ModelFactory:
    """``openai:MODEL_NAME`` as a model factory, checked before anything starts: a missing key or an
    endpoint that is not there is one sentence now."""
    from ag2net.agent.openai_model import OpenAIChatModel

    if not model.startswith("openai:") or not model.removeprefix("openai:"):
        raise ValueError(f"model {model!r} must look like openai:MODEL_NAME, e.g. openai:gpt-4o-mini")
    model_name = model.removeprefix("openai:")

    def openai_model(name: str) -> Any:
        return OpenAIChatModel(model_name, base_url=base_url, name=f"{model_name} ({name})")

    probe = openai_model("check")
    try:
        await probe.check()
    finally:
        await probe.aclose()
    return openai_model


class _Lines:
    """The demo's transcript: one line per observed envelope, tool call lines where they were made."""

    def __init__(self, hub: Any, hc: HubClient, print_fn: Callable[[str], Any]) -> None:
        self.hub = hub
        self.hc = hc
        self.print_fn = print_fn
        self.printed = 0
        #: Tool call lines waiting for the observe stream to reach where they were made: (position, line).
        self.calls: list[tuple[int, str]] = []

    def kind_of(self, channel_id: str) -> str:
        md = self.hub.channels.get(channel_id)
        return md.manifest.type if md is not None else "?"

    def tool_called(self, agent_name: str, channel_id: str, call: ToolCallEvent) -> None:
        # made while the observe stream stood at this position: print it after that event, before the next
        line = (
            f"{self.kind_of(channel_id):<12} {agent_name:<10} → {tool_call_text(call.name, call.arguments)}"
        )
        self.calls.append((self.hub.observe_log.position, line))

    def flush_calls(self, before: int | None = None) -> None:
        while self.calls and (before is None or self.calls[0][0] < before):
            self.print_fn(self.calls.pop(0)[1])

    def show(self, event: Any) -> None:
        self.flush_calls(event.position)
        env = event.envelope
        if event.kind != "envelope" or env is None:
            return
        kind = self.kind_of(env.channel_id)
        self.print_fn(f"{kind:<12} {self.hc.name_for(env.sender_id):<10} {env.event_type:<26} {preview(env)}")

    async def follow(self, start: int) -> None:
        async for event in self.hc.observe(since=start):
            self.show(event)
            self.printed = event.position

    async def catch_up(self, end: int) -> None:
        """What the follower had not printed yet when the demo ended, up to ``end``."""
        if self.printed < end:
            async for event in self.hc.observe(since=self.printed):
                self.show(event)
                if event.position >= end:
                    break


async def _print_summary(hc: HubClient, print_fn: Callable[[str], Any]) -> None:
    channels = await hc.list_channels(include_terminal=True, limit=None)
    turns = await hc.list_turns(limit=10_000)
    print_fn("")
    print_fn(
        f"{len(channels)} channels, {sum(await _counts(hc, channels))} envelopes, {len(turns)} LLM turns:"
    )
    for md in channels:
        names = ", ".join(hc.name_for(p) for p in md.participant_ids())
        print_fn(f"  {md.manifest.type:<12} {names:<40} {md.state.value} ({md.close_reason or 'open'})")


async def _counts(hc: HubClient, channels: list[Any]) -> list[int]:
    return [await hc.wal_count(md.channel_id) for md in channels]


__all__ = ["preview", "run_demo_cli", "tool_call_text"]

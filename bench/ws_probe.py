"""Where bench/ws.py's paced latency goes: ``python bench/ws.py --probe DIR`` (diagnosis only).

Every post's text is its scheduled time on ``time.perf_counter`` (CLOCK_MONOTONIC, one clock for both
processes of one machine), so each stage of an envelope's trip is stamped against it, in either process:

load   ``post``     the bench's ``Pair.post`` starts (its schedule's own lag: the load's loop)
load   ``sent``     the request frame is written to the socket (the client's post path)
hub    ``read``     the hub takes the request (``data_received`` or its reader)
hub    ``notify``   the notify frame is written to the receiver's socket
load   ``arrived``  the receiver's link has decoded the notify (``WsLinkClient._on_envelope``)
load   ``callback`` the bench's callback (the figure's end)

plus, in each process, event-loop lag (a 2 ms timer's overshoot) and garbage-collector pauses. The hub
writes its stamps to DIR on SIGUSR1 (reset on SIGUSR2); ``report`` joins both sides per envelope.
"""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

clock = time.perf_counter
STAMPS: dict[str, list[tuple[float, Any]]] = {}
LAG: list[tuple[float, float]] = []
GC: list[tuple[float, float, int]] = []
_gc_started = [0.0]


def stamp(kind: str, what: Any) -> None:
    STAMPS.setdefault(kind, []).append((clock(), what))


def reset() -> None:
    STAMPS.clear()
    LAG.clear()
    GC.clear()


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_started[0] = clock()
    else:
        GC.append((_gc_started[0], clock() - _gc_started[0], info["generation"]))


async def _lag_probe(period: float = 0.002) -> None:
    while True:
        t0 = clock()
        await asyncio.sleep(period)
        t1 = clock()
        LAG.append((t1, t1 - t0 - period))


def _stamp_of_request(text: str) -> str | None:
    data = json.loads(text)
    if data.get("op") != "post_envelope":
        return None
    return data["params"]["envelope"]["event_data"]["text"]


def install_common() -> None:
    gc.callbacks.append(_on_gc)
    asyncio.get_running_loop().create_task(_lag_probe())


def install_server(directory: str) -> None:
    from ag2net.server import endpoint as ep

    take, on_message, send_notify = ep.WsEndpoint._take, ep.WsEndpoint._on_message, ep.WsEndpoint._send_notify

    def _take(self: Any, text: str) -> bool:
        stamp("read", text)
        return take(self, text)

    async def _on_message(self: Any, message: Any) -> None:
        stamp("read", message)
        await on_message(self, message)

    async def _send_notify(self: Any, recipient_id: str, envelope: Any) -> None:
        await send_notify(self, recipient_id, envelope)
        stamp("notify", envelope)

    ep.WsEndpoint._take = _take  # type: ignore[method-assign]
    ep.WsEndpoint._on_message = _on_message  # type: ignore[method-assign]
    ep.WsEndpoint._send_notify = _send_notify  # type: ignore[method-assign]
    install_common()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGUSR2, reset)
    loop.add_signal_handler(signal.SIGUSR1, lambda: dump(Path(directory) / "hub.json"))


def install_client() -> None:
    from ag2net.transport import ws as ws_mod

    write_now, on_envelope = ws_mod.write_now, ws_mod.WsLinkClient._on_envelope

    def _write_now(ws: Any, text: str) -> bool:
        wrote = write_now(ws, text)
        if wrote and text.startswith('{"kind": "request"'):
            stamp("sent", text)
        return wrote

    def _on_envelope(self: Any, recipient_id: str, envelope: Any) -> None:
        stamp("arrived", envelope)
        on_envelope(self, recipient_id, envelope)

    ws_mod.write_now = _write_now  # type: ignore[assignment]
    ws_mod.WsLinkClient._on_envelope = _on_envelope  # type: ignore[method-assign]
    install_common()


def _key_of(kind: str, what: Any) -> str | None:
    if kind in ("read", "sent"):
        return _stamp_of_request(what if isinstance(what, str) else what.decode())
    if kind in ("notify", "arrived"):
        data = what.event_data
        return data.get("text") if isinstance(data, dict) else None
    return what  # post, callback: the stamp text itself


def snapshot() -> dict[str, Any]:
    stamps: dict[str, dict[str, float]] = {}
    for kind, items in STAMPS.items():
        keyed = stamps[kind] = {}
        for at, what in items:
            try:
                key = _key_of(kind, what)
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
            if key is not None and key not in keyed:
                keyed[key] = at
    return {"stamps": stamps, "lag": LAG, "gc": GC}


def dump(path: Path) -> None:
    path.write_text(json.dumps(snapshot()))


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def report(hub: dict[str, Any], load: dict[str, Any], t0: float, t1: float) -> dict[str, Any]:
    """Per-stage latency (ms) for every envelope seen on every stage; the stages of the slowest 1%."""
    stages = ["post", "sent", "read", "notify", "arrived", "callback"]
    stamps = {**load["stamps"], **{k: v for k, v in hub["stamps"].items()}}
    rows = []
    for key in stamps.get("callback", {}):
        try:
            times = [float(key)] + [stamps[s][key] for s in stages]
        except KeyError:
            continue
        rows.append([b - a for a, b in itertools.pairwise(times)])
    names = [
        "sched->post",
        "post->sent",
        "sent->hub_read",
        "hub_read->notify",
        "notify->arrived",
        "arrived->cb",
    ]
    out: dict[str, Any] = {"envelopes_joined": len(rows)}
    totals = [sum(r) for r in rows]
    cut = _pct(totals, 0.99)
    tail = [r for r, t in zip(rows, totals, strict=False) if t >= cut]
    for i, name in enumerate(names):
        col = [r[i] * 1000 for r in rows]
        out[name] = {
            "p50": round(_pct(col, 0.5), 2),
            "p99": round(_pct(col, 0.99), 2),
            "tail1pct_mean": round(sum(r[i] for r in tail) / max(1, len(tail)) * 1000, 2),
        }
    out["total"] = {"p50": round(_pct(totals, 0.5) * 1000, 2), "p99": round(cut * 1000, 2)}
    for side, data in (("hub", hub), ("load", load)):
        lag = [x for at, x in data["lag"] if t0 <= at <= t1]
        pauses = [(d, g) for at, d, g in data["gc"] if t0 <= at <= t1]
        out[f"{side}_loop_lag_ms"] = {
            "p50": round(_pct(lag, 0.5) * 1000, 2),
            "p99": round(_pct(lag, 0.99) * 1000, 2),
            "max": round(max(lag, default=0) * 1000, 2),
        }
        out[f"{side}_gc"] = {
            "count": len(pauses),
            "total_ms": round(sum(d for d, _ in pauses) * 1000, 1),
            "max_ms": round(max((d for d, _ in pauses), default=0) * 1000, 2),
            "by_gen": {g: sum(1 for _, gg in pauses if gg == g) for g in (0, 1, 2)},
        }
    return out

"""Time ``project()`` of each built-in view over 1k, 10k and 100k-envelope WALs; prints JSON lines.

Call pattern measured (the hub's): the channel's WAL is a ``WalLog`` the hub appends every admitted envelope
to; each turn, the recipient's handler projects ``log.until(trigger_id)`` (everything before the triggering
envelope) with ``adapter.render_envelope`` and ``name_for``. So each timed call follows one append, and each
participant's first projection (which indexes the whole log once) is reported apart as ``cold_ms``. For the
windowed views a ``list_prefix`` line shows the plain-list fallback (``wal[:i]`` copied, O(n) summary).

SPEC §6 budget: WindowedSummary(10) (and NamedWindowedSummary(10)) at 100k within 2x the 1k time.
Run: ``python bench/views.py``
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import time

from ag2net.adapters import ConversationAdapter
from ag2net.channel import ChannelManifest, ChannelMetadata, ChannelState, Participant, ParticipantRole
from ag2net.envelope import EV_CHANNEL_INVITE, EV_CHANNEL_INVITE_ACK, EV_CHANNEL_OPENED, EV_TEXT, Envelope
from ag2net.ids import MonotonicIds
from ag2net.views import FullTranscript, NamedTranscript, NamedWindowedSummary, WalLog, WindowedSummary

SIZES = (1_000, 10_000, 100_000)
PARTICIPANTS = ["a" * 32, "b" * 32, "c" * 32]
NAMES = dict(zip(PARTICIPANTS, ["alice", "bob", "carol"], strict=True))


def make_envelopes(n: int, rng: random.Random, ids: MonotonicIds) -> list[Envelope]:
    """3 participants, mixed senders, every 5th text addressed to one other participant, lifecycle at the start."""
    out: list[Envelope] = []
    a, b, c = PARTICIPANTS
    for etype, sender, audience in (
        (EV_CHANNEL_INVITE, a, [b]),
        (EV_CHANNEL_INVITE, a, [c]),
        (EV_CHANNEL_INVITE_ACK, b, None),
        (EV_CHANNEL_INVITE_ACK, c, None),
        (EV_CHANNEL_OPENED, a, list(PARTICIPANTS)),
    ):
        out.append(Envelope("ch", sender, audience, etype, {"channel_id": "ch"}, envelope_id=ids()))
    while len(out) < n:
        sender = rng.choice(PARTICIPANTS)
        audience = None
        if len(out) % 5 == 0:
            audience = [rng.choice([p for p in PARTICIPANTS if p != sender])]
        text = f"message {len(out)} from {NAMES[sender]} " + "lorem ipsum " * rng.randint(1, 8)
        out.append(Envelope("ch", sender, audience, EV_TEXT, {"text": text}, envelope_id=ids()))
    return out


def metadata() -> ChannelMetadata:
    return ChannelMetadata(
        channel_id="ch",
        manifest=ChannelManifest(type="conversation"),
        creator_id=PARTICIPANTS[0],
        participants=[
            Participant(p, ParticipantRole.INITIATOR if i == 0 else ParticipantRole.PARTICIPANT, i)
            for i, p in enumerate(PARTICIPANTS)
        ],
        state=ChannelState.ACTIVE,
        created_at="t",
    )


async def measure(view, size: int, turns: int, *, list_prefix: bool = False) -> dict:
    rng = random.Random(size)
    ids = MonotonicIds()
    envelopes = make_envelopes(size + turns, rng, ids)
    adapter = ConversationAdapter()
    md = metadata()
    log = WalLog(envelopes[:size])
    plain = envelopes[:size]
    cold = []
    if not list_prefix:
        for pid in PARTICIPANTS:  # the first turn of each participant indexes the log once
            t0 = time.perf_counter_ns()
            await view.project(
                log.prefix(),
                participant_id=pid,
                channel=md,
                render_envelope=adapter.render_envelope,
                name_for=NAMES.get,
            )
            cold.append((time.perf_counter_ns() - t0) / 1e6)
    samples = []
    for k in range(turns):
        trigger = envelopes[size + k]
        recipient = PARTICIPANTS[(PARTICIPANTS.index(trigger.sender_id) + 1) % 3]
        if list_prefix:
            plain.append(trigger)
            t0 = time.perf_counter_ns()
            wal = plain[: len(plain) - 1]
        else:
            log.append(trigger)
            t0 = time.perf_counter_ns()
            wal = log.until(trigger.envelope_id)
        await view.project(
            wal,
            participant_id=recipient,
            channel=md,
            render_envelope=adapter.render_envelope,
            name_for=NAMES.get,
        )
        samples.append((time.perf_counter_ns() - t0) / 1e3)
    line = {
        "bench": "views",
        "view": view.name,
        "params": view.params(),
        "wal_size": size,
        "call": "list_prefix" if list_prefix else "wallog_until",
        "turns": turns,
        "median_us": round(statistics.median(samples), 2),
        "mean_us": round(statistics.fmean(samples), 2),
        "p90_us": round(sorted(samples)[int(0.9 * (len(samples) - 1))], 2),
    }
    if cold:
        line["cold_ms"] = [round(c, 2) for c in cold]
    return line


async def main() -> None:
    results: dict[tuple[str, int], float] = {}
    views = [FullTranscript(), NamedTranscript(), WindowedSummary(10), NamedWindowedSummary(10)]
    for view in views:
        windowed = "recent_n" in view.params()
        for size in SIZES:
            turns = 2000 if windowed else max(5, 2_000_000 // (size * 20))
            line = await measure(view, size, turns)
            results[(view.name, size)] = line["median_us"]
            print(json.dumps(line), flush=True)
            if windowed and size == SIZES[-1]:
                print(json.dumps(await measure(view, size, 50, list_prefix=True)), flush=True)
    for name in ("windowed_summary", "named_windowed_summary"):
        ratio = results[(name, SIZES[-1])] / results[(name, SIZES[0])]
        print(
            json.dumps(
                {
                    "bench": "views",
                    "metric": "ratio_100k_over_1k",
                    "view": name,
                    "ratio": round(ratio, 3),
                    "budget": 2.0,
                    "within_budget": ratio <= 2.0,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    asyncio.run(main())

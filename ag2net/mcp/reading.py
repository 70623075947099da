"""The reading tools: ``list_channels``, ``read_wal``, ``envelope``, ``projection``, ``turns``, ``compare_turns``.

Each takes the ``Network`` and the checked arguments and returns a small JSON-able answer (a page and its
``next_cursor``); a mistake is a ``Refusal``.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from ag2net.filtering import FilterError, FilterSpec, words_match
from ag2net.mcp.network import Network, Refusal, clip, clipped, envelope_row
from ag2net.mcp.tools import make_cursor, page, read_cursor

SCAN = 5000
"""Envelopes a filtered ``read_wal`` reads at most per call before it answers with a cursor."""


def _listed(net: Network, md: Any, query: str) -> bool:
    """Whether the workbench's channel list shows ``md`` under the filter ``query``: every word in the
    channel's type, state, id, participants' names or close reason, or one word inside its label."""
    state = md.state.value if hasattr(md.state, "value") else str(md.state)
    names = [net.name_for(p) for p in md.participant_ids()]
    words = query.lower().split()
    label = net.label_for(md.channel_id).lower()
    fields = [md.manifest.type, state, md.channel_id, *names, md.close_reason]
    return words_match(query, fields) or (len(words) == 1 and words[0] in label)


async def list_channels(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    channels = await net.channels()
    stats = await net.hc.channel_stats()
    want_type, want_state = args.get("type"), args.get("state")
    who = net.agent(args["participant"]) if args.get("participant") else None
    rows = []
    for md in channels:
        state = md.state.value if hasattr(md.state, "value") else str(md.state)
        if (want_type and md.manifest.type != want_type) or (want_state and state != want_state):
            continue
        if who is not None and who not in md.participant_ids():
            continue
        if args.get("query") and not _listed(net, md, args["query"]):
            continue
        rows.append(
            {
                "label": net.label_for(md.channel_id),
                "channel_id": md.channel_id,
                "type": md.manifest.type,
                "state": state,
                "participants": [net.name_for(p) for p in md.participant_ids()],
                "wal_count": int(stats.get(md.channel_id, {}).get("wal_count", 0)),
                "intent": (md.labels or {}).get("intent") if hasattr(md, "labels") else None,
                "close_reason": md.close_reason,
            }
        )
    start = read_cursor("list_channels", args) or 0
    shown, cursor = page("list_channels", args, rows, start, args["limit"])
    return {"total": len(rows), "channels": shown, "next_cursor": cursor}


def _filter(net: Network, text: str, channels: list[Any]) -> Any:
    """The filter language (``ag2net.filtering``, the one the workbench's tail uses) for ``text``."""
    try:
        return FilterSpec.parse(text, ((md.manifest.type, md.channel_id) for md in channels))
    except FilterError as exc:
        raise Refusal(f"read_wal: {str(exc).rstrip('.')}") from None


async def read_wal(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    md = await net.channel(args["channel"])
    cid = md.channel_id
    total = await net.wal_count(cid)
    start = read_cursor("read_wal", args) or args["from_seq"]
    limit, chars = args["limit"], args["max_chars"]
    spec = _filter(net, args["filter"], await net.channels()) if args.get("filter") else None
    rows: list[dict[str, Any]] = []
    seq = start
    while seq <= total and len(rows) < limit and seq - start < SCAN:
        last = min(total, seq + (limit if spec is None else 500) - 1)
        for at, env in await net.wal(cid, seq, last):
            seq = at + 1
            if spec is None or spec.matches(env, net.name_for, at):
                rows.append(envelope_row(net, at, env, chars))
                if len(rows) >= limit:
                    break
        else:
            seq = last + 1
    answer: dict[str, Any] = {"channel": net.label_for(cid), "wal_count": total, "envelopes": rows}
    if spec is not None:
        answer["filter"] = spec.describe()
        answer["scanned_to"] = seq - 1
    answer["next_cursor"] = make_cursor("read_wal", args, seq) if seq <= total else None
    return answer


async def _find(net: Network, cid: str, args: dict[str, Any]) -> tuple[int, Any]:
    total = await net.wal_count(cid)
    if args.get("envelope_id"):
        for first in range(1, total + 1, 1000):
            for seq, env in await net.wal(cid, first, min(total, first + 999)):
                if env.envelope_id == args["envelope_id"]:
                    return seq, env
        raise Refusal(
            f"envelope: no envelope {args['envelope_id']!r} in this channel; take an id from read_wal"
        )
    seq = args.get("seq")
    if seq is None:
        raise Refusal("envelope needs 'seq' or 'envelope_id'; give one of them (read_wal lists both)")
    if not 1 <= seq <= total:
        raise Refusal(f"envelope: seq {seq} is out of range; give a seq from 1 to {total}")
    [(at, env)] = await net.wal(cid, seq, seq)
    return at, env


async def envelope(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.debug import visibility

    md = await net.channel(args["channel"])
    cid = md.channel_id
    chars = args["max_chars"]
    seq, env = await _find(net, cid, args)
    async with net.debug_hub(cid) as hub:
        matrix = await visibility(hub, cid, first_seq=seq, last_seq=seq)
    cells = matrix.rows[0].cells if matrix.rows else {}
    seen_by = [
        {
            "participant": net.name_for(pid),
            "delivered": cell.delivered,
            "reason": cell.reason,
            "projected": cell.projected,
            "role": cell.role,
            "text": clip(cell.text, chars),
        }
        for pid, cell in cells.items()
    ]
    total = await net.wal_count(cid)
    cause = None
    led_to: list[dict[str, Any]] = []
    for first in range(1, total + 1, 1000):
        for at, other in await net.wal(cid, first, min(total, first + 999)):
            if env.causation_id and other.envelope_id == env.causation_id:
                cause = envelope_row(net, at, other, 120)
            if other.causation_id == env.envelope_id and len(led_to) < 20:
                led_to.append(envelope_row(net, at, other, 120))
    return {
        "channel": net.label_for(cid),
        "seq": seq,
        "sender": net.name_for(env.sender_id),
        "audience": net.names(env.audience),
        "envelope": clipped(env.to_dict(), chars),
        "seen_by": seen_by,
        "caused_by": cause,
        "led_to": led_to,
        "more": "causation gives the whole tree, across channels",
    }


def event_row(event: Any, chars: int) -> dict[str, Any]:
    """A projected event, small: its type and its texts clipped."""
    data = event.to_dict() if hasattr(event, "to_dict") else dict(event)
    return clipped(data, chars, 12)


def view_arg(
    args: dict[str, Any], where: str, key: str = "view", params: str = "params"
) -> dict[str, Any] | None:
    """The view spec ``args[key]`` (a name) and ``args[params]`` make; a ``Refusal`` naming ``where``."""
    from ag2net.cli.replay import parse_view
    from ag2net.cli.support import UsageProblem

    if not args.get(key):
        if args.get(params):
            raise Refusal(f"{where}: {params} are a view's parameters; give the view's name in {key!r} too")
        return None
    try:
        return parse_view(args[key], dict(args.get(params) or {}), where=f"{where} {key}")
    except UsageProblem as exc:
        raise Refusal(str(exc)) from None


async def projection(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.client.turns import project_for
    from ag2net.views import view_from_spec, view_spec

    md = await net.channel(args["channel"])
    cid = md.channel_id
    pid = net.agent(args["participant"], md)
    spec = view_arg(args, "projection")
    total = await net.wal_count(cid)
    at = args.get("at_seq")
    if at is not None and at > total:
        raise Refusal(f"projection: at_seq {at} is past the end; give a seq from 0 to {total}")
    policy = view_from_spec(spec) if spec is not None else net.hc.default_view_policy(md, pid)
    wal = [env for _, env in await net.wal(cid, 1, total if at is None else at)]
    events = await project_for(net.hc, md, pid, wal, policy)
    start = read_cursor("projection", args) or 0
    rows, cursor = page(
        "projection", args, [event_row(e, args["max_chars"]) for e in events], start, args["limit"]
    )
    return {
        "channel": net.label_for(cid),
        "participant": net.name_for(pid),
        "view": view_spec(policy),
        "in_force": spec is None,
        "up_to_seq": total if at is None else at,
        "events_total": len(events),
        "first_event": start,
        "events": rows,
        "next_cursor": cursor,
    }


async def numbered_turns(net: Network, cid: str, pid: str) -> list[Any]:
    """The participant's turn records on the channel, oldest first (turn 1 is the first)."""
    from ag2net.errors import AccessDeniedError

    try:
        newest_first = await net.hc.list_turns(channel_id=cid, agent_id=pid, limit=100_000)
    except AccessDeniedError:
        raise Refusal(
            "another agent's turn records are for operators; start ag2net mcp with --operator-token "
            "(or AG2NET_OPERATOR_TOKEN)"
        ) from None
    return list(reversed(newest_first))


def turn_row(net: Network, number: int, record: Any, chars: int) -> dict[str, Any]:
    history = [event_row(e, chars) for e in record.history]
    return {
        "turn": number,
        "turn_id": record.turn_id,
        "trigger_envelope_id": record.trigger_envelope_id,
        "started_at": record.started_at,
        "view": record.view,
        "system_prompt": clip(record.system_prompt, chars),
        "history_events": len(history),
        "history": history[-12:],
        "history_omitted": max(0, len(history) - 12),
        "inputs": [clipped(p.to_dict(), chars) for p in record.inputs],
        "tools_offered": [str((t.get("function") or {}).get("name", "")) for t in record.tools],
        "reply": clip(record.reply, chars),
        "reply_envelope_id": record.reply_envelope_id,
        "tool_calls": [clipped(c, chars, 10) for c in record.tool_calls[:10]],
        "tokens": record.tokens,
        "model_calls": record.model_calls,
        "duration_ms": record.duration_ms,
        "error": record.error,
    }


async def turns(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    md = await net.channel(args["channel"])
    pid = net.agent(args["participant"], md)
    records = await numbered_turns(net, md.channel_id, pid)
    rows = [turn_row(net, n, r, args["max_chars"]) for n, r in enumerate(records, 1)]
    if args.get("turn") is not None:
        if args["turn"] > len(rows):
            raise Refusal(
                f"turns: {net.name_for(pid)} has {len(rows)} turns here; give a turn from 1 to {len(rows)}"
            )
        rows = [rows[args["turn"] - 1]]
    start = read_cursor("turns", args) or 0
    shown, cursor = page("turns", args, rows, start, args["limit"])
    return {
        "channel": net.label_for(md.channel_id),
        "participant": net.name_for(pid),
        "turns_total": len(records),
        "turns": shown,
        "next_cursor": cursor,
    }


async def compare_turns(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    md = await net.channel(args["channel"])
    pid = net.agent(args["participant"], md)
    records = await numbered_turns(net, md.channel_id, pid)
    for key in ("a", "b"):
        if args[key] > len(records):
            raise Refusal(
                f"compare_turns: {key}={args[key]}, but {net.name_for(pid)} has {len(records)} turns here; "
                f"give numbers from 1 to {len(records)}"
            )
    a, b = records[args["a"] - 1], records[args["b"] - 1]
    chars = args["max_chars"]
    left = [json.dumps(e.to_dict(), sort_keys=True, ensure_ascii=False) for e in a.history]
    right = [json.dumps(e.to_dict(), sort_keys=True, ensure_ascii=False) for e in b.history]
    removed: list[Any] = []
    added: list[Any] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += [event_row(e, chars) for e in a.history[i1:i2]]
        if tag in ("replace", "insert"):
            added += [event_row(e, chars) for e in b.history[j1:j2]]
    tools_a = [str((t.get("function") or {}).get("name", "")) for t in a.tools]
    tools_b = [str((t.get("function") or {}).get("name", "")) for t in b.tools]
    return {
        "a": args["a"],
        "b": args["b"],
        "history": {"a": len(left), "b": len(right), "removed": removed[:20], "added": added[:20]},
        "system_prompt_same": a.system_prompt == b.system_prompt,
        "inputs_same": [p.to_dict() for p in a.inputs] == [p.to_dict() for p in b.inputs],
        "tools": {
            "same": tools_a == tools_b,
            "only_a": [t for t in tools_a if t not in tools_b],
            "only_b": [t for t in tools_b if t not in tools_a],
        },
        "view": {"a": a.view, "b": b.view},
        "reply": {"a": clip(a.reply, chars), "b": clip(b.reply, chars)},
        "tokens": {"a": a.tokens, "b": b.tokens},
    }


__all__ = [
    "compare_turns",
    "envelope",
    "event_row",
    "list_channels",
    "numbered_turns",
    "projection",
    "read_wal",
    "turns",
    "view_arg",
]

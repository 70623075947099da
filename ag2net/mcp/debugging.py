"""The debugger's tools: ``visibility``, ``state_at``, ``causation``, ``dry_run``, ``replay``, and ``post``.

They run ``ag2net.debug`` on the hub ``Network.debug_hub`` gives (the in-process copy of a database, or a
fork of the channel over ``--connect``) and answer small pages; a mistake is a ``Refusal``.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from ag2net.mcp.network import Network, Refusal, clip, clipped, envelope_row
from ag2net.mcp.reading import view_arg
from ag2net.mcp.tools import make_cursor, page, read_cursor


async def visibility(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.debug import visibility as matrix_of

    md = await net.channel(args["channel"])
    cid = md.channel_id
    total = await net.wal_count(cid)
    first = read_cursor("visibility", args) or args["from_seq"]
    last = min(total, first + args["limit"] - 1)
    only = {net.agent(name) for name in args.get("participants") or []}
    preview = view_arg(args, "visibility", "preview_view", "preview_params")
    async with net.debug_hub(cid) as hub:
        matrix = await matrix_of(hub, cid, first_seq=first, last_seq=last, preview_view=preview)
    rows = []
    for row in matrix.rows:
        cells = {}
        for pid, cell in row.cells.items():
            if only and pid not in only:
                continue
            shown: dict[str, Any] = {
                "delivered": cell.delivered,
                "reason": cell.reason,
                "projected": cell.projected,
                "role": cell.role,
            }
            if preview is not None:
                shown["preview"], shown["preview_role"] = cell.preview, cell.preview_role
            cells[net.name_for(pid)] = shown
        rows.append(
            {
                "seq": row.seq,
                "sender": net.name_for(row.sender_id),
                "event_type": row.event_type,
                "cells": cells,
            }
        )
    return {
        "channel": net.label_for(cid),
        "wal_length": matrix.wal_length,
        "views": {net.name_for(p): v for p, v in matrix.views.items()},
        "preview_view": matrix.preview_view,
        "rows": rows,
        "next_cursor": make_cursor("visibility", args, last + 1) if last < total else None,
    }


async def state_at(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.debug import states_at

    md = await net.channel(args["channel"])
    cid = md.channel_id
    total = await net.wal_count(cid)
    if not 1 <= args["seq"] <= total:
        raise Refusal(f"state_at: seq {args['seq']} is out of range; give a seq from 1 to {total}")
    async with net.debug_hub(cid) as hub:
        scrubber = await states_at(hub, cid)
        state = scrubber.at(args["seq"]).to_dict()
        changes = [s for s in scrubber.changes() if s <= total]
    state["sender"] = net.name_for(state.get("sender_id") or "") if state.get("sender_id") else None
    state["channel"] = net.label_for(cid)
    state["state_changes_at"] = changes[:50]
    return clipped(state, args["max_chars"])


async def causation(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.debug import causation_tree
    from ag2net.errors import NotFoundError

    hint = (await net.channel(args["channel"])).channel_id if args.get("channel") else None
    if hint is None and net.hub is None:
        raise Refusal("causation over --connect needs the envelope's channel; give 'channel' too")
    try:
        if net.hub is not None:
            tree = await causation_tree(net.hub, args["envelope_id"], channel_id=hint, limit=args["limit"])
        else:
            assert hint is not None
            async with net.debug_hub(hint) as hub:
                tree = await causation_tree(hub, args["envelope_id"], channel_id=hint, limit=args["limit"])
    except NotFoundError:
        raise Refusal(
            f"causation: no envelope {args['envelope_id']!r} in any channel; take an id from read_wal"
        ) from None
    await net.channels()
    nodes = [
        {
            "level": level,
            "envelope_id": node.envelope_id,
            "channel": net.label_for(node.channel_id),
            "seq": node.seq,
            "sender": net.name_for(node.sender_id),
            "event_type": node.event_type,
            "link": node.link,
            "parent": node.parent,
        }
        for level, node in tree.walk()
    ]
    return {
        "envelope_id": tree.envelope_id,
        "root": tree.root,
        "chain": tree.chain,
        "nodes": nodes,
        "tasks": clipped(tree.tasks, 200),
        "truncated": tree.truncated,
        "scope": "all channels" if net.hub is not None else "this channel only (a fork over --connect)",
    }


def _dry_answer(net: Network, result: Any, chars: int) -> dict[str, Any]:
    projections = {
        net.name_for(pid): {
            "removed": len(delta.get("removed", [])),
            "added": [clipped(e, chars, 8) for e in delta.get("added", [])[:8]],
        }
        for pid, delta in result.projections.items()
    }
    return {
        "admitted": result.admitted,
        "refusal": result.message or None,
        "advice": (result.refusal or {}).get("advice"),
        "recipients": [{**r, "name": net.name_for(r.get("agent_id", ""))} for r in result.recipients],
        "projections": projections,
        "expected_before": clipped(result.expected_before, chars),
        "expected_after": clipped(result.expected_after, chars),
        "closes": clipped(result.closes, chars),
        "state_after": clipped(result.state_after, chars),
    }


async def dry_run(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.debug import dry_run as dry_run_of
    from ag2net.debug import fork
    from ag2net.envelope import EV_TEXT, Envelope

    md = await net.channel(args["channel"])
    cid = md.channel_id
    sender = net.agent(args["sender"], md)
    if args.get("text") is not None:
        if args.get("event_type") not in (None, EV_TEXT) or args.get("event_data") is not None:
            raise Refusal("dry_run takes either text or event_type with event_data; give one of them")
        event_type, data = EV_TEXT, {"text": args["text"]}
    elif args.get("event_type"):
        event_type, data = args["event_type"], dict(args.get("event_data") or {})
    else:
        raise Refusal("dry_run needs what to post; give text (a message) or event_type with event_data")
    audience = [net.agent(name, md) for name in args["audience"]] if args.get("audience") else None
    env = Envelope(
        channel_id=cid, sender_id=sender, audience=audience, event_type=event_type, event_data=data
    )
    total = await net.wal_count(cid)
    at = args.get("at_seq")
    if at is None:
        result = await dry_run_of(net.hc, env)
    else:
        if at > total:
            raise Refusal(f"dry_run: at_seq {at} is past the end; give a seq from 0 to {total}")
        async with await fork(net.hc, cid, at) as box:
            env.channel_id = box.channel_id
            result = await dry_run_of(box.hub, env)
    answer = {
        "channel": net.label_for(cid),
        "sender": net.name_for(sender),
        "at_seq": total if at is None else at,
    }
    return {**answer, **_dry_answer(net, result, args["max_chars"])}


_REPLAYS: OrderedDict[str, dict[str, Any]] = OrderedDict()
"""The last few replays' comparisons, so paging their rows does not replay again."""


def _overrides(net: Network, md: Any, args: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    from ag2net.cli.replay import NETWORK_TOOLS, parse_model, parse_tool_policy
    from ag2net.cli.support import UsageProblem
    from ag2net.debug import Override

    overrides: dict[str, Any] = {}
    shown: dict[str, list[str]] = {}

    def of(name: str) -> Any:
        agent_id = net.agent(name, md)
        shown.setdefault(net.name_for(agent_id), [])
        return overrides.setdefault(agent_id, Override()), shown[net.name_for(agent_id)]

    try:
        for name, spec in (args.get("views") or {}).items():
            params = {k: v for k, v in spec.items() if k != "name"}
            view = view_arg({"view": spec.get("name"), "params": params}, f"replay views[{name!r}]")
            if view is None:
                raise Refusal(
                    f'replay: the view for {name!r} has no name; give e.g. {{"name": "windowed_summary"}}'
                )
            override, said = of(name)
            override.view = view
            said.append("view " + json.dumps(view, sort_keys=True))
        for name, text in (args.get("models") or {}).items():
            model = parse_model(text, where=f"replay models[{name!r}]")
            override, said = of(name)
            if model is not None:
                override.model = model
            said.append(f"model {text}")
        for name, prompt in (args.get("system_prompts") or {}).items():
            override, said = of(name)
            override.system_prompt = prompt
            said.append(f"system prompt ({len(prompt)} characters)")
        for target, text in (args.get("tools") or {}).items():
            agent, _, tool = target.rpartition(".")
            if not agent or not tool:
                raise Refusal(f"replay: tools key {target!r} must look like AGENT.TOOL or AGENT.*")
            policy = parse_tool_policy(text, where=f"replay tools[{target!r}]")
            if policy.kind == "live" and tool not in NETWORK_TOOLS:
                raise Refusal(
                    f"replay: {target} cannot be live here (this server has no agent's own code); give recorded "
                    "or static:JSON, or use 'ag2net replay --network'"
                )
            override, said = of(agent)
            override.tools[tool] = policy
            said.append(f"tool {tool} {policy}")
    except UsageProblem as exc:
        raise Refusal(str(exc)) from None
    return overrides, {name: "; ".join(what) for name, what in shown.items()}


async def replay(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    from ag2net.cli.replay import comparison_json, run_replay
    from ag2net.mcp.tools import query_key

    md = await net.channel(args["channel"])
    cid = md.channel_id
    total = await net.wal_count(cid)
    at = args["at_seq"]
    if not 0 <= at <= total:
        raise Refusal(f"replay: at_seq {at} is out of range; give a seq from 0 to {total}")
    key = f"{query_key('replay', args)}:{cid}:{total}"  # a channel that grew is replayed again
    record = _REPLAYS.get(key)
    if record is None:
        overrides, shown = _overrides(net, md, args)
        result, diff = await run_replay(
            net.hc, cid, at, overrides, turns=args["turns"], timeout=float(args["timeout"])
        )
        record = comparison_json(net.label_for(cid), at, result, diff, net.name_for, shown)
        _REPLAYS[key] = record
        while len(_REPLAYS) > 8:
            _REPLAYS.popitem(last=False)
    chars = args["max_chars"]
    differing = [r for r in record["rows"] if not r["same"]]
    start = read_cursor("replay", args) or 0
    rows, cursor = page("replay", args, differing, start, args["limit"])
    changed = [
        t
        for t in record["turns"]
        if any(not t.get(f"{k}_same", True) for k in ("history", "inputs", "tools", "reply"))
        or "missing" in t
    ]
    return {
        "channel": record["channel"],
        "at_seq": at,
        "verdict": record["verdict"],
        "identical": record["identical"],
        "first_divergence_seq": record["first_divergence_seq"],
        "why": record["why"],
        "original_count": record["original_count"],
        "replayed_count": record["replayed_count"],
        "overrides": record["overrides"],
        "first_turn": _turn(record["first_turn"], chars),
        "turn_why": record["turn_why"],
        "turns_compared": len(record["turns"]),
        "turns_changed": [
            {"agent": t["agent"], "turn": t["turn"], "answered_by": t.get("answered_by")}
            for t in changed[:20]
        ],
        "differing_rows_total": len(differing),
        "differing_rows": [_side_by_side(net, r, chars) for r in rows],
        "next_cursor": cursor,
    }


def _turn(row: dict[str, Any] | None, chars: int) -> dict[str, Any] | None:
    if row is None:
        return None
    keep = (
        "agent",
        "turn",
        "answered_by",
        "history_same",
        "inputs_same",
        "tools_same",
        "reply_same",
        "history_delta",
    )
    return clipped({k: row[k] for k in keep if k in row}, chars, 8)


def _side_by_side(net: Network, row: dict[str, Any], chars: int) -> dict[str, Any]:
    def side(env: dict[str, Any] | None) -> dict[str, Any] | None:
        if env is None:
            return None
        data = env.get("event_data") or {}
        text = data.get("text") if isinstance(data, dict) else None
        shown = text if isinstance(text, str) else json.dumps(data, ensure_ascii=False, sort_keys=True)
        return {"sender": env.get("sender"), "event_type": env.get("event_type"), "text": clip(shown, chars)}

    return {"seq": row["seq"], "original": side(row["original"]), "replayed": side(row["replayed"])}


async def post(net: Network, args: dict[str, Any]) -> dict[str, Any]:
    if net.hub is not None:
        raise Refusal(
            "post writes to a running hub, and a --db is opened read-only; start ag2net mcp with --connect"
        )
    md = await net.channel(args["channel"])
    human = await net.human()
    audience = [net.agent(name, md) for name in args["audience"]] if args.get("audience") else None
    ok, why = await human.can_send(md.channel_id)
    if not ok:
        raise Refusal(f"post: {net.human_name} cannot post to {net.label_for(md.channel_id)} ({why})")
    envelope_id = await human.send(md.channel_id, args["text"], audience=audience)
    total = await net.wal_count(md.channel_id)
    [(seq, env)] = await net.wal(md.channel_id, total, total)
    row = envelope_row(net, seq, env) if env.envelope_id == envelope_id else {"envelope_id": envelope_id}
    return {"channel": net.label_for(md.channel_id), "posted_as": net.human_name, "envelope": row}


__all__ = ["causation", "dry_run", "post", "replay", "state_at", "visibility"]

"""``ag2net replay``: fork a channel of a database at a seq, replay it with overrides, print the comparison.

The database is read once, read-only, through ``ag2net wal``'s readers (``WalReader`` for a SQLite file,
``PostgresWalReader`` for ``postgresql://…``): the channel, its WAL, the agents' records and the channel's
turn records are taken into a ``SnapshotSource`` and the reader is closed before anything runs. The
snapshot answers the ops ``ag2net.debug.fork``/``replay`` read through (``get_channel``, ``read_wal``,
``get_agent``, ``list_turns`` …), so the fork and the replay run in memory and never touch the file.

The parsing helpers (``parse_view``, ``parse_model``) and the one-line envelope summary are shared with the
workbench's fork form (``tui/screens/fork.py``). Headless: no UI imports.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ag2net.cli.support import ReadOnlyDb, UsageProblem, fail
from ag2net.protocol import ops

T = TypeVar("T")

SCRIPTED_REPLY = "(scripted reply)"
"""What ``--model AGENT=scripted`` answers on every turn (``scripted:TEXT`` answers TEXT)."""

MODEL_FORMS = "replay, scripted, scripted:TEXT or openai:MODEL_NAME"


# ----------------------------------------------------------------------------------------- parsing


def _value(text: str) -> Any:
    """``k=v``'s value: JSON when it reads as JSON (numbers, true/false, null, quoted text), else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def parse_params(text: str, *, where: str) -> dict[str, Any]:
    """``k=v,k=v`` → a dict; ``UsageProblem`` naming ``where`` for a pair without ``=`` or a key."""
    params: dict[str, Any] = {}
    for pair in (p.strip() for p in text.split(",")):
        if not pair:
            continue
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise UsageProblem(
                f"{where}: {pair!r} is not k=v; write parameters as k=v separated by commas, e.g. recent_n=4"
            )
        params[key.strip()] = _value(value.strip())
    return params


def parse_view(name: str, params: dict[str, Any], *, where: str) -> dict[str, Any]:
    """A view spec ``{"name": …, **params}`` that builds a real view; ``UsageProblem`` otherwise."""
    from ag2net.errors import ProtocolError
    from ag2net.views.registry import registered_views, view_from_spec

    name = name.strip()
    if name not in registered_views():
        raise UsageProblem(f"{where}: unknown view {name!r}; choose from {', '.join(registered_views())}")
    spec = {"name": name, **params}
    try:
        view_from_spec(spec)
    except ProtocolError as exc:
        raise UsageProblem(f"{where}: {exc}") from None
    return spec


def parse_model(text: str, *, where: str) -> Any:
    """``replay`` (None: the replay model), ``scripted[:TEXT]`` or ``openai:NAME`` → a model."""
    text = text.strip()
    if text == "replay":
        return None
    if text == "scripted" or text.startswith("scripted:"):
        from ag2net.agent.models import ScriptedModel

        reply = text.partition(":")[2] or SCRIPTED_REPLY
        return ScriptedModel(reply, name="scripted", loop=True)
    if text.startswith("openai:") and text.partition(":")[2].strip():
        if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")):
            raise UsageProblem(
                f"{where}: {text!r} needs OPENAI_API_KEY (or OPENAI_BASE_URL for a local server) in the "
                "environment; set it, or use replay or scripted"
            )
        try:
            from ag2net.agent.openai_model import OpenAIChatModel

            return OpenAIChatModel(text.partition(":")[2].strip())
        except ImportError as exc:
            raise UsageProblem(f"{where}: {exc}") from None
    raise UsageProblem(f"{where}: model {text!r} is not one of {MODEL_FORMS}")


def openai_available() -> bool:
    """Whether an ``openai:NAME`` model can be built here (the extra installed and a key or endpoint set)."""
    try:
        import openai  # noqa: F401
    except ImportError:
        return False
    return bool(os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"))


def _split_assignment(option: str, text: str, example: str) -> tuple[str, str]:
    agent, eq, rest = text.partition("=")
    if not eq or not agent.strip() or not rest.strip():
        raise UsageProblem(f"{option} {text!r} must look like AGENT={example}")
    return agent.strip(), rest.strip()


# ----------------------------------------------------------------------------------------- the source


@dataclass(slots=True)
class SnapshotSource:
    """What the fork and the replay read of one channel, taken from a database and held in memory.

    It answers the ops ``ag2net.debug`` uses as a ``HubClient`` would: ``request(req)`` takes the op's typed
    request (``ag2net.protocol.ops``), ``call(op, **params)`` makes one from the op's name and params. Each
    op it answers is one method below, keyed by its request class in ``ANSWERS``."""

    metadata: Any
    envelopes: list[Any]
    agents: dict[str, dict[str, Any]]
    turns: list[dict[str, Any]] = field(default_factory=list)

    def agent_id(self, name_or_id: str) -> str | None:
        if name_or_id in self.agents:
            return name_or_id
        return next((a for a, rec in self.agents.items() if rec.get("name") == name_or_id), None)

    def name_for(self, agent_id: str) -> str:
        return str((self.agents.get(agent_id) or {}).get("name") or agent_id)

    async def call(self, op: str, **params: Any) -> Any:
        """Answer op ``op`` by name (``HubClient.call``): ``params`` make its typed request."""
        return await self.request(ops.request_of(op, params))

    async def request(self, request: ops.Request[T]) -> T:
        """Answer one typed request, as ``HubClient.request`` would; ``ProtocolError`` for an op whose answer
        the snapshot does not hold (a replay reads only the ops in ``ANSWERS``)."""
        answer = ANSWERS.get(type(request))
        if answer is None:
            from ag2net.errors import ProtocolError

            held = ", ".join(sorted(cls.spec.name for cls in ANSWERS))
            raise ProtocolError(
                f"a replay's snapshot of the database answers {held}, not {request.spec.name!r}"
            )
        return answer(self, request)

    def _record(self, request: ops.Request[Any], name_or_id: str) -> dict[str, Any]:
        """The agent's stored record; ``NotFoundError`` (naming the request's params) when it is not here."""
        from ag2net.errors import NotFoundError

        agent_id = self.agent_id(name_or_id)
        if agent_id is None:
            raise NotFoundError(f"agent not found: {request.to_params()}")
        return self.agents[agent_id]

    def get_channel(self, request: ops.GetChannel) -> Any:
        return self.metadata.copy()

    def wal_count(self, request: ops.WalCount) -> int:
        return len(self.envelopes) if request.channel_id == self.metadata.channel_id else 0

    def read_wal(self, request: ops.ReadWal) -> list[Any]:
        if request.channel_id != self.metadata.channel_id:
            return []
        return [e.copy() for e in self.envelopes[request.since : request.until]]

    def list_turns(self, request: ops.ListTurns) -> list[dict[str, Any]]:
        return [t for t in self.turns if t.get("channel_id") == request.channel_id]

    def get_agent(self, request: ops.GetAgent) -> Any:
        from ag2net.identity import Passport

        return Passport.from_dict(self._record(request, request.name_or_id)["passport"])

    def get_resume(self, request: ops.GetResume) -> Any:
        from ag2net.identity import Resume

        return Resume.from_dict(self._record(request, request.agent_id).get("resume") or {})

    def get_rule(self, request: ops.GetRule) -> Any:
        from ag2net.identity import Rule

        rec = self._record(request, request.agent_id)
        return Rule.from_dict(rec["rule"]) if rec.get("rule") else Rule()

    def get_skill(self, request: ops.GetSkill) -> str | None:
        from ag2net.identity import Passport, Resume
        from ag2net.skills import render_fallback_skill

        rec = self._record(request, request.agent_id)
        if rec.get("skill_md"):
            return rec["skill_md"]
        return render_fallback_skill(
            Passport.from_dict(rec["passport"]), Resume.from_dict(rec.get("resume") or {})
        )


ANSWERS: dict[type[ops.Request[Any]], Callable[[SnapshotSource, Any], Any]] = {
    ops.GetChannel: SnapshotSource.get_channel,
    ops.WalCount: SnapshotSource.wal_count,
    ops.ReadWal: SnapshotSource.read_wal,
    ops.ListTurns: SnapshotSource.list_turns,
    ops.GetAgent: SnapshotSource.get_agent,
    ops.GetResume: SnapshotSource.get_resume,
    ops.GetRule: SnapshotSource.get_rule,
    ops.GetSkill: SnapshotSource.get_skill,
}
"""The ops a snapshot answers, by request class: what ``ag2net.debug``'s fork and replay read."""


def read_snapshot(db: str, channel: str) -> tuple[SnapshotSource, str]:
    """The channel ``channel`` names in ``db`` (a path or a URL), read once read-only; and its label."""
    from ag2net.cli.wal import PostgresWalReader, WalReadError, open_reader
    from ag2net.envelope import Envelope

    try:
        with open_reader(db) as reader:
            md = reader.resolve(channel)
            cid = md.channel_id
            total = reader.wal_count(cid)
            envelopes = [Envelope(**data) for _, data in reader.envelopes(cid, 1, total)]
            if isinstance(reader, PostgresWalReader):
                agents = reader._run(reader._store.load_agents())
                turns = reader._run(reader._store.list_turns(channel_id=cid, limit=1_000_000))
            else:
                rows = reader._conn.execute("SELECT record FROM agents ORDER BY ord")
                agents = [json.loads(r[0]) for r in rows]
                rows = reader._conn.execute(
                    "SELECT record FROM turns WHERE channel_id = ? ORDER BY ord", (cid,)
                )
                turns = [json.loads(r[0]) for r in rows]
            label = reader.label_for(cid)
    except WalReadError as exc:
        raise UsageProblem(str(exc)) from None
    return SnapshotSource(md, envelopes, {a["agent_id"]: a for a in agents}, list(turns)), label


# ----------------------------------------------------------------------------------------- the output


def envelope_summary(row: dict[str, Any] | None, name_for: Any) -> str:
    """One line for an envelope (a ``compare`` row's side): sender, event type and its text or data."""
    if row is None:
        return "—"
    data = row.get("event_data") or {}
    if isinstance(data, dict):  # the channel's id is the row's own: leave it out
        data = {k: v for k, v in data.items() if k != "channel_id"}
    text = data.get("text") if isinstance(data, dict) else None
    shown = (
        text
        if isinstance(text, str)
        else json.dumps(data, ensure_ascii=False, sort_keys=True)
        if data
        else ""
    )
    shown = " ".join(shown.split())
    to = ""
    if row.get("audience"):
        to = " →" + ",".join(name_for(a) for a in row["audience"])
    etype = str(row.get("event_type", "")).removeprefix("ag2.")
    return f"{name_for(row.get('sender_id', ''))}{to}  {etype}  {shown}".rstrip()


def turn_summary(row: dict[str, Any] | None, name_for: Any, why: str) -> str:
    """The first divergent turn in a sentence: whose turn, which one, what differs and by how much."""
    if row is None:
        return "every turn saw the same history, input and tools and gave the same reply"
    text = f"{name_for(row['agent_id'])}'s turn {row['turn']}: {why}"
    delta = row.get("history_delta")
    if delta and not row.get("history_same", True):
        text += f" (history {delta['before']} → {delta['after']} events: "
        text += f"{len(delta['removed'])} removed, {len(delta['added'])} added)"
    if not row.get("tools_same", True):
        text += f" (tools {row['tools_original']} → {row['tools_replayed']})"
    return text


def divergence_summary(diff: Any) -> str:
    """The first envelope that differs, in a sentence (seq numbers from 1)."""
    if diff.first_divergence is None:
        return "no divergence: the replay made the original transcript envelope for envelope"
    return f"first divergence at seq {diff.first_divergence + 1}: {diff.why}"


def answered_summary(diff: Any, name_for: Any) -> str:
    """Who answered the replayed turns: the recording, a live model, or nobody (the replay model refused)."""
    if not diff.turns:
        return "turns: none after the fork point"
    groups: dict[str, list[str]] = {}
    for row in diff.turns:
        by = row.get("answered_by") or ""
        if not by:
            continue
        groups.setdefault(by, []).append(f"{name_for(row['agent_id'])} {row['turn']}")
    parts = []
    for by, turns in groups.items():
        if by == "the recording":
            parts.append(f"{len(turns)} answered from the recording")
        elif by.startswith("no answer"):
            parts.append(f"{len(turns)} with no recorded reply ({', '.join(turns[:4])})")
        else:
            parts.append(f"{len(turns)} answered by {by.removeprefix('the ')} ({', '.join(turns[:4])})")
    return "turns: " + ("; ".join(parts) if parts else "none taken in the replay")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def comparison_text(
    label: str, at_seq: int, result: Any, diff: Any, name_for: Any, overrides: dict[str, str], width: int
) -> list[str]:
    lines = [
        f"{label} forked at seq {at_seq} of {len(result.original)}: {diff.verdict}; "
        f"{len(result.replayed)} envelopes (original {len(result.original)})"
    ]
    for agent, what in overrides.items():
        lines.append(f"  override {agent}: {what}")
    column = max((width - 12) // 2, 20)
    lines.append(f"  {'seq':>5}  {'original':<{column}}  replayed")
    for row in diff.rows:
        mark = " " if row["same"] else "≠"
        left = _clip(envelope_summary(row["original"], name_for), column)
        right = "=" if row["same"] else _clip(envelope_summary(row["replayed"], name_for), column)
        lines.append(f"{mark} {row['seq']:>5}  {left:<{column}}  {right}")
    lines.append(diff.verdict)
    lines.append(answered_summary(diff, name_for))
    lines.append("first divergent turn: " + turn_summary(diff.first_turn, name_for, diff.turn_why))
    differing = [
        f"{name_for(t['agent_id'])} {t['turn']} ({_turn_change(t)})" for t in diff.turns if _turn_change(t)
    ]
    if differing:
        more = f" … {len(differing) - 8} more" if len(differing) > 8 else ""
        lines.append(
            f"turns that differ ({len(differing)} of {len(diff.turns)}): " + ", ".join(differing[:8]) + more
        )
    return lines


def _turn_change(row: dict[str, Any]) -> str:
    """What differs in a ``compare`` turn row ("" when nothing): "history, reply" or "missing in the replay"."""
    if "missing" in row:
        return "missing in the replay" if row["missing"] == "replayed" else "not in the original"
    return ", ".join(k for k in ("history", "inputs", "tools", "reply") if not row[f"{k}_same"])


def comparison_json(
    label: str, at_seq: int, result: Any, diff: Any, name_for: Any, overrides: dict[str, str]
) -> dict[str, Any]:
    def named(row: dict[str, Any] | None) -> dict[str, Any] | None:
        if row is None:
            return None
        return {"sender": name_for(row["sender_id"]), **row}

    return {
        "channel": label,
        "channel_id": result.sandbox.channel_id,
        "at_seq": at_seq,
        "original_count": len(result.original),
        "replayed_count": len(result.replayed),
        "stopped": result.stopped,
        "verdict": diff.verdict,
        "identical": diff.identical,
        "first_divergence_seq": None if diff.first_divergence is None else diff.first_divergence + 1,
        "why": diff.why,
        "overrides": overrides,
        "rows": [
            {
                "seq": r["seq"],
                "same": r["same"],
                "original": named(r["original"]),
                "replayed": named(r["replayed"]),
            }
            for r in diff.rows
        ],
        "turns": [{"agent": name_for(t["agent_id"]), **t} for t in diff.turns],
        "first_turn": None
        if diff.first_turn is None
        else {"agent": name_for(diff.first_turn["agent_id"]), **diff.first_turn},
        "turn_why": diff.turn_why,
    }


# ----------------------------------------------------------------------------------------- running


NETWORK_TOOLS = frozenset({"delegate", "peers", "channels", "tasks", "context", "say"})
"""The tools every replayed agent has in this process (the network plugin's and ``say``)."""


def recorded_tools(source: SnapshotSource, agent_id: str) -> list[str]:
    """The tool names the agent's turns in the channel were offered, in order."""
    names: dict[str, None] = {}
    for turn in source.turns:
        if turn.get("agent_id") == agent_id:
            for schema in turn.get("tools") or []:
                names.setdefault(str((schema.get("function") or {}).get("name") or ""), None)
    return [n for n in names if n]


def parse_tool_policy(text: str, *, where: str) -> Any:
    """``recorded``, ``live`` or ``static:JSON`` → a ``ToolPolicy``; ``UsageProblem`` naming ``where``."""
    from ag2net.debug.replay import ToolPolicy

    try:
        return ToolPolicy.parse(text)
    except ValueError as exc:
        raise UsageProblem(f"{where}: {exc}") from None


def build_overrides(
    source: SnapshotSource,
    label: str,
    views: list[str],
    systems: list[str],
    models: list[str],
    tools: list[str] | None = None,
    available: dict[str, list[str]] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """``--view``/``--system``/``--model``/``--tool`` → ``{agent_id: Override}`` and a readable line per
    agent. ``available``: agent name → the tools ``--network`` loaded for it (for ``live``)."""
    from ag2net.debug.replay import Override

    people = list(source.metadata.participant_ids())
    for env in source.envelopes:
        if env.sender_id in source.agents and env.sender_id not in people:
            people.append(env.sender_id)
    overrides: dict[str, Any] = {}
    shown: dict[str, list[str]] = {}

    def agent_of(option: str, name: str) -> str:
        agent_id = source.agent_id(name)
        if agent_id is None or agent_id not in people:
            names = ", ".join(source.name_for(p) for p in people)
            raise UsageProblem(f"{option}: {name!r} is not an agent of {label} (its agents: {names})")
        return agent_id

    for text in views:
        agent, rest = _split_assignment("--view", text, "NAME[:k=v,...]")
        agent_id = agent_of("--view", agent)
        name, _, params = rest.partition(":")
        spec = parse_view(name, parse_params(params, where=f"--view {text!r}"), where=f"--view {text!r}")
        overrides.setdefault(agent_id, Override()).view = spec
        shown.setdefault(agent_id, []).append("view " + json.dumps(spec, sort_keys=True))
    for text in systems:
        agent, file = _split_assignment("--system", text, "FILE")
        agent_id = agent_of("--system", agent)
        try:
            prompt = Path(file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            raise UsageProblem(
                f"--system {text!r}: cannot read {file!r} ({reason}); give a UTF-8 text file"
            ) from None
        overrides.setdefault(agent_id, Override()).system_prompt = prompt
        shown.setdefault(agent_id, []).append(f"system prompt from {file} ({len(prompt)} characters)")
    for text in models:
        agent, spec = _split_assignment("--model", text, MODEL_FORMS.replace(", ", "|").replace(" or ", "|"))
        agent_id = agent_of("--model", agent)
        model = parse_model(spec, where=f"--model {text!r}")
        if model is not None:
            overrides.setdefault(agent_id, Override()).model = model
        shown.setdefault(agent_id, []).append(f"model {spec}")
    for text in tools or []:
        target, eq, spec = text.partition("=")
        agent, dot, tool = target.strip().rpartition(".")
        if not eq or not dot or not agent or not tool or not spec.strip():
            raise UsageProblem(f"--tool {text!r} must look like AGENT.TOOL=recorded|live|static:JSON")
        agent_id = agent_of("--tool", agent)
        offered = recorded_tools(source, agent_id)
        if tool != "*" and tool not in offered:
            raise UsageProblem(
                f"--tool {text!r}: {agent} was never offered a tool {tool!r} in {label} "
                f"(its tools: {', '.join(offered) or 'none'}); name one of them, or * for all"
            )
        policy = parse_tool_policy(spec, where=f"--tool {text!r}")
        have = set(NETWORK_TOOLS) | set((available or {}).get(source.name_for(agent_id), []))
        lacking = [t for t in (offered if tool == "*" else [tool]) if t not in have]
        if policy.kind == "live" and lacking:
            raise UsageProblem(
                f"--tool {text!r}: this process does not have {agent}'s tool {lacking[0]!r}; load the network "
                "that has it with --network module:function, or give it recorded or static:JSON"
            )
        overrides.setdefault(agent_id, Override()).tools[tool] = policy
        shown.setdefault(agent_id, []).append(f"tool {tool} {policy}")
    return overrides, {source.name_for(a): "; ".join(w) for a, w in shown.items()}


async def load_network_tools(spec: str) -> dict[str, list[Any]]:
    """Run the ``--network`` function on a scratch in-memory hub and take each agent's tools from it."""
    from ag2net.cli.support import load_network, run_network
    from ag2net.debug.replay import network_tools
    from ag2net.hub.hub import Hub

    func = load_network(spec)
    scratch = await Hub.open(None, ttl_sweep_interval=0, expectation_sweep_interval=0)
    try:
        await run_network(func, scratch)
        return network_tools(scratch)
    finally:
        await scratch.close()


async def run_replay(
    source: Any,
    channel_id: str,
    at_seq: int,
    overrides: dict[str, Any],
    *,
    turns: int,
    timeout: float,
    functions: dict[str, list[Any]] | None = None,
) -> tuple[Any, Any]:
    """Fork ``source`` at ``at_seq``, replay with ``overrides``, compare; the sandbox is closed after."""
    from ag2net.debug import compare, fork, replay

    async with await fork(source, channel_id, at_seq) as box:
        result = await replay(
            source,
            box,
            overrides=overrides,
            functions=functions,
            turn_budget=turns,
            step_timeout=min(10.0, timeout),
            timeout=timeout,
        )
        return result, compare(result)


#: ``--view``, ``--system`` and ``--tool`` of ``replay`` and ``eval``: what a replay changes, agent by agent.
ViewChanges = Annotated[
    list[str] | None,
    typer.Option(
        help="AGENT=NAME[:k=v,...]: replay AGENT under another view, e.g. critic=windowed_summary:recent_n=2."
    ),
]
SystemChanges = Annotated[
    list[str] | None, typer.Option(help="AGENT=FILE: replay AGENT with the system prompt in FILE.")
]
ToolChanges = Annotated[
    list[str] | None,
    typer.Option(
        help="AGENT.TOOL=recorded|live|static:JSON: how AGENT's calls of TOOL (or * for all) are answered "
        "(default recorded: the original call's result)."
    ),
]


def replay_cmd(
    channel: Annotated[
        str,
        typer.Argument(
            help="Channel: its label (conversation·b6d8, or conversation.b6d8), the id's last digits, the id "
            "or a unique prefix."
        ),
    ],
    at: Annotated[int, typer.Option("--at", help="Fork after this seq (0: before the first envelope).")],
    db: ReadOnlyDb,
    view: ViewChanges = None,
    system: SystemChanges = None,
    model: Annotated[
        list[str] | None,
        typer.Option(
            help="AGENT=replay|scripted[:TEXT]|openai:NAME: the model AGENT answers with (default replay)."
        ),
    ] = None,
    tool: ToolChanges = None,
    network: Annotated[
        str | None,
        typer.Option(
            "--network",
            help="module:function that registers the network on a hub: its agents' own tools become "
            "available to --tool AGENT.TOOL=live.",
        ),
    ] = None,
    turns: Annotated[int, typer.Option("--turns", help="Stop the replay after this many model turns.")] = 200,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Stop the replay after this many seconds.")
    ] = 60.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as one JSON object instead of a table.")
    ] = False,
) -> None:
    """Fork a channel at a seq, replay it (with other views, prompts or models), print what changed."""
    try:
        if turns < 1:
            raise UsageProblem(f"--turns must be 1 or more, got {turns}")
        if not timeout > 0:
            raise UsageProblem(f"--timeout must be more than 0 seconds, got {timeout}")
        source, label = read_snapshot(db, channel)
        total = len(source.envelopes)
        if not 0 <= at <= total:
            raise UsageProblem(f"--at {at} is out of range for {label}: give a seq between 0 and {total}")
        functions = asyncio.run(load_network_tools(network)) if network else None
        available = {name: [t.name for t in tools] for name, tools in (functions or {}).items()}
        overrides, shown = build_overrides(
            source, label, view or [], system or [], model or [], tool or [], available
        )
        result, diff = asyncio.run(
            run_replay(
                source,
                source.metadata.channel_id,
                at,
                overrides,
                turns=turns,
                timeout=timeout,
                functions=functions,
            )
        )
    except UsageProblem as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        raise typer.Exit(130) from None
    try:
        if as_json:
            record = comparison_json(label, at, result, diff, source.name_for, shown)
            typer.echo(json.dumps(record, ensure_ascii=False, default=str))
        else:
            width = _width()
            for line in comparison_text(label, at, result, diff, source.name_for, shown, width):
                typer.echo(line)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise typer.Exit(0) from None


def _width() -> int:
    import shutil

    return max(shutil.get_terminal_size((120, 24)).columns, 60)


__all__ = [
    "NETWORK_TOOLS",
    "SnapshotSource",
    "answered_summary",
    "build_overrides",
    "comparison_json",
    "comparison_text",
    "divergence_summary",
    "envelope_summary",
    "load_network_tools",
    "openai_available",
    "parse_model",
    "parse_params",
    "parse_tool_policy",
    "parse_view",
    "read_snapshot",
    "recorded_tools",
    "replay_cmd",
    "run_replay",
    "turn_summary",
]

"""Traces in: an OTLP JSON file or directory (ag2net's own ``ag2net export``, AG2's ``/telemetry/spans.jsonl``,
AG2 eval's trace directory) read into a ``Bundle``, so ``open_bundle_hub`` shows it in the workbench.

What the spans say becomes records: each ``network.channel {type}`` span a channel (id, type, creator,
state, label), its protocol events and each ``network.envelope`` span an envelope (id, sender, audience,
event type, causation, time), each ``invoke_agent`` span with its ``chat`` and ``execute_tool`` children a
turn record (agent, trigger, time, view, model, tokens, tools offered; with captured content the system
prompt, the messages sent, the reply, the tool arguments and results), ``agent.lifetime``/``invoke_agent``
names the agents.

What a file lacks is said, never made up: an envelope's content is not in any trace, so its text reads
``NOT_IN_FILE``; a turn exported without content has that as its input and no history or reply; an agent
whose name no span gives is named by its id's tail; ``Bundle.header["notes"]`` lists each such gap in a
sentence, and the workbench shows them when it opens the file.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ag2net.bundle.format import FORMAT, VERSION, Bundle, BundleError

NOT_IN_FILE = "⟨not in the file: the trace holds no content for this⟩"
CHANNEL_TYPES = ("consulting", "conversation", "discussion", "workflow")
PROTOCOL_PREFIX = "ag2.channel."


# ----------------------------------------------------------------------------------------- reading spans


def _value(v: Any) -> Any:
    """An OTLP JSON ``AnyValue`` as a plain value."""
    if not isinstance(v, dict):
        return v
    if "stringValue" in v:
        return v["stringValue"]
    if "intValue" in v:
        return int(v["intValue"])
    if "doubleValue" in v:
        return float(v["doubleValue"])
    if "boolValue" in v:
        return bool(v["boolValue"])
    if "arrayValue" in v:
        return [_value(x) for x in (v["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in v:
        return {kv["key"]: _value(kv.get("value")) for kv in (v["kvlistValue"] or {}).get("values") or []}
    return None


def _attrs(raw: Any) -> dict[str, Any]:
    if isinstance(raw, dict):
        return dict(raw)
    return {a["key"]: _value(a.get("value")) for a in raw or [] if isinstance(a, dict) and "key" in a}


def _ns(value: Any) -> int:
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.isdigit():
        return int(value)
    if isinstance(value, str) and value:
        from ag2net.traces.genai import iso_ns

        return iso_ns(value) or 0
    return 0


def _span(raw: dict[str, Any]) -> dict[str, Any]:
    """One span, whichever of the three layouts it comes in (OTLP JSON, AG2's record, AG2 eval's)."""
    start = raw.get("startTimeUnixNano", raw.get("start_ns", raw.get("start")))
    end = raw.get("endTimeUnixNano", raw.get("end_ns", raw.get("end")))
    status = raw.get("status")
    error = None
    if isinstance(status, dict) and status.get("code") in (2, "STATUS_CODE_ERROR"):
        error = str(status.get("message") or "error")
    elif status == "ERROR":
        error = str(raw.get("status_message") or "error")
    return {
        "span_id": str(raw.get("spanId") or raw.get("span_id") or ""),
        "parent": raw.get("parentSpanId") or raw.get("parent_span_id") or raw.get("parent_id") or None,
        "name": str(raw.get("name") or ""),
        "start": _ns(start),
        "end": _ns(end),
        "attrs": _attrs(raw.get("attributes")),
        "events": [
            {
                "name": str(e.get("name") or ""),
                "at": _ns(e.get("timeUnixNano", e.get("at"))),
                "attrs": _attrs(e.get("attributes")),
            }
            for e in raw.get("events") or []
            if isinstance(e, dict)
        ],
        "error": error,
    }


def _spans_of(doc: Any) -> list[dict[str, Any]]:
    if isinstance(doc, dict) and "resourceSpans" in doc:
        return [
            _span(s)
            for rs in doc.get("resourceSpans") or []
            for ss in (rs or {}).get("scopeSpans") or (rs or {}).get("instrumentationLibrarySpans") or []
            for s in (ss or {}).get("spans") or []
            if isinstance(s, dict)
        ]
    if isinstance(doc, dict) and isinstance(doc.get("spans"), list):
        return [_span(s) for s in doc["spans"] if isinstance(s, dict)]
    if isinstance(doc, dict) and ("span_id" in doc or "spanId" in doc):
        return [_span(doc)]
    if isinstance(doc, list):
        return [sp for item in doc for sp in _spans_of(item)]
    return []


def read_spans(path: str | Path) -> list[dict[str, Any]]:
    """Every span of the file (``.json``: one document; ``.jsonl``: one document or span per line) or of
    every ``.json``/``.jsonl`` file under the directory; ``BundleError`` when there is none."""
    p = Path(path).expanduser()
    if not p.exists():
        raise BundleError(
            f"--open {str(path)!r} does not exist; give an OTLP JSON file or directory, or a bundle"
        )
    files = (
        sorted(f for f in p.rglob("*") if f.suffix in (".json", ".jsonl") and f.is_file())
        if p.is_dir()
        else [p]
    )
    spans: list[dict[str, Any]] = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise BundleError(
                f"--open: {str(f)!r} cannot be read as text ({exc}); give an OTLP JSON file"
            ) from None
        try:
            docs = [json.loads(text)]
        except ValueError:
            try:
                docs = [json.loads(line) for line in text.splitlines() if line.strip()]
            except ValueError:
                raise BundleError(
                    f"--open: {str(f)!r} is neither JSON nor JSON lines; give an OTLP JSON file (ag2net export) "
                    "or AG2's spans.jsonl"
                ) from None
        for doc in docs:
            spans += _spans_of(doc)
    if not spans:
        where = "directory" if p.is_dir() else "file"
        raise BundleError(
            f"--open {str(path)!r}: the {where} holds no spans (no resourceSpans, no span records); give an OTLP "
            "JSON export or AG2's telemetry/spans.jsonl"
        )
    return spans


# ----------------------------------------------------------------------------------------- records


def _iso(ns: int) -> str:
    from ag2net.ids import format_time

    return format_time(datetime.fromtimestamp(ns / 1e9, tz=UTC)) if ns else ""


def _kind(span: dict[str, Any]) -> str:
    kind = span["attrs"].get("ag2.span.type")
    if kind:
        return str(kind)
    name = span["name"]
    for prefix, found in (
        ("network.channel ", "channel"),
        ("network.envelope ", "envelope"),
        ("invoke_agent ", "agent"),
        ("agent.lifetime ", "lifetime"),
        ("chat", "llm"),
        ("execute_tool ", "tool"),
    ):
        if name.startswith(prefix):
            return found
    return ""


def _json_attr(attrs: dict[str, Any], key: str) -> Any:
    value = attrs.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


class _Builder:
    """Spans → the records of a ``Bundle``."""

    def __init__(self, spans: list[dict[str, Any]]) -> None:
        self.spans = spans
        self.by_id = {s["span_id"]: s for s in spans if s["span_id"]}
        self.children: dict[str, list[dict[str, Any]]] = {}
        for s in spans:
            if s["parent"]:
                self.children.setdefault(str(s["parent"]), []).append(s)
        self.channels: dict[str, dict[str, Any]] = {}
        self.envelopes: dict[str, dict[str, Any]] = {}
        self.names: dict[str, str] = {}
        self.agents_seen: dict[str, str] = {}  # agent id → kind
        self.turns: list[dict[str, Any]] = []
        self.notes: list[str] = []

    def build(self) -> Bundle:
        for s in self.spans:
            kind = _kind(s)
            if kind == "channel":
                self._channel(s)
            elif kind == "envelope":
                self._envelope(s, s["attrs"])
            elif kind == "lifetime":
                agent_id = s["attrs"].get("ag2.network.agent_id") or s["attrs"].get("gen_ai.agent.id")
                if agent_id:
                    self.names.setdefault(str(agent_id), s["name"].removeprefix("agent.lifetime ").strip())
        for s in self.spans:
            if _kind(s) == "agent":
                self._turn(s)
        return self._bundle()

    def _channel(self, s: dict[str, Any]) -> None:
        a = s["attrs"]
        cid = str(a.get("ag2.network.channel_id") or a.get("gen_ai.conversation.id") or "")
        if not cid:
            return
        ctype = str(a.get("ag2.network.manifest_type") or s["name"].removeprefix("network.channel ").strip())
        self.channels.setdefault(
            cid,
            {
                "type": ctype,
                "creator": str(a.get("ag2.network.creator_id") or ""),
                "state": str(a.get("ag2net.channel.state") or ("expired" if s["error"] else "closed")),
                "label": a.get("ag2net.channel.label"),
                "start": s["start"],
                "end": s["end"],
            },
        )
        for e in s["events"]:  # the protocol envelopes: invite, ack, opened, closed …
            if e["name"].startswith(PROTOCOL_PREFIX) and e["attrs"].get("ag2.network.envelope_id"):
                self._envelope(
                    {"start": e["at"]},
                    {**e["attrs"], "ag2.network.channel_id": cid, "ag2.network.event_type": e["name"]},
                )

    def _envelope(self, s: dict[str, Any], a: dict[str, Any]) -> None:
        eid = str(a.get("ag2.network.envelope_id") or "")
        cid = str(a.get("ag2.network.channel_id") or "")
        if not eid or not cid or eid in self.envelopes:
            return
        etype = str(a.get("ag2.network.event_type") or "")
        sender = str(a.get("ag2.network.sender_id") or "")
        audience = a.get("ag2.network.audience")
        self.agents_seen.setdefault(sender, "agent")
        for pid in audience or []:
            self.agents_seen.setdefault(str(pid), "agent")
        protocol = etype.startswith(PROTOCOL_PREFIX)
        self.envelopes[eid] = {
            "envelope_id": eid,
            "channel_id": cid,
            "sender_id": sender,
            "audience": [str(x) for x in audience] if isinstance(audience, list) else None,
            "event_type": etype,
            "event_data": {} if protocol else {"text": NOT_IN_FILE},
            "created_at": _iso(s["start"]),
            "causation_id": a.get("ag2.network.causation_id") or None,
        }

    def _turn(self, s: dict[str, Any]) -> None:
        a = s["attrs"]
        agent_id = str(a.get("gen_ai.agent.id") or a.get("ag2.network.agent_id") or "")
        cid = str(a.get("gen_ai.conversation.id") or a.get("ag2.network.channel_id") or "")
        if not agent_id or not cid:
            return
        self.names.setdefault(agent_id, str(a.get("gen_ai.agent.name") or ""))
        self.agents_seen[agent_id] = "agent"
        below = self.children.get(s["span_id"], [])
        chats = sorted(
            (c for c in below if _kind(c) == "llm"),
            key=lambda c: (c["attrs"].get("ag2net.chat.round", 0), c["start"]),
        )
        tools = [c for c in below if _kind(c) == "tool"]
        record = _turn_record(s, agent_id, cid, chats, tools)
        if not record.pop("_content"):
            self._note(
                "turns",
                "turns exported without message content show no history, input or reply (export with --capture-content to have them)",
            )
        self.turns.append(record)

    def _note(self, key: str, sentence: str) -> None:
        if sentence not in self.notes:
            self.notes.append(sentence)

    def _bundle(self) -> Bundle:
        from ag2net.adapters.registry import default_adapters
        from ag2net.envelope import Envelope

        manifests = {a.manifest.type: a.manifest.to_dict() for a in default_adapters()}
        named = [(e["channel_id"], e["sender_id"]) for e in self.envelopes.values()]
        for cid, creator in [*named, *((t["channel_id"], t["agent_id"]) for t in self.turns)]:
            if cid not in self.channels:
                self.channels[cid] = {
                    "type": "",
                    "creator": creator,
                    "state": "closed",
                    "label": None,
                    "start": 0,
                    "end": 0,
                }
        channels, envelopes = [], []
        for cid, ch in self.channels.items():
            rows = sorted(
                (e for e in self.envelopes.values() if e["channel_id"] == cid),
                key=lambda e: (e["created_at"], e["envelope_id"]),
            )
            channels.append(self._channel_record(cid, ch, rows, manifests))
            for seq, e in enumerate(rows, start=1):
                envelopes.append({"channel_id": cid, "seq": seq, "envelope": Envelope(**e).to_dict()})
        if any(md["manifest"]["type"] == "consulting" for md in channels):
            self._note(
                "delegate",
                "a trace has no envelope depths or texts, so the causation tree does not link a delegate call to "
                "the consulting channel it opened",
            )
        if any(e["event_data"] for e in self.envelopes.values()):
            self._note("envelopes", "envelopes carry no content in a trace: their text reads " + NOT_IN_FILE)
        return Bundle(
            header={
                "format": FORMAT,
                "version": VERSION,
                "channel_id": channels[0]["channel_id"] if channels else "",
                "notes": self.notes,
            },
            agents=self._agents(),
            channels=channels,
            envelopes=envelopes,
            turns=self.turns,
        )

    def _channel_record(
        self, cid: str, ch: dict[str, Any], rows: list[dict[str, Any]], manifests: dict[str, Any]
    ) -> dict[str, Any]:
        """A channel's metadata from its span: its participants are everyone its envelopes and turns name."""
        turns = (t["agent_id"] for t in self.turns if t["channel_id"] == cid)
        named = [
            ch["creator"],
            *(e["sender_id"] for e in rows),
            *(x for e in rows for x in e["audience"] or []),
            *turns,
        ]
        people = list(dict.fromkeys(p for p in named if p))
        ctype = (
            ch["type"] if ch["type"] in manifests else ("conversation" if len(people) <= 2 else "discussion")
        )
        if ch["type"] != ctype:
            self._note(
                "type",
                f"a channel of type {ch['type'] or 'unknown'!r} (not one this ag2net has) is shown as a {ctype}",
            )
        created = _iso(ch["start"]) or (rows[0]["created_at"] if rows else "")
        return {
            "channel_id": cid,
            "manifest": manifests[ctype],
            "creator_id": ch["creator"] or (people[0] if people else ""),
            "participants": [
                {"agent_id": p, "role": _role(manifests[ctype], n), "order": n, "joined_at": created}
                for n, p in enumerate(people)
            ],
            "state": ch["state"] if ch["state"] in ("closed", "expired", "active", "pending") else "closed",
            "created_at": created,
            "closed_at": _iso(ch["end"]) or None,
            "labels": {"label": ch["label"]} if ch["label"] else {},
        }

    def _agents(self) -> list[dict[str, Any]]:
        from ag2net.identity import Passport, Resume, Rule

        out, taken = [], set()
        unnamed = 0
        for agent_id in [*self.agents_seen, *(c["creator"] for c in self.channels.values())]:
            if not agent_id or agent_id in taken:
                continue
            name = self.names.get(agent_id) or ""
            if not name or name in {a["name"] for a in out}:
                name, unnamed = f"agent-{agent_id[-6:]}", unnamed + 1
            taken.add(agent_id)
            passport = Passport(name=name).to_dict() | {"agent_id": agent_id}
            out.append(
                {
                    "agent_id": agent_id,
                    "name": name,
                    "kind": "agent",
                    "passport": passport,
                    "resume": Resume().to_dict(),
                    "rule": Rule().to_dict(),
                    "skill_md": None,
                    "owners": [],
                }
            )
        if unnamed:
            self._note(
                "names",
                f"{unnamed} participant(s) have no name in the file: they are shown by their id's tail (agent-…)",
            )
        return out


def _role(manifest: dict[str, Any], order: int) -> str:
    roles = list((manifest.get("participants") or {}).get("roles") or ["participant"])
    return str(roles[0] if order == 0 else roles[-1])


def _usage(chats: list[dict[str, Any]]) -> dict[str, int]:
    """A turn's tokens: its model calls' usage summed."""
    usage = {"input": 0, "output": 0}
    for c in chats:
        for key, name in (
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
            ("cache_read", "gen_ai.usage.cache_read.input_tokens"),
        ):
            if isinstance(c["attrs"].get(name), int):
                usage[key] = usage.get(key, 0) + c["attrs"][name]
    return usage


def _turn_record(
    s: dict[str, Any], agent_id: str, cid: str, chats: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """A turn record from an ``invoke_agent`` span and its ``chat``/``execute_tool`` children."""
    from ag2net.client.turns import TurnRecord
    from ag2net.events import TextInput

    a = s["attrs"]
    first = chats[0]["attrs"] if chats else {}
    messages = _json_attr(first, "gen_ai.input.messages")
    content = isinstance(messages, list)
    record = TurnRecord(
        channel_id=cid,
        agent_id=agent_id,
        trigger_envelope_id=str(a.get("ag2.network.envelope_id") or ""),
        turn_id=str(a.get("ag2.network.turn_id") or s["span_id"]),
        started_at=_iso(s["start"]),
        duration_ms=max(0, s["end"] - s["start"]) / 1e6,
        view=_json_attr(a, "ag2net.turn.view") or {},
        error=s["error"],
    ).to_dict()
    record["tokens"] = _usage(chats)
    record["token_method"] = str(first.get("ag2net.usage.method") or "from the trace")
    model = first.get("gen_ai.request.model") or a.get("gen_ai.request.model")
    record["model_params"] = {"model": model} if model else {}
    record["model_calls"] = len(chats)
    record["tool_calls"] = [
        {
            "id": str(t["attrs"].get("gen_ai.tool.call.id") or ""),
            "name": str(t["attrs"].get("gen_ai.tool.name") or t["name"].removeprefix("execute_tool ")),
            "arguments": str(
                t["attrs"].get("gen_ai.tool.call.arguments") or ("{}" if content else NOT_IN_FILE)
            ),
            "result": t["attrs"].get("gen_ai.tool.call.result", None if content else NOT_IN_FILE),
            "is_error": bool(t["error"]),
        }
        for t in sorted(tools, key=lambda t: t["start"])
    ]
    defs = _json_attr(first, "gen_ai.tool.definitions")
    if isinstance(defs, list):
        record["tools"] = [
            {
                "type": "function",
                "function": {
                    k: d.get(k) for k in ("name", "description", "parameters") if d.get(k) is not None
                },
            }
            for d in defs
            if isinstance(d, dict)
        ]
    else:
        record["tools"] = [
            {"type": "function", "function": {"name": n}}
            for n in first.get("ag2net.chat.tools_offered") or []
        ]
    if not content:
        record["inputs"] = [TextInput(NOT_IN_FILE).to_dict()]
        record["_content"] = False
        return record
    system = _json_attr(first, "gen_ai.system_instructions")
    if isinstance(system, list):
        record["system_prompt"] = "\n".join(
            str(p.get("content") or "") for p in system if isinstance(p, dict)
        )
    history = _events(messages)
    if history and history[-1]["type"] == "model_request":
        record["inputs"] = history.pop()["parts"]
    record["history"] = history
    last = _json_attr(chats[-1]["attrs"], "gen_ai.output.messages") if chats else None
    texts = [
        p.get("content")
        for m in last or []
        if isinstance(m, dict)
        for p in m.get("parts") or []
        if isinstance(p, dict) and p.get("type") == "text"
    ]
    record["reply"] = "\n".join(str(t) for t in texts if t) or None
    record["_content"] = True
    return record


def _events(messages: list[Any]) -> list[dict[str, Any]]:
    """``gen_ai.input.messages`` (parts form, or ``content`` strings) as the turn record's events."""
    from ag2net.events import ModelMessage, ModelRequest, TextInput, ToolCallEvent, ToolResultEvent

    names: dict[str, str] = {}
    out: list[Any] = []
    for m in messages:
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        parts = m.get("parts")
        if not isinstance(parts, list):
            parts = [{"type": "text", "content": m.get("content")}] if m.get("content") is not None else []
        for p in parts:
            if not isinstance(p, dict):
                continue
            kind = p.get("type")
            if kind == "text" and role in ("user", "system"):
                out.append(ModelRequest([TextInput(str(p.get("content") or ""))]))
            elif kind == "text":
                out.append(ModelMessage(str(p.get("content") or "")))
            elif kind == "tool_call":
                names[str(p.get("id"))] = str(p.get("name") or "")
                args = p.get("arguments")
                out.append(
                    ToolCallEvent(
                        str(p.get("name") or ""),
                        args if isinstance(args, str) else json.dumps(args),
                        id=str(p.get("id")),
                    )
                )
            elif kind == "tool_call_response":
                pid = str(p.get("id"))
                response = p.get("response")
                out.append(
                    ToolResultEvent(
                        pid,
                        names.get(pid, ""),
                        response if isinstance(response, str) else json.dumps(response),
                    )
                )
    return [e.to_dict() for e in out]


def bundle_from_traces(path: str | Path) -> Bundle:
    """The traces at ``path`` (an OTLP JSON file, a ``.jsonl`` of spans, or a directory of them) as a
    ``Bundle``; ``BundleError`` (one sentence) when there are none or no channel can be made of them."""
    bundle = _Builder(read_spans(path)).build()
    if not bundle.channels:
        raise BundleError(
            f"--open {str(path)!r}: its spans name no channel (no network.channel, network.envelope or "
            "invoke_agent span with a channel id); give traces of an ag2net or AG2 network"
        )
    return bundle


__all__ = ["NOT_IN_FILE", "bundle_from_traces", "read_spans"]

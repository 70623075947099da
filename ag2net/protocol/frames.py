"""Frames: the vocabulary spoken between a client and the hub, with the ag2 1.2.1 JSON shapes."""

from __future__ import annotations

import json
import re
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, ClassVar

from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError


@dataclass(slots=True)
class HelloFrame:
    name: str
    auth_scheme: str = "none"
    auth_claim: dict[str, Any] = field(default_factory=dict)
    since_envelope_id: str | None = None
    kind: ClassVar[str] = "hello"


#: How deeply a frame may nest JSON objects and arrays (a request uses 4 levels before its data).
MAX_JSON_DEPTH = 100


@dataclass(slots=True)
class WelcomeFrame:
    endpoint_id: str
    hub_time: str
    kind: ClassVar[str] = "welcome"


@dataclass(slots=True)
class PingFrame:
    kind: ClassVar[str] = "ping"


@dataclass(slots=True)
class PongFrame:
    kind: ClassVar[str] = "pong"


@dataclass(slots=True)
class RequestFrame:
    request_id: str
    op: str
    params: dict[str, Any] = field(default_factory=dict)
    kind: ClassVar[str] = "request"


@dataclass(slots=True)
class ResponseFrame:
    request_id: str
    ok: bool
    result: Any = None
    error_code: str = ""
    error_message: str = ""
    #: Sent once, by a ``--token`` server, to the client that registered an identity and asked for it;
    #: absent otherwise (ag2 1.2.1 clients never see the field).
    identity_secret: str | None = None
    kind: ClassVar[str] = "response"


@dataclass(slots=True)
class ErrorFrame:
    code: str
    message: str
    envelope_id: str | None = None
    kind: ClassVar[str] = "error"


@dataclass(slots=True)
class NotifyFrame:
    envelope: Envelope
    recipient_id: str = ""
    kind: ClassVar[str] = "notify"


@dataclass(slots=True)
class ReceiptFrame:
    envelope_id: str
    status: str  # "ack" | "nack"
    recipient_id: str = ""
    channel_id: str = ""
    reason: str = ""
    kind: ClassVar[str] = "receipt"


Frame = (
    HelloFrame
    | WelcomeFrame
    | PingFrame
    | PongFrame
    | RequestFrame
    | ResponseFrame
    | ErrorFrame
    | NotifyFrame
    | ReceiptFrame
)

FRAME_TYPES: dict[str, type] = {
    cls.kind: cls
    for cls in (
        HelloFrame,
        WelcomeFrame,
        PingFrame,
        PongFrame,
        RequestFrame,
        ResponseFrame,
        ErrorFrame,
        NotifyFrame,
        ReceiptFrame,
    )
}
_FIELDS = {kind: {f.name for f in fields(cls)} for kind, cls in FRAME_TYPES.items()}


def encode_frame(frame: Any) -> dict[str, Any]:
    """The frame as a JSON-able dict with its ``kind`` (the nested envelope flattened to a dict)."""
    if isinstance(frame, NotifyFrame):
        data: dict[str, Any] = {"envelope": frame.envelope.to_dict(), "recipient_id": frame.recipient_id}
    else:
        data = asdict(frame)
        if isinstance(frame, ResponseFrame) and frame.identity_secret is None:
            del data["identity_secret"]  # the ag2 1.2.1 shape, unless a secret is being handed over
    data["kind"] = frame.kind
    return data


class FrameDecodeError(ProtocolError, ValueError, TypeError):
    """A dict that is not a frame. A ``ProtocolError`` (wire code ``protocol_error``); also a ``ValueError``
    and a ``TypeError``, the exceptions ag2 1.2.1's ``decode_frame`` raises for an unknown kind and for a
    missing or unexpected field, so code written against either keeps catching it."""


#: The fields each frame kind must carry (no default).
_REQUIRED = {
    kind: [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
    for kind, cls in FRAME_TYPES.items()
}


#: The keys each frame kind's JSON object may carry: its fields and ``kind``.
_KEYS = {kind: frozenset(names | {"kind"}) for kind, names in _FIELDS.items()}


def decode_frame(data: dict[str, Any]) -> Frame:
    """Rebuild a frame from the dict ``encode_frame`` made (``kind`` says which); raises
    ``FrameDecodeError`` (a ``ProtocolError``) naming the field that is missing, unknown or mistyped."""
    if not isinstance(data, dict):
        raise FrameDecodeError(f"frame must be a JSON object, got {type(data).__name__}")
    kind = data.get("kind")
    if not isinstance(kind, str) or kind not in FRAME_TYPES:
        raise FrameDecodeError(f"unknown frame kind: {kind!r}")  # ag2's words (the field is 'kind')
    cls = FRAME_TYPES[kind]
    if not _KEYS[kind].issuperset(data):
        unknown = sorted(set(data) - _KEYS[kind])
        raise FrameDecodeError(
            f"malformed {kind} frame: unknown field {unknown[0]!r}; a {kind} frame has only "
            + ", ".join(repr(n) for n in sorted(_FIELDS[kind]))
        )
    for name in _REQUIRED[kind]:
        if name not in data:
            raise FrameDecodeError(f"malformed {kind} frame: missing required field {name!r}")
    rest = dict(data)
    del rest["kind"]
    if kind == "notify":
        env = rest["envelope"]
        if not isinstance(env, dict):
            raise FrameDecodeError("malformed notify frame: field 'envelope' must be an envelope object")
        try:
            rest["envelope"] = Envelope.from_dict(env)
        except FrameDecodeError:
            raise
        except (ProtocolError, ValueError, TypeError, KeyError) as exc:
            raise FrameDecodeError(f"malformed notify frame: field 'envelope': {exc}") from None
    frame = cls(**rest)
    _check_fields(frame)
    return frame


_NONE = type(None)
#: Each frame's fields whose type decoding does not check, with the types they may hold, in checking order.
_FIELD_TYPES: dict[type, tuple[tuple[str, type | tuple[type, ...]], ...]] = {
    HelloFrame: (
        ("name", str),
        ("auth_scheme", str),
        ("auth_claim", dict),
        ("since_envelope_id", (str, _NONE)),
    ),
    RequestFrame: (("request_id", str), ("op", str), ("params", dict)),
    ReceiptFrame: tuple(
        (name, str) for name in ("envelope_id", "status", "recipient_id", "channel_id", "reason")
    ),
    ResponseFrame: (
        ("request_id", str),
        ("ok", bool),
        ("error_code", str),
        ("error_message", str),
        ("identity_secret", (str, _NONE)),
    ),
    ErrorFrame: (("code", str), ("message", str), ("envelope_id", (str, _NONE))),
    WelcomeFrame: (("endpoint_id", str), ("hub_time", str)),
    NotifyFrame: (("recipient_id", str),),
}


def _check_fields(frame: Any) -> None:
    for name, types in _FIELD_TYPES.get(type(frame), ()):
        if not isinstance(getattr(frame, name), types):
            raise FrameDecodeError(f"malformed {frame.kind} frame: {name}")


def frame_to_json(frame: Any) -> str:
    return json.dumps(encode_frame(frame), sort_keys=True)


_KEEP_BRACKETS = {c: None for c in range(128) if chr(c) not in "[]{}"} | {ord("{"): "[", ord("}"): "]"}
_TOP_STRING_FIELD = re.compile(r'"(request_id|kind)"\s*:\s*("[^"\\]*(?:\\.[^"\\]*)*")')


def nesting_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON ``text`` nests arrays and objects deeper than ``limit``, found without parsing it
    (a parser recurses once per level: a hostile message could exhaust the stack). Every step is a C-level
    string operation; for text that is not JSON the answer does not matter (the parser refuses it)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # the common case: too few brackets to be that deep
    # Outside strings only: drop escape pairs, then every '"' delimits a string; keep the parts between.
    structure = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])
    brackets = structure.translate(_KEEP_BRACKETS)  # depth does not depend on the bracket kind: all '[' ']'
    deeper = "[" * (limit + 1)
    for _ in range(limit):
        if not brackets:
            return False
        if deeper in brackets:
            return True  # more than `limit` opened in a row
        inner = brackets.replace("[]", "")  # each pass removes exactly the innermost level
        if len(inner) == len(brackets):
            return False  # unbalanced: not JSON, the parser says so
        brackets = inner
    return bool(brackets)


class FrameTooDeep(ProtocolError):
    """A frame nests deeper than ``MAX_JSON_DEPTH``: a ``protocol_error`` on the wire."""


def nesting_error(limit: int = MAX_JSON_DEPTH) -> FrameTooDeep:
    return FrameTooDeep(
        f"frame nests JSON arrays/objects deeper than {limit} levels (the limit is {limit}); send flatter data"
    )


def top_level_fields(text: str) -> dict[str, str]:
    """``kind`` and ``request_id`` of a frame that cannot be parsed whole (too deep): read from the
    string fields at the top level of the outer object, so an error can still name its request."""
    found: dict[str, str] = {}
    for tried, match in enumerate(_TOP_STRING_FIELD.finditer(text)):
        if tried >= 8:
            break  # a frame puts these first; deep copies further in are not worth a scan each
        name = match.group(1)
        if name in found:
            continue
        parts = text[: match.start()].replace("\\\\", "").replace('\\"', "").split('"')
        if len(parts) % 2 == 0:
            continue  # the match starts inside a string
        before = "".join(parts[::2])
        if before.count("{") + before.count("[") - before.count("}") - before.count("]") != 1:
            continue
        try:
            value = json.loads(match.group(2))
        except ValueError:
            continue
        found[name] = value
        if len(found) == 2:
            break
    return found


def parse_json(text: str | bytes) -> Any:
    """JSON text to data; ``ProtocolError`` when it is not JSON or nests deeper than ``MAX_JSON_DEPTH``."""
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"frame is not valid JSON: not UTF-8 ({exc.reason})") from None
    if not isinstance(text, str):
        raise ProtocolError(f"frame is not valid JSON: a {type(text).__name__}")
    if nesting_exceeds(text):
        raise nesting_error()
    try:
        return json.loads(text)
    except RecursionError:
        raise nesting_error() from None
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"frame is not valid JSON: {exc}") from None


def frame_from_json(text: str | bytes) -> Any:
    return decode_frame(parse_json(text))


__all__ = [
    "FRAME_TYPES",
    "MAX_JSON_DEPTH",
    "ErrorFrame",
    "Frame",
    "FrameDecodeError",
    "FrameTooDeep",
    "HelloFrame",
    "NotifyFrame",
    "PingFrame",
    "PongFrame",
    "ReceiptFrame",
    "RequestFrame",
    "ResponseFrame",
    "WelcomeFrame",
    "decode_frame",
    "encode_frame",
    "frame_from_json",
    "frame_to_json",
    "nesting_error",
    "nesting_exceeds",
    "parse_json",
    "top_level_fields",
]

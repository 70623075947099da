"""Frames: the vocabulary spoken between a client and the hub, with the ag2 1.2.1 JSON shapes."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
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
    data["kind"] = frame.kind
    return data


def decode_frame(data: dict[str, Any]) -> Any:
    """Rebuild a frame from its dict; raises ``ProtocolError`` naming what is wrong."""
    if not isinstance(data, dict):
        raise ProtocolError(f"frame must be a JSON object, got {type(data).__name__}")
    rest = dict(data)
    kind = rest.pop("kind", None)
    cls = FRAME_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown frame kind: {kind!r}")
    unknown = sorted(set(rest) - _FIELDS[kind])
    if unknown:
        raise ProtocolError(f"malformed {kind} frame: unknown field {unknown[0]!r}")
    if kind == "notify":
        env = rest.get("envelope")
        if not isinstance(env, dict):
            raise ProtocolError("malformed notify frame: envelope")
        rest["envelope"] = Envelope.from_dict(env)
    try:
        frame = cls(**rest)
    except TypeError:
        raise ProtocolError(f"malformed {kind} frame: missing required field") from None
    _check_fields(frame)
    return frame


def _check_fields(frame: Any) -> None:
    kind = frame.kind

    def bad(name: str) -> ProtocolError:
        return ProtocolError(f"malformed {kind} frame: {name}")

    if isinstance(frame, HelloFrame):
        if not isinstance(frame.name, str):
            raise bad("name")
        if not isinstance(frame.auth_scheme, str):
            raise bad("auth_scheme")
        if not isinstance(frame.auth_claim, dict):
            raise bad("auth_claim")
        if frame.since_envelope_id is not None and not isinstance(frame.since_envelope_id, str):
            raise bad("since_envelope_id")
    elif isinstance(frame, RequestFrame):
        if not isinstance(frame.request_id, str):
            raise bad("request_id")
        if not isinstance(frame.op, str):
            raise bad("op")
        if not isinstance(frame.params, dict):
            raise bad("params")
    elif isinstance(frame, ReceiptFrame):
        for name in ("envelope_id", "status", "recipient_id", "channel_id", "reason"):
            if not isinstance(getattr(frame, name), str):
                raise bad(name)
    elif isinstance(frame, ResponseFrame):
        if not isinstance(frame.request_id, str) or not isinstance(frame.ok, bool):
            raise bad("request_id")
    elif isinstance(frame, ErrorFrame):
        if not isinstance(frame.code, str) or not isinstance(frame.message, str):
            raise bad("code")
    elif isinstance(frame, WelcomeFrame) and not isinstance(frame.endpoint_id, str):
        raise bad("endpoint_id")


def frame_to_json(frame: Any) -> str:
    return json.dumps(encode_frame(frame), sort_keys=True)


def frame_from_json(text: str | bytes) -> Any:
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise ProtocolError(f"frame is not valid JSON: {exc}") from None
    return decode_frame(data)


__all__ = [
    "FRAME_TYPES",
    "ErrorFrame",
    "Frame",
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
]

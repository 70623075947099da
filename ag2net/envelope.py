"""The envelope: the one JSON record every channel's WAL is made of, its event types and its codec.

The wire shape matches ag2 1.2.1 exactly (field names, sorted keys). Admission checks (SPEC §4)
live here too so the hub, the transport and the workbench all refuse bad input with one sentence.
"""

from __future__ import annotations

import dataclasses
import json
import operator
import re
from dataclasses import dataclass, fields
from typing import Any, Literal

from ag2net.errors import ProtocolError

Priority = Literal["background", "normal", "urgent"]
PRIORITIES: tuple[str, ...] = ("urgent", "normal", "background")
PRIORITY_RANK: dict[str, int] = {"urgent": 0, "normal": 1, "background": 2}

EV_TEXT = "ag2.msg.text"
EV_PACKET = "ag2.packet"
EV_CHANNEL_INVITE = "ag2.channel.invite"
EV_CHANNEL_INVITE_ACK = "ag2.channel.invite.ack"
EV_CHANNEL_INVITE_REJECT = "ag2.channel.invite.reject"
EV_CHANNEL_OPENED = "ag2.channel.opened"
EV_CHANNEL_CLOSED = "ag2.channel.closed"
EV_CHANNEL_EXPIRED = "ag2.channel.expired"
EV_EXPECTATION_VIOLATED = "ag2.expectation.violated"
EV_CONTEXT_SET = "ag2.context.set"
EV_TASK_CANCEL_REQUEST = "ag2.task.cancel_request"
EV_TASK_CANCELLED = "ag2.task.cancelled"

ALL_EVENT_TYPES: tuple[str, ...] = (
    EV_TEXT,
    EV_PACKET,
    EV_CHANNEL_INVITE,
    EV_CHANNEL_INVITE_ACK,
    EV_CHANNEL_INVITE_REJECT,
    EV_CHANNEL_OPENED,
    EV_CHANNEL_CLOSED,
    EV_CHANNEL_EXPIRED,
    EV_EXPECTATION_VIOLATED,
    EV_CONTEXT_SET,
    EV_TASK_CANCEL_REQUEST,
    EV_TASK_CANCELLED,
)
#: ``ag2.channel.*``: the hub's channel lifecycle events
CHANNEL_EVENTS: frozenset[str] = frozenset(e for e in ALL_EVENT_TYPES if e.startswith("ag2.channel."))

MAX_EVENT_DATA_BYTES = 1024 * 1024
MAX_EVENT_TYPE_CHARS = 200
MAX_ID_CHARS = 200


def is_channel_event(event_type: str) -> bool:
    """``ag2.channel.*``: the hub's channel lifecycle protocol."""
    return event_type.startswith("ag2.channel.")


def is_task_event(event_type: str) -> bool:
    """``ag2.task.*``: task cancellation protocol."""
    return event_type.startswith("ag2.task.")


_PROTOCOL_PREFIXES = ("ag2.channel.", "ag2.task.")


def is_protocol_event(event_type: str) -> bool:
    """Channel or task protocol events: allowed while pending, never counted against inboxes."""
    return event_type.startswith(_PROTOCOL_PREFIXES)


@dataclass(slots=True)
class Envelope:
    """One message on a channel. The hub stamps ``envelope_id`` and ``created_at`` at admission."""

    channel_id: str
    sender_id: str
    audience: list[str] | None
    event_type: str
    event_data: dict[str, Any]
    envelope_id: str = ""
    task_id: str | None = None
    causation_id: str | None = None
    trace_id: str | None = None
    priority: Priority = "normal"
    depth: int = 0
    idempotency_key: str | None = None
    created_at: str = ""
    ttl_seconds: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel_id": self.channel_id,
            "sender_id": self.sender_id,
            "audience": None if self.audience is None else list(self.audience),
            "event_type": self.event_type,
            "event_data": self.event_data,
            "envelope_id": self.envelope_id,
            "task_id": self.task_id,
            "causation_id": self.causation_id,
            "trace_id": self.trace_id,
            "priority": self.priority,
            "depth": self.depth,
            "idempotency_key": self.idempotency_key,
            "created_at": self.created_at,
            "ttl_seconds": self.ttl_seconds,
        }

    def to_json(self) -> str:
        try:
            text = _fast_json(self)
        except (TypeError, ValueError, RecursionError):  # json.dumps says what (NaN is allowed here)
            text = None
        if text is None:
            return json.dumps(self.to_dict(), sort_keys=True)
        return text

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Envelope:
        if not isinstance(data, dict):
            raise ProtocolError(f"envelope must be a JSON object, got {type(data).__name__}")
        unknown = sorted(set(data) - _FIELD_NAMES)
        if unknown:
            raise ProtocolError(f"envelope has unknown field {unknown[0]!r}; remove it")
        missing = [name for name in _REQUIRED if name not in data]
        if missing:
            raise ProtocolError(f"envelope is missing required field {missing[0]!r}")
        env = cls(**data)
        check_shape(env)
        return env

    @classmethod
    def from_json(cls, text: str | bytes) -> Envelope:
        try:
            data = json.loads(text)
        except (ValueError, TypeError) as exc:
            raise ProtocolError(f"envelope is not valid JSON: {exc}") from None
        return cls.from_dict(data)

    def copy(self) -> Envelope:
        """A shallow copy whose audience list is its own."""
        return Envelope(
            self.channel_id,
            self.sender_id,
            None if self.audience is None else list(self.audience),
            self.event_type,
            self.event_data,
            self.envelope_id,
            self.task_id,
            self.causation_id,
            self.trace_id,
            self.priority,
            self.depth,
            self.idempotency_key,
            self.created_at,
            self.ttl_seconds,
        )


def invite_ack(invite: Envelope, sender_id: str) -> Envelope:
    """``sender_id``'s acceptance of a channel invite (what the default handler and a human client post)."""
    return Envelope(
        channel_id=invite.channel_id,
        sender_id=sender_id,
        audience=None,
        event_type=EV_CHANNEL_INVITE_ACK,
        event_data={"channel_id": invite.channel_id},
        causation_id=invite.envelope_id,
    )


_FIELD_NAMES = frozenset(f.name for f in fields(Envelope))
_REQUIRED = ("channel_id", "sender_id", "audience", "event_type", "event_data")


def visible_to(envelope: Envelope, participant_id: str) -> bool:
    """Whether ``participant_id`` may see ``envelope``.

    The sender always sees its own; ``None`` audience is everyone; an empty list is the sender only.
    """
    if envelope.sender_id == participant_id:
        return True
    audience = envelope.audience
    return audience is None or participant_id in audience


# --- text the store can encode: no surrogate code points (U+D800..U+DFFF) ---------------------------

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def bad_text_message(field: str, value: str) -> str:
    """The one sentence refusing a string that holds a surrogate code point."""
    found = _SURROGATE.search(value)
    code = f"U+{ord(found.group()):04X}" if found else "a surrogate"
    return (
        f"{field} holds the lone surrogate {code}, which is not valid Unicode text and cannot be stored; "
        "send well-formed UTF-8 text"
    )


def check_text(value: str, field: str) -> None:
    """Refuse a string holding a surrogate code point (lone surrogates, e.g. JSON ``"\\ud800"``)."""
    if not value.isascii() and _SURROGATE.search(value) is not None:
        raise ProtocolError(bad_text_message(field, value))


def find_bad_text(value: Any, path: str) -> tuple[str, str] | None:
    """``(path, string)`` of the first string (value or key) holding a surrogate, searched depth first.

    Walks dicts, lists, tuples and dataclass records (the in-process form of op params); iterative, and
    each container is visited once, so cycles and deep nesting cannot make it recurse or loop.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    seen: set[int] = set()
    while stack:
        item, where = stack.pop()
        if isinstance(item, str):
            if not item.isascii() and _SURROGATE.search(item) is not None:
                return where, item
            continue
        if item is None or isinstance(item, (bool, int, float)):
            continue
        if isinstance(item, dict):
            if id(item) in seen:
                continue
            seen.add(id(item))
            children = []
            for key, child in item.items():
                if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key) is not None:
                    return f"a key of {where}", key
                children.append((child, f"{where}.{key}"))
            stack.extend(reversed(children))
        elif isinstance(item, (list, tuple)):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(reversed([(child, f"{where}[{i}]") for i, child in enumerate(item)]))
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(
                reversed(
                    [(getattr(item, f.name, None), f"{where}.{f.name}") for f in dataclasses.fields(item)]
                )
            )
    return None


def check_text_tree(value: Any, path: str) -> None:
    """Refuse ``value`` when any string in it (keys included) holds a surrogate; the error names its path."""
    found = find_bad_text(value, path)
    if found is not None:
        raise ProtocolError(bad_text_message(*found))


def _optional_str(value: Any, name: str) -> None:
    if value is not None:
        if not isinstance(value, str):
            raise ProtocolError(f"{name} must be a string or null, got {type(value).__name__}")
        check_text(value, name)


def check_shape(env: Envelope) -> None:
    """Type and size checks on every field except ``event_data`` serialisability (see ``encode``)."""
    if _plain_shape(env):
        return
    _check_shape(env)


_PLAIN_FIELDS = operator.attrgetter(
    "channel_id",
    "sender_id",
    "event_type",
    "envelope_id",
    "created_at",
    "priority",
    "depth",
    "ttl_seconds",
    "event_data",
)


def _plain_fields(env: Envelope) -> tuple[str, str, str, str, str, str, int, int | None, dict] | None:
    """``(channel_id, sender_id, event_type, envelope_id, created_at, priority, depth, ttl_seconds,
    event_data)`` when each is of its plain type (``str``, ``int``, ``int`` or None, ``dict``; no
    subclass), else None: the fast paths below take only those."""
    fields = _PLAIN_FIELDS(env)
    channel_id, sender_id, event_type, envelope_id, created_at, priority, depth, ttl, event_data = fields
    if (
        type(channel_id) is str
        and type(sender_id) is str
        and type(event_type) is str
        and type(envelope_id) is str
        and type(created_at) is str
        and type(priority) is str
        and type(depth) is int
        and (ttl is None or type(ttl) is int)
        and type(event_data) is dict
    ):
        return fields
    return None


def _plain_shape(env: Envelope) -> bool:
    """Whether ``env`` passes ``check_shape`` on sight: every field of its plain type and in bounds, every
    string ASCII (so no surrogate). Anything else takes the field-by-field checks and their messages."""
    plain = _plain_fields(env)
    if plain is None:
        return False
    channel_id, sender_id, event_type, envelope_id, created_at, priority, depth, ttl, _ = plain
    if not (
        event_type
        and len(channel_id) <= MAX_ID_CHARS
        and len(sender_id) <= MAX_ID_CHARS
        and len(event_type) <= MAX_EVENT_TYPE_CHARS
        and priority in PRIORITY_RANK
        and depth >= 0
        and (ttl is None or ttl >= 0)
        and (channel_id + sender_id + event_type + envelope_id + created_at).isascii()
    ):
        return False
    audience = env.audience
    if audience is not None:
        if type(audience) is not list:
            return False
        for item in audience:
            if type(item) is not str or not item or not item.isascii():
                return False
    for value in (env.task_id, env.causation_id, env.trace_id, env.idempotency_key):
        if value is not None and (type(value) is not str or not value.isascii()):
            return False
    return True


def _check_shape(env: Envelope) -> None:
    for name in ("channel_id", "sender_id"):
        value = getattr(env, name)
        if not isinstance(value, str):
            raise ProtocolError(f"{name} must be a string, got {type(value).__name__}")
        if len(value) > MAX_ID_CHARS:
            raise ProtocolError(f"{name} is longer than {MAX_ID_CHARS} characters")
        check_text(value, name)
    if not isinstance(env.event_type, str) or not env.event_type:
        raise ProtocolError("event_type must be a non-empty string such as 'myapp.review_request'")
    if len(env.event_type) > MAX_EVENT_TYPE_CHARS:
        raise ProtocolError(
            f"event_type is {len(env.event_type)} characters long; at most {MAX_EVENT_TYPE_CHARS} are allowed"
        )
    check_text(env.event_type, "event_type")
    if not isinstance(env.event_data, dict):
        raise ProtocolError(f"event_data must be a JSON object, got {type(env.event_data).__name__}")
    audience = env.audience
    if audience is not None:
        if not isinstance(audience, list):
            raise ProtocolError(
                f"audience must be a list of participant ids or null, got {type(audience).__name__}"
            )
        for i, item in enumerate(audience):
            if not isinstance(item, str) or not item:
                raise ProtocolError(f"audience[{i}] must be a non-empty string, got {item!r}")
            check_text(item, f"audience[{i}]")
    if env.priority not in PRIORITY_RANK:
        raise ProtocolError(f"priority must be one of 'urgent', 'normal', 'background', got {env.priority!r}")
    if isinstance(env.depth, bool) or not isinstance(env.depth, int) or env.depth < 0:
        raise ProtocolError(f"depth must be a non-negative integer, got {env.depth!r}")
    if env.ttl_seconds is not None and (
        isinstance(env.ttl_seconds, bool) or not isinstance(env.ttl_seconds, int) or env.ttl_seconds < 0
    ):
        raise ProtocolError(f"ttl_seconds must be a non-negative integer or null, got {env.ttl_seconds!r}")
    for name in ("envelope_id", "created_at"):
        value = getattr(env, name)
        if not isinstance(value, str):
            raise ProtocolError(f"{name} must be a string")
        check_text(value, name)
    _optional_str(env.task_id, "task_id")
    _optional_str(env.causation_id, "causation_id")
    _optional_str(env.trace_id, "trace_id")
    _optional_str(env.idempotency_key, "idempotency_key")


_JSON_KEY_TYPES = (str, int, float, bool, type(None))
_LEAVE = object()


def _find_unserialisable(value: Any, path: str) -> str | None:
    """Path and type of the first value json cannot encode, e.g. ``datetime at event_data.when``.

    Iterative, so a cycle or a structure nested past the recursion limit is reported, not re-raised.
    """
    stack: list[tuple[Any, str]] = [(value, path)]
    on_path: set[int] = set()  # containers enclosing the current item: a repeat is a cycle
    while stack:
        item, where = stack.pop()
        if where is _LEAVE:
            on_path.discard(item)
            continue
        if item is None or isinstance(item, (str, bool, int)):
            continue
        if isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"non-finite float at {where}"
            continue
        if isinstance(item, (dict, list, tuple)):
            if id(item) in on_path:
                return f"circular reference at {where}"
            on_path.add(id(item))
            stack.append((id(item), _LEAVE))  # type: ignore[arg-type]
            if isinstance(item, dict):
                children = []
                for key, child in item.items():
                    if not isinstance(key, _JSON_KEY_TYPES):
                        return f"{type(key).__name__} key at {where}"
                    if isinstance(key, float) and (key != key or key in (float("inf"), float("-inf"))):
                        return f"non-finite float key at {where}"
                    children.append((child, f"{where}.{key}"))
            else:
                children = [(child, f"{where}[{i}]") for i, child in enumerate(item)]
            stack.extend(reversed(children))
            continue
        return f"{type(item).__name__} at {where}"
    return None


def check_event_data(event_data: Any) -> str:
    """Validate ``event_data`` and return its compact JSON encoding (raises ``ProtocolError``)."""
    if not isinstance(event_data, dict):
        raise ProtocolError(f"event_data must be a JSON object, got {type(event_data).__name__}")
    try:
        encoded = json.dumps(event_data, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        where = _find_unserialisable(event_data, "event_data")
        if where is None:
            raise ProtocolError("event_data is nested too deeply to encode; flatten it") from None
        if len(where) > 240:
            where = where[:160] + "…" + where[-60:]
        raise ProtocolError(f"event_data is not JSON-serialisable: {where}") from None
    if len(encoded) > MAX_EVENT_DATA_BYTES and len(encoded.encode()) > MAX_EVENT_DATA_BYTES:
        raise ProtocolError(
            f"event_data is {len(encoded.encode())} bytes encoded; at most {MAX_EVENT_DATA_BYTES} (1 MiB) are allowed"
        )
    if "\\ud" in encoded:  # a surrogate code point, or a character beyond U+FFFF (see encode_envelope)
        check_text_tree(event_data, "event_data")
    return encoded


# The envelope's JSON is what ``json.dumps(env.to_dict(), sort_keys=True)`` writes (ag2's ``to_json``), byte
# for byte. Its keys are fixed, so the fast path below writes them as literals and encodes only the values
# (the C encoder spent most of its time on the 14 keys and their sorting); an envelope with a field of an
# unexpected type (a str subclass, a bool depth...) takes the json module's path instead.
_encode_str = json.encoder.encode_basestring_ascii
_c_make_encoder = getattr(json.encoder, "c_make_encoder", None)
_json_default = json.JSONEncoder().default


def _sorted_json(value: Any) -> str:
    """``json.dumps(value, sort_keys=True, allow_nan=False)``, without building a ``JSONEncoder`` per call."""
    if type(value) is dict and len(value) == 1:  # a text post's {"text": ...}: written directly
        [(key, item)] = value.items()
        if type(key) is str:
            kind = type(item)
            if kind is str:
                return "{" + _encode_str(key) + ": " + _encode_str(item) + "}"
            if kind is int:
                return "{" + _encode_str(key) + ": " + int.__repr__(item) + "}"
    if _c_make_encoder is None:  # pragma: no cover - CPython always has the C encoder
        return json.dumps(value, sort_keys=True, allow_nan=False)
    # a fresh markers dict per call: the C encoder leaves its entries behind when it raises
    encoder = _c_make_encoder({}, _json_default, _encode_str, None, ": ", ", ", True, False, False)
    return "".join(encoder(value, 0))


def _opt_str(value: Any) -> str | None:
    if value is None:
        return "null"
    if type(value) is str:
        return _encode_str(value)
    return None


def _fast_json(env: Envelope) -> str | None:
    """The envelope's sorted-keys JSON (``allow_nan=False`` in ``event_data``), or ``None`` when a field's
    type is not the plain one (then the caller encodes with ``json.dumps``). Raises as ``json.dumps`` does
    for an ``event_data`` json cannot encode."""
    plain = _plain_fields(env)
    if plain is None:
        return None
    channel_id, sender_id, event_type, envelope_id, created_at, priority, depth, ttl, event_data = plain
    ttl_text = "null" if ttl is None else int.__repr__(ttl)
    audience = env.audience
    if audience is None:
        audience_text = "null"
    elif type(audience) is list and all(type(a) is str for a in audience):
        audience_text = "[" + ", ".join([_encode_str(a) for a in audience]) + "]"
    else:
        return None
    causation = _opt_str(env.causation_id)
    idempotency = _opt_str(env.idempotency_key)
    task = _opt_str(env.task_id)
    trace = _opt_str(env.trace_id)
    if causation is None or idempotency is None or task is None or trace is None:
        return None
    return (
        f'{{"audience": {audience_text}, "causation_id": {causation}, "channel_id": {_encode_str(channel_id)}, '
        f'"created_at": {_encode_str(created_at)}, "depth": {int.__repr__(depth)}, '
        f'"envelope_id": {_encode_str(envelope_id)}, "event_data": {_sorted_json(event_data)}, '
        f'"event_type": {_encode_str(event_type)}, "idempotency_key": {idempotency}, '
        f'"priority": {_encode_str(priority)}, "sender_id": {_encode_str(sender_id)}, "task_id": {task}, '
        f'"trace_id": {trace}, "ttl_seconds": {ttl_text}}}'
    )


def encode_envelope(env: Envelope) -> str:
    """The envelope's wire JSON (sorted keys), checking ``event_data`` on the way (one encode, not two).

    Raises ``ProtocolError`` naming the field when ``event_data`` is not JSON, is over 1 MiB, or holds a
    string with a lone surrogate (text no store can encode).
    """
    try:
        text = _fast_json(env)
        if text is None:
            text = json.dumps(env.to_dict(), sort_keys=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        check_event_data(env.event_data)  # raises with the path of the culprit
        raise
    if len(text) > MAX_EVENT_DATA_BYTES:
        check_event_data(env.event_data)
    # ASCII-escaped JSON spells every surrogate code point (and every character beyond U+FFFF, as a
    # pair) as an escape from "\\ud800" to "\\udfff": text without "\\ud" has nothing to look for.
    if "\\ud" in text:
        for name, value in env.to_dict().items():
            check_text_tree(value, name)
    return text


def check_envelope(env: Envelope) -> None:
    """All admission checks of SPEC §4 on one envelope; raises ``ProtocolError`` naming the field."""
    check_shape(env)
    check_event_data(env.event_data)


def to_dict(env: Envelope) -> dict[str, Any]:
    return env.to_dict()


def from_dict(data: dict[str, Any]) -> Envelope:
    return Envelope.from_dict(data)


def to_json(env: Envelope) -> str:
    return env.to_json()


def from_json(text: str | bytes) -> Envelope:
    return Envelope.from_json(text)


__all__ = [
    "ALL_EVENT_TYPES",
    "CHANNEL_EVENTS",
    "EV_CHANNEL_CLOSED",
    "EV_CHANNEL_EXPIRED",
    "EV_CHANNEL_INVITE",
    "EV_CHANNEL_INVITE_ACK",
    "EV_CHANNEL_INVITE_REJECT",
    "EV_CHANNEL_OPENED",
    "EV_CONTEXT_SET",
    "EV_EXPECTATION_VIOLATED",
    "EV_PACKET",
    "EV_TASK_CANCELLED",
    "EV_TASK_CANCEL_REQUEST",
    "EV_TEXT",
    "MAX_EVENT_DATA_BYTES",
    "MAX_EVENT_TYPE_CHARS",
    "PRIORITIES",
    "PRIORITY_RANK",
    "Envelope",
    "Priority",
    "check_envelope",
    "check_event_data",
    "check_shape",
    "check_text",
    "check_text_tree",
    "encode_envelope",
    "find_bad_text",
    "from_dict",
    "from_json",
    "invite_ack",
    "is_channel_event",
    "is_protocol_event",
    "is_task_event",
    "to_dict",
    "to_json",
    "visible_to",
]

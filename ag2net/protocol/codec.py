"""The one JSON codec of the wire: op params, op results and frames are encoded here and nowhere else.

``to_wire`` turns Python values (records, envelopes, enums, read-only sequences) into JSON data: records by
their ``to_dict`` (a ``Passport`` without its auth claim unless ``claims=True``: a client presents its
own claim in params, a hub never hands one out in a result). ``dumps`` writes one message;
``notify_json`` and ``response_json`` write the two the server sends per post without a dict to encode.
Decoding is per op (``ag2net.protocol.ops``): each param and result declares its ``Codec``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from ag2net.envelope import Envelope
from ag2net.errors import ProtocolError

_SCALARS = (str, int, float, bool, type(None))


def to_wire(value: Any, *, claims: bool = False) -> Any:
    """``value`` as JSON-able data (records via ``to_dict``; passports keep their claim only with ``claims``)."""
    if isinstance(value, _SCALARS):
        return value.value if isinstance(value, Enum) else value
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): to_wire(v, claims=claims) for k, v in value.items()}
    if isinstance(value, Enum):
        return value.value
    if not claims:
        public = getattr(value, "public_dict", None)
        if callable(public):
            return public()
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(value, (list, tuple, set, frozenset)) or (
        isinstance(value, Sequence) and not isinstance(value, (bytes, bytearray))
    ):
        return [to_wire(v, claims=claims) for v in value]  # lists, tuples and read-only slices (a WAL page)
    return value


def _json_default(value: Any) -> Any:
    data = to_wire(value)
    if data is value:
        raise TypeError(f"{type(value).__name__} is not JSON serialisable")
    return data


def dumps(data: Any) -> str:
    """One wire message: compact JSON; records, enums and sequences inside it are encoded by ``to_wire``."""
    return json.dumps(data, default=_json_default, separators=(",", ":"))


_encode_str = json.encoder.encode_basestring_ascii


def notify_json(envelope: Envelope, recipient_id: str) -> str:
    """A notify frame's wire text with the envelope's own JSON (``Envelope.to_json``) spliced in: the
    frame ``dumps`` writes for ``{"kind": "notify", "envelope": envelope.to_dict(), "recipient_id": ...}``
    (its envelope's keys in another order), without building that dict and encoding it again."""
    try:
        envelope_text = envelope.to_json()
    except (TypeError, ValueError):  # not plain JSON data (records inside event_data): to_wire says what
        return dumps({"kind": "notify", "envelope": envelope.to_dict(), "recipient_id": recipient_id})
    return (
        '{"kind":"notify","envelope":' + envelope_text + ',"recipient_id":' + _encode_str(recipient_id) + "}"
    )


def response_json(request_id: str, result: Any) -> str:
    """A successful response frame's wire text (no identity secret) around ``result``, JSON data: what
    ``dumps`` writes for the response dict, a string result (an envelope id) encoded in place."""
    encoded = _encode_str(result) if type(result) is str else dumps(result)
    return (
        '{"kind":"response","request_id":'
        + _encode_str(request_id)
        + ',"ok":true,"result":'
        + encoded
        + ',"error_code":"","error_message":""}'
    )


# ---------------------------------------------------------------------------------------------- codecs


class Codec:
    """How one value crosses the wire: ``encode`` to JSON data, ``decode`` back to the typed value.

    ``decode`` accepts the typed value itself too (an in-process caller passes objects through)."""

    name = "json"

    def encode(self, value: Any, *, claims: bool = False) -> Any:
        return to_wire(value, claims=claims)

    def decode(self, data: Any) -> Any:
        return data

    def __repr__(self) -> str:
        return self.name


#: Plain JSON data (strings, numbers, lists, objects): nothing to decode.
JSON = Codec()


@dataclass(frozen=True, slots=True, repr=False)
class Record(Codec):
    """A record class with ``to_dict``/``from_dict`` (``Passport``, ``Envelope``, ``ChannelMetadata``…)."""

    cls: type
    #: What a bad value is told (``{cls}`` and ``{got}`` are filled in); ag2net's historic sentence by default.
    message: str = "expected a {cls} object, got {got}"

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.cls.__name__

    def decode(self, data: Any) -> Any:
        if data is None or isinstance(data, self.cls):
            return data
        if isinstance(data, dict):
            return self.cls.from_dict(data)  # type: ignore[attr-defined]
        raise ProtocolError(self.message.format(cls=self.cls.__name__, got=type(data).__name__))


@dataclass(frozen=True, slots=True, repr=False)
class ListOf(Codec):
    """A list of values of one codec (``None`` stays ``None``)."""

    item: Codec

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"list[{self.item!r}]"

    def decode(self, data: Any) -> Any:
        if data is None:
            return None
        if not isinstance(data, (list, tuple)) and not isinstance(data, Sequence):
            raise ProtocolError(f"expected a list of {self.item!r}, got {type(data).__name__}")
        decode = self.item.decode
        return [decode(v) for v in data]


@dataclass(frozen=True, slots=True, repr=False)
class TupleOf(Codec):
    """A fixed-length array decoded to a tuple, one codec per position (``[seq, envelope]``)."""

    items: tuple[Codec, ...]

    @property
    def name(self) -> str:  # type: ignore[override]
        return "tuple[" + ", ".join(repr(i) for i in self.items) + "]"

    def decode(self, data: Any) -> Any:
        if data is None:
            return None
        if not isinstance(data, (list, tuple)) or len(data) != len(self.items):
            raise ProtocolError(f"expected a {len(self.items)}-item array, got {type(data).__name__}")
        return tuple(c.decode(v) for c, v in zip(self.items, data, strict=True))


@dataclass(frozen=True, slots=True, repr=False)
class Scalar(Codec):
    """A JSON scalar decoded with a conversion (``int`` for a ``seq``, ``bool``/``str`` for a verdict)."""

    convert: Callable[[Any], Any]
    label: str

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def decode(self, data: Any) -> Any:
        return None if data is None else self.convert(data)


INT = Scalar(int, "int")
BOOL = Scalar(bool, "bool")
STR = Scalar(str, "str")

__all__ = [
    "BOOL",
    "INT",
    "JSON",
    "STR",
    "Codec",
    "ListOf",
    "Record",
    "Scalar",
    "TupleOf",
    "dumps",
    "notify_json",
    "response_json",
    "to_wire",
]

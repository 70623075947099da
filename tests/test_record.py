"""The ``Record`` base on its own: what it derives from the fields, the ``wire()`` overrides, both decoders."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from ag2net.errors import ProtocolError
from ag2net.identity import Record as ReExported
from ag2net.record import Record, wire


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


@dataclass(slots=True)
class Inner(Record):
    n: int = 0


@dataclass(slots=True)
class Strict(Record):
    name: str
    colour: Colour = Colour.RED
    inner: Inner = field(default_factory=Inner)
    maybe: Inner | None = None
    inners: list[Inner] = field(default_factory=list)
    by_key: dict[str, Inner] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    renamed: str = field(default="", metadata=wire(key="wire-name"))
    secret: str = field(default="", metadata=wire(omit=True))
    upper: str = field(default="", metadata=wire(encode=str.upper, decode=str.lower))


@dataclass(slots=True)
class Lenient(Record):
    _wire_strict = False
    _wire_label = "lenient thing"

    name: str
    colour: Colour = field(default=Colour.RED, metadata=wire(what="the colour"))
    inner: Inner = field(default_factory=lambda: Inner(7))
    tags: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    count: int | None = None


@dataclass(slots=True)
class Tagged(Record):
    _wire_tag = "type"
    type: ClassVar[str] = "tagged"

    text: str = ""


def test_identity_re_exports_the_base() -> None:
    assert ReExported is Record


def test_to_dict_follows_the_fields_and_their_overrides() -> None:
    rec = Strict(
        "a",
        Colour.BLUE,
        Inner(1),
        Inner(2),
        [Inner(3)],
        {"k": Inner(4)},
        ["t"],
        {"x": [1, {"y": 2}]},
        renamed="r",
        secret="s",
        upper="shout",
    )
    data = rec.to_dict()
    assert data == {
        "name": "a",
        "colour": "blue",
        "inner": {"n": 1},
        "maybe": {"n": 2},
        "inners": [{"n": 3}],
        "by_key": {"k": {"n": 4}},
        "tags": ["t"],
        "extra": {"x": [1, {"y": 2}]},
        "wire-name": "r",
        "upper": "SHOUT",
    }
    assert type(data["colour"]) is str  # the enum's value, not the member
    back = Strict.from_dict(data)
    assert back == Strict(
        "a",
        Colour.BLUE,
        Inner(1),
        Inner(2),
        [Inner(3)],
        {"k": Inner(4)},
        ["t"],
        {"x": [1, {"y": 2}]},
        "r",
        "",
        "shout",
    )
    # nothing in the dict is shared with the record
    data["extra"]["x"][1]["y"] = 99
    data["tags"].append("u")
    data["inners"][0]["n"] = 0
    assert rec.extra == {"x": [1, {"y": 2}]} and rec.tags == ["t"] and rec.inners == [Inner(3)]


def test_to_dict_is_compiled_once_per_class() -> None:
    Inner(1).to_dict()
    from ag2net import record

    fn = record._ENCODERS[Inner]
    assert fn.__qualname__ == "Inner.to_dict"
    Inner(2).to_dict()
    assert record._ENCODERS[Inner] is fn


def test_a_subclass_gets_its_own_encoder() -> None:
    @dataclass(slots=True)
    class More(Inner):
        m: int = 1

    assert Inner(5).to_dict() == {"n": 5}
    assert More(5, 6).to_dict() == {"n": 5, "m": 6}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "a", "wire-name": 5}, "Strict.wire-name must be a string, got 5"),
        ({"name": "a", "renamed": "r"}, "Strict has unknown field 'renamed'; remove it"),
        ({"name": "a", "secret": "s"}, "Strict has unknown field 'secret'; remove it"),
        ({"name": "a", "colour": "green"}, "Strict.colour must be one of 'red', 'blue', got 'green'"),
        ({"name": "a", "inners": [{"n": "x"}]}, "Strict.inners[0].n must be an integer, got 'x'"),
        ({}, "Strict is missing required field 'name'"),
        ("a", "Strict must be a JSON object, got str"),
    ],
)
def test_strict_refusals_name_the_field(data: Any, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        Strict.from_dict(data)
    assert str(info.value) == message


def test_lenient_reads_what_it_can() -> None:
    rec = Lenient.from_dict(
        {
            "name": "a",
            "colour": "blue",
            "tags": None,
            "extra": None,
            "inner": None,
            "count": None,
            "unknown": 1,
        }
    )
    assert rec == Lenient("a", Colour.BLUE, Inner(7), [], {}, None)
    assert Lenient.from_dict({"name": "b"}) == Lenient("b")
    given = {"name": "c", "extra": {"deep": [1]}}
    rec = Lenient.from_dict(given)
    given["extra"]["deep"].append(2)
    assert rec.extra == {"deep": [1]}  # read as a copy


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "a", "colour": "green"}, "the colour must be one of ['red', 'blue'], got 'green'"),
        ({"name": "a", "tags": "t"}, "lenient thing tags must be a list, got str"),
        ({"name": "a", "extra": []}, "lenient thing extra must be a JSON object, got list"),
        ({"colour": "red"}, "lenient thing is missing required field 'name'"),
        ([], "lenient thing must be a JSON object, got list"),
    ],
)
def test_lenient_refusals(data: Any, message: str) -> None:
    with pytest.raises(ProtocolError) as info:
        Lenient.from_dict(data)
    assert str(info.value) == message


def test_a_tag_leads_the_dict_and_is_read_back() -> None:
    assert list(Tagged("x").to_dict().items()) == [("type", "tagged"), ("text", "x")]
    assert Tagged.from_dict(Tagged("x").to_dict()) == Tagged("x")
    assert Tagged.from_dict({"text": "y"}) == Tagged("y")
    with pytest.raises(ProtocolError, match=r"^Tagged\.type must be 'tagged', got 'other'$"):
        Tagged.from_dict({"type": "other"})

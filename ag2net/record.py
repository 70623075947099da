"""``Record``: the base of the dict-shaped records, with ``to_dict``/``from_dict`` derived from the dataclass fields.

A record is a ``@dataclass(slots=True)`` subclass of ``Record``. Its dict form is its fields in declaration
order, each written by its type hint:

* a nested record (anything with ``to_dict``), or a list or dict of them: by its own ``to_dict``;
* an enum: its value (a plain ``str``);
* a list or dict of plain values, and ``Any``: a fresh copy (nothing in the dict is shared with the record);
* a scalar (``str``, ``int``, ``float``, ``bool``, a ``Literal``, ``None``): as it is.

``from_dict`` comes in two kinds, chosen per class by ``_wire_strict``:

* strict (the default: identity and task records): every field's type is checked, unknown keys are refused,
  and a bad value is refused with one ``ProtocolError`` sentence naming its path (``Passport.auth.scheme``);
* lenient (``_wire_strict = False``: the channel records, as ag2 1.2.1 reads them): unknown keys are ignored,
  a missing key takes the field's default (a missing required key is refused), ``null`` where a list, dict
  or nested record belongs reads as empty/the default, enums and nested records are rebuilt, and scalars are
  taken as given. A refusal names the record by ``_wire_label`` (``"channel metadata"``).

Where a class's wire form differs, a field says so with ``field(metadata=wire(...))``: another ``key``,
``omit`` (never written, left at its default when read), ``encode``/``decode`` functions, or ``what`` (how a
lenient refusal names the field). ``_wire_tag`` names a ``ClassVar`` written first (the events' ``"type"``).
A class may still define its own ``to_dict``/``from_dict`` and call ``Record.to_dict(self)`` inside.

``to_dict`` is compiled once per class into one dict literal (as ``dataclasses`` compiles ``__init__``): as
quick as a hand-written method that copies what it hands out (``asdict`` was 10-20 times slower).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self, TypeVar, get_args, get_origin

from ag2net.envelope import check_text, check_text_tree
from ag2net.errors import ProtocolError

R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Wire:
    """How one field differs on the wire (see ``wire``)."""

    key: str | None = None
    omit: bool = False
    encode: Callable[[Any], Any] | None = None
    decode: Callable[[Any], Any] | None = None
    what: str | None = None


_PLAIN = Wire()


def wire(
    *,
    key: str | None = None,
    omit: bool = False,
    encode: Callable[[Any], Any] | None = None,
    decode: Callable[[Any], Any] | None = None,
    what: str | None = None,
) -> dict[str, Any]:
    """Field metadata for ``field(metadata=wire(...))``: the field's dict ``key`` when it is not the field's
    name; ``omit`` to keep it off the wire; ``encode``/``decode`` to write and read it by hand; ``what`` to
    name it in a lenient refusal (``"channel state must be one of ..."``)."""
    return {"wire": Wire(key, omit, encode, decode, what)}


class Record:
    """Base of the dict-shaped records: ``to_dict``/``from_dict`` derived from the dataclass fields."""

    __slots__ = ()

    #: strict: types checked, unknown keys refused (see the module docstring); lenient otherwise
    _wire_strict: ClassVar[bool] = True
    #: how a lenient refusal names the record (default: the class name)
    _wire_label: ClassVar[str] = ""
    #: a ClassVar written first under its own name (``"type"`` writes ``{"type": cls.type, ...}``)
    _wire_tag: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        """The record as a fresh JSON-able dict, fields in declaration order."""
        cls = type(self)
        encode = _ENCODERS.get(cls)
        if encode is None:
            encode = _ENCODERS[cls] = _compile_encoder(cls)
        return encode(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Rebuild the record from its ``to_dict`` form (refusals are ``ProtocolError``)."""
        if cls._wire_strict:
            return record_from_dict(cls, data)
        return _lenient_from_dict(cls, data)


def _wire_of(f: dataclasses.Field[Any]) -> Wire:
    return f.metadata.get("wire", _PLAIN)


# --- type hints ------------------------------------------------------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}
_SCALARS = (str, int, float, bool, type(None))
_ATOMIC = frozenset(_SCALARS)


def _hints(cls: type) -> dict[str, Any]:
    hints = _HINTS.get(cls)
    if hints is None:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = hints
    return hints


def _optional_arm(hint: Any) -> Any:
    """``X`` for ``X | None`` (one other arm), else ``None``."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        arms = get_args(hint)
        real = [a for a in arms if a is not type(None)]
        if len(real) == 1 and len(arms) == 2:
            return real[0]
    return None


def _is_scalar(hint: Any) -> bool:
    if hint in _SCALARS or get_origin(hint) is Literal:
        return True
    if get_origin(hint) in (typing.Union, types.UnionType):
        return all(_is_scalar(a) for a in get_args(hint))
    return False


def _is_record(hint: Any) -> bool:
    """A class that writes itself with ``to_dict`` (or a union of such classes)."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        return all(_is_record(a) for a in get_args(hint))
    return isinstance(hint, type) and callable(getattr(hint, "to_dict", None))


def _is_enum(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.Enum)


# --- to_dict -----------------------------------------------------------------------------------------


def copy_tree(value: Any) -> Any:
    """A fresh copy of a JSON-like tree (dicts, lists and tuples rebuilt, anything else ``deepcopy``-ed)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _ATOMIC else copy_tree(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _ATOMIC else copy_tree(v) for v in value]
    if kind in _ATOMIC:
        return value
    if kind is tuple:
        return tuple(copy_tree(v) for v in value)
    return copy.deepcopy(value)


def _encode_expr(value: str, hint: Any, env: dict[str, Any]) -> str:
    """Python source writing ``value`` (an expression) of type ``hint`` into its dict form."""
    arm = _optional_arm(hint)
    if arm is not None:
        inner = _encode_expr(value, arm, env)
        return value if inner == value else f"(None if {value} is None else {inner})"
    if _is_scalar(hint):
        return value
    if _is_record(hint):
        return f"{value}.to_dict()"
    if _is_enum(hint):
        name = f"_enum{len(env)}"
        env[name] = hint
        # a member writes its value; a plain value set on the record is checked by the enum
        return f"({value}.value if type({value}) is {name} else {name}({value}).value)"
    origin, args = get_origin(hint), get_args(hint)
    if origin is list and args:
        if _is_record(args[0]):
            return f"[_i.to_dict() for _i in {value}]"
        if _is_scalar(args[0]):
            return f"list({value})"
    if origin is dict and len(args) == 2:
        if _is_record(args[1]):
            return f"{{_k: _i.to_dict() for _k, _i in {value}.items()}}"
        if _is_scalar(args[1]):
            return f"dict({value})"
    return f"_copy({value})"


_ENCODERS: dict[type, Callable[[Any], dict[str, Any]]] = {}


def _compile_encoder(cls: type) -> Callable[[Any], dict[str, Any]]:
    hints = _hints(cls)
    env: dict[str, Any] = {"_copy": copy_tree}
    items: list[str] = []
    if cls._wire_tag:  # type: ignore[attr-defined]
        tag = cls._wire_tag  # type: ignore[attr-defined]
        items.append(f"{tag!r}: {getattr(cls, tag)!r}")
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        w = _wire_of(f)
        if w.omit:
            continue
        value = f"self.{f.name}"
        if w.encode is not None:
            env[f"_encode_{f.name}"] = w.encode
            expr = f"_encode_{f.name}({value})"
        else:
            expr = _encode_expr(value, hints[f.name], env)
        items.append(f"{w.key or f.name!r}: {expr}")
    source = "def to_dict(self):\n    return {" + ", ".join(items) + "}\n"
    exec(compile(source, f"<{cls.__qualname__}.to_dict>", "exec"), env)
    fn = env["to_dict"]
    fn.__qualname__ = f"{cls.__qualname__}.to_dict"
    return fn


# --- strict from_dict --------------------------------------------------------------------------------


def _describe(hint: Any) -> str:
    """How a type hint reads in an error message: ``a string``, ``a list of strings or null``."""
    if hint is Any:
        return "any JSON value"
    if hint is type(None):
        return "null"
    if hint is str:
        return "a string"
    if hint is bool:
        return "true or false"
    if hint is int:
        return "an integer"
    if hint is float:
        return "a number"
    origin = get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(hint))
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in get_args(hint))
    if origin is list:
        return "a list"
    if origin is dict:
        return "a JSON object"
    if _is_enum(hint):
        return "one of " + ", ".join(repr(m.value) for m in hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return f"a {hint.__name__} object"
    return getattr(hint, "__name__", str(hint))


def _coerce(value: Any, hint: Any, path: str) -> Any:
    """Check ``value`` against ``hint`` and rebuild nested records; raise ``ProtocolError`` naming ``path``."""
    if hint is Any:
        check_text_tree(value, path)
        return value
    origin = get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = get_args(hint)
        if value is None and type(None) in arms:
            return None
        real = [arm for arm in arms if arm is not type(None)]
        if len(real) == 1:
            # ``X | None``: let X's own, more precise message through
            try:
                return _coerce(value, real[0], path)
            except ProtocolError:
                if isinstance(value, (dict, list)):
                    raise  # the error names the field inside the container
                raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}") from None
        for arm in real:
            try:
                return _coerce(value, arm, path)
            except ProtocolError:
                continue
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    if origin is Literal:
        if isinstance(value, str) and value in get_args(hint):
            return value
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    if origin is list:
        if not isinstance(value, list):
            raise ProtocolError(f"{path} must be a list, got {_type_name(value)}")
        (item_hint,) = get_args(hint) or (Any,)
        return [_coerce(item, item_hint, f"{path}[{i}]") for i, item in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ProtocolError(f"{path} must be a JSON object, got {_type_name(value)}")
        _key_hint, item_hint = get_args(hint) or (str, Any)
        out = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ProtocolError(f"{path} keys must be strings, got {_type_name(key)}")
            check_text(key, f"a key of {path}")
            out[key] = _coerce(item, item_hint, f"{path}.{key}")
        return out
    if hint is type(None):
        if value is None:
            return None
    elif hint is str:
        if isinstance(value, str):
            check_text(value, path)
            return value
    elif hint is bool:
        if isinstance(value, bool):
            return value
    elif hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
    elif _is_enum(hint):
        if isinstance(value, hint):
            return value
        try:
            return hint(value)
        except ValueError:
            pass
        raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")
    elif isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        return record_from_dict(hint, value, path)
    raise ProtocolError(f"{path} must be {_describe(hint)}, got {_show(value)}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _show(value: Any) -> str:
    """A short rendering of a bad value: scalars by value, containers by type."""
    if isinstance(value, (str, int, float)) and not isinstance(value, bool) and len(repr(value)) <= 60:
        return repr(value)
    return _type_name(value) if not isinstance(value, bool) else repr(value).lower()


def record_from_dict(cls: type[R], data: Any, path: str | None = None) -> R:
    """Build the record ``cls`` from its ``to_dict`` form, checking every field's type.

    Unknown and missing fields, wrong types and invalid values raise ``ProtocolError`` naming the
    field by its path (``Passport.auth.scheme``), so wire input is refused with one clear sentence.
    """
    where = path or cls.__name__
    if not isinstance(data, dict):
        raise ProtocolError(f"{where} must be a JSON object, got {_type_name(data)}")
    hints = _hints(cls)
    known: dict[str, dataclasses.Field[Any]] = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        w = _wire_of(f)
        if not w.omit:
            known[w.key or f.name] = f
    tag = getattr(cls, "_wire_tag", "")
    if tag and tag in data:
        if data[tag] != getattr(cls, tag):
            raise ProtocolError(f"{where}.{tag} must be {getattr(cls, tag)!r}, got {_show(data[tag])}")
        known_tag = {tag}
    else:
        known_tag = set()
    unknown = sorted(str(k) for k in data if k not in known and k not in known_tag)
    if unknown:
        raise ProtocolError(f"{where} has unknown field {unknown[0]!r}; remove it")
    kwargs: dict[str, Any] = {}
    for key, f in known.items():
        if key not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ProtocolError(f"{where} is missing required field {key!r}")
            continue
        decode = _wire_of(f).decode
        value = data[key]
        kwargs[f.name] = decode(value) if decode else _coerce(value, hints[f.name], f"{where}.{key}")
    try:
        return cls(**kwargs)
    except ValueError as exc:
        raise ProtocolError(str(exc)) from None


# --- lenient from_dict -------------------------------------------------------------------------------

_Reader = Callable[[Any], Any]
_READERS: dict[type, list[tuple[str, str, bool, _Reader]]] = {}


def _lenient_reader(cls: type, f: dataclasses.Field[Any], hint: Any, key: str) -> _Reader:
    """A function reading one field's (present) value, lenient as the module docstring says."""
    w = _wire_of(f)
    if w.decode is not None:
        return w.decode
    what = w.what or f"{cls._wire_label or cls.__name__} {key}"  # type: ignore[attr-defined]
    arm = _optional_arm(hint)
    hint = arm if arm is not None else hint
    has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
    origin, args = get_origin(hint), get_args(hint)
    item: Any = args[-1] if origin in (list, dict) and args else object
    item_from_dict = getattr(item, "from_dict", None) if isinstance(item, type) else None

    if origin is list or origin is dict:
        container: type = origin
        noun = "a list" if origin is list else "a JSON object"
        rebuild = None if item_from_dict is None else _rebuilder(container, item, item_from_dict)

        def read(v: Any) -> Any:
            if not isinstance(v, container):
                raise ProtocolError(f"{what} must be {noun}, got {type(v).__name__}")
            return copy_tree(v) if rebuild is None else rebuild(v)

    elif _is_enum(hint):
        choices = [m.value for m in hint]

        def read(v: Any) -> Any:
            try:
                return hint(v)
            except ValueError:
                raise ProtocolError(f"{what} must be one of {choices}, got {v!r}") from None

    elif isinstance(hint, type) and callable(getattr(hint, "from_dict", None)):
        record_cls, from_dict = hint, hint.from_dict

        def read(v: Any) -> Any:
            return v if isinstance(v, record_cls) else from_dict(v)

    else:
        return _as_given

    if arm is not None:
        return lambda v: None if v is None else read(v)
    if has_default and origin in (list, dict):
        empty = origin
        return lambda v: empty() if v is None else read(v)
    if has_default and _is_record(hint):
        return lambda v: _default_of(f) if v is None else read(v)
    return read


def _rebuilder(container: type, item: type, from_dict: Callable[[Any], Any]) -> _Reader:
    """A list's or a dict's values read as ``item`` records (those that are not records yet)."""
    if container is list:
        return lambda v: [x if isinstance(x, item) else from_dict(x) for x in v]
    return lambda v: {k: x if isinstance(x, item) else from_dict(x) for k, x in v.items()}


def _as_given(value: Any) -> Any:
    return value


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def _lenient_from_dict(cls: type[R], data: Any) -> R:
    readers = _READERS.get(cls)
    if readers is None:
        hints = _hints(cls)
        readers = []
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            w = _wire_of(f)
            if w.omit:
                continue
            key = w.key or f.name
            required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
            readers.append((f.name, key, required, _lenient_reader(cls, f, hints[f.name], key)))
        _READERS[cls] = readers
    label = cls._wire_label or cls.__name__  # type: ignore[attr-defined]
    if not isinstance(data, dict):
        raise ProtocolError(f"{label} must be a JSON object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for name, key, required, read in readers:
        if key in data:
            kwargs[name] = read(data[key])
        elif required:
            raise ProtocolError(f"{label} is missing required field {key!r}")
    return cls(**kwargs)


__all__ = ["Record", "Wire", "copy_tree", "record_from_dict", "wire"]

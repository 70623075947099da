"""``FieldsDict``: the ``to_dict`` of the debugger's result records (their fields by name, as they are)."""

from __future__ import annotations

from typing import Any, ClassVar


class FieldsDict:
    """Base of a ``@dataclass(slots=True)`` result: ``to_dict`` maps each field's name to its value (the
    value itself, not a copy: these records are read once, by a caller that renders or serialises them)."""

    __slots__ = ()
    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


__all__ = ["FieldsDict"]

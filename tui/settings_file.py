"""The schema of the workbench's settings file (TOML, see ``tui/settings.py``), validated with pydantic.

Imported only when there is a file to read: the defaults (``tui.settings.Settings``) need no pydantic,
about 80 ms of the workbench's start-up. A key the file leaves out is ``None`` here and takes the default
of ``Settings``; TOML has no null, so a file cannot give ``None``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class PriceFields(BaseModel):
    """One model's prices in ``[prices."MODEL"]``, dollars per million tokens."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)


class SettingsFields(BaseModel):
    """The keys a settings file may give, their types and bounds."""

    model_config = ConfigDict(extra="forbid")

    database: Path | None = None
    theme: str | None = None
    tail_limit: int | None = Field(default=None, ge=100, le=5_000_000)
    human_name: str | None = None
    keys: dict[str, str] | None = None
    first_page: int | None = Field(default=None, ge=10, le=100_000)
    prices: dict[str, PriceFields] | None = None

    @field_validator("database", mode="before")
    @classmethod
    def _expand(cls, value: Any) -> Any:
        if isinstance(value, str):
            return Path(os.path.expandvars(value)).expanduser()
        return value

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        for binding_id, keys in (value or {}).items():
            if not keys.strip():
                raise ValueError(f'key for {binding_id!r} is empty; write e.g. "{binding_id}" = "f"')
        return value

    def given(self) -> dict[str, Any]:
        """The keys the file gave and their values (``prices`` as plain dicts)."""
        values = {name: getattr(self, name) for name in self.model_fields_set}
        if self.prices is not None:
            values["prices"] = {model: entry.model_dump() for model, entry in self.prices.items()}
        return values


__all__ = ["PriceFields", "SettingsFields"]

"""Variants: the one thing an evaluation changes, on one axis, for some agents.

``Variant(axis, changes, live)``: ``axis`` is one of ``AXES`` (``view``, ``model``, ``system``,
``attach_plugin``, ``skill``, ``tool``); ``changes`` maps an agent's name to the new value (a view spec
``{"name": …, **params}``, a model, a system prompt, ``True``/``False``, a skill card's text, or
``{tool name or "*": policy}``). ``Variant()`` (no axis) changes nothing: the baseline replay.

``live`` is the model a turn calls when no recorded turn has its request (minimal replay): one model for
every agent, ``{agent name: model}``, or a factory ``live(agent_name, channel_id) -> model`` (a fresh model
per channel keeps runs independent). Without one, such a turn gets no answer and the replay says so.

The rule in windowed or audience-scoped channels follows from matching whole requests: an agent stays on
the recording for every turn whose request (its system prompt, its *projected* history, its input, the tools
offered, its model and parameters) is unchanged. A change to one agent reaches another only through what
the other one's view shows it: an envelope outside its audience, or outside its window, changes nothing
it is asked, so it is answered from the recording.

A skill card reaches another agent only through a tool's result (``peers``), so the ``skill`` axis also
makes every agent's ``peers`` tool ``live``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag2net.debug.replay import Override, ToolPolicy

AXES = ("view", "model", "system", "attach_plugin", "skill", "tool")


@dataclass(slots=True)
class Variant:
    """One change on one axis (see the module docstring)."""

    axis: str | None = None
    changes: dict[str, Any] = field(default_factory=dict)
    live: Any = None
    name: str = ""

    def __post_init__(self) -> None:
        if self.axis is not None and self.axis not in AXES:
            raise ValueError(f"axis {self.axis!r} is not one of {', '.join(AXES)}")
        if self.axis is None and self.changes:
            raise ValueError("a variant with changes needs an axis (one of " + ", ".join(AXES) + ")")
        if not self.name:
            self.name = self.describe()

    def describe(self) -> str:
        """The change in words: ``view critic={"name": "windowed_summary", "recent_n": 2}``."""
        if self.axis is None:
            return "no change"
        parts = []
        for agent, value in self.changes.items():
            if self.axis == "model":
                shown = getattr(value, "name", None) or type(value).__name__
            elif self.axis in ("system", "skill"):
                shown = f"{len(str(value))} characters"
            elif self.axis == "tool":
                shown = ",".join(f"{t}={ToolPolicy.parse(p)}" for t, p in dict(value).items())
            else:
                shown = json.dumps(value, sort_keys=True, ensure_ascii=False)
            parts.append(f"{agent}={shown}")
        return f"{self.axis} " + "; ".join(parts)

    def live_for(self, name: str, channel_id: str) -> Any:
        live = self.live
        if isinstance(live, dict):
            live = live.get(name, live.get("*"))
        if live is not None and callable(live) and not hasattr(live, "complete"):
            live = live(name, channel_id)
        return live

    def overrides(self, agents: dict[str, str], channel_id: str) -> dict[str, Override]:
        """``{agent id: Override}`` for the agents of one channel (``agents``: id → name)."""
        out: dict[str, Override] = {}
        for agent_id, name in agents.items():
            out[agent_id] = Override(live=self.live_for(name, channel_id))
            if self.axis == "skill":
                out[agent_id].tools["peers"] = ToolPolicy("live")
        for agent_id, name in agents.items():
            if name not in self.changes:
                continue
            value, ov = self.changes[name], out[agent_id]
            if self.axis == "view":
                ov.view = value
            elif self.axis == "system":
                ov.system_prompt = str(value)
            elif self.axis == "model":
                ov.model = value(name, channel_id) if _factory(value) else value
            elif self.axis == "attach_plugin":
                ov.attach_plugin = bool(value)
            elif self.axis == "skill":
                ov.skill_md = str(value)
            elif self.axis == "tool":
                ov.tools.update({t: ToolPolicy.parse(p) for t, p in dict(value).items()})
        return out


def _factory(value: Any) -> bool:
    return callable(value) and not hasattr(value, "complete")


LiveFactory = Callable[[str, str], Any]

__all__ = ["AXES", "LiveFactory", "Variant"]

"""The demo network: six scripted agents with skill cards, and a script that exercises every channel type,
``say``, ``delegate``, ``peers``, ``tasks``, a custom event type and a windowed (compacted) conversation.

``await start_demo(hub_or_client)`` registers the agents and starts the traffic; ``await demo.run()`` returns
when the scripted traffic is done. The agents run on ``ScriptedModel`` "brains" that compute each reply from
the call they receive (deterministic, no clock, no randomness); pass ``model_factory`` to run the same
network on a real model. ``run_demo_cli`` is the ``ag2net demo`` command.

The package: ``cast`` (the roles; their skill cards are package data in ``skills/*.md``), ``brains`` (the
scripted replies), ``tools`` (the review workflow's tools), ``network`` (registration and the script),
``transcript`` (the ``ag2net demo`` printout).
"""

from __future__ import annotations

from ag2net.demo.brains import CODER_LINES, CRITIC_LINES, Brains, input_text, messages_before, tool_results
from ag2net.demo.cast import ROLES, Role, skill_card
from ag2net.demo.network import CONVERSATION_TURNS, WRAP_UP_GRACE, DemoNetwork, ModelFactory, start_demo
from ag2net.demo.tools import REVIEW_REQUEST, drafter_tools, reviewer_tools
from ag2net.demo.transcript import preview, run_demo_cli, tool_call_text

__all__ = [
    "CODER_LINES",
    "CONVERSATION_TURNS",
    "CRITIC_LINES",
    "REVIEW_REQUEST",
    "ROLES",
    "WRAP_UP_GRACE",
    "Brains",
    "DemoNetwork",
    "ModelFactory",
    "Role",
    "drafter_tools",
    "input_text",
    "messages_before",
    "preview",
    "reviewer_tools",
    "run_demo_cli",
    "skill_card",
    "start_demo",
    "tool_call_text",
    "tool_results",
]

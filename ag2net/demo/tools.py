"""The review workflow's tools: the drafter hands its draft over (with the demo's custom event type), the
reviewer asks for a change or approves. With ``approvals=True`` the reviewer's ``approve`` waits for a person
(``requires_approval``): publishing the announcement is the demo's "a person must OK this" action."""

from __future__ import annotations

from ag2net.adapters import Finish, Handoff
from ag2net.agent.tool import AgentClientInject, ChannelInject, Tool, build_tool

REVIEW_REQUEST = "demo.review_request"
"""The demo's custom event type: the drafter's ``submit_for_review`` tool posts it to the reviewer."""


def drafter_tools() -> list[Tool]:
    async def submit_for_review(
        note: str, client: AgentClientInject = None, channel: ChannelInject = None
    ) -> Handoff | str:
        """Hand the current draft to the reviewer (also posts a demo.review_request event to them).

        Args:
            note: What the reviewer should know about this draft.
        """
        if client is None or channel is None:
            return "Error: submit_for_review only works inside the review workflow"
        reviewer = await client.hub_client.get_agent("reviewer")
        await channel.send(
            "",
            audience=[reviewer.agent_id],
            event_type=REVIEW_REQUEST,
            event_data={"document": "offline-sync-announcement", "note": note},
        )
        return Handoff(target="reviewer", reason=note)

    return [build_tool(submit_for_review)]


def reviewer_tools(*, approvals: bool = False) -> list[Tool]:
    """The reviewer's ``request_changes`` and ``approve``; ``approvals``: ``approve`` needs a person's OK."""

    def request_changes(reason: str) -> Handoff:
        """Send the draft back to the drafter with one concrete change.

        Args:
            reason: The change you want.
        """
        return Handoff(target="drafter", reason=reason)

    def approve(summary: str) -> Finish:
        """Approve the draft; this ends the review workflow.

        Args:
            summary: One line on why it is good.
        """
        return Finish(summary=summary, reason="approved")

    if approvals:  # only then: the default tools stay exactly as they were
        return [build_tool(request_changes), build_tool(approve, requires_approval=True)]
    return [build_tool(request_changes), build_tool(approve)]


__all__ = ["REVIEW_REQUEST", "drafter_tools", "reviewer_tools"]
